"""The deployment's pieces without processes: draws, one client's local step, certificates, wire."""

import os
import stat

import grpc
import numpy as np
import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from scipy import stats

from pgfl.data.synthetic import client_schedule, regression_data
from pgfl.deploy import wire
from pgfl.deploy.certs import Identity, make_certificates, party_names
from pgfl.deploy.client import _block
from pgfl.deploy.draws import SecretDraws, SlotDraws
from pgfl.deploy.job import Shard
from pgfl.engine import CurveBatch, CurveSettings, Network
from pgfl.engine.step import draw_clients, local_models
from pgfl.problems import LeastSquares
from pgfl.rng import KeyedDraws
from pgfl.validation import ConfigError


# ----------------------------------------------------------------------------- draws
@pytest.mark.parametrize("dist", ["gaussian", "laplace"])
def test_secret_draws_have_the_simulators_distributions(dist):
    # 40,000 draws of one party's generator against the exact law of the keyed draws:
    # N(0, 1), or Laplace of variance 1 (scale 1/√2)
    g = SecretDraws(os.urandom(32), 1, np.arange(100), [3]).noise("server_noise", dist, (400,))
    law = stats.norm() if dist == "gaussian" else stats.laplace(scale=1 / np.sqrt(2))
    assert stats.kstest(g.ravel(), law.cdf).pvalue > 1e-4
    keyed = KeyedDraws(7, 1, np.arange(100), [3]).noise("server_noise", dist, (400,))
    assert stats.ks_2samp(g.ravel(), keyed.ravel()).pvalue > 1e-4


def test_secret_draws_are_a_function_of_the_key_and_cell_only():
    key = os.urandom(32)
    a = SecretDraws(key, 4, [0, 1], [2, 5])
    b = SecretDraws(key, 4, [1], [5])
    assert np.array_equal(a.uniform("s", (6,))[1, 1], b.uniform("s", (6,))[0, 0])
    assert not np.array_equal(
        a.uniform("s", (6,)), SecretDraws(os.urandom(32), 4, [0, 1], [2, 5]).uniform("s", (6,))
    )
    assert not np.array_equal(a.uniform("s", (6,)), a.uniform("t", (6,)))
    at = a.uniform_at("s", np.array([1, 0]), np.array([[5, 0], [2, 3]]))
    whole = a.uniform("s", (6,))
    assert np.array_equal(at[:, 0], whole[:, 1, [5, 0]]) and np.array_equal(
        at[:, 1], whole[:, 0, [2, 3]]
    )


def test_edge_noise_is_shared_by_the_two_ends_only():
    secret = os.urandom(32)
    lo, hi = np.array([0]), np.array([2])
    at0 = SecretDraws(os.urandom(32), 3, [0, 1], [0], {(0, 2): secret})
    at2 = SecretDraws(os.urandom(32), 3, [0, 1], [2], {(0, 2): secret})
    assert np.array_equal(at0.edge_noise("p", "gaussian", lo, hi, 4),
                          at2.edge_noise("p", "gaussian", lo, hi, 4))  # fmt: skip
    with pytest.raises(ConfigError, match="no agreed secret"):
        SecretDraws(os.urandom(32), 3, [0], [1]).edge_noise("p", "gaussian", lo, hi, 4)


def test_keyed_edge_noise_is_the_correlated_schemes_old_formula():
    # the refactor into KeyedDraws.edge_noise draws what PairwiseCancelling drew before
    d = KeyedDraws(5, 2, [0, 1], [0, 1, 2])
    lo, hi = np.array([0, 1, 0]), np.array([1, 2, 2])
    cells, row = np.unique(lo, return_inverse=True)
    old = KeyedDraws(5, 2, [0, 1], cells).noise_at(
        "pairwise_noise", "gaussian", row, hi[:, None] * 3 + np.arange(3)
    )
    assert np.array_equal(d.edge_noise("pairwise_noise", "gaussian", lo, hi, 3), old)


def test_a_client_alone_computes_what_the_engine_computes_for_it():
    # the engine's local phase of a unit against each sampled client's own one-client
    # block with its slot's keyed draws: the same bits (numpy path both)
    rng = np.random.default_rng(0)
    data = regression_data(rng, P=2, K=5, N=(5, 9))
    E, B = client_schedule(rng, 2, 5, epochs=(1, 3), batch=(1, 4))
    net = Network(data, LeastSquares(0.1), np.full((2, 2), 0.5), L=3, epochs=E, batch=B)
    curves = CurveBatch.of([CurveSettings(mu=0.3), CurveSettings(mu=0.1, clip_norm=0.5)], net)
    reps, p = np.arange(3), 1
    block = net.block(p, p + 1)
    draws = KeyedDraws(11, 4, reps, block.units)
    W = rng.normal(size=(2, 3, 1, 2))
    clients = draw_clients(block, draws)
    engine = local_models(W, block, curves, draws, clients)  # [C, R, 1, L, M]
    for k in np.unique(clients):
        r, slot = np.nonzero(clients[:, 0] == k)
        shard = Shard(data.X[p, k], data.y[p, k], int(data.counts[p, k]), int(E[p, k]),
                      int(B[p, k]))  # fmt: skip
        mine = _block_for(net, p, shard)
        sd = SlotDraws(KeyedDraws(11, 4, reps[r], [p]), slot, 3)
        got = local_models(W[:, r], mine, curves, sd, np.zeros((r.size, 1, 1), np.int64))
        assert np.array_equal(got[:, :, 0, 0], engine[:, r, 0, slot])


def _block_for(net, p, shard):
    class J:
        problem, e_max, b_max = net.problem, int(net.epochs.max()), int(net.batch.max())

    return _block(J, p, shard)


# ------------------------------------------------------------------------ certificates
def test_certificates_chain_to_the_ca_and_keys_are_private(tmp_path):
    names = party_names(1, 1, ["dealer"])
    make_certificates(names, tmp_path, hosts={"server-0": ["10.0.0.5", "unit0.example"]})
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.pem").read_bytes())
    for name in names:
        cert = x509.load_pem_x509_certificate((tmp_path / f"{name}.pem").read_bytes())
        ca.public_key().verify(cert.signature, cert.tbs_certificate_bytes,
                               ec.ECDSA(cert.signature_hash_algorithm))  # fmt: skip
        cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
        assert cn == name
        assert stat.S_IMODE(os.stat(tmp_path / f"{name}.key").st_mode) == 0o600
    san = x509.load_pem_x509_certificate((tmp_path / "server-0.pem").read_bytes()).extensions
    alt = san.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "unit0.example" in alt.get_values_for_type(x509.DNSName)
    assert not (tmp_path / "ca.key").exists()


# -------------------------------------------------------------------------------- wire
def test_payloads_round_trip_and_garbage_is_refused():
    arrays = {"m": np.arange(6.0).reshape(2, 3), "k": np.array([1, 2])}
    got, config = wire.decode(wire.encode(arrays, {"round": 4, "ct": [b"ab", b"c"]}))
    assert np.array_equal(got["m"], arrays["m"]) and config == {"round": 4, "ct": [b"ab", b"c"]}
    for junk in (b"\xff\x00garbage", b"\x0a\x05hello"):
        with pytest.raises(wire.Refused):
            wire.decode(junk)
    with pytest.raises(wire.Refused, match="must have shape"):
        wire.array(got, "m", (3, 2))
    with pytest.raises(wire.Refused, match="must be finite"):
        wire.array({"x": np.array([np.nan])}, "x", (1,), finite=True)


def test_a_transcript_reads_back_what_was_recorded(tmp_path):
    t = wire.Transcript(tmp_path / "t.pgflwire")
    t.add("sent", "server-1", "Deliver", b"abc")
    t.add("received", "server-1", "Deliver", b"")
    t.close()
    with open(tmp_path / "t.pgflwire", "ab") as f:
        f.write(b"\x05\x00")  # a record cut short by a killed party
    rows = list(wire.read_transcript(tmp_path / "t.pgflwire"))
    assert [(r.seq, r.direction, r.peer, r.method, r.payload) for r in rows] == [
        (0, "sent", "server-1", "Deliver", b"abc"),
        (1, "received", "server-1", "Deliver", b""),
    ]


@pytest.fixture
def tls_server(tmp_path):
    make_certificates(["server-1", "server-0", "client-0-0"], tmp_path / "ok")
    make_certificates(["server-0"], tmp_path / "other")  # another CA
    me = Identity.load(tmp_path / "ok", "server-1")

    def deliver(request, context):
        wire.authorise(context, lambda n: n == "server-0")
        arrays, _ = wire.decode(request)
        return wire.encode({"sum": np.array([wire.array(arrays, "m", (3,)).sum()])})

    handlers = {"pgfl.Peer": {"Deliver": wire.unary(deliver)}}
    server, port = wire.serve(me, "127.0.0.1:0", handlers, max_bytes=4096)
    yield tmp_path, f"127.0.0.1:{port}"
    server.stop(0)


def _call(folder, name, address, payload, peer="server-1"):
    ch = wire.channel(Identity.load(folder, name), address, peer, max_bytes=1 << 20)
    try:
        return ch.unary_unary("/pgfl.Peer/Deliver")(payload, timeout=10)
    finally:
        ch.close()


def test_the_wire_refuses_without_going_down(tls_server):
    folder, address = tls_server
    good = wire.encode({"m": np.ones(3)})
    refusals = {
        "garbage": (folder / "ok", "server-0", b"\x0a\xffjunk"),
        "wrong shape": (folder / "ok", "server-0", wire.encode({"m": np.ones(4)})),
        "wrong party": (folder / "ok", "client-0-0", good),
        "oversized": (folder / "ok", "server-0", wire.encode({"m": np.ones(2000)})),
        "another CA": (folder / "other", "server-0", good),
    }
    codes = {}
    for what, (certs, name, payload) in refusals.items():
        with pytest.raises(grpc.RpcError) as err:
            _call(certs, name, address, payload)
        codes[what] = err.value.code()
    assert codes["garbage"] == codes["wrong shape"] == grpc.StatusCode.INVALID_ARGUMENT
    assert codes["wrong party"] == grpc.StatusCode.PERMISSION_DENIED
    assert codes["oversized"] == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert codes["another CA"] == grpc.StatusCode.UNAVAILABLE  # the TLS handshake fails
    with pytest.raises(grpc.RpcError) as err:  # no client certificate at all
        creds = grpc.ssl_channel_credentials(
            root_certificates=(folder / "ok" / "ca.pem").read_bytes()
        )
        ch = grpc.secure_channel(address, creds, (("grpc.ssl_target_name_override", "server-1"),))
        ch.unary_unary("/pgfl.Peer/Deliver")(good, timeout=10)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.RpcError):  # the server is not the party the caller meant
        _call(folder / "ok", "server-0", address, good, peer="server-7")
    arrays, _ = wire.decode(_call(folder / "ok", "server-0", address, good))  # still up
    assert arrays["sum"].tolist() == [3.0]

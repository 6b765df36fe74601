"""The secure-aggregation protocol split between its parties (pgfl.privacy.secagg.parties).

Each client and the server are separate objects exchanging only the protocol's messages;
the server's output must equal the single-program protocol's and quantized_mean's, bit
for bit, for every drop stage, and the parties must refuse what the protocol forbids.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgfl.privacy.secagg import SecAggAbort, SecAggConfig, quantized_mean, run_secagg_round
from pgfl.privacy.secagg.config import SecAggProtocolError
from pgfl.privacy.secagg.graph import neighbour_graph, sparse_abort_reason
from pgfl.privacy.secagg.parties import SecAggClient, SecAggServer


def run_split(x, cfg, stage, *, unit=1, round=3, extra=None):
    """One round with each party its own object; stage: 0 never, 1/2/3 drop after that step."""
    L = x.shape[0]
    clients = [SecAggClient(cfg, unit=unit, round=round, client=u, L=L) for u in range(L)]
    server = SecAggServer(cfg, unit=unit, round=round, L=L, extra=0 if extra is None else 2)
    keys = server.keys({u: c.advertise() for u, c in enumerate(clients)})
    shares = {u: c.share(keys) for u, c in enumerate(clients) if stage[u] != 1}
    inbox = server.relay(shares)
    masked = {
        u: c.masked_input(inbox[u], x[u], None if extra is None else extra[u])
        for u, c in enumerate(clients)
        if stage[u] in (0, 3)
    }
    asks = server.requests(masked)
    answers = {v: clients[v].unmask(*asks[v]) for v in asks if stage[v] == 0}
    return server.result(answers)


@settings(max_examples=25, deadline=None)
@given(
    L=st.integers(2, 7),
    M=st.integers(1, 4),
    k=st.sampled_from([20, 32, 64]),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_split_protocol_equals_the_single_program_protocol_bit_for_bit(L, M, k, seed, data):
    rng = np.random.default_rng(seed)
    frac = {20: 6, 32: 16, 64: 30}[k]
    t = data.draw(st.integers(1, L))
    cfg = SecAggConfig(modulus_bits=k, frac_bits=frac, clip=2.0, threshold=t)
    x = rng.normal(scale=1.5, size=(L, M))
    stage = np.array(data.draw(st.lists(st.sampled_from([0, 0, 0, 1, 2, 3]), min_size=L,
                                        max_size=L)))  # fmt: skip
    try:
        ref = run_secagg_round(x, cfg, unit=1, round=3, drop_stage=stage)
    except SecAggAbort:
        with pytest.raises(SecAggAbort):
            run_split(x, cfg, stage)
        return
    mean, _ = run_split(x, cfg, stage)
    assert np.array_equal(mean, ref.mean)
    assert np.array_equal(mean, quantized_mean(x, ref.included, cfg))


@settings(max_examples=10, deadline=None)
@given(L=st.integers(8, 16), seed=st.integers(0, 2**32 - 1), p=st.floats(0.0, 0.3))
def test_split_sparse_graph_equals_quantized_mean_or_aborts(L, seed, p):
    rng = np.random.default_rng(seed)
    cfg = SecAggConfig(frac_bits=20, clip=8.0, neighbours=4, threshold=2, graph_seed=seed)
    x = rng.normal(size=(L, 3))
    dropped = rng.random(L) < p
    stage = np.where(dropped, 2, 0)
    holders = neighbour_graph(L, cfg, unit=1, round=3)
    if sparse_abort_reason(holders, np.ones(L, bool), ~dropped, ~dropped, 2) is not None:
        with pytest.raises(SecAggAbort):
            run_split(x, cfg, stage)
        return
    mean, _ = run_split(x, cfg, stage)
    assert np.array_equal(mean, quantized_mean(x, ~dropped, cfg, unit=1, round=3))


def test_extra_words_are_summed_over_the_survivors_only():
    cfg = SecAggConfig(frac_bits=8, clip=4.0, threshold=2)
    x = np.zeros((4, 2))
    flags = np.array([[1, 0], [1, 1], [0, 1], [1, 1]])
    stage = np.array([0, 2, 0, 0])  # client 1 drops after sharing: its words are not counted
    mean, words = run_split(x, cfg, stage, extra=flags)
    assert words.tolist() == [2, 2] and mean.tolist() == [0.0, 0.0]


def test_a_client_never_reveals_both_shares_of_one_owner():
    cfg = SecAggConfig(frac_bits=8, clip=4.0, threshold=2)
    L = 3
    clients = [SecAggClient(cfg, unit=0, round=0, client=u, L=L) for u in range(L)]
    server = SecAggServer(cfg, unit=0, round=0, L=L)
    keys = server.keys({u: c.advertise() for u, c in enumerate(clients)})
    inbox = server.relay({u: c.share(keys) for u, c in enumerate(clients)})
    for u in range(L):
        clients[u].masked_input(inbox[u], np.zeros(1))
    included = np.ones(L, bool)
    clients[0].unmask(included, np.array([1]), np.array([], int))
    with pytest.raises(SecAggProtocolError, match="both"):  # a key share of the same owner
        clients[0].unmask(np.array([True, False, True]), np.array([], int), np.array([1]))


def test_a_tampered_share_fails_authentication_and_strangers_are_refused():
    cfg = SecAggConfig(frac_bits=8, clip=4.0, threshold=2)
    L = 3
    clients = [SecAggClient(cfg, unit=0, round=0, client=u, L=L) for u in range(L)]
    server = SecAggServer(cfg, unit=0, round=0, L=L)
    keys = server.keys({u: c.advertise() for u, c in enumerate(clients)})
    inbox = server.relay({u: c.share(keys) for u, c in enumerate(clients)})
    bad = dict(inbox[0])
    ct = bytearray(bad[1])
    ct[0] ^= 1
    bad[1] = bytes(ct)
    with pytest.raises(SecAggProtocolError, match="authentication"):
        clients[0].masked_input(bad, np.zeros(1))
    with pytest.raises(SecAggProtocolError, match="unexpected client"):
        SecAggServer(cfg, unit=0, round=0, L=L).keys({5: keys[0]})
    with pytest.raises(SecAggProtocolError, match="malformed keys"):
        SecAggServer(cfg, unit=0, round=0, L=L).keys({0: (b"short", keys[0][1])})


def test_too_few_keys_abort_the_round():
    cfg = SecAggConfig(frac_bits=8, clip=4.0, threshold=3)
    clients = [SecAggClient(cfg, unit=0, round=0, client=u, L=4) for u in range(2)]
    with pytest.raises(SecAggAbort, match="2 clients advertised keys < threshold t=3"):
        SecAggServer(cfg, unit=0, round=0, L=4).keys({u: c.advertise() for u, c in
                                                     enumerate(clients)})  # fmt: skip

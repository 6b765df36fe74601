"""Secure aggregation: primitives, exact cancellation, dropout recovery, rules, leakage."""

from __future__ import annotations

import hashlib
import itertools

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pgfl.privacy import secagg
from pgfl.privacy.secagg import (
    DROP_AFTER_ADVERTISE,
    DROP_AFTER_MASKED_INPUT,
    SecAggAbort,
    SecAggConfig,
    SecAggProtocolError,
    SecureAggregation,
    decode_mean,
    encode,
    hkdf_sha256,
    neighbour_graph,
    quantized_mean,
    run_secagg_round,
    secure_mean,
)
from pgfl.rng import stream
from pgfl.validation import ConfigError


def counter_bytes(seed: bytes):
    """Deterministic byte source, only to replay a transcript in tests."""
    state = {"i": 0}

    def randbytes(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            out += hashlib.sha256(seed + state["i"].to_bytes(8, "little")).digest()
            state["i"] += 1
        return bytes(out[:n])

    return randbytes


# ---------------------------------------------------------------- primitives


# RFC 5869, Appendix A: the three SHA-256 test cases (basic; long inputs; empty salt and info)
RFC5869_SHA256 = [
    (
        "0b" * 22,
        "000102030405060708090a0b0c",
        "f0f1f2f3f4f5f6f7f8f9",
        42,
        "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865",
    ),
    (
        bytes(range(0x00, 0x50)).hex(),
        bytes(range(0x60, 0xB0)).hex(),
        bytes(range(0xB0, 0x100)).hex(),
        82,
        "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c"
        "59045a99cac7827271cb41c65e590e09da3275600c2f09b8367793a9aca3db71"
        "cc30c58179ec3e87c14c01d5c1f3434f1d87",
    ),
    (
        "0b" * 22,
        "",
        "",
        42,
        "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8",
    ),
]


@pytest.mark.parametrize("ikm,salt,info,length,okm", RFC5869_SHA256, ids=["A.1", "A.2", "A.3"])
def test_hkdf_matches_rfc5869_test_vectors(ikm, salt, info, length, okm):
    out = hkdf_sha256(bytes.fromhex(ikm), bytes.fromhex(info), length, salt=bytes.fromhex(salt))
    assert out.hex() == okm


def test_hkdf_default_salt_is_hashlen_zero_bytes():
    # RFC 5869 §2.2: "if not provided, it is set to a string of HashLen zeros"
    ikm, info = b"k" * 32, b"pgfl"
    assert hkdf_sha256(ikm, info) == hkdf_sha256(ikm, info, salt=bytes(32))
    assert hkdf_sha256(ikm, info) != hkdf_sha256(ikm, info, salt=b"\x01")


def test_x25519_agreement_is_symmetric_so_one_evaluation_per_pair_suffices():
    a, b = X25519PrivateKey.generate(), X25519PrivateKey.generate()
    assert a.exchange(b.public_key()) == b.exchange(a.public_key())
    info = secagg.crypto.info(b"pairwise", 3, 7, 1, 2)
    assert hkdf_sha256(a.exchange(b.public_key()), info) == hkdf_sha256(
        b.exchange(a.public_key()), info
    )


def test_info_binds_unit_round_and_pair():
    infos = {
        secagg.crypto.info(b"pairwise", u, r, a, b)
        for u, r, a, b in itertools.product(range(2), range(2), range(3), range(3))
    }
    assert len(infos) == 36
    assert secagg.crypto.info(b"self", 0, 0, 1, 0) != secagg.crypto.info(b"pairwise", 0, 0, 1, 0)


def test_keystream_is_aes_ctr():
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key = bytes(range(32))
    ref = Cipher(algorithms.AES(key), modes.CTR(bytes(16))).encryptor().update(bytes(48))
    assert secagg.crypto.keystream(key, 48) == ref
    assert secagg.crypto.keystream(key, 16) != secagg.crypto.keystream(bytes(32), 16)


# ---------------------------------------------------------------- fixed point


def test_encode_decode_closed_form():
    cfg = SecAggConfig(modulus_bits=8, frac_bits=2, clip=2.0)
    # 0.25 → 1, −0.25 → −1 ≡ 255, 100 clipped to 2 → 8, 0.375 → rint(1.5) = 2 (half to even)
    assert encode(np.array([0.25, -0.25, 100.0, 0.375]), cfg).tolist() == [1, 255, 8, 2]
    # sum of codes 1 + 255 ≡ 0 ; (8 + 8 + 8) = 24 over 3 clients → 2.0
    assert decode_mean(np.array([0, 24]), 3, cfg).tolist() == [0.0, 2.0]
    # centred: 250 ≡ −6 → −6 / (2 · 4) = −0.75
    assert decode_mean(np.array([250]), 2, cfg).tolist() == [-0.75]


def test_wraparound_is_exact_modulo_2k():
    cfg = SecAggConfig(modulus_bits=16, frac_bits=4, clip=8.0)
    x = np.array([[7.9], [-7.9], [3.0]])
    c = encode(x, cfg)
    big = np.uint32(2**16 - 1)
    s = (c[0] + c[1] + c[2] + big * np.uint32(5)) & big  # add a "mask" 5·(2^16−1) ≡ −5
    s = (s + np.uint32(5)) & big
    assert decode_mean(s, 3, cfg)[0] == np.rint(3.0 * 16) / 16 / 3


def test_capacity_and_config_errors():
    cfg = SecAggConfig(modulus_bits=16, frac_bits=8, clip=4.0)  # |q| ≤ 1024, 2^15 = 32768
    assert cfg.max_clients == 31
    cfg.check_clients(31)
    # 32 · 1024 = 2^15 needs 16 bits plus the sign: k ≥ 17
    capacity = r"privacy.secagg_modulus_bits must be an integer in \[1\+bit_length\(training.L"
    with pytest.raises(ConfigError, match=capacity + r".*=17, 64\]; got 16"):
        cfg.check_clients(32)
    with pytest.raises(ConfigError, match=capacity + r".*=17, 64\]; got 16"):
        SecureAggregation(cfg, num_clients=40)
    # one code rint(4 · 2^6) = 256 = 2^8 needs k ≥ 10
    with pytest.raises(ConfigError, match=capacity + r".*=10, 64\]; got 8"):
        SecAggConfig(modulus_bits=8, frac_bits=6, clip=4.0)
    with pytest.raises(ConfigError, match=r"modulus_bits must be an integer in \[8, 64\]"):
        SecAggConfig(modulus_bits=65)
    msg = r"frac_bits must be an integer in \[0, privacy.secagg_modulus_bits-2=14\]; got 15"
    with pytest.raises(ConfigError, match=msg):
        SecAggConfig(modulus_bits=16, frac_bits=15)
    with pytest.raises(ConfigError, match=r"secagg_clip must be a real number in \(2\^-\(priv"):
        SecAggConfig(clip=-1.0)
    with pytest.raises(ConfigError, match=r"=0.25, inf\); got 0.25"):  # rint(0.5) = 0: no code
        SecAggConfig(frac_bits=1, clip=0.25)
    with pytest.raises(ConfigError, match="neighbours must be an even integer in \\[2, inf\\]"):
        SecAggConfig(neighbours=5)
    with pytest.raises(ConfigError, match="threshold must be an integer in \\[1"):
        SecAggConfig(threshold=0)
    msg = r"threshold must be an integer in \[1, neighbourhood size=5\]"
    with pytest.raises(ConfigError, match=msg):
        SecureAggregation(SecAggConfig(threshold=6), num_clients=5)
    with pytest.raises(ConfigError, match=r"threshold .*neighbourhood size=5\]; got 6"):
        SecureAggregation(SecAggConfig(threshold=6, neighbours=4), num_clients=20)


def test_bad_call_inputs():
    agg = SecureAggregation(SecAggConfig(), num_clients=4)
    x = np.zeros((4, 3))
    with pytest.raises(ConfigError, match="num_clients=4 rows"):
        agg.aggregate(np.zeros((5, 3)), unit=0, round=0)
    with pytest.raises(ConfigError, match="2-D array"):
        agg.aggregate(np.zeros(4), unit=0, round=0)
    with pytest.raises(ConfigError, match="dropped must be a bool array of shape \\[L=4\\]"):
        agg.aggregate(x, unit=0, round=0, dropped=np.zeros(3, bool))
    with pytest.raises(ConfigError, match="dropped must be a bool"):
        agg.aggregate(x, unit=0, round=0, dropped=np.zeros(4))
    with pytest.raises(ConfigError, match="finite"):
        agg.aggregate(np.full((4, 3), np.nan), unit=0, round=0)
    with pytest.raises(ConfigError, match="round must be an integer in \\[0"):
        agg.aggregate(x, unit=0, round=-1)
    with pytest.raises(ConfigError, match="survivors must be a bool array"):
        quantized_mean(np.zeros((2, 4, 3)), np.ones((2, 3), bool), SecAggConfig())
    with pytest.raises(ConfigError, match="config must be a SecAggConfig"):
        SecureAggregation({"frac_bits": 3}, num_clients=4)


# ---------------------------------------------------------------- protocol correctness


def plain_mean_bound(x, keep, cfg):
    """|decoded − plain mean of clipped inputs| ≤ 2^-(f+1) + float slack."""
    xc = np.clip(x[keep], -cfg.clip, cfg.clip)
    return xc.mean(axis=0), cfg.quantization_bound + 4e-16 * (1 + np.abs(xc).max()) * keep.sum()


def test_default_threshold_is_a_majority_of_the_neighbourhood():
    assert SecAggConfig().threshold_for(10) == 6
    assert SecAggConfig().threshold_for(1) == 1
    assert SecAggConfig(neighbours=4).threshold_for(20) == 3  # h = k + 1 = 5
    assert SecAggConfig(neighbours=30).threshold_for(20) == 11  # k ≥ L − 1: complete graph


def test_small_modulus_negative_values_wrap_correctly():
    cfg = SecAggConfig(modulus_bits=12, frac_bits=4, clip=8.0, threshold=2)
    x = np.array([[-1.0, -7.5, 0.5], [-2.0, -7.5, -0.25], [-0.5, 7.0, 0.0]])
    for dropped in (np.zeros(3, bool), np.array([False, True, False])):
        res = run_secagg_round(x, cfg, unit=0, round=0, drop_stage=dropped.astype(int) * 2)
        assert res.masked_inputs.max() < 2**12
        keep = ~dropped
        assert np.allclose(res.mean, x[keep].mean(0), atol=cfg.quantization_bound)
        assert np.array_equal(res.mean, quantized_mean(x, keep, cfg))
    assert quantized_mean(x, np.ones(3, bool), cfg).tolist() == [-3.5 / 3, -8.0 / 3, 0.25 / 3]


def test_no_dropout_closed_form_example():
    cfg = SecAggConfig(frac_bits=8, clip=4.0)
    x = np.array([[0.5, -1.0], [1.5, 2.0], [1.0, 0.0]])
    out = SecureAggregation(cfg, num_clients=3).aggregate(x, unit=0, round=0)
    assert out.tolist() == [1.0, 1.0 / 3.0]


def test_every_dropout_pattern_of_five_clients():
    # exhaustive over all 2^5 patterns: ≥ t survivors → within the bound of the plain
    # mean; fewer → SecAggAbort (never a wrong aggregate)
    rng = np.random.default_rng(1)
    cfg = SecAggConfig(frac_bits=12, clip=3.0, threshold=3)
    x = rng.uniform(-4, 4, size=(5, 6))  # some values clipped
    agg = SecureAggregation(cfg, num_clients=5)
    for bits in itertools.product([False, True], repeat=5):
        dropped = np.array(bits)
        keep = ~dropped
        if keep.sum() < 3:
            with pytest.raises(SecAggAbort, match="survivors < threshold t=3"):
                agg.aggregate(x, unit=2, round=9, dropped=dropped)
            assert np.isnan(quantized_mean(x, keep, cfg)).all()
            continue
        got = agg.aggregate(x, unit=2, round=9, dropped=dropped)
        ref, tol = plain_mean_bound(x, keep, cfg)
        assert np.abs(got - ref).max() <= tol
        assert np.array_equal(got, quantized_mean(x, keep, cfg))


@settings(max_examples=25, deadline=None)
@given(
    L=st.integers(2, 8),
    M=st.integers(1, 5),
    k=st.sampled_from([32, 64, 20]),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_property_protocol_equals_quantized_mean_bit_for_bit(L, M, k, seed, data):
    rng = np.random.default_rng(seed)
    frac = {20: 6, 32: 16, 64: 30}[k]
    t = data.draw(st.integers(1, L))
    cfg = SecAggConfig(modulus_bits=k, frac_bits=frac, clip=2.0, threshold=t)
    x = rng.normal(scale=1.5, size=(L, M))
    stage = np.array(
        data.draw(st.lists(st.sampled_from([0, 0, 0, 0, 1, 2, 3]), min_size=L, max_size=L))
    )
    included = (stage == 0) | (stage == DROP_AFTER_MASKED_INPUT)
    t = cfg.threshold_for(L)
    ok = (stage != DROP_AFTER_ADVERTISE).sum() >= t and included.sum() >= t
    ok = ok and (stage == 0).sum() >= t  # responders hold the shares (complete graph)
    if not ok:
        with pytest.raises(SecAggAbort):
            run_secagg_round(x, cfg, unit=1, round=3, drop_stage=stage)
        return
    res = run_secagg_round(x, cfg, unit=1, round=3, drop_stage=stage)
    assert np.array_equal(res.included, included)
    assert np.array_equal(res.mean, quantized_mean(x, included, cfg))
    ref, tol = plain_mean_bound(x, included, cfg)
    assert np.abs(res.mean - ref).max() <= tol


@settings(max_examples=15, deadline=None)
@given(L=st.integers(8, 24), seed=st.integers(0, 2**32 - 1), p=st.floats(0.0, 0.3))
def test_property_sparse_graph_equals_quantized_mean_or_aborts(L, seed, p):
    rng = np.random.default_rng(seed)
    cfg = SecAggConfig(frac_bits=20, clip=8.0, neighbours=4, threshold=2, graph_seed=seed)
    x = rng.normal(size=(L, 3))
    dropped = rng.random(L) < p
    agg = SecureAggregation(cfg, num_clients=L)
    holders = neighbour_graph(L, cfg, unit=0, round=seed % 1000)
    reason = secagg.sparse_abort_reason(holders, np.ones(L, bool), ~dropped, ~dropped, 2)
    if reason is not None:
        with pytest.raises(SecAggAbort):
            agg.aggregate(x, unit=0, round=seed % 1000, dropped=dropped)
        assert np.isnan(quantized_mean(x, ~dropped, cfg, unit=0, round=seed % 1000)).all()
        return
    got = agg.aggregate(x, unit=0, round=seed % 1000, dropped=dropped)
    assert np.array_equal(got, quantized_mean(x, ~dropped, cfg))
    assert np.array_equal(got, quantized_mean(x, ~dropped, cfg, unit=0, round=seed % 1000))


def test_quantized_mean_models_sparse_aborts_given_unit_and_round():
    L, k = 20, 4
    cfg = SecAggConfig(neighbours=k, threshold=1, graph_seed=2)
    perm = stream(2, "secagg-neighbour-graph", 0, 0).permutation(L)
    keep = np.ones((2, L), bool)
    keep[0, perm[[0, 1, 10, 11]]] = False  # disconnects the graph of unit 0, round 0
    keep[1, perm[[0, 1]]] = False
    x = np.ones((2, L, 3))
    assert not np.isnan(quantized_mean(x, keep, cfg)).any()  # only the count rule
    out = quantized_mean(x, keep, cfg, unit=0, round=0)
    assert np.isnan(out[0]).all() and out[1].tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(SecAggAbort, match="batch entry 0"):
        quantized_mean(x, keep, cfg, unit=0, round=0, on_abort="raise")


def test_drop_stages_semantics():
    rng = np.random.default_rng(3)
    cfg = SecAggConfig(frac_bits=20, clip=8.0, threshold=3)
    x = rng.normal(size=(7, 4))
    stage = np.array([0, 1, 2, 3, 0, 0, 3])
    res = run_secagg_round(x, cfg, unit=0, round=0, drop_stage=stage)
    # after masked input (stage 3) still counted; after advertise/share not counted
    assert res.included.tolist() == [True, False, False, True, True, True, True]
    assert np.abs(res.mean - x[res.included].mean(0)).max() <= cfg.quantization_bound + 1e-15
    assert not res.masked_inputs[[1, 2]].any()
    assert set(res.timings) >= {
        "keygen",
        "key_agreement",
        "shamir_share",
        "share_transport",
        "mask_expansion",
        "masking",
        "unmask_reconstruct",
        "unmask_masks",
        "total",
    }


def test_too_few_responders_aborts_even_with_enough_inputs():
    x = np.ones((5, 2))
    cfg = SecAggConfig(threshold=3)
    stage = np.array([0, 0, 3, 3, 3])  # 5 inputs arrive, only 2 answer the unmasking
    with pytest.raises(SecAggAbort, match="responding share holders < threshold t=3") as ei:
        run_secagg_round(x, cfg, unit=4, round=5, drop_stage=stage)
    assert ei.value.unit == 4 and ei.value.round == 5 and ei.value.survivors == 5


def test_quantized_mean_batches_and_raise_mode():
    rng = np.random.default_rng(4)
    cfg = SecAggConfig(frac_bits=10, clip=5.0, threshold=2)
    x = rng.normal(size=(3, 2, 5, 4))
    keep = rng.random((3, 2, 5)) < 0.7
    keep[0, 0] = [True, False, False, False, False]  # below threshold
    out = quantized_mean(x, keep, cfg)
    assert out.shape == (3, 2, 4)
    assert np.isnan(out[0, 0]).all()
    for i, j in itertools.product(range(3), range(2)):
        if keep[i, j].sum() >= 2:
            assert np.array_equal(out[i, j], quantized_mean(x[i, j], keep[i, j], cfg))
    with pytest.raises(SecAggAbort):
        quantized_mean(x, keep, cfg, on_abort="raise")


def test_mean_is_over_survivors_not_all_clients():
    x = np.array([[1.0], [2.0], [3.0], [100.0]])
    got = secure_mean(
        x,
        config=SecAggConfig(threshold=2),
        unit=0,
        round=0,
        dropped=np.array([False, False, False, True]),
    )
    assert got.tolist() == [2.0]


# ---------------------------------------------------------------- security rules


def test_server_never_requests_both_shares_for_one_client():
    vault = secagg.protocol.ShareVault(client=0, t=2)
    vault.b[5] = np.arange(13)
    vault.s[5] = np.arange(13)
    with pytest.raises(SecAggProtocolError, match="both kinds of share for client"):
        secagg.protocol._request_shares(vault, np.array([5]), np.array([5]), n_included=3)
    # the client itself refuses too, also across two separate requests
    with pytest.raises(SecAggProtocolError, match="both the self-mask share and the key share"):
        vault.reveal(np.array([5]), np.array([5]), n_included=3)
    b, s = vault.reveal(np.array([5]), np.array([], int), n_included=3)
    assert list(b) == [5] and not s
    with pytest.raises(SecAggProtocolError, match="client\\(s\\) \\[5\\]"):
        vault.reveal(np.array([], int), np.array([5]), n_included=3)
    with pytest.raises(SecAggProtocolError, match="refusing to unmask"):
        vault.reveal(np.array([5]), np.array([], int), n_included=1)
    # requests must match the announced U3: no key share of a survivor
    fresh = secagg.protocol.ShareVault(client=1, t=2)
    fresh.s[3] = np.arange(13)
    u3 = np.array([True, True, False, True])
    with pytest.raises(SecAggProtocolError, match="inconsistent with the announced"):
        fresh.reveal(np.array([], int), np.array([3]), n_included=3, included=u3)
    with pytest.raises(SecAggProtocolError, match="inconsistent with the announced"):
        fresh.reveal(np.array([2]), np.array([], int), n_included=3, included=u3)
    assert not fresh.revealed_s and not fresh.revealed_b


def test_fresh_keys_and_masks_every_round():
    x = np.ones((4, 8))
    cfg = SecAggConfig(threshold=2)
    r1 = run_secagg_round(x, cfg, unit=0, round=0)
    r2 = run_secagg_round(x, cfg, unit=0, round=0)
    r3 = run_secagg_round(x, cfg, unit=0, round=1)
    keys = [k for r in (r1, r2, r3) for pair in r.public_keys for k in pair]
    assert len(set(keys)) == len(keys) == 24  # no key ever reused
    assert not (r1.masked_inputs == r2.masked_inputs).any()
    assert np.array_equal(r1.mean, r2.mean) and np.array_equal(r1.mean, r3.mean)


def test_deterministic_only_with_the_same_secret_randomness():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(5, 6))
    cfg = SecAggConfig(threshold=3)
    stage = np.array([0, 2, 0, 0, 3])
    a = run_secagg_round(x, cfg, unit=1, round=2, drop_stage=stage, randbytes=counter_bytes(b"s"))
    b = run_secagg_round(x, cfg, unit=1, round=2, drop_stage=stage, randbytes=counter_bytes(b"s"))
    assert a.public_keys == b.public_keys
    assert np.array_equal(a.masked_inputs, b.masked_inputs)
    # the same keys in another round (or unit) give other masks: round/unit in the HKDF info
    c = run_secagg_round(x, cfg, unit=1, round=3, drop_stage=stage, randbytes=counter_bytes(b"s"))
    d = run_secagg_round(x, cfg, unit=2, round=2, drop_stage=stage, randbytes=counter_bytes(b"s"))
    assert c.public_keys == a.public_keys
    inc = a.included
    assert not (c.masked_inputs[inc] == a.masked_inputs[inc]).any()
    assert not (d.masked_inputs[inc] == a.masked_inputs[inc]).any()
    assert np.array_equal(a.mean, c.mean)


def test_neighbour_graph_properties():
    cfg = SecAggConfig(neighbours=6, graph_seed=11)
    g = neighbour_graph(50, cfg, unit=3, round=4)
    assert g.shape == (50, 7) and np.array_equal(g[:, 0], np.arange(50))
    adj = np.zeros((50, 50), bool)
    adj[np.repeat(np.arange(50), 6), g[:, 1:].ravel()] = True
    assert np.array_equal(adj, adj.T) and not adj.diagonal().any()
    assert (adj.sum(1) == 6).all()
    assert np.array_equal(g, neighbour_graph(50, cfg, unit=3, round=4))
    assert not np.array_equal(g, neighbour_graph(50, cfg, unit=3, round=5))
    full = neighbour_graph(5, SecAggConfig(neighbours=4), unit=0, round=0)
    assert sorted(full[2].tolist()) == [0, 1, 2, 3, 4] and full[2, 0] == 2


def test_disconnected_survivor_graph_aborts():
    L, k = 20, 4
    cfg = SecAggConfig(neighbours=k, threshold=1, graph_seed=2)
    perm = stream(2, "secagg-neighbour-graph", 0, 0).permutation(L)
    dropped = np.zeros(L, bool)
    dropped[perm[[0, 1, 10, 11]]] = True  # two gaps of k/2 on the ring → two components
    x = np.ones((L, 2))
    with pytest.raises(SecAggAbort, match="2 components"):
        SecureAggregation(cfg, num_clients=L).aggregate(x, unit=0, round=0, dropped=dropped)
    dropped[perm[[10, 11]]] = False  # one gap: still a connected path
    got = SecureAggregation(cfg, num_clients=L).aggregate(x, unit=0, round=0, dropped=dropped)
    assert got.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- leakage


def test_masked_vector_is_uniform_but_the_code_is_not():
    rng = np.random.default_rng(6)
    M = 20000
    x = np.stack([np.linspace(-1, 1, M), rng.normal(size=M), rng.normal(size=M)])
    res = run_secagg_round(x, SecAggConfig(threshold=2), unit=0, round=0)
    y = res.masked_inputs[0]
    top = (y >> np.uint64(56)).astype(np.int64)  # top byte of each residue
    assert stats.chisquare(np.bincount(top, minlength=256)).pvalue > 1e-3
    assert stats.kstest(y.astype(np.float64) / 2.0**64, "uniform").pvalue > 1e-3
    low = (y & np.uint64(255)).astype(np.int64)
    assert stats.chisquare(np.bincount(low, minlength=256)).pvalue > 1e-3
    code = encode(x[0], SecAggConfig())  # the same tests reject the unmasked code
    assert stats.kstest(code.astype(np.float64) / 2.0**64, "uniform").pvalue < 1e-6
    ctop = (code >> np.uint64(56)).astype(np.int64)
    assert stats.chisquare(np.bincount(ctop, minlength=256)).pvalue < 1e-6


def test_gradient_inversion_succeeds_unmasked_fails_masked():
    # Logistic loss: ∇_w Q = −γ h σ(−γ hᵀw) is a multiple of the feature vector h
    # (textbook eqs. 11.3–11.7): the direction of one client's update reveals h.
    rng = np.random.default_rng(7)
    M, L = 400, 4
    h = rng.normal(size=(L, M))
    gamma = np.array([1.0, -1.0, 1.0, -1.0])
    w = rng.normal(scale=0.01, size=M)
    grads = -(gamma * (1 / (1 + np.exp(gamma * (h @ w)))))[:, None] * h
    cfg = SecAggConfig(frac_bits=24, clip=64.0, threshold=2)
    res = run_secagg_round(grads, cfg, unit=0, round=0)

    def attack(update):
        return update / np.linalg.norm(update)

    def cos(a, b):
        return abs(a @ b) / np.linalg.norm(a) / np.linalg.norm(b)

    # unmasked: the server reads h_0 off the decoded update
    plain = decode_mean(encode(grads[0], cfg), 1, cfg)
    assert cos(attack(plain), h[0]) > 0.999
    # masked: the decoded masked vector is noise, uncorrelated with every client's h
    masked = decode_mean(res.masked_inputs[0], 1, cfg)
    for j in range(L):
        assert cos(attack(masked), h[j]) < 5 / np.sqrt(M)
    # the aggregate is still right
    assert np.abs(res.mean - grads.mean(0)).max() <= cfg.quantization_bound + 1e-15


def test_masked_vector_uniform_for_32_bit_modulus():
    cfg = SecAggConfig(modulus_bits=32, frac_bits=12, clip=100.0, threshold=2)
    x = np.tile(np.linspace(-1, 1, 5000), (3, 1))
    y = run_secagg_round(x, cfg, unit=0, round=0).masked_inputs[1]
    assert y.dtype == np.uint32
    top = (y >> np.uint32(24)).astype(np.int64)
    assert stats.chisquare(np.bincount(top, minlength=256)).pvalue > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("neighbours", [None, 12])
def test_larger_unit_with_dropouts_matches_quantized_mean(neighbours):
    rng = np.random.default_rng(8)
    L, M = 80, 50
    cfg = SecAggConfig(neighbours=neighbours, graph_seed=3)
    x = rng.normal(size=(L, M))
    stage = rng.choice([0, 1, 2, 3], size=L, p=[0.85, 0.03, 0.08, 0.04])
    res = run_secagg_round(x, cfg, unit=7, round=11, drop_stage=stage)
    inc = (stage == 0) | (stage == 3)
    assert np.array_equal(res.mean, quantized_mean(x, inc, cfg))
    assert np.abs(res.mean - x[inc].mean(0)).max() <= cfg.quantization_bound + 1e-14


# ---------------------------------------------------------------- parallel round (worker processes)


def _client_view_masked_inputs(x, cfg, stage, unit, rnd, seed):
    """Slow reference: each surviving client u computes its own y_u from its own secrets.

    Replays the deterministic byte source (c keys, s keys, then the self-mask seeds b_u, as
    the protocol draws them) and evaluates every agreement from u's side, DH(s_u^SK, s_v^PK),
    so each pair is computed twice, once by each end (the protocol computes it once).
    """
    L, M = x.shape
    rb = counter_bytes(seed)
    c_raw = [rb(32) for _ in range(L)]
    s_raw = [rb(32) for _ in range(L)]
    b_seed = [rb(32) for _ in range(L)]
    s_key = [X25519PrivateKey.from_private_bytes(r) for r in s_raw]
    pub = [
        (
            X25519PrivateKey.from_private_bytes(c).public_key().public_bytes_raw(),
            s.public_key().public_bytes_raw(),
        )
        for c, s in zip(c_raw, s_key, strict=True)
    ]
    shared = stage != DROP_AFTER_ADVERTISE
    included = shared & (stage != 2)
    holders = neighbour_graph(L, cfg, unit=unit, round=rnd)
    y = np.zeros((L, M), dtype=cfg.dtype)
    nbytes = M * np.dtype(cfg.dtype).itemsize
    for u in np.flatnonzero(included):
        acc = encode(x[u], cfg)
        key = hkdf_sha256(b_seed[u], secagg.crypto.info(b"self", unit, rnd, int(u), 0))
        acc += np.frombuffer(secagg.crypto.keystream(key, nbytes), dtype=cfg.dtype)
        for v in holders[u, 1:]:
            if not shared[v]:
                continue
            lo, hi = min(u, v), max(u, v)
            dh = s_key[u].exchange(s_key[v].public_key())
            m = np.frombuffer(
                secagg.crypto.keystream(
                    hkdf_sha256(dh, secagg.crypto.info(b"pairwise", unit, rnd, int(lo), int(hi))),
                    nbytes,
                ),
                dtype=cfg.dtype,
            )
            acc = acc + m if v > u else acc - m
        y[u] = secagg.fixed_point.reduce_mod(acc, cfg)
    return y, pub


@pytest.mark.parametrize("neighbours", [None, 6])
def test_parallel_round_gives_the_serial_transcript_and_the_client_view(neighbours):
    rng = np.random.default_rng(21)
    L, M = 24, 7  # 276 pairs (complete): above the size that starts the worker processes
    cfg = SecAggConfig(neighbours=neighbours, graph_seed=2, modulus_bits=40, frac_bits=16)
    x = rng.normal(size=(L, M))
    stage = np.zeros(L, dtype=np.int64)
    stage[[3, 17]] = DROP_AFTER_ADVERTISE
    stage[[5, 11]] = 2  # shared keys, then vanished: pairwise masks recovered from s_u^SK
    stage[[8]] = DROP_AFTER_MASKED_INPUT
    runs = [
        run_secagg_round(
            x, cfg, unit=3, round=9, drop_stage=stage, randbytes=counter_bytes(b"w"), workers=w
        )
        for w in (1, 2, 3)
    ]
    ref_y, ref_pub = _client_view_masked_inputs(x, cfg, stage, 3, 9, b"w")
    for res in runs:
        assert res.public_keys == ref_pub
        assert np.array_equal(res.masked_inputs, ref_y)
        assert np.array_equal(res.sum_residues, runs[0].sum_residues)
        assert np.array_equal(res.mean, quantized_mean(x, res.included, cfg))
        assert res.included.tolist() == ((stage == 0) | (stage == 3)).tolist()


def test_workers_setting_is_validated():
    with pytest.raises(ConfigError, match="workers"):
        run_secagg_round(np.ones((3, 2)), SecAggConfig(threshold=2), unit=0, round=0, workers=0)


def test_a_dead_worker_process_is_replaced_and_the_round_completes():
    import os
    import signal

    x = np.random.default_rng(2).normal(size=(16, 3))  # 120 pairs: the worker processes run
    cfg = SecAggConfig(threshold=9)
    first = run_secagg_round(x, cfg, unit=0, round=0, workers=2)
    pool = secagg.pool.EXECUTORS[2]
    victim = next(iter(pool._processes))
    os.kill(victim, signal.SIGKILL)
    again = run_secagg_round(x, cfg, unit=0, round=1, workers=2)
    assert np.array_equal(first.mean, again.mean)
    assert np.array_equal(again.mean, quantized_mean(x, np.ones(16, dtype=bool), cfg))

"""Shamir t-of-n sharing: closed form, every-subset recovery, joint t−1 secrecy, bad input."""

from __future__ import annotations

import hashlib
import itertools
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pgfl.privacy.secagg import shamir
from pgfl.privacy.secagg.shamir import (
    FIELD_PRIME,
    ConfigError,
    bytes_to_field,
    field_to_bytes,
    lagrange_at_zero,
    reconstruct_bytes,
    reconstruct_field,
    share_bytes,
    share_field,
    uniform_field,
)

P = FIELD_PRIME


def counter_bytes(seed: bytes):
    """Deterministic byte source (SHA-256 in counter mode) for reproducible tests."""
    state = {"i": 0}

    def randbytes(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            out += hashlib.sha256(seed + state["i"].to_bytes(8, "little")).digest()
            state["i"] += 1
        return bytes(out[:n])

    return randbytes


def test_field_is_prime():
    # trial division: p = 2^21 − 9 is prime
    assert P == 2**21 - 9
    assert all(P % d for d in range(2, int(P**0.5) + 1))


def test_closed_form_linear_polynomial():
    # t = 2, a degree-1 polynomial: shares at 1, 2 are s + a, s + 2a; f(0) = 2 f(1) − f(2).
    sec = np.array([[123456]])
    sh = share_field(sec, np.array([1, 2, 3]), t=2, randbytes=counter_bytes(b"a"))[0, :, 0]
    a = (sh[0] - 123456) % P
    assert sh[1] == (123456 + 2 * a) % P and sh[2] == (123456 + 3 * a) % P
    assert (2 * sh[0] - sh[1]) % P == 123456
    lam = lagrange_at_zero(np.array([1, 2]))
    assert lam.tolist() == [2, P - 1]


def test_lagrange_matches_python_reference():
    x = [3, 17, 101, 5000, 2_000_000]
    ref = []
    for j, xj in enumerate(x):
        num = den = 1
        for m, xm in enumerate(x):
            if m != j:
                num = num * xm % P
                den = den * (xm - xj) % P
        ref.append(num * pow(den, -1, P) % P)
    assert lagrange_at_zero(np.array(x)).tolist() == ref


def test_bytes_field_roundtrip():
    for nbytes in (1, 2, 3, 16, 31, 32, 33):
        s = bytes((i * 37 + 11) % 256 for i in range(nbytes))
        assert field_to_bytes(bytes_to_field(s), nbytes) == [s]
    assert shamir.chunks_for(32) == 13


@pytest.mark.parametrize("n,t", [(1, 1), (3, 1), (3, 2), (3, 3), (5, 3), (6, 4), (7, 7)])
def test_every_subset_of_at_least_t_recovers(n, t):
    secret = hashlib.sha256(f"{n},{t}".encode()).digest()
    shares = share_bytes(secret, n=n, t=t)
    for r in range(t, n + 1):
        for subset in itertools.combinations(shares, r):
            assert reconstruct_bytes(list(subset), nbytes=32, t=t) == secret


@pytest.mark.parametrize("n,t", [(3, 2), (5, 3), (6, 4), (7, 7)])
def test_every_subset_of_t_minus_1_fails(n, t):
    secret = hashlib.sha256(f"x{n},{t}".encode()).digest()
    shares = share_bytes(secret, n=n, t=t)
    for subset in itertools.combinations(shares, t - 1):
        with pytest.raises(ConfigError, match="need at least t"):
            reconstruct_bytes(list(subset), nbytes=32, t=t)
        # forcing interpolation with too few points gives garbage, never the secret
        try:
            got = reconstruct_bytes(list(subset), nbytes=32, t=t - 1)
        except ConfigError:
            continue
        assert got != secret


@settings(max_examples=40, deadline=None)
@given(
    secret=st.binary(min_size=1, max_size=40),
    n=st.integers(1, 9),
    data=st.data(),
)
def test_property_any_t_subset_recovers_t_minus_1_does_not(secret, n, data):
    t = data.draw(st.integers(1, n))
    shares = share_bytes(secret, n=n, t=t)
    idx = data.draw(st.permutations(range(n)))
    r = data.draw(st.integers(t, n))
    subset = [shares[i] for i in idx[:r]]
    assert reconstruct_bytes(subset, nbytes=len(secret), t=t) == secret
    if t >= 2:
        x = np.array([[s.x for s in subset[: t - 1]]])
        y = np.stack([s.y for s in subset[: t - 1]])[None]
        chunks = reconstruct_field(x, y)[0]
        # each of the C chunks is uniform in GF(p) given t−1 shares; all equal to the
        # secret's chunks with probability p^-C
        assert not np.array_equal(chunks, bytes_to_field(secret))


def rank_mod_p(rows: np.ndarray) -> int:
    """Rank over GF(p) of an integer matrix, by Gaussian elimination in Python integers."""
    m = [[int(v) % P for v in row] for row in rows]
    rank = 0
    for col in range(len(m[0]) if m else 0):
        pivot = next((r for r in range(rank, len(m)) if m[r][col]), None)
        if pivot is None:
            continue
        m[rank], m[pivot] = m[pivot], m[rank]
        inv = pow(m[rank][col], -1, P)
        m[rank] = [v * inv % P for v in m[rank]]
        for r in range(len(m)):
            if r != rank and m[r][col]:
                f = m[r][col]
                m[r] = [(v - f * w) % P for v, w in zip(m[r], m[rank], strict=True)]
        rank += 1
    return rank


def test_rank_mod_p_closed_form():
    assert rank_mod_p(np.array([[1, 2], [2, 4]])) == 1
    assert rank_mod_p(np.array([[1, 2], [2, 5]])) == 2
    assert rank_mod_p(np.array([[1, 0], [0, P]])) == 1  # P ≡ 0
    assert rank_mod_p(np.array([[2, 1], [1, (P + 1) // 2]])) == 1  # row 2 = row 1 / 2 mod p


# (evaluation points, threshold t, bins per share coordinate): the t − 1 shares of the
# first t − 1 holders; bins^(t−1) cells of about 20000 / bins^(t−1) ≥ 150 sharings each.
JOINT_CASES = [([1, 2, 3], 3, 8), ([4, 9, 11], 3, 8), ([1, 2, 3, 4], 4, 5), ([5, 6, 7, 8, 9], 5, 4)]
SHARINGS = 20000


def secrecy_violations(x: list[int], t: int, bins: int, seed: bytes) -> list[str]:
    """Ways in which t − 1 shares of a sharing at points ``x`` betray the secret.

    Perfect secrecy: for every secret s the t − 1 shares are *jointly* uniform on
    GF(p)^(t−1) (Shamir 1979), so (i) their joint histogram on a bins^(t−1) grid is
    uniform (chi-square), (ii) it does not depend on s (chi-square contingency of two
    secrets), and (iii) the share vectors minus s span GF(p)^(t−1) (rank over GF(p) of a
    few sharings): a scheme whose shares fill only a proper affine subspace fails (iii)
    even when coarse bins cannot see the subspace. Per-coordinate tests see none of this.
    """
    found = []
    hists = []
    for k, secret in enumerate((0, P // 2, P - 1)):
        sec = np.full((SHARINGS, 1), secret)
        src = counter_bytes(seed + bytes([k]))
        sh = share_field(sec, np.array(x), t, randbytes=src)[:, : t - 1, 0]
        cells = np.ravel_multi_index(tuple((sh * bins // P).T), (bins,) * (t - 1))
        hists.append(np.bincount(cells, minlength=bins ** (t - 1)))
        pval = stats.chisquare(hists[-1]).pvalue
        if pval < 1e-6:
            found.append(f"secret {secret}: joint histogram not uniform (p = {pval:.1e})")
        rank = rank_mod_p(sh[: 4 * t] - secret)
        if rank < t - 1:
            found.append(f"secret {secret}: shares span a {rank}-dimensional subspace")
    table = np.stack(hists)
    pval = stats.chi2_contingency(table[:, table.sum(axis=0) > 0]).pvalue
    if pval < 1e-6:
        found.append(f"joint histogram depends on the secret (p = {pval:.1e})")
    return found


@pytest.mark.parametrize("x,t,bins", JOINT_CASES)
def test_t_minus_1_shares_are_jointly_uniform_whatever_the_secret(x, t, bins):
    assert secrecy_violations(x, t, bins, seed=b"joint") == []


@pytest.mark.parametrize("x,t,bins", JOINT_CASES)
def test_joint_check_rejects_a_scheme_whose_second_coefficient_equals_the_first(
    monkeypatch, x, t, bins
):
    # f(z) = s + a z + a z^2 + c_3 z^3 + ...: every share is still uniform on its own, but
    # t − 1 shares lie on a (t − 2)-dimensional affine subspace that moves with s.
    honest = shamir.uniform_field

    def broken(shape, randbytes=os.urandom):
        coeffs = honest(shape, randbytes)
        if len(shape) == 3 and shape[1] >= 2:  # [S, t − 1, C] polynomial coefficients
            coeffs[:, 1] = coeffs[:, 0]
        return coeffs

    monkeypatch.setattr(shamir, "uniform_field", broken)
    assert secrecy_violations(x, t, bins, seed=b"joint") != []


def test_uniform_field_is_in_range_and_uniform():
    u = uniform_field((20000,))
    assert u.min() >= 0 and u.max() < P
    counts = np.bincount(u * 20 // P, minlength=20)
    assert stats.chisquare(counts).pvalue > 1e-4


def test_deterministic_only_with_a_deterministic_source():
    s = b"k" * 32
    a = share_bytes(s, n=4, t=2, randbytes=counter_bytes(b"same"))
    b = share_bytes(s, n=4, t=2, randbytes=counter_bytes(b"same"))
    c = share_bytes(s, n=4, t=2)
    d = share_bytes(s, n=4, t=2)
    assert all(np.array_equal(u.y, v.y) for u, v in zip(a, b, strict=True))
    assert not all(np.array_equal(u.y, v.y) for u, v in zip(c, d, strict=True))


def test_per_secret_points_match_shared_points():
    sec = uniform_field((3, 13))
    src = counter_bytes(b"pts")
    x = np.array([2, 5, 7, 8])
    a = share_field(sec, x, 3, randbytes=src)
    b = share_field(sec, np.tile(x, (3, 1)), 3, randbytes=counter_bytes(b"pts"))
    assert np.array_equal(a, b)
    rec = reconstruct_field(np.tile(x[[0, 2, 3]], (3, 1)), a[:, [0, 2, 3]])
    assert np.array_equal(rec, sec)


def test_bad_inputs():
    with pytest.raises(ConfigError, match=r"t \(threshold\) must be an integer in \[1, n=3\]"):
        share_bytes(b"s", n=3, t=4)
    with pytest.raises(ConfigError, match=r"t \(threshold\) must be an integer in \[1, n=3\]"):
        share_bytes(b"s", n=3, t=0)
    with pytest.raises(ConfigError, match="distinct"):
        share_field(np.array([[1]]), np.array([1, 1]), 1)
    with pytest.raises(ConfigError, match="evaluation points"):
        share_field(np.array([[1]]), np.array([0, 1]), 1)
    with pytest.raises(ConfigError, match="field elements"):
        share_field(np.array([[P]]), np.array([1, 2]), 1)
    with pytest.raises(ConfigError, match="equal length"):
        bytes_to_field([b"ab", b"abc"])
    with pytest.raises(ConfigError, match="does not fit"):
        field_to_bytes(np.array([0, 0xFFFFF]), 3)

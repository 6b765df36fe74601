"""numba kernels of :mod:`pgfl.engine.compiled` (imported only when numba is installed).

Module-level functions so that ``cache=True`` stores the machine code on disk and later
processes load it instead of compiling.
"""

from __future__ import annotations

import numba
import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
_ONE = np.uint64(1)
_SCALE53 = 2.0**-53
#: work items (curve × repetition × unit × client) per parallel task
_CHUNK = 16


@numba.njit(cache=True, inline="always", error_model="numpy")
def keyed_uniform(key, n):
    """Entry ``n`` of a keyed cell, as :func:`pgfl.rng.uniforms_from_keys` computes it."""
    z = key + (np.uint64(n) + _ONE) * _GAMMA
    z ^= z >> _S30
    z *= _M1
    z ^= z >> _S27
    z *= _M2
    z ^= z >> _S31
    return (np.float64(z >> _S11) + 0.5) * _SCALE53


@numba.njit(cache=True, inline="always", error_model="numpy")
def _client_items(lo, hi, g, w, W, Xy, clients, epochs, batch, counts, keys, mu, clip, rho, loss,
                  full, clipping, e_max, b_max, out):  # fmt: skip
    """Work items ``lo..hi-1`` (curve-major over ``[C, R, P, L]``), scratch ``g``, ``w``."""
    C, R, P, M = W.shape
    L = clients.shape[2]
    RPL = R * P * L
    for item in range(lo, hi):
        c = item // RPL
        rest = item - c * RPL
        r = rest // (P * L)
        rest -= r * (P * L)
        p = rest // L
        slot = rest - p * L
        k = clients[r, p, slot]
        E = epochs[p, k]
        n_k = counts[p, k]
        step = mu[c] / E
        B = n_k if full else batch[p, k]
        wt = 1.0 / B
        key = keys[r, p]
        for m in range(M):
            w[m] = W[c, r, p, m]
        for e in range(E):
            for m in range(M):
                g[m] = 0.0
            kept_sum = 0.0
            w2 = 0.0
            if clipping:
                for m in range(M):
                    w2 += w[m] * w[m]
            for b in range(B):
                if full:
                    n = b
                else:
                    n = np.int64(keyed_uniform(key, (slot * e_max + e) * b_max + b) * n_k)
                x = Xy[p, k, n]  # the sample read in place: features then target
                margin = 0.0
                for m in range(M):
                    margin += x[m] * w[m]
                d = x[M]
                if loss == 0:
                    cw = 2.0 * (margin - d)
                else:
                    cw = -d * (0.5 * (1.0 + np.tanh(0.5 * (-d * margin))))
                kept = wt
                if clipping:
                    u2 = 0.0
                    for m in range(M):
                        u2 += x[m] * x[m]
                    norm2 = cw * cw * u2 + (4.0 * rho) * cw * margin + (4.0 * rho * rho) * w2
                    kept = min(1.0, clip[c] / np.sqrt(max(norm2, 1e-300))) * wt
                    kept_sum += kept
                ck = cw * kept
                for m in range(M):
                    g[m] += x[m] * ck
            reg = 2.0 * rho * (kept_sum if clipping else 1.0)
            for m in range(M):
                w[m] -= step * (g[m] + reg * w[m])
        for m in range(M):
            out[c, r, p, slot, m] = w[m]


@numba.njit(cache=True, parallel=True, error_model="numpy")
def local_sgd(W, Xy, clients, epochs, batch, counts, keys, mu, clip, rho, loss, full, clipping,
              e_max, b_max, out):  # fmt: skip
    """Local SGD of every sampled client of every curve and repetition (eq. 3), in place.

    ``W[C, R, P, M]`` start models, ``Xy[P, K, N, M+1]`` samples with the target last,
    ``clients[R, P, L]``, ``epochs``/``batch``/``counts`` ``[P, K]``, ``keys[R, P]`` the
    cells of stream ``batches``; ``loss`` 0 least squares, 1 logistic; result in
    ``out[C, R, P, L, M]``. Chunks of :data:`_CHUNK` clients run in parallel.
    """
    C, R, P, M = W.shape
    items = C * R * P * clients.shape[2]
    n_chunks = (items + _CHUNK - 1) // _CHUNK
    for ch in numba.prange(n_chunks):
        g = np.empty(M)
        w = np.empty(M)
        lo = ch * _CHUNK
        _client_items(lo, min(items, lo + _CHUNK), g, w, W, Xy, clients, epochs, batch, counts,
                      keys, mu, clip, rho, loss, full, clipping, e_max, b_max, out)  # fmt: skip


@numba.njit(cache=True, error_model="numpy")
def local_sgd_serial(W, Xy, clients, epochs, batch, counts, keys, mu, clip, rho, loss, full,
                     clipping, e_max, b_max, out):  # fmt: skip
    """:func:`local_sgd` on the calling thread (small rounds: no thread start-up)."""
    M = W.shape[3]
    items = W.shape[0] * W.shape[1] * W.shape[2] * clients.shape[2]
    _client_items(0, items, np.empty(M), np.empty(M), W, Xy, clients, epochs, batch, counts,
                  keys, mu, clip, rho, loss, full, clipping, e_max, b_max, out)  # fmt: skip


@numba.njit(cache=True, error_model="numpy")
def sample_clients(keys, K, out):
    """Per cell ``keys[R, P]``, the ``L`` clients of smallest keyed uniform, into ``out``.

    Uniform ``k`` is entry ``k`` of the ``sampling`` cell; ``out[R, P, L]`` ascending, as
    :func:`pgfl.engine.step.sample_clients` selects them. One pass over the K uniforms
    keeps the L smallest in a sorted buffer (insertion: O(K + L·#insertions), no sort of
    all K, no allocation per unit), then the L indices are put in ascending order.
    """
    R, P, L = out.shape
    best_u = np.empty(L)
    best_k = np.empty(L, dtype=np.int64)
    for r in range(R):
        for p in range(P):
            key = keys[r, p]
            n = 0
            for k in range(K):
                v = keyed_uniform(key, k)
                if n < L:
                    j = n
                    n += 1
                elif v < best_u[L - 1]:
                    j = L - 1
                else:
                    continue
                while j > 0 and best_u[j - 1] > v:
                    best_u[j] = best_u[j - 1]
                    best_k[j] = best_k[j - 1]
                    j -= 1
                best_u[j] = v
                best_k[j] = k
            for i in range(L):  # ascending client ids (insertion sort of L small)
                c = best_k[i]
                j = i
                while j > 0 and out[r, p, j - 1] > c:
                    out[r, p, j] = out[r, p, j - 1]
                    j -= 1
                out[r, p, j] = c

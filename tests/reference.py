"""Slow, obviously-correct loop implementations of GFL used as references in the tests.

Everything here loops over repetitions, units, clients, epochs and samples one at a time,
following preprint eqs. 3-8 and journal eqs. 54-55 literally. The random draws are taken
from the engine's own :class:`RoundDraws`, so both see the same randomness.
"""

from __future__ import annotations

import numpy as np


def sample_gradient(problem, w, u, d):
    """grad Q(w; u, d) for one sample, written out per problem."""
    margin = float(u @ w)
    if problem.name == "least_squares":
        g = -2.0 * u * (d - margin)
    else:
        g = -d * u / (1.0 + np.exp(d * margin))
    return g + 2.0 * problem.rho * w


def reference_round(W, net, settings, draws):
    """One GFL iteration for every curve and repetition with plain loops.

    W: [C, R, P, M]; settings: list of CurveSettings; draws: RoundDraws.
    """
    data, A = net.data, net.A
    C, R, P, M = W.shape
    new = np.zeros_like(W)
    for c, s in enumerate(settings):
        for r in range(R):
            psi = np.zeros((P, M))
            for p in range(P):
                msgs = []
                for slot, k in enumerate(draws.clients[r, p]):
                    n = data.counts[p, k]
                    E = net.epochs[p, k]
                    w = W[c, r, p].copy()
                    for e in range(E):
                        if net.batch is None:
                            batch = range(n)
                        else:
                            B = net.batch[p, k]
                            batch = [int(draws.batches[e, r, p, slot, b] * n) for b in range(B)]
                        g = np.zeros(M)
                        for j in batch:
                            gj = sample_gradient(net.problem, w, data.X[p, k, j], data.y[p, k, j])
                            if np.isfinite(s.clip_norm):
                                norm = np.linalg.norm(gj)
                                if norm > s.clip_norm:
                                    gj = gj * (s.clip_norm / norm)
                            g += gj
                        w = w - (s.mu / E) * g / len(batch)
                    noise = np.zeros(M)
                    if s.client_noise != "none" and s.client_std > 0:
                        noise = s.client_std * draws.client_noise[s.client_noise][r, p, slot]
                    if s.share == "models":
                        msgs.append(w + noise)
                    else:
                        update = (W[c, r, p] - w) / s.mu
                        msgs.append(update + noise)
                if s.share == "models":
                    psi[p] = np.mean(msgs, axis=0)
                else:
                    psi[p] = W[c, r, p] - s.mu * np.mean(msgs, axis=0)
            # combination (eq. 8): w_p = sum_m a_pm (psi_m + g_pm)
            link = 0
            for p in range(P):
                acc = np.zeros(M)
                for m in range(P):
                    if A[p, m] == 0:
                        continue
                    g_pm = np.zeros(M)
                    if s.server_std > 0 and s.server_noise in ("random", "graph_homomorphic"):
                        g_m = s.server_std * draws.server_noise[s.server_distribution][r, m]
                        if s.server_noise == "random" or m != p:
                            g_pm = g_m
                        else:
                            g_pm = -((1 - A[m, m]) / A[m, m]) * g_m
                    elif s.server_std > 0 and s.server_noise == "random_per_link":
                        g_pm = s.server_std * draws.link_noise[s.server_distribution][r, link]
                    link += 1
                    acc += A[p, m] * (psi[m] + g_pm)
                new[c, r, p] = acc
    return new

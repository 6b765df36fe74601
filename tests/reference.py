"""Slow, obviously-correct loop implementations of GFL used as references in the tests.

Everything here loops over repetitions, units, clients, epochs and samples one at a time,
following preprint eqs. 3-8 and journal eqs. 54-55 literally. The random numbers come
from :class:`pgfl.rng.KeyedDraws` asked for ONE repetition and ONE unit at a time, so the
engine (which draws for whole blocks) is also checked to draw per unit exactly what a
unit alone would draw.
"""

from __future__ import annotations

import numpy as np

from pgfl.engine.network import Links
from pgfl.privacy.mechanisms import RoundContext
from pgfl.rng import KeyedDraws


def sample_gradient(problem, w, u, d):
    """grad Q(w; u, d) for one sample, written out per problem."""
    margin = float(u @ w)
    if problem.name == "least_squares":
        g = -2.0 * u * (d - margin)
    else:
        g = -d * u / (1.0 + np.exp(d * margin))
    return g + 2.0 * problem.rho * w


def unit_draws(seed, iteration, rep, unit):
    return KeyedDraws(seed, iteration, [rep], [unit])


def sampled_clients(draws, K, L):
    """L distinct clients in increasing order: those of the L smallest keys (K <= 1024),
    else Floyd's algorithm on L keyed uniforms."""
    if L == K:
        return list(range(K))
    if K > 1024:
        u = draws.uniform("sampling", (L,))[0, 0]
        chosen = []
        for i in range(L):
            j = K - L + i
            t = min(int(u[i] * (j + 1)), j)
            chosen.append(j if t in chosen else t)
        return sorted(chosen)
    keys = draws.uniform("sampling", (K,))[0, 0]
    return sorted(int(k) for k in np.argsort(keys)[:L])


#: Server schemes written out above; any other is asked for its noise one link at a time.
BUILT_IN = ("none", "random", "graph_homomorphic", "random_per_link")


def link_alone(server, A, m, p, M, draws, iteration):
    """The noise a scheme puts on the one link m → p, the sender alone in its block.

    The scheme's own ``link_noise`` on a block of one unit, one repetition and one link:
    the engine, which asks it for whole blocks of units and links of every curve at once,
    must give each link what it gives that link alone.
    """
    links = Links(np.array([m]), np.array([p]), np.array([A[p, m]]), np.array([A[m, m]]))
    ctx = RoundContext(draws, m, iteration)
    return type(server).link_noise([server], links, M, ctx)[0, 0, 0]


def reference_round(W, net, settings, seed, iteration, reps=None):
    """One GFL iteration for every curve and repetition with plain loops.

    W: [C, R, P, M]; settings: list of CurveSettings (built-in schemes only).
    """
    data, A = net.data, net.A
    C, R, P, M = W.shape
    reps = range(R) if reps is None else reps
    K, L = data.shape[1], net.L
    e_max = int(net.epochs.max())
    b_max = 1 if net.batch is None else int(net.batch.max())
    new = np.zeros_like(W)
    for c, s in enumerate(settings):
        for r, rep in enumerate(reps):
            psi = np.zeros((P, M))
            for p in range(P):
                draws = unit_draws(seed, iteration, rep, p)
                msgs = []
                for slot, k in enumerate(sampled_clients(draws, K, L)):
                    n = data.counts[p, k]
                    E = net.epochs[p, k]
                    w = W[c, r, p].copy()
                    for e in range(E):
                        if net.batch is None:
                            batch = range(n)
                        else:
                            B = net.batch[p, k]
                            u = draws.uniform("batches", (L, e_max, b_max))[0, 0]
                            batch = [int(u[slot, e, b] * n) for b in range(B)]
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
                    client = s.client
                    if client.name in ("laplace", "gaussian") and client.std > 0:
                        z = draws.noise("client_noise", client.name, (L, M))[0, 0, slot]
                        noise = client.std * z
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
            for p in range(P):
                acc = np.zeros(M)
                for m in range(P):
                    if A[p, m] == 0:
                        continue
                    sender = unit_draws(seed, iteration, rep, m)
                    g_pm = np.zeros(M)
                    server = s.server
                    std = getattr(server, "std", 0.0)
                    dist = getattr(server, "distribution", "laplace")
                    if std > 0 and server.name in ("random", "graph_homomorphic"):
                        g_m = std * sender.noise("server_noise", dist, (M,))[0, 0]
                        if server.name == "random" or m != p:
                            g_pm = g_m
                        else:
                            g_pm = -((1 - A[m, m]) / A[m, m]) * g_m
                    elif std > 0 and server.name == "random_per_link":
                        counters = p * M + np.arange(M)
                        z = sender.noise_at("link_noise", dist, np.array([0]), counters[None])
                        g_pm = std * z[0, 0]
                    elif not server.silent and server.name not in BUILT_IN:
                        g_pm = link_alone(server, A, m, p, M, sender, iteration)
                    acc += A[p, m] * (psi[m] + g_pm)
                new[c, r, p] = acc
    return new

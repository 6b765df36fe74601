"""One audit contract, driven by the registry: no mechanism's ε is below what an attack shows.

For every registered mechanism (:mod:`pgfl.privacy.mechanisms`, client and server level)
and every adversary it claims to protect (``protects``), a small configuration calibrates
the mechanism to ε = 2 against that adversary and the audit attacks that adversary's whole
view of one round, built from the arrays the real engine emits
(:meth:`~pgfl.privacy.mechanisms.base.Mechanism.observe`), with the likelihood ratio of its
noise's law estimated from the trials (the joint covariance of correlated Gaussian noise, a
curious server's secrets included; the Laplace density where each column is one draw). Its
lower bound must stay at or below the reported ε, and be more than a tenth of it for at
least one adversary (the attack is not vacuous). A mechanism registered anywhere, a test
file included, is audited without editing this file; one that under-reports its noise is
refuted. Then: the arrays an adversary's ε describes are the engine's (exact slices of its
messages, models and aggregates), and for Gaussian mechanisms the shift-to-noise ratio of
those arrays, measured with their empirical covariance, is the one the accountant charges.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import numpy as np
import pytest

from pgfl.apps.audit import AdversaryViewer, _run_views, audit, canary_networks, emitted
from pgfl.engine.step import gfl_round
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import RandomNoise
from pgfl.privacy.mechanisms.base import SERVER_SIDE

TARGET, TRIALS = 2.0, 10_000
#: Settings a mechanism needs beyond its defaults to be worth auditing (optional: a new
#: mechanism runs with its parameters' defaults).
EXTRA = {
    "pairwise_cancelling": {"pairwise_variance": 1.0},
    "gossip": {"gossip_steps": 2},
    # a stack that clips: S = 0.1 binds (μB = 0.5), so the audit attacks the clipped bound
    **{n: {"message_clip": 0.1} for n in mechanisms.CLIENT if n.startswith("clip+")},
}


def _registered() -> list[tuple[str, str]]:
    """(level, name) of every registered mechanism that claims to protect someone."""
    return [
        (level, name)
        for level, table in (("server", mechanisms.SERVER), ("client", mechanisms.CLIENT))
        for name, cls in table.items()
        if cls.protects
    ]


REGISTERED = _registered()


def contract_config(level: str, name: str, adversary: str | None, **privacy):
    """Ring of 5 units of one client (K = L = 1: no sampling), one full-batch step, T = 1."""
    priv = {f"{level}_noise": name, "target_epsilon": TARGET, "accountants": ["pld"],
            **EXTRA.get(name, {}), **privacy}  # fmt: skip
    if adversary is not None:
        priv["adversary"] = adversary
    if level == "server" and "server_distribution" not in priv:
        dists = mechanisms.SERVER[name].params
        if any(p.name == "privacy.server_distribution" for p in dists):
            priv["server_distribution"] = "laplace" if name == "random" else "gaussian"
    return parse_config({
        "name": "contract", "seed": 1, "iterations": 1, "repetitions": 1,
        "topology": {"kind": "ring", "P": 5},
        "data": {"kind": "regression", "K": 1, "N": 6, "M": 2},
        "training": {"mu": 0.5, "L": 1, "epochs": 1, "batch": "full", "clip_norm": 1.0,
                     "rho": 0.0},
        "privacy": priv, "curves": [{"label": "c"}],
    })  # fmt: skip


def audit_contract(level: str, name: str, **privacy) -> dict:
    """Every adversary ``name`` protects: its audit, calibrated to ε = 2 against it."""
    table = mechanisms.SERVER if level == "server" else mechanisms.CLIENT
    out = {}
    for a in mechanisms.protected(table[name]):
        cfg = contract_config(level, name, a, **privacy)
        out[a] = audit(cfg, "c", adversary=a, trials=TRIALS, accountants=["pld"])
    return out


def check_contract(results: dict) -> None:
    """At or below the reported ε for every adversary; not vacuous for at least one."""
    for a, r in results.items():
        assert r.protected and r.adversary == a, a
        assert r.refuted == () and r.epsilon_lower <= r.epsilon["pld"], (a, r.epsilon_lower)
        assert r.epsilon["pld"] == pytest.approx(TARGET, rel=1e-3), a  # K = L: no credit
    assert max(r.epsilon_lower / r.epsilon["pld"] for r in results.values()) > 0.1


@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
@pytest.mark.parametrize(("level", "name"), REGISTERED, ids=[n for _, n in REGISTERED])
def test_every_registered_mechanism_keeps_every_adversarys_audit_below_its_epsilon(level, name):
    check_contract(audit_contract(level, name))


@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
def test_mechanisms_registered_after_collection_are_audited_too():
    for level, name in _registered():  # at run time: registrations of other test files
        if (level, name) not in REGISTERED:
            check_contract(audit_contract(level, name))


def test_the_audit_of_pairwise_noise_uses_its_true_variance():
    """The old message attack assumed variance σ² for pairwise-cancelling noise; the
    message carries σ² + deg·σ_cor². With the true law the attack on one curious
    neighbour (and its edges' secrets) reaches as far as a plain Gaussian's at equal ε."""
    pair = audit(contract_config("server", "pairwise_cancelling", "neighbour_server"), "c",
                 adversary="neighbour_server", trials=TRIALS, accountants=["pld"])  # fmt: skip
    plain = audit(contract_config("server", "random", "neighbour_server",
                                  server_distribution="gaussian"), "c",
                  adversary="neighbour_server", trials=TRIALS, accountants=["pld"])  # fmt: skip
    assert pair.attack == plain.attack == "likelihood_ratio"
    assert pair.epsilon_lower > 0.75 * plain.epsilon_lower > 0


# --------------------------------------------------------------- a mechanism of this file
@dataclasses.dataclass(frozen=True, kw_only=True)
class OwnGaussian(RandomNoise):
    """A scheme written here: one Gaussian draw per server on every link (no hooks of its own)."""

    distribution: str = "gaussian"
    names: ClassVar[tuple[str, ...]] = ("test_contract_gaussian",)
    protects: ClassVar[tuple[str, ...]] = ("link_eavesdropper", "neighbour_server")


@dataclasses.dataclass(frozen=True, kw_only=True)
class Understated(OwnGaussian):
    """It tells the accountant its noise is ten times what it draws: the contract must catch it."""

    names: ClassVar[tuple[str, ...]] = ("test_contract_understated",)

    def transcript(self, ctx):
        t = super().transcript(ctx)
        return dataclasses.replace(t, std=10.0 * t.std)


@pytest.fixture
def own_mechanisms():
    for cls in (OwnGaussian, Understated):
        mechanisms.register(cls)
    yield
    for cls in (OwnGaussian, Understated):
        mechanisms.unregister(cls)


def test_a_mechanism_defined_in_a_test_file_is_audited_and_a_false_claim_refuted(
    own_mechanisms,
):
    check_contract(audit_contract("server", "test_contract_gaussian"))
    lying = audit_contract("server", "test_contract_understated")
    for a, r in lying.items():
        assert r.refuted == ("pld",), a  # the lower bound exceeds the claimed ε = 2
        assert r.epsilon_lower > 2 * TARGET


# ------------------------------------------- the accountant's arrays are the engine's arrays
def _round(cfg):
    """The audited curve, its network and one round of the engine from w = 0 (noise on)."""
    net = build_network(cfg.curves[0], cfg.seed)
    settings = curve_settings(cfg.curves[0], cfg.iterations, net)
    reps = np.arange(64)
    P, M = net.data.shape[0], net.dim
    out = gfl_round(np.zeros((1, reps.size, P, M)), net, [settings], seed=cfg.seed, iteration=1,
                    reps=reps, keep_local=False)  # fmt: skip
    return net, settings, reps, out


@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
@pytest.mark.parametrize(("level", "name"), REGISTERED, ids=[n for _, n in REGISTERED])
def test_every_adversarys_view_is_made_of_the_arrays_the_engine_emits(level, name):
    cls = (mechanisms.SERVER if level == "server" else mechanisms.CLIENT)[name]
    noise = (cls.calibrates or f"privacy.{level}_variance").removeprefix("privacy.")
    cfg = contract_config(level, name, None, target_epsilon=None, **{noise: 0.25})
    net, settings, reps, out = _round(cfg)
    seen = emitted(out, net, 0)
    wire = net.links.src != net.links.dst
    for a in mechanisms.ADVERSARIES:
        viewer = AdversaryViewer(settings, a)
        view = viewer(out, net, cfg.seed, 1, reps)[0]
        if a in ("own_server", "upload_eavesdropper"):  # L = 1: the upload, and who sent it
            expected = [out.psi[0][:, 0], out.clients[:, 0]]
        elif a == "unit_client":
            expected = [out.W[0][:, 0]]
        elif name == "central":  # uplinks ψ_m in the clear, and the broadcast ψ̄ + z
            expected = [out.W[0][:, 0]]
            if a == "link_eavesdropper":
                expected = [out.messages[0][:, wire].reshape(reps.size, -1), out.W[0][:, 0]]
                uplinks = out.messages[0][:, wire]
                assert np.array_equal(uplinks, out.psi[0][:, net.links.src[wire]])
        elif name == "gossip" and a != "link_eavesdropper":
            expected = [view[:, : view.shape[1]]]  # the K steps, from the engine's y⁰ (below)
        else:
            into = wire.copy()
            if a != "link_eavesdropper":
                members = seen.observers(a)
                into &= np.isin(net.links.dst, members) & ~np.isin(net.links.src, members)
            expected = [out.messages[0][:, into].reshape(reps.size, -1)]
        flat = np.concatenate([np.asarray(e, dtype=float).reshape(reps.size, -1)
                               for e in expected], axis=1)  # fmt: skip
        assert np.array_equal(view[:, : flat.shape[1]], flat), (name, a)
    if name == "gossip":  # the first step a curious server receives is its neighbours' y⁰
        view = AdversaryViewer(settings, "other_server")(out, net, cfg.seed, 1, reps)[0]
        (v,) = seen.observers("other_server")
        near = [w for w in range(net.A.shape[0]) if net.mixing[v, w] != 0 and w != v]
        y0 = [out.messages[0][:, np.flatnonzero(net.links.src == w)[0]] for w in near]
        assert np.array_equal(view[:, : 2 * len(near)], np.concatenate(y0, axis=1))


GAUSSIAN_SERVERS = [
    name for level, name in REGISTERED
    if level == "server" and name in ("random", "central", "pairwise_cancelling",
                                      "topology_optimized")
]  # fmt: skip


@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
@pytest.mark.parametrize("name", GAUSSIAN_SERVERS)
def test_the_accountants_shift_to_noise_ratio_is_that_of_the_emitted_arrays(name):
    """One round of a Gaussian mechanism is a Gaussian release of ratio μ = Δ/σ_eff; the
    engine's view (its covariance Σ estimated from the noise, the canary's shift d of the
    noise-free centres) has μ = √(dᵀΣ⁻¹d). The accountant's μ bounds it for every
    adversary, and equals it where the accountant is exact (no curious server's advantage
    left out). A curious server's own view (the messages sent to it, its secrets) is
    charged as SecLDP charges it, with an eavesdropper on every link besides: more."""
    exact = {"random": ("link_eavesdropper", "neighbour_server"),
             "central": ("other_server", "unit_client"),
             "pairwise_cancelling": ("link_eavesdropper", "neighbour_coalition"),
             "topology_optimized": ("link_eavesdropper",)}[name]  # fmt: skip
    extra = {"server_distribution": "gaussian"} if name == "random" else {}
    cfg = contract_config("server", name, None, target_epsilon=None, server_variance=0.25,
                          **extra)  # fmt: skip
    ccfg = cfg.curves[0]
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, 1, net)
    ctx = settings.release_context(net, 1)
    worlds = canary_networks(net)
    n = 4000
    for a in mechanisms.SERVER[name].protects:
        t = settings.server.views(ctx)[a]
        charged = t.sensitivities[0] / t.std
        viewer = AdversaryViewer(settings, a)
        kw = {"seed": cfg.seed, "reps": np.arange(n), "first": 1, "last": 1}
        v0 = _run_views(worlds[0], [settings, settings.noiseless()], viewer, **kw)[:, :, 0]
        v1 = _run_views(worlds[1], [settings, settings.noiseless()], viewer, **kw)[:, :, 0]
        noise = np.concatenate([v0[0] - v0[1], v1[0] - v1[1]])
        d = (v1[1] - v0[1]).mean(axis=0)
        keep = noise.std(axis=0) > 1e-12
        assert np.allclose(d[~keep], 0.0), a  # no shift in a direction without noise
        cov = np.cov(noise[:, keep], rowvar=False)
        measured = math.sqrt(d[keep] @ np.linalg.pinv(cov, rcond=1e-10) @ d[keep])
        assert measured <= charged * 1.05, (a, measured, charged)
        if a in exact:
            assert measured >= charged * 0.95, (a, measured, charged)
    assert SERVER_SIDE  # the servers' side is what these mechanisms account


# ------------------------------------------- sampling credit only where the view hides it
@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
@pytest.mark.parametrize("client", ["none", "gaussian", "secure_aggregation"])
def test_an_adversary_credited_with_client_sampling_has_a_view_that_hides_the_sample(
    client, monkeypatch
):
    """Every client of a unit holds the same data, so which L of the K a unit samples
    changes no aggregate: an adversary whose view still changes with the sample learns it
    (it sees who uploads, or secure aggregation's key list), and must get no amplification
    by client sampling; one whose view does not may (``subsampled``)."""
    from pgfl.data.federated import FederatedData
    from pgfl.engine import Network
    from pgfl.privacy.accounting.releases import Transcript
    from pgfl.privacy.mechanisms.base import subsampled

    priv = {"client_noise": client, "server_noise": "random", "server_variance": 0.25,
            "server_distribution": "gaussian", "accountants": ["pld"]}  # fmt: skip
    if client == "gaussian":
        priv["client_variance"] = 0.25
    cfg = parse_config({
        "name": "sample", "seed": 2, "iterations": 1,
        "topology": {"kind": "ring", "P": 4},
        "data": {"kind": "regression", "K": 4, "N": 5, "M": 2},
        "training": {"mu": 0.5, "L": 2, "epochs": 1, "batch": "full", "clip_norm": 1.0},
        "privacy": priv,
    })  # fmt: skip
    net = build_network(cfg.curves[0], cfg.seed)
    d = net.data
    same = lambda a: np.repeat(a[:, :1], a.shape[1], axis=1)  # noqa: E731
    data = FederatedData(same(d.X), same(d.y), same(d.counts), d.X_test, d.y_test, d.w_star)
    net = Network(data, net.problem, net.A, net.L, net.epochs, net.batch, mixing=net.mixing)
    settings = curve_settings(cfg.curves[0], 1, net)
    ctx = settings.release_context(net, 1)
    reps = np.arange(8)
    views = {}
    for sample in ([0, 1], [2, 3]):
        fixed = lambda block, draws, s=sample: np.broadcast_to(  # noqa: E731
            np.array(s), (draws.reps.size, block.size, len(s))
        ).copy()
        monkeypatch.setattr("pgfl.engine.step.draw_clients", fixed)
        monkeypatch.setattr("pgfl.engine.compiled.draw_clients", fixed)
        out = gfl_round(np.zeros((1, reps.size, 4, net.dim)), net, [settings], seed=cfg.seed,
                        iteration=1, reps=reps, keep_local=False)  # fmt: skip
        assert np.array_equal(out.clients[0, 0], sample)
        for a in mechanisms.ADVERSARIES:
            views.setdefault(a, []).append(AdversaryViewer(settings, a)(out, net, 2, 1, reps))
    dummy = Transcript((1.0,), std=1.0, distribution="gaussian")
    for a, (first, second) in views.items():
        credited = subsampled(dummy, ctx, a).credited
        hides = np.array_equal(first, second)
        assert hides == credited, (a, client, hides, credited)

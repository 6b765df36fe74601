"""Empirical privacy audit: attack the released objects of the real engine, bound ε from below.

An accountant's ε is a claim; an audit tests it. Two neighbouring data sets D₀, D₁
(replace-one: they differ in the data of one client, the *canary*) are run through the
real engine (:func:`pgfl.engine.step.gfl_round`, vectorized over the repetition axis:
one repetition is one trial), and a distinguisher decides from one party's view whether
it saw D₀ or D₁. For any (ε, δ)-DP release and any test, the true and false positive
rates satisfy ``TPR ≤ e^ε FPR + δ`` and ``1 − FPR ≤ e^ε (1 − TPR) + δ`` (Kairouz, Oh &
Viswanath, "The Composition Theorem for Differential Privacy", arXiv:1311.0776, Thm 2.1),
so with one-sided Clopper–Pearson bounds on the two rates (Bonferroni: the pair holds
at the stated confidence)

    ε ≥ ε_lower = max( ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi), 0 )

(Jagielski, Ullman & Oprea, "Auditing Differentially Private Machine Learning",
arXiv:2006.07709, §3; Nasr et al., "Adversary Instantiation", arXiv:2101.04535).
**An audit gives a lower bound, never a proof**: ε_lower > ε of an accountant refutes
that accountant (a bug); ε_lower ≪ ε proves nothing.

Canary (worst case for the mechanism): client 0 of unit 0 holds only copies of one sample
``(u, d) = (v, ±D)`` with D = 10⁹, so that every per-sample gradient ``2u(uᵀw − d)`` is
clipped to norm B in direction ∓v in every epoch and mini-batch: its local model moves by
±μBv and the two runs' aggregates differ by exactly 2μBv/n (n clients averaged), the
replace-one sensitivity of the papers (Rizk, Vlaski & Sayed, "Privatized Graph Federated
Learning", arXiv:2203.07105, eq. 52). ``v`` is the ℓ1-maximising diagonal (1, …, 1)/√M,
the worst direction on the ℓ2 ball for per-coordinate Laplace noise (it reaches the ℓ1
sensitivity √M·Δ₂); for Gaussian noise every direction is equivalent. (The construction
saturates least squares; for the logistic loss the clipped gradient saturates on the
first step only, and the audit is weaker but still a valid lower bound.)

Neighbouring relation: a lower bound for one relation says nothing about an ε for another,
so the canary has the relation of the ε it is compared with, the curve's
``privacy.neighbours`` (:func:`canary_records`). ``"client"``: the canary above, a whole
client replaced. ``"record"``: one record replaced, record 0 of client 0 of unit 0, the
client keeping ``r`` records (the canary and r − 1 of its own, the same in both worlds):
for one full-batch step per round the accountant divides the client's 2μB by the fewest
samples of a client, r = N_min, and the canary record moves the step by exactly 2μB/(n r);
otherwise (mini-batches, several local steps) the accountant charges a record as a whole
client, r = 1, and every mini-batch (drawn with replacement) is the canary record alone.
The fewest samples, hence the ε, are those of the configured data. (A client canary
compared with a record-level ε — what this module did first — "refuted" sound accountants.)

Attack:

* ``round = 1``, ``rounds = 1`` (the default: one release): the adversary knows everything
  but the noise and the bit (all other data, the seed of sampling and mini-batches — the
  accountants' sensitivities hold for every such realization), so it computes both
  noise-free centres c₀, c₁ of the view per trial (the same engine with the noise off:
  common random numbers). Where the view carries one noise of known density (a message
  under server noise, a client's message under client noise) the statistic is the
  likelihood ratio, ``(‖y − c₀‖₁ − ‖y − c₁‖₁)/b`` for Laplace(b) and
  ``(‖y − c₀‖² − ‖y − c₁‖²)/(2σ²)`` for Gaussian — the Neyman–Pearson optimal test of
  the pair; elsewhere (a server's model, the centroid: sums of noises) the projection
  ``⟨y − c₀, c₁ − c₀⟩``.
* later rounds (``round > 1``) or several rounds (``rounds = T``): the earlier noise is
  secret, so no per-trial centre is public; the statistic is the projection of the
  concatenated views on the difference of the two worlds' mean views, estimated on the
  first half of the trials. It is a weak, generic attack: for large T the bound falls far
  below the composed ε.

The threshold is chosen on the first half of each world's trials and evaluated on the
second half (no selection bias). The accountant's ε compared with is ε(i) after the last
audited round i (what pgfl reports for the curve at iteration i): every view of rounds
≤ i is a function of the releases 1..i, so ε(i) bounds it by post-processing. It is the
protected level's own transcript (adversary :data:`ADVERSARY`, ``"link"``: what
``summary.json`` reports as ``epsilon``, not ``epsilon_by_adversary``): the attack knows
the client sample, so amplification by client sampling is not credited, and a curve
calibrated with ``privacy.adversary`` is compared with its link's ε, not its target.

>>> e = epsilon_lower_bound(9000, 10000, 3000, 10000, 0.95, 0.0)  # TPR 0.9, FPR 0.3
>>> 1.85 < e < math.log(0.7 / 0.1)   # the (1 − FPR)/(1 − TPR) form, less the CI margin
True
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.engine import CurveSettings, Network
from pgfl.engine.step import gfl_round
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.privacy.accounting import epsilon_curve
from pgfl.privacy.accounting.mechanisms import tradeoff_curve
from pgfl.privacy.mechanisms import NEIGHBOURS, ClientNoise, GraphHomomorphic, NoServerNoise
from pgfl.validation import ConfigError, check_choice, check_int, check_real, did_you_mean

__all__ = [
    "VIEWS",
    "AuditResult",
    "audit",
    "canary_networks",
    "canary_records",
    "clopper_pearson",
    "coupled_message_gap",
    "epsilon_lower_bound",
    "tradeoff_curve",
]

#: The party views an audit can attack.
VIEWS = ("message", "server-model", "centroid", "client-update")
#: The canary's target magnitude D: |uᵀw| ≪ D, so its gradient is always clipped.
CANARY_TARGET = 1e9
#: Trials (repetitions) run by one engine call; bounds memory.
CHUNK = 8192
LOWER_BOUND_NOTE = (
    "an audit gives a lower bound on epsilon, not a proof of privacy: a lower bound above an "
    "accountant's epsilon refutes that accountant; one far below it proves nothing"
)
COMPOSITION_NOTE = (
    "several rounds are attacked with a generic projection test: the lower bound will fall far "
    "below the composed epsilon as T grows (the accountant composes worst cases the attack "
    "cannot realise in one shot)"
)

#: The adversary whose ε an audit compares with: the privatized link's own transcript
#: (``summary.json``'s ``epsilon``, not ``epsilon_by_adversary``), whose observer knows which
#: clients were sampled, as the audit's attacker does (no amplification by client sampling).
ADVERSARY = "link"

LATER_ROUND_NOTE = (
    "a later round is attacked with a generic projection test (the earlier rounds' noise is "
    "not known to the attack): the lower bound will fall below that round's epsilon"
)


# --------------------------------------------------------------------------- statistics
def clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    """One-sided Clopper–Pearson bounds of a binomial proportion: each holds w.p. ≥ 1 − α.

    Returns ``(lower, upper)``: P(p < lower) ≤ α and P(p > upper) ≤ α.

    >>> lo, hi = clopper_pearson(0, 100, 0.05)
    >>> lo, round(hi, 4)               # 1 − 0.05^(1/100)
    (0.0, 0.0295)
    """
    from scipy.stats import beta

    k, n = int(k), int(n)
    lo = 0.0 if k == 0 else float(beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1.0 - alpha, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(
    tp: int, n1: int, fp: int, n0: int, confidence: float, delta: float
) -> float:
    """ε lower bound from a test's counts: tp of n1 positives, fp of n0 negatives flagged.

    ``max(ln((TPR_lo − δ)/FPR_hi), ln((TNR_lo − δ)/FNR_hi), 0)`` with one-sided
    Clopper–Pearson bounds at level (1 − confidence)/2 each (Bonferroni), so that the
    bound holds with probability ≥ ``confidence``.

    >>> epsilon_lower_bound(50, 100, 50, 100, 0.95, 0.0)     # a coin: nothing learned
    0.0
    """
    alpha = (1.0 - confidence) / 2.0
    tpr_lo = clopper_pearson(tp, n1, alpha)[0]
    fpr_hi = clopper_pearson(fp, n0, alpha)[1]
    tnr_lo = 1.0 - fpr_hi
    fnr_hi = clopper_pearson(n1 - tp, n1, alpha)[1]
    best = 0.0
    for num, den in ((tpr_lo - delta, fpr_hi), (tnr_lo - delta, fnr_hi)):
        if num > 0 and den > 0:
            best = max(best, math.log(num / den))
    return best


def _rates(s0: np.ndarray, s1: np.ndarray, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts flagged (score ≥ t) among negatives ``s0`` and positives ``s1``, per threshold."""
    fp = s0.size - np.searchsorted(np.sort(s0), thresholds, side="left")
    tp = s1.size - np.searchsorted(np.sort(s1), thresholds, side="left")
    return tp, fp


def _choose_threshold(s0: np.ndarray, s1: np.ndarray, confidence: float, delta: float) -> float:
    """The threshold of the best lower bound on the selection half (≤ 512 candidates)."""
    both = np.unique(np.concatenate([s0, s1]))
    if both.size > 512:
        both = np.unique(np.quantile(both, np.linspace(0, 1, 512), method="nearest"))
    tp, fp = _rates(s0, s1, both)
    n0, n1 = s0.size, s1.size
    # cheap screen with the plug-in estimate, then the exact bound on the best few
    with np.errstate(divide="ignore", invalid="ignore"):
        plug = np.maximum(
            np.log((tp / n1 + 1.0 / n1) / (fp / n0 + 1.0 / n0)),
            np.log(((n0 - fp) / n0 + 1.0 / n0) / ((n1 - tp) / n1 + 1.0 / n1)),
        )
    order = np.argsort(-plug)[:24]
    bounds = [epsilon_lower_bound(tp[j], n1, fp[j], n0, confidence, delta) for j in order]
    return float(both[order[int(np.argmax(bounds))]])


# ------------------------------------------------------------------------------ canary
def canary_direction(dim: int) -> np.ndarray:
    """The ℓ1-maximising unit direction (1, …, 1)/√M (worst for per-coordinate Laplace).

    >>> canary_direction(4).tolist()
    [0.5, 0.5, 0.5, 0.5]
    """
    return np.full(dim, 1.0 / math.sqrt(dim))


def canary_networks(
    net: Network, direction: np.ndarray | None = None, *, records: int | None = None
) -> tuple[Network, Network]:
    """Two neighbouring networks: the canary ``(v, ±D)`` in client 0 of unit 0.

    ``records = None`` (client-level neighbours): client 0 of unit 0 holds only copies of
    the canary. ``records = r`` (record-level neighbours): the canary is one record, record
    0 of client 0 of unit 0, which keeps ``r`` records (``1 ≤ r ≤`` its count): the canary
    and its own records 1..r−1, the same in both worlds. In ``D₀`` the canary's target is
    +D (its clipped gradients push the model along +v), in ``D₁`` −D (along −v); every
    other client, the graph and the schedule are the same. ``direction`` (unit vector,
    default :func:`canary_direction`) is ``v``.

    >>> from pgfl.problems import LeastSquares
    >>> data = FederatedData(np.zeros((1, 2, 3, 2)), np.zeros((1, 2, 3)), np.full((1, 2), 3))
    >>> net = Network(data, LeastSquares(0.0), np.ones((1, 1)), L=2,
    ...               epochs=np.ones((1, 2), dtype=int), batch=None)
    >>> n0, n1 = canary_networks(net)
    >>> n0.data.y[0, 0, 0], n1.data.y[0, 0, 0], n0.data.y[0, 1].tolist()
    (np.float64(1000000000.0), np.float64(-1000000000.0), [0.0, 0.0, 0.0])
    >>> n0, n1 = canary_networks(net, records=2)       # one record of two
    >>> n1.data.y[0, 0].tolist(), n1.data.counts.tolist()
    ([-1000000000.0, 0.0, 0.0], [[2, 3]])
    """
    data = net.data
    M = data.shape[-1]
    v = canary_direction(M) if direction is None else np.asarray(direction, dtype=float)
    if v.shape != (M,) or not math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-9):
        raise ConfigError(f"canary direction must be a unit vector of length M={M}")
    own = int(data.counts[0, 0])
    if records is not None and not 1 <= records <= own:
        raise ConfigError(
            f"a record-level canary keeps 1 to {own} records of client 0 of unit 0; got {records}"
        )
    out = []
    for sign in (1.0, -1.0):
        X, y, counts = data.X.copy(), data.y.copy(), data.counts
        if records is None:  # the whole client: every row the canary
            X[0, 0] = v
            y[0, 0] = sign * CANARY_TARGET
        else:  # one record: row 0 the canary, rows 1..records-1 the client's own
            X[0, 0, 0] = v
            y[0, 0, 0] = sign * CANARY_TARGET
            counts = counts.copy()
            counts[0, 0] = records
        new = FederatedData(X, y, counts, data.X_test, data.y_test, data.w_star)
        out.append(
            Network(new, net.problem, net.A, net.L, net.epochs, net.batch, mixing=net.mixing)
        )
    return out[0], out[1]


def canary_records(settings: CurveSettings, net: Network, last: int) -> int | None:
    """The records the canary client keeps: ``None`` for client-level neighbours.

    Record-level neighbours: the records the accountant credits a client's step with
    (:meth:`~pgfl.engine.CurveSettings.release_context`'s ``records``: the fewest samples
    of a client for one full-batch step per round, else 1). The canary client then holds
    exactly that many, so the canary record moves its step by the 1/r the accountant
    divides by; with ``r = 1`` (mini-batches or several local steps, where the accountant
    charges a record as a whole client) every mini-batch is the canary record alone. The
    fewest samples, hence the accountant's ε, are those of the configured data.
    """
    if settings.neighbours != "record":
        return None
    return settings.release_context(net, last).records


def _compared_note(
    settings: CurveSettings, world: Network, ccfg: CurveConfig, level: str | None
) -> str:
    """One line: which neighbouring relation and adversary the ε compared with is for, and why."""
    what = "compared with" if level is not None else "that would be compared with (none here)"
    if settings.neighbours == "client":
        canary = "the canary is client 0 of unit 0, every record of it the canary sample"
    else:
        r = int(world.data.counts[0, 0])
        canary = (
            f"the canary is one of the {r} records of client 0 of unit 0, one full-batch step "
            f"per round: it moves the client's step by 1/{r}, as the accountant credits"
            if r > 1
            else "the canary is the only record of client 0 of unit 0: with mini-batches or "
            "several local steps the accountant charges a record as a whole client, and a "
            "one-record client realises that charge"
        )
    line = (
        f"epsilon {what}: {settings.neighbours}-level neighbours "
        f"({NEIGHBOURS[settings.neighbours]}; privacy.neighbours), the same relation as the "
        f"canary's: {canary}; adversary {ADVERSARY!r}: the privatized link's own transcript, "
        "whose observer knows which clients were sampled, as the attack does (no amplification "
        "by client sampling)"
    )
    if ccfg.privacy.adversary is not None:
        line += (
            f"; privacy.adversary = {ccfg.privacy.adversary!r} only calibrated the noise (its "
            "epsilon, with amplification where it holds, is not what this audit tests)"
        )
    return line


# ------------------------------------------------------------------------------- views
def _neighbour(net: Network) -> int:
    """The first server p ≠ 0 that receives unit 0's messages (a_p0 > 0)."""
    rx = np.flatnonzero(net.A[:, 0] != 0)
    rx = rx[rx != 0]
    if rx.size == 0:
        raise ConfigError(
            "privacy audit of a message or server model needs a neighbour of unit 0 "
            "(topology with P >= 2 and a_p0 > 0 for some p != 0)"
        )
    return int(rx[0])


def _view_of(view: str, net: Network, out: Any) -> np.ndarray:
    """One party's view of a round, ``[C, R, M]``."""
    if view == "message":
        p = _neighbour(net)
        link = int(np.flatnonzero((net.links.src == 0) & (net.links.dst == p))[0])
        return out.messages[:, :, link]
    if view == "server-model":
        return out.W[:, :, _neighbour(net)]
    if view == "centroid":
        return out.W.mean(axis=2)
    # client-update with L = 1: the unit's aggregate is the client's message
    return out.psi[:, :, 0]


def _run_views(
    net: Network,
    curves: Sequence[CurveSettings],
    view: str,
    *,
    seed: int,
    reps: np.ndarray,
    first: int,
    last: int,
) -> np.ndarray:
    """Views of rounds ``first..last`` from w = 0, ``[C, R, T, M]`` (trials in chunks)."""
    C, M, P = len(curves), net.dim, net.data.shape[0]
    out = np.empty((C, reps.size, last - first + 1, M))
    for lo in range(0, reps.size, CHUNK):
        r = reps[lo : lo + CHUNK]
        W = np.zeros((C, r.size, P, M))
        for i in range(1, last + 1):
            res = gfl_round(W, net, curves, seed=seed, iteration=i, reps=r, keep_local=False)
            W = res.W
            if i >= first:
                out[:, lo : lo + r.size, i - first] = _view_of(view, net, res)
    return out


# ------------------------------------------------------------------------------ result
@dataclasses.dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes (the first nine are the ``--json`` contract):
        view, trials (per world), tpr, fpr (evaluation half), epsilon_lower, confidence,
        epsilon (accountant → ε(i) of the audited rounds; empty if not protected),
        ratio (accountant → epsilon_lower/ε), protected.
        curve, round, rounds, delta, attack ("likelihood_ratio" | "projection"), success
        (balanced accuracy of the test), level (``server``/``client``/None), scope,
        refuted (accountants whose ε the bound exceeds), notes, roc (FPR, TPR arrays of
        the evaluation half), neighbours (the neighbouring relation of the canary and of
        the ε compared: ``privacy.neighbours``), adversary (whose ε: :data:`ADVERSARY`).

    """

    view: str
    trials: int
    tpr: float
    fpr: float
    epsilon_lower: float
    confidence: float
    epsilon: dict[str, float]
    ratio: dict[str, float]
    protected: bool
    curve: str = ""
    round: int = 1
    rounds: int = 1
    delta: float = 1e-5
    attack: str = "likelihood_ratio"
    success: float = 0.5
    level: str | None = None
    scope: str = ""
    refuted: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    roc: tuple[np.ndarray, np.ndarray] = dataclasses.field(default=(np.zeros(0), np.zeros(0)))
    neighbours: str = "client"
    adversary: str = ADVERSARY

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: the contract's keys first, then the details."""
        return {
            "view": self.view,
            "trials": self.trials,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "epsilon_lower": self.epsilon_lower,
            "confidence": self.confidence,
            "epsilon": dict(self.epsilon),
            "ratio": dict(self.ratio),
            "protected": self.protected,
            "curve": self.curve,
            "round": self.round,
            "rounds": self.rounds,
            "delta": self.delta,
            "attack": self.attack,
            "success": self.success,
            "level": self.level,
            "neighbours": self.neighbours,
            "adversary": self.adversary,
            "scope": self.scope,
            "refuted": list(self.refuted),
            "notes": list(self.notes),
        }


def _level(view: str, settings: CurveSettings) -> str | None:
    """The privatized link whose ε covers ``view`` (None: the view is not protected)."""
    client = isinstance(settings.client, ClientNoise) and settings.client.std > 0
    server = not isinstance(settings.server, NoServerNoise) and settings.server.std > 0
    if view == "client-update":
        return "client" if client else None
    if view == "centroid" and isinstance(settings.server, GraphHomomorphic):
        server = False  # graph-homomorphic noise cancels in the centroid (eq. 46)
    if server:
        return "server"
    return "client" if client else None


def _density(view: str, settings: CurveSettings) -> tuple[str, float] | None:
    """(distribution, per-coordinate std) of the one noise in a view, if it has a density."""
    client = settings.client
    if view == "message" and not isinstance(settings.server, NoServerNoise):
        if isinstance(client, ClientNoise) and client.std > 0:
            return None  # server noise + averaged client noise: no closed form used
        return settings.server.distribution, settings.server.std
    if view == "client-update" and isinstance(client, ClientNoise) and client.std > 0:
        scale = settings.mu if settings.share == "updates" else 1.0
        return client.distribution, client.std * scale
    return None


def _llr(y: np.ndarray, c0: np.ndarray, c1: np.ndarray, density: tuple[str, float]) -> np.ndarray:
    dist, std = density
    if dist == "laplace":
        b = std / math.sqrt(2.0)
        return (np.abs(y - c0).sum(-1) - np.abs(y - c1).sum(-1)) / b
    return (((y - c0) ** 2).sum(-1) - ((y - c1) ** 2).sum(-1)) / (2.0 * std * std)


def _audited_curve(
    cfg: ExperimentConfig, curve: str, view: str, trials: int, round: int, rounds: int,
    confidence: float,
) -> tuple[CurveConfig, int, int, int, float]:  # fmt: skip
    """The curve and the checked arguments of :func:`audit` (one line per bad one)."""
    check_choice("--view", view, VIEWS)
    n = check_int("--trials", trials, lo=200)
    first = check_int("--round", round, lo=1)
    T = check_int("--rounds", rounds, lo=1)
    conf = check_real("--confidence", confidence, lo=0.0, hi=1.0, lo_open=True, hi_open=True)
    labels = [c.label for c in cfg.curves]
    if curve not in labels:
        raise ConfigError(
            f"--curve must be one of {', '.join(labels)}; got {curve!r}"
            + did_you_mean(curve, labels)
        )
    ccfg = cfg.curves[labels.index(curve)]
    if ccfg.model.kind != "none":
        raise ConfigError(
            f"pgfl privacy audit supports the built-in losses (least squares, logistic), whose "
            f"canary is a sample with target ±{CANARY_TARGET:g}; curve {curve!r} has "
            f"model.kind = {ccfg.model.kind!r}"
        )
    if first + T - 1 > cfg.iterations:
        raise ConfigError(
            f"--round + --rounds - 1 must be at most iterations = {cfg.iterations}; got "
            f"--round {first} --rounds {T}"
        )
    return ccfg, n, first, T, conf


def _scores(
    worlds: tuple[Network, Network], settings: CurveSettings, view: str, seed: int, n: int,
    first: int, T: int,
) -> tuple[np.ndarray, np.ndarray, tuple[str, float] | None]:  # fmt: skip
    """The attack's statistic on each world's trials, and the density it used (if any)."""
    net0, net1 = worlds
    reps = np.arange(2 * n)
    if first == 1 and T == 1:  # one release: the noise-free centres are public
        density = _density(view, settings)
        kw = {"seed": seed, "reps": reps, "first": 1, "last": 1}
        clean = settings.noiseless()
        v0 = _run_views(net0, [settings, clean], view, **kw)[:, :, 0]
        v1 = _run_views(net1, [settings, clean], view, **kw)[:, :, 0]
        c0, c1 = v0[1], v1[1]
        y0, y1 = v0[0, :n], v1[0, n:]  # disjoint repetitions: independent noise per world
        if density is not None:
            s0, s1 = _llr(y0, c0[:n], c1[:n], density), _llr(y1, c0[n:], c1[n:], density)
        else:
            d = c1 - c0
            s0 = ((y0 - c0[:n]) * d[:n]).sum(-1)
            s1 = ((y1 - c0[n:]) * d[n:]).sum(-1)
        # the Laplace likelihood ratio has atoms at ±ε: round away float noise
        return np.round(s0, 9), np.round(s1, 9), density
    kw = {"seed": seed, "first": first, "last": first + T - 1}
    y0 = _run_views(net0, [settings], view, reps=reps[:n], **kw)[0].reshape(n, -1)
    y1 = _run_views(net1, [settings], view, reps=reps[n:], **kw)[0].reshape(n, -1)
    h = n // 2
    direction = y1[:h].mean(0) - y0[:h].mean(0)
    mid = 0.5 * (y1[:h].mean(0) + y0[:h].mean(0))
    return (y0 - mid) @ direction, (y1 - mid) @ direction, None


def _claimed(
    settings: CurveSettings, net: Network, view: str, last: int, delta: float, accs: list[str]
) -> tuple[str | None, dict[str, float], str]:
    """The protected level of ``view``, each accountant's ε(last) for it, and its scope.

    The ε is the level's own transcript (what ``summary.json`` reports as ``epsilon``; no
    amplification by client sampling) on ``net``, the audited data (a canary world: the
    fewest samples of a client as configured), for the curve's neighbouring relation.
    """
    level = _level(view, settings)
    if level is None:
        return None, {}, f"the {view} view carries no differentially private noise in this scheme"
    ctx = settings.release_context(net, last)
    transcript = getattr(settings, level).transcript(ctx)
    if ctx.clip is None:
        eps = {a: math.inf for a in accs}
        return level, eps, "no gradient bound (training.clip_norm): epsilon = inf"
    curve_eps = epsilon_curve(transcript, delta=delta, accountants=accs)
    return level, {k: float(v[last - 1]) for k, v in curve_eps.items()}, transcript.scope


def audit(
    cfg: ExperimentConfig,
    curve: str,
    view: str,
    *,
    trials: int = 20000,
    round: int = 1,
    rounds: int = 1,
    confidence: float = 0.95,
    accountants: Sequence[str] | None = None,
) -> AuditResult:
    """Audit one curve of an experiment config: attack ``view`` over ``trials`` trials per world.

    Args:
        cfg: an :class:`pgfl.experiments.config.ExperimentConfig` (a preset or TOML file).
        curve: the label of the curve to audit (its noise as run, ``target_epsilon``
            calibrated over the config's iterations).
        view: one of :data:`VIEWS`: ``message`` (unit 0 → its first neighbour p, what p or
            an eavesdropper sees), ``server-model`` (p's model after the round),
            ``centroid`` (the network average of the models), ``client-update`` (what the
            canary client sends its server; needs ``training.L = 1``).
        trials: trials per world (≥ 200; half select the threshold, half evaluate).
        round: the first audited iteration i ≥ 1.
        rounds: consecutive rounds T ≥ 1 observed together.
        confidence: of the Clopper–Pearson bounds, in (0, 1).
        accountants: compare with these (default: the curve's ``privacy.accountants``).

    Returns:
        An :class:`AuditResult`; ``result.refuted`` names the accountants whose ε the lower
        bound exceeds (a bug, the CLI exits 3).

    """
    ccfg, n, first, T, conf = _audited_curve(cfg, curve, view, trials, round, rounds, confidence)
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, cfg.iterations, net)
    if view == "client-update" and net.L != 1:
        raise ConfigError(
            f"--view client-update needs training.L = 1 (the server's aggregate is then the "
            f"client's message); got L={net.L}"
        )
    last, delta = first + T - 1, ccfg.privacy.delta
    worlds = canary_networks(net, records=canary_records(settings, net, last))
    s0, s1, density = _scores(worlds, settings, view, cfg.seed, n, first, T)
    h = n // 2
    t = _choose_threshold(s0[:h], s1[:h], conf, delta)
    e0, e1 = s0[h:], s1[h:]
    tp, fp = int((e1 >= t).sum()), int((e0 >= t).sum())
    n0, n1 = e0.size, e1.size
    lower = epsilon_lower_bound(tp, n1, fp, n0, conf, delta)
    grid = np.unique(np.quantile(np.concatenate([e0, e1]), np.linspace(0, 1, 201)))
    tps, fps = _rates(e0, e1, grid)
    roc = (np.concatenate([fps / n0, [0.0]]), np.concatenate([tps / n1, [0.0]]))
    tpr, fpr = tp / n1, fp / n0
    accs = list(accountants) if accountants else list(ccfg.privacy.accountants)
    # the ε of the data sets actually run (the canary's world: the same counts' minimum)
    level, eps, scope = _claimed(settings, worlds[0], view, last, delta, accs)
    ratio = {k: (lower / v if v > 0 else math.inf) for k, v in eps.items()}
    refuted = tuple(k for k, v in eps.items() if lower > v)
    return AuditResult(
        view=view, trials=n, tpr=tpr, fpr=fpr, epsilon_lower=lower, confidence=conf,
        epsilon=eps, ratio=ratio, protected=level is not None, curve=curve, round=first,
        rounds=T, delta=delta,
        attack="likelihood_ratio" if density is not None else "projection",
        success=0.5 * (tpr + 1.0 - fpr), level=level, scope=scope, refuted=refuted,
        notes=_notes(T, first, refuted, _compared_note(settings, worlds[0], ccfg, level)),
        roc=roc, neighbours=settings.neighbours, adversary=ADVERSARY,
    )  # fmt: skip


def _notes(T: int, first: int, refuted: tuple[str, ...], compared: str) -> tuple[str, ...]:
    notes = [LOWER_BOUND_NOTE, compared]
    if T > 1:
        notes.append(COMPOSITION_NOTE)
    elif first > 1:
        notes.append(LATER_ROUND_NOTE)
    if refuted:
        notes.append(
            "the lower bound exceeds the epsilon of " + ", ".join(refuted) + ": that accountant "
            "under-reports the privacy loss of this release (a bug, or a published bound refuted)"
        )
    return tuple(notes)


def coupled_message_gap(
    net: Network, settings: CurveSettings, *, seed: int, reps: np.ndarray, rounds: int = 1
) -> np.ndarray:
    """‖m₁ − m₀‖₂ of unit 0's aggregate ψ₀ in the canary worlds, per round and trial ``[T, R]``.

    Both worlds run with the same seed and repetitions (coupled: every draw shared) and
    the noise switched off, from the same w = 0; the largest gap is an empirical
    sensitivity of the server-level release, never above the accountant's Δ₂ of round 1
    (rounds after the first differ by the accumulated effect of the canary).
    """
    clean = settings.noiseless()
    P, M = net.data.shape[0], net.dim
    gaps = np.empty((rounds, reps.size))
    W = [np.zeros((1, reps.size, P, M)) for _ in range(2)]
    for i in range(1, rounds + 1):
        outs = [
            gfl_round(W[b], nb, [clean], seed=seed, iteration=i, reps=reps, keep_local=False)
            for b, nb in enumerate(canary_networks(net))
        ]
        gaps[i - 1] = np.linalg.norm(outs[1].psi[0, :, 0] - outs[0].psi[0, :, 0], axis=-1)
        W = [o.W for o in outs]
    return gaps

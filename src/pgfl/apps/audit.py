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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from pgfl.data.federated import FederatedData
from pgfl.engine import CurveBatch, CurveSettings, Network
from pgfl.engine.step import gfl_round
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.config import CurveConfig, ExperimentConfig
from pgfl.experiments.plan import Batch
from pgfl.files import FileError, read_json, write_json
from pgfl.folders import check_output, digest_of, staged
from pgfl.privacy.accounting import epsilon_curve
from pgfl.privacy.accounting.mechanisms import tradeoff_curve
from pgfl.privacy.mechanisms import ADVERSARIES, NEIGHBOURS, RoundContext
from pgfl.privacy.mechanisms.adversaries import adversary_view, trusted_parties
from pgfl.privacy.mechanisms.base import (
    SERVER_SIDE,
    UPLOADS,
    Emitted,
    Mechanism,
    NoiseLaw,
    protected,
)
from pgfl.rng import KeyedDraws
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
    "record_audit",
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
#: The adversaries the audit gives the members' secrets of correlated noise (curious servers).
COALITIONS = tuple(a for a in SERVER_SIDE if a != "link_eavesdropper")

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
    from scipy.stats import beta  # lazy: scipy.stats, for the bound alone

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
    settings: CurveSettings, world: Network, ccfg: CurveConfig, level: str | None,
    adversary: str = "link",
) -> str:  # fmt: skip
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
        f"canary's: {canary}; "
    )
    if adversary == ADVERSARY:
        line += (
            f"adversary {ADVERSARY!r}: the privatized link's own transcript, whose observer "
            "knows which clients were sampled, as the attack does (no amplification by client "
            "sampling)"
        )
    else:
        line += (
            f"adversary {adversary!r}: its view built from the engine's arrays, and its epsilon "
            "with the client sample known, as the attack knows it (no amplification by client "
            "sampling)"
        )
    if ccfg.privacy.adversary is not None and ccfg.privacy.adversary != adversary:
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


def emitted(out: Any, net: Network, c: int, coalition_size: int = 2) -> Emitted:
    """Curve ``c`` of a :class:`~pgfl.engine.step.RoundResult`: what the engine emitted.

    The target is unit 0 (the canary's); every adversary's view is built from these
    arrays (:func:`~pgfl.privacy.mechanisms.adversaries.adversary_view`).
    """
    return Emitted(
        out.messages[c], out.W[c], out.psi[c], net.links.src, net.links.dst, net.mixing,
        out.clients, target=0, coalition_size=coalition_size,
    )  # fmt: skip


class AdversaryViewer:
    """Builds one adversary's view of every curve of a round, with the noisy curve's protocol.

    The view of every curve (the noisy one and its noise-free centre) is built by the
    audited curve's mechanisms (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.observe`:
    a trusted aggregator's broadcast, the gossip steps), so that the centres are the same
    arrays without the noise. A curious server or a coalition also gets the secrets it
    knows of the round's noise (:meth:`~pgfl.privacy.mechanisms.base.Mechanism.secrets`,
    zero for the noise-free centre: noise is independent of the data). ``single``: every
    column carries one draw of the noise (an exact Laplace likelihood ratio applies).
    """

    def __init__(self, settings: CurveSettings, adversary: str) -> None:
        self.settings, self.adversary = settings, adversary
        self.coalition = int(getattr(settings.server, "coalition", 2))
        self.single = True

    def __call__(self, out: Any, net: Network, seed: int, iteration: int, reps: np.ndarray):
        s = self.settings
        views = []
        for c in range(out.W.shape[0]):
            seen = emitted(out, net, c, self.coalition)
            blocks = adversary_view(s.client, s.server, self.adversary, seen)
            self.single = all(single for _, single in blocks)
            parts = [b for b, _ in blocks]
            if self.adversary in COALITIONS:
                members = np.asarray(seen.observers(self.adversary), dtype=int)
                ctx = RoundContext(KeyedDraws(seed, iteration, reps, np.arange(net.A.shape[0])),
                                   0, iteration)  # fmt: skip
                server = s.server.on_network(net)  # a design made for the topology
                secret = server.secrets(members, net.links, net.dim, ctx)
                if secret is not None:
                    self.single = False
                    parts.append(secret if c == 0 else np.zeros_like(secret))
            views.append(np.concatenate(parts, axis=1))
        return np.stack(views)


def _run_views(
    net: Network,
    curves: Sequence[CurveSettings],
    view: str | AdversaryViewer,
    *,
    seed: int,
    reps: np.ndarray,
    first: int,
    last: int,
) -> np.ndarray:
    """Views of rounds ``first..last`` from w = 0, ``[C, R, T, d]`` (trials in chunks)."""
    C, P, M = len(curves), net.data.shape[0], net.dim
    out = None
    for lo in range(0, reps.size, CHUNK):
        r = reps[lo : lo + CHUNK]
        W = np.zeros((C, r.size, P, M))
        for i in range(1, last + 1):
            res = gfl_round(W, net, curves, seed=seed, iteration=i, reps=r, keep_local=False)
            W = res.W
            if i >= first:
                v = (
                    _view_of(view, net, res)
                    if isinstance(view, str)
                    else view(res, net, seed, i, r)
                )
                if out is None:
                    out = np.empty((C, reps.size, last - first + 1, v.shape[-1]))
                out[:, lo : lo + r.size, i - first] = v
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
        the ε compared: ``privacy.neighbours``), adversary (whose ε: :data:`ADVERSARY`, or
        the adversary audited), trusted (the parties the ε trusts).

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
    trusted: dict[str, str] = dataclasses.field(default_factory=dict)

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
            "trusted_parties": dict(self.trusted),
            "scope": self.scope,
            "refuted": list(self.refuted),
            "notes": list(self.notes),
        }


def _level(view: str, settings: CurveSettings) -> str | None:
    """The privatized link whose ε covers ``view`` (None: the view is not protected)."""
    client = bool(settings.client.std)  # the mechanisms' declared noise levels
    server = bool(settings.server.std)
    if view == "client-update":
        return "client" if client else None
    if view == "centroid" and "centroid" in settings.server.uncovered:
        server = False  # e.g. graph-homomorphic noise cancels in the centroid (eq. 46)
    if view == "message" and "link_eavesdropper" not in protected(settings.server):
        server = False  # a trusted aggregator's uplink carries the aggregate in the clear
    if server:
        return "server"
    return "client" if client else None


def _density(view: str, settings: CurveSettings) -> NoiseLaw | None:
    """The law of the one noise in a view, where it has a density (the mechanisms' ``law``)."""
    client = settings.client
    if view == "message" and _level(view, settings) == "server":
        if client.law() is not None:
            return None  # server noise + averaged client noise: no closed form used
        return settings.server.law()
    if view == "client-update":
        return client.law(settings.mu if settings.share == "updates" else 1.0)
    return None


def _audited_curve(
    cfg: ExperimentConfig, curve: str, view: str, trials: int, round: int, rounds: int,
    confidence: float, by_adversary: bool = False,
) -> tuple[CurveConfig, int, int, int, float]:  # fmt: skip
    """The curve and the checked arguments of :func:`audit` (one line per bad one)."""
    if not by_adversary:
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


def _runs(settings: CurveSettings, n: int, first: int, T: int) -> list[tuple]:
    """The two worlds' runs an audit attacks: ``(world, curves, reps, first, last)`` each.

    One release: both worlds with the noisy and the noise-free curve on all ``2n`` trials
    (the noise-free centres are public); several rounds: the noisy curve, world 0 on
    trials ``0..n−1``, world 1 on ``n..2n−1`` (independent noise per world).
    """
    reps = np.arange(2 * n)
    if first == 1 and T == 1:
        both = [settings, settings.noiseless()]
        return [(0, both, reps, 1, 1), (1, both, reps, 1, 1)]
    last = first + T - 1
    return [(0, [settings], reps[:n], first, last), (1, [settings], reps[n:], first, last)]


def _scores(
    v0: np.ndarray, v1: np.ndarray, settings: CurveSettings, view: str | AdversaryViewer,
    n: int, first: int, T: int,
) -> tuple[np.ndarray, np.ndarray, str]:  # fmt: skip
    """The attack's statistic on each world's trials, from the views of :func:`_runs`."""
    if first == 1 and T == 1:  # one release: the noise-free centres are public
        v0, v1 = v0[:, :, 0], v1[:, :, 0]
        c0, c1 = v0[1], v1[1]
        y0, y1 = v0[0, :n], v1[0, n:]  # disjoint repetitions: independent noise per world
        if isinstance(view, AdversaryViewer):
            return _likelihood_ratio(y0, y1, c0, c1, _distribution(settings), view.single)
        density = _density(view, settings)
        if density is not None:
            s0, s1 = density.llr(y0, c0[:n], c1[:n]), density.llr(y1, c0[n:], c1[n:])
        else:
            d = c1 - c0
            s0 = ((y0 - c0[:n]) * d[:n]).sum(-1)
            s1 = ((y1 - c0[n:]) * d[n:]).sum(-1)
        # the Laplace likelihood ratio has atoms at ±ε: round away float noise
        attack = "likelihood_ratio" if density is not None else "projection"
        return np.round(s0, 9), np.round(s1, 9), attack
    y0, y1 = v0[0].reshape(n, -1), v1[0].reshape(n, -1)
    h = n // 2
    direction = y1[:h].mean(0) - y0[:h].mean(0)
    mid = 0.5 * (y1[:h].mean(0) + y0[:h].mean(0))
    return (y0 - mid) @ direction, (y1 - mid) @ direction, "projection"


def _distribution(settings: CurveSettings) -> str:
    """The distribution of the noise the audited curve adds (its server level's if noisy)."""
    server = settings.server
    if server.std:
        return server.distribution or "gaussian"
    return settings.client.distribution or "gaussian"


def _likelihood_ratio(
    y0: np.ndarray, y1: np.ndarray, c0: np.ndarray, c1: np.ndarray, dist: str, single: bool
) -> tuple[np.ndarray, np.ndarray, str]:
    """The likelihood-ratio test of a view whose noise law is estimated from the trials.

    ``y0`` (world 0) and ``y1`` (world 1): ``[n, d]`` views; ``c0``, ``c1``: ``[2n, d]``
    noise-free centres of every trial in both worlds (world 0's trials first). The noise
    of a trial is its view minus its own world's centre (common random numbers), so its
    law is estimated on the selection half of both worlds (the threshold is chosen there
    too): Gaussian noise — the joint covariance Σ of all columns (correlated noise:
    pairwise terms, a dealer's shares, a curious server's secrets), and the exact
    log-likelihood ratio ((y − c₀)ᵀΣ⁺(y − c₀) − (y − c₁)ᵀΣ⁺(y − c₁))/2; Laplace noise with
    one draw per column — Σ_j (|y − c₀|_j − |y − c₁|_j)/b_j over distinct columns; other
    Laplace views (sums of draws) — the projection on c₁ − c₀. A direction in which the
    centres differ but no noise enters (an aggregate in the clear) separates the worlds
    exactly, and dominates the statistic.
    """
    n, _ = y0.shape
    h = n // 2
    e = np.concatenate([y0[:h] - c0[:h], y1[:h] - c1[n : n + h]])  # noise, selection half
    y = np.concatenate([y0, y1])
    d = c1 - c0
    scale = max(1.0, float(np.abs(y).max(initial=0.0)))
    sd = e.std(axis=0)
    noisy = sd > 1e-9 * scale
    _, keep = np.unique(np.round(e[:, noisy] / scale, 12), axis=1, return_index=True)
    cols = np.flatnonzero(noisy)[np.sort(keep)]
    exact = np.zeros(2 * n)  # what separates the worlds exactly
    quiet = d[:, ~noisy]
    if quiet.size:
        norm = (quiet**2).sum(1)
        hit = norm > 1e-18 * scale**2
        exact[hit] = ((y - c0)[:, ~noisy][hit] * quiet[hit]).sum(1) / norm[hit]
    r0, r1 = (y - c0)[:, cols], (y - c1)[:, cols]
    if dist == "gaussian":
        lam, vec = np.linalg.eigh(e[:, cols].T @ e[:, cols] / e.shape[0])
        top = lam.max(initial=0.0)
        rng = lam > 1e-9 * top
        white = vec[:, rng] / np.sqrt(lam[rng])
        llr = ((r0 @ white) ** 2 - (r1 @ white) ** 2).sum(1) / 2.0
        dd = d[:, cols]
        perp = dd - (dd @ vec[:, rng]) @ vec[:, rng].T
        norm = (perp**2).sum(1)
        hit = norm > 1e-18 * scale**2
        exact[hit] += (r0[hit] * perp[hit]).sum(1) / norm[hit]
        attack = "likelihood_ratio"
    elif single:
        b = sd[cols] / math.sqrt(2.0)
        llr = np.round((np.abs(r0) - np.abs(r1)) @ (1.0 / b), 9)
        attack = "likelihood_ratio"
    else:
        llr = ((y - c0) * d).sum(1)
        attack = "projection"
    spread = 2.0 * float(np.abs(llr).max(initial=0.0)) + 1.0
    stat = llr + spread * np.round(exact, 6)
    return stat[:n], stat[n:], attack


def _engine_views(worlds: tuple[Network, Network], seed: int) -> Callable:
    """Views from the engine (:func:`gfl_round` on each world)."""

    def views(w: int, curves: list, view: str, reps: np.ndarray, first: int, last: int):
        return _run_views(worlds[w], curves, view, seed=seed, reps=reps, first=first, last=last)

    return views


#: In a recorded audit's folder: what the recording is of (:func:`record_audit`).
RECORDING = "recording.json"


def _recording(cfg: ExperimentConfig, curve: str, n: int, first: int, T: int) -> dict[str, Any]:
    """What a recording of the canary worlds depends on (the audit's view does not)."""
    from pgfl.experiments.partial import config_fingerprint  # lazy: data digests

    return {
        "config": digest_of(config_fingerprint(cfg)), "curve": curve, "trials": n,
        "round": first, "rounds": T, "mode": cfg.deploy.mode,
    }  # fmt: skip


def record_audit(
    cfg: ExperimentConfig, curve: str, view: str, folder: str | Path, *, trials: int = 20000,
    round: int = 1, rounds: int = 1, adversary: str | None = None, force: bool = False,
) -> Path:  # fmt: skip
    """Run the audit's two canary worlds on local deployed parties that record their messages.

    Every party is its own process (:func:`pgfl.deploy.coordinator.deploy_network`, in
    ``cfg``'s ``deploy.mode``); ``FOLDER/world-W/transcripts`` receives each party's
    transcript, ``FOLDER/recording.json`` what was recorded. :func:`audit` with
    ``transcript=FOLDER`` then attacks those messages. ``FOLDER`` is an owned output
    folder (:mod:`pgfl.folders`: checked before anything runs, written in its staging
    folder, replaced only when both worlds are recorded; ``force`` as ``--force``).
    """
    from pgfl.deploy.coordinator import deploy_network  # lazy: grpc, Flower (pgfl[deploy])
    from pgfl.deploy.job import check_deployable  # lazy: the deploy package, as above

    if adversary is not None:
        check_choice("--adversary", adversary, tuple(ADVERSARIES))
        view = adversary
    ccfg, n, first, T = _audited_curve(
        cfg, curve, view, trials, round, rounds, 0.95, adversary is not None
    )[:4]
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, cfg.iterations, net)
    _from_transcripts(view, adversary, settings, cfg.deploy.mode)  # before anything runs
    check_deployable((settings,), [ccfg.label])
    worlds = canary_networks(net, records=canary_records(settings, net, first + T - 1))
    stamp = _recording(cfg, curve, n, first, T)
    output = check_output(folder, digest=digest_of(stamp), force=force,
                          what=f"audit transcripts of {cfg.name!r}, curve {curve!r}")  # fmt: skip
    with staged(output) as stage:
        for w, curves, reps, _, last in _runs(settings, n, first, T):
            labels = [ccfg, dataclasses.replace(ccfg, label=f"{ccfg.label} (noise-free)")]
            recording = dataclasses.replace(cfg.deploy, record=True)
            run_cfg = dataclasses.replace(cfg, curves=tuple(labels[: len(curves)]),
                                          iterations=last, repetitions=int(reps.size),
                                          deploy=recording)  # fmt: skip
            batch = Batch(tuple(range(len(curves))), worlds[w], CurveBatch.of(curves, worlds[w]))
            deploy_network(run_cfg, stage / f"world-{w}", batch, reps=reps)
        write_json(stage / RECORDING, stamp)
    return output.path


class _Recorded:
    """The rounds of one canary world as its deployed parties recorded them.

    Per round, the engine's arrays (:class:`~pgfl.engine.step.RoundResult`) rebuilt from
    what crossed the wire: ``messages`` on each link between two servers (the receiver's
    ``Deliver``; for central DP the uplink ``ψ_m`` each server sent the aggregator in the
    clear, which the engine's links ``m → p`` carry), ``W`` (each server's model as it
    reported it), ``psi`` (the uplinks; NaN where no wire carried a unit's aggregate) and
    ``clients`` (who each server sent ``train``). What no wire carries (a unit's copy to
    itself) is NaN.
    """

    def __init__(self, base: Path, net: Network, reps: np.ndarray, C: int) -> None:
        from pgfl.deploy.wire import decode, decode_message, read_transcript, unpack  # lazy: grpc

        P, L, M = net.A.shape[0], net.L, net.dim
        links, R = net.links, reps.size
        self.rounds: dict[int, dict[str, np.ndarray]] = {}

        def at(i: int) -> dict[str, np.ndarray]:
            if i not in self.rounds:
                self.rounds[i] = {
                    "messages": np.full((C, R, links.src.size, M), np.nan),
                    "W": np.full((C, R, P, M), np.nan), "psi": np.full((C, R, P, M), np.nan),
                    "clients": np.full((R, P, L), -1), "reported": np.zeros(P, bool),
                }  # fmt: skip
            return self.rounds[i]

        for p in range(P):
            path = base / f"server-{p}.pgflwire"
            if not path.is_file():
                raise FileError(f"{path}: no transcript (record it with --deploy)")
            for e in read_transcript(path):
                key = (e.direction, e.method)
                if key == ("received", "Deliver"):  # a neighbour's messages into p
                    arrays, config = decode(e.payload)
                    q = int(e.peer.split("-")[1])
                    into = (links.src == q) & (links.dst == p)
                    at(int(config["round"]))["messages"][:, :, into] = arrays["m"]
                elif key == ("sent", "Combine"):  # central DP's uplink: ψ_p in the clear
                    arrays, config = decode(e.payload)
                    r = at(int(config["round"]))
                    r["psi"][:, :, p] = arrays["psi"]
                    uplinks = (links.src == p) & (links.dst != p)
                    r["messages"][:, :, uplinks] = arrays["psi"][:, :, None]
                elif key == ("sent", "Round"):
                    arrays, config = decode(e.payload)
                    r = at(int(config["round"]))
                    r["W"][:, :, p], r["reported"][p] = arrays["w"], True
                elif key == ("sent", "train"):  # who is sampled, in which slot
                    msg = decode_message(e.payload)
                    arrays, config = unpack(msg.content)
                    k = int(e.peer.rsplit("-", 1)[1])
                    rows = np.searchsorted(reps, arrays["reps"])
                    at(int(config["round"]))["clients"][rows, p, arrays["slots"]] = k
        self.base = base

    def round(self, i: int) -> Any:
        """Round ``i``'s arrays as a :class:`~pgfl.engine.step.RoundResult`-like record."""
        r = self.rounds.get(i)
        if r is None or not r["reported"].all():
            raise FileError(f"{self.base}: round {i} is not in the transcripts")
        return _RoundArrays(r["W"], r["psi"], r["messages"], r["clients"])


class _RoundArrays(NamedTuple):
    W: np.ndarray
    psi: np.ndarray
    messages: np.ndarray
    clients: np.ndarray


def _transcript_views(folder: Path, worlds: tuple[Network, Network], seed: int) -> Callable:
    """Views read from the recorded transcripts of :func:`record_audit` (the same arrays).

    A view is built from the rounds' arrays as the engine's are (:func:`_view_of`,
    :class:`AdversaryViewer`); the adversaries of the uploads (who see a client's upload,
    not a message between servers) and the client-update view are audited on the
    engine's arrays only.
    """

    def views(w: int, curves: list, view: Any, reps: np.ndarray, first: int, last: int):
        name = view if isinstance(view, str) else view.adversary
        base = Path(folder) / f"world-{w}" / "transcripts" / "batch-000"
        recorded = _Recorded(base, worlds[w], reps, len(curves))
        out = None
        for i in range(first, last + 1):
            res = recorded.round(i)
            v = _view_of(view, worlds[w], res) if isinstance(view, str) else view(
                res, worlds[w], seed, i, reps)  # fmt: skip
            if out is None:
                out = np.empty((len(curves), reps.size, last - first + 1, v.shape[-1]))
            out[:, :, i - first] = v
        if not np.isfinite(out).all():
            raise FileError(f"{base}: the {name} view needs messages the transcripts lack")
        return out

    return views


def _from_transcripts(
    view: str, adversary: str | None, settings: CurveSettings, mode: Any = None
) -> None:
    """Refuse (one line) what a recording cannot be audited for.

    The uploads (``--view client-update``, the adversaries of the uploads) are attacked on
    the engine's arrays only; a curious server's secrets of correlated noise (pairwise
    seeds, a dealer's shares) never leave their parties in deployment mode.
    """
    if view == "client-update" or adversary in UPLOADS:
        flag = f"--adversary {adversary}" if adversary else f"--view {view}"
        raise ConfigError(
            f"--transcript: {flag} sees a client's upload, which the audit attacks on the "
            "engine's arrays only (drop --deploy and --transcript)"
        )
    knows = type(settings.server).secrets is not Mechanism.secrets  # correlated noise
    if mode == "deployment" and knows and adversary in COALITIONS:
        raise ConfigError(
            f"--adversary {adversary} knows its members' secrets of the noise, which in "
            "deployment mode never leave their parties (nor their transcripts): record and "
            "audit in simulation mode (deploy.mode)"
        )


def _check_recording(
    folder: Path, stamp: dict[str, Any], settings: CurveSettings, view: str,
    adversary: str | None,
) -> None:  # fmt: skip
    """The recording in ``folder`` is of this audit (one line naming what differs)."""
    path = Path(folder) / RECORDING
    if not path.is_file() or path.is_symlink():
        raise FileError(f"{path}: no recorded audit (record it with --deploy --transcript)")
    try:
        held = read_json(path)
    except (OSError, ValueError) as exc:
        raise FileError(f"{path} is unreadable ({exc})") from None
    differ = [k for k in stamp if k != "mode" and held.get(k) != stamp[k]]
    if differ:
        shown = ", ".join("the configuration" if k == "config" else f"{k} = {held.get(k)!r}"
                          for k in differ)  # fmt: skip
        raise ConfigError(
            f"--transcript {folder} holds the recording of another audit ({shown}); record "
            "this one with --deploy"
        )
    _from_transcripts(view, adversary, settings, held.get("mode"))


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
        why = f"the {view} view carries no differentially private noise in this scheme"
        if view == "message" and not settings.server.silent:
            why = settings.server.exposes.get("link_eavesdropper", why)
        return None, {}, why
    ctx = settings.release_context(net, last)
    transcript = getattr(settings, level).transcript(ctx)
    if ctx.clip is None:
        eps = {a: math.inf for a in accs}
        return level, eps, "no gradient bound (training.clip_norm): epsilon = inf"
    curve_eps = epsilon_curve(transcript, delta=delta, accountants=accs)
    return level, {k: float(v[last - 1]) for k, v in curve_eps.items()}, transcript.scope


def _claimed_by(
    settings: CurveSettings, net: Network, adversary: str, last: int, delta: float,
    accs: list[str],
) -> tuple[str | None, dict[str, float], str]:  # fmt: skip
    """The level that protects against ``adversary``, its ε(last) per accountant, its scope.

    What the curve reports in ``epsilon_by_adversary`` with the client sample known (the
    attack knows it: no amplification by client sampling), the smaller of the two levels
    where both protect.
    """
    ctx = settings.release_context(net, last)
    best: tuple[str | None, dict[str, float], str] = (None, {}, "")
    for level in ("server", "client"):
        t = getattr(settings, level).view(ctx, adversary)
        if t is None:
            continue
        if t.reason is not None:
            eps = {a: math.inf for a in accs}
        else:
            curve = epsilon_curve(t.uncredited(), delta=delta, accountants=accs)
            eps = {k: float(v[last - 1]) for k, v in curve.items()}
        if best[0] is None or eps[accs[0]] < best[1][accs[0]]:
            best = (level, eps, t.scope)
    if best[0] is None:
        ex = {**settings.client.exposes, **settings.server.exposes}
        why = ex.get(adversary, "no mechanism of the curve protects against it")
        return None, {}, f"{adversary} is not protected: {why}"
    return best


def audit(
    cfg: ExperimentConfig,
    curve: str,
    view: str = "message",
    *,
    adversary: str | None = None,
    trials: int = 20000,
    round: int = 1,
    rounds: int = 1,
    confidence: float = 0.95,
    accountants: Sequence[str] | None = None,
    transcript: str | Path | None = None,
) -> AuditResult:
    """Audit one curve of an experiment config: attack a view over ``trials`` trials per world.

    Args:
        cfg: an :class:`pgfl.experiments.config.ExperimentConfig` (a preset or TOML file).
        curve: the label of the curve to audit (its noise as run, ``target_epsilon``
            calibrated over the config's iterations).
        view: one of :data:`VIEWS`: ``message`` (unit 0 → its first neighbour p, what p or
            an eavesdropper sees), ``server-model`` (p's model after the round),
            ``centroid`` (the network average of the models), ``client-update`` (what the
            canary client sends its server; needs ``training.L = 1``).
        adversary: instead of ``view``, one of the
            :data:`~pgfl.privacy.mechanisms.ADVERSARIES`: its whole view, built from the
            engine's arrays by the curve's mechanisms
            (:func:`~pgfl.privacy.mechanisms.adversaries.adversary_view`), attacked with
            the likelihood ratio of its noise's law, and compared with the curve's ε
            against that adversary (``epsilon_by_adversary``, without sampling credit:
            the attack knows the sample). An adversary of the uploads needs
            ``training.L = 1`` (the engine emits the unit's aggregate, then the upload),
            but under secure aggregation (distributed DP: the server decodes the noisy
            sum), where the aggregate is all it learns.
        trials: trials per world (≥ 200; half select the threshold, half evaluate).
        round: the first audited iteration i ≥ 1.
        rounds: consecutive rounds T ≥ 1 observed together.
        confidence: of the Clopper–Pearson bounds, in (0, 1).
        accountants: compare with these (default: the curve's ``privacy.accountants``).
        transcript: attack the messages a deployment recorded (:func:`record_audit`'s
            folder) instead of the engine's: the same statistic on what crossed the wire
            (the views and adversaries of messages between servers and of the servers'
            models; not the uploads').

    Returns:
        An :class:`AuditResult`; ``result.refuted`` names the accountants whose ε the lower
        bound exceeds (a bug, the CLI exits 3).

    """
    if adversary is not None:
        check_choice("--adversary", adversary, tuple(ADVERSARIES))
        view = adversary
    ccfg, n, first, T, conf = _audited_curve(
        cfg, curve, view, trials, round, rounds, confidence, adversary is not None
    )
    net = build_network(ccfg, cfg.seed)
    settings = curve_settings(ccfg, cfg.iterations, net)
    summed = settings.client.summed  # secure aggregation: the server sees the sum alone
    if net.L != 1 and (view == "client-update" or (adversary in UPLOADS and not summed)):
        raise ConfigError(
            f"--{'adversary' if adversary else 'view'} {view} needs training.L = 1 (the "
            f"server's aggregate is then the client's message); got L={net.L}"
        )
    last, delta = first + T - 1, ccfg.privacy.delta
    worlds = canary_networks(net, records=canary_records(settings, net, last))
    if transcript is not None:
        _from_transcripts(view, adversary, settings)
        stamp = _recording(cfg, curve, n, first, T)
        _check_recording(Path(transcript), stamp, settings, view, adversary)
    seen = AdversaryViewer(settings, adversary) if adversary is not None else view
    source = (_engine_views(worlds, cfg.seed) if transcript is None
              else _transcript_views(Path(transcript), worlds, cfg.seed))  # fmt: skip
    v0, v1 = (source(w, curves, seen, reps, a, b) for w, curves, reps, a, b in
              _runs(settings, n, first, T))  # fmt: skip
    s0, s1, attack = _scores(v0, v1, settings, seen, n, first, T)
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
    if adversary is None:
        level, eps, scope = _claimed(settings, worlds[0], view, last, delta, accs)
    else:
        level, eps, scope = _claimed_by(settings, worlds[0], adversary, last, delta, accs)
    ratio = {k: (lower / v if v > 0 else math.inf) for k, v in eps.items()}
    refuted = tuple(k for k, v in eps.items() if lower > v)
    whose = adversary or ADVERSARY
    compared = _compared_note(settings, worlds[0], ccfg, level, whose)
    return AuditResult(
        view=view, trials=n, tpr=tpr, fpr=fpr, epsilon_lower=lower, confidence=conf,
        epsilon=eps, ratio=ratio, protected=level is not None, curve=curve, round=first,
        rounds=T, delta=delta, attack=attack, success=0.5 * (tpr + 1.0 - fpr), level=level,
        scope=scope, refuted=refuted, notes=_notes(T, first, refuted, compared), roc=roc,
        neighbours=settings.neighbours, adversary=whose,
        trusted=trusted_parties(settings.client, settings.server),
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

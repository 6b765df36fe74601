"""What a privacy mechanism is: noise in the engine's step, a release, a threat model.

A mechanism of the client → server link (a :class:`ClientAggregation`) or of the server →
server links (a :class:`ServerNoise`) is one object that

(a) draws its noise inside the engine's round — :meth:`ClientAggregation.aggregate` turns
    the sampled clients' local models into the unit's aggregate ``ψ_p`` (eq. 7 of
    "Privatized Graph Federated Learning", Rizk, Vlaski & Sayed, arXiv:2203.07105),
    :meth:`ServerNoise.link_noise` gives the noise ``g_pm`` on the message ``ψ_m + g_pm``
    server ``m`` sends to ``p`` (eq. 8); both are class methods called once per round with
    every curve's instance of the class, so the work stays vectorized over curves;
(b) describes what it releases to the accountant, :meth:`Mechanism.transcript`: a frozen
    :class:`~pgfl.privacy.accounting.releases.Transcript` (one release per iteration —
    sensitivity, noise scale, distribution, copies — as ``dp_accounting``'s events), for
    the run's :class:`ReleaseContext` (step size, clipping, sizes);
(c) states its threat model (:attr:`Mechanism.protects`, :attr:`Mechanism.exposes`:
    which of the :data:`ADVERSARIES` its ε covers, and which it does not;
    :attr:`Mechanism.covers`, :attr:`Mechanism.uncovered`: which of the run's
    :data:`QUANTITIES` its ε covers, in words; :attr:`Mechanism.trusted`: the parties its
    ε trusts), what each adversary observes
    (:meth:`Mechanism.views`, with amplification by client sampling only where the
    observer lacks the sample, :func:`subsampled`), and builds each adversary's view from
    the arrays the engine emitted (:meth:`Mechanism.observe` on :class:`Emitted`: what
    the audit attacks, so that what is accounted is what is sent).

The engine knows a mechanism only through (a); the accountant only through (b).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np

from pgfl.param import Param
from pgfl.privacy.accounting.releases import Transcript
from pgfl.rng import KeyedDraws
from pgfl.style import SchemeStyle
from pgfl.validation import ConfigError, check_choice, did_you_mean

__all__ = [
    "ADVERSARIES",
    "LIKE",
    "NEIGHBOURING",
    "NEIGHBOURS",
    "QUANTITIES",
    "REGISTRY",
    "SERVER_SIDE",
    "UPLOADS",
    "Aggregate",
    "ClientAggregation",
    "Emitted",
    "FrontierLine",
    "Mechanism",
    "NoiseLaw",
    "NoiseLevel",
    "ReleaseContext",
    "RoundContext",
    "ServerNoise",
    "add_adversary",
    "client_stack",
    "declared",
    "noise_level",
    "owns",
    "present",
    "protected",
    "remove_adversary",
    "server_side",
    "stacks",
    "status_mixture",
    "subsampled",
    "view_of",
]

#: The observers a mechanism may protect against, with what each sees. The target is one
#: client of one unit (the neighbouring relation: its data, or one of its records).
ADVERSARIES: dict[str, str] = {
    "link_eavesdropper": "sees every message between servers, or between a server and a "
    "trusted aggregator; not the clients' uploads",
    "other_server": "a curious server that is not a neighbour of the unit",
    "neighbour_server": "a curious neighbouring server: sees the messages sent to it",
    "server_coalition": "k curious servers, not the unit's own, pooling their views and "
    "secrets (k = privacy.coalition_size)",
    "neighbour_coalition": "every neighbour of the unit's server, pooling their views and secrets",
    "own_server": "a unit's own server, against its clients",
    "unit_client": "a client of the unit: sees its server's model every round, and knows "
    "whether it was sampled itself",
    "upload_eavesdropper": "sees the clients' uploads to their server (who uploads, and what)",
}

#: The adversaries on the servers' side: they exist only where there is more than one
#: unit, and none of them learns which clients a unit sampled in a round, so that client
#: sampling amplifies against them. (A unit's own server does the sampling; an observer of
#: the uploads sees who uploads; a unit's client knows its own status, and under secure
#: aggregation the whole sample: :func:`subsampled` credits each what it lacks.)
SERVER_SIDE = (
    "link_eavesdropper", "other_server", "neighbour_server", "server_coalition",
    "neighbour_coalition",
)  # fmt: skip
#: Adversaries on the clients' side: they see what a client uploads.
UPLOADS = ("own_server", "upload_eavesdropper")

#: Neighbouring relations: one client's whole data replaced (the papers' Definition 1),
#: or one record (sample) of one client replaced.
NEIGHBOURS = {
    "client": "one client's whole data set replaced",
    "record": "one record (sample) of one client replaced",
}
#: ``privacy.neighbours``: the neighbouring relation of every ε (declared with its vocabulary).
NEIGHBOURING = Param("privacy.neighbours", "choice", "client", "Neighbouring data sets of "
    "every ε: `client` (one client's whole data replaced, the papers') or `record` (one "
    "sample; smaller only for one full-batch step per round, `training.batch = \"full\"`, "
    "`training.epochs = 1`).", choices=tuple(NEIGHBOURS), batched=True)  # fmt: skip


#: What a run computes that a metric is about: the servers' models ``w_p`` (the average
#: individual MSD, eq. 59) and their network average, the centroid ``w̄`` (the centroid MSD,
#: eq. 58, and the centroid's test error). A mechanism's ε covers a quantity when the
#: quantity, released to the adversaries the mechanism protects against, keeps that ε
#: (:attr:`Mechanism.uncovered` lists the ones it does not).
QUANTITIES: dict[str, str] = {
    "models": "each server's model",
    "centroid": "the network average of the models",
}


def present(adversary: str, units: int, adjacency: np.ndarray | None = None) -> bool:
    """Whether ``adversary`` exists in a network of ``units`` servers with this graph.

    With one unit there are no other servers and no links between them; a curious
    non-neighbour needs two servers that are not adjacent.

    >>> present("link_eavesdropper", 1), present("unit_client", 1)
    (False, True)
    >>> present("other_server", 3, np.ones((3, 3)) - np.eye(3))   # complete graph
    False
    """
    adversary = LIKE.get(adversary, adversary)
    if adversary not in SERVER_SIDE:
        return True
    if units < 2:
        return False
    if adversary == "other_server" and adjacency is not None:
        a = np.asarray(adjacency) != 0
        return bool((~a & ~np.eye(a.shape[0], dtype=bool)).any())
    return True


#: The registry: ``privacy.client_noise`` / ``privacy.server_noise`` name → mechanism class,
#: by level (filled by :func:`pgfl.privacy.mechanisms.register`). It lives here so that a
#: setting's condition can ask the scheme a curve names what it declares
#: (:func:`declared`), with no list of names anywhere else.
REGISTRY: dict[str, dict[str, type[Mechanism]]] = {"client": {}, "server": {}}


def declared(level: str, settings: Mapping[str, Any]) -> type[Mechanism] | None:
    """The class of the scheme a curve's settings name at ``level`` (``None``: unknown name)."""
    return REGISTRY[level].get(settings[f"privacy.{level}_noise"])


def owns(level: str, settings: Mapping[str, Any], name: str) -> bool:
    """Whether the scheme a curve's settings name at ``level`` declares the setting ``name``.

    (A setting's condition: it has an effect where the curve's scheme, alone or stacked,
    owns it.)
    """
    cls = declared(level, settings)
    return cls is not None and any(p.name == name for p in cls.params)


def stacks() -> dict[tuple[str, ...], str]:
    """Every client-level stack of pieces the registry composes, with its scheme's name.

    A client scheme declares the pieces each of its names stacks, in order
    (:attr:`ClientAggregation.stacks`): the scheme runs those pieces on a client's message
    one after the other, as optax's ``chain`` runs transformations, the last one handing
    it to the server (plain averaging where no piece aggregates). A stack is accepted only
    where a registered scheme declares it, or composes it from its pieces
    (:func:`~pgfl.privacy.mechanisms.chain.compose`: ``("gaussian", "secure_aggregation")``).

    >>> stacks()[("skellam_shares", "secure_aggregation")], stacks()[()]
    ('skellam', 'none')
    """
    return {
        tuple(pieces): name
        for cls in REGISTRY["client"].values()
        for name, pieces in cls.stacks.items()  # type: ignore[attr-defined]
    }


def client_stack(setting: str, value: Any) -> str:
    """The scheme name ``privacy.client_noise`` gives: a name, or a stack of pieces (a list).

    A list is the stack's name (``["discrete_gaussian_shares", "secure_aggregation"]`` is
    ``"distributed_gaussian"``: the same mechanism, the same bits, the same ε), or a
    :class:`~pgfl.validation.ConfigError` in one line saying why no scheme composes it.

    >>> client_stack("privacy.client_noise", ["discrete_gaussian_shares", "secure_aggregation"])
    'distributed_gaussian'
    >>> client_stack("privacy.client_noise", ["skellam_shares"])
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: privacy.client_noise = ['skellam_shares']: 'skellam_shares' \
needs 'secure_aggregation' after it
    """
    known = stacks()
    if isinstance(value, str):
        return check_choice(setting, value, REGISTRY["client"])
    shown = f"{setting} = {list(value) if isinstance(value, (list, tuple)) else value!r}"
    pieces = list(dict.fromkeys(p for stack in known for p in stack))
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        names = ", ".join(map(repr, REGISTRY["client"]))
        raise ConfigError(
            f"{setting} must be one of {names}, or a list of pieces ({', '.join(pieces)}); "
            f"got {value!r}"
        )
    value = tuple(value)
    if value in known:
        return known[value]
    raise ConfigError(f"{shown}: {_refused(value, known, pieces)}")


def _refused(
    value: tuple[str, ...], known: Mapping[tuple[str, ...], str], pieces: list[str]
) -> str:
    """Why no registered scheme composes the stack ``value`` (one phrase)."""
    for v in value:
        if v not in pieces:
            return f"unknown piece {v!r}{did_you_mean(v, pieces)}; pieces: {', '.join(pieces)}"
    for v in dict.fromkeys(value):
        if value.count(v) > 1:
            return f"{v!r} appears {value.count(v)} times (a stack uses each piece once)"
    for i, v in enumerate(value):
        after = [set(s[s.index(v) + 1 :]) for s in known if v in s]
        missing = [p for p in pieces if all(p in a for a in after) and p not in value[i + 1 :]]
        if missing:
            return f"{v!r} needs {' and '.join(map(repr, missing))} after it"
    listed = "; ".join(f"{n} = {list(s)}" for s, n in known.items())
    return f"no scheme composes these pieces (stacks: {listed})"


#: Adversaries added after the built-in ones: name → the built-in adversary whose
#: protection it inherits (it sees no more than that one). A mechanism protects it where
#: it protects that one, unless it names it in its ``exposes`` (:func:`protected`).
LIKE: dict[str, str] = {}


def add_adversary(name: str, sees: str, like: str) -> None:
    """Declare a new adversary in one place: what it sees, and whom it sees no more than.

    Every mechanism that protects against ``like`` then protects against it, with the
    view of ``like``; a mechanism that does not lists it in its ``exposes``.

    >>> add_adversary("tap", "an eavesdropper on one link", like="link_eavesdropper")
    >>> "tap" in protected(type("M", (Mechanism,), {"protects": ("link_eavesdropper",)}))
    True
    >>> remove_adversary("tap")
    """
    if name in ADVERSARIES or like not in ADVERSARIES:
        raise ValueError(f"adversary {name!r} exists already, or {like!r} does not")
    ADVERSARIES[name] = sees
    LIKE[name] = like
    if like in SERVER_SIDE:
        _EXTRA_SERVER_SIDE.append(name)


def remove_adversary(name: str) -> None:
    """Undo :func:`add_adversary` (a test's own adversary)."""
    ADVERSARIES.pop(name, None)
    LIKE.pop(name, None)
    if name in _EXTRA_SERVER_SIDE:
        _EXTRA_SERVER_SIDE.remove(name)


_EXTRA_SERVER_SIDE: list[str] = []


def protected(cls: type[Mechanism] | Mechanism) -> tuple[str, ...]:
    """The adversaries a mechanism's ε covers: its ``protects`` and the added ones like them."""
    extra = (a for a, like in LIKE.items() if like in cls.protects and a not in cls.exposes)
    return (*cls.protects, *(a for a in extra if a not in cls.protects))


def view_of(m: Mechanism, ctx: ReleaseContext, adversary: str) -> Transcript | None:
    """What ``adversary`` observes of ``m`` (an added adversary: what its ``like`` does)."""
    if adversary in LIKE:
        return m.view(ctx, LIKE[adversary]) if adversary in protected(m) else None
    return m.view(ctx, adversary)


def server_side(adversary: str) -> bool:
    """Whether ``adversary`` is on the servers' side (:data:`SERVER_SIDE`, or like one)."""
    return adversary in SERVER_SIDE or adversary in _EXTRA_SERVER_SIDE


class NoiseLaw(NamedTuple):
    """The law of additive noise, per coordinate: what the audit samples and attacks.

    ``distribution``: ``"laplace"`` or ``"gaussian"``; ``std``: per-coordinate std.
    :meth:`llr` is the log-likelihood ratio of an observation between two centres
    (summed over the last axis); :meth:`sample` draws it.

    >>> law = NoiseLaw("gaussian", 1.0)
    >>> float(law.llr(np.zeros(2), np.zeros(2), np.ones(2)))   # (0 − 2) / 2
    -1.0
    >>> float(NoiseLaw("laplace", math.sqrt(2.0)).llr(np.zeros(1), np.zeros(1), np.ones(1)))
    -1.0
    """

    distribution: str
    std: float

    def llr(self, y: np.ndarray, c0: np.ndarray, c1: np.ndarray) -> np.ndarray:
        """``log p(y − c1) − log p(y − c0)`` (evidence for ``c1``), summed over the last axis."""
        if self.distribution == "laplace":
            b = self.std / math.sqrt(2.0)
            return (np.abs(y - c0).sum(-1) - np.abs(y - c1).sum(-1)) / b
        return (((y - c0) ** 2).sum(-1) - ((y - c1) ** 2).sum(-1)) / (2.0 * self.std * self.std)

    def sample(self, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
        """Draws of the noise, ``shape``."""
        if self.distribution == "laplace":
            return rng.laplace(0.0, self.std / math.sqrt(2.0), shape)
        return rng.normal(0.0, self.std, shape)


class RoundContext(NamedTuple):
    """What a mechanism may know about the round it runs in (one block of units).

    Attributes:
        draws: the keyed draws of the block's repetitions and units in this round.
        start: global id of the block's first unit.
        iteration: the iteration number ``i`` (1-based).

    """

    draws: KeyedDraws
    start: int
    iteration: int


class Aggregate(NamedTuple):
    """The result of a client aggregation for ``C'`` curves of one block.

    Attributes:
        psi: the units' aggregates ``ψ_p``, ``[C', R, P_b, M]``; a non-finite entry marks
            its repetition as diverged.
        aborted: units that aborted the round and kept ``w_{p,i−1}``, ``[C', R, P_b]``.
        clipped: messages (client vectors) with a coordinate clipped, ``[C', R]``.

    """

    psi: np.ndarray
    aborted: np.ndarray | None = None
    clipped: np.ndarray | None = None


@dataclass(frozen=True, kw_only=True)
class ReleaseContext:
    """What the accountant needs to know of a run besides the mechanism itself.

    Built from validated settings (:meth:`pgfl.engine.CurveSettings.release_context`, or a
    command's options checked against the parameter table); not re-validated here.

    Attributes:
        mu: step size μ.
        clip: the per-sample gradient clipping norm B (``None``: no bound, ε = ∞).
        share: ``"models"`` or ``"updates"`` (journal §3.4).
        iterations: T.
        dim: the model dimension M.
        clients_per_round: the fewest clients a unit averages per round: L, or with
            secure aggregation and dropout its threshold t.
        aggregation_error: per-coordinate bound on the error of a unit's aggregate
            (secure aggregation's fixed-point rounding).
        observed_links: links an adversary of one server's messages watches (the
            largest number of links a server sends to others).
        rigorous: M-dimensional Laplace releases with the rigorous sensitivities
            (default); ``False``: the papers' reading for every accountant.
        clients, sampled: K and L: each round a unit draws L of its K clients uniformly
            without replacement (``clients = 0``: no sampling to credit).
        records: how many records a client's one local step averages with equal weight
            when a changed record can enter it only once (record-level neighbours, one
            full-batch step per round: the fewest samples of a client), else 1.
        neighbours: the neighbouring relation (:data:`NEIGHBOURS`).
        units: P, the number of units (a central aggregator averages them; default: the
            size of ``adjacency`` or ``combination`` if given, else 1).
        adjacency: the servers' graph, 0/1 ``[P, P]`` without self-loops (correlated
            noise is accounted on it); ``None`` where unknown.
        combination: the topology's combination matrix A ``[P, P]`` (before a scheme's
            own :meth:`Mechanism.combination`: gossip is accounted on A, not on the
            polynomial of A the engine applies); ``None`` where unknown.
        sample_revealed: a unit's clients learn which clients it sampled (secure
            aggregation routes the sampled clients' keys to them), so that sampling does
            not amplify against ``unit_client``.

    >>> ReleaseContext(mu=0.5, clip=1.0, iterations=3).clients_per_round
    1

    """

    mu: float
    clip: float | None
    iterations: int
    share: str = "models"
    dim: int = 1
    clients_per_round: int = 1
    aggregation_error: float = 0.0
    observed_links: int = 1
    rigorous: bool = True
    clients: int = 0
    sampled: int = 0
    records: int = 1
    neighbours: str = "client"
    units: int = 1
    sample_revealed: bool = False
    adjacency: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)
    combination: np.ndarray | None = dataclasses.field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.clip is not None and math.isinf(self.clip):
            object.__setattr__(self, "clip", None)  # an infinite norm bounds nothing
        for graph in (self.adjacency, self.combination):  # P from a given graph
            if self.units == 1 and graph is not None:
                object.__setattr__(self, "units", int(np.asarray(graph).shape[0]))


class FrontierLine(NamedTuple):
    """One line of the privacy–utility frontier (:mod:`pgfl.apps.frontier`).

    Attributes:
        settings: the line's curve settings by dotted name, the mechanism's own name
            among them (``{"privacy.server_noise": "random"}``).
        knobs: settings the frontier searches at equal ε (``--tune``), each with its
            default grid (the step size ``training.mu`` is searched for every line).
        legend: its legend entry ("": the line's name).
        scope: what its ε covers and against whom ("": the mechanism's :attr:`~Mechanism.covers`).
        by_adversary: drawn in ``pgfl reproduce frontier-adversary`` (calibrated to each
            adversary it protects against).

    """

    settings: Mapping[str, Any]
    knobs: Mapping[str, tuple[Any, ...]] = {}
    legend: str = ""
    scope: str = ""
    by_adversary: bool = False


class Mechanism:
    """A privacy mechanism (module doc): noise, its release, whom it protects.

    Class attributes:
        names: the configuration names of the mechanism (``privacy.client_noise`` or
            ``privacy.server_noise`` values); the first is its ``name``.
        level: ``"client"`` (client → server link) or ``"server"`` (server → server).
        params: settings the mechanism owns (its ranges live there).
        calibrates: the setting a ``privacy.target_epsilon`` replaces (``None``: none).
        protects: the :data:`ADVERSARIES` its ε covers.
        exposes: adversaries it does not protect against, with why.
        silent: adds nothing (the engine skips it).
        amplified: a round's release depends on a client only in the rounds it is
            sampled (so client sampling amplifies against those who do not know the
            sample, :func:`subsampled`); false where the release accumulates earlier
            rounds (a growing sensitivity).
        trusted: parties every ε of the mechanism trusts, each with what it could do
            (a trusted aggregator, a dealer); printed beside every number.
        covers: what its ε covers, in a few words (the frontier's ``epsilon_covers``).
        uncovered: the :data:`QUANTITIES` its ε does *not* cover, each with why (default:
            none, every quantity is computed from what it protects, by post-processing);
            the frontier never ranks a scheme first on a metric of such a quantity.
        notes: per protected adversary, what its ε rests on or what it sees that is not
            a DP number (secure aggregation's masked uploads); printed beside the number.
        frontier: its lines of the privacy–utility frontier by name (:class:`FrontierLine`:
            settings, knobs tuned at equal ε); ``None`` (default): one line per name,
            without knobs, if it :attr:`calibrates` a noise level, else none.

    The engine combines the servers' messages with :meth:`combination` of the topology's
    matrix (the topology's own by default; a trusted aggregator's average, K gossip
    steps); :meth:`combination_key` says what that depends on, so that only curves with
    the same combination are batched together.
    """

    names: ClassVar[tuple[str, ...]] = ("custom",)
    level: ClassVar[str] = "server"
    params: ClassVar[tuple[Param, ...]] = ()
    calibrates: ClassVar[str | None] = None
    protects: ClassVar[tuple[str, ...]] = ()
    exposes: ClassVar[Mapping[str, str]] = {}
    silent: ClassVar[bool] = False
    amplified: ClassVar[bool] = False
    trusted: ClassVar[Mapping[str, str]] = {}
    covers: ClassVar[str] = "the messages it adds noise to, and everything computed from them"
    uncovered: ClassVar[Mapping[str, str]] = {}
    notes: ClassVar[Mapping[str, str]] = {}
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = None
    #: The distributions its noise may have (more than one: ``privacy.server_distribution``
    #: chooses; one: it is fixed).
    distributions: ClassVar[tuple[str, ...]] = ()
    #: Its figure style (colour, marker, words), or one per name (a class whose names are
    #: different schemes); ``None``: one derived from its name. Only a class's own
    #: declaration counts: a subclass is another scheme.
    style: ClassVar[SchemeStyle | Mapping[str, SchemeStyle] | None] = None
    #: Why ``pgfl deploy`` cannot run it, in words (``None``: :mod:`pgfl.deploy` runs its
    #: protocol between processes). A new mechanism has no deployed protocol until then.
    not_deployed: ClassVar[str | None] = "it has no deployed protocol"
    #: Its own clipping bounds each message, so that its ε is finite without a per-sample
    #: gradient bound (``training.clip_norm``): a stack with the clipping piece.
    bounds_messages: ClassVar[bool] = False
    #: Per-coordinate std of its noise (its noise level; 0: none). Noisy mechanisms hold it.
    std: float | None = 0.0
    #: The distribution of its noise (``None``: no noise of its own).
    distribution: str | None = None

    def law(self, scale: float = 1.0) -> NoiseLaw | None:
        """The law of the noise on one message, its std times ``scale`` (the audit's density).

        ``None`` where the mechanism adds no noise with a density the audit can use.
        Default: :attr:`distribution` with std :attr:`std`.
        """
        if self.distribution is None or not self.std:
            return None
        return NoiseLaw(self.distribution, self.std * scale)

    def record(
        self, L: int, dim: int, aborted: int, clipped: int, aborts: Sequence[tuple[int, int, int]]
    ) -> dict[str, dict[str, Any]]:
        """Its own entries of a curve's ``summary.json`` privacy record (default: none).

        ``L`` clients sampled per round, ``dim`` the model dimension M; ``aborted``: the
        curve's aborted unit-rounds, ``clipped``: its clipped messages, ``aborts``: each
        aborted ``(repetition, iteration, unit)``. An entry's ``"log"`` lines go to
        ``run.log`` instead of the summary.
        """
        return {}

    @property
    def name(self) -> str:
        """The configuration name of this instance."""
        return self.names[0]

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> Mechanism:
        """The mechanism of a curve's settings (dotted names, e.g. ``privacy.server_variance``)."""
        return cls()

    @classmethod
    def combination(cls, mixing: np.ndarray, s: Mapping[str, Any]) -> np.ndarray:
        """The matrix the engine combines messages with, given the topology's ``mixing``.

        ``s``: the curve's settings (dotted names). Default: ``mixing`` itself (eq. 8).
        """
        return mixing

    @classmethod
    def combination_key(cls, s: Mapping[str, Any]) -> tuple:
        """What :meth:`combination` depends on besides the topology (``()``: nothing).

        Part of a curve's batching key (:meth:`pgfl.experiments.config.CurveConfig.structure`):
        curves whose combinations differ never share a simulation.
        """
        return ()

    def on_network(self, net: Any) -> Mechanism:
        """The mechanism as it runs on ``net`` (default: itself).

        Called once per batch when its curves meet their network
        (:meth:`pgfl.engine.CurveBatch.of`); a scheme whose noise depends on the topology
        (:class:`~pgfl.privacy.mechanisms.optimized.TopologyOptimized`) computes it here.
        """
        return self

    #: The mechanism's own rules as ``docs/config.md`` states them ("" if none).
    rules_doc: ClassVar[str] = ""

    @classmethod
    def check_settings(cls, s: Mapping[str, Any]) -> str | None:
        """The one-line message if a curve's settings (dotted names) cannot run it, else None.

        Called when a configuration is loaded, before any network is built
        (:attr:`rules_doc` says what is checked).
        """
        return None

    def validate(self, net: Any) -> None:  # noqa: B027 - optional hook
        """Raise :class:`~pgfl.validation.ConfigError` if the mechanism cannot run on ``net``."""

    def transcript(self, ctx: ReleaseContext) -> Transcript | None:
        """What one adversary observes over the run (``None``: no differentially private noise)."""
        return None

    def views(self, ctx: ReleaseContext) -> dict[str, Transcript | None]:
        """What each of the :data:`ADVERSARIES` observes (``None``: not protected).

        The adversaries in :attr:`protects` see :meth:`transcript`; for an
        :attr:`amplified` mechanism, on the client sample each of them does not know
        (:func:`subsampled`). Mechanisms whose adversaries see different things override
        this.
        """
        t = self.transcript(ctx)
        out: dict[str, Transcript | None] = dict.fromkeys(ADVERSARIES)
        for a in protected(self):
            if t is not None:
                out[a] = subsampled(t, ctx, a) if self.amplified else t
        return out

    def view(self, ctx: ReleaseContext, adversary: str) -> Transcript | None:
        """What one adversary observes: ``views(ctx)[adversary]`` (calibration asks this).

        A mechanism whose views are costly to compute all at once (a search over
        coalitions) answers for one adversary alone.
        """
        return self.views(ctx)[adversary]

    def observe(self, adversary: str, seen: Emitted) -> list[tuple[np.ndarray, bool]]:
        """The adversary's view of one round, built from the arrays the engine emitted.

        What :meth:`views` accounts is a description of these arrays (the audit attacks
        them, ``tests/privacy/test_audit_contract.py`` checks the two agree). Default: the
        servers exchange the messages on the combination's links. An eavesdropper reads
        every message between two servers; a curious server (or coalition) the messages
        sent to it from outside; a client of the target's unit its server's model; the
        target's own server and an observer of the uploads the unit's aggregate (with
        ``L = 1``: the target's upload; under secure aggregation, :attr:`ClientAggregation.summed`,
        all they learn for any L) and who uploaded (the sample). Returns
        ``[(array [R, d], single), ...]`` (the sample carries no noise: single):
        ``single`` where each column carries one draw of the mechanism's noise (the
        likelihood ratio of Laplace noise is then a sum over columns).
        """
        R = seen.W.shape[0]
        if adversary in UPLOADS:
            return [(seen.psi[:, seen.target], True), (seen.sample(), True)]
        if adversary == "unit_client":
            return [(seen.W[:, seen.target], False)]
        wire = seen.src != seen.dst
        if adversary != "link_eavesdropper":
            members = np.asarray(seen.observers(adversary))
            wire &= np.isin(seen.dst, members) & ~np.isin(seen.src, members)
        return [(seen.messages[:, wire].reshape(R, -1), True)]

    def secrets(
        self, members: np.ndarray, links: Any, dim: int, ctx: RoundContext
    ) -> np.ndarray | None:
        """What servers ``members`` know of the round's noise besides their own data.

        ``[R, d]``, or ``None`` where what they know is independent of the target's
        message (each server's own noise, independent of the others': the default).
        Correlated noise overrides it (pairwise terms a server shares with its
        neighbours, a dealer's correlated share): the audit gives it to a curious server
        or a coalition.
        """
        return None

    def noiseless(self) -> Mechanism:
        """The same mechanism with its noise switched off (the audit's noise-free centres).

        Default: :meth:`with_std` of 0 where the mechanism has a noise level, else itself.
        """
        try:
            return self.with_std(0.0)
        except TypeError:
            return self

    def with_std(self, std: float) -> Mechanism:
        """The same mechanism with noise of per-coordinate std ``std`` (calibration's factory)."""
        raise TypeError(f"{type(self).__name__} has no noise level to calibrate")


def noise_level(std: float | None, variance: float | None, param: Param) -> tuple[float, float]:
    """``(std, variance)`` from either one (the other derived), checked by ``param``'s range.

    The one given is kept exactly; neither means no noise. Both are accepted where they
    agree (``variance = std²`` to 1e-12: a :func:`dataclasses.replace` of a mechanism,
    which passes both back), and kept as they are.

    >>> p = Param("privacy.example_variance", "real", 0.0, "Variance.", lo=0)
    >>> noise_level(None, 0.09, p), noise_level(0.5, None, p)
    ((0.3, 0.09), (0.5, 0.25))
    """
    if std is not None and variance is not None:
        if math.isclose(std * std, variance, rel_tol=1e-12):
            return param.named("std").check(std), variance
        raise ConfigError(f"give std or variance, not both; got std={std!r}, variance={variance!r}")
    if variance is not None:
        v = param.named("variance").check(variance)
        return math.sqrt(v), v
    s = 0.0 if std is None else param.named("std").check(std)
    return s, s * s


@dataclass(frozen=True, kw_only=True)
class NoiseLevel(Mechanism):
    """The shared piece "noise of std σ": a mechanism whose noise has a level σ.

    A mechanism that adds noise of per-coordinate std σ (client noise, server noise,
    noise shares inside secure aggregation) derives from this piece beside its level's
    base class (``class ClientNoise(NoiseLevel, ClientAggregation)``) and declares
    :attr:`variance_param`, the setting of σ²; the piece then gives it

    * the fields ``std`` and ``variance`` (give one; the other is derived, the range
      checked by :attr:`variance_param`: :func:`noise_level`);
    * :attr:`~Mechanism.calibrates`: the name of :attr:`variance_param` (the setting a
      ``privacy.target_epsilon`` replaces);
    * :meth:`level_of`: the noise level of a curve's settings (for ``from_settings``);
    * :meth:`with_std`: the same mechanism at another σ (calibration's factory), every
      other field kept; :meth:`~Mechanism.noiseless` (σ = 0) follows from it unless the
      mechanism names a cheaper noise-free form (plain averaging).

    >>> from pgfl.param import Param
    >>> @dataclass(frozen=True, kw_only=True)
    ... class Hiss(NoiseLevel):
    ...     variance_param = Param("privacy.hiss_variance", "real", 0.0, "σ².", lo=0)
    ...     tone: int = 1
    >>> h = Hiss(variance=0.25, tone=3)
    >>> h.std, h.calibrates, h.with_std(2.0), h.noiseless().std
    (0.5, 'privacy.hiss_variance', Hiss(std=2.0, variance=4.0, tone=3), 0.0)
    >>> Hiss(**Hiss.level_of({"privacy.hiss_variance": 0.04})).std
    0.2
    """

    std: float | None = None
    variance: float | None = None
    #: The setting of the noise variance σ² (its range; what a target ε calibrates).
    variance_param: ClassVar[Param]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "variance_param" in vars(cls):
            cls.calibrates = cls.variance_param.name

    def __post_init__(self) -> None:
        std, variance = noise_level(self.std, self.variance, self.variance_param)
        object.__setattr__(self, "std", std)
        object.__setattr__(self, "variance", variance)

    @classmethod
    def level_of(cls, s: Mapping[str, Any]) -> dict[str, float]:
        """The noise level a curve's settings (dotted names) give: ``{"variance": σ²}``."""
        return {"variance": s[cls.variance_param.name]}

    def with_std(self, std: float) -> NoiseLevel:
        """The same mechanism, every other field kept, with noise of std ``std``."""
        return dataclasses.replace(self, std=std, variance=None)


def subsampled(t: Transcript, ctx: ReleaseContext, adversary: str) -> Transcript:
    """``t`` as ``adversary`` sees it: released on a client sample it does not know.

    Each round a unit draws L of its K clients uniformly without replacement. Credit,
    with 0 < L < K:

    * the servers' side (:data:`SERVER_SIDE`) never learns the sample: an L-of-K
      subsample (Gaussian noise: the Rényi bound of sampling without replacement,
      :class:`~pgfl.privacy.accounting.releases.SampledGaussianRelease`; Laplace noise:
      the tight pure-DP bound, :func:`~pgfl.privacy.accounting.releases.amplified_epsilon`);
    * a client of the unit knows whether it was sampled itself: the status mixture
      (:func:`status_mixture`), or nothing where it learns the whole sample
      (``ctx.sample_revealed``: secure aggregation);
    * the unit's own server draws the sample, an observer of the uploads sees who
      uploads: no credit.

    >>> t = Transcript((0.1,) * 3, std=1.0, distribution="gaussian")
    >>> ctx = ReleaseContext(mu=1, clip=1, iterations=3, clients=10, sampled=2)
    >>> subsampled(t, ctx, "other_server").sampling, subsampled(t, ctx, "own_server").sampling
    ((10, 2), None)
    >>> [c[1:3] for c in subsampled(t, ctx, "unit_client").mixture]   # of the K − 1 others
    [(9, 2), (9, 1)]
    """
    if not t.sensitivities or not 0 < ctx.sampled < ctx.clients:
        return t
    if server_side(adversary):
        return dataclasses.replace(t, sampling=(ctx.clients, ctx.sampled))
    if adversary == "unit_client" and not ctx.sample_revealed:
        return status_mixture(t, ctx)
    return t


def status_mixture(
    t: Transcript, ctx: ReleaseContext, sampled_std: float | None = None
) -> Transcript:
    """``t`` seen by a unit's client, who knows whether it was sampled itself.

    With K clients of which L are sampled, a client of the target's unit is sampled with
    probability L/K; the other L − 1 then come from the K − 1 others (the target among
    them), and if it is not, all L do. So each round is an L-of-(K−1) subsample with
    probability (K − L)/K and an (L−1)-of-(K−1) one with probability L/K, the observer
    knowing which: a mixture over its status
    (:class:`~pgfl.privacy.accounting.releases.MixtureSampledGaussianRelease`).
    ``sampled_std``: the noise std left when the observer is sampled (it knows its own
    share of client noise; default ``t.std``). A client of another unit learns nothing
    of the target's unit from its status and sees an L-of-K subsample: the transcript
    keeps that too (``sampling``), and the bound is the larger of the two.

    >>> t = Transcript((0.1,) * 3, std=1.0, distribution="gaussian")
    >>> ctx = ReleaseContext(mu=1, clip=1, iterations=3, clients=10, sampled=1)
    >>> status_mixture(t, ctx).mixture, status_mixture(t, ctx).sampling
    (((0.9, 9, 1, 1.0), (0.1, 9, 0, 1.0)), (10, 1))
    """
    K, L = ctx.clients, ctx.sampled
    low = t.std if sampled_std is None else sampled_std
    parts = ((1.0 - L / K, K - 1, L, t.std), (L / K, K - 1, L - 1, low))
    return dataclasses.replace(t, mixture=parts, sampling=(K, L))


class Emitted(NamedTuple):
    """One round of one curve as the engine emitted it: every adversary's view is built here.

    Attributes:
        messages: what travels on each link ``m → p``, ``[R, n_links, M]``.
        W: the servers' new models, ``[R, P, M]``.
        psi: the units' aggregates ``ψ_p``, ``[R, P, M]``.
        src, dst: each link's sender and receiver, ``[n_links]``.
        mixing: the topology's combination matrix ``[P, P]`` (who is whose neighbour).
        clients: the clients each unit sampled, ``[R, P, L]`` (who uploads).
        target: the unit of the changed client.
        coalition_size: k of ``server_coalition``.

    """

    messages: np.ndarray
    W: np.ndarray
    psi: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    mixing: np.ndarray
    clients: np.ndarray
    target: int = 0
    coalition_size: int = 2

    def sample(self) -> np.ndarray:
        """Which clients the target's unit sampled, ``[R, L]`` (as numbers, for a view)."""
        return self.clients[:, self.target].astype(float)

    def neighbours(self) -> np.ndarray:
        """The target's neighbours in the topology, ascending."""
        row = (self.mixing[:, self.target] != 0) | (self.mixing[self.target] != 0)
        row[self.target] = False
        return np.flatnonzero(row)

    def observers(self, adversary: str) -> list[int]:
        """The servers that make up a server-side adversary, placed next to the target.

        ``neighbour_server``: the target's first neighbour; ``other_server``: the first
        server that is not (none: an empty list); ``server_coalition``: k servers,
        neighbours first; ``neighbour_coalition``: every neighbour.
        """
        near = self.neighbours().tolist()
        P = self.mixing.shape[0]
        far = [p for p in range(P) if p != self.target and p not in near]
        if adversary == "neighbour_server":
            return near[:1]
        if adversary == "other_server":
            return far[:1]
        if adversary == "neighbour_coalition":
            return near
        return (near + far)[: self.coalition_size]


class ClientAggregation(Mechanism):
    """How a server forms ``ψ_p`` from its sampled clients' local models (eq. 7).

    ``reveals_sample``: the unit's clients learn which clients were sampled (secure
    aggregation), so sampling does not amplify against ``unit_client``. ``summed``: the
    server learns only the sum of the sampled clients' uploads (secure aggregation), so
    that its view, and what the uploads reveal, is the unit's aggregate for any L.
    """

    level: ClassVar[str] = "client"
    reveals_sample: ClassVar[bool] = False
    summed: ClassVar[bool] = False
    #: The pieces each of its names stacks, in order (:func:`stacks`); default: a name is
    #: the stack of one piece of that name.
    stacks: ClassVar[Mapping[str, tuple[str, ...]]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "stacks" not in vars(cls) and "names" in vars(cls):
            cls.stacks = {name: (name,) for name in cls.names}

    def fewest_clients(self, L: int) -> int:
        """The fewest clients a unit averages per round (``L``; secure aggregation: its ``t``)."""
        return L

    def aggregation_error(self, mu: float, share: str) -> float:
        """Per-coordinate bound on the error of the aggregate (0: exact)."""
        return 0.0

    @classmethod
    def aggregate(
        cls,
        schemes: Sequence[ClientAggregation],
        start: np.ndarray,
        local: np.ndarray,
        mu: np.ndarray,
        updates: np.ndarray,
        ctx: RoundContext,
    ) -> Aggregate:
        """Aggregate ``C'`` curves at once.

        Args:
            schemes: the curves' instances of this class, ``C'`` of them.
            start: the units' models at the start of the round ``w_{p,i−1}``, ``[C', R, P_b, M]``.
            local: the sampled clients' local models ``w_pk``, ``[C', R, P_b, L, M]``.
            mu: the curves' step sizes, ``[C']``.
            updates: whether each curve shares updates (journal §3.4) rather than models, ``[C']``.
            ctx: the round's draws and position.

        """
        raise NotImplementedError


class ServerNoise(Mechanism):
    """The noise ``g_pm`` on the message server ``m`` sends to server ``p`` (eq. 8)."""

    level: ClassVar[str] = "server"

    @classmethod
    def link_noise(
        cls, schemes: Sequence[ServerNoise], links: Any, dim: int, ctx: RoundContext
    ) -> np.ndarray:
        """Noise on the block's outgoing links for ``C'`` curves at once.

        Args:
            schemes: the curves' instances of this class, ``C'`` of them.
            links: the :class:`~pgfl.engine.network.Links` sent by the block's units
                (``links.src - ctx.start`` are block-local sender indices).
            dim: ``M``, the model dimension.
            ctx: the round's draws and position.

        Returns:
            ``g_pm`` per curve, repetition and link, ``[C', R, n_links, M]``.

        """
        raise NotImplementedError

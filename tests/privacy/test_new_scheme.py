"""A scheme defined here, with a setting of its own, is taken up by every part of pgfl.

The contract a contributor relies on: one class plus one :func:`register` call, nothing
else edited. The class lives in this file and is registered only inside the tests that
use it (the ``scheme`` fixture removes it again), so no other test sees it. A second
scheme here has a release kind of its own (:class:`ResponseCurveRelease`, defined here
too): every accountant that one of its routes reaches composes it, and an accountant
that none reaches refuses it in one line, before anything runs.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import dp_accounting
import numpy as np
import pytest
from tests.privacy.test_audit_contract import audit_contract, check_contract
from tests.test_engine import registered_server_curves, run_both, small_network

from pgfl.apps.frontier import frontier_config, run_frontier
from pgfl.commands.config_reference import reference
from pgfl.experiments.build import build_network, curve_settings
from pgfl.experiments.loader import parse_config
from pgfl.param import Param, When
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.accounting import (
    ACCOUNTANTS,
    Release,
    Transcript,
    epsilon_curve,
    make_accountant,
)
from pgfl.privacy.mechanisms import RandomNoise, ReleaseContext
from pgfl.style import (
    FALLBACK_COLORS,
    NONE,
    SCHEMES,
    SchemeStyle,
    add_style,
    curve_style,
    remove_style,
    scheme_of,
)
from pgfl.validation import ConfigError

#: The new scheme's own setting, declared beside it and nowhere else.
FACTOR = Param(
    "privacy.scaled_random_factor", "real", 1.0, "Test scheme: its noise std is this factor "
    "times the square root of `privacy.server_variance`.", lo=0, lo_open=True, batched=True,
    applies=When('privacy.server_noise = "scaled_random"',
                 lambda c: c["privacy.server_noise"] == "scaled_random"),
)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class ScaledRandom(RandomNoise):
    """Random server noise whose std is ``privacy.scaled_random_factor`` times ``σ_g``."""

    names: ClassVar[tuple[str, ...]] = ("scaled_random",)
    params: ClassVar[tuple[Param, ...]] = (*RandomNoise.params, FACTOR)

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> ScaledRandom:
        """Variance ``factor² · privacy.server_variance``."""
        variance = s["privacy.server_variance"] * s["privacy.scaled_random_factor"] ** 2
        return cls(variance=variance, distribution=s["privacy.server_distribution"])


@pytest.fixture
def scheme():
    """``ScaledRandom`` registered for one test, removed after it (no leak to other tests)."""
    mechanisms.register(ScaledRandom)
    try:
        yield ScaledRandom
    finally:
        mechanisms.unregister(ScaledRandom)


def config(privacy: Mapping[str, Any], **top: Any) -> dict[str, Any]:
    """A small experiment with one curve of the given privacy settings."""
    return {
        "name": "new_scheme", "iterations": 3, "repetitions": 1, "seed": 0,
        "topology": {"kind": "ring", "P": 4},
        "data": {"kind": "regression", "K": 4, "N": 5, "M": 2},
        "training": {"L": 2, "clip_norm": 1.0},
        "curves": [{"label": "new", "privacy": dict(privacy)}], **top,
    }  # fmt: skip


def test_a_registered_schemes_own_setting_is_read_checked_and_documented(scheme):
    cfg = parse_config(config({"server_noise": "scaled_random", "server_variance": 0.04,
                               "scaled_random_factor": 3.0}))  # fmt: skip
    curve = cfg.curves[0]
    assert curve.privacy.scaled_random_factor == 3.0
    built = mechanisms.build("server", curve.values())
    assert type(built) is ScaledRandom
    assert math.isclose(built.std, 3.0 * 0.2, rel_tol=1e-12)
    # its range is checked in one line naming it
    with pytest.raises(ConfigError, match=r"privacy\.scaled_random_factor must be .*; got -1"):
        parse_config(config({"server_noise": "scaled_random", "server_variance": 0.04,
                             "scaled_random_factor": -1}))  # fmt: skip
    # configurations that never use it still load, with its default
    plain = parse_config(config({"server_noise": "random", "server_variance": 0.04}))
    assert plain.curves[0].privacy.scaled_random_factor == FACTOR.default
    # the reference documents it, in the privacy table, once
    rows = [r for r in reference().splitlines() if r.startswith("| `privacy.scaled_random_f")]
    assert len(rows) == 1 and "Test scheme" in rows[0]


def test_a_removed_scheme_takes_its_setting_with_it(scheme):
    assert FACTOR.name in PARAMS
    mechanisms.unregister(scheme)
    try:
        assert FACTOR.name not in PARAMS
        with pytest.raises(ConfigError, match=r"unknown setting privacy\.scaled_random_factor"):
            parse_config(config({"server_noise": "random", "scaled_random_factor": 2.0}))
        assert "scaled_random" not in reference()
    finally:
        mechanisms.register(scheme)  # the fixture removes it again


# ------------------------------------------------ every registered scheme, through every surface
#: Settings a scheme needs beyond its defaults to be worth running (a new one runs as it is).
EXTRA = {
    "pairwise_cancelling": {"pairwise_variance": 1.0},
    "gossip": {"gossip_steps": 2},
    "scaled_random": {"scaled_random_factor": 2.0},
    **{n: {"message_clip": 0.1} for n in mechanisms.CLIENT if n.startswith("clip+")},
}


def every_scheme() -> dict[str, Any]:
    """One curve per registered scheme (both levels, read from the registry at run time)."""
    curves = []
    for level in ("client", "server"):
        table = mechanisms.CLIENT if level == "client" else mechanisms.SERVER
        for name, cls in table.items():
            noise = (cls.calibrates or "privacy.none").removeprefix("privacy.")
            priv = {f"{level}_noise": name, **EXTRA.get(name, {})}
            if cls.calibrates is not None:
                priv[noise] = 0.25
            curves.append({"label": f"{level}:{name}", "privacy": priv})
    raw = config({})
    raw["curves"] = curves
    return raw


def toml_of(raw: Mapping[str, Any]) -> str:
    """``raw`` as a TOML file (tables and an array of curve tables)."""

    def value(v: Any) -> str:
        if isinstance(v, str):
            return f'"{v}"'
        return str(v).lower() if isinstance(v, bool) else repr(v)

    lines = [f"{k} = {value(v)}" for k, v in raw.items() if not isinstance(v, (dict, list))]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += [f"[{k}]", *(f"{a} = {value(b)}" for a, b in v.items())]
    for curve in raw["curves"]:
        lines += ["[[curves]]", f'label = "{curve["label"]}"', "[curves.privacy]"]
        lines += [f"{a} = {value(b)}" for a, b in curve["privacy"].items()]
    return "\n".join(lines) + "\n"


def run_and_report(raw: Mapping[str, Any], tmp_path: Path, capsys) -> tuple[dict, dict]:
    """``pgfl run FILE --json`` and ``pgfl privacy config FILE --json``: curves by label."""
    from pgfl.cli import main  # lazy: the whole command line, for two tests

    path = tmp_path / "experiment.toml"
    path.write_text(toml_of(raw), encoding="utf-8")
    capsys.readouterr()
    main(["run", str(path), "--out", str(tmp_path / "out"), "--json"])
    summary = json.loads(capsys.readouterr().out)
    main(["privacy", "config", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)["curves"]
    return {c["label"]: c for c in summary["curves"]}, report


def test_a_new_scheme_runs_is_calibrated_accounted_and_styled(scheme, tmp_path, capsys):
    raw = config({})
    raw["curves"] = [
        {"label": "plain", "privacy": {"server_noise": "random", "server_variance": 0.25,
                                       "server_distribution": "gaussian"}},
        {"label": "scaled", "privacy": {"server_noise": "scaled_random", "server_variance": 0.25,
                                        "server_distribution": "gaussian",
                                        "scaled_random_factor": 2.0}},
        {"label": "calibrated", "privacy": {"server_noise": "scaled_random",
                                            "server_distribution": "gaussian",
                                            "target_epsilon": 2.0}},
    ]  # fmt: skip
    curves, report = run_and_report(raw, tmp_path, capsys)
    eps = {k: c["epsilon"]["pld"] for k, c in curves.items()}
    # twice the std of the same Gaussian release: ε is that of noise multiplier 2z
    assert 0 < eps["scaled"] < eps["plain"]
    assert eps["calibrated"] == pytest.approx(2.0, rel=1e-2)
    assert curves["calibrated"]["settings"]["server_variance"] > 0
    for label in curves:  # pgfl privacy config tells the same ε without running
        assert report[label]["epsilon"]["pld"] == pytest.approx(eps[label], rel=1e-9), label
    # the figures give the new scheme one colour of its own, not random noise's
    styles = {k: curve_style(c["settings"], k) for k, c in curves.items()}
    assert styles["scaled"].scheme == styles["calibrated"].scheme == "scaled_random"
    assert styles["scaled"].color == styles["calibrated"].color != styles["plain"].color
    assert styles["scaled"].color not in {s.color for s in SCHEMES.values()}


def test_a_declared_style_is_the_schemes_in_every_figure(scheme):
    # its own colour, marker and label words; a style of its pair with secure aggregation;
    # nothing edited in pgfl.style, whose table holds only what the registry declared
    mine = SchemeStyle(
        "declared_noise", "a declared style", "#123456", "o", labels=("*declared*", "dn*")
    )
    pair = SchemeStyle("declared_pair", "secure aggregation + declared", "#654321", "s",
                       of=("secure_aggregation", "declared_noise"))  # fmt: skip
    cls = type("Declared", (ScaledRandom,), {"names": ("declared_noise",), "style": mine})
    before = dict(SCHEMES)
    mechanisms.register(cls)
    add_style(pair)
    try:
        style = curve_style({"server_noise": "declared_noise"}, "any label")
        assert (style.scheme, style.color, style.marker) == ("declared_noise", "#123456", "o")
        assert style.phase == len(before)  # after the built-in schemes: theirs unchanged
        assert scheme_of(label="dn@0.5") == scheme_of(label="my declared curve") == mine.name
        assert scheme_of(label="my dn curve") == ""  # "dn*": at the start only
        both = {"client_noise": "secure_aggregation", "server_noise": "declared_noise"}
        assert curve_style(both).color == "#654321"
        assert scheme_of({**both, "client_noise": "laplace"}) == "declared_noise"
        assert {k: SCHEMES[k] for k in before} == before
    finally:
        remove_style(pair.name)
        mechanisms.unregister(cls)
    assert "declared_noise" not in SCHEMES and dict(SCHEMES) == before
    assert scheme_of({"server_noise": "declared_noise"}) == "declared_noise"  # own colour again
    assert curve_style({"server_noise": "declared_noise"}).color in FALLBACK_COLORS


def test_the_style_module_names_no_scheme():
    # every built-in style comes from a mechanism's declaration: pgfl.style's code (its
    # docstrings' examples aside) names no scheme key nor configuration name, but "none"
    # (privacy.*_noise's default), the distributions (its line styles) and the settings key
    # "client_noise" (the client level's, also the key of client noise's style)
    import pgfl.style
    from pgfl.privacy.mechanisms.client import DISTRIBUTIONS

    tree = ast.parse(Path(pgfl.style.__file__).read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, DOCUMENTED) and n.body
            and isinstance(n.body[0], ast.Expr)}  # fmt: skip
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
               and isinstance(n.value, str) and id(n) not in docs}  # fmt: skip
    names = set(SCHEMES) | set(mechanisms.CLIENT) | set(mechanisms.SERVER)
    assert len(names) > 10 and "graph_homomorphic" in names
    assert strings & names <= {NONE, *DISTRIBUTIONS, "client_noise"}
    # and a subclass of a styled mechanism is a scheme of its own (ScaledRandom of random)
    assert mechanisms.RandomNoise.style is not None and "style" not in vars(ScaledRandom)


DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def test_the_engine_equals_the_loop_reference_for_a_new_scheme(scheme):
    curves = registered_server_curves()
    assert "scaled_random" in curves  # read from the registry: nothing edited for it
    run_both(small_network(), [curves["random"], curves["scaled_random"]], rounds=2)


def test_a_new_scheme_is_audited_below_its_epsilon(scheme):
    check_contract(audit_contract("server", "scaled_random"))


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
def test_every_registered_scheme_runs_and_is_accounted_and_styled(scheme, tmp_path, capsys):
    raw = every_scheme()
    labels = [c["label"] for c in raw["curves"]]
    assert "server:scaled_random" in labels  # the registry, read now, has the new scheme
    curves, report = run_and_report(raw, tmp_path, capsys)
    assert set(curves) == set(labels) == set(report)
    for label, c in curves.items():
        assert math.isfinite(c["centroid_msd_db"]), label
        style = curve_style(c.get("settings"), label)
        assert style.scheme and style.color, label
    new, plain = (curves[f"server:{n}"]["epsilon"]["pld"] for n in ("scaled_random", "random"))
    assert 0 < new < plain  # twice the std of plain random noise: a smaller ε


# ----------------------------------------------------------- a new adversary, in one place
@pytest.fixture
def tap():
    """An adversary added for one test: it sees no more than a neighbouring server."""
    mechanisms.add_adversary("one_link_tap", "reads one server's messages to one neighbour",
                             like="neighbour_server")  # fmt: skip
    try:
        yield "one_link_tap"
    finally:
        mechanisms.remove_adversary("one_link_tap")


def test_a_new_adversary_is_protected_calibrated_against_and_audited(scheme, tap):
    for table in (mechanisms.CLIENT, mechanisms.SERVER):
        for name, cls in table.items():  # no mechanism edited: protected where its like is
            like = "neighbour_server" in mechanisms.protected(cls)
            assert (tap in mechanisms.protected(cls)) == like, name
    raw = config({"server_noise": "scaled_random", "server_distribution": "gaussian",
                  "target_epsilon": 2.0, "adversary": tap})  # fmt: skip
    cfg = parse_config(raw)  # the configuration accepts it
    raw["curves"][0]["privacy"]["adversary"] = "neighbour_server"
    like = parse_config(raw)
    stds = []
    for c in (cfg, like):
        net = build_network(c.curves[0], c.seed)
        stds.append(curve_settings(c.curves[0], c.iterations, net).server.std)
    assert stds[0] == stds[1] > 0  # calibrated to what it sees: its like's view
    results = audit_contract("server", "scaled_random")
    assert tap in results
    check_contract(results)
    with pytest.raises(ConfigError, match=r"does not protect against it"):
        parse_config(config({"server_noise": "scaled_random", "server_distribution": "gaussian",
                             "target_epsilon": 2.0, "adversary": "own_server"}))  # fmt: skip


# ------------------------------------------------------- a release kind of its own, in one place
def response_rdp(epsilon: float, orders: np.ndarray) -> np.ndarray:
    """Rényi DP of binary randomized response with flip probability 1/(1 + e^ε).

    The largest Rényi divergence of any ε-DP pair (Mironov 2017, Prop. 5 attains it):
    ``D_α = ln(p^α q^{1−α} + q^α p^{1−α}) / (α − 1)``, p = e^ε/(1 + e^ε), q = 1 − p.
    """
    a = np.asarray(orders, dtype=float)
    lp, lq = -np.log1p(np.exp(-epsilon)), -np.log1p(np.exp(epsilon))
    return np.logaddexp(a * lp + (1 - a) * lq, a * lq + (1 - a) * lp) / (a - 1)


@dataclass(frozen=True)
class ResponseCurveRelease(Release):
    """ε-DP copies of M-dimensional Laplace noise, composed by the Rényi curve of ε-DP.

    Routes: a pure ε (every pure-DP theorem, the PLD as randomized response) and its own
    Rényi curve (:func:`response_rdp`), which the Rényi accountant adds up.
    """

    kind: ClassVar[str] = "response-curve"
    epsilon: float
    count: int = 1

    @property
    def epsilon0(self) -> float | None:
        return self.epsilon

    def rdp(self, orders: np.ndarray) -> np.ndarray:
        return response_rdp(self.epsilon, orders)

    def describe(self) -> str:
        return "M-dimensional Laplace noise charged as an epsilon-DP release (a test kind)"

    def note(self, accountant: str, line: str) -> str:
        return line + " [response-curve release]" if accountant == "rdp" else line

    @classmethod
    def of(cls, t: Transcript, sensitivities: Sequence[float], paper: bool) -> list[Release]:
        """ε = √M Δ₂/b per copy (the ℓ₁ charge, b = σ/√2), copies added; no sampling credit."""
        b = t.std / math.sqrt(2.0)
        return [cls(math.sqrt(t.dim) * s / b * t.copies) for s in sensitivities]


@dataclass(frozen=True)
class CurveOnlyRelease(ResponseCurveRelease):
    """The same release known only by its Rényi curve: no pure ε for the theorems."""

    kind: ClassVar[str] = "curve-only"

    @property
    def epsilon0(self) -> float | None:
        return None


@dataclass(frozen=True, kw_only=True)
class ResponseNoise(RandomNoise):
    """Laplace server noise whose transcript names its own release kind."""

    names: ClassVar[tuple[str, ...]] = ("response_noise",)
    distributions: ClassVar[tuple[str, ...]] = ("laplace",)
    frontier: ClassVar = None
    release: ClassVar[type[Release]] = ResponseCurveRelease

    @classmethod
    def from_settings(cls, s: Mapping[str, Any]) -> ResponseNoise:
        return cls(variance=s["privacy.server_variance"])

    def transcript(self, ctx: ReleaseContext) -> Transcript:
        return dataclasses.replace(super().transcript(ctx), release=self.release)


@dataclass(frozen=True, kw_only=True)
class CurveOnlyNoise(ResponseNoise):
    names: ClassVar[tuple[str, ...]] = ("curve_only_noise",)
    release: ClassVar[type[Release]] = CurveOnlyRelease


@pytest.fixture
def kinds():
    """Both schemes registered for one test, removed after it."""
    for cls in (ResponseNoise, CurveOnlyNoise):
        mechanisms.register(cls)
    try:
        yield
    finally:
        for cls in (ResponseNoise, CurveOnlyNoise):
            mechanisms.unregister(cls)


CTX = ReleaseContext(mu=0.5, clip=1.0, iterations=20, dim=3)


def test_a_new_release_kind_is_composed_by_every_accountant_its_routes_reach():
    t = ResponseNoise(std=40.0).transcript(CTX)
    assert t.kind is ResponseCurveRelease
    e0 = math.sqrt(3) * 2 * 0.5 * 1.0 / (40.0 / math.sqrt(2.0))  # √M · 2μB / b
    curve = epsilon_curve(t, delta=1e-5)
    assert set(curve) == set(ACCOUNTANTS)  # a pure ε: every accountant reaches it
    final = curve.final()
    assert final["basic"] == pytest.approx(20 * e0, rel=1e-12)  # Σ ε_t
    assert final["paper"] == pytest.approx(sum(range(1, 21)) * e0, rel=1e-12)  # Δ(j) = 2μBj
    # its own curve, against dp_accounting composing randomized response independently
    library = dp_accounting.rdp.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE
    )
    library.compose(dp_accounting.RandomizedResponseDpEvent(2 / (1 + math.exp(e0)), 2), 20)
    assert final["rdp"] == pytest.approx(library.get_epsilon(1e-5), rel=1e-9)
    assert final["rdp"] < final["basic"] and final["advanced"] <= final["basic"]
    assert final["pld"] <= final["rdp"] + 1e-9
    # notes and the release line come from the release
    s = curve.summary()
    assert s["epsilon_release"] == ResponseCurveRelease(e0).describe()
    assert s["epsilon_notes"]["rdp"].endswith("[response-curve release]")
    assert "response-curve" not in s["epsilon_notes"]["basic"]


def test_an_accountant_refuses_a_release_it_cannot_compose_in_one_line():
    release = CurveOnlyRelease(0.1)
    for name in ("paper", "basic", "advanced", "kairouz"):
        with pytest.raises(ConfigError) as err:
            make_accountant(name).compose(release)
        msg = str(err.value)
        assert msg == (f"accountant {name!r} cannot compose a curve-only release; "
                       "use 'pld' or 'rdp'"), msg  # fmt: skip
    # the two that can agree: its curve, converted (the PLD reports the Rényi bound)
    rdp = make_accountant("rdp").compose(release, 50).get_epsilon(1e-5)
    pld = make_accountant("pld").compose(release, 50)
    assert pld.get_epsilon(1e-5) == rdp and pld.source == "rdp"
    # a transcript of that kind reports by default only what composes it
    t = CurveOnlyNoise(std=40.0).transcript(CTX)
    assert set(epsilon_curve(t)) == {"pld", "rdp"}
    with pytest.raises(ConfigError, match=r"^accountant 'kairouz' cannot compose a curve-only"):
        epsilon_curve(t, accountants=["pld", "kairouz"])


@dataclass(frozen=True)
class EventRelease(Release):
    """A release known only by a ``dp_accounting`` event."""

    kind: ClassVar[str] = "event-only"
    event: Any
    count: int = 1

    def dp_event(self) -> Any:
        return self.event


def test_a_release_kind_with_only_a_library_event_is_composed_where_the_library_can():
    z, steps = 3.0, 40
    release = EventRelease(dp_accounting.GaussianDpEvent(z))
    library = dp_accounting.rdp.RdpAccountant()  # the library on its own
    library.compose(dp_accounting.GaussianDpEvent(z), steps)
    rdp = make_accountant("rdp").compose(release, steps).get_epsilon(1e-5)
    assert rdp == pytest.approx(library.get_epsilon(1e-5), rel=1e-12)
    pld = make_accountant("pld").compose(release, steps)
    assert pld.get_epsilon(1e-5) == rdp and pld.source == "rdp"  # no PLD built: the Rényi bound
    with pytest.raises(ConfigError, match=r"^accountant 'paper' cannot compose an event-only"):
        make_accountant("paper").compose(release)
    # an event the library cannot compose: nobody can, and the line says what would help
    odd = EventRelease(dp_accounting.UnsupportedDpEvent())
    with pytest.raises(ConfigError, match=r"nor can any other: give the release a pure "):
        make_accountant("rdp").compose(odd)


def test_a_new_release_kind_runs_is_calibrated_reported_and_styled(kinds, tmp_path, capsys):
    raw = config({})
    raw["curves"] = [
        {"label": "own", "privacy": {"server_noise": "response_noise", "server_variance": 0.25,
                                     "accountants": ["pld", "paper", "rdp"]}},
        {"label": "calibrated", "privacy": {"server_noise": "response_noise",
                                            "target_epsilon": 2.0}},
    ]  # fmt: skip
    curves, report = run_and_report(raw, tmp_path, capsys)
    own = curves["own"]
    assert own["epsilon_release"] == ResponseCurveRelease(1.0).describe()
    assert own["epsilon_notes"]["rdp"].endswith("[response-curve release]")
    assert own["epsilon"]["pld"] <= own["epsilon"]["rdp"] <= own["epsilon"]["paper"]
    assert curves["calibrated"]["epsilon"]["pld"] == pytest.approx(2.0, rel=1e-3)
    for label in curves:  # pgfl privacy config tells the same ε without running
        assert report[label]["epsilon"] == curves[label]["epsilon"], label
        assert report[label]["epsilon_release"] == curves[label]["epsilon_release"], label
    from pgfl.cli import main  # lazy: the whole command line

    capsys.readouterr()
    main(["privacy", "config", str(tmp_path / "experiment.toml")])  # the table, in words
    lines = capsys.readouterr().out.splitlines()
    assert f"curve own releases: {ResponseCurveRelease(1.0).describe()}" in lines
    style = curve_style(own["settings"], "own")
    assert style.scheme == "response_noise"
    assert style.color not in {s.color for s in SCHEMES.values()}


def test_an_unsupported_release_kind_stops_the_run_in_one_line(kinds, tmp_path, capsys):
    from pgfl.cli import main  # lazy: the whole command line, for one test

    raw = config({"server_noise": "curve_only_noise", "server_variance": 0.25,
                  "accountants": ["pld", "basic"]})  # fmt: skip
    path = tmp_path / "experiment.toml"
    path.write_text(toml_of(raw), encoding="utf-8")
    for argv in (["run", str(path), "--out", str(tmp_path / "out")],
                 ["privacy", "config", str(path)]):  # fmt: skip
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err == ("error: accountant 'basic' cannot compose a curve-only release; "
                       "use 'pld' or 'rdp'"), err  # fmt: skip
    assert not (tmp_path / "out").exists()  # nothing written
    raw["curves"][0]["privacy"]["accountants"] = ["pld", "rdp"]  # what it says would work
    curves, _ = run_and_report(raw, tmp_path, capsys)
    assert math.isfinite(curves["new"]["epsilon"]["rdp"])


@pytest.mark.filterwarnings("ignore::pgfl.param.SettingWarning")
def test_a_new_release_kind_is_audited_below_its_epsilon(kinds):
    check_contract(audit_contract("server", "response_noise"))


def test_a_new_release_kind_is_on_the_frontier(kinds, tmp_path):
    cfg = frontier_config("regression-record", 4, epsilons=(1.0,), schemes=("response_noise",),
                          repetitions=1)  # fmt: skip
    summary = run_frontier(tmp_path, configs={"regression-record-T4": cfg})
    (c,) = [c for c in summary["curves"] if c["label"] == "response_noise"]
    assert 0 < c["epsilon"][0] <= 1.0 * (1 + 1e-9)
    assert math.isfinite(c["centroid_msd_db"][0])

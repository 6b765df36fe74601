"""Pieces mechanisms share and compose (issue 27, item 4).

The "noise of std σ" piece (:class:`~pgfl.privacy.mechanisms.base.NoiseLevel`): one
definition of a noise level, its setting, its calibration factory, used by every built-in
mechanism that has one. Client-level stacks (``privacy.client_noise`` as a list of pieces,
:func:`~pgfl.privacy.mechanisms.base.client_stack`): a stack the registry composes is its
scheme (same bits, same ε), any other is refused in one line, exit 2, nothing written;
noise then secure aggregation is composed from its pieces (tests/privacy/test_chain.py).
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgfl.experiments.loader import parse_config
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms.base import NoiseLevel, client_stack, noise_level, stacks
from pgfl.validation import ConfigError

#: Settings some built-in schemes need beside their noise level to be built.
NEEDS: dict[str, dict[str, Any]] = {
    "pairwise_cancelling": {"pairwise_ratio": 2.0},
    **{n: {"message_clip": 0.1} for n in mechanisms.CLIENT if n.startswith("clip+")},
}


def built(level: str, name: str, variance: float) -> mechanisms.Mechanism:
    """The built-in scheme ``name`` at ``level`` from a loaded config, at this noise variance."""
    cls = mechanisms.REGISTRY[level][name]
    priv = {f"{level}_noise": name, cls.calibrates.removeprefix("privacy."): variance}
    raw = {
        "name": "pieces", "iterations": 2, "repetitions": 1, "seed": 0,
        "topology": {"kind": "ring", "P": 4},
        "data": {"kind": "regression", "K": 4, "N": 5, "M": 2},
        "training": {"L": 2, "clip_norm": 1.0},
        "curves": [{"label": name, "privacy": priv | NEEDS.get(name, {})}],
    }  # fmt: skip
    return mechanisms.build(level, parse_config(raw).curves[0].values())


NOISY = [
    (level, name)
    for level in ("client", "server")
    for name, cls in mechanisms.REGISTRY[level].items()
    if cls.calibrates is not None
]


def test_every_builtin_noise_level_is_the_shared_piece():
    # the built-ins with a noise level: client laplace/gaussian, distributed DP, and every
    # noisy server scheme; each declares its level once, through the piece
    assert {n for _, n in NOISY} >= {"laplace", "gaussian", "distributed_gaussian", "skellam",
                                      "random", "gossip", "topology_optimized"}  # fmt: skip
    for level, name in NOISY:
        cls = mechanisms.REGISTRY[level][name]
        if issubclass(cls, mechanisms.Chain):  # a composed stack: its noise piece's level
            assert cls.calibrates == cls.noise_piece.calibrates, name
            cls = cls.noise_piece
        assert issubclass(cls, NoiseLevel), name
        assert cls.calibrates == cls.variance_param.name
        assert cls.variance_param is PARAMS[cls.calibrates]


@pytest.mark.parametrize(("level", "name"), NOISY)
def test_the_level_is_read_from_its_setting_and_with_std_keeps_the_rest(level, name):
    m = built(level, name, 0.25)
    assert (m.std, m.variance) == (0.5, 0.25)  # √0.25, exactly
    other = m.with_std(1.5)
    assert type(other) is type(m)
    assert (other.std, other.variance) == (1.5, 2.25)
    assert other.with_std(0.5) == m  # every other field kept (a pairwise ratio: σ_cor = rσ)
    assert m.noiseless().std == 0.0


def test_a_noise_level_is_given_once_and_checked_by_its_setting():
    p = mechanisms.ClientNoise.variance_param
    with pytest.raises(ConfigError, match="not both"):
        noise_level(0.5, 0.3, p)
    with pytest.raises(
        ConfigError, match=r"variance must be a real number in \[0, inf\); got -1.0"
    ):
        noise_level(None, -1.0, p)
    assert noise_level(None, None, p) == (0.0, 0.0)
    with pytest.raises(ConfigError, match=r"std must be a real number in \[0, inf\); got -0.5"):
        noise_level(-0.5, 0.25, p)  # both, consistent, but out of range


@given(st.floats(0.0, 1e6, allow_subnormal=False))
def test_a_replaced_mechanism_keeps_its_level(variance):
    # dataclasses.replace passes std and variance back together: accepted as they are
    m = mechanisms.ClientNoise(distribution="laplace", variance=variance)
    r = dataclasses.replace(m, distribution="gaussian")
    assert (r.std, r.variance, r.distribution) == (m.std, m.variance, "gaussian")
    assert r.std == math.sqrt(variance)


# ------------------------------------------------------------ client-level stacks
#: A small run with a finite clip norm (distributed DP needs it) and L = 3 clients a round.
RUN = """\
name = "stack"
iterations = 4
repetitions = 2
seed = 3
[topology]
kind = "ring"
P = 3
[data]
kind = "regression"
K = 4
N = 6
M = 2
[training]
L = 3
mu = 0.2
clip_norm = 1.0
[privacy]
client_noise = {noise}
client_variance = 0.09
ddp_variance = 0.5
accountants = ["rdp"]
"""


def run_toml(tmp_path: Path, name: str, noise: str, capsys) -> tuple[dict, str]:
    """``pgfl run`` of :data:`RUN` with ``privacy.client_noise = noise`` (TOML): summary, curves."""
    from pgfl.cli import main  # lazy: the whole command line, for these tests only

    path = tmp_path / f"{name}.toml"
    path.write_text(RUN.format(noise=noise), encoding="utf-8")
    main(["run", str(path), "--out", str(tmp_path / name), "--json"])
    summary = json.loads(capsys.readouterr().out)
    return summary, (tmp_path / name / "curves.csv").read_text(encoding="utf-8")


def values_of(tree: Any, key: str) -> list:
    """Every value of ``key`` in a JSON tree."""
    if isinstance(tree, dict):
        return [v for k, v in tree.items() if k == key] + [
            x for v in tree.values() for x in values_of(v, key)
        ]
    return [x for v in tree for x in values_of(v, key)] if isinstance(tree, list) else []


def toml_list(pieces: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{p}"' for p in pieces) + "]"


def test_the_builtin_names_are_the_literatures_stacks():
    # Kairouz, Liu & Steinke (arXiv:2102.06387) and Agarwal, Kairouz & Liu
    # (arXiv:2110.04995): each client adds a noise share, secure aggregation sums them
    assert stacks() == {
        (): "none",
        ("laplace",): "laplace",
        ("gaussian",): "gaussian",
        ("secure_aggregation",): "secure_aggregation",
        ("discrete_gaussian_shares", "secure_aggregation"): "distributed_gaussian",
        ("skellam_shares", "secure_aggregation"): "skellam",
        # composed from its pieces (pgfl.privacy.mechanisms.chain): noise, then the sum
        ("laplace", "secure_aggregation"): "laplace+secure_aggregation",
        ("gaussian", "secure_aggregation"): "gaussian+secure_aggregation",
        # DP-FedAvg's clipping before the noise (McMahan et al., arXiv:1710.06963)
        ("clip", "laplace"): "clip+laplace",
        ("clip", "gaussian"): "clip+gaussian",
        ("clip", "laplace", "secure_aggregation"): "clip+laplace+secure_aggregation",
        ("clip", "gaussian", "secure_aggregation"): "clip+gaussian+secure_aggregation",
    }


STACKS = [
    ("distributed_gaussian", ("discrete_gaussian_shares", "secure_aggregation")),
    ("gaussian", ("gaussian",)),
    ("secure_aggregation", ("secure_aggregation",)),
    ("gaussian+secure_aggregation", ("gaussian", "secure_aggregation")),  # composed
]


@pytest.mark.parametrize(("name", "pieces"), STACKS)
def test_a_stack_runs_bit_for_bit_as_its_name_with_the_same_epsilon(tmp_path, capsys, name, pieces):
    by_name, curves_by_name = run_toml(tmp_path, "name", f'"{name}"', capsys)
    by_stack, curves_by_stack = run_toml(tmp_path, "stack", toml_list(pieces), capsys)
    assert curves_by_stack == curves_by_name  # every metric, every iteration, same text
    assert by_stack["curves"] == by_name["curves"]  # ε per adversary, notes, scope, settings
    given = json.loads((tmp_path / "stack" / "config.json").read_text(encoding="utf-8"))
    assert list(pieces) in values_of(given, "client_noise")  # the configuration as given
    curve = by_stack["curves"][0]
    assert curve["settings"]["client_noise"] == name
    if name != "secure_aggregation":  # a noisy link: a finite ε
        assert 0 < curve["epsilon_by_adversary"]["own_server"] < math.inf


@pytest.mark.parametrize(
    ("pieces", "why"),
    [
        (["secure_aggregation", "secure_aggregation"], "'secure_aggregation' appears 2 times"),
        (["discrete_gaussian_shares"], "'discrete_gaussian_shares' needs 'secure_aggregation'"),
        (["secure_aggregation", "skellam_shares"], "'skellam_shares' needs 'secure_aggregation'"),
        (["gausian"], "unknown piece 'gausian' (did you mean 'gaussian'?)"),
        (["laplace", "gaussian"], "no scheme composes these pieces"),
    ],
)
def test_an_invalid_stack_is_refused_in_one_line_and_nothing_written(
    tmp_path, monkeypatch, capsys, pieces, why
):
    from pgfl.cli import main  # lazy: the whole command line, for these tests only

    (tmp_path / "bad.toml").write_text(RUN.format(noise=toml_list(pieces)), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(SystemExit) as stop:
        main(["run", "bad.toml", "--out", "out"])
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 1, err
    assert f"privacy.client_noise = {pieces!r}: {why}" in err[0]
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


PIECES = sorted({p for stack in stacks() for p in stack})


@given(st.lists(st.sampled_from(PIECES), max_size=4))
def test_a_list_of_pieces_is_its_stacks_name_or_refused(pieces):
    known = stacks()
    if tuple(pieces) in known:
        assert client_stack("privacy.client_noise", pieces) == known[tuple(pieces)]
    else:
        with pytest.raises(ConfigError) as refused:
            client_stack("privacy.client_noise", pieces)
        assert "\n" not in str(refused.value)
        assert str(refused.value).startswith(f"privacy.client_noise = {pieces!r}: ")

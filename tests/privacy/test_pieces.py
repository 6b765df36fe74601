"""Pieces mechanisms share and compose (issue 27, item 4).

The "noise of std σ" piece (:class:`~pgfl.privacy.mechanisms.base.NoiseLevel`): one
definition of a noise level, its setting, its calibration factory, used by every built-in
mechanism that has one.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgfl.experiments.loader import parse_config
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms.base import NoiseLevel, noise_level
from pgfl.validation import ConfigError

#: Settings some built-in schemes need beside their noise level to be built.
NEEDS: dict[str, dict[str, Any]] = {"pairwise_cancelling": {"pairwise_ratio": 2.0}}


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


@given(st.floats(0.0, 1e6, allow_subnormal=False))
def test_a_replaced_mechanism_keeps_its_level(variance):
    # dataclasses.replace passes std and variance back together: accepted as they are
    m = mechanisms.ClientNoise(distribution="laplace", variance=variance)
    r = dataclasses.replace(m, distribution="gaussian")
    assert (r.std, r.variance, r.distribution) == (m.std, m.variance, "gaussian")
    assert r.std == math.sqrt(variance)

"""A scheme defined here, with a setting of its own, is taken up by every part of pgfl.

The contract a contributor relies on: one class plus one :func:`register` call, nothing
else edited. The class lives in this file and is registered only inside the tests that
use it (the ``scheme`` fixture removes it again), so no other test sees it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from pgfl.commands.config_reference import reference
from pgfl.experiments.loader import parse_config
from pgfl.param import Param, When
from pgfl.params import PARAMS
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import RandomNoise
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

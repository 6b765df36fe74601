"""What the rest of pgfl reads from a mechanism is its declaration, never a list of names.

Deployment (``not_deployed``, ``trusted``), the summary's own records (``record``), the
secure-aggregation settings' conditions (``summed``, the settings it owns), the figures'
sweeps and labels (``calibrates``) and the frontier per adversary (``by_adversary``) each
take up a scheme registered here, with nothing else edited.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from tests.privacy.test_new_scheme import ScaledRandom, config

from pgfl.apps.frontier import adversary_configs, adversary_schemes
from pgfl.apps.runner import run_experiment
from pgfl.deploy.job import check_deployable, trusted_parties
from pgfl.experiments.loader import parse_config
from pgfl.files import read_json
from pgfl.plots import scheme_label
from pgfl.plots.sweeps import _relevant
from pgfl.privacy import mechanisms
from pgfl.privacy.mechanisms import CentralNoise, Mean, PairwiseCancelling, RandomNoise
from pgfl.privacy.mechanisms.base import FrontierLine
from pgfl.privacy.secagg.config import encodes_fixed_point, runs_secure_aggregation
from pgfl.validation import ConfigError


@dataclass(frozen=True, kw_only=True)
class Recorded(ScaledRandom):
    """A server scheme with its own record in ``summary.json``, no deployment, a dealer."""

    names: ClassVar[tuple[str, ...]] = ("recorded_random",)
    not_deployed: ClassVar[str | None] = "its test protocol has no processes"
    trusted: ClassVar[Mapping[str, str]] = {"dealer": "a test dealer"}
    frontier: ClassVar[Mapping[str, FrontierLine] | None] = {
        "recorded_line": FrontierLine({"privacy.server_noise": "recorded_random",
                                       "privacy.server_distribution": "gaussian"},
                                      by_adversary=True),
    }  # fmt: skip

    def record(self, L, dim, aborted, clipped, aborts) -> dict[str, dict[str, Any]]:
        """``{"recorded": ...}`` with what it was given and one log line."""
        return {"recorded": {"L": L, "dim": dim, "aborted": aborted, "std": self.std,
                             "log": [f"std {self.std:g}"]}}  # fmt: skip


@pytest.fixture
def recorded():
    """``Recorded`` registered for one test, removed after it."""
    mechanisms.register(Recorded)
    try:
        yield Recorded
    finally:
        mechanisms.unregister(Recorded)


def _curve(server: mechanisms.Mechanism, client: mechanisms.Mechanism | None = None) -> Any:
    return SimpleNamespace(client=client or Mean(), server=server)


def test_deployment_reads_what_the_mechanism_declares(recorded):
    with pytest.raises(ConfigError) as err:
        check_deployable((_curve(RandomNoise(std=1.0)), _curve(Recorded(std=1.0))), ["a", "b"])
    line = str(err.value)
    assert "'recorded_random' (curve 'b')" in line and "its test protocol has no processes" in line
    deployable = line.split("deployable: ")[1].split(", ")
    # gossip says why not; a subclass of a deployed scheme inherits its protocol
    assert {"random", "central", "none"} <= set(deployable)
    assert ScaledRandom.not_deployed is None
    assert "gossip" not in deployable and "recorded_random" not in deployable
    check_deployable((_curve(CentralNoise(std=1.0)),), ["c"])  # no error
    assert trusted_parties((_curve(Recorded(std=1.0)), _curve(CentralNoise(std=1.0)))) == (
        "aggregator",
        "dealer",
    )
    assert trusted_parties((_curve(RandomNoise(std=1.0)),)) == ()


def test_a_mechanisms_own_record_reaches_the_summary_and_the_log(recorded, tmp_path):
    raw = config({"server_noise": "recorded_random", "server_variance": 0.25})
    summary = run_experiment(parse_config(raw), tmp_path)
    (curve,) = read_json(tmp_path / "summary.json")["curves"]
    assert curve["recorded"] == {"L": 2, "dim": 2, "aborted": 0, "std": 0.5}  # log moved out
    assert summary["curves"][0]["recorded"] == curve["recorded"]
    assert "new: std 0.5" in (tmp_path / "run.log").read_text(encoding="utf-8").splitlines()


def test_secure_aggregation_settings_follow_the_declaration():
    summed = type("SummedMean", (Mean,), {"names": ("summed_mean",), "summed": True})
    assert not runs_secure_aggregation({"privacy.client_noise": "summed_mean"})  # unknown yet
    mechanisms.register(summed)
    try:
        assert runs_secure_aggregation({"privacy.client_noise": "summed_mean"})
        assert not encodes_fixed_point({"privacy.client_noise": "summed_mean"})  # no secagg_*
        # a client scheme without noise of its own is named in words, never "noisy"
        assert scheme_label({"client_noise": "summed_mean"}) == "summed mean"
    finally:
        mechanisms.unregister(summed)
    for name in ("distributed_gaussian", "skellam", "secure_aggregation"):
        assert runs_secure_aggregation({"privacy.client_noise": name}), name
    assert not runs_secure_aggregation({"privacy.client_noise": "gaussian"})


def test_a_variance_counts_in_a_sweep_only_where_the_scheme_calibrates_it():
    def relevant(client: str, server: str) -> dict[str, Any]:
        settings = {"client_noise": client, "server_noise": server, "client_variance": 0.5,
                    "server_variance": 0.5}  # fmt: skip
        return _relevant({"settings": settings})

    assert relevant("gaussian", "random")["client_variance"] == 0.5
    assert relevant("gaussian", "random")["server_variance"] == 0.5
    # distributed DP's noise level is privacy.ddp_variance: client_variance does nothing
    assert relevant("skellam", "none")["client_variance"] is None
    assert relevant("secure_aggregation", "none")["server_variance"] is None
    assert relevant("none", "gossip")["server_variance"] == 0.5


def test_the_frontier_per_adversary_draws_the_declared_lines(recorded):
    assert "recorded_line" in adversary_schemes()
    configs = adversary_configs(quick=True)
    for key, cfg in configs.items():
        adversary = key.rsplit("-T", 1)[0]
        labels = {c.label.split("@")[0] for c in cfg.curves}
        drawn = any("recorded_line" in label for label in labels)
        assert drawn == (adversary in mechanisms.protected(Recorded)), key
    mechanisms.unregister(Recorded)
    assert "recorded_line" not in adversary_schemes()
    mechanisms.register(Recorded)  # the fixture removes it again


def test_a_replaced_pairwise_cancelling_keeps_only_what_is_set():
    m = PairwiseCancelling(std=0.5, pairwise_ratio=3.0, coalition=3)
    assert m.pairwise_std is None and m.pairwise_variance is None  # derived, not stored
    assert m.sigma_cor == 1.5
    r = dataclasses.replace(m, pairwise_ratio=1.0)
    assert (r.std, r.sigma_cor, r.coalition) == (0.5, 0.5, 3)
    assert dataclasses.replace(m, coalition=4).sigma_cor == 1.5
    old = PairwiseCancelling(variance=0.04, pairwise_variance=0.25)  # the absolute form
    assert dataclasses.replace(old, coalition=3).sigma_cor == 0.5
    with pytest.raises(ConfigError, match="not both"):
        dataclasses.replace(m, pairwise_std=1.0)  # the ratio is still set
    with pytest.raises(ConfigError):
        RandomNoise(std=-0.5, variance=0.25)  # both given: still in range

"""Client-level privacy at scale (`client-scale`): the README's claims, on the preset itself.

At ε = 1 against a curious server that is not the client's own (client-level neighbours,
δ = 1e-5), the centroid MSD of the best scheme without a trusted party falls below the
"usable" level (−30 dB) only with enough clients: not with 10³, and with 10⁵ (P = 100 units
of K = 1,000). Each claim is checked on the preset's own configuration, over two seeds.
"""

import pytest

from pgfl.experiments.presets import load_preset

#: The schemes that need no trusted aggregator or dealer (README: what each one trusts).
NO_TRUSTED_PARTY = ("random", "local", "distributed")


def _population(label: str) -> str:
    return label.partition(" (")[2].rstrip(")")


def test_every_population_is_one_batch_of_curves_calibrated_against_other_servers():
    cfg = load_preset("client-scale", quick=True)
    assert cfg.figure == "population" and cfg.usable_db == -30.0
    by_pop: dict[str, set] = {}
    for c in cfg.curves:
        by_pop.setdefault(_population(c.label), set()).add((c.topology.P, c.data.K, c.training.L))
        if c.label.startswith("no privacy"):
            continue
        assert c.privacy.target_epsilon == 1.0
        assert c.privacy.adversary == "other_server"
        assert c.privacy.neighbours == "client"
    shapes = {pop: next(iter(s)) for pop, s in by_pop.items() if len(s) == 1}
    assert len(shapes) == len(by_pop) == 4  # one (P, K, L) per population
    assert {p * k for p, k, _ in shapes.values()} == {1_000, 10_000, 30_000, 100_000}
    assert shapes["100,000"] == (100, 1000, 100)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_readme_claim_client_level_privacy_is_usable_with_a_hundred_thousand_clients(
    seed, tmp_path
):
    """README: with 10⁵ clients (P = 100, K = 1,000, L = 100) at client-level ε = 1 against
    other servers, the best scheme without a trusted party reaches a centroid MSD of at most
    −30 dB; the trusted aggregator's central DP stays the ceiling; with 10³ clients no
    scheme, not even central DP, is usable. Every ε against other_server is at most 1,
    central rests on its aggregator, and only distributed DP protects against the own server."""
    import dataclasses

    from pgfl.apps.runner import run_experiment

    cfg = load_preset("client-scale", quick=True, seed=seed)
    keep = tuple(
        c for c in cfg.curves
        if _population(c.label) in ("1,000", "100,000") and not c.label.startswith("no privacy")
    )  # fmt: skip
    cfg = dataclasses.replace(cfg, curves=keep)
    by = {c["label"]: c for c in run_experiment(cfg, tmp_path)["curves"]}
    big = {k.partition(" (")[0]: v for k, v in by.items() if _population(k) == "100,000"}
    small = {k.partition(" (")[0]: v for k, v in by.items() if _population(k) == "1,000"}
    best = min(big[k]["centroid_msd_db"] for k in NO_TRUSTED_PARTY)
    assert best <= -30.0
    assert big["central"]["centroid_msd_db"] < best  # the ceiling
    assert min(c["centroid_msd_db"] for c in small.values()) > -30.0
    for c in by.values():
        assert c["epsilon_by_adversary"]["other_server"] <= 1.0 + 1e-9
        assert c["neighbours"] == "client"
    assert {c["clients"] for c in big.values()} == {100_000}  # population_figure's x
    assert "aggregator" in big["central"]["trusted_parties"]
    assert big["random"]["epsilon_by_adversary"]["own_server"] is None
    assert big["distributed"]["epsilon_by_adversary"]["own_server"] < 10


def test_usable_db_is_drawn_only_by_the_population_figure():
    import tomllib
    import warnings

    from pgfl.experiments.catalog import preset_text
    from pgfl.experiments.loader import parse_config
    from pgfl.param import SettingWarning

    raw = tomllib.loads(preset_text("client-scale"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SettingWarning)
        assert parse_config(raw).usable_db == -30.0
    raw["figure"] = "steady"
    with pytest.warns(
        SettingWarning, match='usable_db = -30.0 has no effect: it needs figure = "population"'
    ):
        parse_config(raw)

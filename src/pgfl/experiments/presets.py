"""The papers' experiments as shipped TOML configurations (``pgfl reproduce NAME``).

Each preset is a file ``experiments/presets/NAME.toml`` in the package, readable as an
example for ``pgfl run``; its ``[quick]`` table gives the ``--quick`` variant (fewer
iterations and repetitions, same qualitative result).
"""

from __future__ import annotations

import inspect
import tomllib
from typing import Any

from pgfl.data.datasets import (
    PAPER_ROWS,
    PAPER_TEST,
    classification_federated_data,
    load_dataset,
)
from pgfl.experiments.catalog import preset_names, preset_text, preset_title
from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.loader import parse_config
from pgfl.params import PARAMS
from pgfl.validation import ConfigError

__all__ = [
    "MIN_PER_CLIENT",
    "MIN_TEST_ROWS",
    "fit_split",
    "load_preset",
    "preset_names",  # the light catalog's, here too
    "preset_text",
    "preset_title",
]

#: Training rows every client gets at least (the real-data loader's rule).
MIN_PER_CLIENT: int = (
    inspect.signature(classification_federated_data).parameters["min_per_client"].default
)
#: The smallest test set a preset's split is shrunk to for a small data set.
MIN_TEST_ROWS = 20


def fit_split(name: str, source: str, rows: int | None = None) -> tuple[dict[str, Any], str]:
    """``[data]`` overrides that fit real-data preset ``name``'s split into ``source``.

    The preset's ``rows`` training rows and ``test_size`` test rows are kept when the data
    hold them; a smaller data set keeps every client's :data:`MIN_PER_CLIENT` rows and
    gives the test set what is left, up to the preset's ``test_size`` (at least
    :data:`MIN_TEST_ROWS`), then trains on the rest (or on ``rows``, if given). Returns
    the overrides and a one-line note saying what changed (``""``: nothing); a data set
    too small for the preset's clients is one :class:`ConfigError` line naming what to
    change.
    """
    raw = tomllib.loads(preset_text(name))
    table = raw.get("data", {})
    P = raw.get("topology", {}).get("P", PARAMS["topology.P"].default)
    K = table.get("K", PARAMS["data.K"].default)
    want_rows = table.get("rows", PAPER_ROWS) if rows is None else rows
    want_test = table.get("test_size", PAPER_TEST)
    overrides: dict[str, Any] = {"source": source} | ({} if rows is None else {"rows": rows})
    n = len(load_dataset(source, rows=want_rows + want_test)[1])  # at most what is needed
    if n >= want_rows + want_test:
        return overrides, ""
    least = P * K * MIN_PER_CLIENT
    test = min(want_test, n - (least if rows is None else rows))
    if test < MIN_TEST_ROWS:
        if rows is not None and rows >= least:
            raise ConfigError(
                f"--data {source} has {n} rows: --rows {rows} leaves {n - rows} for the test "
                f"set, which needs at least {MIN_TEST_ROWS}; give --rows at most "
                f"{n - MIN_TEST_ROWS} (or leave --rows out)"
            )
        raise ConfigError(
            f"--data {source} has {n} rows; preset {name!r} needs at least {least} training "
            f"rows (topology.P*data.K = {P}*{K} clients, {MIN_PER_CLIENT} each) plus "
            f"{MIN_TEST_ROWS} test rows: use more data, or fewer clients (topology.P, "
            f"data.K) and data.source in a config ('pgfl reproduce {name} --print-config > "
            "my.toml', then 'pgfl run my.toml')"
        )
    fitted = {"rows": n - test if rows is None else rows, "test_size": test}
    note = (
        f"{source} has {n} rows: {name} trains on data.rows = {fitted['rows']} and tests on "
        f"data.test_size = {test} (the preset's {want_rows} + {want_test} do not fit)"
    )
    return overrides | fitted, note


def load_preset(
    name: str,
    *,
    quick: bool = False,
    seed: int | None = None,
    data: dict[str, object] | None = None,
) -> ExperimentConfig:
    """The validated configuration of preset ``name`` (``quick`` variant, another ``seed``).

    ``data`` overrides keys of the preset's ``[data]`` table (e.g. ``source``, ``rows``).

    >>> cfg = load_preset("fig2", quick=True)
    >>> cfg.name, [c.label for c in cfg.curves]
    ('fig2', ['none', 'graph_homomorphic', 'random'])
    """
    raw = tomllib.loads(preset_text(name))
    if seed is not None:
        raw["seed"] = seed
    if data:
        raw.setdefault("data", {}).update(data)
    return parse_config(raw, quick=quick)

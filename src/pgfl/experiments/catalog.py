"""The presets of ``pgfl reproduce``: their names, kinds and one-line titles.

Nothing here imports the experiments (the engine, the accountant, scipy): ``pgfl
reproduce --list`` and the check of the names given read only this module and the
shipped TOML files. Each kind of preset is run by its own module, whose ``PRESETS``
has exactly the names below:

* GFL presets: the TOML files ``experiments/presets/NAME.toml`` (:func:`preset_names`),
  run by :mod:`pgfl.experiments.presets`;
* frontier presets (:data:`FRONTIER_TITLES`): generated configurations, run by
  :mod:`pgfl.apps.frontier`;
* accounting-only presets (:data:`ACCOUNTING_TITLES`): :mod:`pgfl.experiments.muffliato`;
* graph-learning presets (:data:`GRAPHLEARN_TITLES`): :mod:`pgfl.graphlearn.presets`.

``pgfl reproduce all`` runs :data:`ALL`, the papers' GFL figures.
"""

from __future__ import annotations

import tomllib
from importlib import resources

from pgfl.data.params import PARAMS as DATA_PARAMS
from pgfl.validation import ConfigError, did_you_mean

__all__ = [
    "ACCOUNTING_TITLES",
    "ALL",
    "FRONTIER_TITLES",
    "GRAPHLEARN_TITLES",
    "all_names",
    "data_kind",
    "kind",
    "preset_names",
    "preset_text",
    "preset_title",
    "title",
]

#: What ``pgfl reproduce all`` runs: the GFL presets that reproduce a figure of the
#: papers (the journal's Figs. 2-7, the conference paper's Fig. 2, the book's diffusion
#: chapter). Left out: the frontier and graph-learning presets (long, and of other
#: papers), the accounting-only ``muffliato``, and the GFL presets that are not a
#: figure of the papers (``client-scale``, ``correlated-noise``,
#: ``decor``, ``digits-cnn``, ``digits-mlp``,
#: ``useful-privacy``, ...).
ALL = ("fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "hybrid", "diffusion")

#: Frontier presets (:data:`pgfl.apps.frontier.PRESETS`) and their titles.
FRONTIER_TITLES = {
    "frontier": "Privacy-utility frontier: every scheme calibrated to a target ε, MSD and "
    "test error vs ε",
    "frontier-adversary": "Privacy-utility frontier per adversary (record-level, with "
    "amplification): the best scheme per ε, with and without a trusted aggregator",
}
#: Accounting-only presets (:data:`pgfl.experiments.muffliato.PRESETS`) and their titles.
ACCOUNTING_TITLES = {
    "muffliato": "Gossip (Muffliato): what one averaging leaks, pair by pair (accounting only)"
}
#: Graph-learning presets (:data:`pgfl.graphlearn.presets.PRESETS`) and their titles.
GRAPHLEARN_TITLES = {
    "graphlearn-datasize": "Graph learning, Fig. 2(a-b): MCC and relative error vs data size N_i",
    "graphlearn-imbalance": "Graph learning, Fig. 2(c-d): per-client MCC and relative error, "
    "N_i = 20..100",
    "graphlearn-heterogeneity": "Graph learning, Fig. 3: MCC and relative error vs consensus "
    "fraction q",
    "graphlearn-weights": "Graph learning, Table I: adaptive weights vs data size and similarity",
    "graphlearn-sensitivity": "Graph learning, Fig. 5: sensitivity to lambda and rho",
    "graphlearn-dp": "Graph learning, Fig. 6: DP (last-step noise vs noisy statistic) vs N_i",
    "graphlearn-digits": "Graph learning, Table II: communities of digit images (COIL-20 stand-in)",
}


def preset_names() -> list[str]:
    """Names of the shipped GFL presets, sorted."""
    folder = resources.files("pgfl.experiments").joinpath("presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def preset_text(name: str) -> str:
    """The TOML text of GFL preset ``name``."""
    names = preset_names()
    if name not in names:
        raise ConfigError(
            f"preset must be one of {', '.join(names)}; got {name!r}" + did_you_mean(name, names)
        )
    return (
        resources.files("pgfl.experiments").joinpath("presets", f"{name}.toml").read_text("utf-8")
    )


def data_kind(name: str) -> str:
    """The data kind of GFL preset ``name``'s first curve, read from its TOML.

    >>> data_kind("fig7"), data_kind("fig2")
    ('classification', 'regression')
    """
    table = tomllib.loads(preset_text(name))
    curves = table.get("curves") or [{}]
    kind = curves[0].get("data", {}).get("kind") or table.get("data", {}).get("kind")
    return str(kind or next(p.default for p in DATA_PARAMS if p.name == "data.kind"))


def preset_title(name: str) -> str:
    """The one-line description of GFL preset ``name``: its TOML's ``title`` (else its name).

    >>> preset_title("fig2")
    'Fig. 2: GFL with no, graph-homomorphic and random perturbations'
    """
    return str(tomllib.loads(preset_text(name)).get("title") or name)


def all_names() -> list[str]:
    """Every preset in the order of ``pgfl reproduce --list``.

    GFL, frontier, accounting-only, then graph-learning presets, each kind sorted.
    """
    return (
        preset_names()
        + sorted(FRONTIER_TITLES)
        + sorted(ACCOUNTING_TITLES)
        + sorted(GRAPHLEARN_TITLES)
    )


def kind(name: str) -> str:
    """``"gfl"``, ``"frontier"``, ``"accounting"`` or ``"graphlearn"``: who runs ``name``.

    >>> kind("fig2"), kind("frontier"), kind("muffliato"), kind("graphlearn-dp")
    ('gfl', 'frontier', 'accounting', 'graphlearn')
    """
    for what, titles in (
        ("frontier", FRONTIER_TITLES),
        ("accounting", ACCOUNTING_TITLES),
        ("graphlearn", GRAPHLEARN_TITLES),
    ):
        if name in titles:
            return what
    if name in preset_names():
        return "gfl"
    raise ConfigError(
        f"preset must be one of {', '.join(all_names())}; got {name!r}"
        + did_you_mean(name, all_names())
    )


def title(name: str) -> str:
    """The one-line description of any preset (``pgfl reproduce --list``)."""
    titles = {**FRONTIER_TITLES, **ACCOUNTING_TITLES, **GRAPHLEARN_TITLES}
    return titles[name] if name in titles else preset_title(name)

"""The papers' experiments as shipped TOML configurations (``pgfl reproduce NAME``).

Each preset is a file ``experiments/presets/NAME.toml`` in the package, readable as an
example for ``pgfl run``; its ``[quick]`` table gives the ``--quick`` variant (fewer
iterations and repetitions, same qualitative result).
"""

from __future__ import annotations

import tomllib
from importlib import resources

from pgfl.experiments.config import ExperimentConfig
from pgfl.experiments.loader import parse_config
from pgfl.validation import ConfigError


def preset_names() -> list[str]:
    """Names of the shipped GFL presets, sorted."""
    folder = resources.files("pgfl.experiments").joinpath("presets")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def preset_text(name: str) -> str:
    """The TOML text of preset ``name``."""
    names = preset_names()
    if name not in names:
        raise ConfigError(f"preset must be one of {', '.join(names)}; got {name!r}")
    return (
        resources.files("pgfl.experiments").joinpath("presets", f"{name}.toml").read_text("utf-8")
    )


def preset_title(name: str) -> str:
    """The one-line description of preset ``name``: its TOML's ``title`` (else its name).

    >>> preset_title("fig2")
    'Fig. 2: GFL with no, graph-homomorphic and random perturbations'
    """
    return str(tomllib.loads(preset_text(name)).get("title") or name)


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

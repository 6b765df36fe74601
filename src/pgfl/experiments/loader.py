"""An experiment configuration from a TOML file (or a mapping), validated as a whole.

:func:`load_config` reads a file, :func:`parse_config` validates a mapping into an
:class:`~pgfl.experiments.config.ExperimentConfig`: unknown keys, wrong types and
out-of-range values (each checked against :data:`pgfl.params.PARAMS`) and the checks that
need the whole configuration (:func:`validate_experiment`: plotted metrics that would be
empty, the memory the run needs) each stop with one line naming the setting; a setting
given where it has no effect is a one-line :class:`~pgfl.param.SettingWarning`.

Paths in a configuration (``model.source``, a file in ``data.source``) are relative to the
configuration file's folder (``base``; the current directory for a mapping given without
one, a preset or a path on the command line) and are stored absolute
(:func:`resolve_paths`), so results, partial files and messages name the file that ran.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from pgfl.data.datasets import absolute_source
from pgfl.experiments.config import (
    SECTIONS,
    CurveConfig,
    ExperimentConfig,
    section_class,
)
from pgfl.experiments.memory import check_experiment_fits
from pgfl.files import read_toml, resolve_path
from pgfl.param import Rule
from pgfl.params import PARAMS, TEST_METRICS, section_params
from pgfl.validation import ConfigError, did_you_mean

__all__ = [
    "EXPERIMENT_RULES",
    "MAX_CURVES",
    "load_config",
    "parse_config",
    "resolve_paths",
    "validate_experiment",
]


def _table(name: str, values: Any, allowed: set[str] | list[str]) -> Mapping[str, Any]:
    if not isinstance(values, Mapping):
        raise ConfigError(f"{name} must be a table of settings; got {values!r}")
    for key in values:
        if key not in allowed:
            raise ConfigError(
                f"unknown setting {name}.{key}; allowed: {', '.join(sorted(allowed))}"
                + did_you_mean(key, allowed)
            )
    return values


def _section(name: str, values: Any, base: Any = None) -> Any:
    cls = section_class(name)
    values = _table(name, values, {f.name for f in fields(cls)})
    # lists are checked as given (so messages show them) and stored as tuples
    return replace(base, **values) if base is not None else cls(**values)


#: The most curves one experiment may have (parsing, a figure and a table stay usable).
MAX_CURVES = 1000
TOP_LEVEL = {p.name for p in section_params("")} | {"curves", "quick", "run", "deploy", *SECTIONS}


def _in_a_table(key: str) -> str:
    """`` (did you mean [training] mu?)`` for a table's setting given at the top level."""
    names = [n for n in PARAMS if n.partition(".")[2] == key]
    if len(names) != 1:
        return ""
    section, _, short = names[0].partition(".")
    return f" (did you mean [{section}] {short}?)"


def _warn_settings_without_effect(
    raw: Mapping[str, Any],
    base: Mapping[str, Any],
    specs: list[Mapping[str, Any]],
    curves: list[CurveConfig],
) -> None:
    """Warn of a setting given where it has no effect (shared: in no curve; per curve: there).

    A :class:`~pgfl.param.SettingWarning` (:meth:`~pgfl.param.Param.warn_without_effect`);
    the run goes on without it.
    """
    ctxs = [c.values() for c in curves]
    top = {p.name: raw.get(p.name, p.default) for p in section_params("")}
    for p in section_params(""):
        if p.name in raw:
            p.warn_without_effect(raw[p.name], [top], who="it needs")
    for s, section in base.items():
        for key in raw.get(s, {}):
            PARAMS[f"{s}.{key}"].warn_without_effect(getattr(section, key), ctxs)
    for i, (spec, ctx) in enumerate(zip(specs, ctxs, strict=True)):
        for s in SECTIONS:
            for key in spec.get(s, {}):
                PARAMS[f"{s}.{key}"].warn_without_effect(
                    ctx[f"{s}.{key}"], [ctx], name=f"curves[{i}].{s}.{key}",
                    who=f"curve {curves[i].label!r} does not have",
                )  # fmt: skip


def _plotted_panels_have_data(cfg: ExperimentConfig) -> str | None:
    has_test = any(
        c.data.kind == "digits"
        or c.data.kind == "classification"
        and c.data.test_size != 0
        or c.data.kind == "logistic"
        and (c.data.test_size or 0) > 0
        for c in cfg.curves
    )
    for metric in cfg.plot:
        if metric in TEST_METRICS and not has_test:
            return (
                f"plot {metric!r} needs a test set (data.kind = 'classification' without "
                "data.test_size = 0, or 'logistic' with data.test_size > 0); no curve has one, "
                "the panel would be empty"
            )
        if metric == "disagreement_db" and all(c.topology.P == 1 for c in cfg.curves):
            return "plot 'disagreement_db' needs topology.P > 1: a single unit has no disagreement"
    return None


#: The rules of a whole configuration (they need every curve).
EXPERIMENT_RULES = (
    Rule("`plot` may name a test metric only if some curve has a test set (`data.kind = "
         '"classification"` without `data.test_size = 0`, or `"logistic"` with '
         "`data.test_size > 0`), and "
         "`disagreement_db` only if some curve has P > 1.", _plotted_panels_have_data),
)  # fmt: skip


def validate_experiment(cfg: ExperimentConfig, *, available: int | None = None) -> None:
    """Checks of a whole configuration that need every curve; raise :class:`ConfigError`.

    :data:`EXPERIMENT_RULES` (no plotted panel without data), then the memory the run
    needs (:func:`pgfl.experiments.memory.check_experiment_fits`; ``available``
    overrides the machine's available bytes). :func:`parse_config` calls it; a caller
    that builds an :class:`ExperimentConfig` itself should call it before creating any
    output.
    """
    for rule in EXPERIMENT_RULES:
        message = rule.check(cfg)
        if message is not None:
            raise ConfigError(message)
    check_experiment_fits(cfg, available=available)


def _absolute_model_source(source: str, base: str | Path) -> str:
    path, sep, name = source.rpartition(":")
    return f"{resolve_path(path, base)}:{name}" if sep and path else source


def resolve_paths(raw: Mapping[str, Any], base: str | Path) -> dict[str, Any]:
    """``raw`` with ``model.source`` and the file of ``data.source`` absolute, from ``base``.

    Every ``[data]`` and ``[model]`` table counts, a curve's own included; a value of the
    wrong type or an empty one is left for the checks to report.

    >>> resolve_paths({"model": {"source": "m.py:make"}, "data": {"source": "fair"}}, "/cfg")
    {'model': {'source': '/cfg/m.py:make'}, 'data': {'source': 'fair'}}
    """
    fix = {"data": absolute_source, "model": _absolute_model_source}

    def tables(spec: Mapping[str, Any]) -> dict[str, Any]:
        out = dict(spec)
        for name, absolute in fix.items():
            table = spec.get(name)
            source = table.get("source") if isinstance(table, Mapping) else None
            if isinstance(source, str) and source:
                out[name] = {**table, "source": absolute(source, base)}
        return out

    out = tables(raw)
    deploy = raw.get("deploy")
    certs = deploy.get("certs") if isinstance(deploy, Mapping) else None
    if isinstance(certs, str) and certs:  # the certificates' folder, as a data file
        out["deploy"] = {**deploy, "certs": str(Path(base) / Path(certs).expanduser())}
    if isinstance(raw.get("curves"), list):
        out["curves"] = [tables(c) if isinstance(c, Mapping) else c for c in raw["curves"]]
    return out


def parse_config(
    raw: Mapping[str, Any], *, quick: bool = False, base: str | Path | None = None
) -> ExperimentConfig:
    """Validate a configuration mapping (as read from TOML) into an :class:`ExperimentConfig`.

    ``quick`` applies the ``[quick]`` table (fewer iterations/repetitions) if present; the
    table is validated either way. Relative paths in ``model.source`` and ``data.source``
    are taken from the folder ``base`` (the configuration file's; unset: the current
    directory) and stored absolute (:func:`resolve_paths`). Ends with
    :func:`validate_experiment`.

    >>> cfg = parse_config({"name": "x", "training": {"L": 5}, "data": {"K": 10},
    ...                     "curves": [{"label": "a"}, {"label": "b", "training": {"mu": 0.1}}]})
    >>> [c.training.mu for c in cfg.curves]
    [0.7, 0.1]
    >>> parse_config({"name": "x", "training": {"L": 50}, "data": {"K": 10}})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: training.L must be an integer in [1, data.K=10]; got 50
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a configuration must be a table of settings; got {raw!r}")
    for key in raw:
        if key not in TOP_LEVEL:
            raise ConfigError(
                f"unknown setting {key!r}; allowed: {', '.join(sorted(TOP_LEVEL))}"
                + (did_you_mean(key, TOP_LEVEL) or _in_a_table(key))
            )
    specs = raw.get("curves")
    if isinstance(specs, list) and len(specs) > MAX_CURVES:  # before any is parsed
        raise ConfigError(
            f"curves: at most {MAX_CURVES} curves per experiment; got {len(specs)} "
            "(split the sweep over several configuration files)"
        )
    raw = resolve_paths(raw, "." if base is None else base)
    run = _table("run", raw.pop("run", {}), [p.key for p in section_params("run")])
    run_config = section_class("run")(**run)
    deploy = _table("deploy", raw.pop("deploy", {}), [p.key for p in section_params("deploy")])
    deploy_config = section_class("deploy")(**deploy)
    q = _table("quick", raw.get("quick", {}), [p.key for p in section_params("quick")])
    q = {k: PARAMS[f"quick.{k}"].check(v) for k, v in q.items()}
    keep = q.pop("curves", None)
    if keep is not None and not keep:
        raise ConfigError("quick.curves must name at least one curve; got []")
    if quick:
        raw.update(q)
    name = PARAMS["name"].check(raw.get("name", PARAMS["name"].default))
    base = {s: _section(s, raw.get(s, {})) for s in SECTIONS}
    curve_specs = raw.get("curves") or [{"label": name}]
    if not isinstance(curve_specs, list):
        raise ConfigError(f"curves must be a list of tables; got {curve_specs!r}")
    if quick and keep is not None:
        curve_specs = raw["curves"] = _quick_curves(curve_specs, keep)
    curves = []
    for i, spec in enumerate(curve_specs):
        if not isinstance(spec, Mapping):
            raise ConfigError(f"curves[{i}] must be a table; got {spec!r}")
        for key in spec:
            if key != "label" and key not in SECTIONS:
                raise ConfigError(
                    f"unknown setting curves[{i}].{key}; allowed: label, {', '.join(SECTIONS)}"
                    + did_you_mean(key, ["label", *SECTIONS])
                )
        label = spec.get("label", f"curve{i}")
        if not isinstance(label, str) or not label:
            raise ConfigError(f"curves[{i}].label must be a non-empty string; got {label!r}")
        sections = {s: _section(s, spec.get(s, {}), base[s]) for s in SECTIONS}
        curves.append(CurveConfig(label=label, **sections))
    _warn_settings_without_effect(raw, base, curve_specs, curves)
    top = {p.key: raw[p.key] for p in section_params("") if p.key in raw}
    cfg = ExperimentConfig(
        curves=tuple(curves),
        source=_thaw(raw),
        run=run_config,
        deploy=deploy_config,
        **{**top, "name": name},
    )
    validate_experiment(cfg)
    return cfg


def _quick_curves(specs: list[Any], keep: tuple[str, ...]) -> list[Any]:
    """The curves ``quick.curves`` names, in the file's order; a label no curve has: error.

    >>> _quick_curves([{"label": "a"}, {"label": "b"}], ("b",))
    [{'label': 'b'}]
    """
    labels = [s.get("label") for s in specs if isinstance(s, Mapping)]
    for name in keep:
        if name not in labels:
            raise ConfigError(
                f"quick.curves names {name!r}, which no curve has; labels: "
                + ", ".join(map(str, labels))
                + did_you_mean(name, [str(x) for x in labels])
            )
    return [s for s in specs if isinstance(s, Mapping) and s.get("label") in keep]


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thaw(v) for v in value]
    if dataclasses.is_dataclass(value):
        return _thaw(dataclasses.asdict(value))
    return value


def load_config(path: str | Path, *, quick: bool = False) -> ExperimentConfig:
    """Read and validate a TOML experiment file (its paths relative to its folder)."""
    return parse_config(read_toml(path), quick=quick, base=Path(path).parent)

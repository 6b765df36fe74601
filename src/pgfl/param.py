"""A setting described as data: its type, allowed range or choices, default, doc and scope.

:class:`Param` is the one place a setting's range lives (in the spirit of scikit-learn's
declarative parameter constraints): the configuration loader, the privacy mechanisms that
own a setting and the command line check their values with it, and the configuration
reference (``docs/config.md``) is rendered from it. A :class:`ParamTable` holds the
settings of one kind of configuration file by dotted name (``training.L``): the
experiment table is :data:`pgfl.params.PARAMS`, the graph-learning table
:data:`pgfl.graphlearn.params.PARAMS`.

A bound may depend on other settings (:class:`Ref`): ``training.L`` lies in
``[1, data.K]``. :meth:`Param.check` is given the values of those other settings in a
context mapping (dotted names); a bound whose settings are missing is not applied.

>>> L = Param("training.L", "int", 11, "Clients per round.", lo=1, hi_ref=ref("data.K"))
>>> L.check(11, {"data.K": 100})
11
>>> L.check(120, {"data.K": 100})
Traceback (most recent call last):
...
pgfl.validation.ConfigError: training.L must be an integer in [1, data.K=100]; got 120
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pgfl.validation import (
    ConfigError,
    check_choice,
    check_int,
    check_real,
    check_string,
    did_you_mean,
)

#: How each kind of setting reads in the reference's "type" column.
TYPES = {
    "bool": "boolean",
    "int": "integer",
    "real": "real",
    "choice": "string",
    "choices": "list of strings",
    "string": "string",
    "int_pair": "integer or [low, high]",
    "real_pair": "real or [low, high]",
    "edges": "list of [p, m]",
    "matrix": "P×P reals",
    "ints": "list of integers",
    "reals": "list of reals",
    "n_samples": "integer or list of integers",
    "paths": "list of strings",
    "strings": "list of strings",
}


def toml_value(value: Any) -> str:
    """A default as the reference writes it (TOML syntax in backticks, ``unset`` for None).

    >>> toml_value((1, 10)), toml_value(float("inf")), toml_value(None)
    ('`[1, 10]`', '`inf`', 'unset')
    """
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple):
        return "`[" + ", ".join(toml_value(v).strip("`") for v in value) + "]`"
    if isinstance(value, float) and math.isinf(value):
        return "`inf`"
    return f"`{value}`"


__all__ = [
    "TYPES",
    "Param",
    "ParamTable",
    "Ref",
    "Rule",
    "SettingWarning",
    "When",
    "check_changed_first",
    "check_values",
    "folder_name",
    "kind_is",
    "ref",
    "toml_value",
]


@dataclass(frozen=True)
class Ref:
    """A bound computed from other settings, shown as ``label=value`` in messages.

    Attributes:
        label: how the bound reads in messages and docs (``"data.K"``).
        needs: dotted names of the settings it needs; when one is missing from the
            context, the bound is not applied (the static bound still is).
        value: the bound from the context (a mapping of dotted names to values), or
            ``None`` where it does not apply (a bound that holds for one scheme only).

    """

    label: str
    needs: tuple[str, ...]
    value: Callable[[Mapping[str, Any]], float]


def ref(name: str, offset: int = 0) -> Ref:
    """The bound ``name + offset`` (another setting, possibly shifted).

    >>> ref("privacy.secagg_modulus_bits", -2).value({"privacy.secagg_modulus_bits": 64})
    62
    """
    label = name if offset == 0 else f"{name}{offset:+d}"
    return Ref(label, (name,), lambda c: c[name] + offset)


class SettingWarning(UserWarning):
    """A setting given where it has no effect: the run goes on without it.

    The command line prints it as one line ``warning: ...``; a wrong value is still a
    :class:`~pgfl.validation.ConfigError`.
    """


@dataclass(frozen=True)
class When:
    """The condition under which a setting has an effect (``text`` for messages and docs)."""

    text: str
    test: Callable[[Mapping[str, Any]], bool]


def kind_is(section: str, *kinds: str) -> When:
    """``section.kind`` is one of ``kinds``.

    >>> kind_is("model", "mlp", "cnn").text
    'model.kind = "mlp" or "cnn"'
    """
    text = " or ".join(f'"{k}"' for k in kinds)
    return When(f"{section}.kind = {text}", lambda c: c[f"{section}.kind"] in kinds)


@dataclass(frozen=True)
class Rule:
    """A rule across settings: its line in the reference, and the check that enforces it.

    Attributes:
        doc: the rule as ``docs/config.md`` states it.
        check: ``check(subject)`` returns the one-line message of a violation, else ``None``.

    >>> r = Rule("`a` needs `b`", lambda s: None if s["b"] else "a needs b")
    >>> r.check({"b": 0})
    'a needs b'

    """

    doc: str
    check: Callable[[Any], str | None]


@dataclass(frozen=True)
class Param:
    """One setting: type, allowed values, default, doc line and when it has an effect.

    Attributes:
        name: dotted name (``section.key``; top-level settings have no dot).
        kind: ``bool``, ``int``, ``real``, ``choice``, ``choices`` (a list), ``string``,
            ``int_pair``/``real_pair`` (a number or a ``[low, high]`` pair), ``ints`` (a
            list of integers), ``reals`` (a list of reals), or a custom kind checked by
            ``checker`` (``edges``, ``matrix``, ``paths``).
        default: value when the setting is not given (``None``: unset, see ``doc``).
        doc: one line for the reference.
        lo, hi, lo_open, hi_open: static bounds of numbers.
        lo_ref, hi_ref: bounds computed from other settings (combined with the static ones):
            a :class:`Ref`, or a tuple of them (the tightest that applies binds).
        choices: allowed strings (``choice``/``choices``), or extra words a pair accepts; a
            callable returning them for a vocabulary that grows (a registry of mechanisms).
        inf_ok: ``inf`` is allowed (no limit). even: integers must be even.
        nonempty, forbid: for strings.
        applies: when the setting has an effect (``None``: always).
        required: must be given when ``applies`` holds.
        batched: may differ between curves that run in one vectorized simulation.
        allowed_doc: the allowed values as the reference writes them (default: derived).
        checker: ``checker(param, value, context)`` for a custom kind.

    """

    name: str
    kind: str
    default: Any
    doc: str
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    lo_ref: Ref | tuple[Ref, ...] | None = None
    hi_ref: Ref | tuple[Ref, ...] | None = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] = ()
    inf_ok: bool = False
    even: bool = False
    nonempty: bool = False
    forbid: str = ""
    applies: When | None = None
    required: bool = False
    batched: bool = False
    allowed_doc: str = ""
    checker: Callable[[Param, Any, Mapping[str, Any]], Any] | None = None

    @property
    def section(self) -> str:
        """The table the setting lives in (``""`` for the top level)."""
        return self.name.rpartition(".")[0]

    @property
    def key(self) -> str:
        """The name inside its table."""
        return self.name.rpartition(".")[2]

    @property
    def options(self) -> tuple[str, ...]:
        """The allowed strings now (a callable ``choices`` is asked each time)."""
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def warn_without_effect(
        self,
        value: Any,
        contexts: Iterable[Mapping[str, Any]],
        *,
        name: str | None = None,
        who: str = "no curve has",
        hint: str = "",
    ) -> bool:
        """Warn (:class:`SettingWarning`) if ``value`` is given where it has no effect.

        It has none when it differs from the default and ``applies`` holds in none of
        ``contexts`` (the settings of each curve, by dotted name). ``name`` is how the
        setting reads in the message (``curves[1].privacy.dropout``), ``who`` the subject
        of the condition, ``hint`` what to do (in parentheses). Returns whether it warned.

        >>> p = Param("run.workers", "int", None, "", applies=When('run.backend = "ray"',
        ...           lambda c: c["run.backend"] == "ray"))
        >>> with warnings.catch_warnings(record=True) as w:
        ...     warnings.simplefilter("always")
        ...     p.warn_without_effect(2, [{"run.backend": "local"}], who="it needs")
        True
        >>> str(w[0].message)
        'run.workers = 2 has no effect: it needs run.backend = "ray"'
        """
        if self.applies is None or value == self.default:
            return False
        if any(self.applies.test(c) for c in contexts):
            return False
        shown = list(value) if isinstance(value, tuple) else value
        message = f"{name or self.name} = {shown!r} has no effect: {who} {self.applies.text}"
        if hint:
            message += f" ({hint})"
        warnings.warn(message, SettingWarning, stacklevel=3)
        return True

    def named(self, name: str) -> Param:
        """The same setting under another name (a Python argument that mirrors it)."""
        return replace(self, name=name)

    @property
    def refs(self) -> dict[str, tuple[Ref, ...]]:
        """The bounds from other settings, by side (``"lo"``, ``"hi"``)."""
        sides = {"lo": self.lo_ref, "hi": self.hi_ref}
        return {
            k: () if r is None else r if isinstance(r, tuple) else (r,) for k, r in sides.items()
        }

    def bounds(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """``lo``, ``hi`` and their names in a message, with the refs the context allows."""
        out = {"lo": self.lo, "hi": self.hi, "lo_name": None, "hi_name": None}
        refs = self.refs
        for side, pick in (("lo", max), ("hi", min)):
            for r in refs[side]:
                if any(context.get(n) is None for n in r.needs):
                    continue
                v = r.value(context)
                if v is None:
                    continue
                static = out[side]
                if static is None or pick(static, v) == v:
                    out[side], out[f"{side}_name"] = v, r.label
        return out

    def check(self, value: Any, context: Mapping[str, Any] | None = None) -> Any:
        """``value`` validated (and normalized: lists become tuples), or :class:`ConfigError`."""
        context = context or {}
        if value is None and self.default is None:
            return None
        if self.checker is not None:
            return self.checker(self, value, context)
        return _CHECKERS[self.kind](self, value, context)

    def interval(self) -> str:
        """The allowed range as written in the reference (refs by their labels)."""
        refs = self.refs
        lo = "-inf" if self.lo is None else _num(self.lo)
        if refs["lo"]:
            labels = ([] if self.lo is None else [lo]) + [r.label for r in refs["lo"]]
            lo = labels[0] if len(labels) == 1 else f"max({', '.join(labels)})"
        hi = "inf" if self.hi is None else _num(self.hi)
        if refs["hi"]:
            labels = [r.label for r in refs["hi"]]
            hi = labels[0] if len(labels) == 1 else f"min({', '.join(labels)})"
        left = "(" if (self.lo_open or self.lo is None and not refs["lo"]) else "["
        closed_hi = (
            self.kind in ("int", "int_pair")
            or self.inf_ok
            or self.hi is not None
            and not self.hi_open
        )
        right = "]" if closed_hi else ")"
        return f"{left}{lo}, {hi}{right}"

    def allowed(self) -> str:
        """Allowed values, one phrase for the reference."""
        if self.allowed_doc:
            return self.allowed_doc
        if self.kind == "bool":
            return "`true`, `false`"
        if self.kind in ("choice", "choices"):
            return ", ".join(f'`"{c}"`' for c in self.options)
        if self.kind == "strings":
            return "distinct non-empty strings"
        if self.kind == "string":
            text = "non-empty" if self.nonempty else "any"
            return text + (
                f", without {' '.join(repr(c) for c in self.forbid)}" if self.forbid else ""
            )
        text = ("even, " if self.even else "") + self.interval()
        if self.kind.endswith("_pair"):
            text += " each, low ≤ high"
            if self.options:
                text += ", or " + ", ".join(f'`"{c}"`' for c in self.options)
        return text


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


# ------------------------------------------------------------------------ checkers
def _check_bool(p: Param, value: Any, c: Mapping[str, Any]) -> bool:
    """``true`` or ``false`` (TOML booleans; not 0/1 or strings).

    >>> _check_bool(Param("run.keep_partial", "bool", False, ""), "yes", {})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: run.keep_partial must be true or false; got 'yes'
    """
    if not isinstance(value, bool):
        raise ConfigError(f"{p.name} must be true or false; got {value!r}")
    return value


def _check_int(p: Param, value: Any, c: Mapping[str, Any]) -> int:
    return check_int(p.name, value, even=p.even, **p.bounds(c))


def _check_real(p: Param, value: Any, c: Mapping[str, Any]) -> float:
    return check_real(
        p.name, value, lo_open=p.lo_open, hi_open=p.hi_open, inf_ok=p.inf_ok, **p.bounds(c)
    )


def _check_choice(p: Param, value: Any, c: Mapping[str, Any]) -> str:
    return check_choice(p.name, value, p.options)


def _check_choices(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not items:
        options = ", ".join(map(repr, p.options))
        raise ConfigError(f"{p.name} must be a non-empty list of {options}; got {value!r}")
    return tuple(check_choice(p.name, v, p.options) for v in items)


def _check_string(p: Param, value: Any, c: Mapping[str, Any]) -> str:
    return check_string(p.name, value, nonempty=p.nonempty, forbid=p.forbid)


def _check_strings(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[str, ...]:
    """A list of distinct non-empty strings (a single string is a list of one).

    >>> _check_strings(Param("data.drop", "strings", (), ""), ["id", "id"], {})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: data.drop must list distinct names; got 'id' twice
    """
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise ConfigError(f"{p.name} must be a list of strings; got {value!r}")
    out = tuple(check_string(f"{p.name}[{i}]", v, nonempty=True) for i, v in enumerate(items))
    twice = next((v for v in out if out.count(v) > 1), None)
    if twice is not None:
        raise ConfigError(f"{p.name} must list distinct names; got {twice!r} twice")
    return out


def folder_name(p: Param, value: Any, c: Mapping[str, Any] | None = None) -> str:
    """A checker for a setting that names a folder: one path component, not ``.`` or ``..``.

    >>> folder_name(Param("name", "string", "x", ""), "..")
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: name must be a folder name, not '.' or '..'; got '..'
    """
    name = check_string(p.name, value, nonempty=True, forbid="/\\")
    if name in (".", ".."):
        raise ConfigError(f"{p.name} must be a folder name, not '.' or '..'; got {name!r}")
    return name


def _check_pair(p: Param, value: Any, c: Mapping[str, Any]) -> Any:
    """A number in the interval, or a ``[low, high]`` pair of them with low ≤ high."""
    if isinstance(value, str) and value in p.options:
        return value
    number = check_int if p.kind == "int_pair" else check_real
    b = p.bounds(c)
    if isinstance(value, (list, tuple)) and len(value) == 2:
        low = number(f"{p.name}[0]", value[0], **b)
        high = number(f"{p.name}[1]", value[1], **{**b, "lo": low, "lo_name": f"{p.name}[0]"})
        return (low, high)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return number(p.name, value, **b)
    also = " or a [low, high] pair of them" + "".join(f" or {w!r}" for w in p.options)
    return number(p.name, value, **b, also=also)  # a list of the wrong length fails here


def _check_list(p: Param, value: Any, c: Mapping[str, Any]) -> tuple[Any, ...]:
    """A non-empty list of integers (``ints``) or reals (``reals``) in the interval."""
    what = "integers" if p.kind == "ints" else "real numbers"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(
            f"{p.name} must be a non-empty list of {what} in {p.interval()}; got {value!r}"
        )
    if p.kind == "ints":
        return tuple(check_int(f"{p.name}[{i}]", v, **p.bounds(c)) for i, v in enumerate(value))
    return tuple(
        check_real(f"{p.name}[{i}]", v, lo_open=p.lo_open, hi_open=p.hi_open, **p.bounds(c))
        for i, v in enumerate(value)
    )


_CHECKERS: dict[str, Callable[[Param, Any, Mapping[str, Any]], Any]] = {
    "bool": _check_bool,
    "int": _check_int,
    "real": _check_real,
    "choice": _check_choice,
    "choices": _check_choices,
    "string": _check_string,
    "strings": _check_strings,
    "int_pair": _check_pair,
    "real_pair": _check_pair,
    "ints": _check_list,
    "reals": _check_list,
}


def check_changed_first(
    params: Iterable[Param], values: Mapping[str, Any], context: Mapping[str, Any] | None = None
) -> None:
    """Check each setting the user changed against the others left at their defaults.

    A bound between settings is reported on the setting it is declared on, so which one a
    conflict names depends on the order of the checks. ``params`` are the settings of one
    table (their rivals), ``context`` the settings of other tables. Before the checks in
    table order, every setting of ``params`` with bounds from other settings (:class:`Ref`)
    whose value in ``values`` (dotted names) differs from its default and lies in its
    static range is checked against ``context`` and the settings of ``params`` still at
    their defaults; a bound that needs another changed setting, and a value outside its
    static range, are left to the checks in table order. A conflict between one changed
    setting and defaults thus names the changed setting, the one the user gave:
    ``privacy.secagg_frac_bits = 60`` alone is reported on frac_bits (its code does not
    fit the default modulus), not on the modulus the user left alone. Every bound applied
    here is applied to actual values, so this pass rejects nothing that the checks in
    table order would accept.

    >>> k = Param("k", "int", 64, "Modulus bits.", lo_ref=Ref("f+2", ("f",), lambda c: c["f"] + 2))
    >>> f = Param("f", "int", 24, "Fraction bits.", hi_ref=ref("k", -2))
    >>> check_changed_first([k, f], {"k": 64, "f": 63})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: f must be an integer in [-inf, k-2=62]; got 63
    """
    params = list(params)
    changed = {p.name for p in params if not _same(values[p.name], p.default)}
    unchanged = {p.name: values[p.name] for p in params if p.name not in changed}
    known = {**(context or {}), **unchanged}
    for p in params:
        if p.name not in changed or not any(p.refs.values()):
            continue
        try:
            p.check(values[p.name])
        except ConfigError:
            continue  # outside its static range: reported by the checks in table order
        p.check(values[p.name], known)


def check_values(
    params: Iterable[Param], given: Mapping[str, Any], context: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The values ``given`` (dotted names) of the settings ``params`` of one table, checked.

    Each changed setting first against the ones left at their defaults
    (:func:`check_changed_first`), then every setting in table order against those before
    it and ``context`` (the checked settings of other tables), then the settings required
    where they apply. Returns the checked (normalized) values by dotted name.

    >>> src = Param("model.source", "string", None, "", applies=kind_is("model", "custom"),
    ...             required=True)
    >>> kind = Param("model.kind", "choice", "none", "", choices=("none", "custom"))
    >>> check_values([kind, src], {"model.kind": "custom", "model.source": None})
    Traceback (most recent call last):
    ...
    pgfl.validation.ConfigError: model.source is required when model.kind = "custom"
    """
    params = list(params)
    check_changed_first(params, given, context)
    checked: dict[str, Any] = dict(context or {})
    for p in params:
        checked[p.name] = p.check(given[p.name], checked)
    for p in params:
        if p.required and checked[p.name] is None and p.applies.test(checked):
            raise ConfigError(f"{p.name} is required when {p.applies.text}")
    return {p.name: checked[p.name] for p in params}


def _same(value: Any, default: Any) -> bool:
    """Whether a given value is its setting's default (a list equals its tuple)."""
    if isinstance(value, list):
        value = tuple(value)
    try:
        return bool(value == default) and type(value) is type(default)
    except (TypeError, ValueError):  # an array-like compared elementwise
        return False


# --------------------------------------------------------------------------- tables
class ParamTable(Mapping[str, Param]):
    """The settings of one kind of configuration file, by dotted name, in reference order.

    ``params`` is a list of settings, or a function that lists them together with
    ``version``, a function whose value changes whenever that list may have (a registry
    of mechanisms that declare their own settings): the table then follows the registry,
    so a setting a mechanism declares is accepted and documented wherever the table is read.

    >>> t = ParamTable([Param("seed", "int", 0, "Root seed.", lo=0)])
    >>> t.check("seed", 3), t.section("")[0].name
    (3, 'seed')
    >>> extra = []
    >>> live = ParamTable(lambda: [*t.values(), *extra], version=lambda: len(extra))
    >>> extra.append(Param("privacy.mine", "real", 1.0, "A new scheme's setting.", lo=0))
    >>> [p.name for p in live.section("privacy")]
    ['privacy.mine']
    """

    def __init__(
        self,
        params: Iterable[Param] | Callable[[], Iterable[Param]],
        version: Callable[[], Hashable] | None = None,
    ) -> None:
        self._source = params if callable(params) else tuple(params)
        self._version = version
        self._seen: Hashable = object()
        self._params: dict[str, Param] = {}
        self._by_key: dict[str, list[str]] = {}
        self._sections: dict[str, list[Param]] = {}
        self._sync()

    def _sync(self) -> None:
        """Rebuild the table when its source changed (a mechanism registered or removed)."""
        now = None if self._version is None else self._version()
        if now == self._seen:
            return
        self._seen = now
        params: dict[str, Param] = {}
        by_key: dict[str, list[str]] = {}
        sections: dict[str, list[Param]] = {}
        for p in self._source() if callable(self._source) else self._source:
            if p.name in params:
                raise ValueError(f"setting {p.name} is declared twice")
            params[p.name] = p
            by_key.setdefault(p.key, []).append(p.name)
            sections.setdefault(p.section, []).append(p)
        self._params, self._by_key, self._sections = params, by_key, sections

    @property
    def version(self) -> Hashable:
        """What the table is built from (it changes when a declaring registry changes)."""
        self._sync()
        return self._seen

    def __getitem__(self, name: str) -> Param:
        self._sync()
        return self._params[name]

    def __iter__(self) -> Iterator[str]:
        self._sync()
        return iter(tuple(self._params))

    def __len__(self) -> int:
        self._sync()
        return len(self._params)

    def __contains__(self, name: object) -> bool:
        self._sync()
        return name in self._params

    def section(self, section: str) -> list[Param]:
        """The settings of one table (``""``: the top level), in reference order."""
        self._sync()
        return list(self._sections.get(section, ()))

    def dotted(self, context: Mapping[str, Any]) -> dict[str, Any]:
        """``context`` with short names (``K``) replaced by dotted ones (``data.K``)."""
        self._sync()
        out = {}
        for key, value in context.items():
            if key in self._params:
                out[key] = value
                continue
            names = self._by_key.get(key, [])
            if len(names) != 1:
                raise TypeError(
                    f"context {key!r} must be a dotted setting name; ambiguous or unknown"
                )
            out[names[0]] = value
        return out

    def _elsewhere(self, key: str, section: str) -> str:
        """`` (did you mean privacy.KEY?)`` when ``key`` is a setting of another table."""
        self._sync()
        others = [n for n in self._by_key.get(key, []) if self._params[n].section != section]
        return f" (did you mean {others[0]}?)" if len(others) == 1 else ""

    def check(self, name: str, value: Any, **context: Any) -> Any:
        """Validate ``value`` for setting ``name``; return it normalized (lists → tuples).

        ``context`` gives the values of the settings a bound refers to, by short name when
        unambiguous (``K=100``) or by dotted name (``**{"data.K": 100}``). Raises
        :class:`~pgfl.validation.ConfigError` with the setting, its allowed range and the
        value; ``KeyError`` for an unknown name.
        """
        return self._params[name].check(value, self.dotted(context))

    def markdown(
        self, sections: Iterable[str], titles: Mapping[str, str], *, level: str = "##"
    ) -> list[str]:
        """The reference's lines for ``sections``: a table of settings under each title."""
        lines: list[str] = []
        for section in sections:
            lines += [f"{level} {titles[section]}", ""]
            lines += ["| setting | type | allowed | default | only with | description |"]
            lines += ["|---|---|---|---|---|---|"]
            for p in self.section(section):
                name = f"`{p.name}`" + (" †" if p.batched else "")
                only = "" if p.applies is None else p.applies.text.replace('"', "`")
                if p.required:
                    only += " (required then)"
                cells = [name, TYPES[p.kind], p.allowed(), toml_value(p.default), only, p.doc]
                lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            lines.append("")
        return lines

    def check_table(
        self,
        section: str,
        values: Any,
        where: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Validate one TOML table of settings: unknown keys rejected, defaults filled in.

        ``where`` prefixes the table's name in messages (``curves[1].``). Bounds between
        settings of the same table are applied in reference order, after each changed
        setting has been checked against the ones left at their defaults
        (:func:`check_values`); bounds on settings of other tables use
        ``context`` (their checked values, by dotted name). Returns the table's values by
        dotted name.
        """
        name = where + (section or "the top level")
        if not isinstance(values, Mapping):
            raise ConfigError(f"{name} must be a table of settings; got {values!r}")
        params = {p.key: p for p in self.section(section)}
        for key in values:
            if key not in params:
                prefix = f"{where}{section}." if section else where
                raise ConfigError(
                    f"unknown setting {prefix}{key}; allowed: {', '.join(sorted(params))}"
                    + (did_you_mean(key, params) or self._elsewhere(key, section))
                )
        given = {p.name: values.get(key, p.default) for key, p in params.items()}
        return check_values(params.values(), given, context)

"""Tables of results printed by the commands (the files hold the full numbers).

The summary table is kept narrow (about 100 columns for the shipped presets): short
lower-case headers with their unit, a column only where some curve has a value (no
disagreement for a single unit, no MSD for a neural network), test accuracy in % with one
decimal (a 0.1-point difference shows), ε in a compact form; what went wrong (divergence,
aborts, clipping) is told in lines below it.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Iterable
from itertools import groupby
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

__all__ = [
    "PAPER_NOTE",
    "accountant_order",
    "calibration_line",
    "epsilon_columns",
    "print_adversaries",
    "print_frontier",
    "print_muffliato",
    "print_scores",
    "print_summary",
    "print_sweep",
]

out = Console()
if not out.is_terminal:  # pipes and CI logs: wide enough for the summary table
    out = Console(width=160)


#: The line under every table that shows the ``paper`` accountant (marked ``*``).
PAPER_NOTE = (
    "* paper: the papers' published bound, for reference; under-reports for M > 1 (docs/privacy.md)"
)


def accountant_order(names: Iterable[str]) -> list[str]:
    """Accountants in print order: the tight ``pld`` first, the other sound ones, ``paper`` last.

    >>> accountant_order(["paper", "basic", "pld", "rdp"])
    ['pld', 'basic', 'rdp', 'paper']
    """
    return sorted(names, key=lambda a: (a == "paper", a != "pld", a))


def accountant_header(name: str, prefix: str = "") -> str:
    """A column header for an accountant's ε; the papers' bound is marked (see PAPER_NOTE)."""
    return f"{prefix}{name}*" if name == "paper" else f"{prefix}{name}"


def _plain(text: str) -> None:
    """Print a line as is: no markup (paths may hold brackets), never wrapped."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


def _fmt(value: Any, digits: int = 2) -> str:
    """A table cell; ``—`` for no value (diverged) or a non-finite one.

    >>> _fmt(-45.812), _fmt(None), _fmt(float("nan"))
    ('-45.81', '—', '—')
    """
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return escape(str(value))


#: A dB value below this is zero up to rounding: squared differences of double-precision
#: models of size about 1 are at least 1e-32 (−320 dB) when they are not exactly zero.
EXACT_DB = -250.0


def _fmt_db(value: Any) -> str:
    """A dB cell: ``exact`` for zero up to rounding (``-inf``, or below :data:`EXACT_DB`).

    Every server holding the same model (a trusted aggregator's average) has zero
    disagreement, ``10 log10 0 = -inf`` dB, or a rounding residue of about −300 dB: both
    mean the same thing, which a number does not say.

    >>> _fmt_db(-12.345), _fmt_db(float("-inf")), _fmt_db(-301.2), _fmt_db(None)
    ('-12.35', 'exact', 'exact', '—')
    """
    if isinstance(value, float) and (value == -math.inf or value < EXACT_DB):
        return "exact"
    return _fmt(value)


def print_sweep(summary: dict[str, Any]) -> None:
    """Swept curves (graph learning): an MCC and a relative-error table, one column per x.

    Two narrow tables rather than one of ``MCC / error`` cells (the swept variable is named
    in the line above them, not in a header). A privatized curve's row names its target
    ε̄ (two curves of one mechanism differ by it), and a line below says what that ε̄ is:
    its δ, the tight (PLD) ε of what the mechanism accounts, and what it covers, or not.
    """
    curves = summary["curves"]
    name = summary.get("x_name", "x")
    _plain(f"{summary.get('experiment', '')}: MCC / relative error per {name}")
    labels = [_sweep_label(c) for c in curves]
    for key, title in (("mcc", "MCC"), ("relative_error", "relative error")):
        table = Table(title=title)
        table.add_column("curve")
        for x in curves[0]["x"]:
            table.add_column(f"{x:g}" if isinstance(x, float) else str(x), justify="right")
        for label, c in zip(labels, curves, strict=True):
            table.add_row(escape(label), *(_fmt(v) for v in c.get(key, [])))
        out.print(table)
    for label, c in zip(labels, curves, strict=True):
        if "epsilon" in c:
            line = f"curve {label}: δ = {c.get('delta', summary.get('delta')):g}"
            if c.get("epsilon_pld") is not None:
                line += f", tight ε of what is accounted {c['epsilon_pld']:.3g}"
            if c.get("epsilon_covers"):
                line += f"; covers {c['epsilon_covers']}"
            _plain(line)
    for claim, holds in summary.get("claims", {}).items():
        _plain(f"claim {claim}: {'holds' if holds else 'does NOT hold'}")


def _sweep_label(c: dict[str, Any]) -> str:
    """A swept curve's row label: its label, and its target ε̄ if it is privatized."""
    if "epsilon" not in c:
        return str(c["label"])
    return f"{c['label']} ε̄={c['epsilon']:g}"


def _percent(value: Any) -> str:
    """A fraction as a percentage with one decimal (``0.9123`` → ``91.2``); ``—`` if none."""
    if value is None or not math.isfinite(value):
        return "—"
    return f"{100 * value:.1f}"


#: The frontier's tables per set-up and T: (summary key, what it is, cell format).
_FRONTIER_METRICS = (
    ("centroid_msd_db", "centroid MSD dB", lambda v: _fmt(v, 1)),
    ("individual_msd_db", "average individual MSD dB", lambda v: _fmt(v, 1)),
    ("test_error", "test error %", _percent),
)


def print_muffliato(summary: dict[str, Any]) -> None:
    """One gossip averaging: worst ε_{u→v} per graph distance, exact view, then the paper's sum.

    Two narrow tables (one row per graph and number of gossip steps K, one column per graph
    distance d) rather than one of ``exact / sum`` cells; the second also counts the pairs
    the sum under-reports.
    """
    by = {(p["graph"], p["kind"], p["steps"], p["view"]): p for p in summary["profiles"]}
    under = {(u["graph"], u["kind"], u["steps"]): u for u in summary["under_reported"]}
    top = max(max(p["distance"]) for p in summary["profiles"])
    views = (
        ("exact", "worst ε_{u→v} at graph distance d: the exact view (plain gossip)"),
        ("sum", "worst ε_{u→v} at graph distance d: Muffliato's per-message sum (plain gossip)"),
    )
    for view, title in views:
        table = Table(title=title)
        extra = ("sum < exact",) if view == "sum" else ()
        for col in ("graph", "K", *(f"d={d}" for d in range(1, top + 1)), *extra):
            table.add_column(col, justify="left" if col == "graph" else "right")
        for graph in summary["graphs"]:
            for k in summary["steps"]:
                p = by[(graph, "plain", k, view)]
                cells = {d: f"{e:.2f}" for d, e in zip(p["distance"], p["max"], strict=True)}
                u = under[(graph, "plain", k)]
                tail = (f"{u['pairs']} of {u['of']} pairs",) if view == "sum" else ()
                table.add_row(graph, str(k), *(cells.get(d, "") for d in range(1, top + 1)), *tail)
        out.print(table)
    _plain(
        f"one averaging (T = 1), local noise sigma = {summary['sigma']:.4g} (local DP: epsilon "
        f"= {summary['local_dp_epsilon']:g}), delta = {summary['delta']:g}; Chebyshev gossip "
        "has the same exact view (its sum, the means and the certified bound: profiles.csv)"
    )


def print_frontier(summary: dict[str, Any]) -> None:
    """The privacy-utility frontier: per set-up, T and metric, the schemes ranked per target ε.

    One table per metric (centroid and average individual MSD in dB; the centroid's test
    error in % where the set-up has a test set): a row per scheme in rank order at the
    first ε, each cell its value and rank (``#1`` is the best scheme whose ε covers the
    metric); under the tables, what each scheme's ε covers in words (lines of at most 100
    characters, so the tables keep their width). A scheme whose ε does not cover the
    metric is marked ``*`` (not protected) and ranked after every scheme whose ε does.
    """
    curves = summary["curves"]
    key = lambda c: (c["setup"], c["iterations"])  # noqa: E731
    for (setup, T), group in groupby(curves, key=key):
        group = list(group)
        baseline = next(
            (
                b
                for b in summary.get("baselines", [])
                if (b["setup"], b["iterations"]) == (setup, T)
            ),
            None,
        )
        for metric, what, fmt in _FRONTIER_METRICS:
            if metric not in group[0]:
                continue
            table = Table(title=f"{setup}, T={T}: {what} at target ε, ranked")
            table.add_column("scheme")
            for x in group[0]["x"]:
                table.add_column(f"ε={x:g}", justify="right")
            rank = f"{metric}_rank"
            for c in sorted(group, key=lambda c: (c.get(rank) or [0])[0] or 0):
                covered = c.get(f"{metric}_covered", True)
                name = c["label"] if covered else f"{c['label']} *"  # * NOT PROTECTED
                ranks = c.get(rank) or [None] * len(c[metric])
                cells = [fmt(v) if r is None else f"{fmt(v)} #{r}"
                         for v, r in zip(c[metric], ranks, strict=True)]  # fmt: skip
                table.add_row(escape(name), *cells)
            if baseline is not None:
                cell = fmt(baseline.get(metric))
                table.add_row("no privacy", *([cell] * len(group[0]["x"])))
            out.print(table)
    best = summary.get("best", [])
    if best:
        table = Table(title="best scheme per adversary and target ε (centroid MSD dB)")
        for col in ("adversary", "target ε", "best", "dB", "no trusted party", "dB "):
            table.add_column(col, justify="right" if col.startswith(("target", "dB")) else "left")
        for b in best:
            table.add_row(
                b["adversary"], f"{b['target_epsilon']:g}",
                escape(b.get("best", "—")), _fmt(b.get("best_db"), 1),
                escape(b.get("distributed", "—")), _fmt(b.get("distributed_db"), 1),
            )  # fmt: skip
        out.print(table)
    _plain(
        f"noise calibrated with the {summary['accountant']} accountant at delta = "
        f"{summary['delta']:g} (— = diverged)"
    )
    tuning = summary.get("tuning")
    if tuning:
        _print_knobs(curves, tuning)
    covers: dict[str, list[str]] = {}
    for c in curves:
        names = covers.setdefault(c.get("epsilon_covers", ""), [])
        if c["label"] not in names:
            names.append(c["label"])
    lines = ["what each scheme's epsilon covers:"]
    for text, names in covers.items():
        lines += textwrap.wrap(f"{', '.join(names)}: {text}", 96, initial_indent="  ",
                               subsequent_indent="    ")  # fmt: skip
    lines += textwrap.wrap(
        "#1 = lowest value among the schemes whose epsilon covers the metric; * = NOT "
        "PROTECTED: the scheme's noise does not protect that quantity, and it ranks after all "
        "of them; more in summary.json (scope) and docs/privacy.md",
        100,
    )
    for line in lines:
        _plain(line)


def _print_knobs(curves: list[dict[str, Any]], tuning: dict[str, Any]) -> None:
    """The point each scheme was reported at, per target ε, and what tuning spent."""
    key = lambda c: (c["setup"], c["iterations"])  # noqa: E731
    for (setup, T), group in groupby(curves, key=key):
        group = list(group)
        table = Table(title=f"{setup}, T={T}: the tuned point (best {tuning['metric']})")
        table.add_column("scheme")
        for x in group[0]["x"]:
            table.add_column(f"ε={x:g}")
        for c in group:
            cells = [" ".join(f"{k.rpartition('.')[2]}={v:.3g}" if isinstance(v, float) else
                              f"{k.rpartition('.')[2]}={v}" for k, v in knobs.items())
                     for knobs in c["knobs"]]  # fmt: skip
            table.add_row(escape(c["label"]), *cells)
        out.print(table)
    searched = len(tuning["points"])
    _plain(f"tuned on the {tuning['on']} data: {searched} points searched (grid.csv)")
    for line in textwrap.wrap(tuning["note"], 100):
        _plain(line)
    edge = tuning.get("at_edge") or []
    if edge:
        _plain(f"{len(edge)} chosen value(s) at the end of their grid (the best may lie beyond; "
               "widen it with --grid), e.g.:")  # fmt: skip
        for line in edge[:3]:
            _plain(f"  {line}")


def print_scores(summary: dict[str, Any]) -> None:
    """A table of named score sets (e.g. clustering NMI / RI / FMI per method)."""
    rows = summary["table"]
    metrics = list(next(iter(rows.values()), {}))
    table = Table(title=escape(str(summary.get("experiment", ""))))
    table.add_column("method")
    for m in metrics:
        table.add_column(m.upper(), justify="right")
    for name, scores in rows.items():
        table.add_row(escape(name), *(_fmt(scores.get(m), 3) for m in metrics))
    out.print(table)


def print_summary(summary: dict[str, Any]) -> None:
    """A table of the summary's curves (one row each), ε per accountant, divergences."""
    curves = summary.get("curves", [])
    if summary.get("experiment") in ("frontier", "frontier-adversary"):
        print_frontier(summary)
        return
    if summary.get("experiment") == "muffliato":
        print_muffliato(summary)
        return
    if curves and isinstance(curves[0].get("x"), list):
        print_sweep(summary)
        return
    if not curves and isinstance(summary.get("table"), dict):
        print_scores(summary)
        return
    columns = _summary_columns(curves, summary.get("plot") or ())
    table = Table(title=escape(str(summary.get("experiment", ""))))
    table.add_column("curve")
    for header, _ in columns:
        table.add_column(header, justify="right")
    for c, cells in zip(curves, _summary_cells(curves, columns), strict=True):
        table.add_row(escape(c["label"]), *cells)
    out.print(table)
    deltas = {c["delta"] for c in curves if "delta" in c}
    if deltas:
        at = ", ".join(f"{d:g}" for d in sorted(deltas))
        for line in textwrap.wrap(calibration_line(_calibrated(curves)), 100):
            _plain(line)
        _plain(f"link ε: the link's own ε at δ = {at} after the last iteration, no sampling credit")
        if any(" rdp" in cell(c) for c in curves for h, cell in columns if "ε" in h):
            _plain("rdp beside an ε: the Rényi bound, smaller there than the PLD")
        if any("paper" in c.get("epsilon", {}) for c in curves):
            _plain(PAPER_NOTE)
        _plain("what each ε covers: summary.json (epsilon_scope) and docs/privacy.md")
    for c in curves:
        print_adversaries(c)
    for c in curves:
        _print_faults(c, summary.get("repetitions", 1))
        if c.get("epsilon_reason"):
            _plain(f"curve {c['label']}: ε = ∞ ({c['epsilon_reason']})")
        else:
            for a, e in c.get("epsilon", {}).items():
                if e is not None and (isinstance(e, str) or e == math.inf):
                    _plain(f"curve {c['label']}: ε {a} = ∞ ({_infinite(c, a)})")
        if c.get("centroid_bias_db") is not None:
            _plain(
                f"curve {c['label']}: its centroid MSD levels off at about "
                f"{c['centroid_bias_db']:.1f} dB however long it runs: clients compute their "
                "gradients at the servers' noisy models, so the centroid converges to the "
                "noise-smoothed optimum, offset from w° by a bias that grows with the noise "
                "variance (∝ σ² for small σ²; README, hybrid)"
            )


def _infinite(c: dict[str, Any], accountant: str) -> str:
    """Why accountant ``accountant`` reports ε = ∞ for a curve that has a finite one."""
    note = c.get("epsilon_notes", {}).get(accountant, "")
    if accountant == "paper" and "valid only below 1" in note:
        return (
            "the papers' classic Gaussian bound holds only while every iteration's ε is below "
            "1, and here one is not; the other accountants' ε is sound"
        )
    return note or "this accountant gives no finite bound for these releases"


def print_adversaries(c: dict[str, Any]) -> None:
    """A privatized curve's ε against each adversary, whom it leaves exposed, whom it trusts.

    One line of ε values (each with the accountant that gave it where that is not
    ``pld``), then, indented, the adversaries it does not protect against with why, and
    the trusted parties every number rests on.
    """
    by = c.get("epsilon_by_adversary")
    if not by:
        return
    neighbours = c.get("neighbours", "client")
    source = c.get("accountant_by_adversary", {})
    notes = c.get("adversary_notes", {})
    protected = [f"{a} {_eps_cell(e, source.get(a))}" for a, e in by.items() if e is not None]
    line = f"curve {c['label']} ({neighbours}-level neighbours): ε vs "
    _plain(line + (", ".join(protected) or "no adversary"))
    exposed = [f"{a} ({notes[a]})" if notes.get(a) else a for a, e in by.items() if e is None]
    if exposed:
        _plain("  NOT protected against " + "; ".join(exposed))
    for a, e in by.items():
        if e is not None and notes.get(a):
            _plain(f"  {a}: {notes[a]}")
    for party, what in c.get("trusted_parties", {}).items():
        _plain(f"  trusts the {party}: {what}")


def _eps_cell(value: Any, source: str | None) -> str:
    """An ε with the accountant that gave it, where that is not ``pld``: ``1.06 rdp``.

    >>> _eps_cell(1.0601, "rdp"), _eps_cell(0.5, "pld"), _eps_cell(None, None)
    ('1.06 rdp', '0.500', '—')
    """
    text = _fmt_eps(value)
    return f"{text} {source}" if source not in (None, "pld") and value is not None else text


def _calibrated(curves: list[dict[str, Any]]) -> dict[str, str]:
    """Each privatized curve calibrated against an adversary, by label: that adversary."""
    return {c["label"]: c["calibrated_adversary"] for c in curves if c.get("calibrated_adversary")}


def calibration_line(against: dict[str, str]) -> str:
    """The line under a table that says whom the first ε column is against ("": no column).

    >>> calibration_line({"central": "other_server", "a": "link_eavesdropper",
    ...                   "b": "link_eavesdropper", "c": "link_eavesdropper"})[:86]
    'ε vs calibrated adversary: other_server for central; link_eavesdropper for the other 3'
    """
    if not against:
        return ""
    groups: dict[str, list[str]] = {}
    for label, adversary in against.items():
        groups.setdefault(adversary, []).append(label)
    what = "the ε calibrated to, with sampling credit where the adversary lacks the sample"
    if len(groups) == 1:
        return f"ε vs {next(iter(groups))}: {what}"
    order = sorted(groups, key=lambda a: len(groups[a]))  # the largest group last
    parts = [f"{a} for {' and '.join(groups[a])}" for a in order[:-1]]
    rest = groups[order[-1]]
    parts.append(f"{order[-1]} for " + (" and ".join(rest) if len(rest) < 3 else
                                         f"the other {len(rest)}"))  # fmt: skip
    return f"ε vs calibrated adversary: {'; '.join(parts)}: {what}"


def _against_header(against: dict[str, str]) -> str:
    """The first ε column's header: the adversary, if every calibrated curve shares one."""
    names = set(against.values())
    return f"ε vs {names.pop()}" if len(names) == 1 else "ε vs calibrated adversary"


#: The summary table's columns: (header, the value of a curve's entry, cell format).
_SUMMARY_COLUMNS: tuple[tuple[str, Callable[[dict[str, Any]], Any], Callable[[Any], str]], ...] = (
    ("centroid dB", lambda c: c.get("centroid_msd_db"), _fmt_db),
    ("indiv. dB", lambda c: c.get("individual_msd_db"), _fmt_db),
    ("disagr. dB", lambda c: c.get("disagreement_db"), _fmt_db),
    ("acc %", lambda c: c.get("test_accuracy"), _percent),
    ("log-loss", lambda c: c.get("test_log_loss"), lambda v: _fmt(v, 3)),
    ("ε target", lambda c: c.get("target_epsilon"), lambda v: _fmt_eps(v)),
)


def _summary_columns(
    curves: list[dict[str, Any]], plot: Iterable[str] = ()
) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """(header, cell of a curve) of every column some curve has a value in.

    A column every curve leaves empty (``—``: the MSDs of a model without a closed-form
    optimum) or zero (``exact``: the disagreement of a single unit) is left out; so is
    ``diverged``, which the lines below the table tell. One ``ε NAME`` column per
    accountant any curve reports, in :func:`accountant_order` (the papers' bound last,
    marked ``*``). The test column says what the figure plots: ``error %`` when it plots
    the test error (fig7), else ``acc %``.
    """
    columns = []
    specs = list(_SUMMARY_COLUMNS)
    if "test_error" in plot and "test_accuracy" not in plot:  # the figure's own quantity
        at = [h for h, _, _ in specs].index("acc %")
        specs[at] = ("error %", lambda c: c.get("test_error"), _percent)
    for header, value, fmt in specs:
        cell = lambda c, value=value, fmt=fmt: fmt(value(c))  # noqa: E731
        if any(cell(c) not in ("—", "exact") for c in curves):
            columns.append((header, cell))
    against = _calibrated(curves)
    if against:  # one word a line: the adversary's name is long, its cells short
        header = "ε vs\n" + _against_header(against)[5:].replace(" ", "\n").replace("_", "\n")
        columns.append((header, _against_cell))
    accountants = accountant_order({a for c in curves for a in c.get("epsilon", {})})
    for a in accountants:
        header = accountant_header(a, "link ε\n")
        columns.append((header, lambda c, a=a: _link_cell(c, a)))
    return columns


def epsilon_columns(
    curves: list[dict[str, Any]],
) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
    """The ε columns of :func:`print_summary`'s table (header, cell), for other tables."""
    return [col for col in _summary_columns(curves) if "ε" in col[0] and "target" not in col[0]]


def _against_cell(c: dict[str, Any]) -> str:
    """The ε against the adversary a curve's noise was calibrated against, with its accountant."""
    a = c.get("calibrated_adversary")
    if a is None:
        return "—"
    return _eps_cell(c["epsilon_by_adversary"].get(a), c.get("accountant_by_adversary", {}).get(a))


def _link_cell(c: dict[str, Any], accountant: str) -> str:
    """The link's own ε by one accountant, naming the bound where it is another's."""
    source = c.get("epsilon_source", {}).get(accountant)
    value = c.get("epsilon", {}).get(accountant)
    if value is None or isinstance(value, str):
        return _fmt_eps(value)
    return _eps_cell(value, source) if source and source != accountant else _fmt_eps(value)


def _summary_cells(
    curves: list[dict[str, Any]], columns: list[tuple[str, Callable[[dict[str, Any]], str]]]
) -> list[list[str]]:
    """Each curve's cells, column by column."""
    return [[cell(c) for _, cell in columns] for c in curves]


#: What a mechanism's record (``Mechanism.record``: a dict of a curve in ``summary.json``)
#: counts that went wrong, by field, and the line that says so (filled in from the record's
#: fields): read from whichever records a curve's schemes wrote, no scheme named.
_RECORD_FAULTS = {
    "aborted_unit_rounds": "secure aggregation aborted in {aborted_unit_rounds} unit-rounds "
    "(fewer than t={threshold} clients survived; the unit kept its model; run.log lists them)",
    "clipped_messages": "{clipped_messages} client messages clipped to the secure-aggregation "
    "range ±{clip:g} (privacy.secagg_clip)",
    "clipped_or_wrapped": "{clipped_or_wrapped} client messages clipped to norm {clip:g} or unit "
    "sums wrapped around the modulus 2^{bits} (privacy.ddp_bits)",
}


def _fault(line: str, field: str, record: dict[str, Any]) -> str:
    """``line`` filled in from ``record``; the bare count where a field it names is missing.

    >>> _fault(_RECORD_FAULTS["aborted_unit_rounds"], "aborted_unit_rounds",
    ...        {"aborted_unit_rounds": 2, "threshold": 3})[:53]
    'secure aggregation aborted in 2 unit-rounds (fewer th'
    >>> _fault(_RECORD_FAULTS["clipped_messages"], "clipped_messages", {"clipped_messages": 4})
    'clipped_messages = 4'
    """
    try:
        return line.format(**record)
    except (KeyError, ValueError):
        return f"{field} = {record[field]}"


def _print_faults(c: dict[str, Any], repetitions: int) -> None:
    """One line per thing that went wrong in a curve: divergence, aborts, clipping."""
    count = c.get("diverged_repetitions", int(bool(c.get("diverged"))))
    if c.get("diverged") and count < repetitions:  # fewer than half stayed finite
        _plain(
            f"curve {c['label']} diverged: {count} of {repetitions} repetitions (the first at "
            f"iteration {c['diverged_at']}); its values are those of the other "
            f"{repetitions - count} only"
        )
    elif c.get("diverged"):
        _plain(f"curve {c['label']} diverged at iteration {c['diverged_at']}")
    elif count:
        _plain(
            f"curve {c['label']}: {count} of {repetitions} repetitions diverged (the first at "
            f"iteration {c['diverged_at']}); its values average the other {repetitions - count}"
        )
    for record in c.values():  # a mechanism's own records (Mechanism.record)
        if isinstance(record, dict):
            for field, line in _RECORD_FAULTS.items():
                if record.get(field):
                    _plain(f"curve {c['label']}: " + _fault(line, field, record))


def _fmt_eps(value: Any) -> str:
    """An ε in at most 6 characters: 3 significant digits, a short exponent above 9999.

    Trailing zeros are kept below 100, so that an ε calibrated to 1 reads ``1.00`` and one
    slightly above it ``1.01``.

    >>> [_fmt_eps(v) for v in (0.5, 1.0601, 291.4, 2000.0, 1.4213e6, 1e6, float("inf"), None)]
    ['0.500', '1.06', '291', '2000', '1.42e6', '1e6', '∞', '—']
    """
    if value is None:
        return "—"
    if isinstance(value, str) or value == float("inf"):
        return "∞"
    if value < 100:
        return f"{value:#.3g}".rstrip(".")
    if value < 1e4:
        return f"{value:.3g}" if value < 1e3 else f"{value:.0f}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"

"""Figures made from saved results (``summary.json`` + ``curves.csv``), never from memory.

Every curve is drawn in the style of its privacy scheme (:mod:`pgfl.style`): the same
scheme has the same colour in every figure; line styles tell variants apart (models or
updates, Laplace or Gaussian); a swept value is an opacity, never another colour.
Curves that coincide to plotting precision are drawn with interleaved dashes and
staggered markers so that each stays visible, and their legend entry says
"(coincides with X)".

Figures of a run (:func:`plot_run`):

* ``figure.png``: the metrics of ``summary["plot"]`` against the iteration, one column per
  metric. With more than :data:`PLAIN_CURVES` curves and a detected sweep, small
  multiples: one row per swept scheme (its curves in its colour, lighter for smaller
  values, with the noise-free reference in black) and one legend per row.
* ``sweep.png`` (only when a sweep is detected): the steady-state value of each metric
  against the swept parameter on a log axis, one line per scheme. For a metric in dB a
  small panel below shows the *local* slope between neighbouring points in dB per decade,
  and the legend gives a power-law slope only over the ranges where the local slopes
  agree (:func:`power_law_ranges`); the step-size laws of "Privatized Graph Federated
  Learning" (Rizk, Vlaski & Sayed, arXiv:2203.07105, §4) are such ranges: an ``O(μ)``
  steady state rises by 10 dB per decade of μ, an ``O(1/μ)`` one falls by 10.

Other figures: :func:`plot_frontier` (``frontier.png`` of ``pgfl reproduce frontier``, from
its ``summary.json``), :func:`plot_epsilon_curves` (ε(i) per curve or accountant),
:func:`plot_audit_tradeoff` (an audit's attack against the accountants' trade-off curves)
and :func:`plot_muffliato` (``pgfl reproduce muffliato``: ε_{u→v} by graph distance).

Sweeps are inferred from each curve's ``settings`` in ``summary.json`` (no config key):
see :func:`find_sweeps`.

One module per figure family: :mod:`~pgfl.plots.base` (what every figure shares),
:mod:`~pgfl.plots.sweeps` (sweeps, slopes, schemes in words), :mod:`~pgfl.plots.run`
(``figure.png``, ``sweep.png``, :func:`plot_run`), :mod:`~pgfl.plots.steady` (steady
states, the population), :mod:`~pgfl.plots.frontier`, :mod:`~pgfl.plots.privacy` (ε(i),
the audit), :mod:`~pgfl.plots.muffliato`. This package re-exports their public names.
"""

from __future__ import annotations

from pgfl.plots.base import (
    ALPHA_RANGE,
    COINCIDE,
    INSIDE_LEGEND,
    MARKS,
    MAX_PANEL_CURVES,
    PLAIN_CURVES,
    RC,
    Coincidences,
    PlotCurve,
    coinciding,
    draw_curves,
    entry_style,
    legend_handles,
    readable,
    save_figure,
)
from pgfl.plots.frontier import frontier_bars, frontier_figure, plot_frontier
from pgfl.plots.muffliato import muffliato_figure, plot_muffliato
from pgfl.plots.privacy import (
    audit_figure,
    epsilon_figure,
    plot_audit_tradeoff,
    plot_epsilon_curves,
)
from pgfl.plots.run import iteration_figure, plot_run, sweep_figure
from pgfl.plots.steady import VARIANT_MARKERS, population_figure, steady_figure
from pgfl.plots.sweeps import (
    MIN_SWEEP_POINTS,
    SLOPE_TOLERANCE,
    SWEPT,
    PowerLaw,
    Sweep,
    SweepLine,
    find_sweeps,
    local_slopes,
    power_law_ranges,
    scheme_label,
    slope_db_per_decade,
)

__all__ = [
    "ALPHA_RANGE",
    "COINCIDE",
    "Coincidences",
    "INSIDE_LEGEND",
    "MARKS",
    "MAX_PANEL_CURVES",
    "MIN_SWEEP_POINTS",
    "PLAIN_CURVES",
    "PlotCurve",
    "PowerLaw",
    "RC",
    "SLOPE_TOLERANCE",
    "SWEPT",
    "Sweep",
    "SweepLine",
    "VARIANT_MARKERS",
    "audit_figure",
    "coinciding",
    "draw_curves",
    "entry_style",
    "epsilon_figure",
    "find_sweeps",
    "frontier_bars",
    "frontier_figure",
    "iteration_figure",
    "legend_handles",
    "local_slopes",
    "muffliato_figure",
    "plot_audit_tradeoff",
    "plot_epsilon_curves",
    "plot_frontier",
    "plot_muffliato",
    "plot_run",
    "population_figure",
    "power_law_ranges",
    "readable",
    "save_figure",
    "scheme_label",
    "slope_db_per_decade",
    "steady_figure",
    "sweep_figure",
]

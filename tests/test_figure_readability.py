"""Figures people can read: what can be checked on figures drawn from small result files.

Each test answers a complaint about the figures (issue "readability"): panels without
data, legends outside the canvas or in tiny fonts, colours that repeat across schemes or
change between figures, coinciding curves that hide each other, a 55-curve panel, and a
sweep slope fitted across a bend. The expected scheme of every curve is written out here
(``SCHEME_OF``), not taken from the code under test.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from matplotlib.colors import to_rgb
from matplotlib.text import Text

from pgfl import plots
from pgfl.graphlearn.plots import curves_figure
from pgfl.plots.frontier import _FRONTIER_METRICS
from pgfl.style import curve_style

# --- synthetic result files ------------------------------------------------------------------

#: The frontier's schemes, their privacy settings and the scheme each one is.
FRONTIER = {
    "client_laplace_models": ({"client_noise": "laplace"}, "models", "client_noise"),
    "client_gaussian_models": ({"client_noise": "gaussian"}, "models", "client_noise"),
    "client_laplace_updates": ({"client_noise": "laplace"}, "updates", "client_noise"),
    "client_gaussian_updates": ({"client_noise": "gaussian"}, "updates", "client_noise"),
    "random": ({"server_noise": "random"}, "models", "random"),
    "random_gaussian": ({"server_noise": "random"}, "models", "random"),
    "random_per_link": ({"server_noise": "random_per_link"}, "models", "random_per_link"),
    "graph_homomorphic": ({"server_noise": "graph_homomorphic"}, "models", "graph_homomorphic"),
    "hybrid": (
        {"client_noise": "secure_aggregation", "server_noise": "graph_homomorphic"},
        "models",
        "hybrid",
    ),
}
SCHEME_OF = {name: scheme for name, (_, _, scheme) in FRONTIER.items()}
SCHEME_OF.update(
    {
        "none": "none",
        "no noise": "none",
        "graph_homomorphic_eps": "graph_homomorphic",
        "random_eps": "random",
        "hybrid_eps": "hybrid",
    }
)
EPS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0)


def settings(privacy=None, share="models", **extra):
    s = {
        "mu": 0.7,
        "share": share,
        "client_noise": "none",
        "client_variance": 0.0,
        "server_noise": "none",
        "server_variance": 0.1,
    }
    return {**s, **(privacy or {}), **extra}


def entry(label, s, centroid=-30.0, individual=-20.0, **extra):
    return {
        "label": label,
        "centroid_msd_db": centroid,
        "individual_msd_db": individual,
        "diverged": False,
        "diverged_at": None,
        "settings": s,
        **extra,
    }


def summary(curves, plot=("centroid_msd_db", "individual_msd_db"), title="t"):
    return {"experiment": "t", "title": title, "plot": list(plot), "curves": curves}


def rows_for(curves, values, T=60):
    """``curves.csv`` rows; ``values[label](t)`` gives (centroid, individual) at iteration t."""
    return [
        {
            "label": c["label"],
            "iteration": str(t),
            "centroid_msd_db": str(values[c["label"]](t)[0]),
            "individual_msd_db": str(values[c["label"]](t)[1]),
        }
        for c in curves
        for t in range(1, T + 1)
    ]


def wiggle(level, k):
    return lambda t: (level + 3 * math.sin(t / 3 + k), level + 5 + 2 * math.cos(t / 4 + k))


def frontier_summary():
    """Regression (two metrics) and logistic (three) set-ups at T and T/10: hybrid equals
    graph-homomorphic, and in regression noise on updates equals noise on models."""
    curves, baselines = [], []
    for setup in ("regression", "logistic"):
        for T in (200, 20):
            baselines.append({"setup": setup, "iterations": T, "centroid_msd_db": -40.0,
                              "individual_msd_db": -38.0,
                              **({"test_error": 0.1} if setup == "logistic" else {})})  # fmt: skip
            for name in FRONTIER:
                twin = {"hybrid": "graph_homomorphic"}
                if setup == "regression":
                    twin.update({"client_laplace_updates": "client_laplace_models",
                                 "client_gaussian_updates": "client_gaussian_models"})  # fmt: skip
                j = list(FRONTIER).index(twin.get(name, name))
                c = {
                    "label": name,
                    "setup": setup,
                    "iterations": T,
                    "x": list(EPS),
                    "centroid_msd_db": [60 - 7 * j - 8 * math.log10(e) for e in EPS],
                    "individual_msd_db": [70 - 6 * j - 9 * math.log10(e) for e in EPS],
                    "legend": f"{name} (what its ε covers)",
                }
                if setup == "logistic":
                    c["test_error"] = [0.1 + 0.04 * j / (1 + e) for e in EPS]
                curves.append(c)
    return {
        "experiment": "frontier",
        "delta": 1e-5,
        "accountant": "pld",
        "setups": {"regression": "r", "logistic": "l"},
        "baselines": baselines,
        "curves": curves,
    }


def frontier_run():
    """A frontier sub-run: none + 9 schemes × 6 target ε (55 curves), as the runner writes it."""
    curves, values = [entry("none", settings(server_variance=0.0))], {"none": wiggle(-40, 0)}
    for k, (name, (privacy, share, _)) in enumerate(FRONTIER.items()):
        for e in EPS:
            label = f"{name}@{e:g}"
            s = settings(privacy, share, server_variance=0.0, client_variance=0.0)
            curves.append(entry(label, s, target_epsilon=e))
            values[label] = wiggle(60 - 6 * k - 8 * math.log10(e), k)
    return curves, values


def fig3_run():
    curves = [entry("none", settings())]
    values = {"none": wiggle(-44, 0)}
    for k, noise in enumerate(("graph_homomorphic", "random")):
        for v in (0.001, 0.01, 0.1, 1.0, 2.0, 10.0):
            label = f"{noise}_var={v:g}"
            curves.append(entry(label, settings({"server_noise": noise}, server_variance=v)))
            values[label] = wiggle(-30 + 10 * math.log10(v) - 10 * k, k + 1)
    return curves, values


def digits_run():
    """digits-mlp: hybrid equals graph-homomorphic at equal noise and at equal ε."""
    gh = {"server_noise": "graph_homomorphic"}
    hy = {"client_noise": "secure_aggregation", "server_noise": "graph_homomorphic"}
    curves = [
        entry("none", settings()),
        entry("graph_homomorphic", settings(gh)),
        entry("random", settings({"server_noise": "random"})),
        entry("hybrid", settings(hy)),
        entry("graph_homomorphic_eps", settings(gh), target_epsilon=2000.0),
        entry("random_eps", settings({"server_noise": "random"}), target_epsilon=2000.0),
        entry("hybrid_eps", settings(hy), target_epsilon=2000.0),
    ]
    values = {
        "none": wiggle(-45, 0),
        "graph_homomorphic": wiggle(-40, 1),
        "random": wiggle(-10, 2),
        "hybrid": wiggle(-40, 1),
        "graph_homomorphic_eps": wiggle(20, 3),
        "random_eps": wiggle(-15, 4),
        "hybrid_eps": wiggle(20, 3),
    }
    return curves, values


# --- what the figures show -------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def curve_id(line):
    """The curve a line draws: its gid, else its label (``None`` for helpers)."""
    name = line.get_gid() or line.get_label()
    if not name or name.startswith("_"):
        return None
    return name


def scheme(name):
    """The scheme of a curve id, from this file's table (frontier ``@ε`` suffixes dropped)."""
    name = name.split(",")[0]
    return SCHEME_OF.get(name.split("@")[0]) or SCHEME_OF.get(name.split("_var=")[0])


def data_lines(ax):
    """Lines with at least two finite points (no horizontal guides, no single markers)."""
    out = []
    for ln in ax.lines:
        y = np.asarray(ln.get_ydata(), dtype=float)
        if np.isfinite(y).sum() >= 2 and ln.get_transform() == ax.transData:
            out.append(ln)
    return out


def colours(fig):
    """``curve id -> set of RGB`` over every data line of the figure."""
    out: dict[str, set] = {}
    for ax in fig.axes:
        for ln in data_lines(ax):
            name = curve_id(ln)
            if name is not None:
                out.setdefault(name, set()).add(tuple(round(c, 4) for c in to_rgb(ln.get_color())))
    return out


def legends(fig):
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]


def legend_texts(fig):
    return [t.get_text().replace("\n", " ") for lg in legends(fig) for t in lg.get_texts()]


def all_figures():
    curves, values = fig3_run()
    fig3 = plots.iteration_figure(summary(curves), rows_for(curves, values))
    fig3_sweep = plots.sweep_figure(summary(curves), plots.find_sweeps(curves))
    curves, values = digits_run()
    digits = plots.iteration_figure(summary(curves), rows_for(curves, values))
    curves, values = frontier_run()
    subrun = plots.iteration_figure(summary(curves), rows_for(curves, values, T=20))
    return {
        "fig3 figure.png": fig3,
        "fig3 sweep.png": fig3_sweep,
        "digits-mlp figure.png": digits,
        "frontier sub-run figure.png": subrun,
        "frontier.png": plots.frontier_figure(frontier_summary()),
        "epsilon": plots.epsilon_figure(
            {"graph_homomorphic": np.geomspace(1, 100, 50), "random": np.geomspace(2, 80, 50)},
            title="t",
        ),
    }


# --- tests -----------------------------------------------------------------------------------


def test_no_axes_without_data_lines():
    # the frontier had an empty, switched-off test-error panel on every regression row
    for name, fig in all_figures().items():
        for ax in fig.axes:
            assert data_lines(ax), f"{name}: panel {ax.get_title()!r} has no data"


def test_every_legend_lies_inside_the_canvas_and_every_text_is_readable():
    for name, fig in all_figures().items():
        fig.canvas.draw()
        canvas = fig.bbox
        assert legends(fig), name
        for lg in legends(fig):
            box = lg.get_window_extent()
            assert box.x0 >= canvas.x0 - 1 and box.x1 <= canvas.x1 + 1, name
            assert box.y0 >= canvas.y0 - 1 and box.y1 <= canvas.y1 + 1, name
        small = {
            t.get_text()
            for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t.get_fontsize() < 8.5
        }
        assert not small, f"{name}: text under 8.5 pt: {sorted(small)[:5]}"


def test_distinct_schemes_get_distinct_colours_within_a_figure():
    for name, fig in all_figures().items():
        rgb_of_scheme: dict[str, set] = {}
        for curve, rgbs in colours(fig).items():
            if scheme(curve) is not None:
                rgb_of_scheme.setdefault(scheme(curve), set()).update(rgbs)
        assert len(rgb_of_scheme) >= 2, name
        for a, b in [(a, b) for a in rgb_of_scheme for b in rgb_of_scheme if a < b]:
            assert not rgb_of_scheme[a] & rgb_of_scheme[b], f"{name}: {a} and {b} share a colour"
        for s, rgbs in rgb_of_scheme.items():
            assert len(rgbs) == 1, f"{name}: {s} drawn in {len(rgbs)} colours"


def test_the_same_scheme_has_the_same_colour_in_every_figure():
    seen: dict[str, dict[str, set]] = {}
    for name, fig in all_figures().items():
        for curve, rgbs in colours(fig).items():
            if scheme(curve) is not None:
                seen.setdefault(scheme(curve), {}).setdefault(name, set()).update(rgbs)
    assert len(seen["graph_homomorphic"]) >= 5  # in (almost) every figure
    for s, by_figure in seen.items():
        everywhere = set.union(*by_figure.values())
        assert len(everywhere) == 1, f"{s}: {by_figure}"


def test_many_curves_are_split_into_small_panels():
    # the frontier's sub-runs drew 55 curves in one panel; fig3 13 noisy curves
    for curves, values in (frontier_run(), fig3_run()):
        fig = plots.iteration_figure(summary(curves), rows_for(curves, values, T=20))
        for ax in fig.axes:
            lines = data_lines(ax)
            assert len(lines) <= 8
            assert len({scheme(curve_id(ln)) for ln in lines} - {"none"}) == 1


def test_coinciding_curves_stay_visible_and_say_so():
    curves, values = digits_run()
    fig = plots.iteration_figure(summary(curves), rows_for(curves, values))
    texts = legend_texts(fig)
    assert "hybrid (coincides with graph_homomorphic)" in texts
    assert "hybrid_eps (coincides with graph_homomorphic_eps)" in texts
    assert sum("coincides" in t for t in texts) == 2
    for ax in fig.axes:
        by = {curve_id(ln): ln for ln in data_lines(ax)}
        gh, hy = by["graph_homomorphic"], by["hybrid"]
        np.testing.assert_allclose(gh.get_ydata(), hy.get_ydata())
        # the one drawn on top leaves gaps (a dash pattern) through which the other shows
        assert hy.get_zorder() >= gh.get_zorder() and hy.get_linestyle() != "-"
        assert to_rgb(gh.get_color()) != to_rgb(hy.get_color())
        # equal noise and equal ε of one scheme are told apart by the line style
        assert by["graph_homomorphic_eps"].get_linestyle() != gh.get_linestyle()
    # the frontier says where lines coincide, and only there
    texts = legend_texts(plots.frontier_figure(frontier_summary()))
    (hybrid,) = [t for t in texts if t.startswith("hybrid")]
    assert "coincides with graph_homomorphic)" in hybrid
    (updates,) = [t for t in texts if t.startswith("client_laplace_updates")]
    assert "coincides with client_laplace_models in regression" in updates
    others = [t for t in texts if t.startswith(("random", "client_laplace_models"))]
    assert others and not any("coincides" in t for t in others)


SLOPE = re.compile(r"([+-]\d+\.\d) dB/dec(?: for σ_g² ([\d.e-]+)–([\d.e-]+))?")


def reported_slopes(text, lo, hi):
    """(slope, range lo, range hi) of each slope a legend text reports."""
    return [
        (float(m[1]), float(m[2]) if m[2] else lo, float(m[3]) if m[3] else hi)
        for m in SLOPE.finditer(text.replace("\n", " "))
    ]


def test_no_slope_is_reported_across_a_bend():
    # graph-homomorphic noise at the centroid (fig3): flat up to σ_g² = 0.1, then +10 dB per
    # decade; one fit over all points gave "+3.7 dB/dec", a law nothing follows
    vs = (0.001, 0.01, 0.1, 1.0, 10.0)
    flat_rising = [-44.0, -44.0, -44.0, -34.0, -24.0]
    bending = [-44.0, -44.0, -41.0, -35.0, -26.0]  # local slopes 0, 3, 6, 9: no law
    curves = [entry("none", settings(), centroid=-44.0)]
    for label, noise, ys in (("graph_homomorphic", "graph_homomorphic", flat_rising),
                             ("random", "random", bending)):  # fmt: skip
        curves += [
            entry(f"{label}_var={v:g}", settings({"server_noise": noise}, server_variance=v),
                  centroid=y)
            for v, y in zip(vs, ys, strict=True)
        ]  # fmt: skip
    fig = plots.sweep_figure(summary(curves, plot=("centroid_msd_db",)), plots.find_sweeps(curves))
    texts = legend_texts(fig)
    whole = plots.slope_db_per_decade(vs, flat_rising)
    assert not any(f"{whole:+.1f}" in t for t in texts)
    (gh,) = [t for t in texts if t.startswith("graph_homomorphic")]
    found = reported_slopes(gh, vs[0], vs[-1])
    assert found, gh
    for slope, lo, hi in found:
        flat = hi <= 0.1 and abs(slope) < 0.5
        rising = lo >= 0.1 and abs(slope - 10) < 0.5
        assert flat or rising, gh
    (rnd,) = [t for t in texts if t.startswith("random")]
    assert reported_slopes(rnd, vs[0], vs[-1]) == [], rnd


def test_graph_learning_figures_use_the_summary_labels():
    xs = [10, 20, 40]
    curves = [
        {"label": lab, "x": xs, "mcc": [0.5, 0.6, 0.7 + k / 10], "relative_error": [0.4] * 3}
        for k, lab in enumerate(("igl", "fedavg", "fedgl_local", "fedgl_consensus"))
    ]
    fig = curves_figure(curves, xlabel="N", title="t")
    names = [t.get_text().split(" (")[0] for t in fig.legends[0].get_texts()]
    assert names == ["igl", "fedavg", "fedgl_local", "fedgl_consensus"]


def test_privacy_figures_are_written(tmp_path):
    eps = {"graph_homomorphic": np.geomspace(1, 100, 20), "hybrid": np.geomspace(1, 100, 20),
           "random": np.full(20, np.inf)}  # fmt: skip
    path = plots.plot_epsilon_curves(eps, tmp_path / "eps.png", title="ε of fig2")
    assert path.read_bytes()[:4] == b"\x89PNG"
    fig = plots.epsilon_figure(eps, title="t")
    texts = legend_texts(fig)
    assert "hybrid (coincides with graph_homomorphic)" in texts
    assert "random: ε = ∞ (not drawn)" in texts
    result = SimpleNamespace(
        epsilon={"paper": 8.0, "pld": 2.0, "basic": math.inf}, delta=1e-5,
        roc=(np.linspace(0, 1, 11), np.linspace(0, 1, 11) ** 0.5), fpr=0.1, tpr=0.4,
        epsilon_lower=0.9, protected=True, curve="random", view="server", round=3,
    )  # fmt: skip
    path = plots.plot_audit_tradeoff(result, tmp_path / "audit.svg")
    assert path.read_text().lstrip().startswith("<?xml")


# --- the palette -----------------------------------------------------------------------------


def test_every_scheme_has_its_own_colour_and_marker_and_variants_their_own_line_style():
    from pgfl.style import FALLBACK_COLORS, SCHEMES, curve_style, scheme_of

    reserved = ("central_dp", "local_dp", "pairwise_cancelling", "gossip", "topology_optimized")
    assert set(reserved) <= set(SCHEMES)
    assert len({s.color.lower() for s in SCHEMES.values()}) == len(SCHEMES)
    assert len({s.marker for s in SCHEMES.values()}) == len(SCHEMES)
    # the presets' curves, by their settings
    for name, (privacy, share, expected) in FRONTIER.items():
        assert scheme_of(settings(privacy, share)) == expected, name
    assert scheme_of(settings({"client_noise": "laplace", "server_noise": "random"})) == "random"
    assert scheme_of(settings({"server_noise": "local_dp"})) == "local_dp"
    # variants: models/updates × Laplace/Gaussian, and T vs T/10
    styles = {
        (share, dist): curve_style(settings({"client_noise": dist}, share))
        for share in ("models", "updates")
        for dist in ("laplace", "gaussian")
    }
    assert len({str(s.linestyle) for s in styles.values()}) == 4
    assert len({s.color for s in styles.values()}) == 1
    full, short = curve_style(label="random"), curve_style(label="random", horizon="short")
    assert full.color == short.color and short.linewidth < full.linewidth
    # unknown labels: a fixed colour, none of a scheme's while any is left
    a = curve_style(label="my curve")
    assert a.scheme == "" and a.color == curve_style(label="my curve").color
    assert not set(FALLBACK_COLORS) & {s.color for s in SCHEMES.values()}


def test_the_documented_colours_are_the_declared_ones():
    # docs/privacy.md's table of figure colours, row by row, is what the mechanisms declare
    from pgfl.style import SCHEMES

    text = (Path(__file__).resolve().parents[1] / "docs" / "privacy.md").read_text("utf-8")
    table = text[text.index("## 10. Figure colours") :]
    rows = re.findall(r"^\| `(\w+)` \| `(#[0-9A-F]{6})` \| `(.)` \|", table, re.M)
    assert len(rows) >= 14
    assert rows == [(s.name, s.color, s.marker) for s in SCHEMES.values()]


# --- the frontier at one target ε, and its legend -----------------------------------------------


def _overlaps(a, b):
    return a.x0 < b.x1 - 1 and b.x0 < a.x1 - 1 and a.y0 < b.y1 - 1 and b.y0 < a.y1 - 1


def one_epsilon_summary():
    """:func:`frontier_summary` at ε = 1 alone, covered and ranked as the frontier does."""
    from pgfl.apps.frontier import coverage, rank_schemes

    s = frontier_summary()
    for c in s["curves"]:
        for key in ("centroid_msd_db", "individual_msd_db", "test_error"):
            if key in c:
                c[key] = [c[key][EPS.index(1.0)]]
                c[f"{key}_covered"] = key not in coverage(c["label"])[1]
        c["x"] = [1.0]
    rank_schemes(s["curves"])
    return s


def one_run(summary):
    """The summary of one (set-up, T): a short figure, where the legend ran into the title."""
    from pgfl.apps.frontier import SCHEMES

    keep = lambda c: (c["setup"], c["iterations"]) == ("regression", 200)  # noqa: E731
    curves = [{**c, "legend": SCHEMES[c["label"]].legend} for c in summary["curves"] if keep(c)]
    return {**summary, "curves": curves,
            "baselines": [b for b in summary["baselines"] if keep(b)]}  # fmt: skip


def test_the_frontier_legend_never_covers_a_title_or_a_panel():
    # the legend right of the panels ran into the figure's title
    for summary in (frontier_summary(), one_run(frontier_summary()), one_epsilon_summary(),
                    one_run(one_epsilon_summary())):  # fmt: skip
        fig = plots.frontier_figure(summary)
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        (legend,) = fig.legends
        box = legend.get_window_extent(renderer)
        assert not _overlaps(box, fig._suptitle.get_window_extent(renderer))
        for ax in fig.axes:
            if ax.get_visible():
                assert not _overlaps(box, ax.get_window_extent(renderer))
                assert not _overlaps(box, ax.title.get_window_extent(renderer))


def test_one_epsilon_is_a_ranked_bar_chart_not_markers_stacked_at_one_x():
    summary = one_epsilon_summary()
    fig = plots.frontier_figure(summary)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert len(panels) == 2 * 2 + 2 * 3  # (regression, logistic) × (T, T/10) × metrics
    for ax in panels:
        label = ax.get_xlabel()
        metric = next(m for m, t in _FRONTIER_METRICS if t == label)
        setup, T = ax.get_title().split(":")[0].split(", T=")
        curves = {c["label"]: c for c in summary["curves"]
                  if (c["setup"], c["iterations"]) == (setup, int(T))}  # fmt: skip
        bars = {p.get_gid(): p for p in ax.patches if p.get_gid()}
        assert set(bars) == set(curves)  # one bar per scheme
        ys = {name: p.get_y() + p.get_height() / 2 for name, p in bars.items()}
        assert len({round(y, 6) for y in ys.values()}) == len(ys)  # none stacked
        ranked = sorted(curves, key=lambda n: curves[n][f"{metric}_rank"][0])
        assert sorted(ys, key=ys.get) == ranked  # rank 1 first (on top)
        for name, p in bars.items():
            colour = to_rgb(curve_style(label=name).color)
            assert np.allclose(p.get_edgecolor()[:3], colour)  # the scheme's own colour
            if curves[name][f"{metric}_covered"]:
                assert not p.get_hatch() and np.allclose(p.get_facecolor()[:3], colour)
            else:  # hollow and hatched, after every covered scheme, and labelled so
                assert p.get_hatch() and p.get_facecolor()[3] == 0
                covered = [n for n in ranked if curves[n][f"{metric}_covered"]]
                assert all(ranked.index(n) < ranked.index(name) for n in covered)
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert [("not protected" in t) for t in labels] == [
            not curves[n][f"{metric}_covered"] for n in ranked
        ]
    # graph-homomorphic noise (and hybrid) do not cover the centroid: marked in every panel
    assert any("graph_homomorphic" in t.get_text() and "not protected" in t.get_text()
               for ax in panels for t in ax.get_yticklabels())  # fmt: skip

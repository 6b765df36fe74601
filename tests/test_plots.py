import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.colors import to_rgb

from pgfl.apps.runner import run_experiment
from pgfl.experiments.loader import parse_config
from pgfl.files import write_csv, write_json
from pgfl.graphlearn.plots import curves_figure, spans_decades
from pgfl.plots import (
    find_sweeps,
    iteration_figure,
    plot_run,
    scheme_label,
    slope_db_per_decade,
    sweep_figure,
)

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def curve(label, *, centroid=-30.0, individual=-20.0, diverged=False, **overrides):
    s = {
        "mu": 0.7,
        "share": "models",
        "client_noise": "none",
        "client_variance": 0.0,
        "server_noise": "none",
        "server_variance": 0.1,
        **overrides,
    }
    return {
        "label": label,
        "centroid_msd_db": None if diverged else centroid,
        "individual_msd_db": None if diverged else individual,
        "disagreement_db": "-inf",
        "diverged": diverged,
        "diverged_at": 7 if diverged else None,
        "settings": s,
    }


def summary(curves, plot=("centroid_msd_db",)):
    return {
        "experiment": "t",
        "title": "test",
        "steady_state": "mean over the last 10% of iterations",
        "plot": list(plot),
        "curves": curves,
    }


def rows_for(curves, T=5):
    return [
        {
            "label": c["label"],
            "iteration": str(t),
            "centroid_msd_db": str(-t - k),
            "individual_msd_db": str(-t),
            "disagreement_db": "-inf",
        }
        for k, c in enumerate(curves)
        for t in range(1, T + 1)
    ]


MUS = (0.1, 0.5, 1.0, 5.0)


def fig4_like():
    """Graph-homomorphic ∝ μ (+10 dB/dec), random ∝ 1/μ (−10 dB/dec), listed out of order."""
    gh = [
        curve(f"gh_mu={m:g}", mu=m, server_noise="graph_homomorphic", centroid=10 * math.log10(m))
        for m in MUS
    ]
    rnd = [
        curve(f"random_mu={m:g}", mu=m, server_noise="random", centroid=-10 * math.log10(m) - 5)
        for m in MUS
    ]
    return [rnd[2], *gh[::-1], rnd[0], rnd[3], rnd[1]]


def fig6_like():
    """Noisy models / noisy updates: a μ sweep at σ² = 0.02 and a σ² sweep at μ = 0.2."""
    out = []
    for share in ("models", "updates"):
        base = {"share": share, "client_noise": "laplace", "server_variance": 0.0}
        out += [
            curve(f"{share}_mu={m:g}", mu=m, client_variance=0.02, **base)
            for m in (0.05, 0.1, 0.2, 0.5, 1.0)
        ]
        out += [
            curve(f"{share}_var={v:g}", mu=0.2, client_variance=v, **base)
            for v in (0.01, 0.05, 0.1, 0.5)
        ]
    return out


def fig3_like():
    out = [curve("none", centroid=-44.0, individual=-41.0)]
    for noise in ("graph_homomorphic", "random"):
        out += [
            curve(f"{noise}_var={v:g}", server_noise=noise, server_variance=v)
            for v in (0.001, 0.01, 0.1, 1.0, 2.0, 10.0)
        ]
    return out


def data_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def main_axes(fig):
    """The steady-state panels of a sweep figure (not the local-slope panels below them)."""
    return [ax for ax in fig.axes if ax.get_ylabel().startswith("steady-state")]


def slope_axes(fig):
    return [ax for ax in fig.axes if ax.get_ylabel().startswith("local slope")]


def legend_texts(ax):
    return [t.get_text().replace("\n", " ") for t in ax.get_legend().get_texts()]


def figure_legend_texts(fig):
    return [t.get_text().replace("\n", " ") for lg in fig.legends for t in lg.get_texts()]


def by_gid(ax):
    return {ln.get_gid(): ln for ln in ax.lines if ln.get_gid()}


# --- slope ------------------------------------------------------------------------------


def test_slope_closed_form_on_three_points():
    # t = log10 x = 0, 1, 2; t̄ = 1, ȳ = 7: slope = ((−1)(−7) + 0·3 + 1·4) / 2 = 5.5
    assert slope_db_per_decade([1, 10, 100], [0.0, 10.0, 11.0]) == pytest.approx(5.5)


def test_slope_ignores_non_finite_points_and_needs_two_distinct_values():
    assert slope_db_per_decade([1, 10, 100, 1000], [0, 10, 20, np.nan]) == pytest.approx(10)
    assert slope_db_per_decade([1, 10, 100], [0, -np.inf, 20]) == pytest.approx(10)
    assert math.isnan(slope_db_per_decade([3, 3, 3], [1, 2, 3]))
    assert math.isnan(slope_db_per_decade([1, 10], [0, np.nan]))
    assert math.isnan(slope_db_per_decade([], []))


@settings(max_examples=60, deadline=None)
@given(
    k=st.floats(-3, 3),
    c=st.floats(1e-3, 1e3),
    x=st.lists(st.floats(1e-4, 1e4), min_size=2, max_size=8, unique=True),
)
def test_slope_of_a_power_law_is_ten_times_its_exponent(k, c, x):
    x = np.array(x)
    if np.ptp(np.log10(x)) < 1e-3:
        return
    y = 10 * np.log10(c * x**k)
    assert slope_db_per_decade(x, y) == pytest.approx(10 * k, abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    x=st.lists(st.floats(1e-3, 1e3), min_size=3, max_size=8, unique=True),
    noise=st.lists(st.floats(-20, 20), min_size=8, max_size=8),
)
def test_slope_matches_numpy_polyfit(x, noise):
    x = np.array(x)
    if np.ptp(np.log10(x)) < 1e-2:
        return
    y = np.array(noise[: x.size])
    ref = np.polyfit(np.log10(x), y, 1)[0]
    assert slope_db_per_decade(x, y) == pytest.approx(ref, abs=1e-6)


# --- sweep detection ----------------------------------------------------------------------


def test_fig4_like_curves_give_one_mu_sweep_with_a_line_per_scheme():
    curves = fig4_like()
    (sweep,) = find_sweeps(curves)
    assert sweep.parameter == "mu" and sweep.baselines == ()
    by_scheme = {ln.scheme: ln for ln in sweep.lines}
    assert set(by_scheme) == {"random", "graph_homomorphic"}
    for name, prefix in (("random", "random_mu="), ("graph_homomorphic", "gh_mu=")):
        ln = by_scheme[name]
        assert ln.x == MUS
        assert [curves[i]["label"] for i in ln.curves] == [f"{prefix}{m:g}" for m in MUS]


def test_fig6_like_curves_give_a_mu_and_a_variance_sweep_sharing_the_centre():
    curves = fig6_like()
    sweeps = find_sweeps(curves)
    assert [s.parameter for s in sweeps] == ["mu", "client_variance"]
    mu, var = sweeps
    assert {ln.scheme for ln in mu.lines} == {"noisy models (laplace)", "noisy updates (laplace)"}
    for ln in var.lines:
        # the μ sweep's point μ = 0.2, σ² = 0.02 is a point of the σ² sweep as well
        assert ln.x == (0.01, 0.02, 0.05, 0.1, 0.5)
        share = ln.scheme.split()[1]
        assert curves[ln.curves[1]]["label"] == f"{share}_mu=0.2"


def test_the_noise_free_curve_is_a_baseline_of_a_variance_sweep():
    # a noisy curve outside every line (a single variance) is no baseline
    curves = [*fig3_like(), curve("per_link", server_noise="random_per_link")]
    (sweep,) = find_sweeps(curves)
    assert sweep.parameter == "server_variance"
    assert [curves[i]["label"] for i in sweep.baselines] == ["none"]
    assert all(len(ln.x) == 6 for ln in sweep.lines) and len(sweep.lines) == 2


def test_no_sweep_when_nothing_is_swept_or_the_values_do_not_count():
    fig2 = [curve("none"), curve("gh", server_noise="graph_homomorphic"), curve("r")]
    assert find_sweeps(fig2) == []
    two_values = [curve(f"m{m}", mu=m) for m in (0.1, 1.0)]
    assert find_sweeps(two_values) == []
    # a server variance has no effect without server noise
    no_effect = [curve(f"v{v}", server_variance=v) for v in (0.1, 1.0, 10.0)]
    assert find_sweeps(no_effect) == []
    # nor a client variance under secure aggregation
    secagg = [
        curve(f"v{v}", client_noise="secure_aggregation", client_variance=v)
        for v in (0.1, 1.0, 10.0)
    ]
    assert find_sweeps(secagg) == []
    # two curves at the same μ differ in something the settings do not record: no sweep
    twins = [curve(f"m{m}-{k}", mu=m) for m in (0.1, 1.0, 10.0) for k in range(2)]
    assert find_sweeps(twins) == []
    # zero is not on a log axis: three values of which one is 0 leave two
    with_zero = [curve(f"v{v}", server_noise="random", server_variance=v) for v in (0, 1, 10)]
    assert find_sweeps(with_zero) == []
    assert find_sweeps([{"label": "old", "centroid_msd_db": -3.0}] * 4) == []


def test_lines_of_one_scheme_are_told_apart_by_the_setting_that_differs():
    curves = [
        curve(f"r{mu}_{v}", mu=mu, server_noise="random", server_variance=v)
        for mu in (0.1, 1.0)
        for v in (0.01, 0.1, 1.0)
    ]
    (sweep,) = find_sweeps(curves)
    assert sweep.parameter == "server_variance"
    assert sorted(ln.scheme for ln in sweep.lines) == ["random, μ=0.1", "random, μ=1"]


def test_scheme_labels():
    assert scheme_label(curve("x")["settings"]) == "no noise"
    assert scheme_label(curve("x", share="updates")["settings"]) == "sharing updates"
    s = curve("x", client_noise="gaussian", server_noise="graph_homomorphic")["settings"]
    assert scheme_label(s) == "noisy models (gaussian) + graph_homomorphic"
    s = curve("x", client_noise="secure_aggregation", share="updates")["settings"]
    assert scheme_label(s) == "secure aggregation of updates"


# --- figures --------------------------------------------------------------------------------


def test_sweep_figure_has_log_axes_one_line_per_scheme_and_the_slopes():
    curves = fig4_like()
    fig = sweep_figure(summary(curves), find_sweeps(curves))
    (ax,) = main_axes(fig)
    (ax_s,) = slope_axes(fig)
    assert ax.get_xscale() == "log" and ax_s.get_xscale() == "log"
    assert "step size μ" in ax_s.get_xlabel() and "centroid MSD" in ax.get_ylabel()
    assert len(ax.lines) == 2
    texts = legend_texts(ax)
    assert "graph_homomorphic: +10.0 dB/dec" in texts
    assert "random: -10.0 dB/dec" in texts
    for line in ax.lines:
        assert tuple(line.get_xdata()) == MUS
    gh = by_gid(ax)["graph_homomorphic"]
    np.testing.assert_allclose(gh.get_ydata(), [10 * math.log10(m) for m in MUS])
    # local slopes between neighbouring points, at their geometric means
    local = by_gid(ax_s)["graph_homomorphic"]
    np.testing.assert_allclose(local.get_ydata(), [10.0] * 3)
    np.testing.assert_allclose(local.get_xdata(), np.sqrt(np.array(MUS[:-1]) * MUS[1:]))


def test_sweep_figure_has_a_row_per_sweep_and_a_column_per_metric():
    curves = fig6_like()
    s = summary(curves, plot=("centroid_msd_db", "individual_msd_db"))
    fig = sweep_figure(s, find_sweeps(curves))
    axes, slopes = main_axes(fig), slope_axes(fig)
    assert len(axes) == 4 and len(slopes) == 4
    assert all(ax.get_xscale() == "log" and len(ax.lines) == 2 for ax in axes)
    assert ["μ" in ax.get_xlabel() for ax in slopes] == [True, True, False, False]
    assert ["σ²" in ax.get_xlabel() for ax in slopes] == [False, False, True, True]


def test_sweep_figure_draws_baselines_and_leaves_out_diverged_points():
    curves = fig3_like()
    curves[-1] = curve("random_var=10", server_noise="random", server_variance=10.0, diverged=True)
    fig = sweep_figure(summary(curves), find_sweeps(curves))
    (ax,) = main_axes(fig)
    baseline = by_gid(ax)["none"]
    assert baseline.get_linestyle() == "--" and set(baseline.get_ydata()) == {-44.0}
    rnd = by_gid(ax)["random"]
    assert tuple(rnd.get_xdata()) == (0.001, 0.01, 0.1, 1.0, 2.0)
    assert "diverged at σ_g²=10" in rnd.get_label()


def test_sweep_figure_gives_no_slope_for_a_metric_not_in_db():
    curves = [
        {**curve(f"m{m}", mu=m, server_noise="random"), "test_error": 0.1 * k}
        for k, m in enumerate((0.1, 1.0, 10.0))
    ]
    fig = sweep_figure(summary(curves, plot=("test_error",)), find_sweeps(curves))
    (ax,) = data_axes(fig)  # no local-slope panel either
    assert legend_texts(ax) == ["random"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.0, 0.1, 0.2])


def test_iteration_figure_keeps_few_curves_in_one_panel_per_metric():
    curves = [curve("none"), curve("gh", server_noise="graph_homomorphic"), curve("r")]
    s = summary(curves, plot=("centroid_msd_db", "individual_msd_db"))
    fig = iteration_figure(s, rows_for(curves))
    axes = data_axes(fig)
    assert len(axes) == 2
    for ax in axes:
        assert len(ax.lines) == 3 and ax.get_legend() is None
    # one legend for both panels; the three curves are equal in the individual MSD only
    assert figure_legend_texts(fig) == [
        "none",
        "gh (coincides with none in individual MSD)",
        "r (coincides with none in individual MSD)",
    ]
    # "r" has the scheme and variant of "none": same colour, another line style
    none, r = by_gid(axes[0])["none"], by_gid(axes[0])["r"]
    assert none.get_color() == r.get_color() and none.get_linestyle() != r.get_linestyle()


def test_iteration_figure_has_a_row_per_swept_scheme_shaded_by_the_value_legend_outside():
    curves = fig3_like()
    s = summary(curves, plot=("centroid_msd_db", "individual_msd_db"))
    fig = iteration_figure(s, rows_for(curves))
    axes = data_axes(fig)
    assert len(axes) == 4  # one row per scheme of the sweep, one column per metric
    gh_row, rnd_row = axes[:2], axes[2:]
    assert [ax.get_title() for ax in axes[::2]] == [
        "graph_homomorphic: σ_g² swept",
        "random: σ_g² swept",
    ]
    for left, right in (gh_row, rnd_row):
        assert left.get_legend() is None and len(legend_texts(right)) == 7  # 6 values + none
        fig.canvas.draw()
        assert right.get_legend().get_window_extent().x0 >= right.get_window_extent().x1
    for (left, _), noise in ((gh_row, "graph_homomorphic"), (rnd_row, "random")):
        lines = by_gid(left)
        labels = [f"{noise}_var={v:g}" for v in (0.001, 0.01, 0.1, 1, 2, 10)]
        # one colour per scheme; the swept value is the opacity (more opaque = larger)
        assert len({to_rgb(lines[k].get_color()) for k in labels}) == 1
        alphas = [lines[k].get_alpha() for k in labels]
        assert all(a < b for a, b in zip(alphas, alphas[1:], strict=False))
        assert to_rgb(lines["none"].get_color()) == (0.0, 0.0, 0.0)
    gh = to_rgb(by_gid(gh_row[0])["graph_homomorphic_var=1"].get_color())
    rnd = to_rgb(by_gid(rnd_row[0])["random_var=1"].get_color())
    assert gh[2] > gh[0] and rnd[0] > rnd[2]  # blue, red


def test_iteration_figure_has_a_row_per_swept_line_and_one_for_the_rest():
    curves = [*fig6_like(), curve("reference")]
    fig = iteration_figure(summary(curves), rows_for(curves))
    axes = data_axes(fig)
    assert [ax.get_title() for ax in axes] == [
        "noisy models (laplace): μ swept",
        "noisy updates (laplace): μ swept",
        "noisy models (laplace): σ² swept",
        "noisy updates (laplace): σ² swept",
        "other curves",
    ]
    assert [len(ax.lines) for ax in axes] == [5, 5, 5, 5, 1]


# --- files -----------------------------------------------------------------------------------


def test_plot_run_writes_sweep_png_only_when_there_is_a_sweep(tmp_path):
    curves = fig4_like()
    write_json(tmp_path / "summary.json", summary(curves))
    write_csv(tmp_path / "curves.csv", rows_for(curves))
    written = plot_run(tmp_path)
    assert [p.name for p in written] == ["figure.png", "sweep.png"]
    assert all(p.read_bytes()[:8] == PNG for p in written)
    curves = [curve("none"), curve("gh", server_noise="graph_homomorphic")]
    write_json(tmp_path / "summary.json", summary(curves))
    write_csv(tmp_path / "curves.csv", rows_for(curves))
    assert [p.name for p in plot_run(tmp_path)] == ["figure.png"]
    assert not (tmp_path / "sweep.png").exists()  # the earlier run's sweep is gone


def test_a_run_with_a_step_size_sweep_writes_sweep_png(tmp_path):
    raw = {
        "name": "sweep",
        "iterations": 20,
        "repetitions": 1,
        "topology": {"kind": "ring", "P": 3},
        "data": {"K": 4, "N": 8},
        "training": {"L": 2},
        "curves": [{"label": f"mu={m}", "training": {"mu": m}} for m in (0.05, 0.1, 0.2)],
    }
    run_experiment(parse_config(raw), tmp_path)
    assert (tmp_path / "sweep.png").read_bytes()[:8] == PNG


# --- graph learning ------------------------------------------------------------------------


def gl_curve(label, x, **extra):
    return {
        "label": label,
        "x": x,
        "mcc": [0.5] * len(x),
        "relative_error": [0.4] * len(x),
        **extra,
    }


def test_spans_decades():
    assert spans_decades([1, 10]) and spans_decades([50, 200, 1000])
    assert not spans_decades([20, 50, 100]) and not spans_decades([0.2, 0.5, 0.8])
    assert not spans_decades([-1, 100]) and not spans_decades([])


def test_graph_learning_figure_has_one_legend_below_and_a_log_axis_over_a_decade():
    xs = [10, 20, 40, 100]
    curves = [
        gl_curve("igl", xs),
        gl_curve("fedgl_local", xs),
        gl_curve("fedgl_local_dp", xs, epsilon=0.3),
        gl_curve("fedgl_local_dp", xs, epsilon=2.0),
    ]
    fig = curves_figure(curves, xlabel="N", title="t")
    axes = fig.axes
    assert len(axes) == 2 and all(ax.get_xscale() == "log" for ax in axes)
    assert all(ax.get_legend() is None for ax in axes)
    (legend,) = fig.legends
    names = [t.get_text() for t in legend.get_texts()]
    # the labels of summary.json, as the printed table shows them
    assert names == [
        "igl",
        "fedgl_local (coincides with igl)",
        "fedgl_local_dp ε̄=0.3 (coincides with igl)",
        "fedgl_local_dp ε̄=2 (coincides with igl)",
    ]
    fig.canvas.draw()
    assert legend.get_window_extent().y1 <= min(ax.get_window_extent().y0 for ax in axes)
    dp = [ln for ln in axes[0].lines if ln.get_label().startswith("fedgl_local_dp")]
    assert to_rgb(dp[0].get_color()) == to_rgb(dp[1].get_color())
    assert dp[0].get_alpha() < dp[1].get_alpha()  # larger ε̄ more opaque
    linear = curves_figure([gl_curve("igl", [0.2, 0.5, 0.8])], xlabel="q", title="t")
    assert linear.axes[0].get_xscale() == "linear"
    forced = curves_figure([gl_curve("igl", [0.2, 0.5, 0.8])], xlabel="q", title="t", logx=True)
    assert forced.axes[0].get_xscale() == "log"


def test_many_curves_get_a_row_per_scheme_whose_legend_fits_beside_axes_that_keep_size(
    tmp_path,
):
    # 55 curves (the frontier's sub-runs: 9 schemes × 6 target ε and none): one row per
    # scheme, each with its legend beside it; nothing collapses the axes (no warning)
    import warnings

    schemes = [
        (f"client_{d}_{share}", {"client_noise": d, "share": share})
        for share in ("models", "updates")
        for d in ("laplace", "gaussian")
    ] + [
        ("random", {"server_noise": "random"}),
        ("random_gaussian", {"server_noise": "random"}),  # the label tells the distribution
        ("random_per_link", {"server_noise": "random_per_link"}),
        ("graph_homomorphic", {"server_noise": "graph_homomorphic"}),
        ("hybrid", {"server_noise": "graph_homomorphic", "client_noise": "secure_aggregation"}),
    ]
    curves = [
        {**curve(f"{name}@{e:g}", server_variance=0.0, **kw), "target_epsilon": e}
        for name, kw in schemes
        for e in (0.5, 1, 2, 5, 10, 50)
    ] + [curve("none")]
    fig = iteration_figure(summary(curves, plot=("centroid_msd_db", "individual_msd_db")),
                           rows_for(curves))  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.savefig(tmp_path / "f.png", dpi=40)
    axes = data_axes(fig)
    assert len(axes) == 18
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    assert len(legends) == 9 and all(len(lg.get_texts()) == 7 for lg in legends)
    fig.canvas.draw()
    for ax in axes:
        box = ax.get_position()
        assert box.width > 0.2 and box.height > 0.05

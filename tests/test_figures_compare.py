"""Figures and tables that compare at a glance (issue: a newcomer's day, items 6 and 9).

Drawn from small synthetic result files; what is checked is what a reader sees: one panel
per question, each curve's value beside its dot, the curves' own names, every target ε on
the frontier's axis, the table's test column matching the figure, and no number where a
word says it better ("exact", a reason beside ∞).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from matplotlib.colors import to_rgb

from pgfl import plots
from pgfl.commands import printing


def curve(label, centroid, individual, topology=None, **settings):
    s = {"mu": 0.3, "share": "models", "client_noise": "none", "client_variance": 0.0,
         "server_noise": "none", "server_variance": 0.0, **settings}  # fmt: skip
    out = {"label": label, "centroid_msd_db": centroid, "individual_msd_db": individual,
           "diverged": False, "diverged_at": None, "settings": s}  # fmt: skip
    if topology:
        out["topology"] = topology
    return out


def correlated():
    """A correlated-noise-like run: 3 topologies × several schemes and a reference."""
    curves = [curve("none", -47.5, -35.3, "ring")]
    for label, settings in (
        ("central", {"server_noise": "central"}),
        ("pairwise_cancelling", {"server_noise": "pairwise_cancelling"}),
        ("local", {"client_noise": "gaussian"}),
    ):
        for k, topo in enumerate(("ring", "grid", "complete")):
            if label == "central" and topo != "ring":
                continue
            name = label if topo == "ring" else f"{label} ({topo})"
            curves.append(curve(name, -20.0 + 3 * k + len(label), 1.0 - k, topo, **settings))
    return {"experiment": "c", "title": "t", "plot": ["centroid_msd_db", "individual_msd_db"],
            "figure": "steady", "steady_state": "mean over the last 10% of iterations",
            "repetitions": 2, "curves": curves}  # fmt: skip


def dots(ax):
    return [ln for ln in ax.get_lines() if ln.get_linestyle() == "None" and ln.get_gid()]


def test_steady_figure_is_one_panel_per_metric_with_every_value_beside_its_dot():
    s = correlated()
    fig = plots.steady_figure(s)
    axes = [ax for ax in fig.axes if dots(ax)]
    assert len(axes) == 2  # one panel per metric, not one per scheme and metric
    for ax, metric in zip(axes, s["plot"], strict=True):
        found = {ln.get_gid(): (ln.get_xdata()[0], ln.get_ydata()[0], ln) for ln in dots(ax)}
        want = {c["label"]: c[metric] for c in s["curves"] if c["label"] != "none"}
        assert {k: v[1] for k, v in found.items()} == want
        texts = {t.get_text() for t in ax.texts}
        assert {f"{v:.1f}" for v in want.values()} <= texts  # the table, on the figure
        # a group per scheme, named as the curves are; its curves side by side
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        assert ticks == ["central", "pairwise_cancelling", "local"]
        for name, x0 in (("pairwise_cancelling", 1), ("local", 2)):
            xs = [found[n][0] for n in found if n.split(" (")[0] == name]
            assert len(xs) == 3 and len(set(xs)) == 3 and all(abs(x - x0) < 0.5 for x in xs)
        # one colour per scheme, one marker per topology
        colour = {n: to_rgb(v[2].get_color()) for n, v in found.items()}
        assert colour["local"] == colour["local (grid)"] != colour["central"]
        marker = {n: v[2].get_marker() for n, v in found.items()}
        assert marker["local"] == marker["central"] != marker["local (grid)"]
        assert len({marker["local"], marker["local (grid)"], marker["local (complete)"]}) == 3
        (ref,) = [ln for ln in ax.get_lines() if ln.get_gid() == "none"]
        assert list(ref.get_ydata()) == [s["curves"][0][metric]] * 2  # a line across
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert labels == ["ring", "grid", "complete", "none"]


def test_a_steady_run_writes_both_figures_and_another_run_removes_the_second(tmp_path):
    s = correlated()
    rows = [{"label": c["label"], "iteration": str(t), "centroid_msd_db": str(c["centroid_msd_db"]),
             "individual_msd_db": str(c["individual_msd_db"])}
            for c in s["curves"] for t in (1, 2, 3)]  # fmt: skip
    (tmp_path / "summary.json").write_text(json.dumps(s))
    with (tmp_path / "curves.csv").open("w") as fh:
        fh.write("label,iteration,centroid_msd_db,individual_msd_db\n")
        fh.writelines(f"{r['label']},{r['iteration']},{r['centroid_msd_db']},"
                      f"{r['individual_msd_db']}\n" for r in rows)  # fmt: skip
    written = plots.plot_run(tmp_path)
    assert [p.name for p in written] == ["figure.png", "iterations.png"]
    s.pop("figure")
    (tmp_path / "summary.json").write_text(json.dumps(s))
    assert [p.name for p in plots.plot_run(tmp_path)] == ["figure.png"]
    assert not (tmp_path / "iterations.png").exists()


def test_rows_are_named_by_the_curves_not_by_the_scheme():
    s = correlated()
    for c in s["curves"]:  # more curves than a panel takes: a row per scheme
        c["topology"] = None
    s["curves"] += [curve(f"local x{k}", -5.0, -2.0, client_noise="gaussian") for k in range(4)]
    rows = [{"label": c["label"], "iteration": str(t), "centroid_msd_db": str(-10 + t),
             "individual_msd_db": str(-5 + t)}
            for c in s["curves"] for t in range(1, 30)]  # fmt: skip
    fig = plots.iteration_figure(s, rows)
    titles = {ax.get_title() for ax in fig.axes if ax.get_title()}
    assert {"central", "pairwise_cancelling"} <= titles
    assert "central_dp" not in titles and "client_noise" in titles  # local + local x...: a scheme


def test_a_swept_lines_curves_differ_in_dashes_and_their_legend_gives_the_steady_state():
    curves = [curve("random", v, v + 2, mu=mu, server_noise="random", server_variance=0.1)
              for mu, v in ((0.1, -6.4), (0.5, -12.9), (1.0, -14.6), (5.0, -17.0))]  # fmt: skip
    curves += [curve("gh", v, v + 2, mu=mu, server_noise="graph_homomorphic", server_variance=0.1)
               for mu, v in ((0.1, -52.5), (0.5, -45.4), (1.0, -42.2), (5.0, -32.7))]  # fmt: skip
    for k, c in enumerate(curves):
        c["label"] = f"{c['label']}_{k}"
    s = {"experiment": "f4", "title": "t", "plot": ["centroid_msd_db"], "curves": curves}
    rows = [{"label": c["label"], "iteration": str(t),
             "centroid_msd_db": str(c["centroid_msd_db"] + math.sin(t)),
             "individual_msd_db": "0"} for c in curves for t in range(1, 40)]  # fmt: skip
    fig = plots.iteration_figure(s, rows)
    texts = [
        t.get_text() for ax in fig.axes for lg in [ax.get_legend()] if lg for t in lg.get_texts()
    ]
    assert "μ=0.5: -12.9 dB" in texts and "μ=5: -32.7 dB" in texts
    for ax in fig.axes:
        styles = [str(ln._unscaled_dash_pattern) for ln in ax.get_lines()]
        assert len(set(styles)) == len(styles) == 4  # four μ, four dash patterns


def test_the_frontiers_axis_labels_every_target_epsilon():
    eps = [0.5, 1.0, 2.0, 5.0, 10.0, 50.0]
    c = {"label": "random", "setup": "regression", "iterations": 100, "x": eps,
         "centroid_msd_db": [-5.0, -10, -15, -20, -25, -30],
         "settings": {"server_noise": "random"}}  # fmt: skip
    fig = plots.frontier_figure({"curves": [c], "setups": ["regression"], "delta": 1e-5,
                                 "accountant": "pld"})  # fmt: skip
    fig.canvas.draw()
    for ax in fig.axes:
        if ax.get_lines():
            shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
            assert shown == ["0.5", "1", "2", "5", "10", "50"]


def test_the_epsilon_plot_names_delta_once(tmp_path, monkeypatch):
    from pgfl.cli import main
    from pgfl.commands import privacy

    seen = {}
    monkeypatch.setattr(privacy, "plot_epsilon_curves",
                        lambda curves, path, title: seen.setdefault("title", title))  # fmt: skip
    main(["privacy", "epsilon", "--mu", "0.7", "--clip", "2", "--variance", "0.1",
          "--iterations", "5", "--dim", "2", "--plot", str(tmp_path / "e.png")])  # fmt: skip
    assert seen["title"].count("delta=") == 1


def table(summary, capsys):
    printing.print_summary(summary)
    return capsys.readouterr().out


def test_the_table_reports_what_the_figure_plots(capsys):
    entry = {"label": "none", "centroid_msd_db": -25.0, "individual_msd_db": -21.0,
             "test_error": 0.3, "test_accuracy": 0.7, "test_log_loss": 0.57}  # fmt: skip
    out = table({"experiment": "fig7", "plot": ["test_error"], "curves": [entry]}, capsys)
    assert "error %" in out and "30.0" in out and "acc %" not in out
    out = table({"experiment": "d", "plot": ["test_accuracy"], "curves": [entry]}, capsys)
    assert "acc %" in out and "70.0" in out


def test_zero_disagreement_reads_exact_and_every_infinite_epsilon_has_its_reason(capsys):
    curves = [
        {"label": "central", "centroid_msd_db": -20.6, "individual_msd_db": -20.6,
         "disagreement_db": -301.4, "epsilon": {"pld": 1.0, "paper": "inf"}, "delta": 1e-5,
         "epsilon_notes": {"paper": "classic Gaussian bound per iteration (valid only below "
                                    "1) composed by eq. 32"}},
        {"label": "local", "centroid_msd_db": -6.5, "individual_msd_db": -1.9,
         "disagreement_db": -3.0, "epsilon": {"pld": 1.0, "paper": 3.2}, "delta": 1e-5},
    ]  # fmt: skip
    out = table({"experiment": "c", "plot": ["centroid_msd_db"], "curves": curves}, capsys)
    row = next(line for line in out.splitlines() if "central" in line and "│" in line)
    assert "exact" in row and "-301" not in out
    reason = [line for line in out.splitlines() if line.startswith("curve central: ε paper = ∞")]
    assert len(reason) == 1 and "holds only while every iteration's ε is below 1" in reason[0]
    assert not any(line.startswith("curve local: ε") and "∞" in line for line in out.splitlines())


def test_a_single_units_disagreement_column_stays_out():
    one = [{"label": "a", "centroid_msd_db": -30.0, "disagreement_db": -np.inf}]
    headers = [h for h, _ in printing._summary_columns(one)]
    assert "disagr. dB" not in headers


@pytest.mark.parametrize("value, shown", [(-12.345, "-12.35"), (-np.inf, "exact"),
                                          (-260.0, "exact"), (None, "—")])  # fmt: skip
def test_db_cells(value, shown):
    assert printing._fmt_db(value) == shown


def test_population_figure_is_a_line_per_scheme_against_the_clients_with_the_usable_level():
    pops = (1000, 10_000, 100_000)
    curves = []
    for k, n in enumerate(pops):
        curves.append(curve(f"none ({n})", -50.0 - k, -49.0) | {"clients": n})
        curves.append(curve(f"central ({n})", -30.0 - 7 * k, -29.0, server_noise="central")
                      | {"clients": n})  # fmt: skip
        curves.append(curve(f"random ({n})", -10.0 - 9 * k, -9.0, server_noise="random",
                            server_variance=0.1) | {"clients": n})  # fmt: skip
    curves[-1] |= {"diverged": True, "centroid_msd_db": None}
    s = {"experiment": "p", "title": "t", "plot": ["centroid_msd_db"], "figure": "population",
         "usable_db": -30.0, "repetitions": 2, "curves": curves[::-1]}  # fmt: skip
    fig = plots.population_figure(s)
    (ax,) = fig.axes
    assert ax.get_xscale() == "log"
    lines = {ln.get_gid(): ln for ln in ax.get_lines()}
    # sorted by population whatever the curves' order; the diverged point is left out
    assert list(lines["central"].get_xdata()) == list(pops)
    assert list(lines["central"].get_ydata()) == [-30.0, -37.0, -44.0]
    assert list(lines["random"].get_xdata()) == [1000, 10_000]
    assert lines["none"].get_linestyle() == "--" and to_rgb(lines["none"].get_color()) == (0, 0, 0)
    assert to_rgb(lines["random"].get_color()) != to_rgb(lines["central"].get_color())
    assert list(lines["usable"].get_ydata()) == [-30.0, -30.0]
    assert {"-30.0", "-37.0", "-44.0", "-19.0"} <= {t.get_text() for t in ax.texts}
    labels = [" ".join(t.get_text().split()) for lg in fig.legends for t in lg.get_texts()]
    assert any("diverged at P·K = 100000" in t for t in labels)
    assert any(t.startswith("usable") for t in labels) and not ax.get_legend()

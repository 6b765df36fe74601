"""Figures made from saved results (``summary.json`` + ``curves.csv``), never from memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pgfl.experiments.results import read_csv, read_json

_YLABEL = {
    "centroid_msd_db": "centroid MSD (dB)",
    "individual_msd_db": "average individual MSD (dB)",
    "disagreement_db": "network disagreement (dB)",
    "test_error": "test error of the centroid",
    "test_log_loss": "test log-loss of the centroid",
    "server_test_error_mean": "average test error of the servers' models",
}


def plot_run(out: str | Path, filename: str = "figure.png") -> Path:
    """Plot the metrics listed in ``summary["plot"]`` against the iteration, one panel each.

    Diverged curves are drawn up to their divergence and marked in the legend.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out)
    summary = read_json(out / "summary.json")
    rows = read_csv(out / "curves.csv")
    panels = summary.get("plot") or ["centroid_msd_db"]
    by_label: dict[str, list[dict[str, str]]] = {}
    for r in rows:
        by_label.setdefault(r["label"], []).append(r)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.4), squeeze=False)
    n = max(1, len(summary["curves"]))
    colors = plt.cm.tab10(np.arange(n) % 10) if n <= 10 else plt.cm.tab20(np.linspace(0, 1, n))
    for ax, metric in zip(axes[0], panels, strict=True):
        ax.set_prop_cycle(color=colors)
        for entry in summary["curves"]:
            label = entry["label"]
            series = by_label.get(label, [])
            if not series or metric not in series[0]:
                continue
            it = np.array([int(r["iteration"]) for r in series])
            val = np.array(
                [float(r[metric]) if r[metric] not in ("", "None") else np.nan for r in series]
            )
            name = label + (
                f" (diverged at {entry['diverged_at']})" if entry.get("diverged") else ""
            )
            ax.plot(it, val, label=name, linewidth=1.2)
        ax.set_xlabel("iteration i")
        ax.set_ylabel(_YLABEL.get(metric, metric))
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(summary.get("title") or summary.get("experiment", ""))
    fig.tight_layout()
    path = out / filename
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

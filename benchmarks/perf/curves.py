"""Held-out success curves of several seeds: their mean, and a plot of arms side by side."""

from __future__ import annotations

import statistics
from pathlib import Path

Curve = list[list[float]]
"""``[[step, value], ...]`` in step order."""


def mean_curve(curves: list[Curve]) -> Curve:
    """The seeds' mean value at each step they all evaluated."""
    shared = set.intersection(*({step for step, _ in curve} for curve in curves))
    by_step = [{step: value for step, value in curve} for curve in curves]
    return [[step, round(statistics.fmean(values[step] for values in by_step), 4)] for step in sorted(shared)]


def plot_curves(panels: dict[str, dict[str, list[Curve]]], out: Path, *, ylabel: str, title: str) -> None:
    """One panel per key of ``panels``, each with its lines: every seed's curve thin, their mean thick."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), sharey=True, squeeze=False)
    for ax, (name, lines) in zip(axes[0], panels.items(), strict=True):
        for (label, curves), color in zip(lines.items(), plt.get_cmap("tab10").colors, strict=False):
            for curve in curves:
                ax.plot(*zip(*curve, strict=True), color=color, alpha=0.3, linewidth=1)
            ax.plot(*zip(*mean_curve(curves), strict=True), color=color, linewidth=2.5, marker="o", label=label)
        ax.set(xlabel="training step", title=name)
        ax.legend()
    axes[0][0].set_ylabel(ylabel)
    fig.suptitle(title)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)

"""``benchmarks/perf/curves.py``: seeds' curves averaged at the steps they share, and plotted."""

from __future__ import annotations

from pathlib import Path

from benchmarks.perf.curves import mean_curve, plot_curves


def test_the_mean_curve_averages_each_step_every_seed_evaluated_and_skips_the_rest():
    seeds = [[[0, 0.2], [10, 0.3], [20, 0.5]], [[0, 0.2], [20, 0.3]], [[20, 0.4], [0, 0.2]]]
    assert mean_curve(seeds) == [[0, 0.2], [20, 0.4]]


def test_the_plot_of_several_arms_is_written_as_a_png_with_its_folder_made(tmp_path: Path):
    out = tmp_path / "plots" / "curves.png"
    curves = [[[0, 0.2], [10, 0.4]], [[0, 0.2], [10, 0.3]]]
    plot_curves({"tis": {"K = 0": curves, "K = 8": curves}, "vcpo": {"K = 0": curves}}, out,
                ylabel="held-out success", title="t")
    assert out.read_bytes().startswith(b"\x89PNG")

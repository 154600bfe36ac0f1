"""A policy loss of a package's own trains from the command line: ``example_cispo``, which a third-party package
registers through the ``agentgym.algorithms`` entry point and nothing else in agentgym names, is found by name when
``agentgym train`` reads the config and when the learner computes the loss."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agentgym.algorithms import POLICY_LOSSES, get_policy_loss_fn, registry
from agentgym.metrics_log import read_metrics
from tests.plugin_packages import ROOT, install, make_visible
from tests.trainers.test_train import _config


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example loss's package, installed."""
    return install("example-loss", tmp_path_factory)


@pytest.fixture
def installed(plugin_site, monkeypatch):
    """This process sees the installed package (its entry points are read afresh) and, through ``PYTHONPATH``, so
    do the commands it starts; the registry is restored afterwards."""
    make_visible(plugin_site, monkeypatch)
    monkeypatch.setattr(registry._plugins, "loaded", False)
    yield plugin_site
    POLICY_LOSSES.pop("example_cispo", None)


def _train(config: dict) -> subprocess.CompletedProcess:
    config_file = Path(config["output_dir"]).with_suffix(".yaml")
    config_file.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "agentgym", "train", str(config_file)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_a_lookup_loads_the_entry_point_on_a_miss(installed):
    assert "example_cispo" not in POLICY_LOSSES
    assert get_policy_loss_fn("example_cispo").__module__ == "agentgym_example_loss"


def test_agentgym_train_trains_with_a_loss_a_package_registers(installed, tiny_model_dir, tmp_path):
    run_dir = tmp_path / "run"
    done = _train(_config(run_dir, tiny_model_dir, trainer={"steps": 2}, eval={"episodes": 0},
                          algorithm={"loss": {"name": "example_cispo"}}))
    assert done.returncode == 0, done.stderr[-3000:]
    steps = [r["step"] for r in read_metrics(run_dir) if "train/cispo_clipped" in r]  # the loss's own metric
    assert steps == [1, 2]


def test_an_unknown_loss_still_exits_2_naming_the_key(installed, tiny_model_dir, tmp_path):
    done = _train(_config(tmp_path / "run", tiny_model_dir, eval={"episodes": 0},
                          algorithm={"loss": {"name": "example_gspo"}}))
    assert done.returncode == 2
    assert "algorithm.loss.name" in done.stderr and "unknown policy loss 'example_gspo'" in done.stderr
    assert "example_cispo" in done.stderr  # the names it lists are the plugins' too


@pytest.mark.ray
def test_the_trainers_ranks_on_ray_find_the_loss(installed, tiny_model_dir, tmp_path):
    """Two ranks, each its own process on Ray, compute the loss the package registers."""
    pytest.importorskip("ray", reason="the distributed trainer needs Ray: pip install 'agentgym[ray]'")
    run_dir = tmp_path / "run"
    done = _train(_config(run_dir, tiny_model_dir, trainer={"steps": 1, "world_size": 2}, eval={"episodes": 0},
                          algorithm={"loss": {"name": "example_cispo"}}))
    assert done.returncode == 0, done.stderr[-3000:]
    assert [r["step"] for r in read_metrics(run_dir) if "train/cispo_clipped" in r] == [1]
    ranks = json.loads((run_dir / "ranks.json").read_text())
    assert [r["rank"] for r in ranks] == [0, 1] and len({r["pid"] for r in ranks}) == 2

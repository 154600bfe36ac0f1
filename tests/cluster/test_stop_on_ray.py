"""Commands on Ray stop on SIGTERM as on Ctrl-C and leave nothing behind (see tests/core/test_signals.py): the local
Ray that ``agentgym eval --backend ray`` started is shut down with its actors, and ``agentgym mux submit --follow``
stops following (its job, a detached actor of the cluster, runs on by design)."""

from __future__ import annotations

import os
import signal

import pytest
import yaml

from tests.cluster.test_mux import ROOT, _job, pools, scheduler  # noqa: F401 - the fixtures of the mux's cluster
from tests.core.test_signals import agentgym, descendant_named, printed  # noqa: F401 - agentgym is a fixture

pytest.importorskip("ray")
pytestmark = pytest.mark.ray


def test_eval_shuts_down_the_ray_it_started_on_sigterm(agentgym):  # noqa: F811 - the fixture imported above
    own_ray = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    command = agentgym("eval", "games/FrozenLake-v0", "--policy", "random", "--episodes", "5000", "--out", "run",
                       "--backend", "ray", "--env-workers", "1", env=own_ray)
    command.wait_for("env worker actor", lambda: descendant_named(command, "ray::EnvWorker"))
    assert descendant_named(command, "raylet")
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM


def test_mux_submit_stops_following_on_sigterm(pools, scheduler, agentgym, tiny_model_dir, tmp_path):  # noqa: F811
    config = tmp_path / "a.yaml"
    config.write_text(yaml.safe_dump(_job(tmp_path / "mux", "a", tiny_model_dir)))
    tests_importable = {**os.environ, "PYTHONPATH": str(ROOT)}  # the job's env is registered by the tests
    command = agentgym("mux", "submit", str(config), "--ray-address", pools.cluster.address, "--follow",
                       env=tests_importable)
    command.wait_for("progress line", lambda: printed(command, r"a: \[[#.]{20}\] \d+/\d+ steps"))
    assert command.stop(signal.SIGTERM) == 128 + signal.SIGTERM

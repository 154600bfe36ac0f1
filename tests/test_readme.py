"""The README's examples run as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

from agentgym import registration

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def test_registration_example_runs():
    (example,) = [b for b in BLOCKS if "agentgym.register(" in b]
    module = types.ModuleType("readme_example")  # run like a script: its module is importable by name
    sys.modules[module.__name__] = module
    try:
        exec(compile(example, "README.md", "exec"), module.__dict__)
        assert "mine/Guess-v0" in [s.id for s in registration.list_envs(family="mine")]
    finally:
        registration._registry.pop("mine/Guess-v0", None)
        del sys.modules[module.__name__]


def test_usage_example_runs():
    (example,) = [b for b in BLOCKS if "agentgym.make(\"games/FrozenLake-v0\"" in b]
    exec(compile(example, "README.md", "exec"), {})


def test_rollout_example_runs(tiny_model_dir, tmp_path, monkeypatch, capsys):
    (example,) = [b for b in BLOCKS if "RolloutScheduler(" in b]
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny").symlink_to(tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_rollout"})
    printed = capsys.readouterr().out
    assert "'rollout/finished': 16" in printed and "'rollout/errored': 0" in printed


@pytest.mark.browser
def test_web_example_runs(capsys):
    (example,) = [b for b in BLOCKS if 'agentgym.make("web/Shop-v0"' in b]
    exec(compile(example, "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert 'textbox "Search products"' in printed and printed.rstrip().endswith("1 None")

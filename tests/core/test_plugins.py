"""Entry-point groups load once, agentgym's own entries first: a failure there is raised, another package's is a
warning and the rest still load."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

from agentgym import plugins
from agentgym.plugins import EntryPointGroup

GROUP = "agentgym.test_plugins"
CALLED: list[str] = []


def called_ours() -> None:
    CALLED.append("ours")


def called_theirs() -> None:
    CALLED.append("theirs")


def _entries(monkeypatch, *values: str) -> None:
    """The group holds entry points of ``values``, in that order."""
    entries = [EntryPoint(f"entry{i}", value, GROUP) for i, value in enumerate(values)]
    monkeypatch.setattr(plugins, "entry_points", lambda group: entries if group == GROUP else [])
    CALLED.clear()


def test_agentgyms_own_entries_load_first_and_each_group_once(monkeypatch):
    monkeypatch.setattr(plugins, "_agentgyms", lambda entry: entry.value.endswith(":called_ours"))
    _entries(monkeypatch, f"{__name__}:called_theirs", f"{__name__}:called_ours")
    group = EntryPointGroup(GROUP)
    group.load()
    group.load()
    assert CALLED == ["ours", "theirs"]


def test_another_packages_failure_is_a_warning_and_the_others_still_load(monkeypatch):
    _entries(monkeypatch, "agentgym_no_such_plugin:register", f"{__name__}:called_theirs")
    with pytest.warns(UserWarning, match=rf"the {GROUP} plugin 'entry0' \(agentgym_no_such_plugin:register\) failed"):
        EntryPointGroup(GROUP).load()
    assert CALLED == ["theirs"]


def test_a_failure_of_agentgyms_own_entry_is_raised(monkeypatch):
    _entries(monkeypatch, "agentgym.no_such_module:register")
    with pytest.raises(ModuleNotFoundError, match="agentgym.no_such_module"):
        EntryPointGroup(GROUP).load()

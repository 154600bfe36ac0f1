"""Plugins through entry points: a package names, in one of agentgym's entry-point groups, a function that registers
what it brings (environments, engines, policy losses), or a module that does so on import."""

from __future__ import annotations

import warnings
from importlib.metadata import EntryPoint, entry_points

__all__ = ["EntryPointGroup"]


class EntryPointGroup:
    """An entry-point group whose entries are loaded once, on the first :meth:`load`: agentgym's own first (a
    failure there is raised), then every other package's (a failure there is a warning); a loaded callable is
    called."""

    def __init__(self, name: str) -> None:
        self.name = name
        """The group's name (``agentgym.envs``)."""
        self.loaded = False
        """Whether :meth:`load` has run."""

    def load(self) -> None:
        """Load and call the group's entry points, the first time only."""
        if self.loaded:
            return
        self.loaded = True
        for entry in sorted(entry_points(group=self.name), key=lambda entry: not _agentgyms(entry)):
            try:
                loaded = entry.load()
                if callable(loaded):
                    loaded()
            except Exception as exc:  # a broken plugin must not take the whole registry down
                if _agentgyms(entry):
                    raise
                warnings.warn(f"the {self.name} plugin {entry.name!r} ({entry.value}) failed to load: {exc}",
                              stacklevel=3)


def _agentgyms(entry: EntryPoint) -> bool:
    """Whether the entry point is agentgym's own."""
    return entry.module == "agentgym" or entry.module.startswith("agentgym.")

"""Functions by name, as verl's ``core_algos.py`` keeps its policy losses and advantage estimators: a decorator
registers one where it is defined, and a config names it.

A package registers its own from a function (or a module) named in the entry-point group ``agentgym.algorithms``,
which a lookup loads on its first miss, so ``agentgym train`` and the trainer's processes find them by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentgym.plugins import EntryPointGroup

__all__ = ["ENTRY_POINT_GROUP", "Registry"]

ENTRY_POINT_GROUP = "agentgym.algorithms"

F = TypeVar("F", bound=Callable[..., Any])
_plugins = EntryPointGroup(ENTRY_POINT_GROUP)


class Registry(dict[str, Callable[..., Any]]):
    """A mapping of names to functions of one kind; :meth:`register` adds one, :meth:`lookup` finds one."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        """What the functions are, for messages (``policy loss``)."""

    def register(self, name: str) -> Callable[[F], F]:
        """A decorator that registers its function as ``name`` and returns it unchanged; a name is taken once."""

        def add(function: F) -> F:
            if name in self:
                raise ValueError(f"{self.kind} {name!r} is registered already; choose another name")
            self[name] = function
            return function

        return add

    def lookup(self, name: str) -> Callable[..., Any]:
        """The function registered as ``name``, the plugins' loaded first if it is not yet known; an unknown name is a
        ``ValueError`` that lists the known ones."""
        if name not in self:
            _plugins.load()
        try:
            return self[name]
        except KeyError:
            raise ValueError(f"unknown {self.kind} {name!r}; choose one of: {', '.join(self)}") from None

"""Where untrusted agent work runs: the :class:`Sandbox` protocol, its backends (``docker``, ``local``),
the pool environments take sandboxes from, and :func:`reap` for what crashed runs left behind."""

from __future__ import annotations

import importlib
from typing import Any

from agentgym.sandboxes.base import ExecResult, Sandbox, SandboxSpec
from agentgym.sandboxes.errors import (
    SandboxClosed,
    SandboxDied,
    SandboxError,
    SandboxKilledFromInside,
    SandboxStartError,
    SandboxUnavailable,
)

BACKENDS: dict[str, str] = {
    "docker": "agentgym.sandboxes.docker_sandbox",
    "local": "agentgym.sandboxes.local_sandbox",
}
"""Backend name -> the module holding its ``create(spec)`` and ``reap(everything)``; imported when asked."""
AUTO_ORDER = ("docker", "local")
"""Backends ``backend="auto"`` tries, in order: the first whose prerequisites are here is used."""


def backend_module(name: str) -> Any:
    """The module of backend ``name``; an unknown name lists the valid ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown sandbox backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])


def choose_backend(name: str, spec: SandboxSpec) -> str:
    """``name`` itself, or for ``auto`` the first of :data:`AUTO_ORDER` whose prerequisites (and, for docker,
    the spec's image) are here; raises :class:`SandboxUnavailable` listing why each was passed over."""
    if name != "auto":
        backend_module(name)
        return name
    reasons = []
    for candidate in AUTO_ORDER:
        try:
            backend_module(candidate).check(spec)
            return candidate
        except SandboxUnavailable as exc:
            reasons.append(f"{candidate}: {exc}")
    raise SandboxUnavailable("no sandbox backend is usable here; " + "; ".join(reasons))


async def open_sandbox(backend: str = "docker", spec: SandboxSpec | None = None, **fields: Any) -> Sandbox:
    """A new started sandbox of ``backend`` made from ``spec`` (or from ``fields`` of :class:`SandboxSpec`).
    Raises :class:`SandboxUnavailable` when the backend's prerequisites are missing."""
    return await backend_module(backend).create(spec or SandboxSpec(**fields))


def reap(backends: tuple[str, ...] = tuple(BACKENDS), *, everything: bool = False) -> int:
    """Remove the sandboxes (and their volumes, work dirs, cgroups) whose creating process is gone, or all
    of agentgym's with ``everything``; returns how many sandboxes were removed. A backend that is not
    installed has nothing to reap."""
    return sum(backend_module(name).reap(everything=everything) for name in backends)


__all__ = [
    "BACKENDS",
    "ExecResult",
    "Sandbox",
    "SandboxClosed",
    "SandboxDied",
    "SandboxError",
    "SandboxKilledFromInside",
    "SandboxSpec",
    "SandboxStartError",
    "SandboxUnavailable",
    "backend_module",
    "open_sandbox",
    "reap",
]

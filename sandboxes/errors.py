"""What a sandbox raises: infrastructure failures, never agent mistakes (those are command results)."""

from __future__ import annotations

from agentgym.errors import AgentGymError


class SandboxError(AgentGymError):
    """Base class: the sandbox could not do what was asked. An episode that meets one ends as ``error``."""


class SandboxUnavailable(SandboxError):
    """A prerequisite is missing (no container engine, no bubblewrap, no image); the message names the
    step that installs or builds it."""


class SandboxStartError(SandboxError):
    """The sandbox could not be created or started."""


class SandboxDied(SandboxError):
    """The sandbox stopped working under a call (its container or process is gone, the engine failed)."""


class SandboxClosed(SandboxError):
    """The sandbox was used after :meth:`Sandbox.close`."""

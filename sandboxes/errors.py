"""What a sandbox raises: failures of the sandbox itself, never agent mistakes (those are command results).
One of them, :class:`SandboxKilledFromInside`, is a death that what ran inside caused."""

from __future__ import annotations

from agentgym.errors import AgentGymError


class SandboxError(AgentGymError):
    """Base class: the sandbox could not do what was asked. An episode that meets one ends as ``error``
    (except :class:`SandboxKilledFromInside` under the agent's own command)."""


class SandboxUnavailable(SandboxError):
    """A prerequisite is missing (no container engine, no bubblewrap, no image); the message names the
    step that installs or builds it."""


class SandboxStartError(SandboxError):
    """The sandbox could not be created or started."""


class SandboxDied(SandboxError):
    """The sandbox stopped working under a call (its container or process is gone, the engine failed)."""


class SandboxKilledFromInside(SandboxDied):
    """The sandbox died of what ran inside it, not of anything outside: the kernel killed it for its own
    memory limit. Where the agent's commands ran there, the agent brought it down: an environment ends the
    episode as the agent's failure (:class:`agentgym.envs.sandboxed.SandboxEnv`), not as an infrastructure
    error."""


class SandboxClosed(SandboxError):
    """The sandbox was used after :meth:`Sandbox.close`."""

"""A module that registers environments when imported (for ``make("module:id")``)."""

import agentgym
from agentgym.sandboxes import SandboxUnavailable
from tests.conftest import CounterEnv

agentgym.register("test/Imported-v0", "tests.conftest:CounterEnv")


class NeedsAnEngine(CounterEnv):
    """An environment whose episodes need a Docker engine that is not there."""

    def setup(self, difficulty, options):
        raise SandboxUnavailable("no Docker engine answers")


agentgym.register("test/NeedsAnEngine-v0", "tests.fixtures_registering:NeedsAnEngine")

agentgym.register("test/ToolCrashes-v0", "tests.conftest:ToolCrashes")


class CannotStart(CounterEnv):
    """An environment whose constructor fails."""

    def __init__(self, **kwargs):
        raise OSError("no display")


agentgym.register("test/CannotStart-v0", "tests.fixtures_registering:CannotStart")

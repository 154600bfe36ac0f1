"""A module that registers an environment when imported (for ``make("module:id")``)."""

import agentgym

agentgym.register("test/Imported-v0", "tests.conftest:CounterEnv")

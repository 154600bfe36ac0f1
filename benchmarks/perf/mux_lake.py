"""FrozenLake whose every move takes a fixed time, registered on import: a training job's actor on Ray makes it
as ``benchmarks.perf.mux_lake:perf/TimedLake-v0`` (the repository's root on its path)."""

from __future__ import annotations

import agentgym

ENV_ID = "perf/TimedLake-v0"
agentgym.register(ENV_ID, entry_point="benchmarks.perf.long_tail_env:LongTailLake", kwargs={"tail": 1.0})

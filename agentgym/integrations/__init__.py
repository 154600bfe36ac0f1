"""agentgym consumed by other libraries: TRL trains on agentgym environments (:mod:`agentgym.integrations.trl`),
imported only when used. (Other libraries' environments played as agentgym environments are adapters, and live
with the environments: ``agentgym.envs.gymnasium``, ``agentgym.envs.textarena``, ``agentgym.envs.mcp``,
``agentgym.envs.miniwob``.)"""

"""TextArena's games as agentgym environments (:mod:`agentgym.envs.textarena.env`), ``textarena/<Game>-v0``."""

"""Gymnasium's environments as agentgym environments (:mod:`agentgym.envs.gymnasium.env`): the toy-text classics
registered as ``gymnasium/<Name>-vN``, and any other id of the ``gymnasium`` family found on first use."""

"""Other libraries, both ways: TRL trains on agentgym environments (``trl``); Gymnasium's and TextArena's
environments play as agentgym environments (``gymnasium_env``, ``textarena_env``). Each library is imported only
when used."""

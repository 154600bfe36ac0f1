"""Other libraries, both ways: TRL trains on agentgym environments (``trl``), and Gymnasium's environments play
as agentgym environments (``gymnasium_env``). Each is imported only when used."""

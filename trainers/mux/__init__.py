"""Many synchronous RL jobs on shared pools (RollMux): co-execution groups whose jobs take turns on one rollout
pool and one training pool, a scheduler on Ray that admits jobs and hands out the pools' permits, and the client
a training loop holds."""

"""A discrete-event simulator (SimPy) of RollMux (arXiv 2512.11306) on a disaggregated cluster: synchronous RL
jobs whose phase times come from real agentgym runs, under solo disaggregation, co-located training, RollMux's
admission and round-robin co-execution groups, and the brute-force optimum of small instances; its costs, SLO
attainment and the admission's speed. ``python -m benchmarks.sim --help``; the model's assumptions are in
``config.py`` and ``jobs.py``, the validation against a real multiplexed run in ``validate.py``."""

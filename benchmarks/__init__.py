"""The repository's benchmarks, run from its root: the performance scripts
(``python -m benchmarks.perf.NAME``) and the cluster simulator (``python -m benchmarks.sim``). Not part of the
installed package; ``suites/`` ships as ``agentgym.benchmark_suites``."""

"""The performance benchmarks, one script per question, each run from the repository's root as
``python -m benchmarks.perf.NAME`` and writing its result as JSON under ``benchmarks/results/``; beside
them the environments and helpers the scripts share."""

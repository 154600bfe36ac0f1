"""Evaluation: policies on tasks, suites run to a folder that survives a crash, scores, reports and comparisons."""

from agentgym.evaluation.play import EvalResult, EvalSummary, evaluate, play_tasks

__all__ = ["EvalResult", "EvalSummary", "evaluate", "play_tasks"]

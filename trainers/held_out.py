"""The run's held-out evaluation: the test-split tasks, the spec of their evaluations, and the scores of the
current weights on them."""

from __future__ import annotations

import shutil
from pathlib import Path

from agentgym.errors import AgentGymError
from agentgym.evaluation.records import RunSpec, tasks_digest
from agentgym.evaluation.run import run_evaluation
from agentgym.policies import Policy
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.runner import Backend
from agentgym.suites import load_suite
from agentgym.tasks import Task, TaskSet
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.metrics import eval_by_environment
from agentgym.trainers.mixture import SuiteMixture


class HeldOut:
    """The test-split tasks evaluated, up to ``eval.episodes`` per environment (the suite's, or generated ones),
    and the spec of their evaluations, made once per run."""

    def __init__(self, config: TrainConfig) -> None:
        self.config = config
        sources = config.sources
        named = config.eval.suite or (config.env.suite if isinstance(config.env, SuiteMixture) else None)
        suite = load_suite(named) if named else None
        if suite is None:
            tasks = [t for s in sources for t in TaskSet.generate(s.id, config.eval.episodes, split="test",
                                                                   difficulties=s.difficulties)]
        else:
            tasks = [t for s in sources for t in suite.split("test").filter(env_id=s.id)[: config.eval.episodes]]
            if not tasks and config.eval.episodes:
                raise AgentGymError(f"eval.suite: {suite.name} has no test tasks of {', '.join(s.id for s in sources)}")
        self.tasks: list[Task] = tasks
        self.spec = RunSpec(agent="learner", engine=config.engine.name, model=config.model.path,
                            sampling=config.sampling.params(config.eval.temperature),
                            suite=suite.name if suite else None, suite_sha256=suite.sha256 if suite else None,
                            tasks_sha256=tasks_digest(tasks), seed=config.trainer.seed,
                            max_retries=config.trainer.max_retries, env_args={s.id: s.kwargs for s in sources})

    def folder(self, run_dir: Path, step: int) -> Path:
        """Where step ``step``'s evaluation is written (with its report)."""
        return run_dir / "eval" / f"step-{step:06d}"

    def score(self, run_dir: Path, step: int, policy: Policy, background: BackgroundLoop,
              backend: Backend) -> dict[str, float]:
        """Play the held-out tasks with ``policy`` (the weights of ``step``) into :meth:`folder`; the ``eval/``
        metrics of what was scored."""
        folder = self.folder(run_dir, step)
        shutil.rmtree(folder, ignore_errors=True)  # left by a timeline a resume discarded
        spec = self.spec.model_copy(update={"agent": f"learner-step-{step}"})
        config = self.config
        scores = background.run(run_evaluation(spec, self.tasks, policy, folder, concurrency=config.eval.concurrency,
                                               timeouts=config.trainer.timeouts, backend=backend))
        values = {"eval/success_rate": scores.success_rate, "eval/reward_mean": scores.mean_reward,
                  "eval/turns_mean": scores.mean_turns, "eval/infra_errors": scores.infra_errors,
                  **{f"eval/success_{b.name}": b.success_rate for b in scores.by_difficulty},
                  **eval_by_environment(scores, config.sources)}
        return {key: value for key, value in values.items() if value is not None}  # None: nothing scored

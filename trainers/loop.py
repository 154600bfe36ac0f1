"""The decoupled trainer: rollout streams groups on a background loop while the trainer steps on them.

Rollout and training overlap: the scheduler keeps episodes in flight on the inference engine (admitting
new ones only within ``async_ratio`` versions of the weights, AReaL's rule), and the trainer takes
``groups_per_step`` complete groups, trains one step, and sends the new weights to the engine, whose
version then increases. ``async_ratio: 0`` is the synchronous on-policy baseline on this same path: the
rollout waits for each update and the trainer for each full batch.

Train tasks are numbered by position and handed out in order by a :class:`TaskSampler`: one environment, or a
mixture drawn by weight (a suite's train split among them), with levels in turn or moved by a curriculum.
An episode's seeds depend only on the run's seed, its task's position and its attempt within the group
(``info["seed"]``), and the checkpoint's :class:`DataPosition` records which positions were consumed
(trained on, dropped without signal, or skipped as failed on infrastructure) and the sampler's state which
task each handed-out position holds; a resumed run hands out the pending ones first, as they were.
So a run resumed from step ``k``'s checkpoint plays every task with the same episode seeds as the run
that went on, losing and doubling none. Which step trains on which group follows ``trainer.group_order``:
with ``finish`` (the default) the first groups to close, which depends on timing in any asynchronous
run; with ``handout`` the next ``groups_per_step`` in hand-out order, so every later step trains on the
same tasks with the same seeds as the run that went on. Episodes in flight when a checkpoint was taken
are played again from their start; their tokens may differ, sampled by other weight versions, as may
the attempts a group keeps where an episode failed on infrastructure or ``redundancy`` started spares.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from rich.console import Console
from transformers import AutoTokenizer

from agentgym.cluster import open_backend
from agentgym.config import dump_config, load_config
from agentgym.errors import AgentGymError
from agentgym.evaluation.records import ROLLOUTS, RolloutLog
from agentgym.inference.types import InferenceEngine, SleepingEngine
from agentgym.metrics_log import JSONL_NAME, MetricsLog, plot_curves, read_metrics, rewind_jsonl
from agentgym.progress import quiet_progress_bars
from agentgym.registration import make
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.iterate import drain
from agentgym.rollout.runner import Backend, LocalBackend
from agentgym.rollout.scheduler import RolloutScheduler
from agentgym.rollout.stream import ClosedGroup
from agentgym.tracking import episode_table, open_trackers
from agentgym.trainers.checkpoint import (
    DataPosition,
    TrainerState,
    latest_checkpoint,
    load_trainer_state,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.curriculum import SuccessWindow
from agentgym.trainers.draw import GroupDrawer, StepGroups, closed_groups
from agentgym.trainers.held_out import HeldOut
from agentgym.trainers.learner import MODEL_DIR, Learner, load_model, resolve_device
from agentgym.trainers.mux.client import MuxClient
from agentgym.trainers.mux.turns import PoolTurns
from agentgym.trainers.progress import TrainProgress
from agentgym.trainers.rank_group import RankGroup, TrainerRankError
from agentgym.trainers.report import write_report
from agentgym.trainers.run_engines import RunEngines
from agentgym.trainers.sampler import TaskSampler
from agentgym.trainers.step_batch import record_rollouts, step_batch
from agentgym.trainers.weight_publish import LearnerTurn

CONFIG_FILE = "config.yaml"
CURVES_FILE = "curves.png"
RANKS_FILE = "ranks.json"
"""Where each trainer rank of a distributed run runs (rank, pid, node, device), written as the run starts."""
BATCHES_FILE = "batches.jsonl"
"""One line per step: the train task positions it consumed, trained on (``tasks``), dropped by dynamic sampling
(``dropped``), skipped as failed (``failed``) or left out as too stale by then (``stale``), so no group is lost or
doubled on resume; the positions whose carry-over groups it took (``carried``: extras, never consumed); and the
seeds of the episodes it trained on (``info["seed"]``)."""
@dataclass(frozen=True)
class TrainResult:
    """What a finished run reports: held-out success before and after, steps, and wall time."""

    run_dir: Path
    steps: int
    success_before: float | None
    success_after: float | None
    wall_seconds: float


def train(config: TrainConfig, *, console: Console | None = None) -> TrainResult:
    """Start a new run in ``config.output_dir`` (which must not hold one) and train it to the end."""
    run_dir = config.run_dir
    if latest_checkpoint(run_dir) is not None or (run_dir / CONFIG_FILE).exists():
        raise AgentGymError(f"{run_dir} already holds a run; continue it with `agentgym train --resume {run_dir}` "
                            "or choose another output_dir")
    run = _Run(config, None, console or Console())  # a bad env id or model fails here, leaving run_dir free
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(dump_config(config))
    return run.run()


def resume(run_dir: str | Path, *, console: Console | None = None) -> TrainResult:
    """Continue the run in ``run_dir`` from its latest checkpoint (same step, optimizer state, RNG and data):
    every later step trains on the tasks and episode seeds the run would have had unstopped (module docstring)."""
    run_dir = Path(run_dir)
    if not (run_dir / CONFIG_FILE).is_file():
        raise AgentGymError(f"{run_dir} holds no run ({CONFIG_FILE} is missing)")
    config = load_config(TrainConfig, run_dir / CONFIG_FILE)
    if Path(config.output_dir).resolve() != run_dir.resolve():
        config = config.model_copy(update={"output_dir": str(run_dir)})
    return _Run(config, latest_checkpoint(run_dir), console or Console()).run()


class _Run:
    """One training run from a fresh model or a checkpoint."""

    def __init__(self, config: TrainConfig, checkpoint: Path | None, console: Console) -> None:
        self.client: MuxClient | None = None
        self.ray_joined = False
        if config.mux.address is not None:
            from agentgym.trainers.mux.job import join

            config, self.client, self.ray_joined = join(config)
        try:
            self._setup(config, checkpoint, console)
        except BaseException as error:
            self._leave(error)
            raise

    def _setup(self, config: TrainConfig, checkpoint: Path | None, console: Console) -> None:
        self.config, self.console = config, console
        self.turns: PoolTurns | None = None
        self.run_dir = config.run_dir
        if config.engine.threads is not None:
            torch.set_num_threads(config.engine.threads)
        torch.manual_seed(config.trainer.seed)
        for source in config.sources:  # a bad env id or kwargs fails here, not in every episode
            make(source.id, **source.kwargs).close()
        levels = {s.id: s.difficulties for s in config.sources}
        curriculum = SuccessWindow(config.curriculum, levels) if config.curriculum else None
        self.sampler = TaskSampler(config.sources, config.trainer.seed, curriculum)
        self.held_out = HeldOut(config)
        self.device = resolve_device(config.trainer.device)
        self.source = checkpoint / MODEL_DIR if checkpoint else Path(config.model.path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.source)
        self.data = DataPosition()
        self.step = 0
        self.carry_discarded = 0
        """Carried-over episodes the checkpoint resumed from had buffered, discarded; logged with the first step."""
        self.carry_buffer = 0
        self.backend: Backend = LocalBackend()
        state = load_trainer_state(checkpoint) if checkpoint else None
        self.learner = self._learner()
        if state is not None:
            try:
                self.learner.restore(checkpoint, state.scheduler, state.step)
            except BaseException:
                self._close_learner()
                raise
            self.step, self.data = state.step, state.data
            self.carry_discarded = state.carried
            if state.carried:
                console.print(f"[yellow]resuming at step {state.step}: the {state.carried} carried-over episodes "
                              "buffered at the checkpoint are discarded (a paused episode is not saved)[/]")
            if state.sampler is not None:
                self.sampler.load_state(state.sampler)
            set_rng_state(state.rng)
        kept = self.step if checkpoint else -1
        for name in (BATCHES_FILE, JSONL_NAME, ROLLOUTS):
            rewind_jsonl(self.run_dir / name, kept)
        self.rollouts = RolloutLog(self.run_dir) if config.trainer.save_rollouts else None

    def _learner(self) -> Learner | RankGroup:
        """This process's learner, or the ranks of a distributed one (``trainer.world_size``, ``trainer.strategy``)
        or of a multiplexed one (on its group's training pool, apart from this process on the rollout pool)."""
        if self.config.trainer.parallel == "single" and self.client is None:
            return Learner(load_model(self.source, self.config, self.device), self.config)
        return RankGroup(self.config, self.source, self.config.rollout.ray.address)

    def run(self) -> TrainResult:
        started = time.perf_counter()
        try:
            return self._run(started)
        except BaseException as error:
            self._leave(error)
            raise
        finally:
            self._leave(None)

    def _leave(self, error: BaseException | None) -> None:
        """Leave the mux scheduler's group, saying why (once), and the Ray cluster joined for it."""
        client, self.client = self.client, None
        if client is not None:
            client.close("finished" if error is None else f"crashed: {type(error).__name__}: {error}")
        if self.ray_joined:
            import ray

            ray.shutdown()
            self.ray_joined = False

    def _run(self, started: float) -> TrainResult:
        try:
            if isinstance(self.learner, RankGroup):
                (self.run_dir / RANKS_FILE).write_text(json.dumps(self.learner.where, indent=1) + "\n")
            with open_backend(self.config.rollout) as self.backend, BackgroundLoop() as background, \
                    MetricsLog(self.run_dir, trackers=open_trackers(self.config.logging, self.run_dir,
                                                                    self.config.model_dump(mode="json"))) as log:
                self.engines = RunEngines(self.config, self.backend, self.source, self.device, self.learner,
                                          sleeps=self.config.trainer.colocate or self.client is not None)
                try:
                    self._train(background, self.engines.rollout(background, self.step), log)
                finally:
                    background.run(self.engines.close())
        except TrainerRankError as error:
            raise TrainerRankError(f"{error}. Continue the run from its last checkpoint: "
                                   f"agentgym train --resume {self.run_dir}") from error
        finally:
            self._close_learner()
        plot_curves(self.run_dir, self.run_dir / CURVES_FILE)
        records = read_metrics(self.run_dir)
        evals = [r for r in records if r.get("eval/success_rate") is not None]
        result = TrainResult(
            run_dir=self.run_dir,
            steps=self.step,
            success_before=evals[0]["eval/success_rate"] if evals and evals[0]["step"] == 0 else None,
            success_after=evals[-1]["eval/success_rate"] if evals and evals[-1]["step"] == self.step else None,
            wall_seconds=time.perf_counter() - started,
        )
        write_report(self.run_dir, self.config, result, records)
        return result

    def _close_learner(self) -> None:
        if isinstance(self.learner, RankGroup):
            self.learner.close()

    def _train(self, background: BackgroundLoop, engine: SleepingEngine, log: MetricsLog) -> None:
        """Start the rollout on ``engine`` and train step after step on what it streams, to ``trainer.steps``."""
        config, trainer = self.config, self.config.trainer
        scheduler = RolloutScheduler({s.id: s.kwargs for s in config.sources}, self.engines.policy(engine),
                                     _rollout_config(config), engine=engine, backend=self.backend)
        if self.client is not None:  # the engine sleeps until its job's turn on the rollout pool
            self.turns = PoolTurns(self.client, background, engine, self.learner, early_release=config.mux.early_release)
            background.run(engine.sleep())
        if trainer.colocate:
            self.learner.offload()  # the engine has the device while it generates
        with TrainProgress(trainer.steps, self.step, console=self.console,
                           collapse=config.algorithm.vcpo.collapse_ess_ratio) as progress:
            if self.step == 0:
                self._evaluate(background, engine, log, progress)
            rollout = background.submit(scheduler.run(map(self.sampler.task, self._order()), indices=self._order()))
            groups = closed_groups(scheduler.stream, self._order(), in_order=trainer.group_order == "handout")
            drawer = GroupDrawer(config, background, groups, rollout, scheduler, self.console, self.turns)
            try:
                while self.step < trainer.steps:
                    self._step(drawer, background, engine, scheduler, log, progress)
            finally:
                background.call(scheduler.stop)
                background.run(drain(scheduler))
                rollout.result()

    def _step(self, drawer: GroupDrawer, background: BackgroundLoop, engine: SleepingEngine,
              scheduler: RolloutScheduler, log: MetricsLog, progress: TrainProgress) -> None:
        """One training step, top to bottom: draw the step's groups, learn on them, publish the new weights to the
        engine, then record the step, and evaluate and checkpoint where due."""
        config = self.config
        started = time.perf_counter()
        with self._turn("rollout"):
            drawn = drawer.draw(self.step + 1, self.learner.version)
        waited = time.perf_counter() - started
        with self._turn("train"), LearnerTurn(background, engine, self.learner,
                                              colocate=config.trainer.colocate) as turn:
            prepared = step_batch(drawn, config.algorithm, self._pad_id(), self.learner.version, config.sources)
            learned = self.learner.step(prepared.batch) if prepared.batch else self.learner.skip()
            turn.publish()
        background.call(scheduler.notify)  # after the publish: admission counts the version the engine serves
        self.step = self.learner.version
        if self.rollouts is not None:
            record_rollouts(self.rollouts, drawn, prepared, self.learner.trainer_logprobs, self.step)
        metrics = {**prepared.metrics, **learned, "time/publish_seconds": turn.publish_seconds}
        if self.turns is not None:
            metrics.update(self.turns.metrics(self.step))
        metrics.update(self._consume(drawn))
        metrics.update(scheduler.metrics.log_dict())
        self.carry_buffer = scheduler.metrics.carry_buffer
        if self.carry_discarded:
            metrics["rollout/carry_discarded_on_resume"], self.carry_discarded = self.carry_discarded, 0
        seconds = time.perf_counter() - started
        metrics["time/step_seconds"] = seconds
        metrics["time/wait_seconds"] = waited
        metrics["time/trajectories_per_second"] = config.batch_size / seconds
        log.log(self.step, metrics)
        progress.update(metrics, advance=1)
        if self._due(config.eval.every):
            self._evaluate(background, engine, log, progress, scheduler)
        if self._due(config.checkpoint.every):
            self._checkpoint()

    def _turn(self, pool: str) -> contextlib.AbstractContextManager[None]:
        """This job's turn on ``pool`` where it shares pools with others (``mux.address``); alone, nothing."""
        if self.turns is None:
            return contextlib.nullcontext()
        return self.turns.rollout() if pool == "rollout" else self.turns.train()

    def _order(self) -> Iterator[int]:
        """Train task positions in the order they are handed out: first those a checkpoint left pending
        (handed out but never consumed), then new ones."""
        return itertools.chain(self.data.pending(), itertools.count(self.data.next))

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id

    def _consume(self, drawn: StepGroups) -> dict[str, float]:
        """Mark the step's positions consumed, record them, and let the curriculum see the outcomes; returns
        the curriculum's metrics."""
        def positions(groups: list[ClosedGroup], carried: bool) -> list[int]:
            return [group.id.index for group in groups if group.id.carried == carried]

        trained, dropped, stale = (positions(groups, False) for groups in (drawn.trained, drawn.dropped, drawn.stale))
        carried = positions(drawn.trained, True) + positions(drawn.dropped, True)
        for position in [*trained, *dropped, *stale, *drawn.failed]:
            self.data.consume(position)
            self.sampler.consume(position)
        seeds = sorted(t.info["seed"] for group in drawn.trained for t in group.members)
        with (self.run_dir / BATCHES_FILE).open("a") as f:
            f.write(json.dumps({"step": self.step, "tasks": trained, "dropped": dropped, "failed": drawn.failed,
                                "stale": stale, "carried": carried, "seeds": seeds}) + "\n")
        curriculum = self.sampler.curriculum
        if curriculum is None:
            return {}
        for group in [*drawn.trained, *drawn.dropped]:
            task = group.members[0].task
            curriculum.observe(task.env_id, task.difficulty, [t.success for t in group.members])
        curriculum.update()
        return curriculum.metrics()

    def _due(self, every: int) -> bool:
        return self.step == self.config.trainer.steps or (every > 0 and self.step % every == 0)

    def _evaluate(self, background: BackgroundLoop, engine: InferenceEngine, log: MetricsLog, progress: TrainProgress,
                  scheduler: RolloutScheduler | None = None) -> None:
        """Score the current weights on the held-out tasks into ``eval/step-N/`` (with its report). The
        rollout keeps running on the same engine meanwhile; only the trainer waits, so the weights hold still."""
        if not self.held_out.tasks:
            return
        policy = self.engines.policy(self.engines.evaluation(background, engine, self.step), self.config.eval.temperature)
        started = scheduler.metrics.started if scheduler else 0
        with self._turn("rollout"):
            metrics = self.held_out.score(self.run_dir, self.step, policy, background, self.backend)
        if scheduler is not None:
            metrics["eval/rollout_started_meanwhile"] = scheduler.metrics.started - started
        log.log(self.step, metrics)
        if log.trackers and self.config.logging.table_rows:
            log.log_table(self.step, episode_table(self.held_out.folder(self.run_dir, self.step),
                                                   self.config.logging.table_rows))
        progress.update(metrics)

    def _checkpoint(self) -> None:
        state = TrainerState(step=self.step, scheduler=self.learner.scheduler_state(), data=self.data, rng=rng_state(),
                             sampler=self.sampler.state(), carried=self.carry_buffer)
        with quiet_progress_bars():
            save_checkpoint(self.run_dir, self.learner, self.tokenizer, state, keep=self.config.checkpoint.keep)


def _rollout_config(config: TrainConfig) -> RolloutConfig:
    """The rollout a run's config asks for: its groups, staleness bound, stream and sampling."""
    trainer, rollout = config.trainer, config.rollout
    return RolloutConfig(
        concurrency=trainer.concurrency,
        group_size=trainer.group_size,
        redundancy=trainer.redundancy,
        max_retries=trainer.max_retries,
        max_staleness=trainer.async_ratio,
        batch_size=config.batch_size,
        stream_size=config.batch_size * (trainer.async_ratio + 1) + trainer.concurrency,
        seed=trainer.seed,
        timeouts=trainer.timeouts,
        sampling=rollout.sampling,
        latr=rollout.latr,
        carry_over=rollout.carry_over,
        carry_over_limit=rollout.carry_over_limit,
        carry_over_resume=rollout.carry_over_resume,
    )

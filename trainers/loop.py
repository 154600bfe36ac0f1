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
import functools
import itertools
import json
import math
import shutil
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from rich.console import Console
from transformers import AutoTokenizer

from agentgym.algorithms import compute_advantages
from agentgym.cluster import open_backend
from agentgym.config import dump_config, load_config
from agentgym.errors import AgentGymError
from agentgym.evaluation.records import ROLLOUTS, RolloutLog, RunSpec, rollout_record, tasks_digest
from agentgym.evaluation.run import run_evaluation
from agentgym.inference import EngineSettings, engine_spec
from agentgym.inference.types import InferenceEngine, SamplingParams, SleepingEngine
from agentgym.metrics_log import JSONL_NAME, MetricsLog, plot_curves, read_metrics, rewind_jsonl
from agentgym.policies.lm import LMPolicy
from agentgym.progress import quiet_progress_bars
from agentgym.registration import make
from agentgym.rollout.background import BackgroundLoop
from agentgym.rollout.config import RolloutConfig
from agentgym.rollout.iterate import drain
from agentgym.rollout.runner import Backend, LocalBackend
from agentgym.rollout.scheduler import RolloutScheduler, group_id
from agentgym.rollout.stream import TrajectoryStream
from agentgym.suites import load_suite
from agentgym.tasks import Task, TaskSet
from agentgym.tracking import episode_table, open_trackers
from agentgym.trainers.batch import collate
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
from agentgym.trainers.forced_lag import LaggedEngine
from agentgym.trainers.learner import MODEL_DIR, Learner, by_trajectory, load_model, resolve_device
from agentgym.trainers.metrics import by_environment, eval_by_environment
from agentgym.trainers.mixture import SuiteMixture
from agentgym.trainers.mux.client import MuxClient
from agentgym.trainers.mux.turns import PoolTurns
from agentgym.trainers.progress import TrainProgress
from agentgym.trainers.rank_group import RankGroup, TrainerRankError
from agentgym.trainers.report import write_report
from agentgym.trainers.sampler import TaskSampler
from agentgym.trainers.weight_publish import train_and_publish
from agentgym.trajectory import Trajectory, distinct_actions, has_signal

CONFIG_FILE = "config.yaml"
CURVES_FILE = "curves.png"
RANKS_FILE = "ranks.json"
"""Where each trainer rank of a distributed run runs (rank, pid, node, device), written as the run starts."""
BATCHES_FILE = "batches.jsonl"
"""One line per step: the train task positions it consumed, trained on (``tasks``), dropped by dynamic sampling
(``dropped``), skipped as failed (``failed``) or left out as too stale by then (``stale``), so no group is lost or
doubled on resume; the positions whose carry-over groups it took (``carried``: extras, never consumed); and the
seeds of the episodes it trained on (``info["seed"]``)."""
_Closed = tuple[int, list[Trajectory] | None, bool]
"""A closed group of train tasks: its position, kept members (``None`` where it failed), and whether it is a
carry-over group (``rollout.carry_over``: an extra group of an earlier position's task, outside the hand-out order)."""


@dataclass
class _Draw:
    """The closed groups a step took from the rollout."""

    trained: list[list[Trajectory]] = field(default_factory=list)
    dropped: list[list[Trajectory]] = field(default_factory=list)
    """Groups whose rewards were all equal, left out by dynamic sampling."""
    failed: list[int] = field(default_factory=list)
    """Positions of groups that failed on infrastructure."""
    stale: list[list[Trajectory]] = field(default_factory=list)
    """Groups with a member older than ``async_ratio`` versions by the step that would train it (kept in time, it
    waited for slower members of its group): left out, so no trained token breaks the staleness bound."""

    @property
    def closed(self) -> int:
        return len(self.trained) + len(self.dropped) + len(self.failed) + len(self.stale)


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
        self.held_out, self.eval_spec = self._held_out()
        self.device = resolve_device(config.trainer.device)
        self.source = checkpoint / MODEL_DIR if checkpoint else Path(config.model.path)
        self.tokenizer = AutoTokenizer.from_pretrained(self.source)
        self.data = DataPosition()
        self.step = 0
        self.carry_discarded = 0
        """Carried-over episodes the checkpoint resumed from had buffered, discarded; logged with the first step."""
        self.carry_buffer = 0
        self.backend: Backend = LocalBackend()
        self.eval_engine: SleepingEngine | None = None
        """The second engine that evaluates under a forced lag (``trainer.forced_lag``)."""
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
                engine = self._engine(background)
                try:
                    self._train(background, engine, log)
                finally:
                    background.run(engine.close())
                    if self.eval_engine is not None:
                        background.run(self.eval_engine.close())
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

    def _engine(self, background: BackgroundLoop) -> SleepingEngine:
        """The engine the rollout samples from and the trainer publishes its weights to (under a forced lag, it
        serves them that many versions late)."""
        engine = self._new_engine()
        if self.step:
            background.run(engine.update_weights(self.learner.weights(), version=self.step))
        lag = self.config.trainer.forced_lag
        return engine if lag is None else LaggedEngine(engine, lag)

    def _evaluation_engine(self, background: BackgroundLoop, engine: InferenceEngine) -> InferenceEngine:
        """The engine that scores the current weights: the rollout's, or under a forced lag a second one, brought
        up to the trainer's version."""
        if self.config.trainer.forced_lag is None:
            return engine
        if self.eval_engine is None:
            self.eval_engine = self._new_engine()
        if self.eval_engine.version != self.step:
            background.run(self.eval_engine.update_weights(self.learner.weights(), version=self.step))
        return self.eval_engine

    def _new_engine(self) -> SleepingEngine:
        """An engine of ``config.engine`` on the model the run started from."""
        config = self.config.engine
        settings = EngineSettings(max_batch_size=config.max_batch_size, max_context=config.max_context,
                                  threads=config.threads, device=str(self.device), dtype=self.config.model.dtype,
                                  sleeps=self.config.trainer.colocate or self.client is not None)
        kwargs = {**engine_spec(config.name).kwargs(settings), **config.kwargs}
        # a LoRA run's checkpoint holds the adapter alone: a resumed run's engine starts from the base model, and is
        # sent the merged weights at once (:meth:`_engine`)
        source = Path(self.config.model.path) if self.config.model.lora else self.source
        engine = self.backend.engine(config.name, source, **kwargs)
        if not isinstance(engine, SleepingEngine):
            raise AgentGymError(f"the {config.name} engine cannot be trained: it has no sleep and wake_up")
        return engine

    def _policy(self, engine: InferenceEngine, temperature: float | None = None) -> LMPolicy:
        """A policy sampling from ``engine`` (under a forced lag, from the engine behind it)."""
        if isinstance(engine, LaggedEngine):
            engine = engine.engine
        config = self.config
        contexts = {source.id: source.context for source in config.sources if source.context is not None}
        return LMPolicy(engine, self._sampling(temperature), max_context=config.engine.max_context,
                        context=config.context, contexts=contexts, name="learner")

    def _sampling(self, temperature: float | None = None) -> SamplingParams:
        """The configured sampling, at ``temperature`` where given."""
        sampling = self.config.sampling
        return SamplingParams(temperature=sampling.temperature if temperature is None else temperature,
                              top_p=sampling.top_p, max_tokens=sampling.max_tokens)

    def _train(self, background: BackgroundLoop, engine: SleepingEngine, log: MetricsLog) -> None:
        config, trainer = self.config, self.config.trainer
        rollout_config = RolloutConfig(
            concurrency=trainer.concurrency,
            group_size=trainer.group_size,
            redundancy=trainer.redundancy,
            max_retries=trainer.max_retries,
            max_staleness=trainer.async_ratio,
            batch_size=config.batch_size,
            stream_size=config.batch_size * (trainer.async_ratio + 1) + trainer.concurrency,
            seed=trainer.seed,
            timeouts=trainer.timeouts,
            sampling=config.rollout.sampling,
            latr=config.rollout.latr,
            carry_over=config.rollout.carry_over,
            carry_over_limit=config.rollout.carry_over_limit,
            carry_over_resume=config.rollout.carry_over_resume,
        )
        scheduler = RolloutScheduler({s.id: s.kwargs for s in config.sources}, self._policy(engine), rollout_config,
                                     engine=engine, backend=self.backend)
        if self.client is not None:  # the engine sleeps until its job's turn on the rollout pool
            self.turns = PoolTurns(self.client, background, engine, self.learner, early_release=config.mux.early_release)
            background.run(engine.sleep())
        colocate = trainer.colocate
        if colocate:
            self.learner.offload()  # the engine has the device while it generates
        with TrainProgress(trainer.steps, self.step, console=self.console,
                           collapse=config.algorithm.vcpo.collapse_ess_ratio) as progress:
            if self.step == 0:
                self._evaluate(background, engine, log, progress)
            rollout = background.submit(scheduler.run(map(self.sampler.task, self._order()), indices=self._order()))
            groups = _closed(scheduler.stream, self._order(), in_order=trainer.group_order == "handout")
            try:
                while self.step < trainer.steps:
                    step_started = time.perf_counter()
                    with self._turn("rollout"):
                        draw = self._next_batch(background, groups, rollout, scheduler)
                    waited = time.perf_counter() - step_started
                    with self._turn("train"):
                        metrics = train_and_publish(background, engine, self.learner, scheduler,
                                                    functools.partial(self._learn, draw), colocate=colocate)
                    self.step = self.learner.version
                    if self.turns is not None:
                        metrics.update(self.turns.metrics(self.step))
                    metrics.update(self._consume(draw))
                    metrics.update(scheduler.metrics.log_dict())
                    self.carry_buffer = scheduler.metrics.carry_buffer
                    if self.carry_discarded:
                        metrics["rollout/carry_discarded_on_resume"], self.carry_discarded = self.carry_discarded, 0
                    seconds = time.perf_counter() - step_started
                    metrics["time/step_seconds"] = seconds
                    metrics["time/wait_seconds"] = waited
                    metrics["time/trajectories_per_second"] = config.batch_size / seconds
                    log.log(self.step, metrics)
                    progress.update(metrics, advance=1)
                    if self._due(config.eval.every):
                        self._evaluate(background, engine, log, progress, scheduler)
                    if self._due(config.checkpoint.every):
                        self._checkpoint()
            finally:
                background.call(scheduler.stop)
                background.run(drain(scheduler))
                rollout.result()

    def _turn(self, pool: str) -> contextlib.AbstractContextManager[None]:
        """This job's turn on ``pool`` where it shares pools with others (``mux.address``); alone, nothing."""
        if self.turns is None:
            return contextlib.nullcontext()
        return self.turns.rollout() if pool == "rollout" else self.turns.train()

    def _order(self) -> Iterator[int]:
        """Train task positions in the order they are handed out: first those a checkpoint left pending
        (handed out but never consumed), then new ones."""
        return itertools.chain(self.data.pending(), itertools.count(self.data.next))

    def _next_batch(self, background: BackgroundLoop, groups: AsyncIterator[_Closed], rollout: Future[Any],
                    scheduler: RolloutScheduler) -> _Draw:
        """The next ``groups_per_step`` complete groups (under dynamic sampling, with signal), and those passed."""
        wanted, algorithm = self.config.trainer.groups_per_step, self.config.algorithm
        limit = math.ceil(algorithm.dynamic_sampling_draws * wanted) if algorithm.dynamic_sampling else math.inf
        draw = _Draw()
        while len(draw.trained) < wanted and draw.closed < limit:
            try:
                position, members, carried = background.run(anext(groups))
            except StopAsyncIteration:
                rollout.result()
                raise AgentGymError("the rollout ended before training did (every task group failed?)") from None
            if members is None:
                if not carried:  # a failed carry-over group is an extra: the scheduler counts it, no task is owed
                    draw.failed.append(position)
            elif algorithm.dynamic_sampling and not has_signal(members):
                draw.dropped.append(members)
                background.call(scheduler.release, len(members))
            elif _lag(members, self.learner.version) > self.config.trainer.max_lag:
                draw.stale.append(members)
                background.call(scheduler.release, len(members))
            else:
                draw.trained.append(members)
            if self.turns is not None:
                self.turns.closed(len(draw.trained), wanted)
        if len(draw.trained) < wanted:
            self._short(draw, limit)
        return draw

    def _short(self, draw: _Draw, limit: float) -> None:
        """Dynamic sampling drew its bound of groups and found too few with signal: go on with those found,
        or, with none, stop the run saying why."""
        step, wanted = self.step + 1, self.config.trainer.groups_per_step
        if draw.trained:
            self.console.print(f"[yellow]step {step}: dynamic sampling found {len(draw.trained)} of {wanted} "
                               f"groups with signal in {draw.closed} drawn; training on those[/]")
            return
        rewards = [t.reward for group in draw.dropped for t in group]
        seen = f"; their mean reward was {sum(rewards) / len(rewards):.2f}" if rewards else ""
        raise AgentGymError(
            f"step {step}: dynamic sampling gave up after {draw.closed} groups (algorithm.dynamic_sampling_draws="
            f"{self.config.algorithm.dynamic_sampling_draws} x trainer.groups_per_step={wanted}): every one had "
            f"equal rewards within the group ({len(draw.dropped)}) or failed ({len(draw.failed)}){seen}. There is "
            "nothing to learn from: the tasks are all too hard or all too easy for this model; change env "
            "difficulties or raise algorithm.dynamic_sampling_draws")

    def _learn(self, draw: _Draw) -> dict[str, float]:
        """Advantages per group, one optimizer step on the groups that carry signal, and the batch's metrics."""
        algorithm, groups = self.config.algorithm, draw.trained
        trajectories = [t for group in groups for t in group]
        rewards = torch.tensor([t.reward for t in trajectories], dtype=torch.float32)
        group_ids = [i for i, group in enumerate(groups) for _ in group]
        advantages = compute_advantages(algorithm.advantage, rewards, group_ids)
        mixed = [has_signal(group) for group in groups]
        keep = [i for i, g in enumerate(group_ids) if mixed[g] or not algorithm.skip_uniform_groups]
        played = trajectories + [t for group in draw.dropped for t in group]
        metrics = _batch_metrics(played, self.learner.version)
        metrics.update(by_environment("rollout", played, self.config.sources))
        metrics["rollout/mixed_group_fraction"] = sum(mixed) / len(groups)
        metrics["rollout/distinct_action_sequences"] = sum(map(distinct_actions, groups)) / len(groups)
        metrics["rollout/stale_groups_left_out"] = len(draw.stale)
        if algorithm.dynamic_sampling:
            metrics["dynamic/dropped_groups"] = len(draw.dropped)
            metrics["dynamic/drawn_groups"] = draw.closed
        if keep:
            batch = collate([trajectories[i] for i in keep], advantages[keep], self._pad_id(), [group_ids[i] for i in keep])
            metrics.update(self.learner.step(batch))
        else:
            metrics.update(self.learner.skip())
        self._record_rollouts(draw, advantages.tolist(), keep)
        return metrics

    def _record_rollouts(self, draw: _Draw, advantages: list[float], keep: list[int]) -> None:
        """Append every episode of the step's groups to ``rollouts.jsonl``: what was trained with its advantage and
        the trainer's logprobs, and what was left out, saying why."""
        if self.rollouts is None:
            return
        places = {index: place for place, index in enumerate(keep)}  # a trained episode's row in the batch
        trainer_logprobs = by_trajectory(self.learner.trainer_logprobs)
        played = [(group, outcome) for groups, outcome in ((draw.trained, "trained"), (draw.dropped, "dropped"),
                                                           (draw.stale, "stale")) for group in groups]
        members = [(member, trajectory, outcome) for group, outcome in played for member, trajectory in enumerate(group)]
        records = []
        for index, (member, trajectory, outcome) in enumerate(members):
            place, group = places.get(index), trajectory.info["group"]
            records.append(rollout_record(
                trajectory, step=self.learner.version, position=group["index"], carried=bool(group["carry"]),
                member=member, outcome="uniform" if outcome == "trained" and place is None else outcome,
                advantage=None if place is None else advantages[index],
                trainer_logprobs=() if place is None else trainer_logprobs.get(place, ())))
        self.rollouts.append(records)

    def _pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return pad if pad is not None else self.tokenizer.eos_token_id

    def _consume(self, draw: _Draw) -> dict[str, float]:
        """Mark the step's positions consumed, record them, and let the curriculum see the outcomes; returns
        the curriculum's metrics."""
        def positions(groups: list[list[Trajectory]], carried: bool) -> list[int]:
            return [g[0].info["group"]["index"] for g in groups if bool(g[0].info["group"].get("carry")) == carried]

        trained, dropped, stale = (positions(groups, False) for groups in (draw.trained, draw.dropped, draw.stale))
        carried = positions(draw.trained, True) + positions(draw.dropped, True)
        for position in [*trained, *dropped, *stale, *draw.failed]:
            self.data.consume(position)
            self.sampler.consume(position)
        seeds = sorted(t.info["seed"] for group in draw.trained for t in group)
        with (self.run_dir / BATCHES_FILE).open("a") as f:
            f.write(json.dumps({"step": self.step, "tasks": trained, "dropped": dropped, "failed": draw.failed,
                                "stale": stale, "carried": carried, "seeds": seeds}) + "\n")
        curriculum = self.sampler.curriculum
        if curriculum is None:
            return {}
        for group in [*draw.trained, *draw.dropped]:
            task = group[0].task
            curriculum.observe(task.env_id, task.difficulty, [t.success for t in group])
        curriculum.update()
        return curriculum.metrics()

    def _due(self, every: int) -> bool:
        return self.step == self.config.trainer.steps or (every > 0 and self.step % every == 0)

    def _evaluate(self, background: BackgroundLoop, engine: InferenceEngine, log: MetricsLog, progress: TrainProgress,
                  scheduler: RolloutScheduler | None = None) -> None:
        """Score the current weights on the held-out tasks into ``eval/step-N/`` (with its report). The
        rollout keeps running on the same engine meanwhile; only the trainer waits, so the weights hold still."""
        tasks = self.held_out
        if not tasks:
            return
        folder = self.run_dir / "eval" / f"step-{self.step:06d}"
        shutil.rmtree(folder, ignore_errors=True)  # left by a timeline a resume discarded
        policy = self._policy(self._evaluation_engine(background, engine), self.config.eval.temperature)
        spec = self.eval_spec.model_copy(update={"agent": f"learner-step-{self.step}"})
        started = scheduler.metrics.started if scheduler else 0
        with self._turn("rollout"):
            scores = background.run(run_evaluation(spec, tasks, policy, folder, concurrency=self.config.eval.concurrency,
                                                   timeouts=self.config.trainer.timeouts, backend=self.backend))
        values = {"eval/success_rate": scores.success_rate, "eval/reward_mean": scores.mean_reward,
                  "eval/turns_mean": scores.mean_turns, "eval/infra_errors": scores.infra_errors,
                  **{f"eval/success_{b.name}": b.success_rate for b in scores.by_difficulty},
                  **eval_by_environment(scores, self.config.sources)}
        metrics = {key: value for key, value in values.items() if value is not None}  # None: nothing scored
        if scheduler is not None:
            metrics["eval/rollout_started_meanwhile"] = scheduler.metrics.started - started
        log.log(self.step, metrics)
        if log.trackers and self.config.logging.table_rows:
            log.log_table(self.step, episode_table(folder, self.config.logging.table_rows))
        progress.update(metrics)

    def _held_out(self) -> tuple[list[Task], RunSpec]:
        """The test-split tasks evaluated, up to ``eval.episodes`` per environment (the suite's, or generated
        ones), and the spec of their evaluations, made once per run."""
        config, sources = self.config, self.config.sources
        named = config.eval.suite or (config.env.suite if isinstance(config.env, SuiteMixture) else None)
        suite = load_suite(named) if named else None
        if suite is None:
            tasks = [t for s in sources for t in TaskSet.generate(s.id, config.eval.episodes, split="test",
                                                                   difficulties=s.difficulties)]
        else:
            tasks = [t for s in sources for t in suite.split("test").filter(env_id=s.id)[: config.eval.episodes]]
            if not tasks and config.eval.episodes:
                raise AgentGymError(f"eval.suite: {suite.name} has no test tasks of {', '.join(s.id for s in sources)}")
        spec = RunSpec(agent="learner", engine=config.engine.name, model=config.model.path,
                       sampling=self._sampling(config.eval.temperature),
                       suite=suite.name if suite else None, suite_sha256=suite.sha256 if suite else None,
                       tasks_sha256=tasks_digest(tasks), seed=config.trainer.seed,
                       max_retries=config.trainer.max_retries, env_args={s.id: s.kwargs for s in sources})
        return tasks, spec

    def _checkpoint(self) -> None:
        state = TrainerState(step=self.step, scheduler=self.learner.scheduler_state(), data=self.data, rng=rng_state(),
                             sampler=self.sampler.state(), carried=self.carry_buffer)
        with quiet_progress_bars():
            save_checkpoint(self.run_dir, self.learner, self.tokenizer, state, keep=self.config.checkpoint.keep)


async def _closed(stream: TrajectoryStream, order: Iterator[int], *, in_order: bool) -> AsyncIterator[_Closed]:
    """Every group of ``stream`` once closed, with its task position (``order`` is the hand-out order):
    as groups close, or ``in_order`` of hand-out."""
    handed: deque[int] = deque()  # positions handed out and not yet yielded
    positions: dict[str, int] = {}
    closed: dict[int, list[Trajectory] | None] = {}
    async for group in stream.closed_groups():
        base, _, carry = group.id.partition("c")
        if carry:
            yield int(base.removeprefix("g")), group.members if group.complete else None, True
            continue
        while group.id not in positions:
            handed.append(position := next(order))
            positions[group_id(position)] = position
        position = positions.pop(group.id)
        closed[position] = group.members if group.complete else None
        if not in_order:
            handed.remove(position)
            yield position, closed.pop(position), False
        while in_order and handed and handed[0] in closed:
            yield handed[0], closed.pop(handed.popleft()), False


def _lag(trajectories: list[Trajectory], version: int) -> int:
    """How many versions the oldest model-sampled token of ``trajectories`` lags ``version`` (0 without any)."""
    return max((version - min(v for v in t.versions if v >= 0) for t in trajectories if any(v >= 0 for v in t.versions)),
               default=0)


def _batch_metrics(trajectories: list[Trajectory], version: int) -> dict[str, float]:
    n = len(trajectories)
    return {
        "rollout/reward_mean": sum(t.reward for t in trajectories) / n,
        "rollout/success_rate": sum(t.success for t in trajectories) / n,
        "rollout/turns_mean": sum(t.num_turns for t in trajectories) / n,
        "rollout/truncated_fraction": sum(t.status == "truncated" for t in trajectories) / n,
        "rollout/agent_tokens_mean": sum(sum(t.loss_mask) for t in trajectories) / n,
        "rollout/staleness_max": float(_lag(trajectories, version)),
    }


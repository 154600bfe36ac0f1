"""Chaos: episodes through the RolloutScheduler with injected faults, checked for deadlocks, counts that do
not add up, trajectories lost or doubled, and resources left behind.

Two arms, each a RolloutScheduler with groups, a spare per group, retries and its own fault log
(:mod:`chaos_faults`: every episode draws one fault or none from its own seeded generator):

(a) ``lake``: FrozenLake with long-tailed step times (``perf/ChaosLake-v0``) played by the tiny model on
    the torch engine, read by a trainer-like consumer that publishes a new weight version every
    ``--batch-size`` kept trajectories (``max_staleness`` 1: stale trajectories are dropped);
(b) ``sandbox``: Shell on the ``local`` sandbox backend (``perf/ChaosShell-v0``), played by the
    oracle; here sandboxes also die mid-episode (killed from outside while a command runs).

With ``--carry-over`` the spares of a whole group pause and continue in a carry group of their task
(``rollout.carry_over``) instead of being cancelled; carry groups are checked as the tasks' own groups are.

Faults: an env step raises, hangs (on the loop, or blocked in a worker thread) past the turn limit, or
is slow but within it; a reset raises or hangs; a close raises; the policy raises at its start or at a
turn, or hangs. Hangs are bounded only by the scheduler's own timeouts (``--turn-timeout``,
``--episode-timeout``). Each arm runs under ``--deadline``: past it, the stacks of the tasks still
pending are recorded and the arm counts as a deadlock; a thread backstop reports a blocked event loop
the same way and exits. Checked per arm: ``RolloutMetrics`` adds up, and agrees with what the stream
delivered and with the groups closed; every episode the policy started is delivered once or counted
as discarded (dropped, cancelled); every struck fault ends as its error cause and nothing else does.
After everything is closed: asyncio tasks, threads, file descriptors, child processes and sandboxes
left, against a snapshot from before. Prints a summary, writes ``benchmarks/results/chaos.json``; the
last line is JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import agentgym
from agentgym import TaskSet, Timeouts
from agentgym.inference import SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.models import init_model
from agentgym.policies import OraclePolicy
from agentgym.policies.lm import LMPolicy
from agentgym.rollout import RolloutConfig, RolloutScheduler
from agentgym.sandboxes import local_sandbox
from agentgym.sandboxes.base import owner
from agentgym.trajectory import Trajectory
from benchmarks.perf.chaos_faults import EXPECTED_CAUSE, FAULTS, ChaosPolicy, FaultLog, FaultPlan, Latencies
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

LAKE_ID, SHELL_ID = "perf/ChaosLake-v0", "perf/ChaosShell-v0"
GOAL = {"deadlocks": 0, "crashes": 0, "lost": 0, "doubled": 0, "leaked": 0, "counts_add_up": True, "misclassified": 0,
        "loop_stalls": 0}
RATES = {"step_raises": 0.04, "step_hangs": 0.03, "step_blocks": 0.02, "step_slow": 0.05, "reset_raises": 0.03,
         "reset_hangs": 0.01, "close_raises": 0.03, "start_raises": 0.02, "act_raises": 0.04, "act_hangs": 0.03,
         "sandbox_dies": 0.1}
"""Default probability of each fault per episode (``sandbox_dies`` applies to the sandbox arm only)."""
TICK, STALL = 0.1, 1.0
"""The event loop's lag is sampled every ``TICK`` seconds; a lag over ``STALL`` seconds is a stall (the loop was
blocked, and every episode's timers with it)."""
BACKSTOP_GRACE = 60.0
"""Seconds past the arms' deadlines after which the thread backstop gives up on the event loop."""


@dataclass(frozen=True)
class ClosedGroup:
    """A group as the scheduler closed it: how many kept and errored trajectories it held then, and which carry
    group of its task it was (0: the task's own)."""

    index: int
    kept: int
    errors: int
    carry: int = 0


@dataclass
class Arm:
    """One scheduler run: which env and policy, its tasks and settings, and the fault log it fills."""

    name: str
    env_id: str
    policy: ChaosPolicy
    tasks: TaskSet
    config: RolloutConfig
    env_kwargs: dict[str, Any]
    log: FaultLog
    engine: TorchEngine | None = None
    """With an engine, the consumer publishes a new weight version every ``batch_size`` kept trajectories."""


# -- resources -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    """What this process holds: Python threads, open file descriptors, child processes, local sandboxes."""

    threads: frozenset[str]
    fds: frozenset[str]
    children: frozenset[int]
    sandboxes: frozenset[str]
    os_threads: int

    @classmethod
    def take(cls) -> Resources:
        me = owner()
        return cls(
            threads=frozenset(f"{t.name}#{t.ident}" for t in threading.enumerate()),
            fds=frozenset(_fds()),
            children=frozenset(_children()),
            sandboxes=frozenset(s for s in local_sandbox.live() if _read(local_sandbox.STATE_DIR / s / "owner") == me),
            os_threads=len(os.listdir("/proc/self/task")),
        )

    def left_since(self, before: Resources) -> dict[str, list[Any]]:
        """What is held now and was not before."""
        return {"threads": sorted(self.threads - before.threads), "fds": sorted(self.fds - before.fds),
                "processes": sorted(self.children - before.children),
                "sandboxes": sorted(self.sandboxes - before.sandboxes)}


def join_new_threads(before: Resources, seconds: float) -> None:
    """Give threads started since ``before`` up to ``seconds`` to end: a call stuck past its time limit
    holds its thread until it returns (at most ``Latencies.blocked`` here); one still alive is left behind."""
    deadline = time.monotonic() + seconds
    for thread in threading.enumerate():
        if f"{thread.name}#{thread.ident}" not in before.threads:
            thread.join(max(0.0, deadline - time.monotonic()))


def _fds() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(f"{fd}->{os.readlink(f'/proc/self/fd/{fd}')}")
        except OSError:  # the descriptor listdir itself used
            pass
    return found


def _children() -> list[int]:
    return [int(pid) for task in os.listdir("/proc/self/task")
            for pid in _read(Path(f"/proc/self/task/{task}/children")).split()]


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


# -- deadlines -------------------------------------------------------------------------------------


def task_stacks(tasks: set[asyncio.Task[Any]]) -> list[dict[str, Any]]:
    """Each task (its repr names what it waits for) and the chain of coroutines it is suspended in."""
    return [{"task": repr(task)[:500], "awaits": await_chain(task.get_coro())} for task in tasks]


def await_chain(coro: Any) -> list[str]:
    """``file:line in function`` of each coroutine (or generator) down the chain ``coro`` is awaiting."""
    chain = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None) or getattr(coro, "ag_frame", None)
        if frame is not None:
            chain.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None) or getattr(coro, "ag_await", None)
    return chain


async def within(coro: Coroutine[Any, Any, None], seconds: float) -> list[dict[str, Any]]:
    """Run ``coro``; past ``seconds``, record the stacks of every pending task, cancel it and return
    them (an empty list: it finished in time)."""
    loop, caller, runner = asyncio.get_running_loop(), asyncio.current_task(), asyncio.ensure_future(coro)
    stuck: list[dict[str, Any]] = []

    def expire() -> None:
        stuck.extend(task_stacks(asyncio.all_tasks(loop) - {caller}))
        runner.cancel()

    handle = loop.call_later(seconds, expire)
    try:
        await runner
    except asyncio.CancelledError:
        if not stuck:
            raise
    finally:
        handle.cancel()
    return stuck


class Backstop:
    """A timer thread for an event loop too blocked to notice its own deadline: it writes a report with
    every thread's stack to ``out``, prints it and ends the process (exit status 3)."""

    def __init__(self, seconds: float, out: Path) -> None:
        self.out = out
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.name = "chaos-backstop"
        self._timer.daemon = True

    def __enter__(self) -> Self:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._timer.join()

    def _fire(self) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        stacks = [{"thread": names.get(ident, str(ident)), "stack": "".join(traceback.format_stack(frame))[-3000:]}
                  for ident, frame in sys._current_frames().items() if ident != threading.get_ident()]
        report = {"benchmark": "chaos", "deadlocks": 1, "met": False, "blocked_loop": True, "stuck": stacks}
        write_result(report, self.out)
        os._exit(3)


async def watch_loop(lags: list[float]) -> None:
    """Every ``TICK`` seconds, note how late the event loop woke this task (its lag)."""
    loop = asyncio.get_running_loop()
    while True:
        before = loop.time()
        await asyncio.sleep(TICK)
        lags.append(loop.time() - before - TICK)


# -- one arm ---------------------------------------------------------------------------------------


async def run_arm(arm: Arm, deadline: float) -> dict[str, Any]:
    """Play the arm's tasks under its faults and check what came out."""
    closed: list[ClosedGroup] = []
    scheduler = RolloutScheduler(
        arm.env_id, arm.policy, arm.config, env_kwargs=arm.env_kwargs, engine=arm.engine,
        on_group=lambda group: closed.append(ClosedGroup(group.index, len(group.kept), len(group.errors), group.carry)),
    )
    delivered: list[Trajectory] = []
    crash = None

    async def consume() -> None:
        kept = 0
        async for trajectory in scheduler.stream:
            delivered.append(trajectory)
            kept += trajectory.status != "error"
            if arm.engine is not None and trajectory.status != "error" and kept % arm.config.batch_size == 0:
                await arm.engine.update_weights(arm.engine.model.state_dict())
                scheduler.notify()

    async def rollout() -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(consume())
            await scheduler.run(arm.tasks)

    lags: list[float] = []
    watch = asyncio.create_task(watch_loop(lags))

    started = time.perf_counter()
    print(f"{arm.name}: {len(arm.tasks)} groups of {arm.config.group_size}", file=sys.stderr, flush=True)
    try:
        stuck = await within(rollout(), deadline)
    except Exception as exc:  # noqa: BLE001 - the rollout itself failed: reported, the next arm still runs
        stuck, crash = [], "".join(traceback.format_exception(exc))[-4000:]
    wall = time.perf_counter() - started
    watch.cancel()
    await asyncio.gather(watch, return_exceptions=True)
    tasks_left = task_stacks(asyncio.all_tasks() - {asyncio.current_task()})
    report = {"wall_seconds": round(wall, 2), "deadlock": bool(stuck), "stuck": stuck, "crash": crash,
              "loop_lag_max_seconds": round(max(lags, default=0.0), 3),
              "loop_stalls": sum(lag > STALL for lag in lags),
              "asyncio_tasks_left": tasks_left, "metrics": scheduler.metrics.model_dump(),
              **audit(arm, scheduler, delivered, closed)}
    m = scheduler.metrics
    print(f"{arm.name}: {m.started} started, {m.finished} kept, {m.errored} errors, {m.dropped} dropped, "
          f"{m.cancelled} cancelled, {m.retried} retried in {wall:.1f} s", file=sys.stderr, flush=True)
    print(f"{arm.name}: " + ", ".join(f"{key} {report[key]}" for key in ("deadlock", "loop_stalls", "lost", "doubled",
                                                                         "misclassified", "counts_add_up")),
          file=sys.stderr, flush=True)
    return report


def audit(arm: Arm, scheduler: RolloutScheduler, delivered: list[Trajectory],
          closed: list[ClosedGroup]) -> dict[str, Any]:
    """Counts against counts, episodes against episodes, faults against error causes."""
    m, log = scheduler.metrics, arm.log
    kept = [t for t in delivered if t.status != "error"]
    causes = Counter(str(t.info.get("error_cause")) for t in delivered if t.status == "error")
    seen = Counter(episode_of(t) for t in delivered)
    unaccounted = len(log.started) - len(seen) - m.dropped - m.cancelled
    complete = [g for g in closed if g.kept >= arm.config.group_size]
    checks = {
        "metrics_accounted": m.accounted,
        "started_equals_policy_starts": m.started == len(log.started),
        "stream_kept_equals_finished": len(kept) == m.finished,
        "stream_errors_equal_errored": len(delivered) - len(kept) == m.errored,
        "stream_error_causes_equal_metrics": dict(causes) == m.error_causes,
        "every_group_closed_once": sorted(g.index for g in closed if not g.carry) == list(range(len(arm.tasks)))
        and len({(g.index, g.carry) for g in closed if g.carry}) == m.carry_groups,
        "groups_complete_plus_failed": m.groups_complete + m.groups_failed == len(arm.tasks) + m.carry_groups,
        "complete_groups_hold_group_size": len(complete) == m.groups_complete
        and all(g.kept == arm.config.group_size for g in complete),
        "members_at_group_close_equal_stream": sum(g.kept for g in closed) == m.finished
        and sum(g.errors for g in closed) == m.errored,
        "close_errors_counted": m.close_errors == log.closes_raised,
    }
    wrong = misclassified(delivered, log)
    return {
        "counts_add_up": all(checks.values()),
        "checks": checks,
        "episodes_started": len(log.started),
        "episodes_delivered": len(seen),
        "lost": max(0, unaccounted),
        "miscounted_discards": max(0, -unaccounted),
        "doubled": sum(n - 1 for n in seen.values() if n > 1),
        "unknown_episodes": sum(n for episode, n in seen.items() if episode not in log.started),
        "misclassified": len(wrong),
        "misclassified_examples": wrong[:10],
        "faults": log.counts(),
        "error_causes": dict(sorted(causes.items())),
    }


def episode_of(trajectory: Trajectory) -> int | None:
    """The chaos episode a delivered trajectory belongs to: from its session's record, or for an episode
    whose policy never started, from the injected failure's message."""
    if "chaos" in trajectory.info:
        return trajectory.info["chaos"]["episode"]
    text = trajectory.error or ""
    head = text.partition("episode ")[2].partition(":")[0]
    return int(head) if head.isdigit() else None


def misclassified(delivered: list[Trajectory], log: FaultLog) -> list[dict[str, Any]]:
    """Delivered trajectories whose status or error cause is not what their struck fault (or its
    absence) calls for."""
    wrong = []
    for trajectory in delivered:
        episode = episode_of(trajectory)
        kind = log.struck.get(episode)
        expected = EXPECTED_CAUSE[kind]
        cause = trajectory.info.get("error_cause") if trajectory.status == "error" else None
        if (expected is None) != (cause is None) or (expected is not None and not str(cause).startswith(expected)):
            wrong.append({"episode": episode, "fault": kind, "status": trajectory.status, "cause": cause,
                          "error": trajectory.error})
    return wrong


# -- the run ---------------------------------------------------------------------------------------


def rates_for(args: argparse.Namespace, *, sandbox: bool) -> dict[str, float]:
    return {kind: rate for kind, rate in args.rates.items() if sandbox or kind != "sandbox_dies"}


def config_for(args: argparse.Namespace, concurrency: int, group_size: int, **extra: Any) -> RolloutConfig:
    timeouts = Timeouts(episode=args.episode_timeout, turn=args.turn_timeout, tool=args.tool_timeout)
    return RolloutConfig(concurrency=concurrency, group_size=group_size, redundancy=args.redundancy,
                         max_retries=args.max_retries, seed=args.seed, timeouts=timeouts,
                         carry_over=args.carry_over, **extra)


def latencies(args: argparse.Namespace) -> Latencies:
    return Latencies(slow=args.turn_timeout / 4, blocked=args.turn_timeout + 2.0)


async def play(args: argparse.Namespace, model_dir: Path) -> dict[str, dict[str, Any]]:
    """Run the arms one after the other on this loop."""
    reports = {}
    if args.episodes:
        engine = TorchEngine(model_dir, seed=args.seed, max_batch_size=args.concurrency, threads=1)
        try:
            log = FaultLog()
            policy = LMPolicy(engine, SamplingParams(temperature=1.0, max_tokens=args.max_tokens))
            arm = Arm("lake", LAKE_ID, ChaosPolicy(policy, FaultPlan(rates_for(args, sandbox=False), args.turns), log),
                      TaskSet.generate(LAKE_ID, args.episodes // args.group_size),
                      config_for(args, args.concurrency, args.group_size, max_staleness=1, batch_size=args.batch_size),
                      {"max_turns": args.turns, "median": 0.01, "tail": 20.0, "latencies": latencies(args)}, log, engine)
            reports["lake"] = await run_arm(arm, args.deadline)
        finally:
            await engine.close()
    if args.sandbox_episodes:
        log = FaultLog()
        plan = FaultPlan(rates_for(args, sandbox=True), 2)
        arm = Arm("sandbox", SHELL_ID, ChaosPolicy(OraclePolicy(), plan, log),
                  TaskSet.generate(SHELL_ID, args.sandbox_episodes // 2, difficulties=("easy", "medium")),
                  config_for(args, args.sandbox_concurrency, 2), {"latencies": latencies(args)}, log)
        reports["sandbox"] = await run_arm(arm, args.deadline)
    return reports


def main(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="agentgym-chaos-") as scratch:
        model_dir = init_model(Path(scratch) / "tiny", "tiny", seed=0) if args.episodes else Path(scratch)
        before = Resources.take()  # after building the model, whose tokenizer training leaves native threads
        with Backstop(2 * args.deadline + BACKSTOP_GRACE, args.out):
            arms = asyncio.run(play(args, model_dir))
    join_new_threads(before, latencies(args).blocked + 1.0)
    after = Resources.take()
    left = after.left_since(before)
    left["asyncio_tasks"] = [t for arm in arms.values() for t in arm["asyncio_tasks_left"]]
    totals = {
        "deadlocks": sum(arm["deadlock"] for arm in arms.values()),
        "crashes": sum(arm["crash"] is not None for arm in arms.values()),
        "lost": sum(arm["lost"] for arm in arms.values()),
        "doubled": sum(arm["doubled"] + arm["unknown_episodes"] + arm["miscounted_discards"] for arm in arms.values()),
        "leaked": sum(len(v) for v in left.values()),
        "counts_add_up": all(arm["counts_add_up"] for arm in arms.values()),
        "misclassified": sum(arm["misclassified"] for arm in arms.values()),
        "loop_stalls": sum(arm["loop_stalls"] for arm in arms.values()),
    }
    return {
        "benchmark": "chaos",
        **totals,
        "episodes_started": sum(arm["episodes_started"] for arm in arms.values()),
        "goal": GOAL,
        "met": totals == GOAL,
        "left_after_close": left,
        "os_threads": {"before": before.os_threads, "after": after.os_threads},
        "arms": arms,
        "parameters": {k: v for k, v in vars(args).items() if k not in ("out", "model")},
        "machine": machine("torch", "agentgym", load_average=load_average()),
    }


def parse_rates(text: str) -> dict[str, float]:
    """``kind=rate,...`` over the defaults."""
    rates = dict(RATES)
    for item in filter(None, text.split(",")):
        kind, _, rate = item.partition("=")
        if kind not in FAULTS:
            raise argparse.ArgumentTypeError(f"unknown fault {kind!r}; choose from: {', '.join(FAULTS)}")
        rates[kind] = float(rate)
    return rates


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 lake and 40 sandbox episodes (about 2 minutes).")
    parser.add_argument("--episodes", type=int, help="Lake episodes kept when nothing fails (groups x size); default 1000.")
    parser.add_argument("--sandbox-episodes", type=int,
                        help="Sandbox episodes (groups of 2); default 200; 0 skips the arm.")
    parser.add_argument("--seed", type=int, default=0, help="Seeds the faults and the policy's sampling.")
    parser.add_argument("--rates", type=parse_rates, default=dict(RATES),
                        help=f"Fault probabilities per episode as kind=rate,... over the defaults {RATES}.")
    parser.add_argument("--concurrency", type=int, default=64, help="Lake episodes in flight.")
    parser.add_argument("--sandbox-concurrency", type=int, default=16, help="Sandbox episodes in flight.")
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--redundancy", type=int, default=1, help="Spare episodes started per group.")
    parser.add_argument("--max-retries", type=int, default=2)
    parser.add_argument("--carry-over", action="store_true",
                        help="Pause the spares of a whole group and carry them into a carry group (rollout.carry_over).")
    parser.add_argument("--batch-size", type=int, default=8, help="Kept lake trajectories per weight version.")
    parser.add_argument("--turns", type=int, default=3, help="Turns of a lake episode.")
    parser.add_argument("--max-tokens", type=int, default=12, help="Tokens per answer of the model.")
    parser.add_argument("--turn-timeout", type=float, default=6.0,
                        help="The scheduler's turn limit; slow steps take a quarter of it, blocked ones 2 s more.")
    parser.add_argument("--tool-timeout", type=float, default=5.0)
    parser.add_argument("--episode-timeout", type=float, default=30.0)
    parser.add_argument("--deadline", type=float, default=600.0, help="Seconds an arm may run before it counts as a deadlock.")
    parser.add_argument("--out", type=Path, default=RESULTS / "chaos.json")
    args = parser.parse_args()
    quick = {"episodes": 200, "sandbox_episodes": 40} if args.quick else {"episodes": 1000, "sandbox_episodes": 200}
    for name, value in quick.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


if __name__ == "__main__":
    arguments = parse_args()
    agentgym.register(LAKE_ID, "benchmarks.perf.chaos_faults:ChaosLake")
    agentgym.register(SHELL_ID, "benchmarks.perf.chaos_faults:ChaosShell")
    result = main(arguments)
    print(f"deadlocks {result['deadlocks']}, crashes {result['crashes']}, loop stalls {result['loop_stalls']}, lost {result['lost']}, doubled "
          f"{result['doubled']}, leaked {result['leaked']}, counts add up {result['counts_add_up']}, misclassified "
          f"{result['misclassified']} over {result['episodes_started']} episodes (goal: 0 deadlocks, 0 lost, 0 leaked)")
    write_result(result, arguments.out)

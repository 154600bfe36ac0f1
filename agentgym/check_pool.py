"""Checking many environments at once (``agentgym check``): each check runs in a worker process, as many at once
as asked, and of those that run a Chromium or sandboxes beside their worker, no more than the memory holds.

Processes, not threads: a check is synchronous and mostly Python, so threads would take turns on the GIL;
Gymnasium's checker records warnings through process-wide state; adapted games seed Python's global ``random``
(TextArena), which two checks at once in one process would draw from in turn and so fail determinism; and an
environment that takes its process down takes only its worker with it.

A worker keeps its Chromium between checks (starting one, with its spare contexts, was 15% of a MiniWoB++ check's
CPU); each environment still gets fresh browser contexts. Workers end with the command: interrupted (Ctrl-C, SIGTERM),
:func:`check_envs` stops each worker, which unwinds its check and so closes the environment's sandboxes and the
browser; and a worker whose parent died gets SIGTERM from the kernel and does the same (:mod:`agentgym.lifetime`).
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.util
import os
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from agentgym import sync_loop
from agentgym.checker import chosen_checks, run_checks
from agentgym.errors import EnvCheckError
from agentgym.lifetime import run_in_worker, worker_init
from agentgym.loop_shared import close_idle, keep_idle
from agentgym.registration import EnvSpec, make

HEAVY_TAGS = ("browser", "sandbox")
"""Tags of environments whose check runs a Chromium or sandboxes (containers, a desktop in one) beside its worker."""
HEAVY_CHECK_BYTES = 1 << 30
"""The memory one check of a :data:`HEAVY_TAGS` environment may take with what it runs (a Chromium and its
Playwright driver take about 0.5 GiB)."""
KEPT_BETWEEN_CHECKS = "chromium"
"""The key under which the web and GUI environments share their Chromium (:mod:`agentgym.loop_shared`)."""
STOP_GRACE = 20.0
"""Seconds a worker told to stop has to close its environment before it is killed."""


@dataclass(frozen=True)
class CheckOutcome:
    """One environment's checks as its worker reports them, in plain values whatever the environment raised."""

    env_id: str
    seconds: float
    """From making the environment to closing it."""
    passed: tuple[str, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    """Checks that do not apply, and why."""
    failures: tuple[str, ...] = ()
    """One line per distinct reason, naming the checks that failed for it; or why the environment could not be
    made, checked or closed."""

    @property
    def ok(self) -> bool:
        return not self.failures


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def heavy_limits(concurrency: int) -> dict[str, int]:
    """How many checks of each :data:`HEAVY_TAGS` tag may run at once beside ``concurrency`` checks in all: as
    many as the memory available holds (:data:`HEAVY_CHECK_BYTES` each), at least one."""
    fits = concurrency if (available := available_memory()) is None else available // HEAVY_CHECK_BYTES
    return {tag: max(1, min(concurrency, fits)) for tag in HEAVY_TAGS}


def available_memory() -> int | None:
    """Bytes of memory available to start more processes (Linux's ``MemAvailable``); ``None`` where unknown."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def failure_lines(failures: Sequence[EnvCheckError]) -> list[str]:
    """One line per distinct reason, naming the checks that failed for it (a missing engine fails them all)."""
    checks: dict[str, list[str]] = {}
    for failure in failures:
        checks.setdefault(failure.reason, []).append(failure.check)
    return [f"[{', '.join(names)}] {reason}" for reason, names in checks.items()]


def check_one(env_spec: EnvSpec, episodes: int, only: Collection[str] | None = None) -> CheckOutcome:
    """Make ``env_spec``'s environment, run the checks (those named in ``only``) on it and close it (what a
    worker runs)."""
    started = time.perf_counter()
    try:
        env = make(env_spec)
        try:
            report = run_checks(env, episodes=episodes, only=only)
        finally:
            env.close()
    except Exception as exc:  # noqa: BLE001 - it cannot be made or closed here (no browser or engine; a bug)
        return CheckOutcome(env_spec.id, time.perf_counter() - started, failures=(f"{type(exc).__name__}: {exc}",))
    return CheckOutcome(env_spec.id, time.perf_counter() - started, passed=tuple(name for name, _ in report.passed),
                        skipped=tuple(report.skipped), failures=tuple(failure_lines(report.failed)))


_keeping = False
"""Whether this process keeps its Chromium between checks (it is a check worker)."""


def check_in_worker(env_spec: EnvSpec, episodes: int, only: Collection[str] | None = None) -> CheckOutcome:
    """:func:`check_one` in a pool worker, which keeps its Chromium from one check to the next and closes it as it
    exits: at the end of the pool, or stopped by a signal once the check has unwound."""
    global _keeping
    if not _keeping:
        _keeping = True
        keep_idle(KEPT_BETWEEN_CHECKS)
        multiprocessing.util.Finalize(None, _close_kept, exitpriority=0)
    try:
        return check_one(env_spec, episodes, only)
    except SystemExit:
        _close_kept()
        raise


def _close_kept() -> None:
    sync_loop.run(close_idle())


def check_envs(specs: Sequence[EnvSpec], *, episodes: int, concurrency: int, only: Collection[str] | None = None,
               limits: Mapping[str, int] | None = None,
               on_outcome: Callable[[CheckOutcome], None] | None = None) -> list[CheckOutcome]:
    """Check every spec's environment in worker processes (the checks named in ``only``, or all): at most
    ``concurrency`` at once, and at most ``limits[tag]`` of those that have ``tag`` (by default
    :func:`heavy_limits`); call ``on_outcome`` here as each finishes. Return the outcomes in the order of
    ``specs``.

    A worker that dies takes down the checks running beside it: those run again, each on its own, and one whose
    worker dies on its own fails with that reason. Workers are started with ``spawn``, which imports the main
    module again: a script that calls this runs it under ``if __name__ == "__main__":``."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    chosen_checks(only)  # an unknown check is refused here, not once per worker
    limits = heavy_limits(concurrency) if limits is None else limits
    outcomes: dict[int, CheckOutcome] = {}
    waiting = list(range(len(specs)))
    alone: set[int] = set()
    """Checks that were running when a worker died: each runs again with nothing beside it."""
    running: dict[Future[CheckOutcome], int] = {}
    workers = min(concurrency, len(specs))
    pool = _pool(workers)
    try:
        while waiting or running:
            for index in _startable(specs, waiting, list(running.values()), alone, concurrency, limits):
                waiting.remove(index)
                running[pool.submit(run_in_worker, check_in_worker, specs[index], episodes, only)] = index
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            if any(isinstance(future.exception(), BrokenProcessPool) for future in done):
                done, _ = wait(running)  # the pool fails every check it was running: take them all, start afresh
                pool.shutdown(wait=True)
                pool = _pool(workers)
            again = []
            for future in sorted(done, key=running.__getitem__):
                index = running.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool as exc:
                    if index not in alone:
                        again.append(index)
                        continue
                    outcome = CheckOutcome(specs[index].id, 0.0, failures=(f"its worker process died: {exc}",))
                outcomes[index] = outcome
                if on_outcome is not None:
                    on_outcome(outcome)
            alone.update(again)
            waiting[:0] = again
    except BaseException:  # interrupted, or on_outcome failed: the checks running end now, not when they finish
        _stop(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [outcomes[index] for index in range(len(specs))]


def _startable(specs: Sequence[EnvSpec], waiting: list[int], running: list[int], alone: set[int], concurrency: int,
               limits: Mapping[str, int]) -> list[int]:
    """Which waiting checks may start now beside the ``running`` ones, in their order: any that the bounds allow,
    and one of ``alone`` only when nothing runs (nothing then starts beside it)."""
    started = list(running)
    chosen: list[int] = []
    for index in waiting:
        if len(started) >= concurrency or any(i in alone for i in started):
            break
        if index in alone and started:
            continue
        in_use = {tag: sum(tag in specs[i].tags for i in started) for tag in limits}
        if all(in_use[tag] < limit for tag, limit in limits.items() if tag in specs[index].tags):
            started.append(index)
            chosen.append(index)
    return chosen


def _pool(workers: int) -> ProcessPoolExecutor:
    """Worker processes started fresh (``spawn``): this process already runs threads, which ``fork`` would copy
    in whatever state they are; each ends when this process does (:func:`~agentgym.lifetime.worker_init`)."""
    return ProcessPoolExecutor(max_workers=max(1, workers), mp_context=multiprocessing.get_context("spawn"),
                               initializer=worker_init, initargs=(os.getpid(),))


def _stop(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now: each gets SIGTERM, unwinds the check it runs (closing its environment) and
    exits; one still there after :data:`STOP_GRACE` is killed."""
    # as ProcessPoolExecutor.terminate_workers (Python 3.14) finds them; none once the pool was shut down
    workers = list((pool._processes or {}).values())
    for worker in workers:
        worker.terminate()
    deadline = time.monotonic() + STOP_GRACE
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            worker.kill()
            worker.join()

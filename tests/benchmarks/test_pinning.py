"""``benchmarks/perf/pinning.py``: the trainer's thread on one core, every other thread of the process on the other."""

from __future__ import annotations

import os
import threading

import pytest

from benchmarks.perf.pinning import pinned

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two cores")


def test_the_calling_thread_gets_the_trainer_core_and_others_the_rollout_core_until_the_end():
    everywhere = os.sched_getaffinity(0)
    seen: dict[str, set[int]] = {}
    started, checked = threading.Event(), threading.Event()

    def rollout_thread() -> None:
        started.set()
        checked.wait(10)
        seen["later"] = os.sched_getaffinity(0)

    with pinned(rollout=0, trainer=1, every=0.05) as cores:
        thread = threading.Thread(target=rollout_thread)
        thread.start()
        started.wait(10)
        for _ in range(100):  # the watcher pins a new thread within one round
            if os.sched_getaffinity(thread.native_id) == {0}:
                break
            threading.Event().wait(0.05)
        seen["main"] = os.sched_getaffinity(0)
        checked.set()
        thread.join()
    assert cores == {"rollout": [0], "trainer": [1]}
    assert seen == {"main": {1}, "later": {0}}
    assert os.sched_getaffinity(0) == everywhere

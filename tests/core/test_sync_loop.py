"""The synchronous API's event loop: every ``inline`` environment's on one loop (so what environments share per loop
is shared by them all), any other's on a loop of its own; an interrupt cancels the call it stops; a sync call made
from the shared loop itself does not wait for itself."""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from typing import Any

import pytest

from agentgym import Env, Message, tool
from agentgym.loop_shared import LoopShared
from tests.signals import interruptible
from tests.waiting import until


class Held:
    """An object environments share per event loop, counting how many were made."""

    made = 0

    def __init__(self) -> None:
        Held.made += 1

    async def close(self) -> None:
        return None


SHARED: LoopShared[Held] = LoopShared(Held.close)


class LoopEnv(Env):
    """Records the loop its setup ran on and takes the loop's shared :class:`Held`, as a browser environment does."""

    execution = "inline"

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.loop = asyncio.get_running_loop()
        self.held = SHARED.retain("held", Held)
        return [Message(role="user", content="go")]

    @tool
    async def other(self) -> str:
        """Reset a second environment of this kind with the synchronous API, from inside this call."""
        inner = LoopEnv()
        try:
            inner.reset(seed=0)
            return "same loop" if inner.loop is self.loop else "another loop"
        finally:
            inner.close()

    def close(self) -> None:
        if getattr(self, "held", None) is not None:
            self._run_sync(SHARED.release(self.held))
            self.held = None
        super().close()


class ThreadedLoopEnv(LoopEnv):
    execution = "thread"


class Stuck(LoopEnv):
    """A setup that waits until it is cancelled, saying that it unwound."""

    started = threading.Event()
    unwound = threading.Event()

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        Stuck.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            Stuck.unwound.set()
        return []


def test_inline_environments_share_one_loop_and_what_is_held_on_it():
    made = Held.made
    first, second = LoopEnv(), LoopEnv()
    try:
        first.reset(seed=0)
        second.reset(seed=1)
        assert first.loop is second.loop and first.held is second.held
        assert Held.made == made + 1
    finally:
        first.close()
        second.close()


def test_an_environment_that_runs_hooks_in_threads_keeps_a_loop_of_its_own():
    first, second = ThreadedLoopEnv(), ThreadedLoopEnv()
    try:
        first.reset(seed=0)
        second.reset(seed=1)
        assert first.loop is not second.loop and first.held is not second.held
    finally:
        first.close()
        second.close()


def waiting_on_a_result(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked waiting for a future's result."""
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None and frame.f_code.co_name != "result":
        frame = frame.f_back
    return frame is not None


def test_an_interrupted_call_is_cancelled_and_unwinds_before_the_interrupt_is_raised():
    env = Stuck()
    main = threading.main_thread()

    def interrupt() -> None:
        until(lambda: Stuck.started.is_set() and waiting_on_a_result(main), "the call waits for its coroutine")
        signal.pthread_kill(main.ident or 0, signal.SIGINT)  # Ctrl-C

    interrupter = threading.Thread(target=interrupt)
    interrupter.start()
    try:
        with interruptible(), pytest.raises(KeyboardInterrupt):
            env.reset(seed=0)
        assert Stuck.unwound.is_set()
    finally:
        interrupter.join()
        env.close()


def test_a_sync_call_from_inside_the_shared_loop_runs_on_a_loop_of_its_own():
    env = LoopEnv()
    try:
        env.reset(seed=0)
        observation, *_ = env.step(env.format_call("other"))
        assert observation[0].content == "another loop"
    finally:
        env.close()

"""Environments and policies that misbehave on purpose, for the rollout's fault-injection tests."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import numpy as np

from agentgym import Env, Message, tool
from agentgym.policies import TextPolicy

_ECHO_WORKER = "import sys\nfor i, line in enumerate(sys.stdin):\n    if i == int(sys.argv[1]): sys.exit(1)\n    print(line.strip()[::-1], flush=True)\n"


class FlakyEnv(Env):
    """Reverse three words through a worker process. By seed: ``% 5 == 1`` the tool raises,
    ``% 5 == 2`` it hangs, ``% 5 == 3`` the worker process dies after the first word; others are healthy."""

    execution = "inline"
    default_max_turns = 5

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.kind = self.np_random_seed % 5
        self.words = 0
        self._stop_worker()
        self.worker = subprocess.Popen(
            [sys.executable, "-c", _ECHO_WORKER, "1" if self.kind == 3 else "99"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        return [Message(role="user", content="Reverse three words with `reverse`.")]

    @tool
    async def reverse(self, word: str) -> str:
        """Reverse a word in the worker process.

        Args:
            word: One word.
        """
        if self.kind == 1 and self.words == 1:
            raise RuntimeError("the tool's backend refused the connection")
        if self.kind == 2 and self.words == 1:
            await asyncio.sleep(3600)
        self.worker.stdin.write(word + "\n")
        self.worker.stdin.flush()
        reply = await asyncio.to_thread(self.worker.stdout.readline)
        if not reply:
            raise ConnectionError(f"the worker process died (exit code {self.worker.wait()})")
        self.words += 1
        if self.words == 3:
            self.finish(success=True)
        return reply.strip()

    def oracle_action(self) -> str:
        return self.format_call("reverse", word=f"word{self.words}")

    def close(self) -> None:
        self._stop_worker()
        super().close()

    def _stop_worker(self) -> None:
        worker = getattr(self, "worker", None)
        if worker is not None:
            if worker.poll() is None:
                worker.kill()
            worker.wait()
            worker.stdin.close()
            worker.stdout.close()
            self.worker = None


class SlowOracle(TextPolicy):
    """The oracle, thinking for a random while (so episodes finish out of order)."""

    name = "slow-oracle"

    def __init__(self, scale: float = 0.02) -> None:
        self.scale = scale

    async def act(self, env: Env, messages, rng: np.random.Generator) -> str:
        await asyncio.sleep(float(rng.exponential(self.scale)))
        return env.oracle_action()


class VersionClock:
    """A policy version the test bumps by hand, as a trainer's weight updates would."""

    version = 0


class VersionedPolicy(TextPolicy):
    """Adds 1 a turn on ``test/Counter-v0``, stamping the current version on a pseudo-token per turn like a
    model-backed session, and thinking :meth:`pace` seconds a turn."""

    name = "versioned"

    def __init__(self, clock: VersionClock) -> None:
        self.clock = clock

    def pace(self, env: Env) -> float:
        """Seconds each turn of an episode takes, decided at its first turn (after its reset)."""
        return 0.05

    def start(self, env, rng):
        session = super().start(env, rng)
        stamps: list[int] = []
        pace: list[float] = []
        act, policy = session.act, self

        async def stamped(observation):
            if not pace:
                pace.append(policy.pace(env))
            stamps.append(policy.clock.version)
            await asyncio.sleep(pace[0])
            return await act(observation)

        def record(trajectory):
            trajectory.token_ids, trajectory.loss_mask = [0] * len(stamps), [1] * len(stamps)
            trajectory.logprobs, trajectory.versions = [0.0] * len(stamps), list(stamps)

        session.act, session.record = stamped, record
        return session

    async def act(self, env, messages, rng) -> str:
        return env.format_call("add", amount=1)

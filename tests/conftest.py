"""Shared fixtures: a small scripted environment that exercises every part of the base class, the tiny model,
a Docker engine with agentgym's images, and the skip of browser tests where there is no Chromium."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

import agentgym
from agentgym import Env, Message, ToolError, tool


class CounterEnv(Env):
    """Count up to a target with `add`; `boom` raises an infrastructure error; `wait` is async."""

    difficulties = ("easy", "hard")
    default_max_turns = 6

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.total = 0
        self.target = int(self.np_random.integers(3, 9)) * (10 if difficulty == "hard" else 1)
        return [Message(role="user", content=f"Reach exactly {self.target}.")]

    @tool
    def add(self, amount: int) -> str:
        """Add an amount to the running total.

        Args:
            amount: A number from 1 to 100.
        """
        if not 1 <= amount <= 100:
            raise ToolError("amount must be between 1 and 100")
        self.total += amount
        if self.total == self.target:
            self.finish(success=True)
        elif self.total > self.target:
            self.finish(success=False)
        return f"total = {self.total}"

    @tool
    async def wait(self, seconds: float = 0.0) -> str:
        """Wait a little, at most 50 ms (an async tool)."""
        await asyncio.sleep(min(max(seconds, 0.0), 0.05))
        return "waited"

    @tool
    def boom(self) -> str:
        """Fail like a crashed container."""
        raise RuntimeError("container died")

    def oracle_action(self) -> str:
        step = min(100, self.target - self.total)
        return self.format_call("add", amount=step)


class ToolCrashes(CounterEnv):
    """A CounterEnv whose oracle calls `boom`: an environment with a bug, for the checker."""

    def oracle_action(self) -> str:
        return self.format_call("boom")


@pytest.fixture
def counter_env():
    env = CounterEnv()
    yield env
    env.close()


@pytest.fixture
def registered_counter():
    """CounterEnv registered as test/Counter-v0 for the duration of a test."""
    spec = agentgym.register("test/Counter-v0", "tests.conftest:CounterEnv", tags=("test",))
    yield spec
    from agentgym import registration

    registration._registry.pop(spec.id, None)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A folder holding the tiny Qwen2 model, its tokenizer and chat template (``agentgym model init``),
    built once per test session; load it with ``AutoModelForCausalLM``/``AutoTokenizer.from_pretrained``."""
    from agentgym.models import init_model

    return init_model(tmp_path_factory.mktemp("tiny-model"), "tiny", seed=0)


@pytest.fixture(autouse=True)
def chromium(request: pytest.FixtureRequest) -> None:
    """Tests marked ``browser`` skip, naming the install step, where Chromium or Playwright is missing."""
    if request.node.get_closest_marker("browser") is None:
        return
    from agentgym.envs.web.browser import BrowserUnavailable, chromium_path

    try:
        chromium_path()
        import playwright  # noqa: F401 - imported only to see that Playwright is installed
    except (BrowserUnavailable, ImportError) as exc:
        pytest.skip(str(exc))


@contextlib.contextmanager
def docker_with_images() -> Iterator[Any]:
    """A Docker engine that answers, with agentgym's images built: started here when none runs (and stopped on
    leaving), the test skipped with the reason when there is none to start or an image is not built. Nothing
    is built here: a first build takes minutes, longer than a test may, so ``scripts/test.sh`` builds the
    images before the tests (``scripts/build_sandbox_images.py``, or ``agentgym sandbox build``)."""
    from agentgym.sandboxes import SandboxUnavailable
    from agentgym.sandboxes.docker_engine import ensure_engine
    from agentgym.sandboxes.images import image_names, image_tag

    try:
        engine = ensure_engine()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    try:
        try:
            for name in image_names():
                image_tag(name)
        except SandboxUnavailable as exc:
            pytest.skip(str(exc))
        yield engine
    finally:
        engine.stop()


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request: pytest.FixtureRequest) -> str:
    """Each sandbox backend in turn, skipped with the reason where its prerequisites are missing (the Docker
    engine comes from the module's ``docker_engine``)."""
    request.getfixturevalue("docker_engine" if request.param == "docker" else "local")
    return request.param


@pytest.fixture(scope="module")
def local() -> None:
    """Skips, naming the reason, where the ``local`` sandbox backend cannot run (no bubblewrap, not root)."""
    from agentgym.sandboxes import SandboxUnavailable, backend_module

    try:
        backend_module("local").check()
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def docker_engine() -> Iterator[Any]:
    """:func:`docker_with_images` for a module's tests: an engine started here stops after them, so whether
    ``backend="auto"`` picks docker elsewhere never depends on the order the tests ran in."""
    with docker_with_images() as engine:
        yield engine

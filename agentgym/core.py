"""The environment API: a Gymnasium environment for multi-turn, tool-calling text agents.

Observations are the chat messages the environment adds to the conversation (the task at reset,
tool results and error notes after each step); the action is the model's text. The environment
parses tool calls out of that text, validates their arguments against the tools' schemas, runs
them, and answers anything it cannot run with an error observation instead of an exception.

A subclass writes three things: :meth:`Env.setup` (draw an episode from ``self.np_random`` and return
its opening messages), its tools (methods decorated with :func:`agentgym.tool`, which end the episode
through :meth:`Env.finish`), and :meth:`Env.oracle_action` (the next action of a perfect player). The
reset options ``setup`` reads besides the difficulty are declared in :attr:`Env.reset_options`; the base
class refuses any other.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import io
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any, ClassVar, Literal, TypeVar

import gymnasium
import numpy as np

from agentgym import sync_loop
from agentgym.errors import EpisodeTimeout, ResetNeeded, ToolError
from agentgym.messages import ContentPart, Message, ToolCall
from agentgym.parsers import ToolCallParser, get_parser
from agentgym.seeding import pick
from agentgym.spaces import Messages, Utterance
from agentgym.tools import ToolSpec, sample_arguments, tools_of

T = TypeVar("T")
_is_async = cache(inspect.iscoroutinefunction)
"""Whether a function is a coroutine function, remembered per function (asked on every tool call)."""
Execution = Literal["inline", "thread", "pinned"]
Forkable = Literal["native", "replay", "no"]
StepResult = tuple[list[Message], float, bool, bool, dict[str, Any]]


@dataclass
class _Outcome:
    """What running one action produced."""

    messages: list[Message] = field(default_factory=list)
    action_errors: list[str] = field(default_factory=list)
    call_errors: list[str] = field(default_factory=list)
    calls: list[ToolCall] = field(default_factory=list)


class Env(gymnasium.Env[list[Message], str]):
    """A multi-turn text environment with tools; Gymnasium-shaped, async first.

    ``reset(*, seed, options) -> (messages, info)`` and ``step(text) -> (messages, reward, terminated,
    truncated, info)``, with ``areset``/``astep`` for the asynchronous rollout. ``options`` may name a
    ``difficulty`` and the options the environment declares in :attr:`reset_options`.
    ``info["action_error"]`` says what in the action could not be run (``None`` when all of it ran),
    ``info["tool_calls"]`` the calls read from it (each answered by the tool message with the same id),
    ``info["success"]`` whether the task is solved, ``info["turn"]`` the turn number; an environment that grades the
    episode may add ``info["report"]`` (a dict: what it graded and how), which the episode keeps in the trajectory's
    ``info`` and the viewer shows (a ``diff``, tests' outcomes by set).
    ``terminated`` means the task ended (solved or failed); ``truncated`` means the turn limit was hit.
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 1}  # noqa: RUF012 - Gymnasium's attribute
    difficulties: ClassVar[tuple[str, ...]] = ("default",)
    """The difficulty levels this environment can generate, easiest first."""
    execution: ClassVar[Execution] = "thread"
    """How synchronous hooks run under ``astep``: ``inline`` on the event loop (only for fast, pure
    Python steps), ``thread`` in the default thread pool, or ``pinned`` on one thread per instance
    (for libraries that must stay on the thread that created them). Async hooks always run on the loop."""
    max_tool_calls: ClassVar[int | None] = None
    """The most tool calls run in one turn (the rest are refused with an error); ``None``: no limit."""
    default_max_turns: ClassVar[int] = 20
    """The turn limit when neither the constructor nor :meth:`turn_limit` says otherwise."""
    reset_options: ClassVar[frozenset[str] | None] = frozenset()
    """The reset options :meth:`setup` reads besides ``difficulty`` (which the base class reads); :meth:`reset`
    refuses any other by name. ``None``: every option goes to :meth:`setup` unchecked (an adapter passing
    them on to the environment it wraps)."""
    forkable: ClassVar[Forkable] = "replay"
    """How an episode is forked mid-way, a child starting in the parent's state after some turn (tree rollouts,
    :func:`agentgym.fork_episode`): ``native``: :meth:`fork` copies the live environment; ``replay``: a fresh one
    replays the parent's seed and actions, each observation checked against the parent's, which is sound because
    the same seed and actions give the same observations (the contract :func:`agentgym.check_env` checks; what
    the agent never saw, such as a file's time in a sandbox, may still differ, as on any re-run); ``no``: neither
    gives the parent's state, and :attr:`unforkable_reason` says why."""
    unforkable_reason: ClassVar[str] = ""
    """Why an environment declaring ``forkable = "no"`` cannot be forked; the refusal quotes it."""

    def __init__(
        self,
        *,
        difficulty: str | None = None,
        parser: str | ToolCallParser = "hermes",
        max_turns: int | None = None,
        max_action_chars: int = 32_768,
        render_mode: str | None = None,
    ) -> None:
        """``difficulty`` is the default for resets; ``parser`` the tool-call format (``hermes`` or
        ``pythonic``); ``max_turns`` overrides the environment's turn limit; longer actions than
        ``max_action_chars`` are refused unread."""
        if difficulty is not None:
            self._check_difficulty(difficulty)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        self.difficulty = difficulty or self.difficulties[0]
        self.parser = get_parser(parser)
        self.max_turns = max_turns
        self.max_action_chars = max_action_chars
        self.render_mode = render_mode
        self.observation_space = Messages()
        self.action_space = Utterance(max_length=max_action_chars)
        self._tools = tools_of(type(self))  # type: ignore[arg-type]  # classes hash; mypy checks Env's own __hash__
        self._tool_specs = tuple(spec for _, spec in self._tools.values())
        self._started = False
        self._over = False
        self._success = False
        self._turn = 0
        self._turn_limit = self.default_max_turns
        self._pending_reward = 0.0
        self._last_messages: list[Message] = []
        self._runner: asyncio.Runner | None = None
        self._pinned: ThreadPoolExecutor | None = None
        self._in_sync_call = False
        self.tool_timeout: float | None = None
        """Seconds one tool call may take before it fails as infrastructure (:class:`EpisodeTimeout`);
        set by the rollout from its nested timeouts. ``None``: no limit."""

    # -- what a subclass writes ------------------------------------------------------------------

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        """Start an episode drawn from ``self.np_random``; return its opening messages (may be async)."""
        raise NotImplementedError(f"{type(self).__name__} must implement setup()")

    def oracle_action(self) -> str:
        """The text a perfect player sends next, using the same tools and format as an agent."""
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def turn_limit(self, difficulty: str) -> int:
        """The number of turns an episode of this difficulty may last."""
        return self.default_max_turns

    def render_text(self) -> str:
        """A text picture of the current state; by default the last observation."""
        return "\n".join(m.text for m in self._last_messages)

    # -- what tools call --------------------------------------------------------------------------

    def finish(self, *, success: bool, reward: float | None = None) -> None:
        """End the episode after this turn; ``reward`` defaults to 1 for success and 0 otherwise."""
        self._over = True
        self._success = success
        self._pending_reward += float(success) if reward is None else reward

    def add_reward(self, reward: float) -> None:
        """Add a (shaping or partial) reward to this turn's reward."""
        self._pending_reward += reward

    # -- the Gymnasium API ------------------------------------------------------------------------

    @property
    def tools(self) -> list[ToolSpec]:
        """The tools an agent can call here."""
        return list(self._tool_specs)

    @property
    def turn(self) -> int:
        """How many turns of the current episode have been played."""
        return self._turn

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list[Message], dict[str, Any]]:
        """Start an episode; the same ``seed`` and ``options`` always give the same episode."""
        return self._run_sync(self.areset(seed=seed, options=options))

    def step(self, action: str) -> StepResult:
        """Run the tool calls in ``action`` and return what the agent sees next."""
        return self._run_sync(self.astep(action))

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list[Message], dict[str, Any]]:
        """Asynchronous :meth:`reset`."""
        super().reset(seed=seed)
        options = dict(options or {})
        difficulty = options.pop("difficulty", None) or self.difficulty
        self._check_difficulty(difficulty)
        self._check_options(options)
        self._started, self._over, self._success = False, False, False
        self._turn, self._pending_reward = 0, 0.0
        self._turn_limit = self.max_turns or self.turn_limit(difficulty)
        messages = list(await self._call(self.setup, difficulty, options))
        self._started = True
        self._last_messages = messages
        info = {"difficulty": difficulty, "max_turns": self._turn_limit, "tools": [t.name for t in self.tools]}
        return list(messages), info

    async def astep(self, action: str) -> StepResult:
        """Asynchronous :meth:`step`."""
        if not self._started or self._over:
            raise ResetNeeded("call reset() before step(); the last episode has ended" if self._started else "call reset() before step()")
        if not isinstance(action, str):
            raise TypeError(f"an action is the model's text (str), got {type(action).__name__}")
        self._turn += 1
        outcome = await self._run_action(action)
        messages = outcome.messages
        if outcome.action_errors:
            messages.append(Message(role="user", content="Error: " + "\n".join(outcome.action_errors)))
        reward, self._pending_reward = self._pending_reward, 0.0
        terminated = self._over
        truncated = not terminated and self._turn >= self._turn_limit
        self._over = terminated or truncated
        self._last_messages = messages
        info = {
            "turn": self._turn,
            "action_error": "; ".join(outcome.call_errors + outcome.action_errors) or None,
            "tool_calls": outcome.calls,
            "success": self._success,
        }
        return list(messages), reward, terminated, truncated, info

    def fork(self) -> Env:
        """A new environment in this one's exact state (episode, turn, random generator) that steps on its own;
        by default a deep copy of everything but the event loop and threads (the copy makes its own), for a
        ``forkable = "native"`` environment whose state is plain Python."""
        if self.forkable != "native":
            raise NotImplementedError(f"{type(self).__name__} declares forkable={self.forkable!r}, not 'native'")
        not_copied: dict[int, Any] = {id(self._runner): None, id(self._pinned): None}  # deepcopy's memo: these become None
        return copy.deepcopy(self, not_copied)

    def format_call(self, name: str, **arguments: Any) -> str:
        """The text of one tool call in this environment's format (what an oracle sends)."""
        return self.parser.format([ToolCall(id="call_0", name=name, arguments=arguments)])

    def random_action(self, rng: np.random.Generator) -> str:
        """A well-formed call of a random tool with random arguments (a baseline policy's move)."""
        name = pick(rng, list(self._tools))
        return self.format_call(name, **sample_arguments(self._tools[name][1], rng))

    def example_call(self) -> str:
        """A sample call of the first tool, written in this environment's tool-call format."""
        name, (_, spec) = next(iter(self._tools.items()))
        return self.format_call(name, **sample_arguments(spec))

    def render_frame(self) -> bytes | None:
        """The screen as a PNG, for environments with ``rgb_array`` among their render modes (web and GUI
        environments); ``None`` before the first observation and for text-only environments."""
        return None

    def render(self) -> str | np.ndarray | None:
        """The state as text when ``render_mode="ansi"``, as an RGB array (height x width x 3) when
        ``render_mode="rgb_array"``; nothing otherwise."""
        if self.render_mode == "ansi":
            return self.render_text()
        frame = self.render_frame() if self.render_mode == "rgb_array" else None
        if frame is None:
            return None
        from PIL import Image

        return np.asarray(Image.open(io.BytesIO(frame)).convert("RGB"))

    def close(self) -> None:
        """Release the event loop and threads this environment holds; safe to call twice. A call still
        running on the environment's own thread (one that outlived its time limit) is not waited for,
        as the rollout closes on its event loop: the thread ends when the call returns."""
        if self._runner is not None:
            _beside_any_loop(self._runner.close)
            self._runner = None
        if self._pinned is not None:
            self._pinned.shutdown(wait=False, cancel_futures=True)
            self._pinned = None

    async def aclose(self) -> None:
        """Asynchronous :meth:`close`, which the rollout awaits: an environment holding asynchronous
        resources (a sandbox, a browser) releases them here. By default it runs :meth:`close`."""
        self.close()

    # -- plumbing ---------------------------------------------------------------------------------

    async def _run_action(self, action: str) -> _Outcome:
        """Run the calls in ``action``: one tool message per call, and every error met."""
        outcome = _Outcome()
        if len(action) > self.max_action_chars:
            outcome.action_errors.append(f"the message is too long ({len(action)} characters, at most {self.max_action_chars})")
            return outcome
        parsed = self.parser.parse(action, self._tool_specs)
        outcome.action_errors.extend(parsed.errors)
        calls = parsed.calls
        if self.max_tool_calls is not None and len(calls) > self.max_tool_calls:
            skipped = len(calls) - self.max_tool_calls
            outcome.action_errors.append(f"only {self.max_tool_calls} tool call(s) per turn; the other {skipped} did not run")
            calls = calls[: self.max_tool_calls]
        if not calls and not outcome.action_errors:
            example = f", for example:\n{self.example_call()}" if self._tools else " (this environment has none)"
            outcome.action_errors.append(f"no tool call found. Call a tool{example}")
        for index, call in enumerate(calls):
            if self._over:
                outcome.action_errors.append(f"the episode ended before {call.name} could run")
                break
            call = ToolCall(id=f"call_{self._turn}_{index}", name=call.name, arguments=call.arguments)
            content, error = await self._invoke(call)
            if error is not None:
                outcome.call_errors.append(error)
            outcome.calls.append(call)
            outcome.messages.append(Message(role="tool", content=content, tool_call_id=call.id, name=call.name))
        return outcome

    async def _invoke(self, call: ToolCall) -> tuple[str | list[ContentPart], str | None]:
        """Run one call: its result, and the agent's mistake if it could not run."""
        entry = self._tools.get(call.name)
        if entry is None:
            error = f"unknown tool {call.name!r}; the tools are: {', '.join(self._tools)}"
            return f"Error: {error}", error
        method, spec = entry
        try:
            arguments = spec.validate_arguments(call.arguments)
            result = await self._run_tool(call.name, getattr(self, method), arguments)
        except ToolError as exc:
            return f"Error: {exc}", str(exc)
        if not isinstance(result, (str, list)):
            raise TypeError(f"tool {call.name} must return str or a list of content parts, got {type(result).__name__}")
        return result, None

    async def _run_tool(self, name: str, fn: Callable[..., Any], arguments: dict[str, Any]) -> Any:
        """Run a tool within :attr:`tool_timeout`; a synchronous tool run on the loop cannot be
        interrupted, so it runs without a timer."""
        if self._runs_inline(fn):
            return fn(**arguments)
        deadline = asyncio.timeout(self.tool_timeout)
        try:
            async with deadline:
                return await self._call(fn, **arguments)
        except TimeoutError:
            if deadline.expired():
                raise EpisodeTimeout("tool", self.tool_timeout or 0.0, f"tool call {name}") from None
            raise

    async def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a hook or tool the way :attr:`execution` says."""
        if inspect.iscoroutinefunction(fn):
            return await fn(*args, **kwargs)
        if self.execution == "pinned":
            if self._pinned is None:
                self._pinned = ThreadPoolExecutor(max_workers=1, thread_name_prefix=type(self).__name__)
            return await asyncio.get_running_loop().run_in_executor(self._pinned, partial(fn, *args, **kwargs))
        if self.execution == "inline" or self._in_sync_call:
            return fn(*args, **kwargs)
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _runs_inline(self, fn: Callable[..., Any]) -> bool:
        """Whether :meth:`_call` would run ``fn`` synchronously on the calling thread."""
        if self.execution == "pinned" or not (self.execution == "inline" or self._in_sync_call):
            return False
        return not _is_async(getattr(fn, "__func__", fn))

    def _run_sync(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Drive a coroutine to completion for the synchronous API, also from inside a running loop: an ``inline``
        environment's on the loop all of them share (:mod:`agentgym.sync_loop`), any other's on a loop of its
        own, so that a hook blocking its thread holds up no other environment."""
        self._in_sync_call = True
        try:
            if self.execution == "inline" and not sync_loop.on_it():
                return sync_loop.run(coroutine)
            runner = self._runner = self._runner or asyncio.Runner()
            return _beside_any_loop(lambda: runner.run(coroutine))
        finally:
            self._in_sync_call = False

    def _check_options(self, options: dict[str, Any]) -> None:
        """Refuse, by name, the reset options that :attr:`reset_options` does not declare."""
        accepted = self.reset_options
        unknown = [] if accepted is None else sorted(str(name) for name in options if name not in accepted)
        if unknown:
            takes = ", ".join(["difficulty", *sorted(accepted)]) if accepted else "none besides difficulty"
            raise ValueError(f"unknown reset options for {type(self).__name__}: {', '.join(unknown)}; it takes {takes}")

    def _check_difficulty(self, difficulty: str) -> None:
        if difficulty not in self.difficulties:
            raise ValueError(f"unknown difficulty {difficulty!r}; choose one of: {', '.join(self.difficulties)}")


def _beside_any_loop(function: Callable[[], T]) -> T:
    """``function()`` on this thread, or on a thread of its own when an event loop runs on this one (which
    would refuse to start or close another loop)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return function()
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(function).result()

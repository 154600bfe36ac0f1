"""Any Gymnasium environment with discrete actions as a text environment: ``make("gymnasium:Taxi-v4")``.

The agent calls one tool, ``act``, whose ``action`` argument is an enum of the action's names (Gymnasium's
documented names for the toy-text classics, ``get_action_meanings()`` where the environment has it, else the
action numbers). What it sees is the environment's ``ansi`` rendering, with the colour that marks where things
stand turned into brackets (``[S]FFF``, or the marks an environment's legend names), or the observation's value where there is no text rendering
(Blackjack's ``(20, 7, 0)``, with the fields named). Rewards, termination and truncation are Gymnasium's; an
episode is a success when it terminates with a positive last reward (FrozenLake, Blackjack) or, for tasks that
pay only costs on the way, when it terminates at all (Taxi, CliffWalking). For an environment with a transition
table (``env.unwrapped.P``: FrozenLake, Taxi, CliffWalking) the oracle plays the optimal policy by value
iteration.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

import gymnasium
import numpy as np
from gymnasium.envs.registration import load_env_creator

from agentgym.core import Env
from agentgym.errors import UnknownEnvError
from agentgym.messages import Message
from agentgym.registration import ADAPTED, EnvSpec, register
from agentgym.tools import ToolSpec, tool

GYMNASIUM = "gymnasium"
"""The family (and ``make`` prefix) under which Gymnasium's own environments are played."""
Success = Literal["positive_reward", "terminated"]
DEFAULT_TURNS = 100
"""The turn limit of an environment whose Gymnasium spec sets no ``max_episode_steps``."""
_HIGHLIGHT = re.compile(r"\x1b\[([\d;]*)m([^\x1b]*)\x1b\[0m")
"""A coloured span with no colour inside it (spans nest: Taxi colours the taxi on the passenger's stop twice)."""


@dataclass(frozen=True)
class Profile:
    """What Gymnasium's documentation says of an environment and its spaces do not: the actions' names, how
    to read the picture, and what counts as solving it."""

    actions: tuple[str, ...] = ()
    legend: str = ""
    success: Success = "positive_reward"
    marks: dict[str, tuple[str, str]] = field(default_factory=dict)
    """What encloses a span of each ANSI colour code (``"43"``: yellow background); any other colour: ``[ ]``."""
    fields: tuple[str, ...] = ()
    """Names of a tuple observation's parts, for environments without a text rendering."""


PROFILES: dict[str, Profile] = {
    "FrozenLake": Profile(
        ("left", "down", "right", "up"),
        "S is the start, F frozen ice, H a hole, G the goal; [ ] marks where you are. Reach G without "
        "falling into a hole.",
    ),
    "Taxi": Profile(
        ("south", "north", "east", "west", "pickup", "dropoff"),
        "A taxi drives in a 5x5 town (| is a wall; north is up). R, G, Y and B are stops: the passenger waits "
        "at the one in * *, and wants to go to the one in < >. [ ] is the taxi, { } the taxi with the passenger "
        "aboard. Pick the passenger up and drop them at their destination: every move costs a point, a pickup "
        "or dropoff in the wrong place ten.",
        success="terminated",
        marks={"43": ("[", "]"), "42": ("{", "}"), "34;1": ("*", "*"), "35": ("<", ">")},
    ),
    "CliffWalking": Profile(
        ("up", "right", "down", "left"),
        "x is you, o safe ground, C the cliff, T the target. Walk to T; stepping onto the cliff sends you back "
        "to the start and costs 100 points, every move costs one.",
        success="terminated",
    ),
    "Blackjack": Profile(
        ("stick", "hit"),
        "Blackjack against the dealer: hit to draw a card, stick to stop. Get closer to 21 than the dealer "
        "without going over.",
        fields=("your sum", "dealer's card", "usable ace"),
    ),
}


class GymnasiumEnv(Env):
    """A Gymnasium environment with a ``Discrete`` action space, played through one ``act`` tool."""

    execution = "inline"
    max_tool_calls = 1
    forkable = "replay"
    """The wrapped environment is reset with a seed drawn from ``self.np_random``; any Gymnasium id can be wrapped,
    and not every one deep-copies, so a child replays."""
    reset_options = None
    """Reset options besides ``difficulty`` go to the wrapped environment's ``reset``, which judges them."""

    def __init__(self, gym_id: str, gym_kwargs: dict[str, Any] | None = None,
                 success: Success | None = None, **kwargs: Any) -> None:
        """``gym_id`` is a Gymnasium id (``Taxi-v4``), ``gym_kwargs`` its ``gymnasium.make`` arguments;
        ``success`` overrides when an episode counts as solved."""
        super().__init__(**kwargs)
        creator = load_env_creator(gymnasium.spec(gym_id).entry_point)
        text = "ansi" in getattr(creator, "metadata", {}).get("render_modes", ())
        self.gym = gymnasium.make(gym_id, render_mode="ansi" if text else None, **(gym_kwargs or {}))
        if not isinstance(self.gym.action_space, gymnasium.spaces.Discrete):
            self.gym.close()
            raise ValueError(  # noqa: TRY004 - the id is what is wrong: it names a game that text cannot play
                f"{gym_id} has a {self.gym.action_space} action space; only Discrete ones can be "
                "played as text")
        self.gym_id = gym_id
        self.profile = PROFILES.get(gym_id.split("/")[-1].rsplit("-v", 1)[0], Profile())
        self.success_rule: Success = success or self.profile.success
        self.action_names = self._action_names()
        self._text = text
        self._observation: Any = None
        self._plan: np.ndarray | None = None
        spec = _act_spec(self.action_names)
        self._tools = {"act": ("act", spec)}
        self._tool_specs = (spec,)

    def turn_limit(self, difficulty: str) -> int:
        """Gymnasium's ``max_episode_steps``, else :data:`DEFAULT_TURNS`."""
        return (self.gym.spec and self.gym.spec.max_episode_steps) or DEFAULT_TURNS

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self._observation, _ = self.gym.reset(seed=int(self.np_random.integers(2**31)), options=options or None)
        system = (f"You play Gymnasium's {self.gym_id}. {self.profile.legend}".rstrip() +
                  f"\nEach turn, call the act tool once with one of: {', '.join(self.action_names)}.")
        return [Message(role="system", content=system), Message(role="user", content=self.render_text())]

    @tool
    def act(self, action: str) -> str:
        """Take one action in the environment.

        Args:
            action: The action's name.
        """
        index = self.action_names.index(action) + self.gym.action_space.start
        self._observation, reward, terminated, truncated, _ = self.gym.step(index)
        reward = float(reward)
        if terminated:
            solved = reward > 0 if self.success_rule == "positive_reward" else True
            self.finish(success=solved, reward=reward)
        else:
            self.add_reward(reward)
        ending = " The episode is over." if terminated or truncated else ""
        return f"You chose {action}. Reward: {reward:g}.{ending}\n{self.render_text()}"

    def render_text(self) -> str:
        """The ``ansi`` rendering with highlights in brackets, or the named observation."""
        if self._text:
            picture, marked = self.gym.render(), ""
            while marked != picture:
                marked, picture = picture, _HIGHLIGHT.sub(self._mark, picture)
            return picture.strip("\n")
        observation = self._observation
        if self.profile.fields and isinstance(observation, tuple):
            return ". ".join(f"{name.capitalize()}: {value}" for name, value in zip(self.profile.fields, observation,
                                                                                    strict=True)) + "."
        return f"Observation: {observation}"

    def oracle_action(self) -> str:
        return self.format_call("act", action=self.action_names[self._best_action()])

    def close(self) -> None:
        self.gym.close()
        super().close()

    def _mark(self, span: re.Match[str]) -> str:
        left, right = self.profile.marks.get(span[1], ("[", "]"))
        return f"{left}{span[2]}{right}"

    def _action_names(self) -> tuple[str, ...]:
        count = int(self.gym.action_space.n)
        names = self.profile.actions
        if len(names) != count:
            meanings = getattr(self.gym.unwrapped, "get_action_meanings", None)
            names = tuple(str(m).lower() for m in meanings()) if meanings else ()
        if len(names) != count or len(set(names)) != count:
            names = tuple(str(self.gym.action_space.start + i) for i in range(count))
        return names

    def _best_action(self) -> int:
        """The optimal action in the current state, by value iteration over the transition table."""
        table = getattr(self.gym.unwrapped, "P", None)
        if table is None or not isinstance(self._observation, (int, np.integer)):
            raise NotImplementedError(f"{self.gym_id} has no transition table to plan on, so no oracle")
        if self._plan is None:
            self._plan = _optimal_actions(table)
        return int(self._plan[int(self._observation)])


CLASSICS = ("Blackjack-v1", "CliffWalking-v1", "FrozenLake-v1", "FrozenLake8x8-v1", "Taxi-v4")
"""Gymnasium's toy-text classics, listed by ``agentgym list``; any other id with a Discrete action space is
registered when it is first asked for."""


def register_gymnasium_classics() -> None:
    """Register :data:`CLASSICS` as ``gymnasium/<id>``."""
    for gym_id in CLASSICS:
        register_gymnasium(gym_id)


def register_gymnasium(gym_id: str) -> EnvSpec:
    """Register Gymnasium's ``gym_id`` as ``gymnasium/<gym_id>``; unknown or deprecated ids are refused with
    Gymnasium's own reason."""
    try:
        gym_spec = gymnasium.spec(gym_id)
    except gymnasium.error.Error as exc:
        raise UnknownEnvError(f"no Gymnasium environment {gym_id!r}: {exc}") from None
    return register(
        f"{GYMNASIUM}/{gym_id}",
        f"{GymnasiumEnv.__module__}:{GymnasiumEnv.__name__}",
        kwargs={"gym_id": gym_id},
        tags=(GYMNASIUM, ADAPTED, "multi-turn"),
        description=f"Gymnasium's {gym_id} ({gym_spec.entry_point}), played through one act tool.",
    )


def _act_spec(names: tuple[str, ...]) -> ToolSpec:
    """``act``'s spec with the action names as the enum of its argument."""

    def act(action: str) -> str:
        """Take one action in the environment.

        Args:
            action: The action's name.
        """
        return action

    act.__annotations__ = {"action": Literal[names], "return": str}
    return ToolSpec.from_function(act)


def _optimal_actions(table: dict[int, dict[int, list[tuple[float, int, float, bool]]]],
                     gamma: float = 0.99, tolerance: float = 1e-6) -> np.ndarray:
    """The greedy action of each state under the optimal values of ``P[state][action] = [(p, next, r, done)]``."""
    rows = [(s, a, p, nxt, r, done) for s, by_action in table.items() for a, outcomes in by_action.items()
            for p, nxt, r, done in outcomes]
    state, action, prob, nxt, reward, done = (np.array(column) for column in zip(*rows, strict=True))
    shape = (len(table), len(table[0]))
    values = np.zeros(shape[0])
    while True:
        q = np.zeros(shape)
        np.add.at(q, (state, action), prob * (reward + gamma * np.where(done, 0.0, values[nxt])))
        best = q.max(axis=1)
        if np.abs(best - values).max() < tolerance:
            return q.argmax(axis=1)
        values = best

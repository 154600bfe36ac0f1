"""Reset options: the base class refuses, by name, every option an environment does not declare."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentgym import Env, Message, tool


class Declares(Env):
    """Reads a ``level`` option and records what reached ``setup``."""

    difficulties = ("easy", "hard")
    reset_options = frozenset({"level"})

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.seen = (difficulty, options)
        return [Message(role="user", content=f"level {options.get('level', 0)}")]

    @tool
    def noop(self) -> str:
        """Do nothing."""
        return "ok"


class DeclaresNone(Declares):
    reset_options = frozenset()


class PassesAll(Declares):
    reset_options = None


def test_an_env_that_declares_options_gets_them_and_the_difficulty_apart():
    env = Declares()
    observation, info = env.reset(seed=0, options={"level": 3, "difficulty": "hard"})
    assert observation[0].text == "level 3" and info["difficulty"] == "hard"
    assert env.seen == ("hard", {"level": 3})


def test_an_env_refuses_options_it_does_not_declare_naming_them_and_what_it_takes():
    env = Declares()
    with pytest.raises(ValueError, match=r"unknown reset options for Declares: colour, size; it takes difficulty, level"):
        env.reset(seed=0, options={"size": 2, "level": 1, "colour": "red"})
    with pytest.raises(ValueError, match="unknown reset options for Declares: colour"):
        asyncio.run(env.areset(seed=0, options={"colour": "red"}))


def test_an_env_that_declares_none_refuses_any_but_the_difficulty():
    env = DeclaresNone()
    env.reset(seed=0, options={"difficulty": "easy"})
    with pytest.raises(ValueError, match="unknown reset options for DeclaresNone: level; it takes none besides difficulty"):
        env.reset(seed=0, options={"level": 1})


def test_an_env_that_passes_options_on_gets_every_one_unchecked():
    env = PassesAll()
    env.reset(seed=0, options={"anything": 1, "difficulty": "easy"})
    assert env.seen == ("easy", {"anything": 1})

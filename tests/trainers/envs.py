"""Test envs an untrained model can learn on: whatever it writes is an action, and the reward is graded."""

from __future__ import annotations

from typing import Any

import agentgym
from agentgym import Env, Message, tool
from tests.whole_text import WholeText

VOWELS_ID = "tests.trainers.envs:test/Vowels-v0"
"""The id with its module, so a fresh process (``agentgym train`` in a subprocess) imports and registers it."""


class VowelsEnv(Env):
    """Two turns of ``say``; each pays the share of the text's characters that are vowels (/2), so a
    policy learns by writing vowel-heavy tokens."""

    execution = "inline"
    default_max_turns = 2

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(parser=WholeText(), **kwargs)

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content=f"Say something with vowels about {int(self.np_random.integers(100))}.")]

    @tool
    def say(self, text: str) -> str:
        """Say something.

        Args:
            text: Anything at all.
        """
        share = sum(c in "aeiou" for c in text) / max(len(text), 1)
        self.add_reward(share / 2)
        return f"{share:.0%} vowels."


agentgym.register("test/Vowels-v0", "tests.trainers.envs:VowelsEnv", tags=("test",))


LEVELS_ID = "tests.trainers.envs:test/Levels-v0"


class LevelsEnv(Env):
    """One turn of ``say`` whose success depends on the level: always on easy, never on hard, and on medium
    when the text starts with a vowel. Easy and hard groups have equal rewards; medium ones mostly do not."""

    execution = "inline"
    difficulties = ("easy", "medium", "hard")
    default_max_turns = 1

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(parser=WholeText(), **kwargs)

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.level = difficulty
        return [Message(role="user", content=f"A {difficulty} level. Say something.")]

    @tool
    def say(self, text: str) -> str:
        """Say something.

        Args:
            text: Anything at all.
        """
        vowel_first = text.strip().lower().startswith(tuple("aeiou"))
        self.finish(success={"easy": True, "hard": False}.get(self.level, vowel_first))
        return "Done."


agentgym.register("test/Levels-v0", "tests.trainers.envs:LevelsEnv", tags=("test",))

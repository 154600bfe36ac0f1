"""Gymnasium spaces for text agents: observations are chat messages, actions are free text."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from agentgym.messages import Message

_SAMPLE_ALPHABET = np.array(list("abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789(){}[]<>\"'=,.:_-\n€é漢"))


class Utterance(spaces.Space[str]):
    """Any string of at most ``max_length`` characters: what a language model may answer."""

    def __init__(self, max_length: int = 32_768, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_length = max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random text of up to 64 characters mixing letters, brackets, quotes and non-ASCII."""
        length = int(self.np_random.integers(0, min(64, self.max_length) + 1))
        return "".join(self.np_random.choice(_SAMPLE_ALPHABET, size=length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"Utterance(max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Utterance) and other.max_length == self.max_length


class Messages(spaces.Space[list[Message]]):
    """A list of chat messages: what an environment adds to the conversation at reset or step."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self._text = Utterance(max_length=64)

    def seed(self, seed: int | None = None) -> int | list[int] | dict[str, int]:
        self._text.seed(None if seed is None else seed + 1)
        return super().seed(seed)

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        """One or two random user messages."""
        count = int(self.np_random.integers(1, 3))
        return [Message(role="user", content=self._text.sample()) for _ in range(count)]

    def contains(self, x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(m, Message) for m in x)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "Messages()"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Messages)

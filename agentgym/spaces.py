"""Gymnasium spaces for text agents: observations are chat messages, actions are free text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from copy import deepcopy
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import utils as vector_utils

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


# -- Gymnasium's vector environments ---------------------------------------------------------------
# Registered the way Gymnasium registers ``Text`` and ``Graph``: a batch of n messages lists or n
# utterances is an n-tuple, and the batched space a ``Tuple`` of copies. ``iterate`` needs nothing:
# Gymnasium iterates a ``Tuple`` of unregistered subspaces as a plain tuple, which is a batch's form.
# Observations have no fixed size, so ``AsyncVectorEnv`` needs ``shared_memory=False``.


@vector_utils.batch_space.register(Messages)
@vector_utils.batch_space.register(Utterance)
def _batch_space(space: Messages | Utterance, n: int = 1) -> spaces.Tuple[Any]:
    """``n`` independent copies, seeded from ``space``'s generator like Gymnasium's ``Text``."""
    batched = spaces.Tuple(tuple(deepcopy(space) for _ in range(n)), seed=deepcopy(space.np_random))
    batched.seed([int(s) for s in deepcopy(space.np_random).integers(0, 10**8, n)])
    return batched


@vector_utils.batch_differing_spaces.register(Messages)
@vector_utils.batch_differing_spaces.register(Utterance)
def _batch_differing_spaces(batch: Sequence[Messages | Utterance]) -> spaces.Tuple[Any]:  # type: ignore[misc]  # Gymnasium dispatches on the first space's type
    return spaces.Tuple([deepcopy(space) for space in batch], seed=deepcopy(batch[0].np_random))


@vector_utils.concatenate.register(Messages)
@vector_utils.concatenate.register(Utterance)
def _concatenate(space: Messages | Utterance, items: Iterable[Any], out: Any) -> tuple[Any, ...]:
    return tuple(items)


@vector_utils.create_empty_array.register(Messages)
def _empty_messages(space: Messages, n: int = 1, fn: Callable[..., Any] = np.zeros) -> tuple[list[Message], ...]:
    return tuple([] for _ in range(n))


@vector_utils.create_empty_array.register(Utterance)
def _empty_utterances(space: Utterance, n: int = 1, fn: Callable[..., Any] = np.zeros) -> tuple[str, ...]:
    return ("",) * n

"""Play a game's moves and read each view: shared by the games' text-view tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import agentgym


def views_after_moves(env_id: str, seed: int, difficulty: str, moves: list[str]) -> Iterator[tuple[Any, str]]:
    """The described env and its view at reset, then after each move until the episode ends."""
    env = agentgym.make(env_id, describe=True)
    try:
        observation, _ = env.reset(seed=seed, options={"difficulty": difficulty})
        yield env, observation[-1].text
        for move in moves:
            observation, _, terminated, _, _ = env.step(env.format_call("move", direction=move))
            if terminated:
                return
            yield env, observation[-1].text
    finally:
        env.close()

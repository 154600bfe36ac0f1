"""A success-window curriculum: each environment's mix of difficulty levels moves, step by step, toward the
levels whose recent success rate lies in a target band (hard enough to teach, easy enough to succeed at).

Every level keeps a window of its latest episodes' successes. After each step, a level is a target when its
window is in the band, or has fewer than ``min_episodes`` (not measured yet); with no target the level
nearest the band is. The mix moves ``rate`` of the way toward an even spread over the targets, and no level
falls below ``floor``, so every level keeps being measured.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from agentgym.config import Config


class CurriculumConfig(Config):
    """``curriculum: success_window`` (these defaults), or the same as a mapping with settings changed."""

    name: Literal["success_window"] = "success_window"
    """The curriculum (one so far)."""
    window: int = Field(64, ge=1)
    """Latest episodes remembered per environment and level."""
    band: tuple[float, float] = (0.2, 0.8)
    """The success rates a level should have to be trained on most."""
    rate: float = Field(0.25, gt=0, le=1)
    """How far the mix moves toward the target levels after each step."""
    floor: float = Field(0.05, ge=0)
    """The least share of any level (so its success keeps being measured)."""
    min_episodes: int = Field(8, ge=1)
    """Episodes a level needs in its window before its success counts."""

    @model_validator(mode="after")
    def _sane(self) -> CurriculumConfig:
        low, high = self.band
        if not 0 <= low <= high <= 1:
            raise ValueError(f"band must be two rates with 0 <= low <= high <= 1, got {list(self.band)}")
        return self


def level_name(level: str | None) -> str:
    """A level's name in metrics and state (``default`` for the environment's default)."""
    return "default" if level is None else level


class SuccessWindow:
    """The curriculum's state: per environment, the mix over its levels and each level's recent successes."""

    def __init__(self, config: CurriculumConfig, levels: dict[str, Sequence[str | None]]) -> None:
        self.config = config
        self.levels = {env: list(names) for env, names in levels.items()}
        self.mix = {env: [1 / len(names)] * len(names) for env, names in self.levels.items()}
        self.recent = {env: [deque[bool](maxlen=config.window) for _ in names] for env, names in self.levels.items()}
        self.seen = dict.fromkeys(self.levels, 0)
        """Episodes observed per environment over the whole run."""

    def draw(self, env: str, rng: np.random.Generator) -> str | None:
        """A level of ``env`` drawn from its current mix."""
        return self.levels[env][int(rng.choice(len(self.levels[env]), p=self.mix[env]))]

    def observe(self, env: str, level: str | None, successes: Iterable[bool]) -> None:
        """Remember the outcomes of episodes of ``env`` at ``level``."""
        outcomes = list(successes)
        self.recent[env][self.levels[env].index(level)].extend(outcomes)
        self.seen[env] += len(outcomes)

    def update(self) -> None:
        """Move every environment's mix one step toward its target levels."""
        c = self.config
        for env, windows in self.recent.items():
            rates = [sum(w) / len(w) if len(w) >= c.min_episodes else None for w in windows]
            target = np.array([r is None or c.band[0] <= r <= c.band[1] for r in rates], dtype=float)
            if not target.any():
                gaps = [max(c.band[0] - r, r - c.band[1]) for r in rates if r is not None]
                target[int(np.argmin(gaps))] = 1.0
            mix = (1 - c.rate) * np.array(self.mix[env]) + c.rate * target / target.sum()
            floor = min(c.floor, 1 / len(mix))
            mix = np.maximum(mix, floor)
            self.mix[env] = [float(m) for m in mix / mix.sum()]

    def metrics(self) -> dict[str, float]:
        """``curriculum/<env>/share_<level>`` and ``curriculum/<env>/success_<level>`` (once measured)."""
        values: dict[str, float] = {}
        for env, names in self.levels.items():
            for name, share, window in zip(names, self.mix[env], self.recent[env], strict=True):
                values[f"curriculum/{env}/share_{level_name(name)}"] = share
                if len(window) >= self.config.min_episodes:
                    values[f"curriculum/{env}/success_{level_name(name)}"] = sum(window) / len(window)
            values[f"curriculum/{env}/episodes_seen"] = self.seen[env]
        return values

    def state(self) -> dict[str, Any]:
        return {"mix": self.mix, "recent": {env: [list(w) for w in ws] for env, ws in self.recent.items()},
                "seen": self.seen}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take up a saved state (the same environments and levels)."""
        self.mix = {env: list(state["mix"][env]) for env in self.levels}
        self.recent = {env: [deque(w, maxlen=self.config.window) for w in state["recent"][env]] for env in self.levels}
        self.seen = {env: int(state["seen"][env]) for env in self.levels}

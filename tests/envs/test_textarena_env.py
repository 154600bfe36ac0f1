"""TextArena's games through ``make("textarena/<Game>-v0")``: every listed game plays to its end offline, its
rewards and invalid-move rulings are TextArena's, and the opponent of a two-player game only makes moves the
game accepts."""

from __future__ import annotations

import re

import numpy as np
import pytest

import agentgym
from agentgym.envs.textarena.env import GAMES, SINGLE_PLAYER, TWO_PLAYER

pytest.importorskip("textarena")
MOVE = re.compile(r"\[[^\[\]\n]{1,40}\]")


def _env_id(game: str) -> str:
    return f"textarena/{game if game[0].isalpha() else 'Game' + game}"


def _random_episode(env, seed: int) -> tuple[list[str], float, bool, dict]:
    """Play bracketed moves drawn from what the agent has been shown so far; the transcript, return, whether
    the game itself ended, and the last info."""
    rng = np.random.default_rng(seed)
    messages, _ = env.reset(seed=seed)
    seen = [m.text for m in messages]
    total, terminated, truncated, info = 0.0, False, False, {}
    while not (terminated or truncated):
        offered = sorted(set(MOVE.findall("\n".join(seen[-3:])))) or ["[1]"]
        move = offered[int(rng.integers(len(offered)))]
        observation, reward, terminated, truncated, info = env.step(f"play(move={move!r})")
        seen.append(observation[0].text)
        total += reward
    return seen, total, terminated, info


@pytest.mark.parametrize("game", GAMES)
def test_every_listed_game_plays_to_its_end_offline(game):
    env = agentgym.make(_env_id(game), parser="pythonic")
    for seed in range(2):
        seen, total, terminated, info = _random_episode(env, seed)
        assert info["action_error"] is None  # TextArena judged every move: none was refused before it
        if terminated:
            assert "The game is over" in seen[-1] and f"Your reward: {total:g}." in seen[-1]
            assert info["success"] == (total >= 1.0) and -1.0 <= total <= 1.0
    env.close()


def test_the_same_seed_replays_the_same_game():
    env = agentgym.make("textarena/ConnectFour-v0", parser="pythonic")
    assert _random_episode(env, 3)[0] == _random_episode(env, 3)[0]


@pytest.mark.parametrize("game", GAMES)
def test_a_seed_deals_the_same_game_whatever_was_played_before(game):
    env = agentgym.make(_env_id(game), parser="pythonic")
    first = _random_episode(env, 3)[0]
    _random_episode(env, 4)  # KuhnPoker shuffled its deck in place, so the next deal began from this one's
    assert _random_episode(env, 3)[0] == first
    env.close()


def test_a_solved_puzzle_pays_one_and_counts_as_a_success():
    env = agentgym.make("textarena/GuessTheNumber-v0", parser="pythonic")
    env.reset(seed=0)
    low, high = 1, 20
    while True:
        guess = (low + high) // 2
        observation, reward, terminated, _, info = env.step(f"play(move='[{guess}]')")
        text = observation[0].text
        if terminated:
            break
        low, high = (guess + 1, high) if "higher" in text else (low, guess - 1)
    assert reward == 1.0 and info["success"] and "The game is over" in text


def test_invalid_moves_are_textarenas_to_judge_and_it_ends_the_game_after_its_allowance():
    env = agentgym.make("textarena/TicTacToe-v0", parser="pythonic")
    env.reset(seed=0)
    first = env.step("play(move='[4]')")  # the centre: valid, the random opponent answers elsewhere
    assert "Player 1" in first[0][0].text and not first[2]
    second = env.step("play(move='[4]')")
    assert "attempted an invalid move" in second[0][0].text and not second[2] and second[1] == 0.0
    third = env.step("play(move='[4]')")
    assert third[2] and third[1] == -1.0 and not third[4]["success"] and "The game is over" in third[0][0].text


def test_the_random_opponent_only_makes_moves_the_game_accepts():
    env = agentgym.make("textarena/Othello-v0", parser="pythonic")
    for seed in range(3):
        seen, *_ = _random_episode(env, seed)
        assert not any("Player 1 attempted an invalid move" in text for text in seen)


def test_the_lists_name_each_game_once_with_its_players():
    assert not set(SINGLE_PLAYER) & set(TWO_PLAYER) and len(GAMES) == len(set(GAMES))
    tags = {spec.id: spec.tags for spec in agentgym.list_envs(family="textarena")}
    assert len(tags) == len(GAMES)
    assert "two-player" in tags["textarena/TicTacToe-v0"] and "single-player" in tags["textarena/Game2048-v0"]

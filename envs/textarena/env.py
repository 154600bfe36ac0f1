"""TextArena's games as agentgym environments: ``make("textarena/TowerOfHanoi-v0")``.

The agent is player 0 and sends its move through one tool, ``play(move=...)``, written as the game asks
(``[4]``, ``[A C]``); TextArena's own logic judges it, answers an invalid move, ends the game after the
game's error allowance, and pays the rewards. In a two-player game the other player is a fixed opponent: a
uniformly random choice among the bracketed moves its observation offers that TextArena accepts (each tried on
a copy of the game first). The agent sees what TextArena shows player 0: the game's prompt first, then each
turn the messages since its last move (its own move is not echoed back). An episode is a success when the
agent's reward is 1: a won game or a solved puzzle (TextArena pays partial progress below 1, a draw 0 and a
loss -1). :data:`GAMES` lists the games that run offline here and pay numbers; of TextArena 0.7.4's other
one- and two-player games, some need an API key (an LLM judge) or NLTK data from the network, some a newer
Python than 3.11 (Chess, Checkers), and Countdown, Cryptarithm, Slitherlink and ThreeCardMonte pay the reason
text as the reward when an invalid move ends them (their ``set_invalid_move`` arguments are swapped).
"""

from __future__ import annotations

import copy
import importlib.util
import re
from typing import Any

from agentgym.core import Env
from agentgym.messages import Message
from agentgym.tools import tool

FAMILY = "textarena"
SINGLE_PLAYER = ("Bandit-v0", "Blackjack-v0", "Crosswords-v0", "FifteenPuzzle-v0", "FrozenLake-v0",
                 "GuessTheNumber-v0", "LightsOut-v0", "LogicPuzzle-v0", "Mastermind-v0", "Minesweeper-v0",
                 "PegJump-v0", "RushHour-v0", "Secretary-v0", "Set-v0", "Sokoban-v0", "Sudoku-v0",
                 "TowerOfHanoi-v0", "2048-v0")
TWO_PLAYER = ("Alquerque-v0", "Battleship-v0", "Breakthrough-v0", "Chopsticks-v0", "ColonelBlotto-v0",
              "ConnectFour-v0", "IndianPoker-v0", "IteratedMatchingPennies-v0", "IteratedPrisonersDilemma-v0",
              "IteratedRockPaperScissors-v0", "KuhnPoker-v0", "Nim-v0", "Othello-v0", "PigDice-v0",
              "SimpleTak-v0", "TicTacToe-v0", "WildTicTacToe-v0")
GAMES = SINGLE_PLAYER + TWO_PLAYER
"""TextArena's games registered as ``textarena/<Game>-v0`` (``2048-v0`` as ``Game2048-v0``): those that reset and
play to the end offline."""
AGENT = 0
_MOVE = re.compile(r"\[[^\[\]\n]{1,40}\]")
_INVALID = "attempted an invalid move"
SYSTEM_PROMPT = ("You play TextArena's {game} as Player 0. Each turn, call the play tool once with your move, "
                 "written exactly as the game asks (for example [4]).")


def register_textarena_envs() -> None:
    """Register :data:`GAMES` as ``textarena/<Game>-v0`` (building one needs ``agentgym[textarena]``)."""
    from agentgym.registration import ADAPTED, register

    for game in GAMES:
        players = "one player" if game in SINGLE_PLAYER else "two players, against a random opponent"
        register(
            f"{FAMILY}/{game if game[0].isalpha() else 'Game' + game}",  # ids start with a letter: Game2048-v0
            f"{TextArenaEnv.__module__}:{TextArenaEnv.__name__}",
            kwargs={"game": game},
            tags=(FAMILY, ADAPTED, "games", "multi-turn", "single-player" if game in SINGLE_PLAYER else "two-player"),
            description=f"TextArena's {game.removesuffix('-v0')} ({players}), judged by TextArena's own rules.",
            requires=("textarena",),
            extra="textarena",
        )


class TextArenaEnv(Env):
    """One TextArena game, played by the agent as player 0 through a ``play`` tool."""

    max_tool_calls = 1
    default_max_turns = 100
    forkable = "replay"
    """The game is reset from a seed drawn from ``self.np_random``; TextArena's games also draw from Python's global
    ``random``, which the reset seeds, so a replay diverges (and says so) only where other games in the process
    draw from it between the replay's steps."""

    def __init__(self, game: str, **kwargs: Any) -> None:
        """``game`` is a TextArena id (``TicTacToe-v0``); it is played without TextArena's LLM wrappers."""
        super().__init__(**kwargs)
        if importlib.util.find_spec("textarena") is None:
            raise ImportError("TextArena's games need the textarena package: pip install 'agentgym[textarena]'")
        import textarena

        self.game_id = game
        self.players = 1 if game in SINGLE_PLAYER else 2
        self._unplayed = textarena.make(f"{game}-raw")
        self.game = copy.deepcopy(self._unplayed)
        self._reward = 0.0
        self._reason = ""

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.game = copy.deepcopy(self._unplayed)  # a game keeps state past its reset (KuhnPoker shuffles its deck in place)
        self.game.reset(num_players=self.players, seed=int(self.np_random.integers(2**31)))
        done = self._opponents_move()
        opening = self._seen()
        if done:
            self._end()
        return [Message(role="system", content=SYSTEM_PROMPT.format(game=self.game_id)),
                Message(role="user", content=opening)]

    @tool
    def play(self, move: str) -> str:
        """Make your move in the game.

        Args:
            move: The move as the game asks for it, e.g. [4].
        """
        done, _ = self.game.step(move)
        done = done or self._opponents_move()
        seen = self._seen()
        if done:
            self._end()
            seen = f"{seen}\nThe game is over: {self._reason} Your reward: {self._reward:g}.".lstrip()
        return seen or "(nothing new)"

    def _opponents_move(self) -> bool:
        """Let the random opponent play until it is the agent's turn again; whether the game ended."""
        done = False
        while not done and self.game.state.current_player_id != AGENT:
            player, observation = self.game.get_observation()
            done, _ = self.game.step(self._random_move(player, observation))
        return done

    def _random_move(self, player: int, observation: list[Any]) -> str:
        """A random bracketed move from ``observation`` that the game accepts on a copy of itself."""
        text = "\n".join(str(entry[1]) for entry in observation)
        offered = sorted(set(_MOVE.findall(text)))
        for index in self.np_random.permutation(len(offered)):
            trial = copy.deepcopy(self.game)
            trial.step(offered[index])
            if not any(_INVALID in str(entry[1]) for entry in trial.state.observations[player]):
                return offered[index]
        return offered[0] if offered else "[pass]"

    def _seen(self) -> str:
        """What TextArena shows the agent since its last move, without the echo of that move."""
        state = self.game.state
        observation, state.observations[AGENT] = state.observations[AGENT], []
        return "\n".join(str(text) for sender, text, _ in observation if sender != AGENT).strip()

    def _end(self) -> None:
        rewards, info = self.game.close()
        if not isinstance(rewards[AGENT], int | float):
            raise RuntimeError(  # noqa: TRY004 - the game broke its contract; the caller passed nothing wrong
                f"TextArena's {self.game_id} paid {rewards[AGENT]!r} instead of a reward")
        self._reward = float(rewards[AGENT])
        self._reason = str(info[AGENT].get("reason", "")).strip()
        self.finish(success=self._reward >= 1.0, reward=self._reward)

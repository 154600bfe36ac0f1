"""Forking an episode: a child environment in the parent's state after its last recorded turn, to step on its own
(the branches of a tree rollout).

An environment declares how in :attr:`Env.forkable <agentgym.core.Env.forkable>`. A ``native`` one forked at the
turn it is on is copied (:meth:`Env.fork <agentgym.core.Env.fork>`); otherwise a fresh environment replays the
parent: ``reset`` with the parent's seed and options, then each of its actions, every observation compared with
the one the parent recorded. The first that differs raises :class:`~agentgym.errors.ReplayDiverged` naming the
turn; an environment declaring ``no``, or registered as ``nondeterministic``, is refused with
:class:`~agentgym.errors.ForkError`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Any

from agentgym.core import Env
from agentgym.errors import ForkError, ReplayDiverged
from agentgym.messages import Message
from agentgym.registration import EnvSpec, make, spec

Parent = Env | str | Callable[[], Env]
"""Where a child comes from: the parent environment itself, an environment id, or a function that builds a fresh
environment like the parent's."""
DIFF_LINES = 24
"""The most lines of a divergence's diff that its error shows."""


def fork_episode(
    parent: Parent,
    *,
    seed: int | None,
    actions: Sequence[str],
    observations: Sequence[list[Message]],
    options: dict[str, Any] | None = None,
) -> Env:
    """A child environment in the parent's state after ``len(actions)`` turns; stepped with ``step``.

    ``seed`` and ``options`` are the parent's reset arguments, ``actions`` its actions so far, ``observations`` what
    it observed: the reset's messages, then each step's (one more than ``actions``). A ``native`` parent
    environment still at that turn is copied, anything else replayed (see the module's notes).
    """
    child, copied = _child(parent, actions, observations)
    if copied:
        return child
    try:
        child._run_sync(_replay(child, seed, options, actions, observations))  # on its own loop, as reset and step run
    except BaseException:
        child.close()
        raise
    return child


async def afork_episode(
    parent: Parent,
    *,
    seed: int | None,
    actions: Sequence[str],
    observations: Sequence[list[Message]],
    options: dict[str, Any] | None = None,
) -> Env:
    """Asynchronous :func:`fork_episode`, replaying with ``areset``/``astep`` on the running loop; the child is
    stepped with ``astep`` there (a browser or sandbox it holds belongs to that loop)."""
    child, copied = _child(parent, actions, observations)
    if copied:
        return child
    try:
        await _replay(child, seed, options, actions, observations)
    except BaseException:
        await child.aclose()
        raise
    return child


def _child(parent: Parent, actions: Sequence[str], observations: Sequence[list[Message]]) -> tuple[Env, bool]:
    """The child environment and whether it is already in the parent's state (a native copy) or must replay."""
    child = _native_fork(parent, len(actions), len(observations))
    return (child, True) if child is not None else (_fresh(parent), False)


async def _replay(child: Env, seed: int | None, options: dict[str, Any] | None, actions: Sequence[str],
                  observations: Sequence[list[Message]]) -> None:
    """Reset ``child`` and step it through the parent's actions, each observation checked against the parent's."""
    env_id = _env_id(child)
    _check(env_id, 0, observations[0], (await child.areset(seed=seed, options=options))[0])
    for turn, action in enumerate(actions, 1):
        _check(env_id, turn, observations[turn], (await child.astep(action))[0])


def _native_fork(parent: Parent, turns: int, observed: int) -> Env | None:
    """The copy of a ``native`` parent environment that is at turn ``turns``; ``None`` where the child must be
    replayed. Refuses a history whose observations do not follow its actions one to one."""
    if observed != turns + 1:
        raise ValueError(f"a parent's history holds one observation more than actions (the reset's first), got "
                         f"{turns} actions and {observed} observations")
    if isinstance(parent, Env) and parent.forkable == "native" and parent.turn == turns:
        return parent.fork()
    return None


def _fresh(parent: Parent) -> Env:
    """A new environment like the parent's, once its class is known to allow a replay."""
    if isinstance(parent, str):
        env_spec = spec(parent)
        _refuse(env_spec.load(), env_spec)
        return make(env_spec)
    if isinstance(parent, Env):
        made_from = _spec_of(parent)
        _refuse(type(parent), made_from)
        if made_from is None:
            raise ForkError(f"cannot replay {type(parent).__name__}: it was not made from a registered id, so a fresh "
                            "one cannot be built; pass its id or a function that builds one")
        return make(made_from, max_turns=parent.max_turns)
    child = parent()
    try:
        _refuse(type(child), _spec_of(child))
    except ForkError:
        child.close()
        raise
    return child


def _refuse(env_cls: type[Env], env_spec: EnvSpec | None) -> None:
    """Raise :class:`ForkError` where ``env_cls`` cannot be replayed: it says ``forkable = "no"``, or its spec says
    one seed may give different episodes."""
    name = env_spec.id if env_spec is not None else env_cls.__name__
    if env_cls.forkable == "no":
        raise ForkError(f"{name} cannot be forked ({env_cls.__name__} declares forkable='no'): "
                        f"{env_cls.unforkable_reason or 'it gives no reason'}")
    if env_spec is not None and env_spec.nondeterministic:
        raise ForkError(f"{name} cannot be forked by replay: it is registered as nondeterministic (the same seed "
                        "may give different episodes)")


def _spec_of(env: Env) -> EnvSpec | None:
    """The spec ``env`` was made from; ``None`` for one built by its class."""
    return env.spec if isinstance(env.spec, EnvSpec) else None


def _env_id(env: Env) -> str:
    """The id an error names: the registered one, else the class."""
    return env_spec.id if (env_spec := _spec_of(env)) is not None else type(env).__name__


def _check(env_id: str, turn: int, expected: list[Message], got: list[Message]) -> None:
    """Raise :class:`ReplayDiverged` where the replay's observation at ``turn`` is not the parent's."""
    if got == expected:
        return
    before, after = _lines(expected), _lines(got)
    diff = list(difflib.unified_diff(before, after, "parent", "replay", n=1, lineterm=""))
    if not diff:
        diff = ["(the texts agree; an image, a tool call id or a tool name differs)"]
    elif len(diff) > DIFF_LINES:
        diff = [*diff[:DIFF_LINES], f"... ({len(diff) - DIFF_LINES} more lines)"]
    raise ReplayDiverged(env_id, turn, "\n".join(diff))


def _lines(messages: list[Message]) -> list[str]:
    """The messages as text lines for a diff, each message's first line led by its role."""
    return [line for m in messages for line in f"[{m.role}] {m.text}".splitlines()]

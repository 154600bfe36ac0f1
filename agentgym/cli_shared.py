"""What the core's commands share: the consoles they print to, bad arguments turned into usage errors, and the
environments that ``ENV_IDS``, ``--all`` or ``--family`` name."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click
from rich.console import Console

from agentgym.errors import RegistrationError
from agentgym.registration import families, list_envs, spec

out = Console(highlight=False, width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, highlight=False)


@contextmanager
def bad_arguments() -> Iterator[None]:
    """Turn a lookup or validation failure caused by the user's arguments into a usage error."""
    try:
        yield
    except (RegistrationError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None


def select_envs(env_ids: tuple[str, ...], select_all: bool, family: str | None = None) -> list[str]:
    """The ids named, every registered id with ``--all``, or those of one ``--family`` (both leave out the ones
    that cannot be made here); each checked to exist."""
    if select_all + bool(env_ids) + (family is not None) != 1:
        raise click.UsageError("name environment ids, or pass --all or --family (one of them)")
    if family is not None:
        ids = [s.id for s in list_envs(family=family) if s.unavailable is None]
        if not ids:
            raise click.BadParameter(f"no environments in family {family!r}; families: {', '.join(families())}",
                                     param_hint="--family")
        return ids
    if select_all:
        return [s.id for s in list_envs() if s.unavailable is None]
    with bad_arguments():
        specs = [spec(i) for i in env_ids]
        for unusable in (s for s in specs if s.unavailable is not None):
            raise RegistrationError(f"{unusable.id} cannot be made here: {unusable.unavailable}")
        return [s.id for s in specs]

"""Environments for the tests of ``agentgym check`` running checks at once (registered when imported).

Making a :class:`Rendezvous` (the first time) marks in the folder named by ``AGENTGYM_TEST_RENDEZVOUS`` that it
started, waits there until the marks it waits for are there too (two checks running at once, or the test saying
go), and records when it waited; :class:`KillsItsWorker` ends the process that makes it."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import agentgym
from tests.conftest import CounterEnv

FOLDER = "AGENTGYM_TEST_RENDEZVOUS"
PATIENCE = 60.0
"""Seconds a :class:`Rendezvous` waits for the others before it gives up and goes on."""


class Rendezvous(CounterEnv):
    def __init__(self, *, name: str, waits_for: tuple[str, ...] = (), **kwargs: Any) -> None:
        folder = Path(os.environ[FOLDER])
        if not (folder / f"{name}.started").exists():  # the first of the check's instances (Gymnasium makes more)
            started = time.time()
            (folder / f"{name}.started").touch()
            deadline = time.monotonic() + PATIENCE
            while not all((folder / f"{other}.started").exists() for other in waits_for) and time.monotonic() < deadline:
                time.sleep(0.02)
            (folder / f"{name}.span").write_text(f"{started} {time.time()}")
        super().__init__(**kwargs)


class KillsItsWorker(CounterEnv):
    def __init__(self, **kwargs: Any) -> None:
        os._exit(3)


agentgym.register("test/MeetsB-v0", "tests.fixtures_checking:Rendezvous", kwargs={"name": "a", "waits_for": ["b"]})
agentgym.register("test/MeetsA-v0", "tests.fixtures_checking:Rendezvous", kwargs={"name": "b", "waits_for": ["a"]})
agentgym.register("test/WaitsForTheTest-v0", "tests.fixtures_checking:Rendezvous",
                  kwargs={"name": "slow", "waits_for": ["go"]})
agentgym.register("test/KillsItsWorker-v0", "tests.fixtures_checking:KillsItsWorker")

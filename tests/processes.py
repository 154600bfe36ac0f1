"""This test process's children by name, robust to children that exit while they are listed or killed."""

from __future__ import annotations

import contextlib

import psutil


def children_named(part: str) -> list[psutil.Process]:
    """The processes under this one whose name holds ``part``, leaving out those that exit while listed."""
    found = []
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            if part in process.name():
                found.append(process)
    return found


def kill_chromium() -> None:
    """Kill every Chromium process under this one (there must be one); a helper that is gone by its turn,
    ended with the browser killed before it, counts as killed."""
    processes = children_named("chrom")
    assert processes, "no Chromium runs here to kill"
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()

"""Chromium processes labelled with the process that launched them, and the reaping of those it left behind.

Every Chromium agentgym launches carries two switches Chromium ignores: ``--agentgym-owner=host:pid:start``
(the launching process, as :func:`agentgym.sandboxes.base.owner` names it) and ``--agentgym-browser=ID``
(one launch). Playwright starts Chromium as the leader of a process group of its own, so killing that group
takes its renderers and helpers too. Linux only (the command lines are read from ``/proc``); elsewhere
nothing is found and nothing reaped.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from agentgym.sandboxes.base import owner, owner_alive

OWNER_SWITCH = "--agentgym-owner="
BROWSER_SWITCH = "--agentgym-browser="


def label_args(browser_id: str) -> list[str]:
    """The switches that label a Chromium launched now by this process as browser ``browser_id``."""
    return [f"{OWNER_SWITCH}{owner()}", f"{BROWSER_SWITCH}{browser_id}"]


def kill_browser(browser_id: str) -> int:
    """Kill the Chromium labelled ``browser_id`` and its process group; returns how many were killed."""
    return sum(_kill_group(pid) for pid, labels in _labelled() if labels.get(BROWSER_SWITCH) == browser_id)


def reap_browsers() -> int:
    """Kill every labelled Chromium whose launching process is gone; returns how many."""
    orphans = [pid for pid, labels in _labelled() if not owner_alive(labels.get(OWNER_SWITCH, ""))]
    return sum(_kill_group(pid) for pid in orphans)


@functools.cache
def reap_at_start_up() -> int:
    """:func:`reap_browsers`, once per process (before its first launch)."""
    return reap_browsers()


def _labelled() -> Iterator[tuple[int, dict[str, str]]]:
    """(pid, {switch: value}) of each process whose command line carries :data:`OWNER_SWITCH`."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        labels = {}
        for arg in args:
            text = arg.decode(errors="replace")
            for switch in (OWNER_SWITCH, BROWSER_SWITCH):
                if text.startswith(switch):
                    labels[switch] = text[len(switch):]
        if OWNER_SWITCH in labels:
            yield int(cmdline.parent.name), labels


def _kill_group(pid: int) -> bool:
    """SIGKILL ``pid``'s process group when it leads one (else ``pid`` alone); whether it was there."""
    with contextlib.suppress(ProcessLookupError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
        return True
    return False

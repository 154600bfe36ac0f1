"""Which processes the kernel's out-of-memory killer killed for a memory cgroup's own limit, as its log tells.

For each kill the kernel logs one ``oom-kill:`` line naming the constraint, the cgroup whose limit was hit, and the
victim's name, pid and uid (as the host sees them): the one record that says which process a cgroup's limit
killed, unlike the engine's ``oom`` event, which says only that the limit was hit. The log is read from
``/dev/kmsg``, which needs root (or ``kernel.dmesg_restrict=0``); it holds the most recent records only.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

KMSG = "/dev/kmsg"
_RECORD = 8192
"""Bytes read per record (the kernel's records are shorter)."""
_KILL = re.compile(r"oom-kill:constraint=CONSTRAINT_MEMCG,.*?,oom_memcg=(?P<memcg>[^,]*),task_memcg=[^,]*,"
                   r"task=(?P<task>.*),pid=(?P<pid>\d+),uid=(?P<uid>\d+)$")


@dataclass(frozen=True)
class OomKill:
    """A process the kernel killed for the limit of memory cgroup ``memcg``."""

    memcg: str
    task: str
    pid: int
    uid: int


def memcg_oom_kills(cgroup: str) -> list[OomKill] | None:
    """The kills for the limit of a memory cgroup whose path contains ``cgroup`` (a container's id) that the
    kernel's log still holds, oldest first; ``None`` when the log cannot be read."""
    try:
        fd = os.open(KMSG, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    kills = []
    try:
        while True:
            try:
                record = os.read(fd, _RECORD)
            except BlockingIOError:
                break  # read to the end
            except BrokenPipeError:
                continue  # the kernel overwrote records not read yet: go on with the oldest left
            if not record:
                break
            if (kill := _parse(record)) is not None and cgroup in kill.memcg:
                kills.append(kill)
    except OSError:
        return None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return kills


def _parse(record: bytes) -> OomKill | None:
    """The kill a ``/dev/kmsg`` record (``prefix;message``, then continuation lines) reports, if it reports one."""
    message = record.decode(errors="replace").partition(";")[2].partition("\n")[0]
    found = _KILL.match(message)
    if found is None:
        return None
    return OomKill(found["memcg"], found["task"], int(found["pid"]), int(found["uid"]))

"""One pool's permit in a co-execution group, handed round-robin among the group's jobs."""

from __future__ import annotations

import asyncio


class Turnstile:
    """The permit of one pool of one group. A job asks for it with :meth:`acquire` and gives it back with
    :meth:`release`; while it is taken, askers wait, and a freed permit goes to the first waiting job after the
    last holder in the group's join order (round-robin, RollMux's intra-group schedule; a job not yet asking is
    passed over, so the pool never idles while another member waits). Runs on one event loop."""

    def __init__(self) -> None:
        self.members: list[str] = []
        self.holder: str | None = None
        self._last: str | None = None
        self._waiting: dict[str, asyncio.Future[None]] = {}

    def join(self, job: str) -> None:
        if job not in self.members:
            self.members.append(job)

    def leave(self, job: str) -> None:
        """Take ``job`` out of the turn: a wait of its ends (cancelled), and a permit it holds goes to the next."""
        if job in self.members:
            self.members.remove(job)
        waiting = self._waiting.pop(job, None)
        if waiting is not None and not waiting.done():
            waiting.cancel()
        self.release(job)

    @property
    def waiting(self) -> list[str]:
        return list(self._waiting)

    async def acquire(self, job: str) -> None:
        """Wait for ``job``'s turn and take the permit (at once where it holds it already)."""
        if job not in self.members:
            raise KeyError(f"{job} is not a member of this group")
        if self.holder == job:
            return
        future = self._waiting.get(job) or asyncio.get_running_loop().create_future()
        self._waiting[job] = future
        self._grant()
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            if self._waiting.get(job) is future:  # the asker went away: its turn is skipped
                del self._waiting[job]
            if self.holder == job and future.done() and not future.cancelled():
                self.release(job)
            raise

    def claim(self, job: str) -> None:
        """Record that ``job`` holds the permit (it says so, re-registering with a restarted scheduler)."""
        self.join(job)
        if self.holder is None:
            self.holder = self._last = job

    def release(self, job: str) -> bool:
        """Give the permit back where ``job`` holds it; whether it did."""
        if self.holder != job:
            return False
        self.holder = None
        self._grant()
        return True

    def _grant(self) -> None:
        if self.holder is not None or not self._waiting:
            return
        start = self.members.index(self._last) + 1 if self._last in self.members else 0
        for job in self.members[start:] + self.members[:start]:
            future = self._waiting.pop(job, None)
            if future is not None:
                self.holder = self._last = job
                future.set_result(None)
                return

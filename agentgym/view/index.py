"""The episode index: where each episode's line starts in a JSONL file of records, with its summary fields.

Episode records (:class:`~agentgym.evaluation.records.EpisodeRecord`,
:class:`~agentgym.rollout.records.RolloutRecord`) put the summary fields first and the trajectory last, so a line is
indexed by parsing only the JSON before ``,"trajectory":`` (before ``,"trainer_logprobs":`` in a rollout record,
whose per-token logprobs come just before it): a few hundred bytes of a line of many kilobytes. The index remembers
the byte offset it read up to and reads only what was appended since (a torn last line, without its newline, waits
for its end); a file that shrank or was replaced is indexed again from the start. A line that cannot be read is
skipped and counted, never raised.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentgym.evaluation.records import EpisodeRecord
from agentgym.rollout.records import RolloutRecord

CHUNK_BYTES = 16 * 2**20
"""How much of the file is read at a time while indexing."""
_EPISODE_CUT = b',"trajectory":'
_ROLLOUT_CUT = b',"trainer_logprobs":'
RESULTS = ("success", "failure", "truncated", "error")
"""An episode's result: solved, ended unsolved, cut at the turn limit unsolved, lost to infrastructure."""


@dataclass(slots=True)
class Entry:
    """One indexed episode: where its line lies and the fields the list shows and filters on."""

    number: int
    """Its place among the episodes of the file, from 0 (lines that could not be read are not counted)."""
    line: int
    """Its line in the file, from 1."""
    offset: int
    length: int
    key: str
    task_id: str
    env_id: str
    difficulty: str | None
    sample: int
    status: str
    success: bool
    reward: float
    turns: int
    tokens: int
    seconds: float
    error: str | None
    step: int | None = None
    """The training step that took it (rollout records only); so are the fields below."""
    position: int | None = None
    carried: bool = False
    outcome: str | None = None
    advantage: float | None = None
    version_min: int | None = None
    version_max: int | None = None

    @property
    def result(self) -> str:
        """One of :data:`RESULTS`."""
        if self.status == "error":
            return "error"
        if self.success:
            return "success"
        return "truncated" if self.status == "truncated" else "failure"

    @property
    def scored(self) -> bool:
        return self.status != "error"

    @property
    def group(self) -> tuple[int, int, bool] | None:
        """The group of a rollout record: its step, task position and whether it was carried over."""
        if self.step is None or self.position is None:
            return None
        return self.step, self.position, self.carried


class BadRecord(ValueError):
    """An indexed line whose whole record cannot be read."""


class EpisodeIndex:
    """The index of one JSONL file of episode records (``rollouts``: of :class:`RolloutRecord` lines), brought up
    to date by :meth:`refresh` at most every ``refresh_seconds``. ``entries`` only grows while the file is appended
    to; it is replaced whole when the file is rewritten."""

    def __init__(self, path: Path, *, rollouts: bool = False, refresh_seconds: float = 1.0) -> None:
        self.path = path
        self.rollouts = rollouts
        self.refresh_seconds = refresh_seconds
        self.entries: list[Entry] = []
        self.bad_lines = 0
        """Complete lines that could not be read."""
        self.indexed_to = 0
        """The byte offset after the last complete line indexed."""
        self.generation = 0
        """Counts the times the file was found rewritten and indexed again; caches keyed by it stay right."""
        self._inode: int | None = None
        self._checked = float("-inf")
        self._lines = 0
        self._lock = threading.Lock()
        self._interned: dict[str, str] = {}

    def refresh(self, *, force: bool = False) -> int:
        """Index the lines appended since the last call; the number of new entries. Does nothing within
        ``refresh_seconds`` of the last look unless ``force``."""
        with self._lock:
            now = time.monotonic()
            if not force and now - self._checked < self.refresh_seconds:
                return 0
            self._checked = now
            try:
                stat = self.path.stat()
            except OSError:
                if self.entries or self.indexed_to:
                    self._restart(None)
                return 0
            if stat.st_ino != self._inode or stat.st_size < self.indexed_to:
                self._restart(stat.st_ino)
            before = len(self.entries)
            if stat.st_size > self.indexed_to:
                self._scan(stat.st_size)
            return len(self.entries) - before

    def _restart(self, inode: int | None) -> None:
        if self._inode is not None or self.entries:
            self.generation += 1
        self.entries, self.bad_lines, self.indexed_to, self._lines, self._inode = [], 0, 0, 0, inode

    def _scan(self, end: int) -> None:
        entries = self.entries
        with self.path.open("rb") as f:
            f.seek(self.indexed_to)
            pending = b""
            base = self.indexed_to  # the offset of pending[0]
            while base + len(pending) < end:
                chunk = f.read(min(CHUNK_BYTES, end - base - len(pending)))
                if not chunk:
                    break
                data = pending + chunk if pending else chunk
                start = 0
                while (stop := data.find(b"\n", start)) >= 0:
                    self._lines += 1
                    if stop - start > 8 or (stop > start and not data[start:stop].isspace()):
                        entry = self._entry(data, start, stop, base + start, len(entries))
                        if entry is None:
                            self.bad_lines += 1
                        else:
                            entries.append(entry)
                    start = stop + 1
                pending = data[start:]
                base += start
                self.indexed_to = base

    def _entry(self, data: bytes, start: int, stop: int, offset: int, number: int) -> Entry | None:
        """The entry of the line ``data[start:stop]``, or None where it cannot be read."""
        end = stop
        while end > start and data[end - 1] in b" \t\r":
            end -= 1
        if end == start or data[end - 1] != 0x7D:  # "}": a line cut short is not a record
            return None
        cut = data.find(_ROLLOUT_CUT, start, end) if self.rollouts else -1
        if cut < 0:
            cut = data.find(_EPISODE_CUT, start, end)
        record = _load(data[start:cut] + b"}") if cut > 0 else None
        if record is None:  # a field of the summary holds the marker, or the line is damaged: read it whole
            record = _load(data[start:end])
        if record is None:
            return None
        try:
            return self._fields(record, number, offset, stop - start)
        except (KeyError, TypeError, ValueError):
            return None

    def _fields(self, r: dict[str, Any], number: int, offset: int, length: int) -> Entry:
        task = r["task"]
        env_id = self._intern(str(task["env_id"]))
        difficulty = task.get("difficulty")
        difficulty = None if difficulty is None else self._intern(str(difficulty))
        entry = Entry(
            number=number, line=self._lines, offset=offset, length=length, key=str(r["key"]),
            task_id=f"{env_id}:{difficulty or 'default'}:{int(task['seed'])}",  # Task.id
            env_id=env_id, difficulty=difficulty, sample=int(r["sample"]), status=self._intern(str(r["status"])),
            success=bool(r["success"]), reward=float(r["reward"]), turns=int(r["turns"]), tokens=int(r["tokens"]),
            seconds=float(r.get("seconds") or 0.0), error=r.get("error"))
        if self.rollouts:
            entry.step, entry.position = int(r["step"]), int(r["position"])
            entry.carried, entry.outcome = bool(r.get("carried")), self._intern(str(r["outcome"]))
            entry.advantage = None if r.get("advantage") is None else float(r["advantage"])
            entry.version_min = None if r.get("version_min") is None else int(r["version_min"])
            entry.version_max = None if r.get("version_max") is None else int(r["version_max"])
        return entry

    def _intern(self, text: str) -> str:
        return self._interned.setdefault(text, text)

    def line_bytes(self, entry: Entry) -> bytes:
        """The raw line of ``entry``."""
        with self.path.open("rb") as f:
            return os.pread(f.fileno(), entry.length, entry.offset)

    def record(self, entry: Entry) -> EpisodeRecord | RolloutRecord:
        """The whole record of ``entry``; :class:`BadRecord` where its line cannot be read."""
        try:
            data = self.line_bytes(entry)
            model = RolloutRecord if self.rollouts else EpisodeRecord
            return model.model_validate_json(data)
        except OSError as exc:
            raise BadRecord(f"{self.path.name} line {entry.line} could not be read: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            raise BadRecord(f"{self.path.name} line {entry.line} could not be read: "
                            f"{where + ': ' if where else ''}{first['msg']}") from None


def _load(data: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None

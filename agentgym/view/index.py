"""The episode index: where each episode's line starts in a JSONL file of records, with its summary fields.

Episode records (:class:`~agentgym.evaluation.records.EpisodeRecord`,
:class:`~agentgym.evaluation.records.RolloutRecord`) put the summary fields first and the trajectory last, so a line is
indexed by parsing only the JSON before ``,"trajectory":`` (before ``,"trainer_logprobs":`` in a rollout record,
whose per-token logprobs come just before it): a few hundred bytes of a line of many kilobytes. The index remembers
the byte offset it read up to and reads only what was appended since (a torn last line, without its newline, waits
for its end); a file that shrank or was replaced is indexed again from the start. A line that cannot be read is
skipped and counted, never raised. A large stretch (a big run opened, a burst of lines) is indexed by a thread while
the pages show what is indexed so far, so a run of any size opens at once.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from json.scanner import make_scanner
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentgym.evaluation.records import EpisodeRecord, RolloutRecord

CHUNK_BYTES = 16 * 2**20
"""How much of the file is read at a time while indexing."""
SYNC_BYTES = 8 * 2**20
"""New lines up to this much are indexed by the request that finds them; more, by a thread of their own."""
_SCAN = make_scanner(json.JSONDecoder())  # type: ignore[arg-type]  # typeshed asks for a scanner, it takes a decoder
"""One JSON value from a position of a string, without ``json.loads``'s own work per call."""
_BLANK = b" \t\r"
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

    def __init__(self, path: Path, *, rollouts: bool = False, refresh_seconds: float = 1.0,
                 background: bool = True) -> None:
        self.path = path
        self.rollouts = rollouts
        self.refresh_seconds = refresh_seconds
        self.background = background
        """Whether more than :data:`SYNC_BYTES` of new lines are indexed by a thread of their own while requests are
        answered from what is indexed so far (else the call that finds them waits)."""
        self.entries: list[Entry] = []
        self.bad_lines = 0
        """Complete lines that could not be read."""
        self.indexed_to = 0
        """The byte offset after the last complete line indexed."""
        self.size = 0
        """The file's size when it was last looked at."""
        self.generation = 0
        """Counts the times the file was found rewritten and indexed again; caches keyed by it stay right."""
        self._inode: int | None = None
        self._checked = float("-inf")
        self._lines = 0
        self._lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._interned: dict[str, str] = {}

    @property
    def indexing(self) -> bool:
        """Whether a thread is indexing a large stretch of the file now."""
        return self._worker is not None and self._worker.is_alive()

    def refresh(self, *, force: bool = False) -> int:
        """Index the lines appended since the last call; the number of new entries. Does nothing within
        ``refresh_seconds`` of the last look unless ``force``, nor while a thread is indexing; more than
        :data:`SYNC_BYTES` of new lines go to such a thread (with ``background``)."""
        if self.indexing:
            return 0
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
            self.size = stat.st_size
            before = len(self.entries)
            if self.background and stat.st_size - self.indexed_to > SYNC_BYTES:
                self._worker = threading.Thread(target=self._catch_up, name=f"index {self.path}", daemon=True)
                self._worker.start()
            elif stat.st_size > self.indexed_to:
                self._scan(stat.st_size)
            return len(self.entries) - before

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the indexing thread (if any) to finish; whether it has."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)
        return not self.indexing

    def _catch_up(self) -> None:
        """Index up to the end of the file, and again while it grew by more than :data:`SYNC_BYTES` meanwhile."""
        with self._lock:
            while True:
                self._scan(self.size)
                try:
                    stat = self.path.stat()
                except OSError:
                    return
                if stat.st_ino != self._inode or stat.st_size - self.indexed_to <= SYNC_BYTES:
                    return
                self.size = stat.st_size

    def _restart(self, inode: int | None) -> None:
        if self._inode is not None or self.entries:
            self.generation += 1
        self.entries, self.bad_lines, self.indexed_to, self._lines, self._inode = [], 0, 0, 0, inode

    def _scan(self, end: int) -> None:
        """Index the complete lines from ``indexed_to`` up to ``end``."""
        entries = self.entries
        marker = _ROLLOUT_CUT if self.rollouts else _EPISODE_CUT
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
                lines = self._lines
                while (stop := data.find(b"\n", start)) >= 0:
                    lines += 1
                    end_of_line = stop
                    while end_of_line > start and data[end_of_line - 1] in _BLANK:
                        end_of_line -= 1
                    if end_of_line > start:  # a blank line is no record, nor a damaged one
                        entry = None
                        if data[end_of_line - 1] == 0x7D:  # "}": a line cut short is not a record
                            cut = data.find(marker, start, end_of_line)
                            if cut < 0 and self.rollouts:
                                cut = data.find(_EPISODE_CUT, start, end_of_line)
                            record = _load(data[start:cut] + b"}") if cut > 0 else None
                            if record is None:  # the marker inside a summary field, or a damaged line: all of it
                                record = _load(data[start:end_of_line])
                            if record is not None:
                                entry = self._entry(record, len(entries), lines, base + start, stop - start)
                        if entry is None:
                            self.bad_lines += 1
                        else:
                            entries.append(entry)
                    start = stop + 1
                self._lines = lines
                pending = data[start:]
                base += start
                self.indexed_to = base

    def _entry(self, r: dict[str, Any], number: int, line: int, offset: int, length: int) -> Entry | None:
        """The entry of a record's summary fields, or None where they are not a record's."""
        try:
            task = r["task"]
            interned = self._interned
            env_id = str(task["env_id"])
            env_id = interned.setdefault(env_id, env_id)
            difficulty = task.get("difficulty")
            if difficulty is not None:
                difficulty = interned.setdefault(str(difficulty), str(difficulty))
            status = str(r["status"])
            entry = Entry(number, line, offset, length, str(r["key"]),
                          f"{env_id}:{difficulty or 'default'}:{int(task['seed'])}",  # Task.id
                          env_id, difficulty, int(r["sample"]), interned.setdefault(status, status), bool(r["success"]),
                          float(r["reward"]), int(r["turns"]), int(r["tokens"]), float(r.get("seconds") or 0.0),
                          r.get("error"))
            if self.rollouts:
                outcome = str(r["outcome"])
                entry.step, entry.position = int(r["step"]), int(r["position"])
                entry.carried, entry.outcome = bool(r.get("carried")), interned.setdefault(outcome, outcome)
                entry.advantage = None if r.get("advantage") is None else float(r["advantage"])
                entry.version_min = None if r.get("version_min") is None else int(r["version_min"])
                entry.version_max = None if r.get("version_max") is None else int(r["version_max"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return entry

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
    """The JSON object ``data`` holds and nothing more, or None."""
    try:
        text = data.decode()
        value, end = _SCAN(text, 0)
    except (ValueError, StopIteration):  # the scanner raises StopIteration where no value starts
        return None
    return value if end == len(text) and isinstance(value, dict) else None

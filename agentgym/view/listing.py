"""What the episode list shows: the filters of a query, its order, the text search and the pages.

Filters and sorts run over the index's entries (summary fields only). The text search reads the lines themselves,
in file order and a block at a time, and stops once it has read :data:`SEARCH_MAX_BYTES` or spent
:data:`SEARCH_MAX_SECONDS`: a search cut short says how far it got. Results are kept per index size, so paging
through them reads nothing again; episodes appended later are searched when asked for.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlencode

from agentgym.view.index import RESULTS, Entry, EpisodeIndex

PAGE_SIZE = 50
SEARCH_MAX_BYTES = 2**30
SEARCH_MAX_SECONDS = 2.0
SEARCH_BLOCK_BYTES = 4 * 2**20
OUTCOMES = ("trained", "uniform", "dropped", "stale")
"""What a training step did with an episode's group (rollout records only)."""
SORTS = {"": "file order", "-reward": "reward, highest first", "reward": "reward, lowest first",
         "-turns": "turns, most first", "turns": "turns, fewest first", "-tokens": "tokens, most first",
         "tokens": "tokens, fewest first"}
_RANGE = re.compile(r"\s*(\d+)?\s*(-)?\s*(\d+)?\s*")
_CACHED = 32


def parse_range(text: str) -> tuple[int, int] | None:
    """``5`` -> (5, 5), ``3-5`` -> (3, 5), ``3-`` -> (3, huge), ``-5`` -> (0, 5); None where it is neither."""
    match = _RANGE.fullmatch(text)
    if match is None or (match[1] is None and match[3] is None):
        return None
    low = int(match[1]) if match[1] is not None else 0
    if match[2] is None:
        return low, low
    return low, int(match[3]) if match[3] is not None else 2**62


@dataclass(frozen=True)
class Query:
    """One list of episodes of one source: its filters, search, order and page."""

    source: str
    env: str = ""
    task: str = ""
    """A substring of the task id."""
    outcome: tuple[str, ...] = ()
    """Results (:data:`~agentgym.view.index.RESULTS`) and training outcomes (:data:`OUTCOMES`): an episode is kept
    when it has one of the results named (if any is) and one of the outcomes named (if any is)."""
    step: str = ""
    """A training step or a range of them (``3-5``)."""
    version: str = ""
    """A policy version or a range of them: episodes with a token sampled by one of them."""
    text: str = ""
    """A substring of the episode's line (case-insensitive)."""
    sort: str = ""
    page: int = 1

    @classmethod
    def from_params(cls, params: Any, source: str) -> Query:
        """The query of a request's parameters (a Starlette ``QueryParams`` or a plain mapping)."""
        def one(name: str) -> str:
            value = params.get(name)
            return str(value).strip()[:500] if value is not None else ""

        many = params.getlist("outcome") if hasattr(params, "getlist") else (
            [params["outcome"]] if "outcome" in params else [])
        outcome = tuple(dict.fromkeys(o for o in many if o in RESULTS or o in OUTCOMES))
        try:
            page = max(1, int(one("page") or 1))
        except ValueError:
            page = 1
        sort = one("sort")
        return cls(source=source, env=one("env"), task=one("task"), outcome=outcome, step=one("step"),
                   version=one("version"), text=one("q"), sort=sort if sort in SORTS else "", page=page)

    def params(self, **changes: Any) -> str:
        """The query string of this query (with ``changes``), empty fields left out."""
        query = replace(self, **changes)
        pairs: list[tuple[str, str]] = [("source", query.source)]
        for name, value in (("env", query.env), ("task", query.task)):
            if value:
                pairs.append((name, value))
        pairs += [("outcome", o) for o in query.outcome]
        for name, value in (("step", query.step), ("version", query.version), ("q", query.text), ("sort", query.sort)):
            if value:
                pairs.append((name, value))
        if query.page != 1:
            pairs.append(("page", str(query.page)))
        return urlencode(pairs)

    @property
    def filters(self) -> tuple[Any, ...]:
        return self.source, self.env, self.task, self.outcome, self.step, self.version

    def problems(self) -> list[str]:
        """What is wrong with the values given (such a filter is left out)."""
        return [f"{name}: {value!r} is not a number or a range like 3-5"
                for name, value in (("step", self.step), ("version", self.version))
                if value and parse_range(value) is None]


@dataclass
class Search:
    """How a text search went."""

    text: str
    matches: list[Entry]
    searched: int
    """Episodes whose lines were read."""
    candidates: int
    """Episodes the other filters kept."""
    cut_short: bool
    seconds: float
    megabytes: float


@dataclass
class Page:
    """One page of a query's episodes."""

    entries: list[Entry]
    total: int
    page: int
    pages: int
    search: Search | None
    problems: list[str] = field(default_factory=list)

    @property
    def first(self) -> int:
        """The position of its first episode in the whole list, from 1."""
        return (self.page - 1) * PAGE_SIZE + 1 if self.entries else 0


def keep(query: Query) -> Callable[[Entry], bool]:
    """The test an entry passes to be listed under ``query`` (its text search aside)."""
    tests: list[Callable[[Entry], bool]] = []
    if query.env:
        tests.append(lambda e: e.env_id == query.env)
    if query.task:
        needle = query.task.lower()
        tests.append(lambda e: needle in e.task_id.lower() or needle in e.key.lower())
    results = {o for o in query.outcome if o in RESULTS}
    if results:
        tests.append(lambda e: e.result in results)
    outcomes = {o for o in query.outcome if o in OUTCOMES}
    if outcomes:
        tests.append(lambda e: e.outcome in outcomes)
    steps = parse_range(query.step) if query.step else None
    if steps is not None:
        tests.append(lambda e: e.step is not None and steps[0] <= e.step <= steps[1])
    versions = parse_range(query.version) if query.version else None
    if versions is not None:
        tests.append(lambda e: e.version_min is not None and e.version_max is not None
                     and e.version_min <= versions[1] and versions[0] <= e.version_max)
    if not tests:
        return lambda e: True
    return lambda e: all(test(e) for test in tests)


def _sort_key(sort: str) -> Callable[[Entry], Any]:
    name = sort.lstrip("-")
    if name == "reward":
        return lambda e: e.reward
    if name == "turns":
        return lambda e: e.turns
    return lambda e: e.tokens


def search_lines(index: EpisodeIndex, candidates: Sequence[Entry], text: str, *,
                 max_bytes: int = SEARCH_MAX_BYTES, max_seconds: float = SEARCH_MAX_SECONDS) -> Search:
    """The candidates whose line holds ``text`` (as JSON writes it, ASCII letters in any case), read in file order
    a block at a time until ``max_bytes`` or ``max_seconds`` is spent."""
    needle = json.dumps(text, ensure_ascii=False)[1:-1].lower().encode()
    started = time.perf_counter()
    matches: list[Entry] = []
    read = searched = 0
    cut_short = False
    ordered = sorted(candidates, key=lambda e: e.offset)
    i = 0
    try:
        f = index.path.open("rb")
    except OSError:
        return Search(text, [], 0, len(candidates), bool(candidates), 0.0, 0.0)
    with f:
        while i < len(ordered):
            if read >= max_bytes or time.perf_counter() - started >= max_seconds:
                cut_short = True
                break
            start = ordered[i].offset
            room = min(SEARCH_BLOCK_BYTES, max_bytes - read)
            j = i + 1  # the block holds the lines i..j-1: a block's worth (or what the budget has left), or one line
            while j < len(ordered) and ordered[j].offset + ordered[j].length - start <= room:
                j += 1
            end = ordered[j - 1].offset + ordered[j - 1].length
            f.seek(start)
            block = f.read(end - start).lower()
            for entry in ordered[i:j]:
                at = entry.offset - start
                if block.find(needle, at, at + entry.length) >= 0:
                    matches.append(entry)
                read += entry.length
                searched += 1
            i = j
    matches.sort(key=lambda e: e.number)
    return Search(text, matches, searched, len(candidates), cut_short, time.perf_counter() - started, read / 2**20)


class Listing:
    """Filtered, searched and sorted lists of episodes, kept for the queries asked last (per index size)."""

    def __init__(self, *, max_search_bytes: int = SEARCH_MAX_BYTES,
                 max_search_seconds: float = SEARCH_MAX_SECONDS) -> None:
        self.max_search_bytes = max_search_bytes
        self.max_search_seconds = max_search_seconds
        self._cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._lock = threading.Lock()

    def _cached(self, key: tuple[Any, ...], make: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        value = make()
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return value

    def ordered(self, index: EpisodeIndex, query: Query) -> tuple[list[Entry], Search | None]:
        """Every episode of ``query`` in its order (every page), and how its text search went."""
        entries = index.entries
        if index.indexing:  # a thread appends to it: a snapshot stays what the cache key says
            entries = entries[: len(entries)]
        size = (id(index), index.generation, len(entries))

        def filtered() -> list[Entry]:
            test = keep(query)
            return [e for e in entries if test(e)]

        kept: list[Entry] = self._cached(("kept", *size, query.filters), filtered)
        search: Search | None = None
        if query.text:
            search = self._cached(("search", *size, query.filters, query.text.lower()), lambda: search_lines(
                index, kept, query.text, max_bytes=self.max_search_bytes, max_seconds=self.max_search_seconds))
            kept = search.matches
        if query.sort:
            source = kept
            kept = self._cached(("sorted", *size, query.filters, query.text.lower(), query.sort),
                                lambda: sorted(source, key=_sort_key(query.sort), reverse=query.sort.startswith("-")))
        return kept, search

    def page(self, index: EpisodeIndex, query: Query) -> Page:
        """The page of ``query`` asked for (the last one where it asks past the end)."""
        kept, search = self.ordered(index, query)
        pages = max(1, -(-len(kept) // PAGE_SIZE))
        number = min(query.page, pages)
        shown = kept[(number - 1) * PAGE_SIZE: number * PAGE_SIZE]
        return Page(shown, len(kept), number, pages, search, query.problems())

    def groups(self, index: EpisodeIndex) -> dict[tuple[int, int, bool], list[Entry]]:
        """A training run's groups (step, task position, carried over) and their episodes, by sample."""
        entries = index.entries

        def make() -> dict[tuple[int, int, bool], list[Entry]]:
            groups: dict[tuple[int, int, bool], list[Entry]] = {}
            for e in entries:
                if (group := e.group) is not None:
                    groups.setdefault(group, []).append(e)
            for members in groups.values():
                members.sort(key=lambda e: e.sample)
            return groups

        result: dict[tuple[int, int, bool], list[Entry]] = self._cached(
            ("groups", id(index), index.generation, len(entries)), make)
        return result

    def envs(self, index: EpisodeIndex) -> list[str]:
        """The environments the index's episodes played, sorted."""
        entries = index.entries
        result: list[str] = self._cached(("envs", id(index), index.generation, len(entries)),
                                         lambda: sorted({e.env_id for e in entries}))
        return result

    def by_task(self, index: EpisodeIndex) -> dict[str, list[Entry]]:
        """The episodes of each task id."""
        entries = index.entries

        def make() -> dict[str, list[Entry]]:
            tasks: dict[str, list[Entry]] = {}
            for e in entries:
                tasks.setdefault(e.task_id, []).append(e)
            return tasks

        result: dict[str, list[Entry]] = self._cached(("tasks", id(index), index.generation, len(entries)), make)
        return result


def counts(entries: Sequence[Entry], key: Callable[[Entry], str]) -> dict[str, int]:
    """How many entries have each value of ``key``, most first."""
    found: dict[str, int] = {}
    for e in entries:
        found[key(e)] = found.get(key(e), 0) + 1
    return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

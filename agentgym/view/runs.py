"""What a run folder holds, as the viewer reads it.

An evaluation's folder (``agentgym eval --out``) holds ``manifest.json``, ``episodes.jsonl``, ``infra.jsonl``,
``summary.json`` and ``screens/``. A training run's folder (``agentgym train``) holds ``config.yaml``,
``metrics.jsonl``, ``summary.json``, ``rollouts.jsonl`` (every episode of every group a step took) with its
``screens/``, and an evaluation folder per held-out evaluation under ``eval/step-NNNNNN/``. The trainers' code is
not imported: the files are read as they lie. Each JSONL file of episodes is a :class:`Source` with an
:class:`~agentgym.view.index.EpisodeIndex` of its own; a training run's evaluation folders are looked for again as
the run writes new ones.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from agentgym.evaluation.records import EPISODES, INFRA, MANIFEST, ROLLOUTS, SCREENS, InfraRecord, RunSpec
from agentgym.metrics_log import JSONL_NAME as METRICS
from agentgym.metrics_log import read_metrics
from agentgym.view.index import EpisodeIndex

RunKind = Literal["eval", "train"]
CONFIG = "config.yaml"
SUMMARY = "summary.json"
EVAL_FOLDERS = "eval"
_EVAL_STEP = re.compile(r"step-(\d+)")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


class NotARun(ValueError):
    """A path that is not a folder an evaluation or a training run wrote."""


@dataclass
class Source:
    """One JSONL file of episodes: an evaluation's ``episodes.jsonl`` or a training run's ``rollouts.jsonl``."""

    name: str
    """How URLs name it: ``episodes``, ``rollouts`` or ``eval-NNNNNN`` (the held-out evaluation at step N)."""
    label: str
    folder: Path
    """The folder of the JSONL file; its screens are in ``folder/screens/``."""
    index: EpisodeIndex
    step: int | None = None
    """The training step of a held-out evaluation."""

    @property
    def rollouts(self) -> bool:
        return self.index.rollouts

    @property
    def screens(self) -> Path:
        return self.folder / SCREENS

    @property
    def read_percent(self) -> int:
        """How much of the file is indexed, in percent (100 once the indexing thread caught up)."""
        index = self.index
        return 100 if not index.indexing or not index.size else min(99, 100 * index.indexed_to // index.size)


@dataclass
class _Cached:
    """A value read from a file, kept while the file's size and mtime stay the same."""

    stamp: tuple[int, int] | None = None
    value: Any = None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_size, stat.st_mtime_ns


@dataclass
class Run:
    """One run folder: its kind, its sources of episodes and the files beside them."""

    path: Path
    kind: RunKind
    refresh_seconds: float = 1.0
    """Files are looked at again (new lines indexed, new evaluation folders found) at most this often."""
    _sources: dict[str, Source] = field(default_factory=dict)
    _scanned: float = float("-inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cache: dict[str, _Cached] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    def sources(self) -> dict[str, Source]:
        """Every source of episodes, in order (``rollouts`` first, then the held-out evaluations by step), each
        index brought up to date (at most every ``refresh_seconds``)."""
        with self._lock:
            if time.monotonic() - self._scanned >= self.refresh_seconds:
                self._scanned = time.monotonic()
                self._find_sources()
            sources = dict(self._sources)
        for source in sources.values():
            source.index.refresh()
        return sources

    def source(self, name: str) -> Source | None:
        return self.sources().get(name)

    def _find_sources(self) -> None:
        if self.kind == "eval":
            if "episodes" not in self._sources:
                self._sources["episodes"] = Source("episodes", "evaluation", self.path, self._index(self.path / EPISODES))
            return
        if "rollouts" not in self._sources:
            self._sources["rollouts"] = Source("rollouts", "training rollouts", self.path,
                                               self._index(self.path / ROLLOUTS, rollouts=True))
        for folder in sorted((self.path / EVAL_FOLDERS).glob("step-*")):
            match = _EVAL_STEP.fullmatch(folder.name)
            name = f"eval-{match[1]}" if match else ""
            if match and name not in self._sources and (folder / MANIFEST).is_file():
                step = int(match[1])
                self._sources[name] = Source(name, f"held-out evaluation, step {step}", folder,
                                             self._index(folder / EPISODES), step=step)

    def _index(self, path: Path, *, rollouts: bool = False) -> EpisodeIndex:
        return EpisodeIndex(path, rollouts=rollouts, refresh_seconds=self.refresh_seconds)

    @property
    def default_source(self) -> str:
        return "episodes" if self.kind == "eval" else "rollouts"

    def evaluations(self) -> list[Source]:
        """The sources that are evaluation folders: the run itself, or a training run's held-out evaluations."""
        return [s for s in self.sources().values() if not s.rollouts]

    def latest_evaluation(self) -> Source | None:
        """The evaluation its scores and comparisons are read from: the run's own, or the latest held-out one."""
        evaluations = self.evaluations()
        return evaluations[-1] if evaluations else None

    def spec(self, source: Source | None = None) -> RunSpec | None:
        """The manifest of an evaluation folder (the run's own by default), or None where it is missing or unreadable."""
        folder = source.folder if source is not None else self.path
        spec: RunSpec | None = self._read(folder / MANIFEST, lambda p: RunSpec.model_validate_json(p.read_text()))
        return spec

    def summary(self, source: Source | None = None) -> dict[str, Any] | None:
        """``summary.json`` of the run (or of an evaluation folder of it), or None where it is missing or unreadable."""
        folder = source.folder if source is not None else self.path
        value = self._read(folder / SUMMARY, lambda p: json.loads(p.read_text()))
        return value if isinstance(value, dict) else None

    def config(self) -> dict[str, Any]:
        """A training run's ``config.yaml`` ({} where missing or unreadable)."""
        value = self._read(self.path / CONFIG, lambda p: yaml.safe_load(p.read_text()))
        return value if isinstance(value, dict) else {}

    def metrics(self) -> tuple[list[dict[str, Any]], str | None]:
        """A training run's ``metrics.jsonl`` records, and why they could not be read (None when they could)."""
        path = self.path / METRICS
        cached = self._cache.setdefault(str(path), _Cached())
        stamp = _stamp(path)
        if stamp is None:
            return [], None
        if cached.stamp != stamp:
            try:
                cached.value = (read_metrics(self.path), None)
            except (OSError, ValueError) as exc:
                cached.value = ([], str(exc))
            cached.stamp = stamp
        records, problem = cached.value
        return records, problem

    def infra(self, source: Source) -> tuple[list[InfraRecord], int]:
        """The attempts an evaluation folder lost to infrastructure (``infra.jsonl``), and its lines that could not be
        read."""
        path = source.folder / INFRA

        def read(p: Path) -> tuple[list[InfraRecord], int]:
            records, bad = [], 0
            for line in p.read_bytes().split(b"\n")[:-1]:  # a torn last line waits for its end
                if not line.strip():
                    continue
                try:
                    records.append(InfraRecord.model_validate_json(line))
                except ValueError:
                    bad += 1
            return records, bad

        value = self._read(path, read)
        return value if value is not None else ([], 0)

    def tokenizer_path(self, source: Source | None = None) -> Path | None:
        """The local folder of the tokenizer the episodes' tokens are ids of: a training run's model (``config.yaml``'s
        ``model.path``, or a checkpoint's ``model/``), an evaluation's ``tokenizer`` or ``model``; None where there is
        none on this machine."""
        candidates: list[Path] = []
        if self.kind == "train":
            model = self.config().get("model")
            if isinstance(model, dict) and isinstance(model.get("path"), str):
                candidates.append(Path(model["path"]))
            candidates += sorted((self.path / "checkpoints").glob("step-*/model"), reverse=True)
        else:
            spec = self.spec(source)
            if spec is not None:
                candidates += [Path(name) for name in (spec.tokenizer, spec.model) if name]
        for folder in candidates:
            try:
                if any((folder / name).is_file() for name in _TOKENIZER_FILES):
                    return folder
            except OSError:
                continue
        return None

    def _read(self, path: Path, reader: Any) -> Any:
        """``reader(path)``, kept until the file changes; None where it is missing or cannot be read."""
        cached = self._cache.setdefault(str(path), _Cached())
        stamp = _stamp(path)
        if stamp is None:
            return None
        if cached.stamp != stamp:
            try:
                cached.value = reader(path)
            except (OSError, ValueError, yaml.YAMLError):
                cached.value = None
            cached.stamp = stamp
        return cached.value


def open_run(path: str | Path, *, refresh_seconds: float = 1.0) -> Run:
    """The run in folder ``path``; :class:`NotARun` says why it is not one."""
    path = Path(path)
    if not path.exists():
        raise NotARun(f"{path}: no such folder")
    if not path.is_dir():
        raise NotARun(f"{path} is a file, not a run folder")
    if (path / MANIFEST).is_file():
        run = Run(path.resolve(), "eval", refresh_seconds)
    elif (path / CONFIG).is_file() and any((path / name).exists() for name in (METRICS, ROLLOUTS, EVAL_FOLDERS, SUMMARY)):
        run = Run(path.resolve(), "train", refresh_seconds)
    else:
        raise NotARun(f"{path} holds no run: an evaluation's folder has {MANIFEST} (agentgym eval --out DIR), a training "
                      f"run's has {CONFIG} with {METRICS} or {ROLLOUTS} (agentgym train)")
    run.sources()
    return run

"""Run metrics on disk: ``metrics.jsonl`` (the record), ``metrics.csv``, TensorBoard events, learning curves.

``metrics.jsonl`` is the source of truth: one strict-JSON object per line, ``{"step", "time", <key>: value}``;
non-finite floats (NaN, ±inf) are written as ``null`` so every reader can parse it (TensorBoard keeps the exact
value). Each line is one flushed write: a ``kill -9`` loses at most that line, and a torn last line is skipped on
reading and cut off on resume. ``metrics.csv`` is derived from it: a row is appended per step, and the file is
rebuilt from the JSONL and swapped in atomically when a new key appears (and on every open), so its header names
every column. Each record also goes to the run's experiment trackers (:mod:`agentgym.tracking`): TensorBoard events
by default, W&B, MLflow or trackio where a run lists them.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import numbers
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from agentgym.tracking import Table, Tracker

JSONL_NAME = "metrics.jsonl"
CSV_NAME = "metrics.csv"
DEFAULT_KEYS = ("eval/success_rate", "eval/reward_mean", "rollout/reward_mean", "train/loss", "train/kl",
                "train/grad_norm")
_RESERVED = ("step", "time")
_SMOOTH_FROM = 10
"""Curves with at least this many points get an EMA line over the raw points."""

Record = dict[str, Any]
RunDir = str | os.PathLike[str]


class MetricsLog:
    """Append-only metrics writer for one run dir (one writer per dir, not thread-safe); reopening resumes.

    ``trackers`` get every record too, and are closed with the log (see :func:`agentgym.tracking.open_trackers`);
    left out, TensorBoard events are written in the run dir, or nothing more with ``tensorboard=False``.
    """

    def __init__(self, run_dir: RunDir, *, tensorboard: bool = True, trackers: Iterable[Tracker] | None = None) -> None:
        self.run_dir = Path(run_dir)
        self._trackers: list[Tracker] = list(trackers) if trackers is not None else []
        self._closed = True
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            jsonl = self.run_dir / JSONL_NAME
            _cut_torn_tail(jsonl)
            records = read_metrics(self.run_dir) if jsonl.exists() else []
            self._columns = _columns(records)
            self._rebuild_csv(records)
            self._jsonl = jsonl.open("a", encoding="utf-8")
            if trackers is None and tensorboard:
                from agentgym.tracking.tensorboard import TensorBoardTracker

                self._trackers.append(TensorBoardTracker(self.run_dir))
        except BaseException:
            for tracker in self._trackers:
                tracker.close(failed=True)
            raise
        self._closed = False

    @property
    def trackers(self) -> list[Tracker]:
        """The experiment trackers each record goes to."""
        return list(self._trackers)

    def log(self, step: int, metrics: Mapping[str, float | int | bool], *, wall_time: float | None = None) -> None:
        """Append one record at ``step`` to the JSONL and the CSV, flushing each, and send it to the trackers."""
        if self._closed:
            raise RuntimeError(f"MetricsLog for {self.run_dir} is closed; open a new MetricsLog to resume it")
        if isinstance(step, bool) or not isinstance(step, numbers.Integral):
            raise TypeError(f"step must be an int, got {type(step).__name__}")
        values = {key: _number(key, value) for key, value in metrics.items()}
        record: Record = {"step": int(step), "time": time.time() if wall_time is None else float(wall_time)}
        record.update(values)
        self._jsonl.write(json.dumps(_nulls(record), allow_nan=False) + "\n")
        self._jsonl.flush()
        new = [key for key in record if key not in self._columns]
        if new:
            self._columns.extend(new)
            self._csv.close()
            self._rebuild_csv(read_metrics(self.run_dir))
        else:
            csv.writer(self._csv).writerow(_row(_nulls(record), self._columns))
            self._csv.flush()
        if values:
            for tracker in self._trackers:
                tracker.log(record["step"], values, record["time"])

    def log_table(self, step: int, table: Table) -> None:
        """Send ``table`` (a sample of episodes, say) to the trackers at ``step``; the JSONL holds numbers only."""
        if self._closed:
            raise RuntimeError(f"MetricsLog for {self.run_dir} is closed; open a new MetricsLog to resume it")
        for tracker in self._trackers:
            tracker.log_table(step, table)

    def _rebuild_csv(self, records: list[Record]) -> None:
        _write_csv(self.run_dir / CSV_NAME, records, self._columns)
        self._csv = (self.run_dir / CSV_NAME).open("a", newline="", encoding="utf-8")

    def close(self, *, failed: bool = False) -> None:
        """Close the files and end the trackers' runs (``failed``: marked so where a tracker can); calling it again
        does nothing. Every tracker is closed even where one raises; its error is raised after."""
        if self._closed:
            return
        self._closed = True
        self._jsonl.close()
        self._csv.close()
        with contextlib.ExitStack() as closing:  # every tracker is closed, in order, whichever raises
            for tracker in reversed(self._trackers):
                closing.callback(tracker.close, failed=failed)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close(failed=exc is not None)


def rewind_jsonl(path: str | os.PathLike[str], step: int) -> None:
    """Keep only the records of ``path`` (a step-keyed JSONL file) up to ``step``, atomically; what a
    resumed run does with records written after its checkpoint. A missing file is left missing."""
    path = Path(path)
    if not path.is_file():
        return
    _cut_torn_tail(path)
    kept = [line for line in path.read_bytes().splitlines(keepends=True)
            if (record := _load(line)) is not None and record["step"] <= step]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(b"".join(kept))
    os.replace(tmp, path)


def read_metrics(run_dir: RunDir) -> list[Record]:
    """The records of ``run_dir/metrics.jsonl`` in order (non-finite values read as ``None``), torn last line skipped."""
    path = Path(run_dir) / JSONL_NAME
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; pass a run dir written by MetricsLog")
    *lines, tail = path.read_bytes().split(b"\n")
    records: list[Record] = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            if (record := _load(line)) is None:
                raise ValueError(f"{path}:{number} is not a JSON object; fix or delete that line")
            records.append(record)
    if (record := _load(tail)) is not None:  # a last line without its newline counts only when complete
        records.append(record)
    return records


def curves_figure(source: RunDir | Iterable[Mapping[str, Any]], keys: Iterable[str] | None = DEFAULT_KEYS, *,
                  x: str = "step", smoothing: float = 0.8) -> Figure:
    """A matplotlib figure with one subplot per key that has finite points (``keys=None``: every metric key)."""
    if not 0.0 <= smoothing < 1.0:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    records = read_metrics(source) if isinstance(source, (str, os.PathLike)) else list(source)
    wanted = _columns(records)[2:] if keys is None else list(keys)
    series = {}
    for key in wanted:
        points = sorted((r[x], r[key]) for r in records if _finite(r.get(x)) and _finite(r.get(key)))
        if points:
            series[key] = points
    if not series:
        available = [key for key in _columns(records) if key not in _RESERVED]
        raise ValueError(f"none of the keys {wanted} has a finite value over x={x!r}; available keys: {available}")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    ncols = min(2, len(series))
    nrows = math.ceil(len(series) / ncols)
    fig = Figure(figsize=(5.5 * ncols, 3.5 * nrows), layout="constrained")
    FigureCanvasAgg(fig)
    for index, (key, points) in enumerate(series.items(), 1):
        ax = fig.add_subplot(nrows, ncols, index)
        xs, ys = zip(*points, strict=True)
        if len(points) >= _SMOOTH_FROM and smoothing > 0:
            ax.plot(xs, ys, ".", alpha=0.35, label="raw")
            ax.plot(xs, _ema(ys, smoothing), "-", label=f"EMA ({smoothing})")
            ax.legend(loc="best", fontsize="small")
        else:
            ax.plot(xs, ys, "o-")
        ax.set_title(key)
        ax.set_xlabel(x)
        ax.set_ylabel(key.rsplit("/", 1)[-1])
        ax.grid(alpha=0.3)
    return fig


def plot_curves(source: RunDir | Iterable[Mapping[str, Any]], out_png: RunDir,
                keys: Iterable[str] | None = DEFAULT_KEYS, *, x: str = "step", smoothing: float = 0.8) -> Path:
    """Save ``curves_figure(...)`` as a PNG (Agg, no display, byte-identical for the same records); returns its path."""
    fig = curves_figure(source, keys, x=x, smoothing=smoothing)
    out = Path(out_png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})
    return out


def _number(key: str, value: Any) -> float | int | bool:
    if not isinstance(key, str) or not key or key in _RESERVED:
        raise ValueError(f"metric key {key!r} is empty or reserved ({_RESERVED}); use a namespaced key like 'train/loss'")
    if isinstance(value, bool):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"metric {key!r} must be a number or bool, got {type(value).__name__}; log a scalar like float(x)")


def _nulls(record: Record) -> Record:
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in record.items()}


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def _load(line: bytes) -> Record | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _cut_torn_tail(path: Path) -> None:
    """Make the file end with a newline: finish a complete last line, cut off a torn one."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        start = data.rfind(b"\n") + 1
        if _load(data[start:]) is not None:
            with path.open("ab") as f:
                f.write(b"\n")
        else:
            os.truncate(path, start)


def _columns(records: Iterable[Mapping[str, Any]]) -> list[str]:
    columns = dict.fromkeys(_RESERVED)
    for record in records:
        columns.update(dict.fromkeys(record))
    return list(columns)


def _row(record: Mapping[str, Any], columns: list[str]) -> list[Any]:
    return ["" if record.get(column) is None else record[column] for column in columns]


def _write_csv(path: Path, records: list[Record], columns: list[str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(columns)
        writer.writerows(_row(record, columns) for record in records)
    os.replace(tmp, path)


def _ema(values: Iterable[float], weight: float) -> list[float]:
    """Debiased exponential moving average (TensorBoard's smoothing)."""
    out, acc = [], 0.0
    for i, value in enumerate(values, 1):
        acc = weight * acc + (1 - weight) * value
        out.append(acc / (1 - weight**i))
    return out

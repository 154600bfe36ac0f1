"""TensorBoard event files in the run dir, written with the ``tensorboard`` package alone (no torch or TensorFlow):
``simple_value`` scalars (what ``torch.utils.tensorboard`` writes), and the config and episode tables as text
summaries (markdown, shown in TensorBoard's Text tab)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter

if TYPE_CHECKING:
    from agentgym.tracking import Table


class TensorBoardTracker:
    """Writes events into ``run_dir`` (``tensorboard --logdir RUN_DIR``), flushed after every record."""

    name = "tensorboard"

    def __init__(self, run_dir: str | Path, config: Mapping[str, Any] | None = None) -> None:
        self._writer: EventFileWriter | None = EventFileWriter(str(run_dir))
        if config is not None:
            text = "    " + json.dumps(config, indent=2, default=str).replace("\n", "\n    ")  # a markdown code block
            self._add(Event(wall_time=time.time(), step=0, summary=text_pb("config", text)))

    @property
    def state(self) -> dict[str, Any]:
        return {}

    def log(self, step: int, metrics: Mapping[str, float | int | bool], wall_time: float) -> None:
        summary = Summary(value=[Summary.Value(tag=key, simple_value=float(v)) for key, v in metrics.items()])
        self._add(Event(wall_time=wall_time, step=step, summary=summary))

    def log_table(self, step: int, table: Table) -> None:
        self._add(Event(wall_time=time.time(), step=step, summary=text_pb(table.key, markdown(table))))

    def close(self, *, failed: bool = False) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _add(self, event: Event) -> None:
        if self._writer is None:
            raise RuntimeError("the TensorBoard tracker is closed")
        self._writer.add_event(event)
        self._writer.flush()


def markdown(table: Table) -> str:
    """``table`` as a markdown table, ``|`` and line breaks in cells escaped."""
    def cell(value: object) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(table.columns) + " |", "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in table.rows]
    return "\n".join(lines)

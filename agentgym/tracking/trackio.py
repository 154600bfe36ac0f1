"""trackio: one trackio run per training run, in the project named by ``logging.project``, continued on resume.

trackio keeps its runs in a local SQLite database (``TRACKIO_DIR``, by default under the Hugging Face cache;
``trackio show`` opens the dashboard), or in a Space where ``TRACKIO_SPACE_ID`` says so. It resumes a run by
name, so a resumed training run passes the name its first part used. trackio prints what it does; that goes to
stderr here, so the trainer's stdout stays its summary alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import trackio
from trackio import context_vars

if TYPE_CHECKING:
    from agentgym.tracking import Table


class TrackioTracker:
    """A trackio run (``trackio.init``) holding the config; ``saved``: the ``{"project", "name"}`` to continue."""

    name = "trackio"

    def __init__(self, project: str, run_name: str, config: Mapping[str, Any],
                 saved: Mapping[str, Any] | None = None) -> None:
        resuming = bool(saved and saved.get("name"))
        if saved and resuming:
            project, run_name = saved.get("project", project), saved["name"]
        with _to_stderr():
            self._run: Any = trackio.init(project=project, name=run_name, config=dict(config),
                                          resume="allow" if resuming else "never", embed=False)
        self._state = {"project": project, "name": run_name, "id": getattr(self._run, "id", None)}
        self._closed = False

    @property
    def state(self) -> dict[str, Any]:
        return self._state

    def log(self, step: int, metrics: Mapping[str, float | int | bool], wall_time: float) -> None:
        self._run.log(dict(metrics), step=step)

    def log_table(self, step: int, table: Table) -> None:
        rows = [list(row) for row in table.rows]
        self._run.log({table.key: trackio.Table(columns=list(table.columns), data=rows)}, step=step)

    def close(self, *, failed: bool = False) -> None:
        if not self._closed:
            self._closed = True
            with _to_stderr():
                if context_vars.current_run.get() is self._run:
                    trackio.finish()  # type: ignore[no-untyped-call]  # trackio forgets it too, so its exit hook does not finish it again
                else:
                    self._run.finish()


@contextlib.contextmanager
def _to_stderr() -> Iterator[None]:
    with contextlib.redirect_stdout(sys.stderr):
        yield

"""The viewer served for a real browser: uvicorn in a thread of this process on a free loopback port, stopped on
leaving; and the screenshots the browser tests take for the docs, written only when asked."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from agentgym.view.app import create_app
from agentgym.view.cli import listen_on

SCREENSHOTS_ENV = "AGENTGYM_VIEW_SCREENSHOTS"
"""A folder to write the docs' screenshots to (``AGENTGYM_VIEW_SCREENSHOTS=docs/screenshots pytest tests/view -k
browser``); without it the tests take none."""


@contextlib.contextmanager
def serving(paths: Sequence[Path], **kwargs: Any) -> Iterator[str]:
    """The base URL of the viewer of ``paths`` while the block runs."""
    app = create_app(list(paths), **kwargs)
    for run in app.state.runs:
        for source in run.sources().values():
            source.index.wait(60)
    listener = listen_on("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="viewer", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the viewer did not start")
            time.sleep(0.02)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        listener.close()


def screenshot(page: Any, name: str) -> None:
    """Save the page's viewport as ``<folder>/<name>.png`` where :data:`SCREENSHOTS_ENV` names a folder."""
    folder = os.environ.get(SCREENSHOTS_ENV)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"))

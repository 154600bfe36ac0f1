"""The run viewer (``agentgym view``): a local web app to browse what evaluations and training runs wrote.

:func:`create_app` builds it for one run folder or two (FastAPI, Jinja2 templates with autoescape, a small script
served as a file); :mod:`~agentgym.view.index` indexes a JSONL file of episodes by byte offset and summary fields,
so a run of 100,000 episodes opens in about a second and a page reads only its own lines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgym.view.runs import NotARun, Run, open_run

if TYPE_CHECKING:
    from agentgym.view.app import create_app

__all__ = ["NotARun", "Run", "create_app", "open_run"]


def __getattr__(name: str) -> Any:
    if name == "create_app":  # imported when asked for: it needs FastAPI and Jinja2 (agentgym[view])
        from agentgym.view.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

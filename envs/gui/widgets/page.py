"""A widget page: the instruction bar on top, the task's area below, the shared stylesheet and the scripts."""

from __future__ import annotations

import functools
import html
from importlib.resources import files

from agentgym.envs.gui.widgets.task import Episode, WidgetTask

WIDTH, HEIGHT = 480, 360
"""The screen of every widget task, in pixels."""
TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{style}</style></head>
<body><div id="query">{instruction}</div><div id="area">{body}</div>{scripts}</body></html>"""


@functools.cache
def asset(name: str) -> str:
    """The text of a file in ``pages/``."""
    return files("agentgym.envs.gui.widgets").joinpath("pages", name).read_text(encoding="utf-8")


def render(task: WidgetTask, episode: Episode) -> str:
    """The whole document of an episode (no external resources: styles and scripts are inline)."""
    scripts = "".join(f"<script>{asset(name)}</script>" for name in ("widgets.js", *task.scripts))
    return TEMPLATE.format(
        title=task.name,
        style=asset("widgets.css"),
        instruction=html.escape(episode.instruction),
        body=episode.body,
        scripts=scripts,
    )

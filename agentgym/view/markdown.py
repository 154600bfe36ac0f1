"""A small, safe subset of Markdown for observations and messages.

Every piece of the text is HTML-escaped, and markup is only ever put around escaped pieces: fenced code blocks,
inline code, headings, bold, and images whose link is a stored screen (``![screen](screens/<name>.png)``, as
:class:`~agentgym.evaluation.records.Screens` writes them), shown from the viewer's screen route. Nothing else
becomes markup: no raw HTML, no links, no images from elsewhere (their Markdown stays text). Line breaks and
indentation are kept (the page shows the text ``white-space: pre-wrap``), so accessibility trees read as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from markupsafe import Markup, escape

SCREEN = re.compile(r"screens/([A-Za-z0-9_-]{1,128}\.(?:png|jpe?g|webp|gif))")
"""A stored screen's link, relative to the folder of the JSONL file."""
_FENCE = re.compile(r"^```[^\n`]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE = re.compile(r"`([^`\n]+)`")
_IMAGE = re.compile(r"!\[([^\]\n]{0,200})\]\(([^)\s]{1,300})\)")
_BOLD = re.compile(r"\*\*(?=\S)([^\n]+?)(?<=\S)\*\*")
_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def render(text: str, screen_url: Callable[[str], str]) -> Markup:
    """``text`` as escaped HTML with the subset marked up; ``screen_url(name)`` is where a stored screen is served."""
    out: list[str] = []
    at = 0
    for fence in _FENCE.finditer(text):
        out.append(_blocks(text[at:fence.start()], screen_url))
        out.append(f'<pre class="code">{escape(fence[1].rstrip(chr(10)))}</pre>')
        at = fence.end()
    out.append(_blocks(text[at:], screen_url))
    return Markup("".join(out))


def _blocks(text: str, screen_url: Callable[[str], str]) -> str:
    parts = []
    at = 0
    for heading in _HEADING.finditer(text):
        parts.append(_inline(text[at:heading.start()], screen_url))
        parts.append(f'<span class="h h{len(heading[1])}">{_inline(heading[2], screen_url)}</span>')
        at = heading.end()
    parts.append(_inline(text[at:], screen_url))
    return "".join(parts)


def _inline(text: str, screen_url: Callable[[str], str]) -> str:
    parts = []
    at = 0
    for code in _CODE.finditer(text):
        parts.append(_marked(text[at:code.start()], screen_url))
        parts.append(f"<code>{escape(code[1])}</code>")
        at = code.end()
    parts.append(_marked(text[at:], screen_url))
    return "".join(parts)


def _marked(text: str, screen_url: Callable[[str], str]) -> str:
    parts = []
    at = 0
    for image in _IMAGE.finditer(text):
        parts.append(_bold(text[at:image.start()]))
        screen = SCREEN.fullmatch(image[2])
        if screen is None:
            parts.append(_bold(image[0]))
        else:
            url = screen_url(screen[1])
            parts.append(f'<a class="screen" href="{escape(url)}"><img src="{escape(url)}" alt="{escape(image[1])}" '
                         f'loading="lazy"></a>')
        at = image.end()
    parts.append(_bold(text[at:]))
    return "".join(parts)


def _bold(text: str) -> str:
    parts = []
    at = 0
    for bold in _BOLD.finditer(text):
        parts.append(str(escape(text[at:bold.start()])))
        parts.append(f"<strong>{escape(bold[1])}</strong>")
        at = bold.end()
    parts.append(str(escape(text[at:])))
    return "".join(parts)


def screen_link(text: str) -> str | None:
    """The screen's name where ``text`` is a stored screen's image link and nothing else (a message part that
    :class:`~agentgym.evaluation.records.Screens` wrote), else None."""
    image = _IMAGE.fullmatch(text.strip())
    screen = SCREEN.fullmatch(image[2]) if image is not None else None
    return screen[1] if screen is not None else None

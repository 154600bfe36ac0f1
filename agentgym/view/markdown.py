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

    def bold(piece: str) -> str:
        return _around(piece, _BOLD, lambda plain: str(escape(plain)), lambda m: f"<strong>{escape(m[1])}</strong>")

    def image(match: re.Match[str]) -> str:
        screen = SCREEN.fullmatch(match[2])
        if screen is None:
            return bold(match[0])
        url = escape(screen_url(screen[1]))
        return f'<a class="screen" href="{url}"><img src="{url}" alt="{escape(match[1])}" loading="lazy"></a>'

    def inline(piece: str) -> str:
        return _around(piece, _CODE, lambda plain: _around(plain, _IMAGE, bold, image),
                       lambda m: f"<code>{escape(m[1])}</code>")

    def blocks(piece: str) -> str:
        return _around(piece, _HEADING, inline, lambda m: f'<span class="h h{len(m[1])}">{inline(m[2])}</span>')

    return Markup(_around(text, _FENCE, blocks, lambda m: f'<pre class="code">{escape(m[1].rstrip(chr(10)))}</pre>'))


def _around(text: str, pattern: re.Pattern[str], between: Callable[[str], str],
            marked: Callable[[re.Match[str]], str]) -> str:
    """``text`` with each match of ``pattern`` rendered by ``marked`` and the text around the matches by ``between``."""
    parts, at = [], 0
    for match in pattern.finditer(text):
        parts += [between(text[at:match.start()]), marked(match)]
        at = match.end()
    parts.append(between(text[at:]))
    return "".join(parts)


def screen_link(text: str) -> str | None:
    """The screen's name where ``text`` is a stored screen's image link and nothing else (a message part that
    :class:`~agentgym.evaluation.records.Screens` wrote), else None."""
    image = _IMAGE.fullmatch(text.strip())
    screen = SCREEN.fullmatch(image[2]) if image is not None else None
    return screen[1] if screen is not None else None

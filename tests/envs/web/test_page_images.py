"""A page is read once the images it draws have loaded: an icon a script adds, drawn from a CSS ``content``
URL that is slow to come, has its size when the page is read, and a broken image does not hold the read up."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agentgym.envs.web.browser import Browser
from agentgym.envs.web.page_images import IMAGE_PATIENCE_MS, images_loaded

pytestmark = pytest.mark.browser

ICON_DELAY = 0.6
"""Seconds the icon takes to come: far longer than reading the page takes."""


def _png() -> bytes:
    """A 1x1 PNG, one opaque pixel."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0\0\0\0\xff")) + chunk(b"IEND", b"")


PNG = _png()
PAGE = b"""<!doctype html><style>.icon { content: url(/icon.png); height: 12px; }
.broken { content: url(/missing.png); height: 12px; }</style><div id=list></div>
<script>addEventListener("load", () => {
  for (const name of ["icon", "broken"]) {
    const el = document.createElement("span"); el.className = name; el.id = name; list.append(el);
  }
});</script>"""


class _Site(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # http.server calls it by this name
        if self.path == "/icon.png":
            time.sleep(ICON_DELAY)
            self._send(200, "image/png", PNG)
        elif self.path == "/":
            self._send(200, "text/html", PAGE)
        else:
            self._send(404, "text/plain", b"not found")

    def _send(self, status: int, kind: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(ConnectionError):  # the test read the page and closed it before the icon came
            self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()
    thread.join()


async def _read_icon(url: str, *, wait: bool) -> tuple[float, bool | None, float]:
    """The icon's width as the page is read (after :func:`images_loaded` if ``wait``), what the wait said,
    and the seconds it took."""
    browser = Browser(warm=0)
    try:
        page = await browser.open_page()
        await page.goto(url)
        start = time.monotonic()
        loaded = await images_loaded(page) if wait else None
        waited = time.monotonic() - start
        width = await page.evaluate("() => document.getElementById('icon').getBoundingClientRect().width")
        return width, loaded, waited
    finally:
        await browser.close()


def test_a_slow_icon_a_script_added_has_its_size_once_the_images_have_loaded(site):
    width, loaded, waited = asyncio.run(_read_icon(site, wait=True))
    assert loaded is True and width == 12  # 12 px high, as wide as the square image
    assert waited < IMAGE_PATIENCE_MS / 1000  # the broken image counted as done, not waited out


def test_read_at_once_the_same_page_has_no_icon_yet(site):
    width, _, _ = asyncio.run(_read_icon(site, wait=False))
    assert width == 0

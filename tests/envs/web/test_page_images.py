"""A page is read once the images it draws have loaded: an icon a script adds, drawn from a CSS ``content``
URL that is slow to come (held by the site until the test lets it go), has its size when the page is read, and a
broken image does not hold the read up."""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentgym.envs.web.browser import Browser
from agentgym.envs.web.page_images import images_loaded

pytestmark = pytest.mark.browser


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


class _Server(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Site)
        self.icon = threading.Event()
        """Set when the icon may go out: until then, each request for it waits."""


class _Site(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # http.server calls it by this name
        if self.path == "/icon.png":
            self.server.icon.wait(timeout=60)
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
def site() -> Iterator[_Server]:
    server = _Server()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.icon.set()
    server.shutdown()
    server.server_close()
    thread.join()


def _url(site: _Server) -> str:
    return f"http://127.0.0.1:{site.server_address[1]}/"


async def _icon_width(page: Any) -> float:
    return await page.evaluate("() => document.getElementById('icon').getBoundingClientRect().width")


def test_a_slow_icon_a_script_added_has_its_size_once_the_images_have_loaded(site):
    async def read() -> tuple[bool, bool, float]:
        browser = Browser(warm=0)
        try:
            page = await browser.open_page()
            await page.goto(_url(site))
            waiting = asyncio.create_task(images_loaded(page))
            done, _ = await asyncio.wait({waiting}, timeout=0.5)
            site.icon.set()
            return bool(done), await waiting, await _icon_width(page)
        finally:
            await browser.close()

    done_while_held, loaded, width = asyncio.run(read())
    assert not done_while_held, "the read did not wait for the icon"
    assert loaded is True, "the broken image was waited out"  # False: the patience ran out
    assert width == 12  # 12 px high, as wide as the square image


def test_read_at_once_the_same_page_has_no_icon_yet(site):
    async def read() -> float:
        browser = Browser(warm=0)
        try:
            page = await browser.open_page()
            await page.goto(_url(site))
            return await _icon_width(page)  # the site holds the icon until the test ends
        finally:
            await browser.close()

    assert asyncio.run(read()) == 0

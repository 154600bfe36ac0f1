"""Bundled web sites served in-process: one uvicorn server per site, on a free loopback port, in a thread.

The server runs on its own thread and event loop, so a slow page never stalls the rollout's loop and the
environments' validators can read the site's state directly. It starts with the first environment that
asks for the site and stops when the last one lets go.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

START_TIMEOUT = 15.0


class SiteServer:
    """An ASGI app served on ``127.0.0.1`` at :attr:`url` until :meth:`stop`."""

    def __init__(self, app: Any, name: str) -> None:
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]},
                                        name=f"agentgym-site-{name}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the {name} site did not start serving")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and wait for the thread; safe to call twice."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._socket.close()


_LOCK = threading.Lock()
_SERVED: dict[str, tuple[SiteServer, int]] = {}


def serve(name: str, app: Any) -> str:
    """The base URL at which site ``name`` (the ASGI ``app``) is served; starts it for the first caller.
    Match each call with one :func:`unserve`."""
    with _LOCK:
        server, holders = _SERVED.get(name, (None, 0))
        if server is None:
            server = SiteServer(app, name)
        _SERVED[name] = (server, holders + 1)
        return server.url


def unserve(name: str) -> None:
    """Let go of site ``name``; the last holder stops its server."""
    with _LOCK:
        server, holders = _SERVED[name]
        if holders > 1:
            _SERVED[name] = (server, holders - 1)
            return
        del _SERVED[name]
    server.stop()

"""What the server does with a request before and around the application: the body size limit, enforced
while the body is read and before anything parses it, and cancelling the work of a client that left."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from agentgym.serve.schemas import APIError

DEFAULT_MAX_BODY_BYTES = 4 * 2**20
"""The largest request body ``agentgym serve`` reads (4 MiB) unless told otherwise (``--max-body-mb``)."""

Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class RequestGuard:
    """ASGI middleware around the application.

    * A body over ``max_bytes`` is answered 413 in OpenAI's error shape: a ``Content-Length`` over the
      limit at once, before any of the body is read; a body without one (chunked) as soon as the bytes
      counted pass the limit. The rest of a refused body is never held (the HTTP server discards it).
    * A body within the limit is read whole and handed to the application, which then runs in a task of
      its own; should the client go away before the response is complete, that task is cancelled, and
      with it the generation it awaits (the engine drops a request whose caller is cancelled).
    """

    def __init__(self, app: Any, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, got {max_bytes}")
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Message, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._refuse(send, f"a body of {int(length)} bytes")
            return
        parts: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client left before sending the whole body
                return
            part = message.get("body", b"")
            size += len(part)
            if size > self.max_bytes:
                await self._refuse(send, "a body")
                return
            parts.append(part)
            more = message.get("more_body", False)
        whole = {"type": "http.request", "body": b"".join(parts), "more_body": False}
        await self._run(scope, whole, receive, send)

    async def _run(self, scope: Message, body: Message, receive: Receive, send: Send) -> None:
        """Run the application on the whole ``body``, cancelling it if the client leaves first."""
        replayed = False
        complete = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return body
            return await receive()  # after the body: the disconnect, once the client leaves

        async def watched_send(message: Message) -> None:
            nonlocal complete
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        async def client_left() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        app = asyncio.ensure_future(self.app(scope, replay, watched_send))
        left = asyncio.ensure_future(client_left())
        try:
            await asyncio.wait({app, left}, return_when=asyncio.FIRST_COMPLETED)
            if not app.done() and not complete:  # the client left: nobody will read the response
                app.cancel()
            try:
                await app
            except asyncio.CancelledError:
                if (task := asyncio.current_task()) is not None and task.cancelling():  # this request was cancelled
                    raise
        finally:
            left.cancel()
            if not app.done():  # this request itself was cancelled (the server shutting down)
                app.cancel()

    async def _refuse(self, send: Any, what: str) -> None:
        error = APIError(
            413,
            f"request body too large: {what} over this server's limit of {self.max_bytes} bytes "
            "(agentgym serve --max-body-mb)",
            code="request_too_large",
        )
        payload = json.dumps(error.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": payload, "more_body": False})

"""What every bundled site shares: per-session state behind a lock, the session cookie, the site object the
environments use, and form parsing.

A site keeps one state object per session (a cart, an inbox, a set of bookings). The environment starts a
session for each episode and hands its id to the browser as a cookie, so parallel episodes never touch each
other's state; a visitor without a known cookie is given a fresh session.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import Response

SESSION_COOKIE = "agentgym_session"
"""The cookie that names the visitor's session."""

State = TypeVar("State")


class SessionStore(Generic[State]):
    """Every session's state, made by ``new_state``. Readers use :meth:`locked` for the state of one session,
    so a site's thread and the validators' threads may work at once. At most ``max_sessions`` are kept: a new
    one beyond that drops the oldest."""

    def __init__(self, new_state: Callable[[], State], *, kind: str = "site", max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._new_state = new_state
        self._kind = kind
        self._lock = threading.Lock()
        self._sessions: dict[str, State] = {}

    def new_session(self, state: State | None = None) -> str:
        """Start a session with ``state`` (by default a fresh one); returns its token."""
        token = secrets.token_urlsafe(16)
        state = self._new_state() if state is None else state
        with self._lock:
            while len(self._sessions) >= self.max_sessions:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[token] = state
        return token

    def known(self, sid: str) -> bool:
        """Whether ``sid`` is a live session."""
        with self._lock:
            return sid in self._sessions

    def end(self, sid: str) -> None:
        """Drop the session's state; an unknown session is fine."""
        with self._lock:
            self._sessions.pop(sid, None)

    @contextmanager
    def locked(self, sid: str) -> Iterator[State]:
        """The session's state, held under the store's lock; ``KeyError`` for an unknown session. Give
        readers copies, never the state itself."""
        with self._lock:
            try:
                state = self._sessions[sid]
            except KeyError:
                raise KeyError(f"unknown {self._kind} session {sid!r}") from None
            yield state


class SessionSite(Generic[State]):
    """A bundled site: the ASGI ``app`` serving it and the ``store`` of its sessions' state; what
    :class:`agentgym.envs.web.env.Site` asks of a site. A subclass names itself and builds both."""

    name: ClassVar[str]
    session_cookie = SESSION_COOKIE

    def __init__(self, app: Any, store: SessionStore[State]) -> None:
        self.store = store
        self._app = app

    def app(self) -> Any:
        """The ASGI application."""
        return self._app

    def new_session(self, state: State | None = None) -> str:
        """A fresh session whose state is ``state`` (or a new one)."""
        return self.store.new_session(state)

    def end_session(self, session: str) -> None:
        """Drop a session's state."""
        self.store.end(session)


@dataclass(frozen=True)
class Visit:
    """The session a request belongs to; ``new`` when it was started for this request (the cookie is set)."""

    sid: str
    new: bool

    @classmethod
    def of(cls, request: Request, store: SessionStore) -> Visit:
        """The request's session, or a new one when its cookie names none."""
        sid = request.cookies.get(SESSION_COOKIE)
        if sid and store.known(sid):
            return cls(sid, False)
        return cls(store.new_session(), True)

    def keep(self, response: Response) -> Response:
        """``response``, setting the session cookie when the session is new."""
        if self.new:
            response.set_cookie(SESSION_COOKIE, self.sid, httponly=True, samesite="lax", path="/")
        return response


async def form_fields(request: Request) -> dict[str, str]:
    """The fields of a URL-encoded form post, the first value of each."""
    body = (await request.body()).decode("utf-8", "replace")
    return {key: values[0] for key, values in parse_qs(body, keep_blank_values=True).items()}


async def form_lists(request: Request) -> dict[str, list[str]]:
    """The fields of a URL-encoded form post with every value of each (check boxes sharing a name)."""
    body = (await request.body()).decode("utf-8", "replace")
    return parse_qs(body, keep_blank_values=True)

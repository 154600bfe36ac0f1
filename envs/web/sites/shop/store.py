"""Per-session shop state: each session's cart and placed orders, kept apart and safe across threads."""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class CartLine:
    """A product in a cart or an order, with the options chosen for it, how many and the price of one."""

    product_id: int
    title: str
    options: dict[str, str]
    quantity: int
    unit_price: float

    @property
    def total(self) -> float:
        """The price of the line: unit price times quantity."""
        return round(self.unit_price * self.quantity, 2)


@dataclass(frozen=True)
class Order:
    """A placed order: its number, what was bought, who to and where."""

    number: int
    lines: tuple[CartLine, ...]
    name: str
    address: str
    total: float


def lines_total(lines: Sequence[CartLine]) -> float:
    """The price of ``lines`` together."""
    return round(sum(line.total for line in lines), 2)


@dataclass
class _Session:
    cart: list[CartLine] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)


class ShopStore:
    """Every session's cart and orders. Each method holds a lock, so the app's thread and the readers'
    threads may call at once; what is returned is a copy. At most ``max_sessions`` are kept: a new one
    beyond that drops the oldest."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._sessions: dict[str, _Session] = {}
        self._numbers = itertools.count(1)

    def new_session(self) -> str:
        """Start a session with an empty cart; returns its token."""
        token = secrets.token_urlsafe(16)
        with self._lock:
            while len(self._sessions) >= self.max_sessions:
                del self._sessions[next(iter(self._sessions))]
            self._sessions[token] = _Session()
        return token

    def known(self, sid: str) -> bool:
        """Whether ``sid`` is a live session."""
        with self._lock:
            return sid in self._sessions

    def cart(self, sid: str) -> list[CartLine]:
        """The lines in the session's cart; ``KeyError`` for an unknown session."""
        with self._lock:
            return [replace(line, options=dict(line.options)) for line in self._get(sid).cart]

    def orders(self, sid: str) -> list[Order]:
        """The orders the session placed, oldest first; ``KeyError`` for an unknown session."""
        with self._lock:
            return list(self._get(sid).orders)

    def order(self, sid: str, number: int) -> Order | None:
        """The session's order with ``number``, or ``None`` (another session's orders are not found)."""
        with self._lock:
            return next((order for order in self._get(sid).orders if order.number == number), None)

    def add(self, sid: str, line: CartLine) -> None:
        """Put ``line`` in the cart; a line of the same product with the same options grows instead."""
        with self._lock:
            cart = self._get(sid).cart
            for index, old in enumerate(cart):
                if (old.product_id, old.options) == (line.product_id, line.options):
                    cart[index] = replace(old, quantity=old.quantity + line.quantity)
                    return
            cart.append(replace(line, options=dict(line.options)))

    def remove(self, sid: str, index: int) -> bool:
        """Take the cart's line at ``index`` out; ``False`` when there is no such line."""
        with self._lock:
            cart = self._get(sid).cart
            if not 0 <= index < len(cart):
                return False
            del cart[index]
            return True

    def place_order(self, sid: str, name: str, address: str) -> Order:
        """Turn the cart into an order and empty it; ``ValueError`` when the cart is empty."""
        with self._lock:
            session = self._get(sid)
            if not session.cart:
                raise ValueError("the cart is empty")
            order = Order(next(self._numbers), tuple(session.cart), name, address, lines_total(session.cart))
            session.orders.append(order)
            session.cart = []
            return order

    def end(self, sid: str) -> None:
        """Drop the session's state; an unknown session is fine."""
        with self._lock:
            self._sessions.pop(sid, None)

    def _get(self, sid: str) -> _Session:
        try:
            return self._sessions[sid]
        except KeyError:
            raise KeyError(f"unknown shop session {sid!r}") from None

"""Per-session shop state: each session's cart and placed orders, kept apart and safe across threads."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from agentgym.envs.web.sites.sessions import SessionStore


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
class ShopState:
    """One session's cart and placed orders."""

    cart: list[CartLine] = field(default_factory=list)
    orders: list[Order] = field(default_factory=list)


class ShopStore(SessionStore[ShopState]):
    """Every session's cart and orders; what is returned is a copy."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        super().__init__(ShopState, kind="shop", max_sessions=max_sessions)
        self._numbers = itertools.count(1)

    def cart(self, sid: str) -> list[CartLine]:
        """The lines in the session's cart; ``KeyError`` for an unknown session."""
        with self.locked(sid) as state:
            return [replace(line, options=dict(line.options)) for line in state.cart]

    def orders(self, sid: str) -> list[Order]:
        """The orders the session placed, oldest first; ``KeyError`` for an unknown session."""
        with self.locked(sid) as state:
            return list(state.orders)

    def order(self, sid: str, number: int) -> Order | None:
        """The session's order with ``number``, or ``None`` (another session's orders are not found)."""
        with self.locked(sid) as state:
            return next((order for order in state.orders if order.number == number), None)

    def add(self, sid: str, line: CartLine) -> None:
        """Put ``line`` in the cart; a line of the same product with the same options grows instead."""
        with self.locked(sid) as state:
            cart = state.cart
            for index, old in enumerate(cart):
                if (old.product_id, old.options) == (line.product_id, line.options):
                    cart[index] = replace(old, quantity=old.quantity + line.quantity)
                    return
            cart.append(replace(line, options=dict(line.options)))

    def remove(self, sid: str, index: int) -> bool:
        """Take the cart's line at ``index`` out; ``False`` when there is no such line."""
        with self.locked(sid) as state:
            cart = state.cart
            if not 0 <= index < len(cart):
                return False
            del cart[index]
            return True

    def place_order(self, sid: str, name: str, address: str) -> Order:
        """Turn the cart into an order and empty it; ``ValueError`` when the cart is empty."""
        with self.locked(sid) as state:
            if not state.cart:
                raise ValueError("the cart is empty")
            order = Order(next(self._numbers), tuple(state.cart), name, address, lines_total(state.cart))
            state.orders.append(order)
            state.cart = []
            return order

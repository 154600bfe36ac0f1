"""Shop: find the product an instruction describes in a bundled web shop, choose its options and buy it."""

from __future__ import annotations

import functools
from typing import Any

from agentgym.envs.web.env import WebEnv, opening
from agentgym.envs.web.sites import OracleStep
from agentgym.envs.web.sites.sessions import SessionSite
from agentgym.envs.web.sites.shop import (
    Catalog,
    Instruction,
    OraclePlan,
    ShopState,
    ShopStore,
    create_app,
    generate_catalog,
    generate_instructions,
    oracle_plan,
    score_order,
)
from agentgym.envs.web.tasks import choose_task
from agentgym.messages import Message

BUYER = {"Full name": "Alex Morgan", "Address": "12 Harbour Road, Port Ellen"}
"""What the oracle types at checkout (any name and address will do)."""


class ShopSite(SessionSite[ShopState]):
    """The shop as a :class:`~agentgym.envs.web.env.Site`: 600 generated products, 240 instructions, and
    one cart and order history per session."""

    name = "shop"
    store: ShopStore

    def __init__(self, seed: int = 0) -> None:
        self.catalog: Catalog = generate_catalog(seed)
        self.instructions: tuple[Instruction, ...] = generate_instructions(self.catalog, seed)
        store = ShopStore()
        super().__init__(create_app(self.catalog, store), store)


@functools.cache
def shop_site() -> ShopSite:
    """The shop every environment in this process uses."""
    return ShopSite()


class ShopEnv(WebEnv):
    """WebShop-style shopping in a real browser: an instruction describes a product (its category, attributes,
    options to choose and a price cap); the agent searches, filters, opens product pages, picks options, adds
    to the cart and checks out, then calls ``send_msg_to_user``.

    The reward reads the orders this episode's session placed: the best order line's share of the
    instruction's checks met (category, each attribute, each option, the price cap); success when all are.
    Difficulties: ``easy`` (category and one attribute), ``medium`` (+ one option and a price cap), ``hard``
    (two attributes, every option, a price cap). The reset option ``instruction`` (an index into the site's
    instructions) plays that one instead of drawing.
    """

    difficulties = ("easy", "medium", "hard")
    reset_options = frozenset({"instruction"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.instruction: Instruction | None = None
        self.plan: OraclePlan | None = None

    @property
    def site(self) -> ShopSite:
        return shop_site()

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.instruction = choose_task(self.site.instructions, difficulty, options, self.np_random,
                                       option="instruction")
        self.plan = oracle_plan(self.instruction, self.site.catalog)
        return opening(f"Instruction: {self.instruction.text}", await self.open_site())

    def score(self) -> tuple[float, bool]:
        assert self.instruction is not None and self.session is not None
        reward = score_order(self.instruction, self.site.store.orders(self.session), self.site.catalog)
        return reward, reward == 1.0

    def oracle_steps(self) -> list[OracleStep]:
        """Search for the planned product by its title, open it, choose its options, add it to the cart, check
        out with :data:`BUYER`'s details, then say so."""
        assert self.plan is not None
        title = self.site.catalog.product(self.plan.product_id).title
        return [
            ("fill", "textbox", "Search products", self.plan.query),
            ("click", "button", "Search", ""),
            ("click", "link", title, ""),
            *(("select_option", "combobox", option.capitalize(), value)
              for option, value in self.plan.options.items()),
            ("click", "button", "Add to cart", ""),
            ("click", "link", "Checkout", ""),
            *(("fill", "textbox", label, text) for label, text in BUYER.items()),
            ("click", "button", "Place order", ""),
            ("send_msg_to_user", "", "", "I placed the order."),
        ]

    def render_text(self) -> str:
        return self.instruction.text if self.instruction is not None else ""

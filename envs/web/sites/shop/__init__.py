"""The bundled web shop: a generated catalog, per-session carts and orders, the FastAPI site that serves them,
and the instructions whose orders are scored from the store's state."""

from agentgym.envs.web.sites.sessions import SESSION_COOKIE
from agentgym.envs.web.sites.shop.app import create_app
from agentgym.envs.web.sites.shop.catalog import (
    Catalog,
    Instruction,
    OraclePlan,
    Product,
    generate_catalog,
    generate_instructions,
    oracle_plan,
    score_order,
)
from agentgym.envs.web.sites.shop.store import CartLine, Order, ShopState, ShopStore

__all__ = [
    "SESSION_COOKIE",
    "CartLine",
    "Catalog",
    "Instruction",
    "OraclePlan",
    "Order",
    "Product",
    "ShopState",
    "ShopStore",
    "create_app",
    "generate_catalog",
    "generate_instructions",
    "oracle_plan",
    "score_order",
]

"""The shop as a FastAPI app: search, product pages, a cart and checkout, all plain HTML forms."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agentgym.envs.web.sites.sessions import Visit, form_fields
from agentgym.envs.web.sites.shop.catalog import Catalog, Product
from agentgym.envs.web.sites.shop.store import CartLine, ShopStore, lines_total

PAGE_SIZE = 10
"""Search results per page."""
MAX_QUANTITY = 10
"""The most of one product a single "Add to cart" takes."""
TEMPLATES = Path(__file__).parent / "templates"


def create_app(catalog: Catalog, store: ShopStore) -> FastAPI:
    """The shop over ``catalog``, keeping each visitor's cart and orders in ``store``."""
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                   undefined=jinja2.StrictUndefined)
    templates.filters.update(money=_money, options=_options)
    app = FastAPI(title="Shop", docs_url=None, redoc_url=None, openapi_url=None)

    def visit(request: Request) -> Visit:
        return Visit.of(request, store)

    def page(who: Visit, template: str, title: str, status: int = 200, **context: Any) -> Response:
        count = sum(line.quantity for line in store.cart(who.sid))
        html = templates.get_template(template).render(
            title=title, heading=context.pop("heading", title), cart_count=count,
            errors=context.pop("errors", ()), **context)
        return who.keep(HTMLResponse(html, status_code=status))

    def not_found(who: Visit) -> Response:
        return page(who, "not_found.html", "Not found", status=404)

    def product_page(who: Visit, product: Product, selected: dict[str, str], quantity: str,
                     errors: list[str]) -> Response:
        return page(who, "product.html", product.title, product=product, selected=selected, quantity=quantity,
                    errors=errors)

    @app.exception_handler(404)
    async def missing(request: Request, exc: Exception) -> Response:
        return not_found(visit(request))

    @app.get("/")
    async def home(request: Request) -> Response:
        return page(visit(request), "home.html", "Home", heading="Shop", q="")

    @app.get("/search")
    async def search(request: Request) -> Response:
        who, params = visit(request), request.query_params
        q, category, price_text = params.get("q", ""), params.get("category", ""), params.get("max_price", "")
        max_price = _price(price_text)
        errors = ["Max price must be a number."] if price_text.strip() and max_price is None else []
        found = [] if errors else catalog.search(q, category or None, max_price)
        pages = max(1, math.ceil(len(found) / PAGE_SIZE))
        number = min(max(_integer(params.get("page", "")) or 1, 1), pages)

        def link(to: int) -> str | None:
            if not 1 <= to <= pages or to == number:
                return None
            return "/search?" + urlencode({"q": q, "category": category, "max_price": price_text, "page": to})

        return page(who, "results.html", "Results", errors=errors, q=q, category=category,
                    max_price=price_text, categories=catalog.categories, found=len(found),
                    products=found[(number - 1) * PAGE_SIZE: number * PAGE_SIZE], page_number=number,
                    pages=pages, previous=link(number - 1), next=link(number + 1))

    @app.get("/product/{product_id}")
    async def product(request: Request, product_id: str) -> Response:
        who, found = visit(request), _find(catalog, product_id)
        if found is None:
            return not_found(who)
        return product_page(who, found, {}, "1", [])

    @app.post("/cart/add")
    async def add(request: Request) -> Response:
        who, form = visit(request), await form_fields(request)
        found = _find(catalog, form.get("product_id", ""))
        if found is None:
            return not_found(who)
        selected = {name: form.get(f"option_{name}", "") for name in found.options}
        errors = [f"Choose a {name}." for name, offered in found.options.items()
                  if selected[name] not in offered]
        quantity = _integer(form.get("quantity", ""))
        if quantity is None or not 1 <= quantity <= MAX_QUANTITY:
            errors.append(f"Quantity must be a whole number from 1 to {MAX_QUANTITY}.")
        if errors:
            return product_page(who, found, selected, form.get("quantity", ""), errors)
        store.add(who.sid, CartLine(found.id, found.title, selected, quantity, found.price))
        return who.keep(RedirectResponse("/cart", status_code=303))

    @app.get("/cart")
    async def cart(request: Request) -> Response:
        who = visit(request)
        lines = store.cart(who.sid)
        return page(who, "cart.html", "Cart", lines=lines, total=lines_total(lines))

    @app.post("/cart/remove")
    async def remove(request: Request) -> Response:
        who, form = visit(request), await form_fields(request)
        index = _integer(form.get("line", ""))
        if index is not None:
            store.remove(who.sid, index)
        return who.keep(RedirectResponse("/cart", status_code=303))

    def checkout_page(who: Visit, name: str, address: str, errors: list[str]) -> Response:
        lines = store.cart(who.sid)
        return page(who, "checkout.html", "Checkout", lines=lines, total=lines_total(lines), name=name,
                    address=address, errors=errors)

    @app.get("/checkout")
    async def checkout(request: Request) -> Response:
        return checkout_page(visit(request), "", "", [])

    @app.post("/checkout")
    async def place_order(request: Request) -> Response:
        who, form = visit(request), await form_fields(request)
        name, address = form.get("name", "").strip(), form.get("address", "").strip()
        errors = [message for message, value in (("Enter your full name.", name),
                                                 ("Enter your address.", address)) if not value]
        if not store.cart(who.sid):
            errors = ["Your cart is empty."]
        if not errors:
            try:
                order = store.place_order(who.sid, name, address)
            except ValueError:
                errors = ["Your cart is empty."]
            else:
                return who.keep(RedirectResponse(f"/order/{order.number}", status_code=303))
        return checkout_page(who, name, address, errors)

    @app.get("/order/{number}")
    async def order(request: Request, number: str) -> Response:
        who, wanted = visit(request), _integer(number)
        placed = None if wanted is None else store.order(who.sid, wanted)
        if placed is None:
            return not_found(who)
        return page(who, "order.html", "Order placed", order=placed)

    return app


def _find(catalog: Catalog, text: str) -> Product | None:
    number = _integer(text)
    try:
        return None if number is None else catalog.product(number)
    except KeyError:
        return None


def _integer(text: str) -> int | None:
    """``text`` as a whole number, or ``None``."""
    text = text.strip()
    return int(text) if re.fullmatch(r"-?[0-9]{1,9}", text) else None


def _price(text: str) -> float | None:
    """``text`` as a finite number (an optional leading "$" is fine), or ``None``."""
    try:
        value = float(text.strip().removeprefix("$"))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _money(value: float) -> str:
    return f"${value:.2f}"


def _options(options: dict[str, str]) -> str:
    """Chosen options as shown to the buyer: "Size: M, Length: 32"."""
    return ", ".join(f"{name.capitalize()}: {value}" for name, value in options.items()) or "No options"

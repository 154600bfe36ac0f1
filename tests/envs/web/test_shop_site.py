"""The bundled shop site: deterministic data, instructions whose goals and oracle plans score 1.0, the HTTP
forms end to end with per-session state, bad input, and the accessible names the browser agent uses."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import ClassVar

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.web.sites.shop import (
    SESSION_COOKIE,
    CartLine,
    Catalog,
    Instruction,
    Order,
    Product,
    ShopStore,
    create_app,
    generate_catalog,
    generate_instructions,
    oracle_plan,
    score_order,
)


@functools.cache
def data() -> tuple[Catalog, tuple[Instruction, ...]]:
    catalog = generate_catalog(0)
    return catalog, generate_instructions(catalog, 0)


def satisfies(instruction: Instruction, product: Product) -> bool:
    """The instruction's requirements, checked here apart from the code under test."""
    return (product.category == instruction.category
            and all(product.attributes[k] == v for k, v in instruction.attributes.items())
            and all(v in product.options[k] for k, v in instruction.options.items())
            and (instruction.max_price is None or product.price <= instruction.max_price))


def line_for(product: Product, options: dict[str, str], quantity: int = 1) -> CartLine:
    return CartLine(product.id, product.title, options, quantity, product.price)


def order_of(*lines: CartLine) -> Order:
    return Order(1, lines, "Alex Morgan", "12 Harbour Road", round(sum(line.total for line in lines), 2))


# data

def test_the_catalog_is_deterministic_large_varied_and_uniquely_titled():
    assert generate_catalog(7) == generate_catalog(7)
    assert generate_catalog(7) != generate_catalog(8)
    catalog, _ = data()
    products = catalog.products
    assert len(products) >= 500
    assert len({p.title for p in products}) == len(products)
    assert [p.id for p in products] == sorted({p.id for p in products})
    assert len(catalog.categories) >= 8
    assert {len(p.options) for p in products} >= {0, 1, 2}
    assert all(p.price > 0 and round(p.price, 2) == p.price and 0 <= p.rating <= 5 for p in products)
    assert all(p.attributes and p.description for p in products)
    assert catalog.product(products[5].id) is products[5]
    with pytest.raises(KeyError):
        catalog.product(10**6)


def test_instructions_are_deterministic_balanced_and_shaped_by_their_difficulty():
    catalog, instructions = data()
    assert generate_instructions(catalog, 0) == instructions
    assert generate_instructions(catalog, 1) != instructions
    assert len(instructions) >= 200
    assert [i.id for i in instructions] == list(range(len(instructions)))
    counts = Counter(i.difficulty for i in instructions)
    assert set(counts) == {"easy", "medium", "hard"} and max(counts.values()) - min(counts.values()) <= 1
    for instruction in instructions:
        category_options = set(catalog.product(instruction.goals[0]).options)
        shape = (len(instruction.attributes), len(instruction.options), instruction.max_price is not None)
        if instruction.difficulty == "easy":
            assert shape == (1, 0, False)
        elif instruction.difficulty == "medium":
            assert shape == (1, 1, True)
        else:
            assert shape[0] == 2 and shape[2] and set(instruction.options) == category_options
        for value in (instruction.category, *instruction.attributes.values(), *instruction.options.values()):
            assert value in instruction.text


def test_the_goals_are_exactly_the_products_that_satisfy_the_instruction():
    catalog, instructions = data()
    for instruction in instructions:
        assert instruction.goals
        assert instruction.goals == tuple(p.id for p in catalog.products if satisfies(instruction, p))


def test_the_oracle_plan_finds_its_product_first_and_its_order_scores_one():
    catalog, instructions = data()
    for instruction in instructions:
        plan = oracle_plan(instruction, catalog)
        product = catalog.product(plan.product_id)
        assert plan.product_id == min(instruction.goals) and plan.query == product.title
        assert catalog.search(plan.query)[0] == product
        assert set(plan.options) == set(product.options)
        assert all(value in product.options[name] for name, value in plan.options.items())
        assert score_order(instruction, [order_of(line_for(product, plan.options))], catalog) == 1.0


def test_score_order_is_zero_without_lines_partial_for_near_misses_and_takes_the_best_line():
    catalog, instructions = data()
    instruction = next(i for i in instructions if i.difficulty == "medium")
    plan = oracle_plan(instruction, catalog)
    product = catalog.product(plan.product_id)
    [(name, wanted)] = instruction.options.items()
    other = next(v for v in product.options[name] if v != wanted) if len(product.options[name]) > 1 else ""
    near = line_for(product, {**plan.options, name: other})
    stranger = next(p for p in catalog.products if p.category != instruction.category
                    and p.price > instruction.max_price)
    good = line_for(product, plan.options)
    assert score_order(instruction, [], catalog) == 0.0
    assert score_order(instruction, [order_of()], catalog) == 0.0
    assert score_order(instruction, [order_of(near)], catalog) == pytest.approx(3 / 4)
    assert score_order(instruction, [order_of(line_for(stranger, {}))], catalog) == pytest.approx(
        sum(stranger.attributes.get(k) == v for k, v in instruction.attributes.items()) / 4)
    assert score_order(instruction, [order_of(near), order_of(line_for(stranger, {}), good)], catalog) == 1.0


def test_a_product_that_does_not_offer_a_required_option_never_scores_one():
    catalog, instructions = data()
    misses = [(instruction, product) for instruction in instructions for product in catalog.products
              if satisfies(replace(instruction, options={}), product) and not satisfies(instruction, product)]
    assert misses
    for instruction, product in misses:
        line = line_for(product, {**instruction.options})
        assert score_order(instruction, [order_of(line)], catalog) < 1.0


@st.composite
def lines(draw: st.DrawFn, instruction: Instruction) -> CartLine:
    catalog, _ = data()
    goals = [catalog.product(i) for i in instruction.goals]
    near = [p for p in catalog.products if satisfies(replace(instruction, options={}), p)]
    product = draw(st.sampled_from(goals) | st.sampled_from(near) | st.sampled_from(catalog.products))
    options = {}
    for name, values in product.options.items():
        if name in instruction.options and draw(st.booleans()):
            options[name] = instruction.options[name]
        elif draw(st.booleans()):
            options[name] = draw(st.sampled_from([*values, "none"]))
    product_id = draw(st.sampled_from([product.id, product.id, -1]))
    return CartLine(product_id, product.title, options, draw(st.integers(1, 10)), product.price)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_score_order_stays_in_the_unit_interval_and_is_one_only_for_a_satisfying_line(draw):
    catalog, instructions = data()
    instruction = draw.draw(st.sampled_from(instructions))
    orders = draw.draw(st.lists(st.lists(lines(instruction), max_size=3).map(lambda ls: order_of(*ls)),
                                max_size=3))
    score = score_order(instruction, orders, catalog)
    satisfied = any(line.product_id in instruction.goals
                    and all(line.options.get(k) == v for k, v in instruction.options.items())
                    for order in orders for line in order.lines)
    assert 0.0 <= score <= 1.0
    assert (score == 1.0) == satisfied


def test_search_ranks_by_matching_words_then_id_and_filters_afterwards():
    catalog, _ = data()
    assert catalog.search("") == list(catalog.products)
    assert catalog.search("zzzz nothing") == []
    sample = catalog.products[0]
    query = " ".join((sample.attributes["color"].upper(), sample.attributes["material"], sample.category))
    wanted = set(query.lower().split())

    def count(p: Product) -> int:
        return len(wanted & set(" ".join((p.title, p.category, *p.attributes.values())).lower().split()))

    found = catalog.search(query)
    assert found == sorted((p for p in catalog.products if count(p)), key=lambda p: (-count(p), p.id))
    assert found[0] == sample and count(sample) == len(wanted)
    filtered = catalog.search(query, category="hoodie", max_price=40.0)
    assert filtered and filtered == [p for p in found if p.category == "hoodie" and p.price <= 40.0]


# the site

class Element:
    def __init__(self, tag: str, attrs: dict[str, str]) -> None:
        self.tag, self.attrs, self.parts = tag, attrs, []

    @property
    def text(self) -> str:
        return " ".join("".join(self.parts).split())


class Page(HTMLParser):
    """A parsed page: every element with its attributes and text content."""

    VOID: ClassVar[set[str]] = {"input", "meta", "br", "img", "link", "hr"}

    def __init__(self, response: httpx.Response) -> None:
        super().__init__()
        self.status, self.html = response.status_code, response.text
        self.elements: list[Element] = []
        self.open: list[Element] = []
        self.feed(response.text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.elements.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self.open and self.open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        for element in self.open:
            element.parts.append(data)

    def all(self, tag: str, **attrs: str) -> list[Element]:
        return [e for e in self.elements
                if e.tag == tag and all(e.attrs.get(k) == v for k, v in attrs.items())]

    def one(self, tag: str, text: str | None = None, **attrs: str) -> Element:
        found = [e for e in self.all(tag, **attrs) if text is None or e.text == text]
        assert found, f"no <{tag}> {text!r} {attrs} in the page"
        return found[0]

    def labelled(self, label: str) -> Element:
        """The control that the label with this text names through its ``for``."""
        target = self.one("label", label).attrs["for"]
        [control] = [e for e in self.elements if e.attrs.get("id") == target]
        return control

    @property
    def title(self) -> str:
        return self.one("title").text

    @property
    def heading(self) -> str:
        return self.one("h1").text

    @property
    def alert(self) -> str | None:
        found = self.all("div", role="alert")
        return found[0].text if found else None

    def link(self, name: str) -> str:
        return self.one("a", name).attrs["href"]


@dataclass
class Shop:
    catalog: Catalog
    instructions: tuple[Instruction, ...]
    store: ShopStore
    app: FastAPI
    client: TestClient

    @property
    def sid(self) -> str:
        return self.client.cookies[SESSION_COOKIE]

    def get(self, url: str, **params: str) -> Page:
        return Page(self.client.get(url, params=params or None))

    def post(self, url: str, **form: str) -> httpx.Response:
        return self.client.post(url, data=form, follow_redirects=False)


@pytest.fixture
def shop() -> Iterator[Shop]:
    catalog, instructions = data()
    store = ShopStore()
    app = create_app(catalog, store)
    with TestClient(app) as client:
        yield Shop(catalog, instructions, store, app, client)


def with_options(shop: Shop, count: int) -> Product:
    return next(p for p in shop.catalog.products if len(p.options) == count)


def test_a_whole_purchase_through_the_forms_is_stored_for_that_session_only(shop):
    instruction = next(i for i in shop.instructions
                       if i.difficulty == "hard" and len(shop.catalog.product(i.goals[0]).options) == 2)
    plan = oracle_plan(instruction, shop.catalog)
    product = shop.catalog.product(plan.product_id)
    home = shop.get("/")
    search = home.one("form", role="search")
    assert search.attrs["action"] == "/search" and shop.store.known(shop.sid)

    results = shop.get("/search", q=plan.query)
    page = shop.get(results.link(product.title))
    assert page.heading == product.title
    form = {e.attrs["name"]: e.attrs["value"] for e in page.all("input", type="hidden")}
    selects = {e.attrs["name"] for e in page.all("select")}
    assert selects == {f"option_{name}" for name in plan.options}
    form |= {f"option_{name}": value for name, value in plan.options.items()} | {"quantity": "2"}
    added = shop.post("/cart/add", **form)
    assert added.status_code == 303 and added.headers["location"] == "/cart"

    cart = shop.get("/cart")
    assert cart.link("Cart (2)") == "/cart"
    options = ", ".join(f"{name.capitalize()}: {value}" for name, value in plan.options.items())
    assert options in cart.html and f"Total: ${2 * product.price:.2f}" in cart.html
    checkout = shop.get(cart.link("Checkout"))
    assert checkout.heading == "Checkout"
    placed = shop.post("/checkout", name="Alex Morgan", address="12 Harbour Road\nPort Ellen")
    assert placed.status_code == 303
    number = int(placed.headers["location"].removeprefix("/order/"))
    done = shop.get(placed.headers["location"])
    assert done.heading == "Order placed" and product.title in done.html and done.link("Cart (0)")

    [order] = shop.store.orders(shop.sid)
    assert (order.number, order.name, order.address) == (number, "Alex Morgan", "12 Harbour Road\nPort Ellen")
    assert [(ln.product_id, ln.options, ln.quantity) for ln in order.lines] == [(product.id, plan.options, 2)]
    assert order.total == round(2 * product.price, 2) and shop.store.cart(shop.sid) == []
    assert score_order(instruction, shop.store.orders(shop.sid), shop.catalog) == 1.0

    with TestClient(shop.app) as other:
        empty = Page(other.get("/cart"))
        assert "Your cart is empty." in empty.html and empty.link("Cart (0)")
        assert other.cookies[SESSION_COOKIE] != shop.sid
        assert shop.store.orders(other.cookies[SESSION_COOKIE]) == []
        assert Page(other.get(f"/order/{number}")).status == 404
    shop.store.end(shop.sid)
    shop.store.end("never-was")
    assert not shop.store.known(shop.sid)


def test_unknown_pages_and_products_are_not_found(shop):
    for url in (f"/product/{10**6}", "/product/abc", "/order/1", "/nowhere"):
        page = shop.get(url)
        assert (page.status, page.title, page.heading) == (404, "Shop: Not found", "Not found")


def test_a_missing_or_invalid_option_or_quantity_is_an_alert_and_leaves_the_cart_alone(shop):
    product = with_options(shop, 1)
    [(name, values)] = product.options.items()
    good = {"product_id": str(product.id), f"option_{name}": values[0], "quantity": "1"}
    cases = [({f"option_{name}": ""}, f"Choose a {name}."), ({f"option_{name}": "nope"}, f"Choose a {name}."),
             ({"quantity": "0"}, "Quantity must be"), ({"quantity": "11"}, "Quantity must be"),
             ({"quantity": "two"}, "Quantity must be")]
    for change, message in cases:
        response = shop.post("/cart/add", **(good | change))
        page = Page(response)
        assert response.status_code == 200 and page.heading == product.title
        assert page.alert is not None and message in page.alert
        assert shop.store.cart(shop.sid) == [] and page.link("Cart (0)")
    assert shop.post("/cart/add", **good).status_code == 303
    assert len(shop.store.cart(shop.sid)) == 1


def test_checkout_with_an_empty_cart_or_a_blank_field_is_an_alert_and_places_nothing(shop):
    page = Page(shop.post("/checkout", name="Alex", address="Somewhere"))
    assert page.status == 200 and page.alert == "Your cart is empty."
    product = with_options(shop, 0)
    shop.post("/cart/add", product_id=str(product.id), quantity="1")
    blanks = (("", "Somewhere", "Enter your full name."), ("Alex", "  ", "Enter your address."),
              (" ", "", "Enter your full name. Enter your address."))
    for name, address, alert in blanks:
        page = Page(shop.post("/checkout", name=name, address=address))
        assert page.status == 200 and page.heading == "Checkout" and page.alert == alert
    assert shop.store.orders(shop.sid) == [] and len(shop.store.cart(shop.sid)) == 1


def test_a_non_numeric_max_price_is_an_alert_with_no_results(shop):
    page = shop.get("/search", q="navy", max_price="cheap")
    assert page.status == 200 and page.alert == "Max price must be a number."
    assert not [a for a in page.all("a") if a.attrs["href"].startswith("/product/")]
    capped = shop.get("/search", q="navy", category="t-shirt", max_price="30")
    prices = [float(p) for p in re.findall(r'class="price">\$([0-9.]+)<', capped.html)]
    assert capped.alert is None and prices and max(prices) <= 30


def test_removing_a_line_takes_only_that_line_out(shop):
    first, second = [p for p in shop.catalog.products if not p.options][:2]
    for product in (first, second):
        shop.post("/cart/add", product_id=str(product.id), quantity="1")
    cart = shop.get("/cart")
    assert len(cart.all("form", action="/cart/remove")) == 2
    line = re.search(rf'name="line" value="(\d+)">\s*<button type="submit">Remove {re.escape(first.title)}<',
                     cart.html)
    assert line is not None
    assert shop.post("/cart/remove", line=line.group(1)).status_code == 303
    assert [ln.product_id for ln in shop.store.cart(shop.sid)] == [second.id]
    assert shop.post("/cart/remove", line="7").status_code == 303
    assert len(shop.store.cart(shop.sid)) == 1


def test_every_page_carries_the_accessible_names_the_browser_agent_uses(shop):
    home = shop.get("/")
    assert (home.title, home.heading) == ("Shop: Home", "Shop")
    assert (home.link("Home"), home.link("Cart (0)")) == ("/", "/cart")
    assert home.all("nav") and home.labelled("Search products").attrs["name"] == "q"
    home.one("button", "Search")

    results = shop.get("/search", q="<b>navy</b>")
    assert (results.title, results.heading) == ("Shop: Results", "Results") and "<b>navy" not in results.html
    category = results.labelled("Category")
    assert category.tag == "select" and category.attrs["name"] == "category"
    first = results.all("option")[0]
    assert (first.text, first.attrs["value"]) == ("All", "")
    assert results.labelled("Max price").attrs["name"] == "max_price"
    results.one("button", "Apply filters")
    assert results.all("input", type="hidden", name="q")[0].attrs["value"] == "<b>navy</b>"
    listed = r'<a href="/product/(\d+)">([^<]+)</a> <span class="price">\$([0-9.]+)</span>'
    shown = re.findall(listed, results.html)
    expected = shop.catalog.search("<b>navy</b>")[:10]
    assert [(int(i), t.replace("&#39;", "'"), float(p)) for i, t, p in shown] == [
        (p.id, p.title, p.price) for p in expected]
    second = shop.get(results.link("Next page"))
    assert second.link("Previous page") and "Previous page" not in results.html
    assert "No products match." in shop.get("/search", q="zzzz").html

    product = with_options(shop, 2)
    page = shop.get(f"/product/{product.id}")
    assert (page.title, page.heading) == (f"Shop: {product.title}", product.title)
    assert f"Price: ${product.price:.2f}" in page.html
    for name, value in product.attributes.items():
        page.one("li", f"{name.capitalize()}: {value}")
    for name, values in product.options.items():
        select = page.labelled(name.capitalize())
        assert select.tag == "select" and select.attrs["name"] == f"option_{name}"
        choices = [e for e in page.all("option") if e.text in ("Choose…", *values)]
        assert (choices[0].text, choices[0].attrs["value"]) == ("Choose…", "")
    quantity = page.labelled("Quantity")
    assert {k: quantity.attrs[k] for k in ("name", "type", "value", "min", "max")} == {
        "name": "quantity", "type": "number", "value": "1", "min": "1", "max": "10"}
    page.one("button", "Add to cart")
    form = page.one("form", action="/cart/add")
    assert form.attrs["method"] == "post" and page.all("input", type="hidden", name="product_id")

    options = {f"option_{name}": values[0] for name, values in product.options.items()}
    shop.post("/cart/add", product_id=str(product.id), quantity="3", **options)
    cart = shop.get("/cart")
    assert (cart.title, cart.heading) == ("Shop: Cart", "Cart") and cart.link("Cart (3)")
    cart.one("button", f"Remove {product.title}")
    assert cart.link("Checkout") == "/checkout" and f"Total: ${3 * product.price:.2f}" in cart.html

    checkout = shop.get("/checkout")
    assert (checkout.title, checkout.heading) == ("Shop: Checkout", "Checkout")
    assert checkout.labelled("Full name").attrs["name"] == "name"
    address = checkout.labelled("Address")
    assert (address.tag, address.attrs["name"]) == ("textarea", "address")
    checkout.one("button", "Place order")
    assert shop.get("/cart").alert is None

"""The shop's data: a generated product catalog, shopping instructions, and the scoring of orders."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from agentgym.envs.web.sites.shop.store import CartLine, Order
from agentgym.seeding import pick

DIFFICULTIES = ("easy", "medium", "hard")
"""Instruction levels: easy names a category and one attribute; medium adds an option and a price cap; hard
names two attributes, every option of the category and a price cap."""

COLORS = ("black", "white", "navy", "grey", "red", "green", "blue", "beige", "pink", "olive")
BRANDS = ("Northwind", "Acme", "Bluepeak", "Cobalt", "Driftwood", "Evergreen", "Foxglove", "Granite",
          "Harbor", "Ironbark", "Juniper", "Kestrel")
OPENERS = ("I need", "I'm looking for", "Find me", "I want to buy", "Please find")
OPTION_PHRASES = {"size": "in size {}", "waist": "with a {} waist", "length": "in length {}",
                  "plug": "with the {} plug", "lid": "with a {} lid"}
"""How an instruction asks for each option value."""


@dataclass(frozen=True)
class Kind:
    """What the products of one category share: how text names one (``{}`` takes the adjectives), the
    attribute values, the options a buyer picks, the price range and sentences for descriptions."""

    noun: str
    attributes: dict[str, tuple[str, ...]]
    options: dict[str, tuple[str, ...]]
    price: tuple[float, float]
    notes: tuple[str, ...]


SIZES = ("XS", "S", "M", "L", "XL", "XXL")
KINDS: dict[str, Kind] = {
    "t-shirt": Kind(
        noun="{} t-shirt",
        attributes={"fit": ("slim", "regular", "relaxed"), "color": COLORS,
                    "material": ("cotton", "linen", "polyester", "merino")},
        options={"size": SIZES},
        price=(8.0, 45.0),
        notes=("Machine washable.", "Pre-shrunk fabric.", "Tagless collar."),
    ),
    "hoodie": Kind(
        noun="{} hoodie",
        attributes={"fit": ("slim", "regular", "oversized"), "color": COLORS,
                    "material": ("cotton", "fleece", "polyester")},
        options={"size": SIZES},
        price=(25.0, 90.0),
        notes=("Kangaroo pocket.", "Brushed lining.", "Ribbed cuffs."),
    ),
    "jeans": Kind(
        noun="pair of {} jeans",
        attributes={"fit": ("skinny", "slim", "straight", "relaxed"),
                    "color": ("blue", "black", "grey", "navy"),
                    "wash": ("dark-wash", "light-wash", "stonewashed", "raw")},
        options={"waist": ("28", "30", "32", "34", "36", "38"), "length": ("30", "32", "34")},
        price=(30.0, 120.0),
        notes=("Five pockets.", "Button fly.", "Stretch denim for comfort."),
    ),
    "sneakers": Kind(
        noun="pair of {} sneakers",
        attributes={"style": ("running", "court", "high-top", "slip-on"), "color": COLORS,
                    "material": ("leather", "canvas", "mesh", "suede")},
        options={"size": ("6", "7", "8", "9", "10", "11", "12")},
        price=(35.0, 160.0),
        notes=("Cushioned insole.", "Rubber outsole.", "Padded collar."),
    ),
    "backpack": Kind(
        noun="{} backpack",
        attributes={"capacity": ("15-liter", "20-liter", "25-liter", "30-liter"), "color": COLORS,
                    "material": ("nylon", "canvas", "leather", "polyester")},
        options={},
        price=(20.0, 150.0),
        notes=("Padded laptop sleeve.", "Water-resistant base.", "Two side pockets."),
    ),
    "headphones": Kind(
        noun="pair of {} headphones",
        attributes={"connectivity": ("wireless", "wired"), "color": COLORS,
                    "style": ("over-ear", "on-ear", "in-ear")},
        options={},
        price=(15.0, 300.0),
        notes=("Foldable design.", "Built-in microphone.", "Carrying case included."),
    ),
    "coffee maker": Kind(
        noun="{} coffee maker",
        attributes={"capacity": ("4-cup", "8-cup", "12-cup"), "color": ("black", "white", "red", "grey"),
                    "type": ("drip", "espresso", "pour-over", "cold-brew")},
        options={},
        price=(25.0, 250.0),
        notes=("Dishwasher-safe carafe.", "Auto shut-off.", "Reusable filter."),
    ),
    "desk lamp": Kind(
        noun="{} desk lamp",
        attributes={"light": ("warm-white", "cool-white", "dimmable"), "color": COLORS,
                    "material": ("metal", "wood", "bamboo", "plastic")},
        options={"plug": ("US", "EU", "UK")},
        price=(15.0, 120.0),
        notes=("Adjustable arm.", "Weighted base.", "Energy-saving LED."),
    ),
    "water bottle": Kind(
        noun="{} water bottle",
        attributes={"capacity": ("500ml", "750ml", "1-liter"), "color": COLORS,
                    "material": ("stainless-steel", "glass", "plastic", "aluminum")},
        options={"lid": ("straw", "sport", "screw")},
        price=(8.0, 50.0),
        notes=("Leak-proof.", "Keeps drinks cold for 24 hours.", "BPA-free."),
    ),
    "yoga mat": Kind(
        noun="{} yoga mat",
        attributes={"thickness": ("4mm", "6mm", "8mm"), "color": COLORS,
                    "material": ("cork", "rubber", "foam", "jute")},
        options={},
        price=(15.0, 110.0),
        notes=("Non-slip surface.", "Carrying strap included.", "Easy to clean."),
    ),
}
"""The categories the shop sells."""

_WORD = re.compile(r"[a-z0-9]+(?:[-'][a-z0-9]+)*")


def words(text: str) -> set[str]:
    """The lower-cased words of ``text`` (hyphenated words stay whole: "t-shirt")."""
    return set(_WORD.findall(text.lower()))


@dataclass(frozen=True)
class Product:
    """One product: its attributes describe it; its options are what the buyer picks on its page."""

    id: int
    title: str
    category: str
    price: float
    attributes: dict[str, str]
    options: dict[str, tuple[str, ...]]
    rating: float
    description: str


@dataclass(frozen=True)
class Catalog:
    """The products, looked up by id and searched by words."""

    products: tuple[Product, ...]
    _by_id: dict[int, Product] = field(init=False, repr=False, compare=False)
    _words: dict[int, set[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {product.id: product for product in self.products})
        object.__setattr__(self, "_words", {
            p.id: words(" ".join((p.title, p.category, *p.attributes.values()))) for p in self.products})

    @property
    def categories(self) -> list[str]:
        """The categories of the products, sorted."""
        return sorted({product.category for product in self.products})

    def product(self, id: int) -> Product:
        """The product with ``id``; ``KeyError`` when there is none."""
        try:
            return self._by_id[id]
        except KeyError:
            raise KeyError(f"no product with id {id!r}") from None

    def search(self, query: str, category: str | None = None,
               max_price: float | None = None) -> list[Product]:
        """Products holding any query word (in title, category or attribute values), most words first, then
        by id; an empty query matches all. Then only ``category`` and prices up to ``max_price`` are kept."""
        wanted = words(query)
        counts = {p.id: len(wanted & self._words[p.id]) for p in self.products}
        found = [p for p in self.products if counts[p.id] or not wanted]
        found.sort(key=lambda p: (-counts[p.id], p.id))
        return [p for p in found if (not category or p.category == category)
                and (max_price is None or p.price <= max_price)]


def generate_catalog(seed: int = 0, size: int = 600) -> Catalog:
    """``size`` products drawn from ``seed``, spread over every category, with unique titles (each ends in a
    unique model number)."""
    rng = np.random.default_rng(seed)
    categories = list(KINDS)
    numbers = rng.choice(np.arange(100, 100 + max(900, 2 * size)), size=size, replace=False)
    products = []
    for index in range(size):
        category = categories[index % len(categories)] if index < len(categories) else pick(rng, categories)
        products.append(_product(rng, index + 1, category, int(numbers[index])))
    return Catalog(tuple(products))


def _product(rng: np.random.Generator, id: int, category: str, number: int) -> Product:
    kind = KINDS[category]
    brand = pick(rng, BRANDS)
    attributes = {name: pick(rng, values) for name, values in kind.attributes.items()}
    options = {}
    for name, values in kind.options.items():
        count = int(rng.integers((len(values) + 1) // 2, len(values) + 1))
        chosen = sorted(int(i) for i in rng.choice(len(values), size=count, replace=False))
        options[name] = tuple(values[i] for i in chosen)
    title = " ".join((brand, *(_capital(v) for v in attributes.values()), _capital(category), str(number)))
    rating = round(float(rng.uniform(2.5, 5.0)), 1)
    description = (f"{brand} {category}: {', '.join(attributes.values())}. {pick(rng, kind.notes)} "
                   f"Rated {rating} out of 5 by our customers.")
    price = round(float(rng.uniform(*kind.price)), 2)
    return Product(id, title, category, price, attributes, options, rating, description)


@dataclass(frozen=True)
class Instruction:
    """What to buy: a category, required attribute values and option choices, a price cap, and the ids of
    every product that fits (never empty)."""

    id: int
    text: str
    category: str
    attributes: dict[str, str]
    options: dict[str, str]
    max_price: float | None
    difficulty: str
    goals: tuple[int, ...]

    def fits(self, product: Product) -> bool:
        """Whether ``product`` meets every requirement and offers every required option value."""
        return (product.category == self.category
                and all(product.attributes.get(name) == value for name, value in self.attributes.items())
                and all(value in product.options.get(name, ()) for name, value in self.options.items())
                and (self.max_price is None or product.price <= self.max_price))


def generate_instructions(catalog: Catalog, seed: int = 0, size: int = 240) -> tuple[Instruction, ...]:
    """``size`` instructions drawn from ``seed``, the difficulties equally often: each describes a product
    of ``catalog`` and lists every product that fits it."""
    rng = np.random.default_rng(seed)
    with_options = [p for p in catalog.products if p.options]
    instructions = []
    for index, difficulty in enumerate(rng.permutation(np.resize(DIFFICULTIES, size))):
        pool = catalog.products if difficulty == "easy" else with_options
        draft = _describe(rng, index, str(difficulty), pick(rng, pool))
        goals = tuple(p.id for p in catalog.products if draft.fits(p))
        instructions.append(replace(draft, goals=goals))
    return tuple(instructions)


def _describe(rng: np.random.Generator, id: int, difficulty: str, product: Product) -> Instruction:
    """An instruction (without goals) that ``product`` fits."""
    names = list(product.attributes)
    picked = set(rng.choice(names, size=2 if difficulty == "hard" else 1, replace=False).tolist())
    attributes = {name: product.attributes[name] for name in names if name in picked}
    options: dict[str, str] = {}
    max_price = None
    if difficulty != "easy":
        asked = [pick(rng, list(product.options))] if difficulty == "medium" else list(product.options)
        options = {name: pick(rng, product.options[name]) for name in asked}
        max_price = float(5 * math.ceil((product.price * float(rng.uniform(1.05, 1.6)) + 0.01) / 5))
    phrase = KINDS[product.category].noun.format(" ".join(attributes.values()))
    text = " ".join((pick(rng, OPENERS), "an" if phrase[0] in "aeiou8" else "a", phrase,
                     *(OPTION_PHRASES[name].format(value) for name, value in options.items())))
    if max_price is not None:
        text += f", under ${max_price:.0f}"
    return Instruction(id, text + ".", product.category, attributes, options, max_price, difficulty, ())


def score_order(instruction: Instruction, orders: Sequence[Order], catalog: Catalog) -> float:
    """The reward in [0, 1] for ``orders``: over every ordered line, the best share of the instruction's
    checks met (category, each attribute, each option chosen, the price cap); 0.0 without any line."""
    scores = (_score_line(instruction, line, catalog) for order in orders for line in order.lines)
    return max(scores, default=0.0)


def _score_line(instruction: Instruction, line: CartLine, catalog: Catalog) -> float:
    try:
        product = catalog.product(line.product_id)
    except KeyError:
        return 0.0
    checks = [product.category == instruction.category]
    checks += [product.attributes.get(name) == value for name, value in instruction.attributes.items()]
    checks += [line.options.get(name) == value and value in product.options.get(name, ())
               for name, value in instruction.options.items()]
    if instruction.max_price is not None:
        checks.append(product.price <= instruction.max_price)
    return sum(checks) / len(checks)


@dataclass(frozen=True)
class OraclePlan:
    """How to fulfil an instruction: search for ``query``, open ``product_id`` and pick ``options``."""

    query: str
    product_id: int
    options: dict[str, str]


def oracle_plan(instruction: Instruction, catalog: Catalog) -> OraclePlan:
    """A plan that scores 1.0: the first goal by id, found by its exact title, with the required options
    and the first offered value of every other option."""
    product = catalog.product(min(instruction.goals))
    options = {name: instruction.options.get(name, values[0]) for name, values in product.options.items()}
    return OraclePlan(product.title, product.id, options)



def _capital(text: str) -> str:
    """``text`` with each word and hyphen part capitalised: "t-shirt" -> "T-Shirt", "500ml" stays."""
    return re.sub(r"(?<![A-Za-z0-9])[a-z]", lambda match: match.group().upper(), text)

"""The booking site's data: hotels in several cities, generated from a seed, with their room types, nightly
prices, ratings and amenities, and the search that lists them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from agentgym.seeding import pick

CITIES: dict[str, int] = {"Lisbon": 110, "Porto": 90, "Seville": 95, "Barcelona": 140, "Paris": 190,
                          "Rome": 160, "Vienna": 130, "Prague": 85, "Amsterdam": 175, "Edinburgh": 125}
"""The cities and the usual nightly price of a double room there, in dollars."""
ROOM_TYPES: dict[str, tuple[int, float]] = {"Single room": (1, 0.7), "Double room": (2, 1.0),
                                            "Twin room": (2, 1.05), "Junior suite": (3, 1.75),
                                            "Family room": (4, 1.5)}
"""Each room type: how many guests it sleeps and its price relative to a double room."""
RATING_STEPS = (3.0, 3.5, 4.0, 4.5)
"""The minimum ratings results can be filtered by."""
SORTS = {"recommended": "Recommended", "price": "Price: low to high", "price_desc": "Price: high to low",
         "rating": "Rating: high to low"}
"""The orders results can be listed in: value -> label."""
ARRIVAL_TIMES = tuple(f"{hour:02d}:00" for hour in range(12, 24))
"""The arrival times a guest can give on the booking form."""
EXTRAS = ("Breakfast", "Late checkout", "Airport transfer", "Baby cot")
"""What a guest can add to a booking with a check box."""
AMENITIES = ("Free WiFi", "Pool", "Parking", "Gym", "Spa", "Restaurant", "Pets allowed", "Air conditioning")
NAME_WORDS = ("Harbour", "Garden", "Old Town", "Riverside", "Royal", "Azure", "Cedar", "Maple", "Lighthouse",
              "Palace", "Summit", "Meridian", "Olive", "Lantern", "Willow", "Crown", "Atlas", "Beacon",
              "Cobblestone", "Corner", "Courtyard", "Emerald", "Fountain", "Heritage", "Ivy", "Linden",
              "Marble", "Mosaic", "Orchard", "Pearl", "Quayside", "Saffron", "Silver", "Station", "Terrace",
              "Velvet", "Vineyard", "Bell Tower", "Citadel", "Sunrise")
NAME_KINDS = ("Hotel", "Inn", "Suites", "Lodge", "House", "Residence", "Guesthouse", "Boutique Hotel")
STREETS = ("Market Street", "Church Lane", "River Road", "Station Square", "Castle Hill", "Garden Row",
           "Harbour Walk", "Mill Street")
SIGHTS = ("the old town", "the cathedral", "the river", "the main station", "the museum quarter",
          "the central market", "the waterfront", "the botanical garden")


@dataclass(frozen=True)
class Room:
    """A room type a hotel offers: its name, how many guests it sleeps and its price per night in dollars."""

    name: str
    sleeps: int
    price: int


@dataclass(frozen=True)
class Hotel:
    """One hotel: where it is, its rating out of 5, its amenities and the room types it offers."""

    id: int
    name: str
    city: str
    address: str
    rating: float
    amenities: tuple[str, ...]
    rooms: tuple[Room, ...]
    description: str

    def room(self, name: str) -> Room | None:
        """The room type called ``name``, or ``None`` when the hotel has none."""
        return next((room for room in self.rooms if room.name == name), None)

    def cheapest(self, guests: int) -> Room | None:
        """The cheapest room type that sleeps ``guests``, or ``None`` when none is big enough."""
        fitting = [room for room in self.rooms if room.sleeps >= guests]
        return min(fitting, key=lambda room: (room.price, room.sleeps), default=None)


@dataclass(frozen=True)
class Match:
    """A hotel found by a search, with its cheapest room type for the party."""

    hotel: Hotel
    room: Room


@dataclass(frozen=True)
class Hotels:
    """Every hotel, looked up by id and searched by city, party size and filters."""

    hotels: tuple[Hotel, ...]
    _by_id: dict[int, Hotel] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {hotel.id: hotel for hotel in self.hotels})

    @property
    def cities(self) -> list[str]:
        """The cities with hotels, sorted."""
        return sorted({hotel.city for hotel in self.hotels})

    def hotel(self, id: int) -> Hotel:
        """The hotel with ``id``; ``KeyError`` when there is none."""
        try:
            return self._by_id[id]
        except KeyError:
            raise KeyError(f"no hotel with id {id!r}") from None

    def search(self, city: str, guests: int, *, max_price: float | None = None,
               min_rating: float | None = None, amenities: Sequence[str] = (),
               sort: str = "recommended") -> list[Match]:
        """The hotels of ``city`` with a room type for ``guests``, whose cheapest such room costs at most
        ``max_price`` a night, rated at least ``min_rating``, offering every amenity; in the order ``sort``
        names (one of :data:`SORTS`; "recommended" is the site's own order)."""
        found = []
        for hotel in self.hotels:
            room = hotel.cheapest(guests)
            if (hotel.city == city and room is not None and (max_price is None or room.price <= max_price)
                    and (min_rating is None or hotel.rating >= min_rating)
                    and set(amenities) <= set(hotel.amenities)):
                found.append(Match(hotel, room))
        orders = {"recommended": lambda m: m.hotel.id, "price": lambda m: (m.room.price, m.hotel.id),
                  "price_desc": lambda m: (-m.room.price, m.hotel.id),
                  "rating": lambda m: (-m.hotel.rating, m.hotel.id)}
        return sorted(found, key=orders[sort])


def generate_hotels(seed: int = 0, per_city: int = 8) -> Hotels:
    """``per_city`` hotels in each of :data:`CITIES` drawn from ``seed``, every name used once."""
    rng = np.random.default_rng(seed)
    count = per_city * len(CITIES)
    pairs = [(word, kind) for word in NAME_WORDS for kind in NAME_KINDS]
    names = [" ".join(pairs[int(i)]) for i in rng.choice(len(pairs), size=count, replace=False)]
    hotels = []
    for index, name in enumerate(names):
        city = list(CITIES)[index // per_city]
        hotels.append(_hotel(rng, index + 1, name, city))
    return Hotels(tuple(hotels))


def _hotel(rng: np.random.Generator, id: int, name: str, city: str) -> Hotel:
    level = float(rng.uniform(0.6, 1.8))
    kinds = ["Double room", *(kind for kind in ROOM_TYPES if kind != "Double room" and rng.random() < 0.6)]
    rooms = tuple(Room(kind, ROOM_TYPES[kind][0], round(CITIES[city] * level * ROOM_TYPES[kind][1]))
                  for kind in ROOM_TYPES if kind in kinds)
    chosen = rng.choice(len(AMENITIES), size=int(rng.integers(2, 7)), replace=False)
    amenities = tuple(AMENITIES[i] for i in sorted(int(i) for i in chosen))
    rating = round(min(5.0, float(rng.uniform(2.8, 4.4)) + 0.4 * (level - 0.6)), 1)
    address = f"{int(rng.integers(1, 120))} {pick(rng, STREETS)}, {city}"
    sight = pick(rng, SIGHTS)
    description = (f"A {rating:.1f}-rated stay in {city}, a short walk from {sight}, with "
                   f"{', '.join(a.lower() for a in amenities)}.")
    return Hotel(id, name, city, address, rating, amenities, rooms, description)

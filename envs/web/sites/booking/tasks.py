"""The booking site's tasks: requests to book a stay (a named hotel, or one found by constraints), with
extras, or to cancel or change an existing booking first; and the scoring of a session's bookings."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date, timedelta

import numpy as np

from agentgym.envs.web.sites.booking.hotels import (
    ARRIVAL_TIMES,
    EXTRAS,
    RATING_STEPS,
    Hotel,
    Hotels,
)
from agentgym.envs.web.sites.booking.store import Booking, BookingState, reference
from agentgym.seeding import pick

DIFFICULTIES = ("easy", "medium", "hard")
"""Task levels: easy names the hotel; medium describes it by city, price cap, rating and an amenity; hard
adds a second amenity, an arrival time, extras and a special request, or first cancels or changes one of
two existing bookings."""
HARD_KINDS = ("extras", "cancel", "change")
FIRST_DAY = date(2026, 3, 1)
"""Stays start within 300 days of this date."""
FIRST_NAMES = ("Alex", "Sam", "Jordan", "Maria", "Chen", "Priya", "Lucas", "Amara", "Noah", "Elena", "Omar",
               "Hana", "Tomas", "Grace", "Ivan", "Leila")
LAST_NAMES = ("Morgan", "Silva", "Okafor", "Novak", "Tanaka", "Haddad", "Larsen", "Rossi", "Byrne",
              "Kowalski", "Mendes", "Dubois", "Schmidt", "Patel")
OPENERS = ("Book", "Please book", "I'd like to book", "Reserve")
REQUESTS = ("a quiet room", "a high floor", "a room away from the lift", "extra pillows", "a city view",
            "a ground-floor room")
AMENITY_PHRASES = {"Free WiFi": "free WiFi", "Pool": "a pool", "Parking": "parking", "Gym": "a gym",
                   "Spa": "a spa", "Restaurant": "a restaurant", "Pets allowed": "pets allowed",
                   "Air conditioning": "air conditioning"}
"""How a request asks for each amenity."""


@dataclass(frozen=True)
class Guest:
    """Who the booking is for."""

    name: str
    email: str
    phone: str


@dataclass(frozen=True)
class Stay:
    """The new booking a task asks for: a named hotel or constraints on one, the room type, dates and party,
    and any arrival time, extras and special request; ``goals`` are the ids of every hotel that fits."""

    city: str
    hotel: str | None
    room: str
    check_in: date
    check_out: date
    guests: int
    max_price: int | None = None
    min_rating: float | None = None
    amenities: tuple[str, ...] = ()
    arrival: str | None = None
    extras: tuple[str, ...] = ()
    request: str | None = None
    goals: tuple[int, ...] = ()

    def fits(self, hotel: Hotel) -> bool:
        """Whether ``hotel`` meets every requirement and offers the room type for the party within the cap."""
        room = hotel.room(self.room)
        return (hotel.city == self.city and (self.hotel is None or hotel.name == self.hotel)
                and room is not None and room.sleeps >= self.guests
                and (self.max_price is None or room.price <= self.max_price)
                and (self.min_rating is None or hotel.rating >= self.min_rating)
                and set(self.amenities) <= set(hotel.amenities))


@dataclass(frozen=True)
class Change:
    """How an existing booking is to be moved: new dates and a new room type."""

    reference: str
    check_in: date
    check_out: date
    room: str


@dataclass(frozen=True)
class BookingTask:
    """A request: its text, the guest, the stay to book, the bookings the session starts with, and which of
    them to cancel or change first."""

    id: int
    difficulty: str
    text: str
    guest: Guest
    stay: Stay
    existing: tuple[Booking, ...] = ()
    cancel: str | None = None
    change: Change | None = None

    def initial_state(self) -> BookingState:
        """A fresh session state holding the task's existing bookings."""
        return BookingState(bookings=list(self.existing))


def generate_tasks(hotels: Hotels, seed: int = 0, size: int = 150) -> tuple[BookingTask, ...]:
    """``size`` tasks drawn from ``seed``, the difficulties equally often and the hard kinds in turn."""
    rng = np.random.default_rng(seed)
    tasks = []
    hard = 0
    for index, difficulty in enumerate(rng.permutation(np.resize(DIFFICULTIES, size))):
        guest = _guest(rng)
        if difficulty == "easy":
            task = _easy(rng, hotels, index, guest)
        elif difficulty == "medium":
            task = _constrained(rng, hotels, index, guest, "medium")
        else:
            kind = HARD_KINDS[hard % len(HARD_KINDS)]
            hard += 1
            task = (_constrained(rng, hotels, index, guest, "hard") if kind == "extras"
                    else _after_existing(rng, hotels, index, guest, kind))
        goals = tuple(hotel.id for hotel in hotels.hotels if task.stay.fits(hotel))
        tasks.append(replace(task, stay=replace(task.stay, goals=goals)))
    return tuple(tasks)


def _guest(rng: np.random.Generator) -> Guest:
    first, last = pick(rng, FIRST_NAMES), pick(rng, LAST_NAMES)
    phone = f"+44 7700 900{int(rng.integers(0, 1000)):03d}"
    return Guest(f"{first} {last}", f"{first}.{last}{int(rng.integers(1, 100))}@example.com".lower(), phone)


def _dates(rng: np.random.Generator) -> tuple[date, date]:
    check_in = FIRST_DAY + timedelta(days=int(rng.integers(0, 300)))
    return check_in, check_in + timedelta(days=int(rng.integers(1, 8)))


def _named_stay(rng: np.random.Generator, hotels: Hotels) -> Stay:
    hotel = pick(rng, hotels.hotels)
    room = pick(rng, hotel.rooms)
    check_in, check_out = _dates(rng)
    return Stay(hotel.city, hotel.name, room.name, check_in, check_out, int(rng.integers(1, room.sleeps + 1)))


def _details(stay: Stay, guest: Guest) -> str:
    party = f"{stay.guests} guest{'s' if stay.guests > 1 else ''}"
    return (f"from {stay.check_in} to {stay.check_out} for {party}. "
            f"Name: {guest.name}, email: {guest.email}, phone: {guest.phone}.")


def _easy(rng: np.random.Generator, hotels: Hotels, id: int, guest: Guest) -> BookingTask:
    stay = _named_stay(rng, hotels)
    text = (f"{pick(rng, OPENERS)} a {stay.room.lower()} at the {stay.hotel} in {stay.city} "
            f"{_details(stay, guest)}")
    return BookingTask(id, "easy", text, guest, stay)


def _constrained(rng: np.random.Generator, hotels: Hotels, id: int, guest: Guest,
                 difficulty: str) -> BookingTask:
    """A stay described by city, price cap, minimum rating and amenities; hard adds an arrival time, extras
    and a special request."""
    hotel = pick(rng, [hotel for hotel in hotels.hotels if hotel.rating >= RATING_STEPS[0]])
    room = pick(rng, hotel.rooms)
    check_in, check_out = _dates(rng)
    cap = int(10 * math.ceil(room.price * float(rng.uniform(1.0, 1.25)) / 10))
    ratings = [step for step in RATING_STEPS if step <= hotel.rating][-2:]
    wanted = 2 if difficulty == "hard" else 1
    picked = rng.choice(hotel.amenities, size=wanted, replace=False).tolist()
    amenities = tuple(amenity for amenity in hotel.amenities if amenity in picked)
    stay = Stay(hotel.city, None, room.name, check_in, check_out, int(rng.integers(1, room.sleeps + 1)), cap,
                pick(rng, ratings), amenities)
    asked = " and ".join(AMENITY_PHRASES[a] for a in amenities)
    text = (f"{pick(rng, OPENERS)} a {stay.room.lower()} for at most ${cap} a night in a hotel in "
            f"{stay.city} rated {stay.min_rating} or more with {asked}, {_details(stay, guest)}")
    if difficulty == "hard":
        picked = rng.choice(EXTRAS, size=int(rng.integers(1, 3)), replace=False).tolist()
        extras = tuple(extra for extra in EXTRAS if extra in picked)
        stay = replace(stay, arrival=pick(rng, ARRIVAL_TIMES), extras=extras, request=pick(rng, REQUESTS))
        added = " and ".join(extra.lower() for extra in extras)
        text += (f" I will arrive around {stay.arrival}. Add {added}, and ask for {stay.request} in the "
                 "special requests.")
    return BookingTask(id, difficulty, text, guest, stay)


def _after_existing(rng: np.random.Generator, hotels: Hotels, id: int, guest: Guest,
                    kind: str) -> BookingTask:
    """Two existing bookings, one of them to cancel or change (the other stays as it is), then a named stay
    with an arrival time to book."""
    existing = []
    for number in (1, 2):
        hotel = pick(rng, [h for h in hotels.hotels if len(h.rooms) >= 2])
        room = pick(rng, hotel.rooms)
        check_in, check_out = _dates(rng)
        existing.append(Booking(reference(number), hotel.id, room.name, check_in, check_out, 1, guest.name,
                                guest.email, guest.phone))
    target = pick(rng, existing)
    hotel = hotels.hotel(target.hotel_id)
    where = f"my booking at the {hotel.name} in {hotel.city} ({target.check_in} to {target.check_out})"
    stay = replace(_named_stay(rng, hotels), arrival=pick(rng, ARRIVAL_TIMES))
    then = (f"Then {pick(rng, OPENERS).lower()} a {stay.room.lower()} at the {stay.hotel} in {stay.city} "
            f"{_details(stay, guest)} "
            f"I will arrive around {stay.arrival}.")
    if kind == "cancel":
        text = f"First cancel {where} and keep my other booking. {then}"
        return BookingTask(id, "hard", text, guest, stay, tuple(existing), cancel=target.reference)
    others = [room.name for room in hotel.rooms if room.name != target.room]
    check_in = target.check_in + timedelta(days=int(rng.choice([-7, -3, -1, 1, 2, 5, 10])))
    change = Change(target.reference, check_in, check_in + timedelta(days=int(rng.integers(1, 8))),
                    pick(rng, others))
    text = (f"First change {where} to {change.check_in} to {change.check_out}, in a {change.room.lower()}, "
            f"and keep my other booking. {then}")
    return BookingTask(id, "hard", text, guest, stay, tuple(existing), change=change)


def score_bookings(task: BookingTask, bookings: Sequence[Booking]) -> float:
    """The reward in [0, 1] for a session's ``bookings``: the checks met over the checks plus the mistakes.

    The checks are those of the best new, open booking (hotel, dates, guests, room type, name, email, phone,
    and each arrival time, extra and special request asked for), then the cancellation or the change asked
    for. Mistakes are each further new open booking, each extra ticked that was not asked for, and each
    existing booking touched that the task leaves alone. Cancelled bookings count as not booked."""
    initial = {booking.reference: booking for booking in task.existing}
    current = {booking.reference: booking for booking in bookings}
    new = [booking for booking in bookings if booking.reference not in initial and not booking.cancelled]
    best = max(new, key=lambda booking: sum(_stay_checks(task, booking)), default=None)
    checks = _stay_checks(task, best)
    mistakes = max(0, len(new) - 1) + (len(set(best.extras) - set(task.stay.extras)) if best else 0)
    if task.cancel is not None:
        checks.append(current[task.cancel].cancelled if task.cancel in current else False)
    if task.change is not None:
        moved = current.get(task.change.reference)
        open_ = moved is not None and not moved.cancelled
        dates = (task.change.check_in, task.change.check_out)
        checks.append(open_ and (moved.check_in, moved.check_out) == dates)
        checks.append(open_ and moved.room == task.change.room)
    asked = {task.cancel, task.change.reference if task.change else None}
    mistakes += sum(current.get(ref) != booking for ref, booking in initial.items() if ref not in asked)
    return sum(checks) / (len(checks) + mistakes)


def _stay_checks(task: BookingTask, booking: Booking | None) -> list[bool]:
    stay, guest = task.stay, task.guest
    if booking is None:
        return [False] * (7 + (stay.arrival is not None) + len(stay.extras) + (stay.request is not None))
    checks = [booking.hotel_id in stay.goals,
              (booking.check_in, booking.check_out) == (stay.check_in, stay.check_out),
              booking.guests == stay.guests, booking.room == stay.room,
              _plain(booking.name) == _plain(guest.name), _plain(booking.email) == _plain(guest.email),
              _digits(booking.phone) == _digits(guest.phone)]
    if stay.arrival is not None:
        checks.append(booking.arrival == stay.arrival)
    checks += [extra in booking.extras for extra in stay.extras]
    if stay.request is not None:
        checks.append(_plain(stay.request) in _plain(booking.requests))
    return checks


def _plain(text: str) -> str:
    """``text`` folded for comparison: lower case, single spaces."""
    return " ".join(text.casefold().split())


def _digits(text: str) -> str:
    return re.sub(r"[^0-9]", "", text)


"""The bundled booking site without a browser: deterministic, varied data; tasks whose goals and oracle plans
hold; the validator on store states (partial credit worked out by hand); the HTTP forms end to end with their
validation, per-session state, change and cancel, and the accessible names the browser agent uses."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.web.booking import TURN_LIMIT, oracle_steps
from agentgym.envs.web.sites.booking import (
    AMENITIES,
    ARRIVAL_TIMES,
    EXTRAS,
    SESSION_COOKIE,
    Booking,
    BookingState,
    BookingStore,
    BookingTask,
    Change,
    Guest,
    Hotel,
    Hotels,
    Stay,
    create_app,
    generate_hotels,
    generate_tasks,
    score_bookings,
)
from agentgym.envs.web.sites.booking.hotels import ROOM_TYPES
from tests.envs.web.test_shop_site import Element, Page


@functools.cache
def data() -> tuple[Hotels, tuple[BookingTask, ...]]:
    hotels = generate_hotels(0)
    return hotels, generate_tasks(hotels, 0)


def fits(stay: Stay, hotel: Hotel) -> bool:
    """The stay's requirements, checked here apart from the code under test."""
    rooms = {room.name: room for room in hotel.rooms}
    room = rooms.get(stay.room)
    return (hotel.city == stay.city and stay.hotel in (None, hotel.name) and room is not None
            and room.sleeps >= stay.guests and (stay.max_price is None or room.price <= stay.max_price)
            and (stay.min_rating is None or hotel.rating >= stay.min_rating)
            and all(a in hotel.amenities for a in stay.amenities))


def booked(task: BookingTask, reference: str = "BK1001", **changes: object) -> Booking:
    """The booking that fulfils ``task``'s stay at its first goal hotel, with ``changes``."""
    stay, guest = task.stay, task.guest
    booking = Booking(reference, min(stay.goals), stay.room, stay.check_in, stay.check_out, stay.guests,
                      guest.name, guest.email, guest.phone, stay.arrival or "", stay.extras,
                      stay.request or "")
    return replace(booking, **changes)


def done_first(task: BookingTask) -> list[Booking]:
    """The task's existing bookings after the cancellation or change it asks for."""
    result = []
    for booking in task.existing:
        if booking.reference == task.cancel:
            booking = replace(booking, cancelled=True)
        if task.change is not None and booking.reference == task.change.reference:
            booking = replace(booking, check_in=task.change.check_in, check_out=task.change.check_out,
                              room=task.change.room)
        result.append(booking)
    return result


def kind(task: BookingTask) -> str:
    return "cancel" if task.cancel else "change" if task.change else "extras" if task.stay.extras else "plain"


# data

def test_hotels_are_deterministic_many_varied_and_uniquely_named():
    assert generate_hotels(7) == generate_hotels(7)
    assert generate_hotels(7) != generate_hotels(8)
    hotels, _ = data()
    assert len(hotels.hotels) >= 60 and len(hotels.cities) >= 8
    assert min(Counter(h.city for h in hotels.hotels).values()) >= 6
    assert len({h.name for h in hotels.hotels}) == len(hotels.hotels)
    assert [h.id for h in hotels.hotels] == list(range(1, len(hotels.hotels) + 1))
    for hotel in hotels.hotels:
        assert hotel.room("Double room") is not None and 0 <= hotel.rating <= 5
        assert all(room.sleeps == ROOM_TYPES[room.name][0] and room.price > 0 for room in hotel.rooms)
        assert [room.name for room in hotel.rooms] == [name for name in ROOM_TYPES if hotel.room(name)]
        assert hotel.amenities and list(hotel.amenities) == [a for a in AMENITIES if a in hotel.amenities]
        assert hotel.city in hotel.address and hotel.description
    assert len({len(h.rooms) for h in hotels.hotels}) >= 3 and len({h.amenities for h in hotels.hotels}) >= 40
    assert max(h.rating for h in hotels.hotels) - min(h.rating for h in hotels.hotels) >= 1.0
    assert {a for h in hotels.hotels for a in h.amenities} == set(AMENITIES)
    doubles = {h.city: [] for h in hotels.hotels}
    for hotel in hotels.hotels:
        doubles[hotel.city].append(hotel.room("Double room").price)
    assert doubles["Paris"] != doubles["Prague"]
    assert max(map(max, doubles.values())) > 2 * min(map(min, doubles.values()))
    assert hotels.hotel(5) is hotels.hotels[4]
    with pytest.raises(KeyError):
        hotels.hotel(10**6)


def test_tasks_are_deterministic_balanced_and_shaped_by_their_difficulty():
    hotels, tasks = data()
    assert generate_tasks(hotels, 0) == tasks
    assert generate_tasks(hotels, 1) != tasks
    assert len(tasks) >= 120 and [t.id for t in tasks] == list(range(len(tasks)))
    assert min(Counter(t.difficulty for t in tasks).values()) >= 40
    assert Counter(kind(t) for t in tasks if t.difficulty == "hard").keys() == {"extras", "cancel", "change"}
    assert min(Counter(kind(t) for t in tasks if t.difficulty == "hard").values()) >= 15
    for task in tasks:
        stay, guest = task.stay, task.guest
        constraints = (stay.max_price is not None, stay.min_rating is not None, len(stay.amenities))
        for value in (stay.city, str(stay.check_in), str(stay.check_out), stay.room.lower(), guest.name,
                      guest.email, guest.phone, *(e.lower() for e in stay.extras)):
            assert value in task.text, (task.id, value)
        assert stay.check_in < stay.check_out and f"for {stay.guests} guest" in task.text
        if task.difficulty == "easy":
            assert kind(task) == "plain" and stay.hotel in task.text and constraints == (False, False, 0)
            assert stay.arrival is None and stay.request is None and not task.existing
        elif task.difficulty == "medium":
            assert kind(task) == "plain" and stay.hotel is None and constraints == (True, True, 1)
            assert f"${stay.max_price} a night" in task.text
            assert f"rated {stay.min_rating} or more" in task.text
        elif kind(task) == "extras":
            assert stay.hotel is None and constraints == (True, True, 2) and stay.arrival and stay.request
            assert 1 <= len(stay.extras) <= 2 and stay.arrival in task.text and stay.request in task.text
            assert list(stay.extras) == [e for e in EXTRAS if e in stay.extras]
        else:
            assert stay.hotel in task.text and stay.arrival in task.text and len(task.existing) == 2
            asked = task.cancel or task.change.reference
            target = next(b for b in task.existing if b.reference == asked)
            hotel = hotels.hotel(target.hotel_id)
            assert hotel.name in task.text and f"({target.check_in} to {target.check_out})" in task.text
            if task.change is not None:
                assert task.change.room != target.room and hotel.room(task.change.room)
                assert f"to {task.change.check_in} to {task.change.check_out}" in task.text
                assert (task.change.check_in, task.change.check_out) != (target.check_in, target.check_out)
        assert all(b.name == guest.name and b.reference in ("BK1001", "BK1002") for b in task.existing)
        assert task.initial_state() == BookingState(list(task.existing))
        assert task.initial_state().bookings is not task.initial_state().bookings


def test_the_goals_are_exactly_the_hotels_that_fit_and_the_oracle_finds_the_first():
    hotels, tasks = data()
    for task in tasks:
        stay = task.stay
        assert stay.goals and stay.goals == tuple(h.id for h in hotels.hotels if fits(stay, h))
        listed = hotels.search(stay.city, stay.guests, max_price=stay.max_price, min_rating=stay.min_rating,
                               amenities=stay.amenities)
        assert min(stay.goals) in [match.hotel.id for match in listed]


def test_the_oracle_plan_fits_the_turn_limit_and_its_bookings_score_one():
    hotels, tasks = data()
    lengths = Counter()
    for task in tasks:
        steps = oracle_steps(task, hotels)
        lengths[task.difficulty] = max(lengths[task.difficulty], len(steps))
        assert steps[-1][0] == "send_msg_to_user" and ("click", "button", "Confirm booking", "") in steps
        assert ("click", "link", hotels.hotel(min(task.stay.goals)).name, "") in steps
        assert all(len(step) == 4 for step in steps)
        assert score_bookings(task, [*done_first(task), booked(task, "BK1003")]) == 1.0
    assert lengths == {"easy": 12, "medium": 16, "hard": 21} and TURN_LIMIT >= max(lengths.values()) + 8


def test_search_keeps_the_city_party_and_filters_and_sorts_as_asked():
    hotels, _ = data()
    every = hotels.search("Lisbon", 1)
    assert [m.hotel for m in every] == [h for h in hotels.hotels if h.city == "Lisbon"]
    assert all(m.room == min((r for r in m.hotel.rooms), key=lambda r: r.price) for m in every)
    family = hotels.search("Porto", 4)
    assert [m.hotel for m in family] == [h for h in hotels.hotels
                                         if h.city == "Porto" and h.room("Family room")]
    assert all(m.room.sleeps >= 4 for m in family) and hotels.search("Porto", 5) == []
    assert hotels.search("Atlantis", 1) == []
    for city in hotels.cities:
        for guests in (1, 2, 3):
            for cap, rating, amenities in ((150, None, ()), (None, 4.0, ()), (None, None, ("Pool", "Gym")),
                                           (200, 3.5, ("Free WiFi",))):
                found = hotels.search(city, guests, max_price=cap, min_rating=rating, amenities=amenities)
                expected = []
                for hotel in hotels.hotels:
                    prices = [r.price for r in hotel.rooms if r.sleeps >= guests]
                    if (hotel.city == city and prices and (cap is None or min(prices) <= cap)
                            and (rating is None or hotel.rating >= rating)
                            and set(amenities) <= set(hotel.amenities)):
                        expected.append((hotel.id, min(prices)))
                assert [(m.hotel.id, m.room.price) for m in found] == expected
    paris = hotels.search("Paris", 2)
    assert [m.room.price for m in hotels.search("Paris", 2, sort="price")] == sorted(
        m.room.price for m in paris)
    assert [m.room.price for m in hotels.search("Paris", 2, sort="price_desc")] == sorted(
        (m.room.price for m in paris), reverse=True)
    assert [m.hotel.rating for m in hotels.search("Paris", 2, sort="rating")] == sorted(
        (m.hotel.rating for m in paris), reverse=True)


# the validator

GUEST = Guest("Alex Morgan", "alex.morgan@example.com", "+44 7700 900123")
EASY = BookingTask(0, "easy", "Book ...", GUEST, Stay(
    "Lisbon", "Harbour Inn", "Double room", date(2026, 5, 3), date(2026, 5, 5), 2, goals=(4,)))
EXTRAS_TASK = BookingTask(1, "hard", "Book ...", GUEST, Stay(
    "Rome", None, "Twin room", date(2026, 7, 1), date(2026, 7, 4), 2, 150, 4.0, ("Gym", "Pool"), "18:00",
    ("Breakfast", "Late checkout"), "a quiet room", goals=(4, 7)))
EXISTING = (Booking("BK1001", 20, "Double room", date(2026, 6, 1), date(2026, 6, 3), 1, GUEST.name,
                    GUEST.email, GUEST.phone),
            Booking("BK1002", 30, "Single room", date(2026, 8, 9), date(2026, 8, 10), 1, GUEST.name,
                    GUEST.email, GUEST.phone))
LATER = replace(EASY.stay, arrival="15:00")
CANCEL_TASK = BookingTask(2, "hard", "First cancel ...", GUEST, LATER, EXISTING, cancel="BK1002")
CHANGE_TASK = BookingTask(3, "hard", "First change ...", GUEST, LATER, EXISTING,
                          change=Change("BK1001", date(2026, 6, 2), date(2026, 6, 5), "Twin room"))


def test_an_easy_booking_scores_its_share_of_seven_checks_and_each_mistake_lowers_it():
    exact = booked(EASY)
    cases = [
        ([], 0.0),
        ([exact], 1.0),
        ([replace(exact, check_out=date(2026, 5, 6))], 6 / 7),
        ([replace(exact, hotel_id=9, phone="+44 7700 900999")], 5 / 7),
        ([replace(exact, room="Twin room", guests=1, name="Alex Moran")], 4 / 7),
        ([replace(exact, name=" alex  MORGAN ", email="Alex.Morgan@Example.COM", phone="+447700900123")],
         1.0),
        ([exact, booked(EASY, "BK1002")], 7 / 8),
        ([replace(exact, hotel_id=9), booked(EASY, "BK1002")], 7 / 8),
        ([replace(exact, cancelled=True)], 0.0),
        ([replace(exact, cancelled=True), booked(EASY, "BK1002")], 1.0),
        ([replace(exact, extras=("Breakfast",))], 7 / 8),
        ([replace(exact, extras=("Breakfast", "Baby cot"), guests=3)], 6 / 9),
    ]
    for bookings, expected in cases:
        assert score_bookings(EASY, bookings) == pytest.approx(expected), bookings


def test_extras_arrival_and_the_special_request_are_checks_of_their_own():
    exact = booked(EXTRAS_TASK)
    cases = [
        ([exact], 1.0),
        ([replace(exact, hotel_id=7)], 1.0),
        ([replace(exact, hotel_id=5)], 10 / 11),
        ([replace(exact, arrival="", extras=("Breakfast",), requests="Please: a QUIET  room.")], 9 / 11),
        ([replace(exact, requests="quiet")], 10 / 11),
        ([replace(exact, extras=("Breakfast", "Late checkout", "Airport transfer"))], 11 / 12),
        ([replace(exact, arrival="19:00", extras=(), requests="")], 7 / 11),
    ]
    for bookings, expected in cases:
        assert score_bookings(EXTRAS_TASK, bookings) == pytest.approx(expected), bookings


def test_a_cancellation_is_a_check_and_touching_the_other_booking_is_a_mistake():
    first, second = EXISTING
    new = booked(CANCEL_TASK, "BK1003")
    gone = replace(second, cancelled=True)
    cases = [
        ([first, second], 0.0),
        ([first, gone], 1 / 9),
        ([first, gone, new], 1.0),
        ([replace(first, cancelled=True), second, new], 8 / 10),
        ([replace(first, cancelled=True), gone, new], 9 / 10),
        ([first, gone, new, booked(CANCEL_TASK, "BK1004")], 9 / 10),
        ([first, replace(second, room="Double room"), new], 8 / 9),
        ([first, gone, replace(new, arrival="")], 8 / 9),
    ]
    for bookings, expected in cases:
        assert score_bookings(CANCEL_TASK, bookings) == pytest.approx(expected), bookings


def test_a_change_checks_the_dates_and_the_room_of_the_open_booking():
    first, second = EXISTING
    moved = replace(first, check_in=date(2026, 6, 2), check_out=date(2026, 6, 5), room="Twin room")
    new = booked(CHANGE_TASK, "BK1003")
    cases = [
        ([first, second], 0.0),
        ([moved, second, new], 1.0),
        ([replace(moved, room="Double room"), second, new], 9 / 10),
        ([replace(moved, cancelled=True), second, new], 8 / 10),
        ([moved, replace(second, cancelled=True), new], 10 / 11),
        ([moved, second, replace(new, arrival="20:00")], 9 / 10),
        ([moved, second], 2 / 10),
    ]
    for bookings, expected in cases:
        assert score_bookings(CHANGE_TASK, bookings) == pytest.approx(expected), bookings


@st.composite
def session_bookings(draw: st.DrawFn, task: BookingTask) -> tuple[list[Booking], bool]:
    """Bookings a session may end with, and whether they are exactly what the task asks for."""
    done = done_first(task)
    result = [draw(st.sampled_from([before, after, replace(before, cancelled=True)]))
              for before, after in zip(task.existing, done, strict=True)]
    perfect = result == done
    mistakes = [{"hotel_id": 99}, {"guests": 5}, {"email": "someone@else.com"}, {"cancelled": True},
                {"extras": (*task.stay.extras, "Baby cot")}, {"check_out": date(2026, 12, 31)}]
    if task.stay.arrival:
        mistakes.append({"arrival": "23:00"})
    if task.stay.request:
        mistakes.append({"requests": ""})
    if task.stay.extras:
        mistakes.append({"extras": task.stay.extras[1:]})
    open_ = 0
    for number in range(draw(st.integers(0, 3))):
        booking = booked(task, f"BK{1003 + number}")
        if draw(st.booleans()):
            booking = replace(booking, **draw(st.sampled_from(mistakes)))
            perfect = perfect and booking.cancelled
        open_ += not booking.cancelled
        result.append(booking)
    return result, perfect and open_ == 1


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_the_score_stays_in_the_unit_interval_and_is_one_only_for_exactly_what_was_asked(draw):
    task = draw.draw(st.sampled_from([EASY, EXTRAS_TASK, CANCEL_TASK, CHANGE_TASK]))
    bookings, perfect = draw.draw(session_bookings(task))
    score = score_bookings(task, bookings)
    assert 0.0 <= score <= 1.0
    assert (score == 1.0) == perfect, bookings


# the site

@dataclass
class Site:
    hotels: Hotels
    store: BookingStore
    app: FastAPI
    client: TestClient

    @property
    def sid(self) -> str:
        return self.client.cookies[SESSION_COOKIE]

    def get(self, url: str, **params: str) -> Page:
        return Page(self.client.get(url, params=params or None))

    def post(self, url: str, data: dict[str, str | list[str]]) -> httpx.Response:
        return self.client.post(url, data=data, follow_redirects=False)


@pytest.fixture
def site() -> Iterator[Site]:
    hotels, _ = data()
    store = BookingStore()
    app = create_app(hotels, store)
    with TestClient(app) as client:
        yield Site(hotels, store, app, client)


STAY = {"check_in": "2026-05-03", "check_out": "2026-05-06", "guests": "2"}
DETAILS = {"name": "Alex Morgan", "email": "alex@example.com", "phone": "+44 7700 900123"}


def value_of(page: Page, label: str) -> str:
    """What a labelled control holds: a text box's value, a text area's text, a drop-down's chosen option."""
    control = page.labelled(label)
    if control.tag == "textarea":
        return control.text
    if control.tag == "select":
        options = _options_of(page, control)
        return next((o for o in options if "selected" in o.attrs), options[0]).attrs["value"]
    return control.attrs["value"]


def _options_of(page: Page, select: Element) -> list[Element]:
    index = page.elements.index(select)
    options = []
    for element in page.elements[index + 1:]:
        if element.tag != "option":
            break
        options.append(element)
    return options


def checked(page: Page, label: str) -> bool:
    return "checked" in page.labelled(label).attrs


def every_control_is_labelled(page: Page) -> None:
    labels = {e.attrs["for"] for e in page.all("label")}
    controls = [e for e in page.elements
                if e.tag in ("input", "select", "textarea") and e.attrs.get("type") != "hidden"]
    assert controls and all(c.attrs.get("id") in labels for c in controls)


def test_a_whole_booking_through_the_forms_is_stored_for_that_session_only(site):
    home = site.get("/")
    assert (home.title, home.heading) == ("Booking: Find a stay", "Find a stay")
    assert site.store.known(site.sid)
    form = home.one("form", role="search")
    assert (form.attrs["action"], form.attrs["method"]) == ("/search", "get")
    assert value_of(home, "City") == "" and value_of(home, "Guests") == "2"
    every_control_is_labelled(home)
    home.one("button", "Search")

    results = site.get("/search", city="Lisbon", **STAY)
    hotel = site.hotels.search("Lisbon", 2)[0].hotel
    assert results.heading == "Stays in Lisbon" and value_of(results, "Check-in") == "2026-05-03"
    page = site.get(results.link(hotel.name))
    assert page.heading == hotel.name
    page.one("p", "Your stay: 2026-05-03 to 2026-05-06, 3 nights, 2 guests.")
    room = hotel.room("Double room")
    assert f"<td>${room.price * 3}</td>" in page.html
    form_page = site.get(page.link("Book the Double room"))
    assert form_page.heading == f"Book the {hotel.name}"
    assert [value_of(form_page, label) for label in ("Room type", "Check-in", "Check-out", "Guests")] == [
        "Double room", "2026-05-03", "2026-05-06", "2"]
    every_control_is_labelled(form_page)
    response = site.post(f"/hotel/{hotel.id}/book", {
        "room": "Double room", **STAY, **DETAILS, "arrival": "18:00",
        "extras": ["Late checkout", "Breakfast"], "requests": " A quiet room "})
    assert response.status_code == 303 and response.headers["location"] == "/bookings/BK1001/confirmed"
    done = site.get(response.headers["location"])
    assert done.heading == "Booking confirmed" and "Your booking reference is BK1001." in done.html
    assert f"${room.price * 3} (3 × ${room.price})" in done.html and "Breakfast, Late checkout" in done.html

    [booking] = site.store.bookings(site.sid)
    assert booking == Booking("BK1001", hotel.id, "Double room", date(2026, 5, 3), date(2026, 5, 6), 2,
                              "Alex Morgan", "alex@example.com", "+44 7700 900123", "18:00",
                              ("Breakfast", "Late checkout"), "A quiet room")
    mine = site.get(done.link("My bookings"))
    mine.one("h2", f"BK1001: {hotel.name}, Lisbon (Confirmed)")
    assert mine.link("Change booking BK1001") == "/bookings/BK1001/change"
    mine.one("button", "Cancel booking BK1001")

    with TestClient(site.app) as other:
        assert "You have no bookings yet." in other.get("/bookings").text
        theirs = other.cookies[SESSION_COOKIE]
        assert theirs != site.sid and site.store.bookings(theirs) == []
        assert other.get("/bookings/BK1001/confirmed").status_code == 404
        assert other.get("/bookings/BK1001/change").status_code == 404
        assert other.post("/bookings/BK1001/cancel", follow_redirects=False).status_code == 404
        other.post(f"/hotel/{hotel.id}/book", data={"room": "Double room", **STAY, "guests": "1", **DETAILS})
        assert [b.reference for b in site.store.bookings(theirs)] == ["BK1001"]
    assert site.store.bookings(site.sid) == [booking]
    site.store.end(site.sid)
    assert not site.store.known(site.sid)


def test_each_booking_form_error_is_shown_and_what_was_typed_is_kept(site):
    hotel = next(h for h in site.hotels.hotels if h.room("Single room") and h.room("Family room"))
    good = {"room": "Double room", **STAY, **DETAILS, "arrival": "", "requests": ""}
    cases = [
        ({"name": " "}, ["Enter a full name."]),
        ({"email": "alex.example.com"}, ["Enter a valid email address, such as name@example.com."]),
        ({"email": "alex@example"}, ["Enter a valid email address"]),
        ({"phone": "12-34"}, ["Enter a phone number of at least 7 digits"]),
        ({"phone": "call me"}, ["Enter a phone number"]),
        ({"check_out": "2026-05-03"}, ["Check-out must be after check-in."]),
        ({"check_out": "2026-05-01"}, ["Check-out must be after check-in."]),
        ({"check_in": "03/05/2026"}, ["Enter the check-in date as YYYY-MM-DD"]),
        ({"check_out": "2026-02-30"}, ["Enter the check-out date as YYYY-MM-DD"]),
        ({"check_out": "2026-06-03"}, ["A stay can be at most 30 nights."]),
        ({"guests": "3"}, ["The Double room sleeps at most 2 guests; choose a bigger room or fewer guests."]),
        ({"room": "Single room"}, ["The Single room sleeps at most 1 guest;"]),
        ({"guests": "7"}, ["Guests must be a whole number from 1 to 6."]),
        ({"guests": "two"}, ["Guests must be"]),
        ({"room": ""}, ["Choose a room type."]),
        ({"room": "Penthouse"}, ["Choose a room type."]),
        ({"arrival": "25:00"}, ["Choose an arrival time from the list."]),
        ({"extras": ["Breakfast", "Spa day"]}, ["Extras can only be"]),
        ({"requests": "x" * 501}, ["Special requests can be at most 500 characters."]),
        ({"name": "", "email": "", "phone": "", "check_in": "", "check_out": "", "room": ""},
         ["Enter the check-in date", "Enter the check-out date", "Choose a room type.", "Enter a full name.",
          "Enter a valid email address", "Enter a phone number"]),
    ]
    for change, messages in cases:
        typed = good | {"extras": ["Late checkout"], "requests": "Near the lift", "arrival": "21:00"} | change
        response = site.post(f"/hotel/{hotel.id}/book", typed)
        page = Page(response)
        assert response.status_code == 200 and page.heading == f"Book the {hotel.name}", change
        assert page.alert is not None and [m for m in messages if m not in page.alert] == [], change
        labels = {"name": "Full name", "email": "Email", "phone": "Phone", "check_in": "Check-in",
                  "check_out": "Check-out", "requests": "Special requests"}
        for key, label in labels.items():
            shown = " ".join(typed[key].split()) if key == "requests" else typed[key]
            assert value_of(page, label) == shown, (change, key)
        arrival = typed["arrival"] if typed["arrival"] in ARRIVAL_TIMES else ""
        assert value_of(page, "Arrival time") == arrival
        assert checked(page, "Late checkout") == ("Late checkout" in typed["extras"])
        assert not checked(page, "Baby cot")
        assert site.store.bookings(site.sid) == []
    assert site.post(f"/hotel/{hotel.id}/book", good).status_code == 303
    family = good | {"room": "Family room", "guests": "4"}
    assert site.post(f"/hotel/{hotel.id}/book", family).status_code == 303
    assert [b.reference for b in site.store.bookings(site.sid)] == ["BK1001", "BK1002"]


def test_search_errors_are_alerts_without_results_and_keep_what_was_typed(site):
    cases = [({"city": ""}, "Choose a city."), ({"city": "Atlantis"}, "Choose a city."),
             ({"check_in": "tomorrow"}, "Enter the check-in date as YYYY-MM-DD, such as 2026-05-03."),
             ({"check_out": "2026-05-02"}, "Check-out must be after check-in."),
             ({"guests": "0"}, "Guests must be a whole number from 1 to 6."),
             ({"max_price": "cheap"}, "Max price per night must be an amount in dollars, such as 150.")]
    for change, alert in cases:
        typed = {"city": "Porto", **STAY, "max_price": "", "min_rating": "", "sort": "price"} | change
        page = site.get("/search", **typed)
        assert page.status == 200 and page.alert == alert, change
        assert not [a for a in page.all("a") if a.attrs["href"].startswith("/hotel/")]
        for label, key in (("Check-in", "check_in"), ("Check-out", "check_out"),
                           ("Max price per night", "max_price")):
            assert value_of(page, label) == typed[key]
        assert value_of(page, "Sort by") == "price"
    assert site.get("/search", city="Porto", **STAY, max_price="$90.50").alert is None


def test_results_list_what_the_search_finds_with_the_filters_and_order_asked(site):
    hotels = site.hotels
    page = site.get("/search", city="Rome", **STAY)
    every_control_is_labelled(page)
    assert (page.title, page.heading) == ("Booking: Results", "Stays in Rome")
    for label in ("City", "Check-in", "Check-out", "Guests", "Max price per night", "Minimum rating",
                  "Sort by", *AMENITIES):
        page.labelled(label)
    page.one("button", "Update results")
    assert [o.text for o in _options_of(page, page.labelled("Minimum rating"))] == [
        "Any", "3.0 or more", "3.5 or more", "4.0 or more", "4.5 or more"]
    queries = (({}, None, None, (), "recommended"),
               ({"max_price": "$180", "sort": "price"}, 180, None, (), "price"),
               ({"min_rating": "4.0", "sort": "rating"}, None, 4.0, (), "rating"),
               ({"amenity": ["Pool", "Gym"], "sort": "price_desc"}, None, None, ("Pool", "Gym"),
                "price_desc"),
               ({"amenity": "Sauna", "sort": "nonsense"}, None, None, (), "recommended"))
    for query, cap, rating, amenities, sort in queries:
        response = site.client.get("/search", params={"city": "Rome", **STAY, **query})
        link = r'<a href="/hotel/(\d+)\?check_in=2026-05-03&amp;check_out=2026-05-06&amp;guests=2">'
        shown = re.findall(link, response.text)
        expected = hotels.search("Rome", 2, max_price=cap, min_rating=rating, amenities=amenities, sort=sort)
        assert [int(i) for i in shown] == [m.hotel.id for m in expected], query
        listed = Page(response)
        for amenity in AMENITIES:
            assert checked(listed, amenity) == (amenity in amenities)
        if expected:
            assert f"{len(expected)} stay{'s' if len(expected) > 1 else ''} found." in response.text
            first, item = expected[0], listed.all("li")[0]
            assert item.text.startswith(f"{first.hotel.name} Rated {first.hotel.rating:.1f} out of 5")
            assert item.text.endswith(f"From ${first.room.price} a night ({first.room.name}, "
                                      f"${3 * first.room.price} for 3 nights)")
    assert "No stays match." in site.get("/search", city="Rome", **STAY, max_price="1").html


def test_a_session_started_with_bookings_changes_and_cancels_them_with_validation(site):
    _, tasks = data()
    task = next(t for t in tasks if t.change is not None)
    sid = site.store.new_session(task.initial_state())
    site.client.cookies.set(SESSION_COOKIE, sid)
    first, second = task.existing
    hotel = site.hotels.hotel(first.hotel_id)
    mine = site.get("/bookings")
    assert [e.text.split(":")[0] for e in mine.all("h2")] == ["BK1001", "BK1002"]
    page = site.get(mine.link("Change booking BK1001"))
    assert page.heading == "Change booking BK1001" and value_of(page, "Check-in") == str(first.check_in)
    assert value_of(page, "Room type") == first.room
    rooms = _options_of(page, page.labelled("Room type"))
    assert [o.attrs["value"] for o in rooms] == [r.name for r in hotel.rooms]
    every_control_is_labelled(page)
    page.one("button", "Save changes")
    new_dates = {"check_in": "2026-10-02", "check_out": "2026-10-04"}
    for typed, alert in (({"check_in": "2026-10-02", "check_out": "2026-10-01", "room": first.room},
                          "Check-out must be after check-in."),
                         (new_dates | {"room": "Penthouse"}, "Choose a room type."),
                         ({"check_in": "soon", "check_out": "2026-10-04", "room": first.room},
                          "Enter the check-in date as YYYY-MM-DD, such as 2026-05-03.")):
        refused = Page(site.post("/bookings/BK1001/change", typed))
        assert refused.status == 200 and refused.alert == alert
        assert value_of(refused, "Check-in") == typed["check_in"]
    assert site.store.bookings(sid) == list(task.existing)
    changed = site.post("/bookings/BK1001/change", new_dates | {"room": task.change.room})
    assert changed.status_code == 303
    notice = site.get(changed.headers["location"])
    assert notice.one("div", role="status").text == "Booking BK1001 is changed."
    moved = replace(first, check_in=date(2026, 10, 2), check_out=date(2026, 10, 4), room=task.change.room)
    assert site.store.bookings(sid) == [moved, second]

    cancelled = site.post("/bookings/BK1002/cancel", {})
    assert cancelled.status_code == 303
    page = site.get(cancelled.headers["location"])
    assert page.one("div", role="status").text == "Booking BK1002 is cancelled."
    other = site.hotels.hotel(second.hotel_id)
    page.one("h2", f"BK1002: {other.name}, {other.city} (Cancelled)")
    assert "Cancel booking BK1002" not in page.html and "Change booking BK1002" not in page.html
    assert site.store.bookings(sid) == [moved, replace(second, cancelled=True)]
    assert site.post("/bookings/BK1002/cancel", {}).status_code == 404
    assert site.get("/bookings/BK1002/change").status == 404
    assert site.post("/bookings/BK1002/change", new_dates | {"room": second.room}).status_code == 404
    assert site.store.bookings(sid) == [moved, replace(second, cancelled=True)]

    single = next(h for h in site.hotels.hotels if h.room("Single room") and h.room("Family room"))
    booked_now = site.post(f"/hotel/{single.id}/book",
                           {"room": "Family room", **STAY, "guests": "3", **DETAILS})
    assert booked_now.headers["location"] == "/bookings/BK1003/confirmed"
    too_small = Page(site.post("/bookings/BK1003/change", {**new_dates, "room": "Single room"}))
    assert too_small.alert == "The Single room sleeps at most 1 guest; choose a bigger room or fewer guests."
    assert site.store.booking(sid, "BK1003").room == "Family room"


def test_a_callback_request_is_validated_and_stored_for_the_session(site):
    page = site.get("/contact")
    assert page.heading == "Request a callback"
    every_control_is_labelled(page)
    refused = Page(site.post("/contact", {"name": "", "phone": "12", "time": "Midnight", "message": "Hi"}))
    assert refused.alert == ("Enter a full name. Enter a phone number of at least 7 digits (digits, spaces, "
                             "+, - and brackets only). Choose when we should call.")
    assert value_of(refused, "Message") == "Hi" and site.store.callbacks(site.sid) == []
    sent = site.post("/contact", {"name": "Sam Novak", "phone": "+420 601 123 456", "time": "Evening",
                                  "message": " About my booking "})
    assert sent.status_code == 303
    thanks = site.get(sent.headers["location"]).one("div", role="status")
    assert thanks.text == "Thank you. We will call you back."
    [callback] = site.store.callbacks(site.sid)
    assert (callback.name, callback.phone, callback.time, callback.message) == (
        "Sam Novak", "+420 601 123 456", "Evening", "About my booking")
    with TestClient(site.app) as other:
        other.get("/contact")
        assert site.store.callbacks(other.cookies[SESSION_COOKIE]) == []


def test_unknown_pages_hotels_and_bookings_are_readable_not_found_pages(site):
    for url in ("/nowhere", "/hotel/999", "/hotel/abc", "/hotel/-1", "/hotel/999/book",
                "/bookings/BK9999/confirmed", "/bookings/BK9999/change", "/bookings/BK1001/cancel"):
        page = site.get(url)
        assert page.status in (404, 405), url
        assert (page.title, page.heading) == ("Booking: Not found", "Not found"), url
        assert "There is no such page here." in page.html and page.link("Search stays") == "/"
    assert site.get("/bookings/BK1001/cancel").status == 405
    assert Page(site.post("/bookings/BK9999/cancel", {})).heading == "Not found"
    assert Page(site.post("/hotel/999/book", {"room": "Double room", **STAY, **DETAILS})).status == 404
    assert site.store.bookings(site.sid) == []


def test_the_hotel_page_without_dates_still_offers_every_room(site):
    hotel = max(site.hotels.hotels, key=lambda h: len(h.rooms))
    page = site.get(f"/hotel/{hotel.id}")
    assert "Choose your dates on the booking form." in page.html and ">Total</th>" not in page.html
    for room in hotel.rooms:
        link = page.link(f"Book the {room.name}")
        form = site.get(link)
        assert value_of(form, "Room type") == room.name and value_of(form, "Check-in") == ""
        assert value_of(form, "Guests") == "1"
    arrivals = _options_of(form, form.labelled("Arrival time"))
    assert [o.text for o in arrivals] == ["I don't know yet", *ARRIVAL_TIMES]
    assert [e.attrs["value"] for e in form.all("input", type="checkbox")] == list(EXTRAS)


def test_references_are_numbered_per_session():
    store = BookingStore()
    first, second = store.new_session(), store.new_session(BookingState([EXISTING[0]]))
    booking = booked(EASY, "")
    assert store.book(first, booking).reference == "BK1001"
    assert store.book(second, booking).reference == "BK1002"
    assert store.book(first, replace(booking, cancelled=True)).reference == "BK1002"
    assert not store.booking(first, "BK1002").cancelled
    assert store.cancel(first, "BK1002").cancelled and store.cancel(first, "BK1002") is None
    assert store.change(first, "BK9", check_in=date(2026, 1, 1), check_out=date(2026, 1, 2),
                        room="Twin room") is None
    assert [b.reference for b in store.bookings(second)] == ["BK1001", "BK1002"]
    assert booking.nights == 2

"""The booking site as a FastAPI app: search stays, filter and sort them, book a room through a validated
form, then change or cancel it under "My bookings"; and ask for a callback. Plain HTML forms, no scripts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agentgym.envs.web.sites.booking.hotels import (
    AMENITIES,
    ARRIVAL_TIMES,
    EXTRAS,
    RATING_STEPS,
    SORTS,
    Hotel,
    Hotels,
)
from agentgym.envs.web.sites.booking.store import Booking, BookingStore, Callback
from agentgym.envs.web.sites.sessions import Visit, form_fields, form_lists

TEMPLATES = Path(__file__).parent / "templates"
MAX_GUESTS = 6
MAX_NIGHTS = 30
MAX_REQUESTS = 500
"""The most characters of special requests a booking keeps."""
CALL_TIMES = ("Morning", "Afternoon", "Evening")
_RATINGS = tuple(f"{step:.1f}" for step in RATING_STEPS)
_GUESTS = {str(count): count for count in range(1, MAX_GUESTS + 1)}
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[A-Za-z]{2,}")
_PHONE = re.compile(r"\+?[0-9][0-9 ()-]{5,24}")
_AMOUNT = re.compile(r"\$?\s*([0-9]{1,6}(?:\.[0-9]{1,2})?)")


def create_app(hotels: Hotels, store: BookingStore) -> FastAPI:
    """The booking site over ``hotels``, keeping each visitor's bookings and callbacks in ``store``."""
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                   undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    templates.globals.update(
        hotel_of=hotels.hotel, room_options=_room_options,
        city_options=[("", "Choose a city…"), *((city, city) for city in hotels.cities)],
        guest_options=[(value, value) for value in _GUESTS],
        rating_options=[("", "Any"), *((value, f"{value} or more") for value in _RATINGS)],
        sort_options=list(SORTS.items()),
        arrival_options=[("", "I don't know yet"), *((time, time) for time in ARRIVAL_TIMES)],
        call_time_options=[("", "Choose…"), *((time, time) for time in CALL_TIMES)])
    app = FastAPI(title="Booking", docs_url=None, redoc_url=None, openapi_url=None)

    def visit(request: Request) -> Visit:
        return Visit.of(request, store)

    def page(who: Visit, template: str, title: str, status: int = 200, **context: Any) -> Response:
        html = templates.get_template(template).render(
            title=title, heading=context.pop("heading", title), errors=context.pop("errors", ()),
            notice=context.pop("notice", None), **context)
        return who.keep(HTMLResponse(html, status_code=status))

    def not_found(who: Visit, status: int = 404) -> Response:
        return page(who, "not_found.html", "Not found", status=status)

    @app.exception_handler(404)
    async def missing(request: Request, exc: Exception) -> Response:
        return not_found(visit(request))

    @app.exception_handler(405)
    async def wrong_method(request: Request, exc: Exception) -> Response:
        return not_found(visit(request), status=405)

    @app.get("/")
    async def home(request: Request) -> Response:
        form = {"city": "", "check_in": "", "check_out": "", "guests": "2"}
        return page(visit(request), "home.html", "Find a stay", form=form)

    @app.get("/search")
    async def search(request: Request) -> Response:
        who, params = visit(request), request.query_params
        form = {key: params.get(key, "") for key in ("city", "check_in", "check_out", "guests", "max_price",
                                                      "min_rating", "sort")}
        chosen = [amenity for amenity in params.getlist("amenity") if amenity in AMENITIES]
        sort = form["sort"] if form["sort"] in SORTS else "recommended"
        errors = [] if form["city"] in hotels.cities else ["Choose a city."]
        guests, guest_errors = _guests(form["guests"])
        max_price = _amount(form["max_price"])
        price_errors = ([] if max_price is not None or not form["max_price"].strip()
                        else ["Max price per night must be an amount in dollars, such as 150."])
        min_rating = float(form["min_rating"]) if form["min_rating"] in _RATINGS else None
        errors += _dates(form)[2] + guest_errors + price_errors
        found = [] if errors or guests is None else hotels.search(
            form["city"], guests, max_price=max_price, min_rating=min_rating, amenities=chosen, sort=sort)
        nights = 0 if errors else _nights(form)
        stay_query = urlencode({key: form[key] for key in ("check_in", "check_out", "guests")})
        heading = f"Stays in {form['city']}" if form["city"] in hotels.cities else "Search stays"
        return page(who, "results.html", "Results", heading=heading, errors=errors,
                    form=form | {"sort": sort}, amenities=AMENITIES, chosen=chosen, found=found,
                    nights=nights, stay_query=stay_query)

    @app.get("/hotel/{hotel_id}")
    async def hotel_page(request: Request, hotel_id: str) -> Response:
        who, found = visit(request), _hotel(hotels, hotel_id)
        if found is None:
            return not_found(who)
        form = {key: request.query_params.get(key, "") for key in ("check_in", "check_out", "guests")}
        return page(who, "hotel.html", found.name, hotel=found, nights=_nights(form), form=form,
                    stay_query=urlencode(form))

    def booking_form(who: Visit, hotel: Hotel, form: Mapping[str, str], extras: list[str],
                     errors: list[str]) -> Response:
        return page(who, "book.html", f"Book the {hotel.name}", hotel=hotel, form=form, extras=EXTRAS,
                    chosen=extras, errors=errors)

    @app.get("/hotel/{hotel_id}/book")
    async def book_page(request: Request, hotel_id: str) -> Response:
        who, found = visit(request), _hotel(hotels, hotel_id)
        if found is None:
            return not_found(who)
        params = request.query_params
        form = {key: params.get(key, "") for key in ("room", "check_in", "check_out", "guests")}
        form |= {"guests": form["guests"] or "1", "name": "", "email": "", "phone": "", "arrival": "",
                 "requests": ""}
        return booking_form(who, found, form, [], [])

    @app.post("/hotel/{hotel_id}/book")
    async def book(request: Request, hotel_id: str) -> Response:
        who, found = visit(request), _hotel(hotels, hotel_id)
        if found is None:
            return not_found(who)
        lists = await form_lists(request)
        keys = ("room", "check_in", "check_out", "guests", "name", "email", "phone", "arrival", "requests")
        form = {key: lists.get(key, [""])[0] for key in keys}
        extras = lists.get("extras", [])
        check_in, check_out, errors = _dates(form)
        guests, guest_errors = _guests(form["guests"])
        errors += guest_errors + _room_errors(found, form["room"], guests)
        name, email, phone = (form[key].strip() for key in ("name", "email", "phone"))
        errors += _person_errors(name, phone, email)
        if form["arrival"] not in ("", *ARRIVAL_TIMES):
            errors.append("Choose an arrival time from the list.")
        if set(extras) - set(EXTRAS):
            errors.append(f"Extras can only be: {', '.join(EXTRAS)}.")
        if len(form["requests"]) > MAX_REQUESTS:
            errors.append(f"Special requests can be at most {MAX_REQUESTS} characters.")
        if errors or check_in is None or check_out is None or guests is None:
            return booking_form(who, found, form, extras, errors)
        booking = store.book(who.sid, Booking(
            "", found.id, form["room"], check_in, check_out, guests, name, email, phone, form["arrival"],
            tuple(extra for extra in EXTRAS if extra in extras), form["requests"].strip()))
        return who.keep(RedirectResponse(f"/bookings/{booking.reference}/confirmed", status_code=303))

    @app.get("/bookings/{ref}/confirmed")
    async def confirmed(request: Request, ref: str) -> Response:
        who = visit(request)
        booking = store.booking(who.sid, ref)
        if booking is None:
            return not_found(who)
        return page(who, "confirmed.html", "Booking confirmed", booking=booking)

    @app.get("/bookings")
    async def bookings(request: Request) -> Response:
        who, params = visit(request), request.query_params
        notice = None
        if params.get("cancelled"):
            notice = f"Booking {params['cancelled']} is cancelled."
        elif params.get("changed"):
            notice = f"Booking {params['changed']} is changed."
        return page(who, "bookings.html", "My bookings", bookings=store.bookings(who.sid), notice=notice)

    @app.post("/bookings/{ref}/cancel")
    async def cancel(request: Request, ref: str) -> Response:
        who = visit(request)
        if store.cancel(who.sid, ref) is None:
            return not_found(who)
        return who.keep(RedirectResponse("/bookings?" + urlencode({"cancelled": ref}), status_code=303))

    def change_form(who: Visit, booking: Booking, form: Mapping[str, str], errors: list[str]) -> Response:
        return page(who, "change.html", f"Change booking {booking.reference}", booking=booking,
                    hotel=hotels.hotel(booking.hotel_id), form=form, errors=errors)

    def open_booking(who: Visit, ref: str) -> Booking | None:
        booking = store.booking(who.sid, ref)
        return None if booking is None or booking.cancelled else booking

    @app.get("/bookings/{ref}/change")
    async def change_page(request: Request, ref: str) -> Response:
        who = visit(request)
        booking = open_booking(who, ref)
        if booking is None:
            return not_found(who)
        form = {"check_in": str(booking.check_in), "check_out": str(booking.check_out), "room": booking.room}
        return change_form(who, booking, form, [])

    @app.post("/bookings/{ref}/change")
    async def change(request: Request, ref: str) -> Response:
        who, form = visit(request), await form_fields(request)
        booking = open_booking(who, ref)
        if booking is None:
            return not_found(who)
        form = {key: form.get(key, "") for key in ("check_in", "check_out", "room")}
        check_in, check_out, errors = _dates(form)
        errors += _room_errors(hotels.hotel(booking.hotel_id), form["room"], booking.guests)
        if errors or check_in is None or check_out is None:
            return change_form(who, booking, form, errors)
        store.change(who.sid, ref, check_in=check_in, check_out=check_out, room=form["room"])
        return who.keep(RedirectResponse("/bookings?" + urlencode({"changed": ref}), status_code=303))

    def contact_form(who: Visit, form: Mapping[str, str], errors: list[str], notice: str | None) -> Response:
        return page(who, "contact.html", "Request a callback", form=form, errors=errors, notice=notice)

    @app.get("/contact")
    async def contact_page(request: Request) -> Response:
        notice = "Thank you. We will call you back." if request.query_params.get("sent") else None
        return contact_form(visit(request), {"name": "", "phone": "", "time": "", "message": ""}, [], notice)

    @app.post("/contact")
    async def contact(request: Request) -> Response:
        who, form = visit(request), await form_fields(request)
        form = {key: form.get(key, "") for key in ("name", "phone", "time", "message")}
        name, phone = form["name"].strip(), form["phone"].strip()
        errors = _person_errors(name, phone)
        if form["time"] not in CALL_TIMES:
            errors.append("Choose when we should call.")
        if len(form["message"]) > MAX_REQUESTS:
            errors.append(f"The message can be at most {MAX_REQUESTS} characters.")
        if errors:
            return contact_form(who, form, errors, None)
        store.request_callback(who.sid, Callback(name, phone, form["time"], form["message"].strip()))
        return who.keep(RedirectResponse("/contact?sent=1", status_code=303))

    return app


def _room_options(hotel: Hotel) -> list[tuple[str, str]]:
    """The hotel's room types as drop-down options: value and label."""
    return [(room.name, f"{room.name} (sleeps {room.sleeps}, ${room.price} a night)") for room in hotel.rooms]


def _hotel(hotels: Hotels, text: str) -> Hotel | None:
    """The hotel whose id ``text`` spells, or ``None``."""
    try:
        return hotels.hotel(int(text)) if text.isdigit() and len(text) < 9 else None
    except KeyError:
        return None


def _date(text: str) -> date | None:
    """``text`` as a date written YYYY-MM-DD, or ``None``."""
    text = text.strip()
    try:
        return date.fromisoformat(text) if _DATE.fullmatch(text) else None
    except ValueError:
        return None


def _dates(form: Mapping[str, str]) -> tuple[date | None, date | None, list[str]]:
    """The check-in and check-out dates of a form, and what is wrong with them."""
    check_in, check_out = _date(form["check_in"]), _date(form["check_out"])
    errors = []
    if check_in is None:
        errors.append("Enter the check-in date as YYYY-MM-DD, such as 2026-05-03.")
    if check_out is None:
        errors.append("Enter the check-out date as YYYY-MM-DD, such as 2026-05-05.")
    if check_in is not None and check_out is not None:
        if check_out <= check_in:
            errors.append("Check-out must be after check-in.")
        elif (check_out - check_in).days > MAX_NIGHTS:
            errors.append(f"A stay can be at most {MAX_NIGHTS} nights.")
    return check_in, check_out, errors


def _nights(form: Mapping[str, str]) -> int:
    """How many nights a form's stay lasts; 0 when its dates are missing or wrong."""
    check_in, check_out, errors = _dates(form)
    return 0 if errors or check_in is None or check_out is None else (check_out - check_in).days


def _guests(text: str) -> tuple[int | None, list[str]]:
    guests = _GUESTS.get(text.strip())
    return guests, [] if guests is not None else [f"Guests must be a whole number from 1 to {MAX_GUESTS}."]


def _room_errors(hotel: Hotel, name: str, guests: int | None) -> list[str]:
    room = hotel.room(name)
    if room is None:
        return ["Choose a room type."]
    if guests is not None and guests > room.sleeps:
        guests_text = f"{room.sleeps} guest{'s' if room.sleeps > 1 else ''}"
        return [f"The {room.name} sleeps at most {guests_text}; choose a bigger room or fewer guests."]
    return []


def _person_errors(name: str, phone: str, email: str | None = None) -> list[str]:
    """What is wrong with a name, a phone number and (where the form asks for one) an email address."""
    errors = [] if name else ["Enter a full name."]
    if email is not None and not _EMAIL.fullmatch(email):
        errors.append("Enter a valid email address, such as name@example.com.")
    if not _PHONE.fullmatch(phone) or sum(c.isdigit() for c in phone) < 7:
        errors.append("Enter a phone number of at least 7 digits (digits, spaces, +, - and brackets only).")
    return errors


def _amount(text: str) -> float | None:
    """``text`` as an amount of dollars ("150", "$149.50"), or ``None``."""
    match = _AMOUNT.fullmatch(text.strip())
    return float(match.group(1)) if match else None

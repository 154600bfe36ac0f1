"""Booking: book the stay a request describes on a bundled hotel-booking site, through its search and forms,
after cancelling or changing an existing booking where the request says so."""

from __future__ import annotations

import functools
from typing import Any

from agentgym.envs.web.env import WebEnv, opening
from agentgym.envs.web.sites import OracleStep
from agentgym.envs.web.sites.booking import (
    BookingState,
    BookingStore,
    BookingTask,
    Hotels,
    create_app,
    generate_hotels,
    generate_tasks,
    score_bookings,
)
from agentgym.envs.web.sites.sessions import SessionSite
from agentgym.envs.web.tasks import choose_task
from agentgym.messages import Message

TURN_LIMIT = 30
"""Turns per episode at every difficulty (a task picked by index plays under the reset's difficulty): the
oracle needs at most 12, 16 and 21 turns for easy, medium and hard tasks (see the tests); the rest is
slack."""


class BookingSite(SessionSite[BookingState]):
    """The booking site as a :class:`~agentgym.envs.web.env.Site`: 80 generated hotels in 10 cities, 150
    tasks, and one set of bookings and callback requests per session."""

    name = "booking"
    store: BookingStore

    def __init__(self, seed: int = 0) -> None:
        self.hotels: Hotels = generate_hotels(seed)
        self.tasks: tuple[BookingTask, ...] = generate_tasks(self.hotels, seed)
        store = BookingStore()
        super().__init__(create_app(self.hotels, store), store)


@functools.cache
def booking_site() -> BookingSite:
    """The booking site every environment in this process uses."""
    return BookingSite()


class BookingEnv(WebEnv):
    """Hotel booking in a real browser: a request names a hotel or describes one (city, price cap per night,
    minimum rating, amenities), the dates, party, room type and the guest's details, and for hard tasks an
    arrival time, extras and a special request, or an existing booking to cancel or change first. The agent
    searches, filters, opens a hotel, fills the booking form, and uses "My bookings", then calls
    ``send_msg_to_user``.

    The reward reads this episode's session: the share of the task's checks met by its bookings, lowered by
    each mistake (a second booking, an extra not asked for, a booking touched that should be left alone); see
    :func:`~agentgym.envs.web.sites.booking.score_bookings`. Success when every check is met without mistakes.
    The reset option ``task`` (an index into the site's tasks) plays that one instead of drawing.
    """

    difficulties = ("easy", "medium", "hard")
    reset_options = frozenset({"task"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task: BookingTask | None = None

    @property
    def site(self) -> BookingSite:
        return booking_site()

    def turn_limit(self, difficulty: str) -> int:
        return TURN_LIMIT

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.task = choose_task(self.site.tasks, difficulty, options, self.np_random)
        return opening(f"Request: {self.task.text}", await self.open_site(self.task.initial_state()))

    def score(self) -> tuple[float, bool]:
        assert self.task is not None and self.session is not None
        reward = score_bookings(self.task, self.site.store.bookings(self.session))
        return reward, reward == 1.0

    def oracle_steps(self) -> list[OracleStep]:
        assert self.task is not None
        return oracle_steps(self.task, self.site.hotels)

    def render_text(self) -> str:
        if self.task is None:
            return ""
        lines = [f"Request: {self.task.text}"]
        if self.session is not None and self.site.store.known(self.session):
            for booking in self.site.store.bookings(self.session):
                hotel = self.site.hotels.hotel(booking.hotel_id)
                state = "cancelled" if booking.cancelled else "confirmed"
                lines.append(f"{booking.reference} ({state}): {hotel.name}, {booking.room}, "
                             f"{booking.check_in} to {booking.check_out}, {booking.guests} guest(s)")
        return "\n".join(lines)


def oracle_steps(task: BookingTask, hotels: Hotels) -> list[OracleStep]:
    """Each turn's action of a perfect player as (tool, role, accessible name, value): cancel or change the
    existing booking under "My bookings", search the city, apply the task's filters, open the first hotel that
    fits, book the room with every detail asked for, then say so."""
    stay = task.stay
    steps: list[OracleStep] = []
    if task.cancel is not None:
        steps += [("click", "link", "My bookings", ""),
                  ("click", "button", f"Cancel booking {task.cancel}", ""),
                  ("click", "link", "Search stays", "")]
    if task.change is not None:
        change = task.change
        steps += [("click", "link", "My bookings", ""),
                  ("click", "link", f"Change booking {change.reference}", ""),
                  ("fill", "textbox", "Check-in", str(change.check_in)),
                  ("fill", "textbox", "Check-out", str(change.check_out)),
                  ("select_option", "combobox", "Room type", change.room),
                  ("click", "button", "Save changes", ""), ("click", "link", "Search stays", "")]
    steps += [("select_option", "combobox", "City", stay.city),
              ("fill", "textbox", "Check-in", str(stay.check_in)),
              ("fill", "textbox", "Check-out", str(stay.check_out)),
              ("select_option", "combobox", "Guests", str(stay.guests)), ("click", "button", "Search", "")]
    if stay.hotel is None:
        if stay.max_price is not None:
            steps.append(("fill", "textbox", "Max price per night", str(stay.max_price)))
        if stay.min_rating is not None:
            steps.append(("select_option", "combobox", "Minimum rating", f"{stay.min_rating:.1f}"))
        steps += [("click", "checkbox", amenity, "") for amenity in stay.amenities]
        steps.append(("click", "button", "Update results", ""))
    guest, hotel = task.guest, hotels.hotel(min(stay.goals))
    steps += [("click", "link", hotel.name, ""), ("click", "link", f"Book the {stay.room}", ""),
              ("fill", "textbox", "Full name", guest.name), ("fill", "textbox", "Email", guest.email),
              ("fill", "textbox", "Phone", guest.phone)]
    if stay.arrival is not None:
        steps.append(("select_option", "combobox", "Arrival time", stay.arrival))
    steps += [("click", "checkbox", extra, "") for extra in stay.extras]
    if stay.request is not None:
        steps.append(("fill", "textbox", "Special requests", stay.request))
    steps += [("click", "button", "Confirm booking", ""),
              ("send_msg_to_user", "", "", "The booking is done.")]
    return steps

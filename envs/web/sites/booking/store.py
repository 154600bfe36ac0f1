"""Per-session booking state: each session's bookings (cancelled ones kept, marked) and callback requests."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import date

from agentgym.envs.web.sites.sessions import SessionStore


@dataclass(frozen=True)
class Booking:
    """A stay booked at a hotel: its reference, the room type, dates and party, the guest's details, the
    extras asked for, and whether it was cancelled."""

    reference: str
    hotel_id: int
    room: str
    check_in: date
    check_out: date
    guests: int
    name: str
    email: str
    phone: str
    arrival: str = ""
    extras: tuple[str, ...] = ()
    requests: str = ""
    cancelled: bool = False

    @property
    def nights(self) -> int:
        """How many nights the stay lasts."""
        return (self.check_out - self.check_in).days


@dataclass(frozen=True)
class Callback:
    """A request to be called back: who, at which number, when, and about what."""

    name: str
    phone: str
    time: str
    message: str


@dataclass
class BookingState:
    """One session's bookings, oldest first, and its callback requests."""

    bookings: list[Booking] = field(default_factory=list)
    callbacks: list[Callback] = field(default_factory=list)


def reference(number: int) -> str:
    """The reference of a session's ``number``-th booking (from 1): "BK1001", "BK1002", ..."""
    return f"BK{1000 + number}"


class BookingStore(SessionStore[BookingState]):
    """Every session's bookings and callback requests. References are numbered per session, so an episode
    sees the same ones whatever runs beside it."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        super().__init__(BookingState, kind="booking", max_sessions=max_sessions)

    def bookings(self, sid: str) -> list[Booking]:
        """The session's bookings, oldest first; ``KeyError`` for an unknown session."""
        with self.locked(sid) as state:
            return list(state.bookings)

    def booking(self, sid: str, ref: str) -> Booking | None:
        """The session's booking with reference ``ref``, or ``None`` (another session's are not found)."""
        with self.locked(sid) as state:
            return next((booking for booking in state.bookings if booking.reference == ref), None)

    def book(self, sid: str, booking: Booking) -> Booking:
        """Store ``booking`` under the session's next reference; the stored booking."""
        with self.locked(sid) as state:
            taken = {old.reference for old in state.bookings}
            number = len(state.bookings) + 1
            while reference(number) in taken:
                number += 1
            stored = replace(booking, reference=reference(number), cancelled=False)
            state.bookings.append(stored)
            return stored

    def change(self, sid: str, ref: str, *, check_in: date, check_out: date, room: str) -> Booking | None:
        """Move the booking ``ref`` to new dates and a room type; ``None`` when it is not an open booking."""
        return self._update(sid, ref, check_in=check_in, check_out=check_out, room=room)

    def cancel(self, sid: str, ref: str) -> Booking | None:
        """Cancel the booking ``ref``; ``None`` when it is not an open booking."""
        return self._update(sid, ref, cancelled=True)

    def request_callback(self, sid: str, callback: Callback) -> None:
        """Keep a callback request."""
        with self.locked(sid) as state:
            state.callbacks.append(callback)

    def callbacks(self, sid: str) -> list[Callback]:
        """The session's callback requests, oldest first."""
        with self.locked(sid) as state:
            return list(state.callbacks)

    def _update(self, sid: str, ref: str, **changes: object) -> Booking | None:
        with self.locked(sid) as state:
            for index, booking in enumerate(state.bookings):
                if booking.reference == ref and not booking.cancelled:
                    state.bookings[index] = replace(booking, **changes)
                    return state.bookings[index]
            return None

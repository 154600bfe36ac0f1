"""The bundled booking site: generated hotels, per-session bookings and callback requests, the FastAPI site
that serves them, and the tasks whose bookings are scored from the store's state."""

from agentgym.envs.web.sites.booking.app import create_app
from agentgym.envs.web.sites.booking.hotels import (
    AMENITIES,
    ARRIVAL_TIMES,
    EXTRAS,
    Hotel,
    Hotels,
    Match,
    Room,
    generate_hotels,
)
from agentgym.envs.web.sites.booking.store import Booking, BookingState, BookingStore, Callback
from agentgym.envs.web.sites.booking.tasks import (
    BookingTask,
    Change,
    Guest,
    Stay,
    generate_tasks,
    score_bookings,
)
from agentgym.envs.web.sites.sessions import SESSION_COOKIE

__all__ = [
    "AMENITIES",
    "ARRIVAL_TIMES",
    "EXTRAS",
    "SESSION_COOKIE",
    "Booking",
    "BookingState",
    "BookingStore",
    "BookingTask",
    "Callback",
    "Change",
    "Guest",
    "Hotel",
    "Hotels",
    "Match",
    "Room",
    "Stay",
    "create_app",
    "generate_hotels",
    "generate_tasks",
    "score_bookings",
]

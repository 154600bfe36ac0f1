"""Generated mailboxes: an owner, colleagues, friends, vendors and services, and their conversations
(invoices, meetings, shipping notices, travel bookings, newsletters, security codes, reports, requests, chat),
drawn from a seed together with the facts each conversation states."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TypeVar

import numpy as np

from agentgym.envs.web.sites.mail.store import ARCHIVE, DRAFTS, INBOX, SENT, TRASH, Mail, Mailbox, Person
from agentgym.seeding import pick

T = TypeVar("T")

FIRST_NAMES = ("Dana", "Priya", "Marco", "Lena", "Tomas", "Aisha", "Jonas", "Mei", "Oscar", "Nadia", "Felix",
               "Sofia", "Ravi", "Clara", "Hugo", "Ingrid", "Samir", "Yuki", "Elena", "Kofi", "Hannah",
               "Diego", "Amara", "Lukas", "Zoe", "Mateo", "Freya", "Idris", "Noor", "Pablo", "Greta", "Omar",
               "Leila", "Anton", "Maya", "Theo", "Rosa", "Emil", "Ines", "Victor")
LAST_NAMES = ("Reyes", "Shah", "Rossi", "Ortiz", "Novak", "Bello", "Berg", "Chen", "Lindqvist", "Haddad",
              "Wagner", "Costa", "Iyer", "Meyer", "Laurent", "Dahl", "Nasser", "Tanaka", "Petrova", "Mensah",
              "Fischer", "Alvarez", "Okafor", "Keller", "Moreau", "Silva", "Jensen", "Rahman", "Karim",
              "Ruiz", "Hoffmann", "Farouk", "Said", "Varga", "Kaur", "Brennan", "Santos", "Holm", "Duarte",
              "Weiss")
COMPANIES = (("Brightline", "brightline.io"), ("Lumen Labs", "lumenlabs.com"),
             ("Tidewater Group", "tidewater.co"), ("Copperleaf", "copperleaf.com"),
             ("Harbor Analytics", "harbor-analytics.com"))
"""Where the owner and their colleagues work."""
VENDORS = (("ACME Supplies", "acme-supplies.com"), ("Northwind Traders", "northwind-traders.com"),
           ("Globex Office", "globex-office.com"), ("Initech Print", "initech-print.com"),
           ("Vandelay Imports", "vandelay.com"), ("Bluth Catering", "bluth-catering.com"))
FRIEND_DOMAINS = ("mailbox.org", "fastmail.com", "posteo.net")
SHOPS = (("Gadget Hub", "orders@gadgethub.com"), ("ShopRight", "orders@shopright.com"),
         ("Book Nook", "hello@booknook.com"), ("Outdoor Depot", "orders@outdoordepot.com"))
ITEMS = ("wireless keyboard", "desk lamp", "running shoes", "coffee grinder", "hiking backpack",
         "monitor stand", "travel mug", "noise-cancelling headset", "yoga mat", "cookbook", "rain jacket",
         "phone charger")
CARRIERS = (("UPS", "1Z"), ("DHL", "JD"), ("FedEx", "FX"), ("Royal Mail", "RM"))
"""Carriers and the letters their tracking numbers start with."""
AIRLINES = (("SkyWays", "bookings@skyways.com", "SW"), ("Blue Jet", "travel@bluejet.com", "BJ"),
            ("Northern Air", "reservations@northernair.com", "NA"))
CITIES = ("Lisbon", "Oslo", "Madrid", "Vienna", "Dublin", "Prague", "Athens", "Helsinki", "Rome", "Zurich")
NEWSLETTERS = (
    ("The Weekly Byte", "news@weeklybyte.com", ("Smaller chips, bigger models", "The state of open source",
                                                 "Ten tools for remote teams", "What is new in browsers")),
    ("Garden Monthly", "hello@gardenmonthly.com", ("Planting tomatoes early", "Herbs on a balcony",
                                                    "Composting made simple", "Roses that survive winter")),
    ("City Runner", "digest@cityrunner.org", ("Training for your first 10k", "The best park loops",
                                               "Shoes for wet weather", "Stretching after a long run")),
    ("Cook's Corner", "letters@cookscorner.com", ("Five soups for cold evenings", "Baking bread at home",
                                                   "A week of quick lunches", "Spices worth buying")),
)
SECURITY = (("SecureBank", "no-reply@securebank.com"), ("CloudDrive", "security@clouddrive.com"),
            ("PayFlow", "alerts@payflow.com"))
TOPICS = ("budget review", "product roadmap", "hiring plan", "quarterly planning", "website redesign",
          "client onboarding", "vendor contracts", "team offsite", "security audit", "sales forecast")
ROOMS = ("Room B2", "Room 4.12", "the Harbor room", "the Maple room", "the Atrium", "Room 3A",
         "the Library room")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
REPORTS = ("marketing", "sales", "operations", "support", "finance", "research")
USER_FOLDERS = ("Receipts", "Projects", "Family", "Travel plans", "Clients", "Finance")
"""Folders an owner may have made before the episode."""
CHATS = (("Lunch on Friday?", "Are you free for lunch on Friday? The noodle place by the station opened."),
         ("Photos from the weekend", "I finally sorted the photos from the lake. The sunsets came out well."),
         ("Book club on Thursday", "We are meeting at my place on Thursday. Bring the book and a snack."),
         ("Hiking this Sunday?", "The weather looks good for Sunday. Want to try the ridge trail?"),
         ("Concert tickets", "I got two tickets for the jazz concert next month. Interested?"))
NOTES = (("Notes from today", "Here are my notes from today's call. The client wants a draft next week."),
         ("Slides for the client call", "I put the slides in the shared drive. Please add your section."),
         ("Parking during the works", "The garage is closed next week, so please use the visitor spots."))
ASKED = {"travel": ("code", "Booking code for {city}?",
                    "could you send me the booking code for the {city} flight? I need it for my report."),
         "shipping": ("tracking", "Tracking number for the {item}?",
                      "do you have the tracking number for the {item} order? I want to see when it arrives."),
         "invoice": ("amount", "Amount of invoice {invoice}?",
                     "how much do we owe on invoice {invoice} from {vendor}? I am closing the books."),
         "meeting": ("room", "Where is the {topic} meeting?",
                     "which room is the {topic} meeting with {host} in? I would like to join.")}
"""What a colleague may ask about a conversation: the fact, the request's subject and its question."""


@dataclass(frozen=True)
class Thread:
    """A generated conversation: its kind, its messages' ids (oldest first), the facts it states, and for a
    request, the index of the thread it asks about."""

    kind: str
    ids: tuple[int, ...]
    facts: dict[str, str]
    about: int | None = None


@dataclass(frozen=True)
class Generated:
    """A mailbox with the threads it was made of."""

    mailbox: Mailbox
    threads: tuple[Thread, ...]


@dataclass
class _Message:
    """A message before it has an id and a date: ``key`` orders it in time."""

    key: float
    thread: int
    folder: str
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    cc: tuple[str, ...] = ()
    draft: bool = False


@dataclass
class _Draw:
    """The state of one generation: the random source, the people, and what was drawn so far."""

    rng: np.random.Generator
    owner: Person
    colleagues: list[Person]
    friends: list[Person]
    start: datetime
    services: list[Person] = field(default_factory=list)
    messages: list[_Message] = field(default_factory=list)
    threads: list[tuple[str, list[int], dict[str, str], int | None]] = field(default_factory=list)
    used: set[str] = field(default_factory=set)

    def sample(self, options: Sequence[T], count: int) -> list[T]:
        return [options[int(i)] for i in self.rng.choice(len(options), size=count, replace=False)]

    def fresh(self, make: Callable[[], str]) -> str:
        """A value from ``make()`` not drawn before in this mailbox (codes, numbers, times never repeat)."""
        while (value := make()) in self.used:
            pass
        self.used.add(value)
        return value

    def digits(self, count: int) -> str:
        return str(int(self.rng.integers(10 ** (count - 1), 10**count)))

    def letters(self, count: int) -> str:
        return "".join(chr(65 + int(i)) for i in self.rng.integers(26, size=count))

    def day(self, offset: int) -> str:
        """A calendar day ``offset`` days after the mailbox's start, e.g. "April 12"."""
        moment = self.start + timedelta(days=offset)
        return f"{moment:%B} {moment.day}"

    def thread(self, kind: str, facts: dict[str, str], about: int | None = None) -> int:
        self.threads.append((kind, [], facts, about))
        return len(self.threads) - 1

    def add(self, thread: int, key: float, folder: str, sender: Person, to: Sequence[Person], subject: str,
            body: str, cc: Sequence[Person] = (), draft: bool = False) -> None:
        self.threads[thread][1].append(len(self.messages))
        self.messages.append(_Message(key, thread, folder, sender.address, tuple(p.address for p in to),
                                      subject, body, tuple(p.address for p in cc), draft))

    def when(self, low: float = 0.0, high: float = 80.0) -> float:
        return float(self.rng.uniform(low, high))


def generate_mailbox(seed: int) -> Mailbox:
    """The mailbox drawn from ``seed``."""
    return generate(seed).mailbox


def generate(seed: int) -> Generated:
    """A mailbox of about forty messages drawn from ``seed``, with the threads it was made of. The same seed
    always gives the same mailbox."""
    rng = np.random.default_rng(seed)
    company, domain = pick(rng, COMPANIES)
    firsts = rng.choice(len(FIRST_NAMES), size=12, replace=False)  # unique: a first name is one person
    people = [(FIRST_NAMES[int(f)], LAST_NAMES[int(last)])
              for f, last in zip(firsts, rng.integers(len(LAST_NAMES), size=12))]

    def person(index: int, at: str, company: str) -> Person:
        first, last = people[index]
        return Person(f"{first} {last}", f"{first}.{last}@{at}".lower(), company)

    owner = person(0, domain, company)
    colleagues = [person(i, domain, company) for i in range(1, 8)]
    friends = [person(i, FRIEND_DOMAINS[i % len(FRIEND_DOMAINS)], "Friend") for i in range(8, 10)]
    start = datetime(2024, 1, 8, 8, 0) + timedelta(days=int(rng.integers(0, 240)))
    finance = Person("Finance team", f"finance@{domain}")
    draw = _Draw(rng, owner, colleagues, friends, start, services=[finance])
    reps = [person(10 + i, at, name) for i, (name, at) in enumerate(draw.sample(VENDORS, 2))]
    _invoices(draw, reps)
    _meetings(draw)
    _shipping(draw)
    _travel(draw)
    _newsletters(draw)
    _codes(draw)
    _reports(draw)
    _requests(draw)
    _chat(draw)
    return _assemble(draw, (*colleagues, *friends, *reps))


def _time(draw: _Draw) -> str:
    return draw.fresh(lambda: f"{int(draw.rng.integers(8, 17)):02d}:{pick(draw.rng, ('00', '15', '30', '45'))}")


def _invoices(draw: _Draw, reps: list[Person]) -> None:
    """Three invoices, two from the first vendor, some with a reminder."""
    owner = draw.owner
    for rep in (reps[0], reps[0], reps[1]):
        order, invoice = draw.fresh(lambda: draw.digits(4)), draw.fresh(lambda: f"INV-{draw.digits(5)}")
        amount = draw.fresh(lambda: f"{int(draw.rng.integers(120, 990))}.{int(draw.rng.integers(1, 10))}"
                                    f"{int(draw.rng.integers(1, 10))}")
        due = draw.day(int(draw.rng.integers(20, 60)))
        facts = {"vendor": rep.company, "order": order, "invoice": invoice, "amount": amount, "due": due}
        thread = draw.thread("invoice", facts)
        key = draw.when()
        subject = f"Invoice {invoice} for order {order}"
        draw.add(thread, key, INBOX, rep, [owner], subject,
                 f"Hello {owner.first_name},\n\nplease find below invoice {invoice} for order {order}.\n\n"
                 f"Amount due: ${amount}\nDue date: {due}\n\nThank you for your business.\n\nBest regards,\n"
                 f"{rep.name}\n{rep.company}")
        if draw.rng.random() < 0.5:
            draw.add(thread, key + draw.when(2, 15), INBOX, rep, [owner], f"Re: {subject}",
                     f"Hello {owner.first_name},\n\na friendly reminder that invoice {invoice} for order "
                     f"{order} (${amount}) is due on {due}.\n\nKind regards,\n{rep.name}")


def _meetings(draw: _Draw) -> None:
    """Three colleagues each propose a meeting on a topic; the owner often answers and they confirm."""
    owner = draw.owner
    for host, topic in zip(draw.sample(draw.colleagues, 3), draw.sample(TOPICS, 3)):
        time, room = _time(draw), draw.fresh(lambda: pick(draw.rng, ROOMS))
        day = pick(draw.rng, WEEKDAYS)
        others = [c for c in draw.colleagues if c != host]
        cc = [pick(draw.rng, others)] if draw.rng.random() < 0.5 else []
        facts = {"topic": topic, "time": time, "day": day, "room": room, "host": host.address}
        thread = draw.thread("meeting", facts)
        key, subject = draw.when(), f"{topic.capitalize()} meeting"
        draw.add(thread, key, INBOX, host, [owner], subject,
                 f"Hi {owner.first_name},\n\ncould we get together to go over the {topic}? I propose {day} "
                 f"at {time} in {room}. It should take about {pick(draw.rng, ('30', '45', '60'))} minutes.\n\n"
                 f"Let me know if that works.\n{host.first_name}", cc)
        if draw.rng.random() < 0.75:
            key += draw.when(1, 6)
            draw.add(thread, key, SENT, owner, [host], f"Re: {subject}",
                     f"Hi {host.first_name},\n\n{day} works for me. See you then.\n\n{owner.first_name}", cc)
            if draw.rng.random() < 0.6:
                draw.add(thread, key + draw.when(1, 6), INBOX, host, [owner], f"Re: {subject}",
                         f"Great, {room} is booked. I will bring the latest numbers.\n{host.first_name}", cc)


def _shipping(draw: _Draw) -> None:
    """Three orders from shops, each shipped with a tracking number, some confirmed first."""
    owner = draw.owner
    for item in draw.sample(ITEMS, 3):
        name, address = pick(draw.rng, SHOPS)
        shop = Person(name, address)
        draw.services.append(shop)
        carrier, prefix = pick(draw.rng, CARRIERS)
        order = draw.fresh(lambda: draw.digits(6))
        tracking = prefix + draw.fresh(lambda: f"{draw.digits(5)}{draw.letters(2)}{draw.digits(5)}")
        delivery = draw.day(int(draw.rng.integers(10, 40)))
        thread = draw.thread("shipping", {"shop": name, "item": item, "order": order, "tracking": tracking,
                                          "carrier": carrier, "delivery": delivery})
        key = draw.when()
        if draw.rng.random() < 0.5:
            draw.add(thread, key - draw.when(1, 5), INBOX, shop, [owner], f"Order {order} confirmed",
                     f"Hello {owner.first_name},\n\nthank you for your order {order}: one {item}. We will "
                     "let you know when it ships.\n\n{name}")
        draw.add(thread, key, INBOX, shop, [owner], f"Your order {order} has shipped",
                 f"Hello {owner.first_name},\n\ngood news: your order {order} ({item}) is on its way.\n\n"
                 f"Carrier: {carrier}\nTracking number: {tracking}\nExpected delivery: {delivery}\n\n"
                 f"Thank you for shopping with {name}.")


def _travel(draw: _Draw) -> None:
    """Two flight bookings to different cities."""
    owner = draw.owner
    origin, *cities = draw.sample(CITIES, 3)
    for city in cities:
        airline, address, prefix = pick(draw.rng, AIRLINES)
        sender = Person(airline, address)
        draw.services.append(sender)
        code = draw.fresh(lambda: f"{draw.letters(3)}{draw.digits(3)}")
        flight = prefix + draw.fresh(lambda: draw.digits(3))
        date, time = draw.day(int(draw.rng.integers(15, 70))), _time(draw)
        thread = draw.thread("travel", {"airline": airline, "city": city, "code": code, "flight": flight,
                                        "date": date, "time": time})
        draw.add(thread, draw.when(), INBOX, sender, [owner], f"Booking confirmation for your trip to {city}",
                 f"Dear {owner.name},\n\nthank you for booking with {airline}.\n\nBooking code: {code}\n"
                 f"Flight: {flight} from {origin} to {city}\nDeparture: {date} at {time}\n\n"
                 "Please check in online 24 hours before departure.")


def _newsletters(draw: _Draw) -> None:
    """Three newsletters with two or three issues each; the oldest issues are sometimes archived or binned."""
    for name, address, headlines in draw.sample(NEWSLETTERS, 3):
        sender = Person(name, address)
        draw.services.append(sender)
        count = int(draw.rng.integers(2, 4))
        first = int(draw.rng.integers(20, 90))
        keys = sorted(draw.when(0, 95) for _ in range(count))
        for number, (key, index) in enumerate(zip(keys, draw.rng.choice(len(headlines), size=count,
                                                                          replace=False))):
            folder = pick(draw.rng, (INBOX, INBOX, ARCHIVE, TRASH)) if number == 0 and count == 3 else INBOX
            headline = headlines[int(index)]
            thread = draw.thread("newsletter", {"newsletter": name, "issue": str(first + number)})
            draw.add(thread, key, folder, sender, [draw.owner], f"{name} issue {first + number}: {headline}",
                     f"{headline}\n\nThis week we look at {headline.lower()} and answer your letters.\n\n"
                     f"You receive {name} because you subscribed. Unsubscribe at any time.")


def _codes(draw: _Draw) -> None:
    """Security codes from two services, and an older one already in Trash from a third."""
    for index, (name, address) in enumerate(draw.sample(SECURITY, 3)):
        sender = Person(name, address)
        draw.services.append(sender)
        code = draw.fresh(lambda: draw.digits(6))
        thread = draw.thread("code", {"service": name, "code": code})
        old = index == 2
        draw.add(thread, draw.when(0, 30) if old else draw.when(40, 99), TRASH if old else INBOX, sender,
                 [draw.owner], f"Your {name} verification code",
                 f"Your verification code is {code}. It expires in 10 minutes.\n\n"
                 "If you did not ask for it, you can ignore this message.")


def _reports(draw: _Draw) -> None:
    """Two draft reports sent to the owner and colleagues with others in Cc; one has a reply to all."""
    owner = draw.owner
    for topic in draw.sample(REPORTS, 2):
        author, second, *cc = draw.sample(draw.colleagues, int(draw.rng.integers(3, 5)))
        growth = int(draw.rng.integers(3, 25))
        thread = draw.thread("report", {"topic": topic})
        key, subject = draw.when(), f"Draft {topic} report"
        draw.add(thread, key, INBOX, author, [owner, second], subject,
                 f"Hi all,\n\nhere is the draft of the {topic} report. The main number: {growth}% growth "
                 f"over the last quarter. Please send comments by {pick(draw.rng, WEEKDAYS)}.\n\nThanks,\n"
                 f"{author.first_name}", cc)
        if draw.rng.random() < 0.5:
            draw.add(thread, key + draw.when(1, 8), INBOX, second, [author, owner], f"Re: {subject}",
                     f"Looks good to me. One small typo on page 3.\n{second.first_name}", cc)


def _requests(draw: _Draw) -> None:
    """Two colleagues each ask the owner for a fact from another conversation (of two different kinds)."""
    owner = draw.owner
    for kind in draw.sample(list(ASKED), 2):
        candidates = [i for i, t in enumerate(draw.threads) if t[0] == kind]
        about = pick(draw.rng, candidates)
        facts = draw.threads[about][2]
        host = facts.get("host")
        asker = pick(draw.rng, [c for c in draw.colleagues if c.address != host])
        fact, subject, question = ASKED[kind]
        known = {**facts, "host": next((c.first_name for c in draw.colleagues if c.address == host), "")}
        thread = draw.thread("request", {"fact": fact, "asker": asker.address}, about)
        draw.add(thread, draw.when(60, 99), INBOX, asker, [owner], subject.format(**known),
                 f"Hi {owner.first_name},\n\n{question.format(**known)}\n\nThanks,\n{asker.first_name}")


def _chat(draw: _Draw) -> None:
    """Friends' messages, the owner's own notes to colleagues, and a draft."""
    owner = draw.owner
    for friend, (subject, text) in zip(draw.friends * 2, draw.sample(CHATS, 3)):
        thread = draw.thread("chat", {})
        draw.add(thread, draw.when(), INBOX, friend, [owner], subject,
                 f"Hi {owner.first_name},\n\n{text}\n\n{friend.first_name}")
    for subject, text in draw.sample(NOTES, 2):
        colleague = pick(draw.rng, draw.colleagues)
        thread = draw.thread("note", {})
        draw.add(thread, draw.when(), SENT, owner, [colleague], subject,
                 f"Hi {colleague.first_name},\n\n{text}\n\n{owner.first_name}")
    colleague = pick(draw.rng, draw.colleagues)
    thread = draw.thread("draft", {})
    draw.add(thread, draw.when(90, 99), DRAFTS, owner, [colleague], "Ideas for next quarter",
             "Some first thoughts:\n- fewer meetings\n- ", draft=True)


def _assemble(draw: _Draw, contacts: tuple[Person, ...]) -> Generated:
    """Order the messages in time, give them ids and dates, mark some unread or starred, file some older ones
    in Archive and in the owner's own folders, and build the mailbox."""
    rng, owner = draw.rng, draw.owner
    folders = draw.sample(USER_FOLDERS, 2)
    order = sorted(range(len(draw.messages)), key=lambda i: draw.messages[i].key)
    ids = {index: rank + 1 for rank, index in enumerate(order)}
    moment, mails = draw.start, {}
    for rank, index in enumerate(order):
        message = draw.messages[index]
        moment += timedelta(minutes=int(rng.integers(20, 400)))
        theirs = message.sender != owner.address and message.folder == INBOX
        folder = message.folder
        if theirs and rank < len(order) // 2:
            folder = pick(draw.rng, (INBOX, INBOX, INBOX, INBOX, INBOX, ARCHIVE, ARCHIVE, *folders))
        recent = rank >= 2 * len(order) // 3
        mails[ids[index]] = Mail(ids[index], folder, message.sender, message.to, message.cc, message.subject,
                                 message.body, moment, message.thread,
                                 unread=theirs and rng.random() < (0.6 if recent else 0.1),
                                 starred=theirs and rng.random() < 0.1, draft=message.draft)
    mailbox = Mailbox(owner, tuple(sorted(contacts, key=lambda p: p.name)),
                      tuple(dict.fromkeys(draw.services)), mails, moment + timedelta(minutes=30), folders)
    threads = tuple(Thread(kind, tuple(sorted(ids[i] for i in members)), facts, about)
                    for kind, members, facts, about in draw.threads)
    return Generated(mailbox, threads)

"""Tasks on generated mailboxes: what each asks, the checks its reward counts, and the steps an oracle takes
through the client to meet them.

A task's reward is the share of its checks met (the starred, unread and filed messages, the folders made, each
part of the mail to send, the answer to the user), where every message the task did not name that ended up
moved, deleted, starred or unstarred counts as one more failed check.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from agentgym.envs.web.sites import OracleStep
from agentgym.envs.web.sites.mail.mailbox import Generated, Thread, generate
from agentgym.envs.web.sites.mail.store import (
    ARCHIVE,
    INBOX,
    TRASH,
    Mail,
    Mailbox,
    Person,
    holds,
    prefixed,
    words,
)
from agentgym.seeding import pick

DIFFICULTIES = ("easy", "medium", "hard")
PHRASES = ("Thanks, that works for me.", "I will get back to you by Friday.", "Sounds good, count me in.",
           "Please send me the final version.", "Let us talk about it tomorrow.",
           "Thank you, I will take a look today.", "Great news, thanks for letting me know.",
           "I cannot make it this week, sorry.")
SUBJECTS = ("Team lunch", "Project update", "Quick question", "Slides for Monday", "Coffee next week",
            "Holiday plans", "Welcome aboard")
ASKED_FOR = {"code": ("the booking code of your flight to {city}", "Booking code"),
             "tracking": ("the tracking number of the {item} order", "Tracking number"),
             "amount": ("the amount due on invoice {invoice}", "Amount due"),
             "room": ("the room of the {topic} meeting", "Meeting room")}
"""For each fact a colleague may ask for: how a task names it, and the subject of the mail that answers."""
LOOK_UPS = {"shipping": ("What is the tracking number of your {item} order from {shop}?", "tracking"),
            "travel": ("What is the booking code of your flight to {city}?", "code"),
            "invoice": ("How much is due on the invoice from {vendor} for order {order}?", "amount"),
            "meeting": ("In which room is the {topic} meeting that {proposer} proposed?", "room")}
"""Questions about one fact of a conversation, by its kind, and the fact that answers."""
T = TypeVar("T")


@dataclass(frozen=True)
class Outgoing:
    """A message the task wants sent: its recipients, subject, the phrases its own text must hold (quoted
    lines of a reply do not count) and, unless ``None``, exactly who is in Cc."""

    to: frozenset[str]
    subject: str
    phrases: tuple[str, ...] = ()
    cc: frozenset[str] | None = None

    @property
    def checks(self) -> int:
        """How many checks a sent message is held to: To, subject, each phrase, and Cc when asked."""
        return 2 + len(self.phrases) + (self.cc is not None)

    def met(self, mail: Mail) -> int:
        """How many of the checks ``mail`` meets."""
        text = own_text(mail.body)
        met = int({a.lower() for a in mail.to} == self.to) + int(words(mail.subject) == words(self.subject))
        met += sum(holds(text, phrase) for phrase in self.phrases)
        if self.cc is not None:
            met += {a.lower() for a in mail.cc} == self.cc
        return met


@dataclass(frozen=True)
class Answer:
    """What the agent's message to the user must say: one of ``accepted`` and none of ``rejected`` (the same
    kind of fact from other mail), as whole words ignoring case and punctuation."""

    accepted: tuple[str, ...]
    rejected: tuple[str, ...] = ()

    def met(self, message: str | None) -> bool:
        """Whether ``message`` gives the answer."""
        return (message is not None and any(holds(message, a) for a in self.accepted)
                and not any(holds(message, r) for r in self.rejected))


@dataclass(frozen=True)
class Goal:
    """What must hold at the end: messages starred or unread, messages filed (``Trash``: deleted, whether in
    Trash or gone for good), folders that exist, a message sent, an answer given."""

    starred: tuple[int, ...] = ()
    unread: tuple[int, ...] = ()
    placed: tuple[tuple[int, str], ...] = ()
    folders: tuple[str, ...] = ()
    outgoing: Outgoing | None = None
    answer: Answer | None = None

    @property
    def named(self) -> set[int]:
        """The messages the task may move or mark."""
        return {*self.starred, *self.unread, *(id for id, _ in self.placed)}


@dataclass(frozen=True)
class MailTask:
    """A task: its text, the seed of its mailbox, the goal scored at the end and the oracle's steps."""

    id: int
    difficulty: str
    kind: str
    text: str
    seed: int
    goal: Goal
    steps: tuple[OracleStep, ...]


def own_text(body: str) -> str:
    """What a message's writer wrote: its body without quoted lines ("> ...") and their "On ... wrote:"
    line."""
    return "\n".join(line for line in body.splitlines()
                     if not line.lstrip().startswith(">") and not re.fullmatch(r"\s*On .* wrote:\s*", line))


def checks(goal: Goal, initial: Mailbox, final: Mailbox, message: str | None) -> list[bool]:
    """Each check of ``goal`` on the ``final`` state of a mailbox that started as ``initial``, and on the
    agent's ``message`` to the user. A message to send is judged by the sent message that meets most."""
    result = [id in final.mails and final.mails[id].starred for id in goal.starred]
    result += [id in final.mails and final.mails[id].unread for id in goal.unread]
    for id, folder in goal.placed:
        mail = final.mails.get(id)
        if folder == TRASH:
            result.append(mail is None or mail.folder == TRASH)
        else:
            result.append(mail is not None and mail.folder == final.folder_named(folder))
    result += [final.folder_named(folder) is not None for folder in goal.folders]
    if goal.outgoing is not None:
        sent = [m for id, m in final.mails.items()
                if id not in initial.mails and m.sender == final.owner.address and not m.draft]
        best = max((goal.outgoing.met(mail) for mail in sent), default=0)
        result += [True] * best + [False] * (goal.outgoing.checks - best)
    if goal.answer is not None:
        result.append(goal.answer.met(message))
    return result


def collateral(goal: Goal, initial: Mailbox, final: Mailbox) -> int:
    """How many messages of ``initial`` (not drafts) the task did not name were moved, deleted, starred or
    unstarred by the end."""
    changed = 0
    for id, before in initial.mails.items():
        after = final.mails.get(id)
        if id not in goal.named and not before.draft and (
                after is None or (after.folder, after.starred) != (before.folder, before.starred)):
            changed += 1
    return changed


def score(goal: Goal, initial: Mailbox, final: Mailbox, message: str | None) -> float:
    """The reward in [0, 1]: checks met over checks, each collateral change counted as a failed check."""
    met = checks(goal, initial, final, message)
    return sum(met) / (len(met) + collateral(goal, initial, final))


# -- generation ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Made:
    text: str
    goal: Goal
    steps: tuple[OracleStep, ...]


Family = Callable[[np.random.Generator, Generated], "_Made | None"]


def generate_tasks(seed: int = 0, per_difficulty: int = 50) -> tuple[MailTask, ...]:
    """``per_difficulty`` tasks of each difficulty drawn from ``seed``, the kinds of each difficulty taking
    turns; each on a mailbox of its own seed (redrawn until the kind fits the mailbox)."""
    rng = np.random.default_rng(seed)
    tasks = []
    for index in range(len(DIFFICULTIES) * per_difficulty):
        difficulty = DIFFICULTIES[index % len(DIFFICULTIES)]
        kinds = FAMILIES[difficulty]
        kind = list(kinds)[(index // len(DIFFICULTIES)) % len(kinds)]
        while True:
            mailbox_seed = int(rng.integers(2**31))
            made = kinds[kind](rng, generate(mailbox_seed))
            if made is not None:
                break
        tasks.append(MailTask(index, difficulty, kind, made.text, mailbox_seed, made.goal, made.steps))
    return tuple(tasks)


def _pick_or_none(rng: np.random.Generator, options: list[T]) -> T | None:
    """:func:`~agentgym.seeding.pick`, or ``None`` (drawing nothing) when there are no ``options``."""
    return pick(rng, options) if options else None


def _done(text: str = "Done.") -> OracleStep:
    return ("send_msg_to_user", "", "", text)


def _open(box: Mailbox, mail: Mail) -> list[OracleStep]:
    """Find ``mail`` by its sender and subject with the search box, and open it."""
    query = f"from:{mail.sender} {mail.subject}"
    return [("fill", "searchbox", "Search mail", query), ("click", "button", "Search", ""),
            ("click", "link", box.label(mail), "")]


def _select(box: Mailbox, query: str, mails: list[Mail]) -> list[OracleStep]:
    """Search with ``query`` and tick each of ``mails`` in the results."""
    return [("fill", "searchbox", "Search mail", query), ("click", "button", "Search", ""),
            *(("click", "checkbox", f"Select {box.label(m)}", "") for m in mails)]


def _described(box: Mailbox, mail: Mail) -> bool:
    """Whether ``mail`` is the only message with its sender and subject (so a task can name it by them)."""
    return sum((m.sender, m.subject) == (mail.sender, mail.subject) for m in box.mails.values()) == 1


def _theirs(box: Mailbox, folder: str | None = INBOX) -> list[Mail]:
    """Messages from others (in ``folder``, or anywhere but Trash) that a task can name by sender and subject,
    oldest first."""
    return sorted((m for m in box.mails.values() if m.sender != box.owner.address and _described(box, m)
                   and (m.folder == folder if folder else m.folder != TRASH)), key=lambda m: m.id)


def _of(g: Generated, kind: str) -> list[Thread]:
    return [t for t in g.threads if t.kind == kind]


def _ids(g: Generated, *kinds: str) -> set[int]:
    """The messages of every thread of these kinds."""
    return {id for t in g.threads if t.kind in kinds for id in t.ids}


def _the_email(box: Mailbox, mail: Mail) -> str:
    return f'the email from {box.name_of(mail.sender)} with the subject "{mail.subject}"'


def _time_forms(time: str) -> tuple[str, ...]:
    """Ways to write a 24-hour time: "14:30", "2:30 pm"; "09:00", "9:00", "9 am"."""
    hour, minute = (int(part) for part in time.split(":"))
    twelve, half = hour % 12 or 12, "am" if hour < 12 else "pm"
    forms = [time, f"{hour}:{minute:02d}", f"{twelve}:{minute:02d} {half}"]
    if minute == 0:
        forms.append(f"{twelve} {half}")
    return tuple(dict.fromkeys(forms))


def _fact(thread: Thread, fact: str) -> str:
    """The way a task checks a fact: a room without its article ("the Harbor room" -> "Harbor room")."""
    return thread.facts[fact].removeprefix("the ")


def _answer(g: Generated, thread: Thread, fact: str) -> Answer:
    """The answer ``fact`` of ``thread``, rejecting the same fact of every other thread."""
    others = tuple(_fact(t, fact) for t in g.threads if t is not thread and fact in t.facts)
    if fact == "time":
        return Answer(_time_forms(thread.facts[fact]), others)
    return Answer((_fact(thread, fact),), others)


def _source(g: Generated, thread: Thread) -> Mail:
    """The message of ``thread`` that states its facts: the shipping notice, otherwise the first message."""
    return g.mailbox.mails[thread.ids[-1] if thread.kind == "shipping" else thread.ids[0]]


# easy

def _star(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    mail = _pick_or_none(rng, [m for m in _theirs(box) if not m.starred])
    if mail is None:
        return None
    return _Made(f"Star {_the_email(box, mail)}.", Goal(starred=(mail.id,)),
                 (*_open(box, mail), ("click", "button", "Star", ""), _done()))


def _archive_newsletter(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    issues = _ids(g, "newsletter")
    mail = _pick_or_none(rng, [m for m in _theirs(box) if m.id in issues])
    if mail is None:
        return None
    return _Made(f'Move the newsletter "{mail.subject}" from {box.name_of(mail.sender)} to Archive.',
                 Goal(placed=((mail.id, ARCHIVE),)), (*_open(box, mail), ("click", "button", "Archive", ""),
                                                       _done()))


def _delete(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    disposable = _ids(g, "code", "newsletter", "chat", "shipping")
    mail = _pick_or_none(rng, [m for m in _theirs(box) if m.id in disposable])
    if mail is None:
        return None
    return _Made(f"Delete {_the_email(box, mail)}.", Goal(placed=((mail.id, TRASH),)),
                 (*_open(box, mail), ("click", "button", "Delete", ""), _done()))


def _mark_unread(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    mail = _pick_or_none(rng, [m for m in _theirs(box) if not m.unread])
    if mail is None:
        return None
    return _Made(f"Mark {_the_email(box, mail)} as unread.", Goal(unread=(mail.id,)),
                 (*_open(box, mail), ("click", "button", "Mark unread", ""), _done()))


def _reply(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    people = {p.address for p in box.contacts}
    mail = _pick_or_none(rng, [m for m in _theirs(box) if m.sender in people])
    phrase = _pick_or_none(rng, list(PHRASES))
    if mail is None or phrase is None:
        return None
    goal = Goal(outgoing=Outgoing(frozenset({mail.sender}), prefixed("Re", mail.subject), (phrase,)))
    return _Made(f'Reply to {_the_email(box, mail)}, saying "{phrase}"', goal, (
        *_open(box, mail), ("click", "link", "Reply", ""),
        ("fill", "textbox", "Body", f"{phrase}\n\n{box.quote(mail)}"), ("click", "button", "Send", ""),
        _done()))


def _move_to_folder(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    filed = _ids(g, "invoice", "shipping", "travel")
    mail = _pick_or_none(rng, [m for m in _theirs(box) if m.id in filed])
    folder = _pick_or_none(rng, box.folders)
    if mail is None or folder is None:
        return None
    return _Made(f'Move {_the_email(box, mail)} to the folder "{folder}".', Goal(placed=((mail.id, folder),)),
                 (*_open(box, mail), ("select_option", "combobox", "Move to", folder),
                  ("click", "button", "Move", ""), _done()))


def _write(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    contact: Person | None = _pick_or_none(rng, list(box.contacts))
    subject, phrase = _pick_or_none(rng, list(SUBJECTS)), _pick_or_none(rng, list(PHRASES))
    if contact is None or subject is None or phrase is None:
        return None
    goal = Goal(outgoing=Outgoing(frozenset({contact.address}), subject, (phrase,)))
    return _Made(f'Send an email to {contact.name} with the subject "{subject}" saying "{phrase}"', goal, (
        ("click", "link", "Contacts", ""), ("click", "link", f"Write to {contact.name}", ""),
        ("fill", "textbox", "Subject", subject), ("fill", "textbox", "Body", phrase),
        ("click", "button", "Send", ""), _done()))


def _code(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, [t for t in _of(g, "code") if box.mails[t.ids[0]].folder == INBOX])
    if thread is None:
        return None
    mail = _source(g, thread)
    return _Made(f"Tell me the verification code in the email from {thread.facts['service']}.",
                 Goal(answer=_answer(g, thread, "code")),
                 (*_open(box, mail), _done(f"The code is {thread.facts['code']}.")))


# medium

def _forward_invoice(rng: np.random.Generator, g: Generated, *, archive: bool = False) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, [t for t in _of(g, "invoice") if not archive or box.mails[t.ids[0]].folder == INBOX])
    to = _pick_or_none(rng, [p for p in (*box.services, *box.contacts)
                     if p.address.startswith("finance@") or p.company == box.owner.company])
    if thread is None or to is None:
        return None
    mail = _source(g, thread)
    facts = thread.facts
    outgoing = Outgoing(frozenset({to.address}), prefixed("Fwd", mail.subject),
                        (facts["order"], facts["invoice"]))
    text = f"Forward the invoice from {facts['vendor']} for order {facts['order']} to {to.address}"
    steps = [*_open(box, mail), ("click", "link", "Forward", ""), ("fill", "textbox", "To", to.address),
             ("click", "button", "Send", "")]
    if not archive:
        return _Made(f"{text}.", Goal(outgoing=outgoing), (*steps, _done()))
    return _Made(f"{text}, then archive it.", Goal(placed=((mail.id, ARCHIVE),), outgoing=outgoing),
                 (*steps, *_open(box, mail), ("click", "button", "Archive", ""), _done()))


def _meeting_time(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, _of(g, "meeting"))
    if thread is None:
        return None
    host = box.name_of(thread.facts["host"])
    return _Made(f"What time did {host} propose for the {thread.facts['topic']} meeting? Tell me the time.",
                 Goal(answer=_answer(g, thread, "time")),
                 (*_open(box, _source(g, thread)), _done(f"{host} proposed {thread.facts['time']}.")))


def _look_up(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, [t for t in g.threads if t.kind in LOOK_UPS])
    if thread is None:
        return None
    question, fact = LOOK_UPS[thread.kind]
    question = question.format(**thread.facts, proposer=box.name_of(thread.facts.get("host", "")))
    return _Made(f"{question} Tell me the answer.", Goal(answer=_answer(g, thread, fact)),
                 (*_open(box, _source(g, thread)), _done(f"It is {thread.facts[fact]}.")))


def _delete_sender(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    by_sender: dict[str, list[Mail]] = {}
    for mail in box.mails.values():
        if mail.folder != TRASH and mail.sender != box.owner.address:
            by_sender.setdefault(mail.sender, []).append(mail)
    sender = _pick_or_none(rng, sorted(s for s, mails in by_sender.items() if len(mails) >= 2))
    if sender is None:
        return None
    mails = sorted(by_sender[sender], key=lambda m: m.id)
    return _Made(f"Delete every message from {box.name_of(sender)}.",
                 Goal(placed=tuple((m.id, TRASH) for m in mails)),
                 (*_select(box, f"from:{sender}", mails), ("click", "button", "Delete selected", ""),
                  _done()))


def _request(rng: np.random.Generator, g: Generated) -> tuple[Thread, Thread, Mail] | None:
    """A colleague's request, the thread it asks about, and the request message."""
    request = _pick_or_none(rng, _of(g, "request"))
    if request is None or request.about is None:
        return None
    return request, g.threads[request.about], g.mailbox.mails[request.ids[0]]


def _reply_with_fact(rng: np.random.Generator, g: Generated) -> _Made | None:
    found = _request(rng, g)
    if found is None:
        return None
    request, about, mail = found
    box, fact = g.mailbox, request.facts["fact"]
    value = _fact(about, fact)
    goal = Goal(outgoing=Outgoing(frozenset({mail.sender}), prefixed("Re", mail.subject), (value,)))
    asked = ASKED_FOR[fact][1].lower()
    return _Made(f"Reply to {_the_email(box, mail)} with the {asked} they ask for.", goal, (
        *_open(box, mail), ("click", "link", "Reply", ""),
        ("fill", "textbox", "Body", f"It is {value}.\n\n{box.quote(mail)}"), ("click", "button", "Send", ""),
        _done()))


def _archive_issues(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    by_name: dict[str, list[Mail]] = {}
    for thread in _of(g, "newsletter"):
        mail = box.mails[thread.ids[0]]
        if mail.folder == INBOX:
            by_name.setdefault(thread.facts["newsletter"], []).append(mail)
    name = _pick_or_none(rng, sorted(n for n, mails in by_name.items() if len(mails) >= 2))
    if name is None:
        return None
    mails = sorted(by_name[name], key=lambda m: m.id)
    return _Made(f"Archive every issue of the {name} newsletter that is in your Inbox.",
                 Goal(placed=tuple((m.id, ARCHIVE) for m in mails)),
                 (*_select(box, f"from:{mails[0].sender}", mails),
                  ("click", "button", "Archive selected", ""), _done()))


# hard

def _relay(rng: np.random.Generator, g: Generated) -> _Made | None:
    found = _request(rng, g)
    if found is None:
        return None
    request, about, mail = found
    fact = request.facts["fact"]
    what, subject = ASKED_FOR[fact]
    value = _fact(about, fact)
    goal = Goal(outgoing=Outgoing(frozenset({mail.sender}), subject, (value,)))
    return _Made(f"Someone asked you for {what.format(**about.facts)}. Find it and send it to them in a new "
                 f'email with the subject "{subject}".', goal, (
                     ("click", "link", "Compose", ""), ("fill", "textbox", "To", mail.sender),
                     ("fill", "textbox", "Subject", subject), ("fill", "textbox", "Body", f"It is {value}."),
                     ("click", "button", "Send", ""), _done()))


def _file_thread(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, [t for t in g.threads
                         if t.kind in ("meeting", "invoice", "report") and len(t.ids) >= 2])
    if thread is None:
        return None
    mails = [box.mails[id] for id in thread.ids]
    subject = mails[0].subject
    folder = {"meeting": subject.removesuffix(" meeting"), "report": subject.removeprefix("Draft "),
              "invoice": f"Order {thread.facts.get('order')}"}[thread.kind]
    if box.folder_named(folder) is not None:
        return None
    goal = Goal(placed=tuple((m.id, folder) for m in mails), folders=(folder,))
    return _Made(f'Create a folder named "{folder}" and move every message of the conversation "{subject}" '
                 "into it.", goal, (
                     ("click", "link", "Folders", ""), ("fill", "textbox", "Folder name", folder),
                     ("click", "button", "Create folder", ""), *_select(box, subject, mails),
                     ("select_option", "combobox", "Move selected to", folder),
                     ("click", "button", "Move selected", ""), _done()))


def _reply_all(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, _of(g, "report"))
    if thread is None:
        return None
    mail = box.mails[thread.ids[0]]
    on = {mail.sender, *mail.to, *mail.cc, box.owner.address}
    extra = _pick_or_none(rng, [p for p in box.contacts if p.address not in on])
    phrase = _pick_or_none(rng, list(PHRASES))
    if extra is None or phrase is None:
        return None
    me = box.owner.address
    cc = [a for a in mail.cc if a != me] + [extra.address]
    to = frozenset({mail.sender, *(a for a in mail.to if a != me)})
    outgoing = Outgoing(to, prefixed("Re", mail.subject), (phrase,), frozenset(cc))
    return _Made(f'Reply to all on {_the_email(box, mail)}, add {extra.name} in Cc, and say "{phrase}"',
                 Goal(outgoing=outgoing), (
                     *_open(box, mail), ("click", "link", "Reply all", ""),
                     ("fill", "textbox", "Cc", ", ".join(cc)),
                     ("fill", "textbox", "Body", f"{phrase}\n\n{box.quote(mail)}"),
                     ("click", "button", "Send", ""), _done()))


def _forward_and_archive(rng: np.random.Generator, g: Generated) -> _Made | None:
    return _forward_invoice(rng, g, archive=True)


def _accept_meeting(rng: np.random.Generator, g: Generated) -> _Made | None:
    box = g.mailbox
    thread = _pick_or_none(rng, _of(g, "meeting"))
    if thread is None:
        return None
    mail = _source(g, thread)
    extra = _pick_or_none(rng, [p for p in box.contacts if p.address not in {mail.sender, *mail.cc}])
    if extra is None:
        return None
    day, time = thread.facts["day"], thread.facts["time"]
    outgoing = Outgoing(frozenset({mail.sender}), prefixed("Re", mail.subject), (day, time),
                        frozenset({extra.address}))
    return _Made(f"{box.name_of(mail.sender)} proposed a day and time for the {thread.facts['topic']} "
                 "meeting. Reply to accept, repeating the day and time in your own words, and add "
                 f"{extra.name} in Cc.",
                 Goal(outgoing=outgoing), (
                     *_open(box, mail), ("click", "link", "Reply", ""),
                     ("fill", "textbox", "Cc", extra.address),
                     ("fill", "textbox", "Body", f"{day} at {time} works for me.\n\n{box.quote(mail)}"),
                     ("click", "button", "Send", ""), _done()))


FAMILIES: dict[str, dict[str, Family]] = {
    "easy": {"star": _star, "archive_newsletter": _archive_newsletter, "delete": _delete,
             "mark_unread": _mark_unread, "reply": _reply, "move_to_folder": _move_to_folder, "write": _write,
             "code": _code},
    "medium": {"forward_invoice": _forward_invoice, "meeting_time": _meeting_time, "look_up": _look_up,
               "delete_sender": _delete_sender, "reply_with_fact": _reply_with_fact,
               "archive_issues": _archive_issues},
    "hard": {"relay": _relay, "file_thread": _file_thread, "reply_all": _reply_all,
             "forward_and_archive": _forward_and_archive, "accept_meeting": _accept_meeting},
}
"""The kinds of task at each difficulty, each drawing one task from a generated mailbox (``None``: this
mailbox has nothing it fits)."""

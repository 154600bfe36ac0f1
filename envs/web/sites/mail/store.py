"""A mailbox and the per-session store of mailboxes: messages in folders, flags, threads, search, and the
drafting of new mail, replies and forwards."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import TypeVar

from agentgym.envs.web.sites.sessions import SessionStore

INBOX, SENT, DRAFTS, ARCHIVE, TRASH = "Inbox", "Sent", "Drafts", "Archive", "Trash"
SYSTEM_FOLDERS = (INBOX, SENT, DRAFTS, ARCHIVE, TRASH)
FOLDER_NAME_LIMIT = 40
"""The longest folder name a user may create."""
ADDRESS = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_NAMED_ADDRESS = re.compile(r"(?P<name>[^<>]*)<(?P<address>[^<>]*)>")
_WORD = re.compile(r"[a-z]+|[0-9]+")
T = TypeVar("T")


def words(text: str) -> list[str]:
    """The lower-cased runs of letters and of digits in ``text``: "2:30pm, INV-77" -> 2 30 pm inv 77."""
    return _WORD.findall(text.lower())


def holds(text: str, phrase: str) -> bool:
    """Whether ``text`` holds ``phrase`` as a run of whole words, ignoring case, spacing and punctuation."""
    wanted = words(phrase)
    return bool(wanted) and f" {' '.join(wanted)} " in f" {' '.join(words(text))} "


def show_date(moment: datetime) -> str:
    """A message date as the client shows it: "Mon 4 Mar 09:15"."""
    return f"{moment:%a} {moment.day} {moment:%b %H:%M}"


@dataclass(frozen=True)
class Person:
    """Someone mail comes from or goes to; ``company`` is empty for services and newsletters."""

    name: str
    address: str
    company: str = ""

    @property
    def first_name(self) -> str:
        """The first word of the name."""
        return self.name.split()[0]

    @property
    def header(self) -> str:
        """The person as a mail header shows them: "Dana Reyes <dana.reyes@acme.com>"."""
        return f"{self.name} <{self.address}>"


@dataclass(frozen=True)
class Mail:
    """One message: where it is filed, who sent it to whom, what it says, and its marks. A draft is an unsent
    message of the owner's."""

    id: int
    folder: str
    sender: str
    to: tuple[str, ...]
    cc: tuple[str, ...]
    subject: str
    body: str
    date: datetime
    thread: int
    unread: bool = False
    starred: bool = False
    draft: bool = False


@dataclass(frozen=True)
class Draft:
    """What the compose form holds: recipients as typed, subject, body, the conversation it belongs to and the
    saved draft it edits, if any."""

    to: str = ""
    cc: str = ""
    subject: str = ""
    body: str = ""
    thread: int | None = None
    draft: int | None = None

    @classmethod
    def of(cls, mail: Mail) -> Draft:
        """The saved draft ``mail`` as the compose form holds it."""
        return cls(", ".join(mail.to), ", ".join(mail.cc), mail.subject, mail.body, mail.thread, mail.id)


def split_addresses(text: str) -> list[str]:
    """The entries of an address field, split at commas and semicolons; "Name <address>" gives the address."""
    entries = [entry.strip() for entry in re.split(r"[,;]", text) if entry.strip()]
    return [(m.group("address").strip() if (m := _NAMED_ADDRESS.fullmatch(e)) else e) for e in entries]


def draft_errors(draft: Draft) -> list[str]:
    """What stops ``draft`` from being sent: no recipient, or an entry that is not an email address."""
    errors = [] if split_addresses(draft.to) else ["Add at least one recipient in To."]
    for label, text in (("To", draft.to), ("Cc", draft.cc)):
        errors += [f"{label}: “{entry}” is not a valid email address." for entry in split_addresses(text)
                   if not ADDRESS.fullmatch(entry)]
    return errors


def prefixed(prefix: str, subject: str) -> str:
    """``subject`` with "Re" or "Fwd" in front, once: "Re: Re: x" never happens."""
    known = {"Re": ("re:",), "Fwd": ("fwd:", "fw:")}[prefix]
    return subject if subject.lower().startswith(known) else f"{prefix}: {subject}"


@dataclass
class Mailbox:
    """One user's mail: the owner, the people they know, every message by id, the folders they made, and the
    clock that dates what they send."""

    owner: Person
    contacts: tuple[Person, ...]
    services: tuple[Person, ...]
    mails: dict[int, Mail]
    now: datetime
    folders: list[str] = field(default_factory=list)
    last_id: int = 0
    """The highest message id given so far (ids are never given twice)."""

    def copy(self) -> Mailbox:
        """A copy that changes apart from this one (messages are immutable and shared)."""
        return replace(self, mails=dict(self.mails), folders=list(self.folders))

    # -- reading ------------------------------------------------------------------------------------------

    @property
    def folder_names(self) -> list[str]:
        """Every folder: the five standard ones, then the user's in the order made."""
        return [*SYSTEM_FOLDERS, *self.folders]

    @property
    def filing_folders(self) -> list[str]:
        """The folders a message can be moved to: all but Sent and Drafts, which the client fills itself."""
        return [name for name in self.folder_names if name not in (SENT, DRAFTS)]

    def folder_named(self, name: str) -> str | None:
        """The folder called ``name`` (ignoring case and spacing), or ``None``."""
        key = " ".join(name.split()).casefold()
        return next((folder for folder in self.folder_names if folder.casefold() == key), None)

    def in_folder(self, folder: str) -> list[Mail]:
        """The messages filed in ``folder``, newest first."""
        return _newest_first(m for m in self.mails.values() if m.folder == folder)

    def unread_in(self, folder: str) -> int:
        """How many messages in ``folder`` are unread."""
        return sum(m.unread for m in self.mails.values() if m.folder == folder)

    def search(self, query: str) -> list[Mail]:
        """Messages outside Trash holding every word of ``query`` in their sender, recipients, subject or
        body, newest first. A term ``from:word`` must be in the sender's name or address."""
        senders: list[str] = []
        anywhere: list[str] = []
        for term in query.split():
            if term.lower().startswith("from:"):
                senders += words(term[len("from:"):])
            else:
                anywhere += words(term)
        if not senders and not anywhere:
            return []
        found = []
        for mail in self.mails.values():
            sender = set(words(f"{self.name_of(mail.sender)} {mail.sender}"))
            text = sender | set(words(" ".join((*mail.to, *mail.cc, *map(self.name_of, (*mail.to, *mail.cc)),
                                               mail.subject, mail.body))))
            if mail.folder != TRASH and sender.issuperset(senders) and text.issuperset(anywhere):
                found.append(mail)
        return _newest_first(found)

    def conversation(self, mail: Mail) -> list[Mail]:
        """Every message of ``mail``'s thread but drafts, oldest first."""
        return sorted((m for m in self.mails.values() if m.thread == mail.thread and not m.draft),
                      key=lambda m: m.date)

    def person(self, address: str) -> Person | None:
        """The known person (the owner, a contact or a service) with this address."""
        key = address.lower()
        known = (self.owner, *self.contacts, *self.services)
        return next((person for person in known if person.address.lower() == key), None)

    def name_of(self, address: str) -> str:
        """The name shown for ``address``: the person's name when known, else the address."""
        known = self.person(address)
        return known.name if known is not None else address

    def header(self, address: str) -> str:
        """``address`` as a header shows it: with the name when known."""
        known = self.person(address)
        return known.header if known is not None else address

    def label(self, mail: Mail) -> str:
        """The message's name in lists: who it is from (or to, for the owner's) and when. Unique in a mailbox,
        since no two messages share a minute."""
        if mail.sender != self.owner.address:
            who = self.name_of(mail.sender)
        else:
            names = [self.name_of(a) for a in (*mail.to, *mail.cc)]
            who = ("Draft to " if mail.draft else "To ") + (
                "nobody yet" if not names else names[0] if len(names) == 1
                else f"{names[0]} and {len(names) - 1} other{'s' if len(names) > 2 else ''}")
        return f"{who}, {show_date(mail.date)}"

    # -- drafting -----------------------------------------------------------------------------------------

    def reply(self, mail: Mail, *, to_all: bool = False) -> Draft:
        """A reply to ``mail``: to its sender (to its recipients when the owner sent it), and with ``to_all``
        to everyone else on it too, the original quoted below."""
        me = self.owner.address
        if mail.sender == me:
            to, cc = list(mail.to), list(mail.cc) if to_all else []
        else:
            to = [mail.sender] + ([a for a in mail.to if a != me] if to_all else [])
            cc = [a for a in mail.cc if a != me] if to_all else []
        return Draft(", ".join(to), ", ".join(cc), prefixed("Re", mail.subject), "\n\n" + self.quote(mail),
                     mail.thread)

    def forward(self, mail: Mail) -> Draft:
        """A forward of ``mail`` with its headers and whole text below, to be addressed."""
        return Draft("", "", prefixed("Fwd", mail.subject), "\n\n" + self.forwarded(mail), mail.thread)

    def quote(self, mail: Mail) -> str:
        """``mail``'s text as a reply quotes it: an attribution line, then each line after "> "."""
        lines = "\n".join(f"> {line}" if line else ">" for line in mail.body.splitlines())
        return f"On {show_date(mail.date)}, {self.header(mail.sender)} wrote:\n{lines}"

    def forwarded(self, mail: Mail) -> str:
        """``mail`` as a forward carries it: a marker line, its headers, its text."""
        headers = [f"From: {self.header(mail.sender)}", f"Date: {show_date(mail.date)}",
                   f"Subject: {mail.subject}", f"To: {', '.join(map(self.header, mail.to))}"]
        if mail.cc:
            headers.append(f"Cc: {', '.join(map(self.header, mail.cc))}")
        return "---------- Forwarded message ----------\n" + "\n".join(headers) + "\n\n" + mail.body

    # -- changing -----------------------------------------------------------------------------------------

    def open(self, id: int) -> Mail | None:
        """The message with ``id``, marked read; ``None`` when there is none."""
        mail = self.mails.get(id)
        if mail is not None and mail.unread:
            mail = self.mails[id] = replace(mail, unread=False)
        return mail

    def mark(self, id: int, *, starred: bool | None = None, unread: bool | None = None) -> Mail | None:
        """Set the message's star or unread mark; ``None`` when there is no such message."""
        mail = self.mails.get(id)
        if mail is None:
            return None
        changes = {k: v for k, v in (("starred", starred), ("unread", unread)) if v is not None}
        mail = self.mails[id] = replace(mail, **changes)
        return mail

    def move(self, ids: list[int], folder: str) -> int:
        """File the messages with ``ids`` in ``folder`` (which must exist); how many there were."""
        if folder not in self.folder_names:
            raise KeyError(f"no folder {folder!r}")
        moved = [id for id in ids if id in self.mails]
        for id in moved:
            self.mails[id] = replace(self.mails[id], folder=folder)
        return len(moved)

    def delete(self, ids: list[int]) -> int:
        """Move the messages with ``ids`` to Trash; those already there are deleted for good. How many."""
        found = [id for id in ids if id in self.mails]
        for id in found:
            if self.mails[id].folder == TRASH:
                del self.mails[id]
            else:
                self.mails[id] = replace(self.mails[id], folder=TRASH)
        return len(found)

    def create_folder(self, name: str) -> str | None:
        """Make a folder; what is wrong with ``name`` instead, if anything."""
        name = " ".join(name.split())
        if not name:
            return "Enter a folder name."
        if len(name) > FOLDER_NAME_LIMIT:
            return f"A folder name has at most {FOLDER_NAME_LIMIT} characters."
        if not re.fullmatch(r"[\w .,&'()-]+", name):
            return "A folder name may hold letters, digits, spaces and . , & ' ( ) - only."
        if self.folder_named(name) is not None:
            return f"There is already a folder named {self.folder_named(name)}."
        self.folders.append(name)
        return None

    def send(self, draft: Draft) -> Mail:
        """File ``draft`` (which :func:`draft_errors` passed) in Sent as a message of the owner's; a saved
        draft it came from is dropped."""
        return self._file(draft, SENT, as_draft=False)

    def save_draft(self, draft: Draft) -> Mail:
        """Keep ``draft`` in Drafts (replacing the saved draft it edits) without checking it."""
        return self._file(draft, DRAFTS, as_draft=True)

    def _file(self, draft: Draft, folder: str, *, as_draft: bool) -> Mail:
        edited = self.mails.get(draft.draft) if draft.draft is not None else None
        if edited is not None and edited.draft:
            del self.mails[edited.id]
        self.last_id = id = max([self.last_id, *self.mails]) + 1
        threads = {m.thread for m in self.mails.values()}
        thread = draft.thread if draft.thread in threads else max(threads, default=0) + 1
        self.now += timedelta(minutes=1)
        mail = Mail(id, folder, self.owner.address, tuple(split_addresses(draft.to)),
                    tuple(split_addresses(draft.cc)), draft.subject.strip(), draft.body, self.now, thread,
                    draft=as_draft)
        self.mails[id] = mail
        return mail


def _newest_first(mails: Iterable[Mail]) -> list[Mail]:
    return sorted(mails, key=lambda m: m.date, reverse=True)


class MailStore(SessionStore[Mailbox]):
    """Every session's mailbox; readers get copies and changes run under the store's lock."""

    def __init__(self, new_mailbox: Callable[[], Mailbox], max_sessions: int = 10_000) -> None:
        super().__init__(new_mailbox, kind="mail", max_sessions=max_sessions)

    def mailbox(self, sid: str) -> Mailbox:
        """A copy of the session's mailbox as it is now; ``KeyError`` for an unknown session."""
        with self.locked(sid) as mailbox:
            return mailbox.copy()

    def change(self, sid: str, action: Callable[[Mailbox], T]) -> T:
        """Run ``action`` on the session's mailbox under the lock and return what it returns."""
        with self.locked(sid) as mailbox:
            return action(mailbox)

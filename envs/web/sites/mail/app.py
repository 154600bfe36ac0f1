"""The webmail client as a FastAPI app: folders, search, reading, compose, reply and forward, filing and
marking, folders and contacts, all plain HTML forms."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import jinja2
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from agentgym.envs.web.sites.mail.store import (
    ARCHIVE,
    DRAFTS,
    INBOX,
    SENT,
    TRASH,
    Draft,
    Mail,
    Mailbox,
    MailStore,
    draft_errors,
    show_date,
)
from agentgym.envs.web.sites.sessions import Visit, form_fields, form_lists

PAGE_SIZE = 15
"""Messages per page of a folder or of search results."""
TEMPLATES = Path(__file__).parent / "templates"
NOTICES = {"sent": "Your message was sent.", "saved": "Draft saved.", "archived": "Archived.",
           "deleted": "Moved to Trash.", "erased": "Deleted for good.", "moved": "Moved.",
           "unread": "Marked as unread.", "created": "Folder created.",
           "none": "Select at least one message first.", "no-folder": "Choose a folder to move to."}
"""What a page says after an action, by the ``notice`` its address carries."""


def create_app(store: MailStore) -> FastAPI:
    """The client over the mailboxes in ``store``, one per visitor's session."""
    templates = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                                   undefined=jinja2.StrictUndefined)
    templates.filters.update(date=show_date, path=lambda name: quote(name, safe=""))
    app = FastAPI(title="Mail", docs_url=None, redoc_url=None, openapi_url=None)

    def page(who: Visit, box: Mailbox, request: Request, template: str, title: str, status: int = 200,
             **context: Any) -> Response:
        notice = NOTICES.get(request.query_params.get("notice", ""))
        html = templates.get_template(template).render(
            title=title, heading=context.pop("heading", title), box=box, notice=notice,
            errors=context.pop("errors", ()), q=context.pop("q", ""), here=_here(request),
            unread={name: box.unread_in(name) for name in box.folder_names}, **context)
        return who.keep(HTMLResponse(html, status_code=status))

    def not_found(who: Visit, request: Request) -> Response:
        return page(who, store.mailbox(who.sid), request, "not_found.html", "Not found", status=404)

    def listing(who: Visit, request: Request, title: str, mails: list[Mail], **context: Any) -> Response:
        box = store.mailbox(who.sid)
        pages = max(1, math.ceil(len(mails) / PAGE_SIZE))
        number = min(max(_number(request.query_params.get("page", "")) or 1, 1), pages)

        def link(to: int) -> str | None:
            if not 1 <= to <= pages or to == number:
                return None
            query = {k: v for k, v in request.query_params.items() if k not in ("page", "notice")}
            return f"{request.url.path}?{urlencode({**query, 'page': to})}"

        shown = mails[(number - 1) * PAGE_SIZE: number * PAGE_SIZE]
        return page(who, box, request, "list.html", title, mails=shown, found=len(mails), page_number=number,
                    pages=pages, previous=link(number - 1), next=link(number + 1), **context)

    @app.exception_handler(404)
    async def missing(request: Request, exc: Exception) -> Response:
        return not_found(Visit.of(request, store), request)

    @app.get("/")
    async def home(request: Request) -> Response:
        return await folder(request, INBOX)

    @app.get("/folder/{name}")
    async def folder(request: Request, name: str) -> Response:
        who = Visit.of(request, store)
        box = store.mailbox(who.sid)
        if name not in box.folder_names:
            return not_found(who, request)
        return listing(who, request, name, box.in_folder(name), folder=name, searched=None)

    @app.get("/search")
    async def search(request: Request) -> Response:
        who, q = Visit.of(request, store), request.query_params.get("q", "")
        return listing(who, request, "Search results", store.mailbox(who.sid).search(q), folder=None,
                       searched=q, q=q)

    @app.post("/bulk")
    async def bulk(request: Request) -> Response:
        who, form = Visit.of(request, store), await form_lists(request)
        ids = [id for id in map(_number, form.get("ids", [])) if id is not None]
        action, target = _first(form, "action"), _first(form, "folder")
        back = _local(_first(form, "back"))
        if not ids:
            return who.keep(_redirect(back, "none"))
        before = store.mailbox(who.sid)
        if action == "move" and target not in before.folder_names:
            return who.keep(_redirect(back, "no-folder"))
        found = [before.mails[id] for id in ids if id in before.mails]
        binned = bool(found) and all(mail.folder == TRASH for mail in found)
        changes = {"move": (lambda box: box.move(ids, target), "moved"),
                   "archive": (lambda box: box.move(ids, ARCHIVE), "archived"),
                   "delete": (lambda box: box.delete(ids), "erased" if binned else "deleted")}
        if action not in changes:
            return who.keep(RedirectResponse(back, status_code=303))
        change, notice = changes[action]
        store.change(who.sid, change)
        return who.keep(_redirect(back, notice))

    @app.get("/message/{id}")
    async def message(request: Request, id: str) -> Response:
        who, wanted = Visit.of(request, store), _number(id)
        mail = None if wanted is None else store.change(who.sid, lambda box: box.open(wanted))
        if mail is None:
            return not_found(who, request)
        box = store.mailbox(who.sid)
        return page(who, box, request, "message.html", mail.subject or "(no subject)", mail=mail,
                    conversation=box.conversation(mail))

    @app.post("/message/{id}")
    async def act(request: Request, id: str) -> Response:
        who, wanted, form = Visit.of(request, store), _number(id), await form_fields(request)
        mail = None if wanted is None else store.mailbox(who.sid).mails.get(wanted)
        if mail is None:
            return not_found(who, request)
        action, back = form.get("action", ""), f"/folder/{quote(mail.folder, safe='')}"
        if action in ("star", "unstar"):
            store.change(who.sid, lambda box: box.mark(mail.id, starred=action == "star"))
            return who.keep(RedirectResponse(f"/message/{mail.id}", status_code=303))
        if action == "unread":
            store.change(who.sid, lambda box: box.mark(mail.id, unread=True))
            return who.keep(_redirect(back, "unread"))
        if action == "archive":
            store.change(who.sid, lambda box: box.move([mail.id], ARCHIVE))
            return who.keep(_redirect(back, "archived"))
        if action == "move":
            target = form.get("folder", "")
            if target not in store.mailbox(who.sid).folder_names:
                return who.keep(_redirect(f"/message/{mail.id}", "no-folder"))
            store.change(who.sid, lambda box: box.move([mail.id], target))
            return who.keep(_redirect(back, "moved"))
        if action == "delete":
            store.change(who.sid, lambda box: box.delete([mail.id]))
            return who.keep(_redirect(back, "erased" if mail.folder == TRASH else "deleted"))
        return who.keep(RedirectResponse(f"/message/{mail.id}", status_code=303))

    def compose_page(who: Visit, request: Request, draft: Draft, errors: list[str]) -> Response:
        return page(who, store.mailbox(who.sid), request, "compose.html", "Compose", heading="New message",
                    draft=draft, errors=errors)

    @app.get("/compose")
    async def compose(request: Request) -> Response:
        who, params = Visit.of(request, store), request.query_params
        box = store.mailbox(who.sid)
        draft = Draft(to=params.get("to", ""))
        for key in ("reply", "forward", "draft"):
            if key not in params:
                continue
            source = box.mails.get(_number(params[key]) or 0)
            if source is None or (key == "draft") != source.draft:
                return not_found(who, request)
            draft = (box.reply(source, to_all=params.get("all") == "1") if key == "reply"
                     else box.forward(source) if key == "forward" else Draft.of(source))
            break
        return compose_page(who, request, draft, [])

    @app.post("/compose")
    async def send(request: Request) -> Response:
        who, form = Visit.of(request, store), await form_fields(request)
        draft = Draft(form.get("to", ""), form.get("cc", ""), form.get("subject", ""),
                      form.get("body", "").replace("\r\n", "\n"), _number(form.get("thread", "")),
                      _number(form.get("draft", "")))
        if form.get("action") == "save":
            store.change(who.sid, lambda box: box.save_draft(draft))
            return who.keep(_redirect(f"/folder/{DRAFTS}", "saved"))
        errors = draft_errors(draft)
        if errors:
            return compose_page(who, request, draft, errors)
        store.change(who.sid, lambda box: box.send(draft))
        return who.keep(_redirect(f"/folder/{SENT}", "sent"))

    def folders_page(who: Visit, request: Request, name: str, errors: list[str]) -> Response:
        return page(who, store.mailbox(who.sid), request, "folders.html", "Folders", name=name, errors=errors)

    @app.get("/folders")
    async def folders(request: Request) -> Response:
        return folders_page(Visit.of(request, store), request, "", [])

    @app.post("/folders")
    async def create_folder(request: Request) -> Response:
        who, form = Visit.of(request, store), await form_fields(request)
        name = form.get("name", "")
        error = store.change(who.sid, lambda box: box.create_folder(name))
        if error is not None:
            return folders_page(who, request, name, [error])
        return who.keep(_redirect("/folders", "created"))

    @app.get("/contacts")
    async def contacts(request: Request) -> Response:
        who = Visit.of(request, store)
        return page(who, store.mailbox(who.sid), request, "contacts.html", "Contacts")

    return app


def _number(text: str) -> int | None:
    """``text`` as a positive whole number, or ``None``."""
    text = text.strip()
    return int(text) if text.isdecimal() and len(text) <= 9 else None


def _first(form: dict[str, list[str]], key: str) -> str:
    return form.get(key, [""])[0]


def _here(request: Request) -> str:
    """The address of the page being shown, without its notice."""
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "notice"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def _local(url: str) -> str:
    """``url`` when it is a path on this site, else the Inbox."""
    parts = urlsplit(url)
    return url if url.startswith("/") and not url.startswith("//") and not parts.netloc else "/"


def _redirect(url: str, notice: str) -> RedirectResponse:
    """A redirect (after a form post) to ``url`` showing ``notice``."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "notice"] + [("notice", notice)]
    return RedirectResponse(f"{parts.path}?{urlencode(query)}", status_code=303)

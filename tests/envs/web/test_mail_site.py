"""The bundled webmail client without a browser: deterministic, varied mailboxes; tasks whose goals name
real messages; the validator on mailbox states (partial credit worked out by hand); the HTTP pages and forms
end to end (search, compose validation, reply and forward, filing and marks, folders, drafts) with per-session
state."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

import httpx
import pytest
from fastapi.testclient import TestClient

from agentgym.envs.web.mail import TURN_LIMITS
from agentgym.envs.web.sites.mail import (
    ARCHIVE,
    INBOX,
    SENT,
    TRASH,
    Answer,
    Draft,
    Goal,
    Mail,
    Mailbox,
    MailStore,
    MailTask,
    Outgoing,
    Person,
    create_app,
    generate,
    generate_mailbox,
    generate_tasks,
    score,
)
from agentgym.envs.web.sites.mail.app import PAGE_SIZE
from agentgym.envs.web.sites.sessions import SESSION_COOKIE
from tests.envs.web.test_shop_site import Page

KINDS = {"invoice", "meeting", "shipping", "travel", "newsletter", "code", "report", "request", "chat",
         "note", "draft"}
YAML_QUOTED = re.compile(r": |\s#|[{}\[\]]|^[-'\"@`!&*?|>%]")
"""What makes the aria snapshot quote a line, which the browser agent's element lookup cannot read."""


@functools.cache
def tasks() -> tuple[MailTask, ...]:
    return generate_tasks(0)


# mailboxes

def test_mailboxes_are_deterministic_per_seed_and_varied():
    assert generate(7) == generate(7)
    assert generate_mailbox(7) != generate_mailbox(8)
    boxes = [generate(seed) for seed in range(20)]
    assert len({g.mailbox.owner.address for g in boxes}) >= 15
    assert len({m.subject for g in boxes for m in g.mailbox.mails.values()}) >= 300
    assert sum(any(m.unread for m in g.mailbox.mails.values()) for g in boxes) >= 18
    assert sum(any(m.starred for m in g.mailbox.mails.values()) for g in boxes) >= 10
    for g in boxes:
        box = g.mailbox
        assert 30 <= len(box.mails) <= 60 and len(box.in_folder(INBOX)) > PAGE_SIZE
        assert {t.kind for t in g.threads} == KINDS
        assert sorted(id for t in g.threads for id in t.ids) == sorted(box.mails)
        assert {m.folder for m in box.mails.values()} <= set(box.folder_names)
        assert len({m.date for m in box.mails.values()}) == len(box.mails) and box.now > max(
            m.date for m in box.mails.values())
        assert len({box.label(m) for m in box.mails.values()}) == len(box.mails)
        assert len({p.first_name for p in box.contacts}) == len(box.contacts)
        assert all(box.person(a) is not None for m in box.mails.values() for a in (m.sender, *m.to, *m.cc))
        for thread in g.threads:
            text = " ".join(box.mails[id].body for id in thread.ids)
            for key in ("order", "invoice", "amount", "time", "room", "code", "tracking", "flight"):
                if key in thread.facts:
                    assert thread.facts[key] in text, (thread, key)
            assert len({box.mails[id].thread for id in thread.ids}) == 1
        facts = [value for t in g.threads for key, value in t.facts.items()
                 if key in ("code", "tracking", "amount", "time")]
        assert len(facts) == len(set(facts))


def test_search_needs_every_word_and_from_limits_the_sender_and_trash_is_left_out():
    g = generate(3)
    box = g.mailbox
    travel = next(t for t in g.threads if t.kind == "travel")
    confirmation = box.mails[travel.ids[0]]
    assert box.search(travel.facts["code"].lower()) == [confirmation]
    assert box.search(f"{travel.facts['city']} zzzz") == []
    assert box.search("") == [] and box.search("  ") == []
    rep = next(p for p in box.contacts if p.company not in (box.owner.company, "Friend"))
    mine = [m for m in box.mails.values() if m.sender == rep.address and m.folder != TRASH]
    found = box.search(f"from:{rep.first_name}")
    assert found == sorted(mine, key=lambda m: m.date, reverse=True) and len(found) >= 2
    assert box.search(f"FROM:{rep.address}") == found
    binned = next(m for m in box.mails.values() if m.folder == TRASH)
    assert binned not in box.search(binned.subject)
    words = box.search("invoice order")
    assert words and all("invoice" in (m.subject + m.body).lower() for m in words)


# tasks

def test_tasks_are_deterministic_balanced_varied_and_fit_their_turn_limits():
    made = tasks()
    assert generate_tasks(0) == made and generate_tasks(1) != made
    assert len(made) >= 120 and [t.id for t in made] == list(range(len(made)))
    counts = Counter(t.difficulty for t in made)
    assert set(counts) == {"easy", "medium", "hard"} and min(counts.values()) >= 40
    assert len({t.kind for t in made}) >= 15 and len({t.text for t in made}) >= 125
    assert len({t.seed for t in made}) == len(made)
    for task in made:
        assert task.steps[-1][0] == "send_msg_to_user"
        assert len(task.steps) + 4 <= min(TURN_LIMITS.values())


def test_every_task_names_messages_of_its_mailbox_unmet_at_the_start_by_names_the_browser_can_find():
    for task in tasks():
        box = generate_mailbox(task.seed)
        goal = task.goal
        assert goal.named <= set(box.mails)
        assert all(not box.mails[id].starred for id in goal.starred)
        assert all(not box.mails[id].unread for id in goal.unread)
        assert all(box.mails[id].folder != folder for id, folder in goal.placed)
        assert all(box.folder_named(folder) is None for folder in goal.folders)
        assert score(goal, box, box.copy(), None) == 0.0
        for tool, role, name, value in task.steps:
            assert not YAML_QUOTED.search(name), (task.id, name)
            assert (tool, bool(role), bool(value)) in {
                ("click", True, False), ("fill", True, True), ("select_option", True, True),
                ("send_msg_to_user", False, True)}, (task.id, tool)
        if goal.answer is not None:
            said = task.steps[-1][3]
            assert goal.answer.met(said) and not goal.answer.met("I do not know.")
            text = " ".join(m.body for m in box.mails.values())
            assert any(form in text for form in goal.answer.accepted)


# the validator, on mailboxes made by hand

OWNER = Person("Sam Carter", "sam@corp.com", "Corp")
DANA = Person("Dana Reyes", "dana@corp.com", "Corp")
LEE = Person("Lee Park", "lee@corp.com", "Corp")
NEWS = Person("Daily News", "news@daily.com")
START = datetime(2024, 3, 4, 9, 0)


def small_box() -> Mailbox:
    """Five messages: Dana's proposal, two newsletter issues, Lee's archived lunch note and Lee's report."""

    def mail(id: int, folder: str, sender: Person, subject: str, body: str, cc: tuple[str, ...] = ()) -> Mail:
        return Mail(id, folder, sender.address, (OWNER.address,), cc, subject, body,
                    START + timedelta(minutes=id), thread=id)

    mails = [mail(1, INBOX, DANA, "Budget", "Can we meet on Tuesday at 14:30?"),
             mail(2, INBOX, NEWS, "News 1", "Headlines"), mail(3, INBOX, NEWS, "News 2", "More headlines"),
             mail(4, ARCHIVE, LEE, "Lunch", "Noodles?"), mail(5, INBOX, LEE, "Report", "Draft attached",
                                                               (DANA.address,))]
    return Mailbox(OWNER, (DANA, LEE), (NEWS,), {m.id: m for m in mails}, START + timedelta(hours=1),
                   ["Projects"])


def test_a_message_to_send_is_scored_part_by_part_on_the_best_sent_message():
    goal = Goal(outgoing=Outgoing(frozenset({DANA.address}), "Re: Budget", ("Tuesday at 14:30",)))
    initial, final = small_box(), small_box()
    assert score(goal, initial, final, None) == 0.0
    final.save_draft(Draft(DANA.address, "", "Re: Budget", "Tuesday at 14:30 works"))
    assert score(goal, initial, final, None) == 0.0
    final.send(Draft(LEE.address, "", "Re: Budget", "no"))
    assert score(goal, initial, final, None) == pytest.approx(1 / 3)
    final.send(Draft(DANA.address, "", "Budget", "Tuesday at 14:30 works"))
    assert score(goal, initial, final, None) == pytest.approx(2 / 3)
    final.send(Draft(DANA.address, "", "Re: Budget", "\n\n" + initial.quote(initial.mails[1])))
    assert score(goal, initial, final, None) == pytest.approx(2 / 3)
    final.send(Draft("Dana Reyes <dana@corp.com>", "", "RE:  budget", "OK: tuesday at 14.30!"))
    assert score(goal, initial, final, None) == 1.0
    final.move([4], INBOX)
    assert score(goal, initial, final, None) == pytest.approx(3 / 4)


def test_cc_is_checked_exactly_when_the_task_asks():
    goal = Goal(outgoing=Outgoing(frozenset({LEE.address}), "Re: Report", ("Looks good",),
                                  frozenset({DANA.address, NEWS.address})))
    initial, final = small_box(), small_box()
    final.send(Draft(LEE.address, DANA.address, "Re: Report", "Looks good."))
    assert score(goal, initial, final, None) == pytest.approx(3 / 4)
    final.send(Draft(f"{LEE.address}, {DANA.address}", f"{DANA.address}; {NEWS.address}", "Re: Report",
                     "Looks good"))
    assert score(goal, initial, final, None) == pytest.approx(3 / 4)
    final.send(Draft(LEE.address, f"{NEWS.address}, {DANA.address.upper()}", "Re: Report", "Looks good"))
    assert score(goal, initial, final, None) == 1.0


def test_filing_goals_count_each_message_and_every_other_message_moved_is_a_failed_check():
    goal = Goal(placed=((2, TRASH), (3, TRASH)))
    initial, final = small_box(), small_box()
    final.delete([2])
    assert score(goal, initial, final, None) == 0.5
    final.delete([2])
    assert 2 not in final.mails and score(goal, initial, final, None) == 0.5
    final.delete([3, 5])
    assert score(goal, initial, final, None) == pytest.approx(2 / 3)
    final.move([5], INBOX)
    assert score(goal, initial, final, None) == 1.0
    final.delete(list(final.mails))
    assert score(goal, initial, final, None) == pytest.approx(2 / 5)


def test_marks_count_and_starring_others_is_collateral_but_reading_is_not():
    initial, final = small_box(), small_box()
    goal = Goal(starred=(1,))
    final.mark(1, starred=True)
    final.mark(4, starred=True)
    assert score(goal, initial, final, None) == 0.5
    final.mark(4, starred=False)
    final.mark(5, unread=True)
    final.open(2)
    assert score(goal, initial, final, None) == 1.0
    unread = Goal(unread=(3,))
    assert score(unread, initial, final, None) == 0.0
    final.mark(3, unread=True)
    assert score(unread, initial, final, None) == 0.5  # message 1, not named here, was starred
    final.mark(1, starred=False)
    assert score(unread, initial, final, None) == 1.0


def test_a_new_folder_matches_whatever_its_case_and_its_messages_must_be_in_it():
    goal = Goal(placed=((1, "Budget 2024"),), folders=("Budget 2024",))
    initial, final = small_box(), small_box()
    assert score(goal, initial, final, None) == 0.0
    final.move([1], "Projects")
    assert score(goal, initial, final, None) == 0.0
    assert final.create_folder("  budget   2024 ") is None
    assert score(goal, initial, final, None) == 0.5
    final.move([1], "budget 2024")
    assert score(goal, initial, final, None) == 1.0


def test_an_answer_is_read_from_the_message_to_the_user_in_any_accepted_form_and_never_hedged():
    answer = Answer(("14:30", "2:30 pm"), ("09:15",))
    assert answer.met("It is at 14:30.") and answer.met("2:30PM") and answer.met("2.30 pm, Tuesday")
    assert not answer.met("1430") and not answer.met("14:30 or 09:15") and not answer.met("114:30")
    assert not answer.met(None) and not answer.met("")
    goal = Goal(answer=answer)
    initial, final = small_box(), small_box()
    assert score(goal, initial, final, "14:30") == 1.0 and score(goal, initial, final, "noon") == 0.0
    final.delete([2])
    assert score(goal, initial, final, "14:30") == 0.5


# the site over HTTP

@dataclass
class Client:
    store: MailStore
    client: TestClient

    @property
    def sid(self) -> str:
        return self.client.cookies[SESSION_COOKIE]

    @property
    def box(self) -> Mailbox:
        return self.store.mailbox(self.sid)

    def get(self, url: str, **params: str) -> Page:
        return Page(self.client.get(url, params=params or None))

    def post(self, url: str, **form: str | list[str]) -> httpx.Response:
        return self.client.post(url, data=form, follow_redirects=False)


SEED = 11


@pytest.fixture
def mail() -> Iterator[Client]:
    store = MailStore(lambda: generate_mailbox(SEED))
    with TestClient(create_app(store)) as client:
        visitor = Client(store, client)
        visitor.get("/")
        yield visitor


def rows(page: Page) -> list[str]:
    """The message links of a list page, in order."""
    return [a.text for a in page.all("a") if a.attrs["href"].startswith("/message/")]


def test_the_inbox_lists_newest_first_in_pages_with_marks_and_unique_names(mail):
    box = mail.box
    inbox = box.in_folder(INBOX)
    first = mail.get("/")
    assert (first.title, first.heading) == ("Mail: Inbox", "Inbox")
    assert rows(first) == [box.label(m) for m in inbox[:PAGE_SIZE]]
    second = mail.get(first.link("Next page"))
    assert rows(second) == [box.label(m) for m in inbox[PAGE_SIZE:2 * PAGE_SIZE]]
    assert "Next page" not in second.html
    assert second.link("Previous page")
    assert first.link("Inbox") == "/folder/Inbox" and rows(mail.get("/folder/Inbox")) == rows(first)
    unread = sum(m.unread for m in inbox)
    assert f"{unread} unread" in first.one("nav", **{"aria-label": "Mailboxes"}).text
    for m in inbox[:PAGE_SIZE]:
        checkbox = first.labelled(f"Select {box.label(m)}")
        assert (checkbox.attrs["type"], checkbox.attrs["value"]) == ("checkbox", str(m.id))
        row = next(r for r in first.all("tr") if box.label(m) in r.text)
        assert ("Unread" in row.text) == m.unread and ("Starred" in row.text) == m.starred
        assert m.subject in row.text
    for url in ("/folder/Nowhere", "/message/9999", "/message/abc", "/nowhere", "/compose?reply=9999"):
        missing = mail.get(url)
        assert (missing.status, missing.heading) == (404, "Not found")


def test_search_results_show_each_folder_and_say_how_many_matched(mail):
    g = generate(SEED)
    rep = next(t for t in g.threads if t.kind == "invoice").facts
    page = mail.get("/search", q=f"invoice {rep['order']}")
    found = mail.box.search(f"invoice {rep['order']}")
    assert page.heading == "Search results" and rows(page) == [mail.box.label(m) for m in found]
    assert f"{len(found)} message" in page.html and page.labelled("Search mail").attrs["value"] == (
        f"invoice {rep['order']}")
    assert all(m.folder in page.html for m in found)
    empty = mail.get("/search", q="")
    assert rows(empty) == [] and "Type words" in empty.html
    assert "No messages match." in mail.get("/search", q="zzzz").html


def test_reading_marks_read_and_the_buttons_star_mark_file_and_delete(mail):
    box = mail.box
    target = next(m for m in box.in_folder(INBOX) if m.unread and not m.starred)
    page = mail.get(f"/message/{target.id}")
    assert page.heading == target.subject and not mail.box.mails[target.id].unread
    assert box.header(target.sender) in page.one("dl").text
    assert page.one("article").text.startswith(target.body.split()[0])
    url = f"/message/{target.id}"
    assert mail.post(url, action="star").headers["location"] == url and mail.box.mails[target.id].starred
    assert "Unstar" in mail.get(url).html
    mail.post(url, action="unstar")
    response = mail.post(url, action="unread")
    assert response.headers["location"] == "/folder/Inbox?notice=unread" and mail.box.mails[target.id].unread
    assert "Marked as unread." in mail.get(response.headers["location"]).one("div", role="status").text
    response = mail.post(url, action="move", folder=box.folders[0])
    assert mail.box.mails[target.id].folder == box.folders[0] and response.headers["location"].startswith(
        "/folder/Inbox?")
    assert mail.post(url, action="move", folder="Nowhere").status_code == 303
    assert mail.box.mails[target.id].folder == box.folders[0]
    mail.post(url, action="archive")
    assert mail.box.mails[target.id].folder == ARCHIVE
    mail.post(url, action="delete")
    assert mail.box.mails[target.id].folder == TRASH and "Delete forever" in mail.get(url).html
    mail.post(url, action="delete")
    assert target.id not in mail.box.mails and mail.get(url).status == 404
    others = {id: m for id, m in box.mails.items() if id != target.id}
    assert {id: (m.folder, m.starred) for id, m in mail.box.mails.items()} == {
        id: (m.folder, m.starred) for id, m in others.items()}


def test_bulk_actions_file_only_the_ticked_messages_and_return_to_the_list(mail):
    box = mail.box
    picked = [m.id for m in box.in_folder(INBOX)[:3]]
    back = "/search?q=from%3Ax"
    response = mail.post("/bulk", ids=[str(i) for i in picked[:2]], action="archive", back=back)
    assert response.headers["location"] == "/search?q=from%3Ax&notice=archived"
    assert [mail.box.mails[i].folder for i in picked] == [ARCHIVE, ARCHIVE, INBOX]
    mail.post("/bulk", ids=[str(picked[2])], action="move", folder=box.folders[1], back="/")
    assert mail.box.mails[picked[2]].folder == box.folders[1]
    mail.post("/bulk", ids=[str(i) for i in picked], action="delete", back="/")
    assert all(mail.box.mails[i].folder == TRASH for i in picked)
    before = mail.box
    assert mail.post("/bulk", action="delete", back="/").headers["location"] == "/?notice=none"
    assert mail.post("/bulk", ids=[str(picked[0])], action="", back="/").headers["location"] == "/"
    assert mail.post("/bulk", ids=[str(picked[0])], action="move", folder="Sentx", back="/").headers[
        "location"] == "/?notice=no-folder"
    assert mail.post("/bulk", ids=["x", "99999"], action="delete", back="//evil.example/").headers[
        "location"] == "/?notice=deleted"
    assert mail.box == before
    page = mail.get("/folder/Trash")
    assert page.one("button", "Delete selected") and "Delete forever" not in page.html
    erased = mail.post("/bulk", ids=[str(i) for i in picked], action="delete", back="/folder/Trash")
    assert erased.headers["location"] == "/folder/Trash?notice=erased"
    assert not set(picked) & set(mail.box.mails)


def test_compose_refuses_a_missing_or_malformed_address_and_keeps_what_was_typed(mail):
    page = mail.get("/compose")
    assert (page.title, page.heading) == ("Mail: Compose", "New message")
    for label, name in (("To", "to"), ("Cc", "cc"), ("Subject", "subject"), ("Body", "body")):
        assert page.labelled(label).attrs["name"] == name
    sent_before = len(mail.box.in_folder(SENT))
    cases = [({"to": "", "subject": "Hi"}, ["Add at least one recipient in To."]),
             ({"to": " , ;"}, ["Add at least one recipient in To."]),
             ({"to": "bob@"}, ["To: “bob@” is not a valid email address."]),
             ({"to": "Dana Reyes"}, ["To: “Dana Reyes” is not a valid email address."]),
             ({"to": "a@b.com", "cc": "c@d, e@f.org"}, ["Cc: “c@d” is not a valid email address."]),
             ({"to": "", "cc": "x"},
              ["Add at least one recipient in To.", "Cc: “x” is not a valid email address."])]
    for fields, alerts in cases:
        form = {"to": "", "cc": "", "subject": "Plans", "body": "Line one\nLine two", "action": "send"}
        form |= fields
        response = mail.post("/compose", **form)
        page = Page(response)
        assert response.status_code == 200 and page.alert == " ".join(alerts)
        for label in ("To", "Cc", "Subject"):
            assert page.labelled(label).attrs["value"] == form[label.lower()]
        assert "Line one\nLine two" in page.html
    assert len(mail.box.in_folder(SENT)) == sent_before
    response = mail.post("/compose", to="Lee Park <lee@corp.com>; dana@corp.com", cc="", subject=" Plans ",
                         body="Hello\r\nthere", action="send")
    assert response.status_code == 303 and response.headers["location"] == "/folder/Sent?notice=sent"
    [sent] = [m for m in mail.box.in_folder(SENT) if m.subject == "Plans"]
    assert (sent.to, sent.cc, sent.body, sent.sender, sent.draft) == (
        ("lee@corp.com", "dana@corp.com"), (), "Hello\nthere", mail.box.owner.address, False)
    assert sent.date > max(m.date for m in generate_mailbox(SEED).mails.values())
    assert "Your message was sent." in mail.get(response.headers["location"]).html


def test_reply_reply_all_and_forward_quote_the_original_with_re_and_fwd_subjects(mail):
    box = mail.box
    g = generate(SEED)
    report = box.mails[next(t for t in g.threads if t.kind == "report").ids[0]]
    me = box.owner.address
    page = mail.get(f"/message/{report.id}")
    reply = mail.get(page.link("Reply"))
    assert reply.labelled("To").attrs["value"] == report.sender and reply.labelled("Cc").attrs["value"] == ""
    assert reply.labelled("Subject").attrs["value"] == f"Re: {report.subject}"
    body = reply.one("textarea").text
    assert f"{box.name_of(report.sender)} <{report.sender}> wrote:" in body
    assert all(f"> {line}" in body for line in report.body.splitlines() if line)
    everyone = mail.get(page.link("Reply all").replace("&amp;", "&"))
    assert everyone.labelled("To").attrs["value"] == ", ".join([report.sender,
                                                                *(a for a in report.to if a != me)])
    assert everyone.labelled("Cc").attrs["value"] == ", ".join(a for a in report.cc if a != me)
    forward = mail.get(page.link("Forward"))
    assert forward.labelled("To").attrs["value"] == "" and forward.labelled("Subject").attrs["value"] == (
        f"Fwd: {report.subject}")
    assert "---------- Forwarded message ----------" in forward.html
    assert f"Subject: {report.subject}" in forward.html
    assert all(line in forward.html for line in report.body.splitlines())
    thread = forward.one("input", name="thread").attrs["value"]
    mail.post("/compose", to="lee@corp.com", cc="", subject=f"Re: {report.subject}", body="Fine.",
              thread=thread, draft="", action="send")
    [answer] = [m for m in mail.box.in_folder(SENT) if m.body == "Fine."]
    assert answer.thread == report.thread
    conversation = mail.get(f"/message/{report.id}")
    assert conversation.link(mail.box.label(answer)) == f"/message/{answer.id}"
    again = mail.get(f"/compose?reply={answer.id}")
    assert again.labelled("Subject").attrs["value"] == f"Re: {report.subject}"
    assert again.labelled("To").attrs["value"] == "lee@corp.com"


def test_drafts_are_saved_unchecked_edited_and_replaced_by_the_message_sent(mail):
    saved = mail.post("/compose", to="bob@", cc="", subject="Later", body="Half a thought", action="save")
    assert saved.headers["location"] == "/folder/Drafts?notice=saved"
    [draft] = [m for m in mail.box.mails.values() if m.subject == "Later"]
    assert draft.draft and draft.folder == "Drafts" and draft.to == ("bob@",)
    page = mail.get(f"/message/{draft.id}")
    edit = mail.get(page.link("Edit draft"))
    assert edit.labelled("To").attrs["value"] == "bob@"
    assert edit.one("input", name="draft").attrs["value"] == str(draft.id)
    sent = next(m.id for m in mail.box.mails.values() if not m.draft)
    assert mail.get(f"/compose?draft={sent}").status == 404
    mail.post("/compose", to="bob@example.com", cc="", subject="Later", body="A whole thought",
              draft=str(draft.id), thread="", action="send")
    later = [m for m in mail.box.mails.values() if m.subject == "Later"]
    assert [(m.folder, m.draft, m.body) for m in later] == [(SENT, False, "A whole thought")]
    assert later[0].id > max(generate_mailbox(SEED).mails)


def test_folders_are_created_with_checked_names_and_become_places_to_file(mail):
    page = mail.get("/folders")
    assert page.labelled("Folder name").attrs["name"] == "name" and page.one("button", "Create folder")
    existing = mail.box.folders[0]
    cases = [("", "Enter a folder name."), ("   ", "Enter a folder name."),
             (existing.upper(), f"There is already a folder named {existing}."),
             ("inbox", "There is already a folder named Inbox."), ("x" * 41, "at most 40 characters"),
             ("a/b", "letters, digits, spaces")]
    for name, alert in cases:
        page = Page(mail.post("/folders", name=name))
        assert page.status == 200 and alert in (page.alert or "") and page.labelled("Folder name").attrs[
            "value"] == name
    assert mail.box.folders == generate_mailbox(SEED).folders
    assert mail.post("/folders", name=" Big   Plans ").headers["location"] == "/folders?notice=created"
    assert mail.box.folders[-1] == "Big Plans"
    inbox = mail.get("/")
    assert inbox.link("Big Plans") == "/folder/Big%20Plans" and mail.get("/folder/Big%20Plans").heading == (
        "Big Plans")
    assert "Big Plans" in [o.text for o in inbox.all("option")]


def test_contacts_list_everyone_with_a_link_to_write_to_them(mail):
    page = mail.get("/contacts")
    box = mail.box
    assert page.heading == "Contacts"
    for person in box.contacts:
        write = mail.get(page.link(f"Write to {person.name}"))
        assert write.labelled("To").attrs["value"] == person.address


def test_sessions_keep_their_own_mailbox_and_never_see_each_others_mail(mail):
    other_box = generate_mailbox(SEED + 1)
    sid = mail.store.new_session(other_box.copy())
    with TestClient(mail.client.app) as other:
        other.cookies.set(SESSION_COOKIE, sid)
        page = Page(other.get("/"))
        assert other_box.owner.address in page.html and mail.box.owner.address not in page.html
        other.post("/compose", data={"to": "x@y.com", "subject": "Only mine", "body": "b", "action": "send"})
        with TestClient(mail.client.app) as stranger:
            Page(stranger.get("/"))
            assert stranger.cookies[SESSION_COOKIE] not in (sid, mail.sid)
    assert mail.store.mailbox(sid).in_folder(SENT)[0].subject == "Only mine"
    assert "Only mine" not in {m.subject for m in mail.box.mails.values()}
    assert "Only mine" not in mail.get("/folder/Sent").html
    ours = mail.box.mails[mail.box.in_folder(INBOX)[0].id]
    assert Page(mail.client.get(f"/message/{ours.id}")).heading == ours.subject
    before, snapshot = mail.box, mail.box
    snapshot.delete(list(snapshot.mails))
    snapshot.create_folder("Mine")
    assert mail.box == before and snapshot != before
    mail.store.end(sid)
    assert not mail.store.known(sid)

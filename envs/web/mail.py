"""Mail: read, search, answer, forward and file mail in a bundled webmail client, as a request describes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from agentgym.envs.web.env import WebEnv, opening
from agentgym.envs.web.sites import OracleStep
from agentgym.envs.web.sites.mail import (
    Mailbox,
    MailStore,
    MailTask,
    create_app,
    generate_mailbox,
    generate_tasks,
    score,
)
from agentgym.envs.web.sites.sessions import SessionSite
from agentgym.envs.web.tasks import choose_task
from agentgym.messages import Message

TURN_LIMITS = {"easy": 15, "medium": 20, "hard": 25}
"""Turns per episode; the longest oracle run of any task takes 11, so every limit leaves room for mistakes
(and a task played by index fits whatever difficulty the reset named)."""


class MailSite(SessionSite[Mailbox]):
    """The webmail client as a :class:`~agentgym.envs.web.env.Site`: 150 generated tasks, each with a mailbox
    of its own, and one mailbox per session."""

    name = "mail"
    store: MailStore

    def __init__(self, seed: int = 0) -> None:
        self.tasks: tuple[MailTask, ...] = generate_tasks(seed)
        store = MailStore(lambda: generate_mailbox(seed))
        super().__init__(create_app(store), store)


@functools.cache
def mail_site() -> MailSite:
    """The mail site every environment in this process uses."""
    return MailSite()


class MailEnv(WebEnv):
    """Webmail tasks in a real browser: star, file, delete, mark, reply, forward, write and look things up in
    a generated mailbox, then call ``send_msg_to_user`` (with the answer, when the task asks a question).

    The reward reads this episode's mailbox: the share of the task's checks met (messages starred, unread or
    filed where asked, folders made, the sent message's To, Cc, subject and required words, the answer), where
    each message the task did not name that was moved, deleted, starred or unstarred counts as a failed check;
    success when all are met. Difficulties: ``easy`` (one action on a named message, a message to a contact, a
    code to read out), ``medium`` (forward an invoice, look up a fact, delete or archive every message of a
    sender, answer a colleague's question), ``hard`` (pass a fact found in one mail to someone found in
    another, file a whole conversation into a new folder, reply to all with a Cc, forward then archive,
    accept a proposed meeting). The reset option ``task`` (an index into the site's tasks) plays that one.
    """

    difficulties = ("easy", "medium", "hard")
    reset_options = frozenset({"task"})

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task: MailTask | None = None
        self.initial: Mailbox | None = None
        """The episode's mailbox as it started, against which the end state is scored."""

    @property
    def site(self) -> MailSite:
        return mail_site()

    def turn_limit(self, difficulty: str) -> int:
        return TURN_LIMITS[difficulty]

    async def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        self.task = choose_task(self.site.tasks, difficulty, options, self.np_random)
        self.initial = generate_mailbox(self.task.seed)
        return opening(f"Task: {self.task.text}", await self.open_site(self.initial.copy()))

    def score(self) -> tuple[float, bool]:
        assert self.task is not None and self.initial is not None and self.session is not None
        reward = score(self.task.goal, self.initial, self.site.store.mailbox(self.session), self.message)
        return reward, reward == 1.0

    def oracle_steps(self) -> Sequence[OracleStep]:
        assert self.task is not None
        return self.task.steps

    def render_text(self) -> str:
        return self.task.text if self.task is not None else ""

"""The bundled webmail client: generated mailboxes, per-session mail state, the FastAPI site that serves it,
and the tasks whose outcome is scored from the mailbox's state."""

from agentgym.envs.web.sites.mail.app import create_app
from agentgym.envs.web.sites.mail.mailbox import Generated, Thread, generate, generate_mailbox
from agentgym.envs.web.sites.mail.store import (
    ARCHIVE,
    DRAFTS,
    INBOX,
    SENT,
    SYSTEM_FOLDERS,
    TRASH,
    Draft,
    Mail,
    Mailbox,
    MailStore,
    Person,
)
from agentgym.envs.web.sites.mail.tasks import (
    Answer,
    Goal,
    MailTask,
    Outgoing,
    checks,
    collateral,
    generate_tasks,
    score,
)

__all__ = [
    "ARCHIVE",
    "DRAFTS",
    "INBOX",
    "SENT",
    "SYSTEM_FOLDERS",
    "TRASH",
    "Answer",
    "Draft",
    "Generated",
    "Goal",
    "Mail",
    "MailStore",
    "MailTask",
    "Mailbox",
    "Outgoing",
    "Person",
    "Thread",
    "checks",
    "collateral",
    "create_app",
    "generate",
    "generate_mailbox",
    "generate_tasks",
    "score",
]

"""IssueTracker: triage a project's issues through the tools of an MCP server (``tracker_server.py``).

easy: change one named issue (close it, label it, assign it). medium: find the issue a description points
to and assign it, or count issues and answer. hard: close every open issue with a label and an assignee,
with a comment. The verifier reads the tracker's final state from the server's ``tracker://state``
resource: the asked changes, and nothing else, must be there, and a count must be answered right.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np

from agentgym.envs.mcp.env import McpEnv, McpEpisode, McpTask, python_server

STATE_FILE = "tracker.json"
"""The tracker's state in the work dir, which the server loads and rewrites."""
SERVER = python_server(Path(__file__).with_name("tracker_server.py"), STATE_FILE)
USERS = ("alice", "bob", "carol", "dave", "erin", "frank")
LABELS = ("bug", "feature", "docs", "ui", "backend", "urgent")
COMPONENTS = (
    "login page", "CSV export", "dark mode", "search bar", "password reset", "file upload", "settings page",
    "notification mailer", "payment form", "profile picture", "date picker", "rate limiter", "sidebar menu",
    "PDF report", "language switcher", "invoice numbering", "two-factor login", "image gallery",
    "calendar sync", "audit log",
)
PROBLEMS = {
    "bug": ("crashes on submit", "is slow with many items", "shows the wrong date", "breaks on small screens",
            "loses unsaved changes", "ignores the time zone"),
    "feature": ("should support keyboard shortcuts", "needs an undo button", "should remember the last choice"),
    "docs": ("is not documented", "has an outdated help page"),
}
CLOSING_COMMENT = "triaged"
ISSUES = {"easy": 8, "medium": 12, "hard": 16}


class IssueTrackerEnv(McpEnv):
    """Triage issues with an MCP issue-tracker server's tools, then submit (see the module)."""

    difficulties = ("easy", "medium", "hard")
    server = SERVER

    def make_task(self, rng: np.random.Generator, difficulty: str) -> McpTask:
        issues = _issues(rng, ISSUES[difficulty])
        maker = {"easy": _change_one, "medium": rng.choice([_assign_described, _count]), "hard": _close_matching}
        prompt, plan, answer = maker[difficulty](rng, issues)
        expected = copy.deepcopy(issues)
        for name, arguments in plan:
            _apply(expected, name, arguments)
        return McpTask(prompt, files={STATE_FILE: json.dumps({"issues": issues}, indent=1)},
                       data={"plan": plan, "expected": expected, "answer": answer})

    async def verify(self, episode: McpEpisode) -> bool:
        final = json.loads(await episode.client.read_resource("tracker://state"))["issues"]
        data = episode.task.data
        if data["answer"] is not None and episode.answer.strip().rstrip(".") != data["answer"]:
            return False
        return len(final) == len(data["expected"]) and all(map(_as_expected, final, data["expected"]))

    def oracle_action(self) -> str:
        assert self.task is not None
        plan = self.task.data["plan"]
        done = sum(1 for call in self.calls if not call.is_error and (call.name, call.arguments) in plan)
        if done < len(plan):
            name, arguments = plan[done]
            return self.format_call(name, **arguments)
        return self.format_call("submit", answer=self.task.data["answer"] or "done")


def _issues(rng: np.random.Generator, count: int) -> list[dict[str, Any]]:
    """``count`` issues about different components, numbered from a random start."""
    first = int(rng.integers(1, 200))
    issues = []
    for offset, component in enumerate(rng.choice(COMPONENTS, size=count, replace=False)):
        kind = str(rng.choice(list(PROBLEMS), p=[0.6, 0.25, 0.15]))
        problem = str(rng.choice(PROBLEMS[kind]))
        extra = [str(label) for label in rng.choice(LABELS[3:], size=int(rng.integers(0, 2)), replace=False)]
        issues.append({
            "id": first + offset, "title": f"The {component} {problem}", "state": "closed" if rng.random() < 0.2 else "open",
            "labels": [kind, *extra], "assignee": str(rng.choice(USERS)) if rng.random() < 0.6 else None,
            "body": f"Reported against the {component}: it {problem}.", "comments": [],
        })
    return issues


Plan = list[tuple[str, dict[str, Any]]]


def _change_one(rng: np.random.Generator, issues: list[dict[str, Any]]) -> tuple[str, Plan, None]:
    """Close, label or assign one issue named by its number."""
    issue = rng.choice([issue for issue in issues if issue["state"] == "open"])
    change = int(rng.integers(3))
    if change == 0:
        return f"Close issue #{issue['id']}.", [("close_issue", {"issue_id": issue["id"]})], None
    if change == 1:
        label = str(rng.choice([label for label in LABELS if label not in issue["labels"]]))
        return (f"Add the label '{label}' to issue #{issue['id']}.",
                [("add_label", {"issue_id": issue["id"], "label": label})], None)
    user = str(rng.choice([user for user in USERS if user != issue["assignee"]]))
    return f"Assign issue #{issue['id']} to {user}.", [("assign", {"issue_id": issue["id"], "user": user})], None


def _assign_described(rng: np.random.Generator, issues: list[dict[str, Any]]) -> tuple[str, Plan, None]:
    """Assign the open issue that a description (not its number) points to."""
    issue = rng.choice([issue for issue in issues if issue["state"] == "open"])
    user = str(rng.choice([user for user in USERS if user != issue["assignee"]]))
    about = issue["title"].removeprefix("The ")
    return (f"Someone reported that the {about}. Find that issue and assign it to {user}.",
            [("assign", {"issue_id": issue["id"], "user": user})], None)


def _count(rng: np.random.Generator, issues: list[dict[str, Any]]) -> tuple[str, Plan, str]:
    """Count the open issues with a label; nothing may change."""
    label = str(rng.choice(LABELS[:4]))
    count = sum(1 for issue in issues if issue["state"] == "open" and label in issue["labels"])
    return (f"How many open issues have the label '{label}'? Change nothing; submit just the number.",
            [("list_issues", {"state": "open", "label": label})], str(count))


def _close_matching(rng: np.random.Generator, issues: list[dict[str, Any]]) -> tuple[str, Plan, None]:
    """Close, with a comment, every open issue that has a label and an assignee (at least two of them)."""
    label, user = "bug", str(rng.choice(USERS))
    opened = sorted((issue for issue in issues if issue["state"] == "open"), key=lambda issue: label not in issue["labels"])
    for issue in opened[: 2 + int(rng.integers(2))]:  # at least two issues match: bugs first, else made bugs
        issue["assignee"] = user
        if label not in issue["labels"]:
            issue["labels"].insert(0, label)
    plan = [("close_issue", {"issue_id": issue["id"], "comment": CLOSING_COMMENT})
            for issue in issues if issue["state"] == "open" and label in issue["labels"] and issue["assignee"] == user]
    prompt = (f"Close every open issue labelled '{label}' that is assigned to {user}, each with the comment "
              f"'{CLOSING_COMMENT}'. Leave the other issues as they are.")
    return prompt, plan, None


def _apply(issues: list[dict[str, Any]], name: str, arguments: dict[str, Any]) -> None:
    """What a planned tool call does to the tracker (reads change nothing)."""
    issue = next((issue for issue in issues if issue["id"] == arguments.get("issue_id")), None)
    if name == "close_issue" and issue is not None:
        issue["state"] = "closed"
        if arguments.get("comment"):
            issue["comments"].append(arguments["comment"])
    elif name == "add_label" and issue is not None:
        issue["labels"].append(arguments["label"])
    elif name == "assign" and issue is not None:
        issue["assignee"] = arguments["user"]


def _as_expected(final: dict[str, Any], expected: dict[str, Any]) -> bool:
    """Whether an issue ended as expected: the same number, state, labels (in any order) and assignee, and
    every comment asked for (others may be added)."""
    return ((final["id"], final["state"], sorted(final["labels"]), final["assignee"])
            == (expected["id"], expected["state"], sorted(expected["labels"]), expected["assignee"])
            and all(comment in final["comments"] for comment in expected["comments"]))

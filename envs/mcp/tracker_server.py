"""An issue tracker as an MCP server on stdio, written with the ``mcp`` SDK: the example server of
``mcp/IssueTracker-v0``. It runs inside the episode's sandbox and imports nothing from agentgym.

Usage: ``python3 tracker_server.py STATE.json``. The file holds ``{"issues": [...]}`` and is rewritten after
every change, and the resource ``tracker://state`` returns it, so a verifier can read the final state
either way.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

STATE = Path(sys.argv[1] if len(sys.argv) > 1 else "tracker.json")
app = MCPServer("issue-tracker", instructions="The tracker of one software project's issues (bugs, features, docs).")


def _load() -> list[dict]:
    return json.loads(STATE.read_text())["issues"]


def _save(issues: list[dict]) -> None:
    STATE.write_text(json.dumps({"issues": issues}, indent=1))


def _find(issues: list[dict], issue_id: int) -> dict:
    for issue in issues:
        if issue["id"] == issue_id:
            return issue
    raise ToolError(f"there is no issue #{issue_id}")


def _line(issue: dict) -> str:
    labels = ", ".join(issue["labels"]) or "no labels"
    return f"#{issue['id']} [{issue['state']}] {issue['title']} ({labels}; assignee: {issue['assignee'] or 'none'})"


@app.tool()
def list_issues(state: Literal["open", "closed", "all"] = "open", label: str | None = None,
                assignee: str | None = None) -> str:
    """List issues, one per line, optionally only those with a label or an assignee."""
    found = [issue for issue in _load()
             if state in ("all", issue["state"]) and (label is None or label in issue["labels"])
             and (assignee is None or issue["assignee"] == assignee)]
    return "\n".join(_line(issue) for issue in found) or "No issues match."


@app.tool()
def search_issues(query: str) -> str:
    """Find issues whose title or description contains every word of the query (case does not matter)."""
    words = query.lower().split()
    if not words:
        raise ToolError("the query is empty")
    found = [issue for issue in _load() if all(w in f"{issue['title']} {issue['body']}".lower() for w in words)]
    return "\n".join(_line(issue) for issue in found) or "No issues match."


@app.tool()
def get_issue(issue_id: int) -> str:
    """Show one issue in full: title, state, labels, assignee, description and comments."""
    issue = _find(_load(), issue_id)
    comments = "".join(f"\n- {comment}" for comment in issue["comments"]) or " none"
    return f"{_line(issue)}\n{issue['body']}\nComments:{comments}"


def _update(issue_id: int, change: Callable[[dict], str]) -> str:
    """Apply ``change`` to the issue (it raises ToolError to refuse), save the tracker, and say what it did."""
    issues = _load()
    done = change(_find(issues, issue_id))
    _save(issues)
    return done


@app.tool()
def close_issue(issue_id: int, comment: str = "") -> str:
    """Close an open issue, with an optional comment."""

    def close(issue: dict) -> str:
        if issue["state"] == "closed":
            raise ToolError(f"issue #{issue_id} is already closed")
        issue["state"] = "closed"
        issue["comments"] += [comment] if comment else []
        return f"Closed #{issue_id}."

    return _update(issue_id, close)


@app.tool()
def add_label(issue_id: int, label: str) -> str:
    """Add a label to an issue."""

    def label_it(issue: dict) -> str:
        if label in issue["labels"]:
            raise ToolError(f"issue #{issue_id} already has the label {label!r}")
        issue["labels"].append(label)
        return f"Labelled #{issue_id} {label!r}."

    return _update(issue_id, label_it)


@app.tool()
def assign(issue_id: int, user: str) -> str:
    """Make a user the assignee of an issue (replacing any other)."""

    def assign_it(issue: dict) -> str:
        issue["assignee"] = user
        return f"Assigned #{issue_id} to {user}."

    return _update(issue_id, assign_it)


@app.resource("tracker://state")
def state() -> str:
    """Every issue as JSON: the tracker's whole state."""
    return STATE.read_text()


if __name__ == "__main__":
    app.run()

"""The file tools of the agent-computer interface, in the manner of SWE-agent's and OpenHands' editor: view a file
with line numbers (or a folder), replace a string that must occur exactly once, insert after a line, create a
file. Each runs as one program inside the sandbox, so paths and permissions are the sandbox's own; what went wrong
(a missing path, a string that is not there or is there twice, a binary file) comes back as a clear error.
"""

from __future__ import annotations

from typing import Any

from agentgym.envs.sandbox_io import ReadBackError, encode, read_back
from agentgym.errors import ToolError
from agentgym.sandboxes.base import Sandbox

VIEW_CHARS = 16_000
"""Characters of a file or folder listing shown at once; past it the view is cut with a note."""
SNIPPET_LINES = 4
"""Lines shown around an edit, before and after it."""

_PROGRAM = r'''
import json, os, sys

def fail(message):
    print(json.dumps({"error": message}))
    sys.exit(0)

def numbered(lines, first):
    return "".join(f"{number:6}\t{line}\n" for number, line in enumerate(lines, first))

def read_text(path):
    if not os.path.exists(path):
        fail(f"The path {path} does not exist.")
    if os.path.isdir(path):
        fail(f"{path} is a folder; this command works on files (view shows a folder).")
    with open(path, "rb") as f:
        data = f.read()
    if b"\0" in data[:8192]:
        fail(f"{path} is a binary file; only text files can be shown or edited.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        fail(f"{path} is not UTF-8 text (a binary file?); only text files can be shown or edited.")

def write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)

def snippet(text, first_line, count, path):
    lines = text.split("\n")
    start = max(0, first_line - 1 - CONTEXT)
    end = min(len(lines), first_line - 1 + count + CONTEXT)
    return (f"The file {path} has been edited. Here is a snippet of it (cat -n):\n"
            + numbered(lines[start:end], start + 1) + "Review the change and make sure it is as expected.")

def run():
    if command == "view":
        if os.path.isdir(path):
            found = []
            for root, folders, files in os.walk(path):
                shown = sorted(f for f in folders if not f.startswith("."))
                found += [os.path.join(root, name) + "/" for name in shown]
                found += [os.path.join(root, name) for name in sorted(files) if not name.startswith(".")]
                folders[:] = shown if root == path else []
            print(json.dumps({"output": f"The files and folders in {path}, two levels deep (hidden ones left out):\n"
                                        + "\n".join(sorted(found))}))
            return
        lines = read_text(path).split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        first, last = 1, len(lines)
        if request.get("view_range") is not None:
            bounds = request["view_range"]
            if len(bounds) != 2:
                fail("view_range must be two numbers: [first line, last line] (-1 for the end of the file).")
            first, last = bounds[0], (len(lines) if bounds[1] == -1 else bounds[1])
            if not 1 <= first <= max(1, len(lines)) or not first <= last <= len(lines):
                fail(f"view_range {bounds} is outside the file's lines 1 to {len(lines)} (or its end comes first).")
        print(json.dumps({"output": f"Here is the result of running cat -n on {path}:\n"
                                    + numbered(lines[first - 1:last], first)}))
    elif command == "create":
        if os.path.exists(path):
            fail(f"A file already exists at {path}; create does not overwrite files: use str_replace to change it.")
        folder = os.path.dirname(path)
        if folder:
            os.makedirs(folder, exist_ok=True)
        write_text(path, request["text"])
        print(json.dumps({"output": f"File created at {path}."}))
    elif command == "str_replace":
        text, old, new = read_text(path), request["old"], request["new"]
        if not old:
            fail("old_str is empty; give the exact text to replace (with enough lines around it to be unique).")
        count = text.count(old)
        if count == 0:
            fail(f"No replacement was made: old_str does not appear verbatim in {path} (check spaces and indents).")
        if count > 1:
            starts, at = [], text.find(old)
            while at != -1:
                starts.append(text.count("\n", 0, at) + 1)
                at = text.find(old, at + 1)
            fail(f"No replacement was made: old_str occurs {count} times in {path}, at lines {starts}; include "
                 "more lines around it so that it is unique.")
        at = text.index(old)
        write_text(path, text.replace(old, new, 1))
        print(json.dumps({"output": snippet(text.replace(old, new, 1), text.count("\n", 0, at) + 1,
                                            new.count("\n") + 1, path)}))
    elif command == "insert":
        text, line = read_text(path), request["line"]
        lines = text.split("\n")
        count = len(lines) - (1 if lines and lines[-1] == "" else 0)
        if not 0 <= line <= count:
            fail(f"insert_line {line} is outside the file's lines: it must be from 0 (the top) to {count}.")
        new = request["new"].rstrip("\n").split("\n")
        lines[line:line] = new
        write_text(path, "\n".join(lines))
        print(json.dumps({"output": snippet("\n".join(lines), line + 1, len(new), path)}))

request = json.load(sys.stdin)
command, CONTEXT = request["command"], request["context"]
path = os.path.normpath(os.path.join(os.getcwd(), request["path"]))
try:
    run()
except OSError as error:
    fail(f"{command} failed on {path}: {error.strerror or error}")
'''


async def edit(sandbox: Sandbox, command: str, path: str, **fields: Any) -> str:
    """Run the editor's ``command`` on ``path`` in ``sandbox``; its answer, cut to :data:`VIEW_CHARS` with a note.
    Raises :class:`ToolError` with what went wrong, for the agent to read."""
    if not path.strip():
        raise ToolError("path is empty; give a file's path, absolute or relative to the repository")
    request = {"command": command, "path": encode(path), "context": SNIPPET_LINES,
               **{key: encode(value) if isinstance(value, str) else value for key, value in fields.items()}}
    try:
        answer = await read_back(sandbox, _PROGRAM, request)
    except ReadBackError as exc:
        last = exc.stderr.strip().splitlines()[-1:] or ["no output"]
        raise ToolError(f"{command} failed on {path}: {last[0]}") from None
    if "error" in answer:
        raise ToolError(answer["error"])
    output: str = answer["output"]
    if len(output) > VIEW_CHARS:
        output = (output[:VIEW_CHARS] + "\n<response clipped: only the first part is shown. Search the file with "
                  "`grep -n` and view the lines you need with view_range.>")
    return output

"""What the sandboxed environments share: task files written in one command, files read back through a probe
run in the sandbox, checked text, and a command's result as the agent reads it."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import PurePosixPath
from typing import Any

from agentgym.errors import ToolError
from agentgym.sandboxes.base import ExecResult, Sandbox
from agentgym.sandboxes.errors import SandboxError

OUTPUT_CHARS = 4000
"""Characters of each output stream an agent is shown."""
FILE_TIME = 1_714_521_600
"""The modification time of the task's files (2024-05-01 UTC), so that listings are the same every episode."""


async def write_tree(sandbox: Sandbox, files: dict[str, str]) -> None:
    """Write ``files`` (path relative to the work dir -> text) into the sandbox in one command."""
    result = await sandbox.exec(["tar", "-x", "--no-same-owner", "-f", "-"], timeout=60, stdin=_tar(files))
    if not result.ok:
        raise SandboxError(f"could not write the task's files in sandbox {sandbox.id}: "
                           f"{result.stderr[-300:]}")


class ReadBackError(SandboxError):
    """A probe ran in a working sandbox but failed or printed no JSON: what is inside could not be read."""

    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message, stderr)  # both in args, so that it pickles
        self.stderr = stderr
        """The tail of what the probe wrote to stderr."""

    def __str__(self) -> str:
        return str(self.args[0])


async def read_back(sandbox: Sandbox, probe: str, request: Any) -> Any:
    """Run the Python program ``probe`` in the sandbox's work dir with ``request`` as JSON on its stdin, and
    return the JSON it prints; a :class:`ReadBackError` when it fails or prints none. Python runs isolated
    (``-I``): a ``json.py`` the agent left in the work dir is not imported in place of the standard module."""
    result = await sandbox.exec(["python3", "-I", "-c", probe], timeout=60, stdin=json.dumps(request))
    try:
        found = json.loads(result.stdout) if result.ok else None
    except ValueError:
        found = None
    if found is None:
        stderr = result.stderr[-300:]
        raise ReadBackError(f"could not read the files back from sandbox {sandbox.id}: {stderr}", stderr)
    return found


def _tar(files: dict[str, str]) -> bytes:
    """``files`` as a tar archive, each folder just before its contents (so that tar keeps its time)."""
    buffer, made = io.BytesIO(), set()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        for path in sorted(files, key=lambda name: PurePosixPath(name).parts):
            for folder in reversed(PurePosixPath(path).parents[:-1]):
                if folder not in made:
                    made.add(folder)
                    entry = tarfile.TarInfo(str(folder))
                    entry.type, entry.mode, entry.mtime = tarfile.DIRTYPE, 0o755, FILE_TIME
                    archive.addfile(entry)
            data = files[path].encode()
            entry = tarfile.TarInfo(path)
            entry.size, entry.mode, entry.mtime = len(data), 0o644, FILE_TIME
            archive.addfile(entry, io.BytesIO(data))
    return buffer.getvalue()


def encode(text: str) -> str:
    """``text`` checked to be sendable to a sandbox (UTF-8, as an argument or a file); a :class:`ToolError`
    tells the agent what is wrong otherwise."""
    try:
        text.encode()
    except UnicodeEncodeError:
        raise ToolError("the text holds characters that are not valid Unicode (lone surrogates)") from None
    return text


async def run_bash(sandbox: Sandbox, command: str, time_limit: float) -> str:
    """Run an agent's ``command`` with ``bash -c`` in the sandbox's work dir; what it did, as :func:`describe` says.
    A command bash cannot take is a :class:`ToolError`."""
    if "\x00" in command:
        raise ToolError("the command holds a NUL character, which bash cannot take")
    return describe(await sandbox.exec(["bash", "-c", encode(command)], timeout=time_limit), time_limit)


def describe(result: ExecResult, time_limit: float) -> str:
    """What a command did, for the agent: exit status or timeout, then stdout (its head) and stderr (its
    tail), each cut to :data:`OUTPUT_CHARS` with a note."""
    if result.timed_out:
        status = f"Timed out: stopped after {time_limit:g} s."
    else:
        status = f"Exit status: {result.exit_code}"
    stdout, stderr = _stream("stdout", result.stdout, head=True), _stream("stderr", result.stderr, head=False)
    return f"{status}\n{stdout}\n{stderr}"


def _stream(name: str, text: str, *, head: bool) -> str:
    if not text:
        return f"{name}: (empty)"
    if len(text) <= OUTPUT_CHARS:
        return f"{name}:\n{text}"
    if head:
        return f"{name}:\n{text[:OUTPUT_CHARS]}\n[output cut: only the first {OUTPUT_CHARS} characters shown]"
    return f"{name}:\n[output cut: only the last {OUTPUT_CHARS} characters shown]\n{text[-OUTPUT_CHARS:]}"


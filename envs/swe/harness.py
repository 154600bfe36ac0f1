"""Running a repository's tests in a sandbox and reading each test's outcome, in a way the code under test cannot
forge: a runner program loads pytest with a recording plugin, and its report is signed with a key that reaches
the runner on its stdin, never in an environment, argument or file that the code under test could read.

Tests run with a fixed hash seed, so that parameters drawn from sets keep their order and pytest's ids for them
stay the same from run to run. The runner imports what it needs (and all of pytest) before the repository is on its path, so that no module there
named like one of Python's (a ``json.py`` that forges the report) stands in for it, and before any of the project's
code runs and notes every function and class of
pytest and pluggy; a run after which one of them was replaced (the code under test patched pytest) reports
``tampered``, and nothing in it counts. A run that ends without a signed report (``sys.exit`` or ``os._exit`` in
the code, a killed interpreter, the time limit) counts no test as passed.

This is a defence against the shortcuts a policy finds, not a proof: the code under test runs in the runner's
process, and code that reads the key out of the interpreter's memory could still sign a report.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from agentgym.sandboxes.base import Sandbox

RUNNER = r'''
import sys
sys.path[:] = [path for path in sys.path if path not in ("", ".")]  # no module of the repository stands in for these
import hashlib, hmac, importlib, json, os, pkgutil, threading


def main():
    request = json.loads(sys.stdin.readline())
    key = bytes.fromhex(request.pop("key"))
    channel = os.fdopen(os.dup(1), "w")
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)
    os.dup2(quiet, 2)
    import pytest, _pytest, pluggy
    for module in pkgutil.walk_packages(_pytest.__path__, "_pytest."):
        try:
            importlib.import_module(module.name)
        except Exception:
            pass
    before = _callables()
    sys.path.insert(0, request["repo"])
    os.chdir(request["repo"])
    outcomes, details = {}, {}

    class Recorder:
        def pytest_runtest_logreport(self, report):
            seen = outcomes.get(report.nodeid)
            if report.failed:
                outcomes[report.nodeid] = "failed"
                if request["details"]:
                    details[report.nodeid] = report.longreprtext[-request["details"]:]
            elif report.skipped and seen != "failed":
                outcomes[report.nodeid] = "xfailed" if hasattr(report, "wasxfail") else "skipped"
            elif report.when == "call" and seen is None:
                outcomes[report.nodeid] = "passed"

        def pytest_collectreport(self, report):
            if report.failed:
                outcomes[report.nodeid] = "error"
                if request["details"]:
                    details[report.nodeid] = report.longreprtext[-request["details"]:]

    covered = set()
    if request["coverage"]:
        root = request["repo"].rstrip("/") + "/"

        def profile(frame, event, arg):
            if event == "call" and frame.f_code.co_filename.startswith(root):
                covered.add(f"{frame.f_code.co_filename[len(root):]}:{frame.f_code.co_firstlineno}")

        threading.setprofile(profile)
        sys.setprofile(profile)
    code = pytest.main(request["args"], plugins=[Recorder()])
    sys.setprofile(None)
    after = _callables()
    changed = sorted(name for name, ident in before.items() if after.get(name) != ident)
    body = json.dumps({"outcomes": outcomes, "details": details, "covered": sorted(covered), "exit": int(code),
                       "tampered": changed[:20]})
    signature = hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
    channel.write(signature + "\n" + body)
    channel.flush()


def _callables():
    """The identity of every function and class of pytest and pluggy, and of each one's methods."""
    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("_pytest", "pytest", "pluggy"):
            continue
        for attr, value in list(vars(module).items()):
            if callable(value):
                found[f"{name}.{attr}"] = id(value)
            if isinstance(value, type) and value.__module__ == name:
                for method, inner in list(vars(value).items()):
                    if callable(inner):
                        found[f"{name}.{attr}.{method}"] = id(inner)
    return found


main()
'''


@dataclass(frozen=True)
class TestRun:
    """What one run of the tests showed: each test's outcome (``passed``, ``failed``, ``skipped``, ``xfailed``,
    ``error`` for a file that did not collect; a test not run is absent), the failures' output when asked, and
    why the run as a whole does not count, if it does not."""

    __test__ = False
    outcomes: dict[str, str] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)
    covered: frozenset[str] = frozenset()
    """``path:line`` of each function of the repository that ran (its first line), where asked."""
    problem: str | None = None
    """Why no test of this run counts (timed out, no report, pytest patched); ``None`` for a valid run."""
    seconds: float = 0.0

    def passed(self, test: str) -> bool:
        """Whether ``test`` ran and passed in a run that counts."""
        return self.problem is None and self.outcomes.get(test) == "passed"


async def run_tests(sandbox: Sandbox, paths: list[str], *, repo: str, python: str = "python3",
                    pytest_args: tuple[str, ...] = (), time_limit: float = 120.0, details: int = 0,
                    coverage: bool = False) -> TestRun:
    """Run the tests in ``paths`` (files or folders of ``repo``) with ``python``; ``details`` characters of each
    failure's output are kept (0: none); ``coverage`` notes which functions ran."""
    key = secrets.token_hex(32)
    request = {"key": key, "repo": repo, "details": details, "coverage": coverage,
               "args": ["-p", "no:cacheprovider", "-q", "--tb=short", *pytest_args, *paths]}
    result = await sandbox.exec([python, "-s", "-c", RUNNER], timeout=time_limit, cwd=repo,
                                stdin=json.dumps(request) + "\n", env={"PYTHONHASHSEED": "0"})
    if result.timed_out:
        return TestRun(problem=f"the tests ran past the time limit of {time_limit:g} s", seconds=result.duration)
    signature, _, body = result.stdout.partition("\n")
    expected = hmac.new(bytes.fromhex(key), body.encode(), hashlib.sha256).hexdigest()
    if not body or not hmac.compare_digest(signature, expected):
        return TestRun(problem="the test run ended without its report (the code under test exited or crashed "
                               "the interpreter)", seconds=result.duration)
    try:
        report = json.loads(body)
    except ValueError:
        return TestRun(problem="the test run's report is not readable", seconds=result.duration)
    problem = None
    if report["tampered"]:
        problem = f"the code under test replaced parts of pytest: {', '.join(report['tampered'])}"
    return TestRun(report["outcomes"], report["details"], frozenset(report["covered"]), problem, result.duration)


def files_of(tests: list[str]) -> list[str]:
    """The test files that pytest node ids are in."""
    return sorted({str(PurePosixPath(test.split("::")[0])) for test in tests})

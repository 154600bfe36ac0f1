"""A Chromium left behind (hung while its launcher and Playwright driver were killed) is found by its label
and killed, while the browsers of live processes are left alone."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import psutil
import pytest

from agentgym.envs.web.browser import Browser, release_browser, retain_browser
from agentgym.envs.web.orphans import BROWSER_SWITCH, OWNER_SWITCH, kill_browser, reap_browsers
from tests.waiting import until

pytestmark = pytest.mark.browser

LAUNCHER = """
import asyncio
from agentgym.envs.web.browser import retain_browser

async def main():
    browser = retain_browser()
    await browser.open_page()
    print(browser.id, flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


def _running(browser_id: str) -> list[psutil.Process]:
    """The labelled Chromium main processes of ``browser_id`` that are still running (not zombies)."""
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if f"{BROWSER_SWITCH}{browser_id}" in (process.info["cmdline"] or []) and \
                process.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(process)
    return found


def _wait_gone(browser_id: str) -> None:
    """Wait until the Chromium of ``browser_id`` is gone (up to 60 s: a kill lands at once, the process's end may
    not on a busy machine)."""
    until(lambda: not _running(browser_id), f"the Chromium of {browser_id} gone")


def _orphan() -> str:
    """Launch a browser in another process, hang its Chromium, kill that process and its driver; the hung
    Chromium's id."""
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
    try:
        orphan = launcher.stdout.readline().strip()
        assert orphan, "the launcher did not start its browser"
        (main,) = _running(orphan)
        assert any(arg.startswith(OWNER_SWITCH) for arg in main.cmdline())
        os.killpg(main.pid, signal.SIGSTOP)  # hung: it cannot notice that its driver is gone
    finally:
        os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and its driver; Chromium has a group of its own
        launcher.wait()
    assert _running(orphan), "the hung Chromium did not outlive its launcher"
    return orphan


def test_reaping_kills_a_chromium_whose_launcher_died_and_leaves_a_live_ones_browser():
    async def scenario() -> None:
        browser = retain_browser()
        try:
            await browser.open_page()
            orphan = _orphan()
            try:
                assert reap_browsers() >= 1
                _wait_gone(orphan)
                assert _running(browser.id), "the browser of a live process was reaped"
            finally:
                kill_browser(orphan)
        finally:
            await release_browser(browser)

    asyncio.run(scenario())


def test_the_first_launch_in_a_process_reaps_what_a_dead_one_left():
    orphan = _orphan()
    try:
        launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdout=subprocess.PIPE, text=True,
                                    start_new_session=True)
        try:
            assert launcher.stdout.readline().strip()
            _wait_gone(orphan)
        finally:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    finally:
        kill_browser(orphan)


def test_kill_browser_takes_only_the_browser_it_names():
    async def scenario() -> None:
        first, second = Browser(warm=0), Browser(warm=0)
        try:
            await first.open_page()
            await second.open_page()
            assert kill_browser(second.id) == 1
            _wait_gone(second.id)
            assert _running(first.id)
        finally:
            await first.close()
            await second.close()

    asyncio.run(scenario())

"""The viewer in a real browser (Playwright driving Debian's Chromium): pages open, screens load, the list's
drop-downs filter it, the token colouring switches, two runs' episodes are reached from the comparison, a run being
written says so, and an episode's script never runs. ``AGENTGYM_VIEW_SCREENSHOTS=docs/screenshots pytest tests/view
-k browser`` also writes the docs' screenshots (see :mod:`tests.view.serving`)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.view.records import HOSTILE, append, copy_run, hostile_copy
from tests.view.serving import screenshot, serving

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    from agentgym.envs.web.browser import LAUNCH_ARGS, chromium_path

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=list(LAUNCH_ARGS), headless=True)
        try:
            yield launched
        finally:
            launched.close()


def expect(target: Any) -> Any:
    """Playwright's ``expect``: assertions that retry until they hold (5 s), for what a script changes after a click."""
    from playwright.sync_api import expect as retrying

    return retrying(target)


def follow(page: Any, link: Any) -> None:
    """Click ``link`` (a locator) and wait until the page it leads to has loaded: a read right after a click may
    still see the page being left, and a wait for "load" then returns at once, since that page had loaded."""
    with page.expect_navigation():
        link.click()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield opened
    finally:
        context.close()
    assert not errors, errors


def test_a_web_run_its_episode_and_its_screens(page, web_run):
    with serving([web_run]) as url:
        page.goto(url)
        assert page.locator("h1").inner_text().startswith("web")
        assert page.locator("svg.chart").count() == 2
        follow(page, page.locator("text=episodes >> nth=0"))
        keys = page.locator("table.episodes tbody td:nth-child(2) a").all_inner_texts()  # in the order written
        assert len(set(keys)) == 3
        follow(page, page.locator("table.episodes a").first)
        assert keys[0] in page.locator("h1").inner_text()
        shot = page.locator("a.shot img").first
        shot.scroll_into_view_if_needed()
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=shot.element_handle())
        assert shot.evaluate("img => img.naturalWidth") > 0
        assert "<tool_call>" in page.locator("pre.action").first.inner_text()
        page.evaluate("document.getElementById('turn-2').scrollIntoView()")
        screenshot(page, "view-episode")
        follow(page, page.locator("text=next ›"))
        expect(page.locator("h1")).to_contain_text(keys[1])


def test_the_lists_drop_downs_filter_it_and_compare_leads_to_both_runs(page, gui_run, gui_random_run):
    with serving([gui_run, gui_random_run]) as url:
        page.goto(url)  # two runs open on their comparison
        assert "Solved by A, not by B (4)" in page.content()
        screenshot(page, "view-compare")
        follow(page, page.locator("a.ep[href^='/run/a/']").first)
        assert "success" in page.locator("h1 .badge").first.inner_text()
        shot = page.locator("a.shot img").first  # a GUI task's screen
        page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=shot.element_handle())
        page.go_back()
        follow(page, page.locator("a.ep[href^='/run/b/']").first)
        assert page.locator("h1 .badge").first.inner_text() in ("failure", "truncated")
        page.goto(f"{url}/run/b/episodes")
        assert page.locator("table.episodes tbody tr").count() == 4
        page.select_option("select[name=outcome] >> nth=0", "success")  # the drop-down applies itself
        page.wait_for_url(re.compile(r"outcome=success"))
        assert page.locator("table.episodes tbody tr").count() == 0 and "0 episodes" in page.content()
        page.select_option("select[name=outcome] >> nth=0", "truncated")
        page.wait_for_url(re.compile(r"outcome=truncated"))
        rows = page.locator("table.episodes tbody tr").count()
        page.select_option("select[name=outcome] >> nth=0", "failure")
        page.wait_for_url(re.compile(r"outcome=failure"))
        assert rows + page.locator("table.episodes tbody tr").count() == 4


def test_a_training_runs_group_and_tokens_coloured_by_the_ratio(page, train_run):
    with serving([train_run]) as url:
        page.goto(f"{url}/run/a")
        assert page.locator("svg.chart").count() >= 2 and "Rollouts by step" in page.content()
        screenshot(page, "view-run")
        page.goto(f"{url}/run/a/episodes?source=rollouts&step=4")
        follow(page, page.locator("table.episodes td a[href*='/group/']").first)
        assert page.locator("div.member").count() == 4
        follow(page, page.locator("div.member h3 a").nth(1))
        page.click("#tokens-tab")
        view = page.locator("section.token-view")
        token = page.locator("#tokens span.tok").first
        behaviour = token.evaluate("t => getComputedStyle(t).backgroundColor")
        page.click("a.mode[data-colour=ratio]")  # switched by the script, without a reload
        expect(view).to_have_class(re.compile(r"\bmode-ratio\b"))
        expect(page).to_have_url(re.compile(r"colour=ratio"))
        expect(token).not_to_have_css("background-color", behaviour)
        assert page.locator("#tokens .ver .vl").first.inner_text().startswith("v")
        screenshot(page, "view-tokens")


def test_a_run_being_written_offers_its_new_episodes(page, gui_run, tmp_path):
    folder = copy_run(gui_run, tmp_path / "live")
    with serving([folder], refresh_seconds=0) as url:
        page.goto(f"{url}/run/a/episodes")
        notice = page.locator("#notice")
        assert notice.is_hidden()
        first = (folder / "episodes.jsonl").read_bytes().split(b"\n")[0]
        append(folder, first.replace(b'#0"', b'#5"', 1) + b"\n")
        notice.wait_for(state="visible", timeout=15_000)
        assert "1 new episode" in notice.inner_text()
        follow(page, notice.locator("a"))  # the same address, loaded again
        assert page.locator("table.episodes tbody tr").count() == 5


def test_an_episodes_script_never_runs(page, gui_run, tmp_path):
    with serving([hostile_copy(gui_run, tmp_path / "hostile")]) as url:
        page.goto(f"{url}/run/a/episodes")
        assert page.evaluate("window.pwned") is None
        follow(page, page.locator("table.episodes a", has_text="<script>"))
        assert page.evaluate("window.pwned") is None
        assert page.locator("pre.action").first.inner_text() == HOSTILE
        assert HOSTILE in page.locator(".parse-error pre").inner_text()
        assert page.locator("img[src=x]").count() == 0
        page.goto(f"{url}/run/a/episodes?q={HOSTILE}")
        assert page.evaluate("window.pwned") is None


"""The GUI base on a BrowserScreen in real Chromium: what the element list shows, mistakes as error
observations, real screenshots, observations without the list, and a dead browser as an infrastructure error.
"""

from __future__ import annotations

import base64
import io

import psutil
import pytest

import agentgym
from agentgym.envs.gui.browser_screen import BrowserScreen
from agentgym.envs.gui.widgets.env import WidgetEnv
from agentgym.envs.gui.widgets.oracle import Elements
from agentgym.envs.web.browser import BrowserCrashed, release_browser, retain_browser
from agentgym.errors import ToolError
from agentgym.policies import OraclePolicy
from agentgym.tasks import Task
from tests.processes import children_named, kill_chromium
from tests.waiting import until_async

pytestmark = pytest.mark.browser

PAGE = """<!doctype html><html><body style="margin:0;font:14px sans-serif">
<h1 style="margin:0;font-size:18px">Settings</h1>
<label><input type="checkbox" checked> Alerts</label>
<label>Secret <input type="password" value="abc"></label>
<input type="text" aria-label="Name" value='say "hi"' id="name">
<button aria-expanded="false">More</button>
<div role="listbox" aria-label="Items" style="height:48px;width:120px;overflow:auto">
  <div role="option" aria-selected="true" style="height:24px">One</div>
  <div role="option" style="height:24px">Two</div>
  <div role="option" style="height:24px">Three</div>
  <div role="option" style="height:24px">Four</div>
</div>
<p>Some text <b>in bold</b></p>
<span aria-hidden="true">Invisible</span><button style="visibility:hidden">Ghost</button>
<button style="position:absolute;left:10px;top:250px">Covered</button>
<div style="position:absolute;left:0;top:240px;width:400px;height:60px;background:#eee"></div>
<script>document.getElementById("name").focus();</script>
</body></html>"""


def _running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_element_list_shows_roles_names_states_and_centres_of_what_is_visible(loop):
    async def scenario() -> tuple[str, tuple[int, int], bytes]:
        browser = retain_browser()
        screen = await BrowserScreen.open(browser, 400, 300)
        try:
            await screen.show(PAGE)
            return await screen.elements(), (screen.width, screen.height), await screen.screenshot()
        finally:
            await screen.close()
            await release_browser(browser)

    from PIL import Image

    listed, size, png = loop.run(scenario())
    lines = listed.splitlines()
    assert size == (400, 300) and Image.open(io.BytesIO(png)).size == (400, 300)
    assert any(line.startswith('- heading "Settings" (') for line in lines)
    assert any(line.startswith('- checkbox "Alerts" [checked] (') for line in lines)
    assert any(line.startswith('- textbox "Secret" [value="•••"] (') for line in lines)
    assert any(line.startswith('- textbox "Name" [focused, value="say \\"hi\\""] (') for line in lines)
    assert any(line.startswith('- button "More" [collapsed] (') for line in lines)
    assert any(line.startswith('- listbox "Items" [scrollable] (') for line in lines)
    assert any(line.startswith('- option "One" [selected] (') for line in lines)
    assert any(line.startswith('- text "Some text in bold" (') for line in lines)
    names = [line.split('"')[1] for line in lines]
    for hidden in ("Three", "Four", "Invisible", "Ghost", "Covered", "in bold"):
        assert hidden not in names
    view = Elements(listed)
    assert len(view.items) == len(lines)
    assert view.get("textbox", "Name").value == 'say "hi"' and "focused" in view.get("textbox", "Name").states
    assert all(0 <= e.x < 400 and 0 <= e.y < 300 for e in view.items)


async def _started(env: WidgetEnv, seed: int = 0, difficulty: str = "easy") -> list:
    messages, _ = await env.areset(seed=seed, options={"difficulty": difficulty})
    return messages


def test_off_screen_coordinates_are_error_observations_and_the_episode_goes_on(loop):
    async def scenario() -> None:
        env = WidgetEnv(task="ClickButton")
        try:
            await _started(env)
            for call in (
                env.format_call("click", x=480, y=10),
                env.format_call("double_click", x=-1, y=5),
                env.format_call("right_click", x=5, y=360),
                env.format_call("drag", x1=10, y1=10, x2=10, y2=400),
                env.format_call("scroll", x=600, y=100, dx=0, dy=100),
            ):
                messages, reward, terminated, _, info = await env.astep(call)
                assert "off the screen" in messages[-1].text and "480x360" in messages[-1].text
                assert info["action_error"] and not terminated and reward == 0.0
            messages, _, terminated, _, info = await env.astep(env.oracle_action())
            assert info["action_error"] is None and messages[-1].images and not terminated
        finally:
            await env.aclose()

    loop.run(scenario())


def test_bad_key_combinations_are_error_observations(loop):
    async def scenario() -> None:
        env = WidgetEnv(task="EnterText")
        try:
            await _started(env)
            for combo in ("ctrl+ctrl+a", "hyper+x", "", "a+ctrl"):
                messages, _, terminated, _, info = await env.astep(env.format_call("key", combo=combo))
                assert messages[-1].text.startswith("Error:") and info["action_error"] and not terminated
            # parse_combo takes any printable character; Chromium does not know this one: the agent's mistake
            messages, _, terminated, _, info = await env.astep(env.format_call("key", combo="é"))
            assert "could not press" in messages[-1].text and info["action_error"] and not terminated
            messages, _, _, _, info = await env.astep(env.format_call("key", combo="Tab"))
            assert info["action_error"] is None and "focused" in env.elements
        finally:
            await env.aclose()

    loop.run(scenario())


UNTYPABLE_TEXTS = ("a\x00b", "\x1b[2J", "bell\x07")
"""Text with control characters that no key types: ``type`` refuses it with an error the agent reads."""


def test_text_no_key_can_type_is_an_error_observation(loop):
    async def scenario() -> None:
        env = WidgetEnv(task="EnterText")
        try:
            await _started(env)
            for text in UNTYPABLE_TEXTS:
                messages, _, terminated, _, info = await env.astep(env.format_call("type", text=text))
                assert "cannot type the control character" in messages[-1].text and info["action_error"]
                assert not terminated
            surrogate = '<tool_call>{"name": "type", "arguments": {"text": "a\\ud800"}}</tool_call>'
            messages, _, terminated, _, info = await env.astep(surrogate)
            assert "lone surrogate" in messages[-1].text and not terminated
            messages, _, _, _, info = await env.astep(env.format_call("type", text="line\tone\nline two"))
            assert info["action_error"] is None
        finally:
            await env.aclose()

    loop.run(scenario())


def test_the_screenshot_is_a_real_png_of_the_screen_size(loop):
    from PIL import Image

    async def scenario() -> tuple[bytes, list]:
        env = WidgetEnv(task="ClickCheckboxes")
        try:
            messages = await _started(env, difficulty="hard")
            return env.image, messages[-1].images
        finally:
            await env.aclose()

    image, parts = loop.run(scenario())
    assert len(parts) == 1 and base64.b64decode(parts[0].data) == image
    picture = Image.open(io.BytesIO(image))
    assert picture.format == "PNG" and picture.size == (480, 360)
    darkest, brightest = picture.convert("L").getextrema()
    assert brightest - darkest > 100
    assert len(picture.convert("RGB").getcolors(maxcolors=1 << 20) or []) > 20


def test_without_accessibility_the_list_is_hidden_but_the_image_stays_and_the_oracle_still_plays(loop):
    async def scenario() -> None:
        seeing, blind = WidgetEnv(task="ClickButton"), WidgetEnv(task="ClickButton", accessibility=False)
        try:
            shown, _ = await seeing.areset(seed=4, options={"difficulty": "hard"})
            hidden, _ = await blind.areset(seed=4, options={"difficulty": "hard"})
            assert "- button" in shown[-1].text and "- button" not in hidden[-1].text
            assert "list of the elements" in shown[0].text and "list of the elements" not in hidden[0].text
            assert (
                hidden[-1].text.startswith(blind.episode.instruction) and "Screen: 480x360" in hidden[-1].text
            )
            assert len(hidden[-1].images) == 1 and hidden[-1].images == shown[-1].images
            assert blind.elements == seeing.elements
            done = False
            while not done:
                messages, reward, terminated, truncated, info = await blind.astep(blind.oracle_action())
                assert "- button" not in messages[-1].text
                done = terminated or truncated
            assert reward == 1.0 and info["success"]
        finally:
            await seeing.aclose()
            await blind.aclose()

    loop.run(scenario())


def test_the_same_seed_and_actions_give_the_same_observations_screenshots_included(loop):
    async def scenario() -> list[list]:
        env = WidgetEnv(task="CustomDropdown")
        runs = []
        try:
            for _ in range(2):
                record = [await _started(env, seed=7, difficulty="hard")]
                for _ in range(3):
                    record.append((await env.astep(env.oracle_action()))[0])
                runs.append(record)
        finally:
            await env.aclose()
        return runs

    first, second = loop.run(scenario())
    assert first == second


def test_a_killed_browser_is_an_infrastructure_error_and_the_next_episode_runs(loop):
    async def scenario() -> None:
        env = WidgetEnv(task="ClickCheckboxes")

        class KillingPolicy(OraclePolicy):
            async def act(self, env, messages, rng):
                kill_chromium()
                await until_async(lambda: not env._browser.connected, "the browser's end is seen")
                return await super().act(env, messages, rng)

        try:
            broken = await agentgym.run_episode(
                env, KillingPolicy(), Task(env_id="gui/ClickCheckboxes-v0", seed=1)
            )
            assert broken.status == "error" and "BrowserCrashed" in broken.error, broken.error
            after = await agentgym.run_episode(
                env, OraclePolicy(), Task(env_id="gui/ClickCheckboxes-v0", seed=2)
            )
            assert after.status == "ok" and after.reward == 1.0, after.error
            await env.areset(seed=3)
            kill_chromium()
            await until_async(lambda: not env._browser.connected, "the browser's end is seen")
            with pytest.raises(BrowserCrashed):
                await env.astep(env.format_call("click", x=100, y=100))
            with pytest.raises(BrowserCrashed):
                await env.screen.elements()
            assert env._browser.launches >= 2
        finally:
            await env.aclose()

    loop.run(scenario())


def test_a_screen_of_a_closed_page_raises_browser_crashed_not_a_tool_error(loop):
    async def scenario() -> None:
        browser = retain_browser()
        screen = await BrowserScreen.open(browser, 200, 100)
        await screen.close()
        try:
            with pytest.raises(BrowserCrashed):
                await screen.click(10, 10)
            with pytest.raises(BrowserCrashed):
                await screen.screenshot()
        finally:
            await release_browser(browser)

    loop.run(scenario())


def test_the_page_reaches_no_network(loop):
    async def scenario() -> str:
        browser = retain_browser()
        screen = await BrowserScreen.open(browser, 200, 100)
        try:
            await screen.show('<img id="i" src="http://127.0.0.1:9/x.png"><p>x</p>')
            return await screen.evaluate("""() => new Promise((resolve) => {
                const image = document.getElementById("i");
                if (image.complete) resolve(image.naturalWidth ? "loaded" : "failed");
                image.onload = () => resolve("loaded");
                image.onerror = () => resolve("failed");
            })""")
        finally:
            await screen.close()
            await release_browser(browser)

    assert loop.run(scenario()) == "failed"


def test_a_tool_error_from_the_screen_carries_the_reason(loop):
    async def scenario() -> None:
        browser = retain_browser()
        screen = await BrowserScreen.open(browser, 200, 100)
        try:
            with pytest.raises(ToolError, match="Unknown key"):
                await screen.key(("é",))
        finally:
            await screen.close()
            await release_browser(browser)

    loop.run(scenario())


def test_no_browser_is_left_running_after_the_environment_closes():
    running = {p.pid for p in children_named("chrom")}
    env = WidgetEnv(task="ClickButton")
    env.reset(seed=0)
    env.step(env.oracle_action())
    assert {
        p.pid for p in children_named("chrom")
    } - running  # the synchronous API runs its own loop and Chromium
    env.close()
    started = [p for p in children_named("chrom") if p.pid not in running]
    _, alive = psutil.wait_procs(started, timeout=15)  # helpers exit just after the browser, slower under load
    assert not [p for p in alive if _running(p)]

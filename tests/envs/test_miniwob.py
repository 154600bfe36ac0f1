"""MiniWoB++'s tasks from the ``miniwob`` package in agentgym's Chromium: both action spaces, MiniWoB's own
utterance, time limit, reward and done signals, and clear refusals."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from gymnasium.utils.env_checker import check_reset_seed_determinism

import agentgym
from agentgym.envs.miniwob.page import outcome, tasks

pytest.importorskip("miniwob")
pytestmark = pytest.mark.browser


def _button(env, name: str) -> str:
    """The element id of a button in the web tier's last observation."""
    return re.search(rf'button "{re.escape(name)}"[^\n]*\[ref=(e\d+)\]', env.snapshot).group(1)


def test_every_task_of_the_package_is_registered():
    ids = {spec.id for spec in agentgym.list_envs(family="miniwob")}
    assert len(ids) == len(tasks()) >= 120
    assert {"miniwob/click-test-v0", "miniwob/click-tab-2-v0", "miniwob/flight.Alaska-v0"} <= ids


def test_the_element_tier_solves_click_test_and_is_paid_what_the_page_computed():
    env = agentgym.make("miniwob/click-test-v0", parser="pythonic")
    try:
        messages, _ = env.reset(seed=0)
        opening = messages[1].text
        assert opening.startswith("Click the button.\n(MiniWoB's time limit: 10 seconds.)")
        assert 'button "Click Me!"' in opening
        _, reward, terminated, _, info = env.step(f"click(element='{_button(env, 'Click Me!')}')")
        assert terminated and info["success"] and env.outcome.raw_reward == 1.0
        assert 0.0 < reward == env.outcome.reward <= 1.0  # click-test pays less the longer it took
    finally:
        env.close()


def test_a_wrong_click_ends_the_episode_with_minwobs_penalty():
    env = agentgym.make("miniwob/click-button-v0", parser="pythonic")
    try:
        messages, _ = env.reset(seed=1)
        wanted = re.search(r'Click on the "([^"]+)" button', messages[1].text).group(1)
        other = next(name for name in re.findall(r'button "([^"]+)"', env.snapshot) if name != wanted)
        _, reward, terminated, _, info = env.step(f"click(element='{_button(env, other)}')")
        assert terminated and not info["success"] and reward == -1.0
    finally:
        env.close()


def test_navigating_off_the_task_page_fails_the_episode_instead_of_breaking_it():
    env = agentgym.make("miniwob/click-test-v0", parser="pythonic")
    try:
        env.reset(seed=0)
        _, reward, terminated, _, info = env.step("goto(url='/index.html')")
        assert terminated and not info["success"] and reward == 0.0
        assert env.outcome.reason == "left the task's page"
    finally:
        env.close()


def test_the_pixel_tier_clicks_by_coordinates_on_minwobs_task_area():
    env = agentgym.make("miniwob/click-test-v0", actions="pixels", parser="pythonic")
    try:
        messages, _ = env.reset(seed=0)
        assert "Screen: 160x210" in messages[1].text and messages[1].images
        x, y = env.center("button", "Click Me!")
        _, reward, terminated, _, info = env.step(f"click(x={x}, y={y})")
        assert terminated and info["success"] and reward > 0
    finally:
        env.close()


def test_minwobs_timer_ends_a_slow_episode_as_a_failure():
    async def scenario() -> None:
        env = agentgym.make("miniwob/click-test-v0", actions="pixels", parser="pythonic")
        try:
            started = time.monotonic()
            await env.areset(seed=0)
            async with asyncio.timeout(env.time_limit + 60):  # the page's own timer, however busy the machine
                while await outcome(env.screen.page) is None:
                    await asyncio.sleep(0.2)
            assert time.monotonic() - started >= env.time_limit  # not before its time
            _, reward, terminated, _, info = await env.astep("click(x=1, y=1)")
            assert terminated and not info["success"] and reward == -1.0 and env.outcome.reason == "timed out"
        finally:
            await env.aclose()

    asyncio.run(scenario())


def test_the_same_seed_draws_the_same_task():
    env = agentgym.make("miniwob/click-button-v0", parser="pythonic")
    try:
        first = env.reset(seed=5)[0][1].text
        assert env.reset(seed=5)[0][1].text == first
        assert any(env.reset(seed=seed)[0][1].text != first for seed in range(6, 9))
    finally:
        env.close()


@pytest.mark.parametrize("actions", ["elements", "pixels"])
def test_the_same_seed_shows_the_same_page_icons_included(actions):
    env = agentgym.make("miniwob/email-inbox-v0", actions=actions)
    try:
        check_reset_seed_determinism(env)  # before the page's images were waited for, its icons came by chance
    finally:
        env.close()


@pytest.mark.parametrize("actions", ["elements", "pixels"])
def test_the_agent_reads_the_task_not_minwobs_scoreboard(actions):
    env = agentgym.make("miniwob/email-inbox-v0", actions=actions)
    try:
        opening = env.reset(seed=2)[0][1].text
        assert "Primary" in opening  # the task area
        # the harness leaves its scoreboard out; its clock made one seed show two pages a second apart
        assert not re.search("Time left|Last reward|Episodes done", opening)
    finally:
        env.close()


def test_unknown_tasks_and_action_spaces_are_refused():
    with pytest.raises(ValueError, match="unknown MiniWoB task 'click-everything'"):
        agentgym.make("miniwob/click-test-v0", task="click-everything")
    with pytest.raises(ValueError, match="actions must be 'elements' or 'pixels'"):
        agentgym.make("miniwob/click-test-v0", actions="keyboard")


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(tasks()))
def test_every_task_starts_with_an_utterance(task):
    env = agentgym.make(f"miniwob/{task}-v0", parser="pythonic")
    try:
        env.reset(seed=0)
        assert env.utterance and env.time_limit > 0
    finally:
        env.close()

"""web/Booking-v0 in real Chromium: the oracle books (and cancels or changes) what each request asks, parallel
episodes keep their own bookings, a random policy scores far below the oracle, and mistakes are
observations."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

import agentgym
from agentgym.envs.web.booking import BookingEnv, booking_site
from agentgym.policies import RandomPolicy
from agentgym.tasks import Task
from tests.envs.web.test_booking_site import booked, done_first
from tests.processes import children_named

pytestmark = pytest.mark.browser


async def _oracle_episode(env: BookingEnv, seed: int, options: dict[str, object]) -> tuple[float, bool]:
    await env.areset(seed=seed, options=options)
    reward, done, info = 0.0, False, {}
    while not done:
        _, reward, terminated, truncated, info = await env.astep(env.oracle_action())
        assert info["action_error"] is None, info["action_error"]
        done = terminated or truncated
    return reward, info["success"]


def _ends_as_asked(env: BookingEnv) -> bool:
    """Whether the session holds exactly the task's existing bookings as it asked to leave them, and one new
    booking at the first hotel that fits, with every detail asked for."""
    task = env.task
    bookings = booking_site().store.bookings(env.session)
    return bookings == [*done_first(task), booked(task, f"BK{1001 + len(task.existing)}")]


def _first(kind: str) -> int:
    tasks = booking_site().tasks
    return next(t.id for t in tasks if (t.difficulty, bool(t.change), bool(t.stay.extras)) == {
        "easy": ("easy", False, False), "medium": ("medium", False, False), "change": ("hard", True, False),
        "extras": ("hard", False, True)}[kind])


def test_the_oracle_books_what_the_request_asks_at_every_difficulty():
    async def scenario() -> None:
        env = agentgym.make("web/Booking-v0")
        try:
            for seed, kind in enumerate(("easy", "medium", "change")):
                index = _first(kind)
                assert await _oracle_episode(env, seed, {"task": index}) == (1.0, True), kind
                assert env.task is booking_site().tasks[index] and _ends_as_asked(env)
                reference = f"BK{1001 + len(env.task.existing)}"
                assert env.path == f"/bookings/{reference}/confirmed"
                hotel = booking_site().hotels.hotel(min(env.task.stay.goals))
                assert env.render_text().startswith(f"Request: {env.task.text}\n")
                assert f"{reference} (confirmed): {hotel.name}, {env.task.stay.room}" in env.render_text()
        finally:
            await env.aclose()

    asyncio.run(scenario())


def test_eight_parallel_episodes_each_end_with_their_own_bookings_only():
    async def scenario() -> list[bool]:
        envs = [BookingEnv() for _ in range(8)]
        options = [{"difficulty": "easy"}] * 6 + [{"task": _first("change")}, {"task": _first("easy")}]
        episodes = (_oracle_episode(env, 500 + i, option)
                    for i, (env, option) in enumerate(zip(envs, options, strict=True)))
        try:
            results = await asyncio.gather(*episodes)
            assert results == [(1.0, True)] * 8
            assert len({env.session for env in envs}) == 8
            return [_ends_as_asked(env) for env in envs]
        finally:
            await asyncio.gather(*(env.aclose() for env in envs))

    assert asyncio.run(scenario()) == [True] * 8
    assert not children_named("chrom")


def test_a_random_policy_scores_far_below_the_oracle():
    async def scenario() -> list[float]:
        env = BookingEnv()
        try:
            tasks = [Task(env_id="web/Booking-v0", seed=i, difficulty=BookingEnv.difficulties[i % 3])
                     for i in range(10)]
            played = [await agentgym.run_episode(env, RandomPolicy(), task, seed=7) for task in tasks]
            assert all(t.status == "ok" for t in played), [t.error for t in played]
            assert sum(len(t.turns) for t in played) >= 30
            return [t.reward for t in played]
        finally:
            await env.aclose()

    rewards = asyncio.run(scenario())
    assert np.mean(rewards) <= 0.1 and max(rewards) < 1.0  # the oracle scores 1.0 on every task (tests above)


def test_a_bad_element_id_or_a_bad_date_is_an_error_observation_not_an_exception():
    async def scenario() -> None:
        env = BookingEnv()
        try:
            await env.areset(seed=0, options={"task": _first("easy")})
            check_in = env.find("textbox", "Check-in")
            for call in (env.format_call("click", element="e999"),
                         env.format_call("fill", element="zz", text="x"),
                         env.format_call("select_option", element=check_in, value="Paris"),
                         env.format_call("goto", url="https://example.com/")):
                messages, reward, terminated, _, info = await env.astep(call)
                assert messages[-1].text.startswith("Error") and info["action_error"] and not terminated
                assert reward == 0.0 and env.path == "/"
            for call in (("select_option", "combobox", "City", "Paris"),
                         ("fill", "textbox", "Check-in", "2026-02-30"),
                         ("fill", "textbox", "Check-out", "2026-03-02"), ("click", "button", "Search")):
                tool, role, name, *value = call
                arguments = {"element": env.find(role, name)} | (
                    {"text": value[0]} if tool == "fill" else {"value": value[0]} if value else {})
                messages, _, terminated, _, info = await env.astep(env.format_call(tool, **arguments))
                assert info["action_error"] is None and not terminated
            assert env.path.startswith("/search?city=Paris&check_in=2026-02-30")
            assert "Enter the check-in date as YYYY-MM-DD, such as 2026-05-03." in messages[-1].text
            messages, *_ = await env.astep(env.format_call("goto", url="/hotel/999"))
            assert "Title: Booking: Not found" in messages[-1].text
            done = env.format_call("send_msg_to_user", text="Done.")
            _, reward, terminated, _, info = await env.astep(done)
            assert (reward, terminated, info["success"]) == (0.0, True, False)
        finally:
            await env.aclose()

    asyncio.run(scenario())


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_oracle_solves_every_task_of_the_booking_site():
    async def scenario() -> list[tuple[int, float]]:
        env = BookingEnv()
        missed = []
        try:
            for index, task in enumerate(booking_site().tasks):
                reward, success = await _oracle_episode(env, index, {"task": index})
                assert env.task == task
                if not (success and _ends_as_asked(env)):
                    missed.append((task.id, reward))
        finally:
            await env.aclose()
        return missed

    assert asyncio.run(scenario()) == []

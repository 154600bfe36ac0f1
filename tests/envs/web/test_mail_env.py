"""web/Mail-v0 in real Chromium: the oracle does what each task asks, the reward reads the episode's mailbox,
parallel episodes keep to their own mail, a random policy scores far below the oracle, and a bad element id
is the agent's mistake, not an exception."""

from __future__ import annotations

import asyncio

import pytest

import agentgym
from agentgym.envs.web.mail import MailEnv, mail_site
from agentgym.envs.web.sites.mail import TRASH, Mailbox, MailTask, generate_mailbox
from agentgym.policies import RandomPolicy
from agentgym.tasks import Task
from tests.processes import children_named

pytestmark = pytest.mark.browser


async def _oracle_episode(env: MailEnv, options: dict) -> tuple[float, bool]:
    await env.areset(seed=0, options=options)
    reward, done, info = 0.0, False, {}
    while not done:
        _, reward, terminated, truncated, info = await env.astep(env.oracle_action())
        assert info["action_error"] is None, info["action_error"]
        done = terminated or truncated
    return reward, info["success"]


def _changes(task: MailTask, final: Mailbox) -> tuple[set[int], list[tuple[str, ...]]]:
    """The messages of the task's mailbox that were moved, deleted or (un)starred, and the To lists of the
    messages sent, read apart from the validator."""
    initial = generate_mailbox(task.seed)
    touched = {id for id, mail in initial.mails.items()
               if id not in final.mails or (final.mails[id].folder, final.mails[id].starred) != (
                   mail.folder, mail.starred)}
    sent = [m.to for id, m in final.mails.items() if id not in initial.mails and not m.draft]
    return touched, sent


def test_the_oracle_does_what_a_task_of_each_difficulty_asks():
    async def scenario() -> None:
        env = agentgym.make("web/Mail-v0")
        try:
            for seed, difficulty in enumerate(MailEnv.difficulties):
                reward, success = await _oracle_episode(env, {"difficulty": difficulty})
                task = env.task
                assert (reward, success) == (1.0, True) and task.difficulty == difficulty, task
                touched, sent = _changes(task, env.site.store.mailbox(env.session))
                goal = task.goal
                assert touched == goal.named - set(goal.unread)
                assert [set(to) for to in sent] == ([set(goal.outgoing.to)] if goal.outgoing else [])
                assert env.message == task.steps[-1][3] and env.render_text() == task.text
        finally:
            await env.aclose()

    asyncio.run(scenario())


def test_eight_parallel_episodes_each_change_only_their_own_mailbox():
    site = mail_site()
    chosen = [next(t for t in site.tasks if t.kind == kind)
              for kind in ("delete", "reply", "delete_sender", "forward_invoice")]

    async def scenario() -> list[tuple[MailTask, Mailbox]]:
        envs = [MailEnv() for _ in range(8)]
        try:
            results = await asyncio.gather(*(_oracle_episode(env, {"task": chosen[i % 4].id})
                                             for i, env in enumerate(envs)))
            assert results == [(1.0, True)] * 8
            assert len({env.session for env in envs}) == 8
            return [(env.task, site.store.mailbox(env.session)) for env in envs]
        finally:
            await asyncio.gather(*(env.aclose() for env in envs))

    for task, final in asyncio.run(scenario()):
        touched, sent = _changes(task, final)
        goal = task.goal
        assert touched == goal.named  # twins on the same mailbox did not double each other's changes
        assert len(sent) == (goal.outgoing is not None)
        assert all(final.mails.get(id) is None or final.mails[id].folder == folder
                   for id, folder in goal.placed if folder == TRASH)


def test_a_random_policy_scores_far_below_the_oracle():
    async def scenario() -> tuple[list[float], float]:
        env = MailEnv()
        try:
            randoms = [await agentgym.run_episode(env, RandomPolicy(), Task(env_id="web/Mail-v0", seed=seed,
                                                                             difficulty="easy"))
                       for seed in range(10)]
            assert all(t.status in ("ok", "truncated") for t in randoms), [t.error for t in randoms]
            oracle, _ = await _oracle_episode(env, {"difficulty": "easy"})
            return [t.reward for t in randoms], oracle
        finally:
            await env.aclose()

    rewards, oracle = asyncio.run(scenario())
    assert oracle == 1.0 and sum(rewards) / len(rewards) <= 0.1 and max(rewards) < 1.0


def test_a_bad_element_id_or_a_wrong_element_is_an_error_observation():
    async def scenario() -> None:
        env = MailEnv()
        try:
            await env.areset(seed=0, options={"task": 0})
            bad = [env.format_call("click", element="e99999"), env.format_call("click", element="Inbox"),
                   env.format_call("fill", element=env.find("link", "Compose"), text="x"),
                   env.format_call("select_option", element=env.find("button", "Search"), value="x"),
                   env.format_call("goto", url="https://example.com/")]
            for action in bad:
                messages, reward, terminated, _, info = await env.astep(action)
                assert info["action_error"] and messages[-1].text.startswith("Error") and not terminated
                assert reward == 0.0 and env.path == "/"
            messages, *_ = await env.astep(env.format_call("goto", url="/message/99999"))
            assert "Not found" in messages[-1].text
        finally:
            await env.aclose()

    asyncio.run(scenario())
    assert not children_named("chrom")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_the_oracle_solves_every_task_of_the_mail_site():
    async def scenario() -> list[tuple[int, float]]:
        env = MailEnv()
        missed = []
        try:
            for task in mail_site().tasks:
                reward, _ = await _oracle_episode(env, {"task": task.id})
                assert env.task == task
                if reward != 1.0:
                    missed.append((task.id, reward))
        finally:
            await env.aclose()
        return missed

    assert asyncio.run(scenario()) == []

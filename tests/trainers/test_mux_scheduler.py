"""The RollMux scheduler's logic on one event loop, without Ray: round-robin permits, admission's refusals with
their reasons, a crashed job's lease, and jobs re-registering with a restarted scheduler."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from agentgym.trainers.mux.scheduler import MuxScheduler
from agentgym.trainers.mux.turnstile import Turnstile

BALANCED = {"rollout": 1.0, "train": 1.0, "memory_gb": 1.0, "slo": 2.0}


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, timeout=20))


async def _register(scheduler: MuxScheduler, *names: str, profile=BALANCED) -> list[dict]:
    return [await scheduler.register(name, profile, steps=3, run_dir=f"/runs/{name}") for name in names]


def test_the_freed_permit_goes_round_robin_to_the_next_waiting_member():
    async def scenario() -> list[str]:
        turnstile, granted = Turnstile(), []
        for job in "abc":
            turnstile.join(job)

        async def take(job: str) -> None:
            await turnstile.acquire(job)
            granted.append(job)

        await take("a")
        waiters = [asyncio.create_task(take(job)) for job in "cb"]  # asked in the other order
        await asyncio.sleep(0)
        assert turnstile.holder == "a" and granted == ["a"]
        for _ in range(2):
            turnstile.release(turnstile.holder)
            await asyncio.sleep(0)
        await asyncio.gather(*waiters)
        again = asyncio.create_task(take("a"))
        await asyncio.sleep(0)
        turnstile.release("c")
        await again
        return granted

    assert run(scenario()) == ["a", "b", "c", "a"]


def test_a_job_that_leaves_hands_its_permit_on_and_its_wait_ends():
    async def scenario() -> None:
        turnstile = Turnstile()
        for job in "ab":
            turnstile.join(job)
        await turnstile.acquire("a")
        waiting = asyncio.create_task(turnstile.acquire("b"))
        await asyncio.sleep(0)
        turnstile.leave("a")
        await waiting
        assert turnstile.holder == "b" and turnstile.members == ["b"]
        late = asyncio.create_task(turnstile.acquire("b"))
        await late  # held already: at once
        with pytest.raises(KeyError):
            await turnstile.acquire("a")

    run(scenario())


def test_two_balanced_jobs_share_a_group_and_a_third_is_refused_with_the_reason():
    async def scenario() -> None:
        scheduler = MuxScheduler([{"memory_gb": 2.5}])
        first, second = await _register(scheduler, "a", "b")
        assert first["group"] == second["group"] == 0
        assert first["resources"] == {"rollout": "rollout_pool", "train": "train_pool"}
        (third,) = await _register(scheduler, "c")
        assert "host memory: group 0's training nodes hold 2.0 GB of 2.5, the job needs 1.0" in third["refused"]
        assert "no free nodes for a new group" in third["refused"]
        tight = {**BALANCED, "memory_gb": 0.1, "slo": 1.2}
        (fourth,) = await _register(scheduler, "d", profile=tight)
        assert "SLO" in fourth["refused"] and "(SLO 1.20x)" in fourth["refused"]
        status = await scheduler.status()
        assert [j["job"] for j in status["jobs"]] == ["a", "b"]
        assert status["left"]["c"].startswith("refused: host memory")
        assert status["groups"][0]["step_seconds"] == {"a": 2.0, "b": 2.0}  # they alternate: no slowdown
        assert [j["planned_slowdown"] for j in status["jobs"]] == [1.0, 1.0]
        same = await scheduler.register("a", BALANCED, steps=3, run_dir="/runs/elsewhere")
        assert "runs already" in same["refused"]

    run(scenario())


def test_a_group_scales_its_rollout_onto_a_second_pool_and_shares_its_training_pool():
    heavy = {"rollout": 3.0, "train": 1.0, "memory_gb": 1.0, "slo": 1.5}

    async def scenario() -> None:
        scheduler = MuxScheduler([{"rollout_resources": ["r0", "r1"], "train_resource": "t"}])
        a, b = await _register(scheduler, "a", "b", profile=heavy)
        # b on a rollout pool of its own (on a's, both would take 6 s a step: 1.5x); both train on t, 4 s a step
        assert a["resources"] == {"rollout": "r0", "train": "t"} and b["resources"] == {"rollout": "r1", "train": "t"}
        (c,) = await _register(scheduler, "c", profile=heavy)
        assert "SLO" in c["refused"] and "6.0 s a step, 1.50x" in c["refused"]  # no third rollout pool
        complement = {"rollout": 1.0, "train": 3.0, "memory_gb": 1.0, "slo": 1.5}
        (d,) = await _register(scheduler, "d", profile=complement)
        assert d["group"] == 0  # training 5 s a meta-iteration: 1.25x for each, within 1.5 and its margin
        status = await scheduler.status()
        assert status["groups"][0]["step_seconds"] == {"a": 5.0, "b": 5.0, "d": 5.0}
        assert set(status["groups"][0]["holders"]) == {"r0", "r1", "t"}
        await scheduler.acquire("a", "rollout")
        assert await asyncio.wait_for(scheduler.acquire("b", "rollout"), 1)  # another pool: no wait
        sharer = "a" if d["resources"]["rollout"] == "r0" else "b"
        waiting = asyncio.create_task(scheduler.acquire("d", "rollout"))
        await asyncio.sleep(0.05)
        assert not waiting.done()  # d shares its rollout pool with a or b, which holds it
        await scheduler.release(sharer, "rollout")
        assert await waiting
        after = MuxScheduler([{"rollout_resources": ["r0", "r1"], "train_resource": "t"}])  # restarted, empty
        again = {name: await after.register(name, profile, steps=3, run_dir=f"/runs/{name}", group=0,
                                            rollout=placed["resources"]["rollout"])
                 for name, profile, placed in (("b", heavy, b), ("d", complement, d), ("a", heavy, a))}
        assert {name: r["resources"]["rollout"] for name, r in again.items()} == {"a": "r0", "b": "r1",
                                                                                  "d": d["resources"]["rollout"]}

    run(scenario())


def test_a_silent_job_loses_its_permits_to_the_next_and_leaves_with_the_cause():
    async def scenario() -> None:
        scheduler = MuxScheduler(lease_seconds=0.6, start_grace=0.6)
        await _register(scheduler, "a", "b")
        assert await scheduler.acquire("a", "rollout")
        waiting = asyncio.create_task(scheduler.acquire("b", "rollout"))
        for _ in range(10):  # b keeps its lease while a falls silent
            await asyncio.sleep(0.15)
            await scheduler.heartbeat("b", 0)
        assert await waiting
        status = await scheduler.status()
        assert [j["job"] for j in status["jobs"]] == ["b"]
        assert status["left"]["a"].startswith("crashed: not heard from")
        assert status["groups"][0]["holders"]["rollout_pool"] == "b"
        assert not await scheduler.heartbeat("a", 1)  # told to register again

    run(scenario())


def test_a_restarted_scheduler_takes_jobs_back_with_their_groups_and_permits():
    async def scenario() -> None:
        before = MuxScheduler()
        placed = await _register(before, "a", "b")
        await before.acquire("a", "train")
        after = MuxScheduler()  # Ray restarts it empty
        assert not await after.acquire("b", "rollout")
        again = [await after.register(name, BALANCED, steps=3, run_dir=f"/runs/{name}", group=p["group"], held=held,
                                      rollout=p["resources"]["rollout"])
                 for name, p, held in (("a", placed[0], ["train"]), ("b", placed[1], []))]
        assert [r["group"] for r in again] == [p["group"] for p in placed]
        assert (await after.status())["groups"][0]["holders"] == {"rollout_pool": None, "train_pool": "a"}
        waiting = asyncio.create_task(after.acquire("b", "train"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        await after.release("a", "train")
        assert await waiting

    run(scenario())


def test_phases_are_logged_and_never_overlap_on_a_pool():
    async def scenario() -> list[dict]:
        scheduler = MuxScheduler()
        await _register(scheduler, "a", "b")

        async def job(name: str) -> None:
            for _ in range(3):
                for pool in ("rollout", "train"):
                    await scheduler.acquire(name, pool)
                    await asyncio.sleep(0.01)
                    await scheduler.release(name, pool)

        await asyncio.gather(job("a"), job("b"))
        return (await scheduler.status())["phases"]

    phases = run(scenario())
    for pool in ("rollout", "train"):
        mine = sorted((p for p in phases if p["pool"] == pool), key=lambda p: p["start"])
        assert len(mine) == 6 and all(p["end"] is not None for p in mine)
        assert all(a["end"] <= b["start"] for a, b in itertools.pairwise(mine))
        assert [p["job"] for p in mine] == ["a", "b"] * 3


@pytest.mark.parametrize(("overrides", "key"), [
    (["trainer.async_ratio=2"], "trainer.async_ratio: a multiplexed job"),
    (["trainer.colocate=true"], "trainer.colocate: a multiplexed job"),
    (["mux.rollout_seconds=null"], "mux.profile_from: admission needs the job's phase times"),
    (["mux.slo=0.5"], "mux.slo"),
])
def test_a_multiplexed_config_that_cannot_share_pools_is_refused_naming_the_key(overrides, key):
    from agentgym.config import load_config
    from agentgym.errors import ConfigError
    from agentgym.trainers.config import TrainConfig
    from tests.trainers.envs import VOWELS_ID

    base = ["output_dir=unused", "model.path=unused", f"env.id={VOWELS_ID}", "trainer.async_ratio=0",
            "mux.address=auto", "mux.rollout_seconds=10", "mux.train_seconds=5"]
    load_config(TrainConfig, None, base)  # fits
    with pytest.raises(ConfigError, match=key.replace(".", r"\.").replace("(", r"\(")):
        load_config(TrainConfig, None, [*base, *overrides])

"""A training run joining the RollMux scheduler: its profile, its admission, and its engine and env workers
moved onto the rollout pool of the group it joined."""

from __future__ import annotations

from agentgym.cluster.backend import connect
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.mux.client import MuxClient, Placement
from agentgym.trainers.mux.estimate import Profile
from agentgym.trainers.mux.profile import measured_profile, resident_gb

POOL_SHARE = 0.001
"""How much of its pool's Ray resource each job's actor asks for: the resource marks where the pool's machines
are; the scheduler's permits, not Ray's accounting, decide who uses them when."""


def job_name(config: TrainConfig) -> str:
    return config.mux.job or config.run_dir.resolve().name


def job_profile(config: TrainConfig) -> Profile:
    """The job's profile from ``mux.*``: measured (``profile_from``) or given phase times, and its host memory."""
    mux = config.mux
    memory = mux.memory_gb if mux.memory_gb is not None else resident_gb(config.model.path)
    if mux.profile_from is not None:
        return measured_profile(mux.profile_from, memory_gb=memory, slo=mux.slo)
    assert mux.rollout_seconds is not None and mux.train_seconds is not None  # the config's validator saw to it
    return Profile(mux.rollout_seconds, mux.train_seconds, memory, mux.slo)


def join(config: TrainConfig) -> tuple[TrainConfig, MuxClient, bool]:
    """Register the run with the scheduler on ``mux.address`` (connecting to that Ray cluster); returns the config
    with its rollout on the group's pool, the client, and whether this call connected to Ray."""
    connected = connect(config.mux.address)
    try:
        client = MuxClient(job_name(config), job_profile(config), steps=config.trainer.steps,
                           run_dir=str(config.run_dir.resolve()))
        return on_pools(config, client.register()), client, connected
    except BaseException:
        if connected:
            import ray

            ray.shutdown()
        raise


def on_pools(config: TrainConfig, placement: Placement) -> TrainConfig:
    """``config`` with its engine replicas and env workers on ``placement``'s rollout pool and its learner's ranks
    on its training pool, on the scheduler's cluster, reserving no CPUs of their own (each pool's permit is
    theirs in turn)."""
    ray = config.rollout.ray
    pool = {placement.rollout_resource: POOL_SHARE}
    ray = ray.model_copy(update={"address": config.mux.address, "replica_cpus": 0.0, "worker_cpus": 0.0,
                                 "replica_resources": {**ray.replica_resources, **pool},
                                 "worker_resources": {**ray.worker_resources, **pool}})
    trainer = config.trainer.model_copy(update={
        "rank_cpus": 0.0, "rank_resources": {**config.trainer.rank_resources, placement.train_resource: POOL_SHARE}})
    return config.model_copy(update={"rollout": config.rollout.model_copy(update={"backend": "ray", "ray": ray}),
                                     "trainer": trainer})

"""``agentgym mux submit``: admit a training job, then run its driver in a detached Ray actor on its group's
rollout pool (beside its engine and env workers; its learner's ranks go to the training pool), which leaves the
cluster when the run ends."""

from __future__ import annotations

from agentgym.config import dump_config, load_config
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.mux.client import MuxClient, Placement
from agentgym.trainers.mux.job import POOL_SHARE, job_name, job_profile
from agentgym.trainers.mux.scheduler import NAMESPACE

JOB_PREFIX = "agentgym-mux-job-"
"""Job actors are named this and the job's name, in the scheduler's namespace."""


class MuxJob:
    """A Ray actor that trains one multiplexed run (resuming it where its directory holds a checkpoint)."""

    def node(self) -> str:
        """The Ray node it runs on (its group's rollout pool)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def run(self, config_yaml: str) -> None:
        """Train the run to its end (its results are in its run directory, its progress in ``agentgym mux
        status``) and leave the cluster."""
        import tempfile

        import ray

        from agentgym.trainers.loop import CONFIG_FILE, resume, train

        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as file:
            file.write(config_yaml)
            file.flush()
            config = load_config(TrainConfig, file.name)
        if (config.run_dir / CONFIG_FILE).exists():  # started by an actor that died: go on from its checkpoint
            resume(config.run_dir)
        else:
            train(config)
        ray.actor.exit_actor()


def submit(config: TrainConfig) -> tuple[str, Placement, str]:
    """Admit ``config``'s job with the scheduler (raises :class:`~agentgym.trainers.mux.client.Refused`) and start
    its driver's actor on its rollout pool; returns the job's name, its placement and the Ray node its driver runs
    on. Ray must be connected."""
    import ray

    name = job_name(config)
    client = MuxClient(name, job_profile(config), steps=config.trainer.steps, run_dir=str(config.run_dir.resolve()))
    placement = client.register(heartbeat=False)  # the job's own process keeps its lease
    actor = ray.remote(MuxJob).options(name=JOB_PREFIX + name, namespace=NAMESPACE, lifetime="detached",
                                       num_cpus=0, resources={placement.rollout_resource: POOL_SHARE}).remote()
    node = ray.get(actor.node.remote())
    actor.run.remote(dump_config(config))
    return name, placement, node

"""``agentgym mux``: run many synchronous training jobs on shared pools of a Ray cluster (RollMux).

    agentgym mux start --ray-address auto            # the scheduler, as a named actor that outlives the command
    agentgym mux submit CONFIG.yaml [a.b=value ...]  # admit a job and run it on its group's pools
    agentgym mux status                              # jobs, groups, phases, slowdown against solo and SLO
    agentgym mux stop
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from agentgym.config import config_or_exit
from agentgym.errors import AgentGymError
from agentgym.trainers.config import TrainConfig

ADDRESS_HELP = "The Ray cluster (host:port, auto); default RAY_ADDRESS, else auto."
POOL_HELP = ("The nodes a group may take, as ROLLOUT_RESOURCE[,ROLLOUT_RESOURCE...]:TRAIN_RESOURCE, the Ray resources "
             "that mark its rollout nodes (one rollout pool each; a group adds them as rollout scaling asks) and its "
             "training pool (repeat for more groups; default rollout_pool:train_pool).")


def _address(address: str | None) -> str:
    return address or os.environ.get("RAY_ADDRESS") or "auto"


def _connect(address: str | None) -> None:
    from agentgym.cluster.backend import connect

    try:
        connect(_address(address))
    except ConnectionError as error:
        raise click.ClickException(f"no Ray cluster at {_address(address)} ({error}); start one that outlives "
                                   "this command: ray start --head --resources='{\"rollout_pool\": 1, "
                                   "\"train_pool\": 1}'") from None


@click.group("mux", context_settings={"help_option_names": ["-h", "--help"]})
def mux_group() -> None:
    """Many synchronous RL jobs on shared pools: co-execution groups take turns on a rollout pool and a
    training pool (RollMux)."""


@mux_group.command("start")
@click.option("--ray-address", help=ADDRESS_HELP)
@click.option("--pool", "pools", multiple=True, metavar="ROLLOUT[,ROLLOUT]:TRAIN", help=POOL_HELP)
@click.option("--memory-gb", type=click.FloatRange(min=0, min_open=True),
              help="Host memory the jobs resident on a node may take; default: the least of its pools' nodes.")
@click.option("--lease", type=click.FloatRange(min=0.5), default=30.0, show_default=True,
              help="Seconds without a word from a job after which it counts as crashed and its permits go on.")
def start_command(ray_address: str | None, pools: tuple[str, ...], memory_gb: float | None, lease: float) -> None:
    """Start the scheduler on the cluster (a named, detached actor Ray restarts if it dies)."""
    import ray

    from agentgym.trainers.mux.scheduler import NAME, NAMESPACE, MuxScheduler

    _connect(ray_address)
    specs = []
    for pool in pools or ("rollout_pool:train_pool",):
        rollout, sep, train = pool.partition(":")
        resources = [name.strip() for name in rollout.split(",")]
        if not (sep and all(resources) and train):
            raise click.BadParameter(f"{pool!r} is not ROLLOUT_RESOURCE[,ROLLOUT_RESOURCE...]:TRAIN_RESOURCE",
                                     param_hint="--pool")
        nodes = [_nodes_with(name) for name in (*resources, train)]
        missing = [name for name, found in zip((*resources, train), nodes, strict=True) if not found]
        if missing:
            raise click.ClickException(f"no node of the cluster offers {', '.join(missing)}: start the pools' nodes "
                                       f"with ray start --resources='{{\"{missing[0]}\": 1}}'")
        memory = memory_gb or min(n["Resources"].get("memory", 0) for found in nodes for n in found) / 1e9
        specs.append({"rollout_resources": resources, "train_resource": train, "memory_gb": memory})
    try:
        ray.get_actor(NAME, namespace=NAMESPACE)
        raise click.ClickException("a mux scheduler runs on this cluster already (agentgym mux status; stop it "
                                   "with agentgym mux stop)")
    except ValueError:
        pass
    actor = ray.remote(MuxScheduler).options(name=NAME, namespace=NAMESPACE, lifetime="detached", max_restarts=-1,
                                             num_cpus=0).remote(specs, lease_seconds=lease)
    status = ray.get(actor.status.remote())
    click.echo(f"mux scheduler started with {len(specs)} group spec(s): "
               + ", ".join(f"{','.join(s['rollout_resources'])}:{s['train_resource']} ({s['memory_gb']:.0f} GB a node)"
                           for s in specs) + f"; {len(status['jobs'])} jobs")


def _nodes_with(resource: str) -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(resource)]


@mux_group.command("submit", context_settings={"ignore_unknown_options": True})
@click.argument("config", type=click.Path(dir_okay=False))
@click.argument("overrides", nargs=-1)
@click.option("--ray-address", help=ADDRESS_HELP)
@click.option("--follow/--no-follow", default=False, help="Show the job's progress until it ends.")
def submit_command(config: str, overrides: tuple[str, ...], ray_address: str | None, follow: bool) -> None:
    """Admit a synchronous training job (trainer.async_ratio=0) and run it on its group's pools."""
    from agentgym.trainers.mux.client import Refused
    from agentgym.trainers.mux.submit import submit

    train_config = config_or_exit(TrainConfig, config, (*overrides, f"mux.address={_address(ray_address)}"))
    _connect(ray_address)
    try:
        name, placement, node = submit(train_config)
    except Refused as error:
        click.echo(f"agentgym: {error}", err=True)
        sys.exit(3)
    except AgentGymError as error:
        raise click.ClickException(str(error)) from None
    click.echo(f"job {name} admitted to group {placement.group} ({placement.rollout_resource}, "
               f"{placement.train_resource}), its driver on node {node}; run: {train_config.run_dir}")
    if follow:
        _follow(name)


def _follow(name: str) -> None:
    """Print the job's progress line until it leaves the scheduler."""
    import ray

    from agentgym.trainers.mux.client import scheduler_actor

    shown = ""
    while True:
        status = ray.get(scheduler_actor().status.remote())
        job = next((j for j in status["jobs"] if j["job"] == name), None)
        if job is None:
            click.echo(f"job {name}: {status['left'].get(name, 'gone')}")
            if status["left"].get(name) != "finished":
                sys.exit(1)
            return
        line = _progress_line(job)
        if line != shown:
            click.echo(line)
            shown = line
        time.sleep(2)


def _progress_line(job: dict[str, Any]) -> str:
    steps, step = job["steps"], job["step"]
    filled = round(20 * step / steps) if steps else 0
    slowdown = "n/a" if job["slowdown"] is None else f"{job['slowdown']:.2f}x"
    return (f"{job['job']}: [{'#' * filled}{'.' * (20 - filled)}] {step}/{steps} steps, {job['state']}, "
            f"slowdown {slowdown} (planned {job['planned_slowdown']:.2f}x, SLO {job['slo']:.2f}x)")


@mux_group.command("status")
@click.option("--ray-address", help=ADDRESS_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print the scheduler's whole state as JSON.")
def status_command(ray_address: str | None, as_json: bool) -> None:
    """Jobs, groups and phases: each job's step, phase, slowdown against solo and SLO."""
    import ray

    from agentgym.trainers.mux.client import scheduler_actor

    _connect(ray_address)
    try:
        status = ray.get(scheduler_actor().status.remote())
    except AgentGymError as error:
        raise click.ClickException(str(error)) from None
    if as_json:
        click.echo(json.dumps(status, indent=1))
        return
    console = Console()
    groups = Table("group", "members", "planned s a step", "memory GB", "pools (holder)", title="groups")
    for g in status["groups"]:
        groups.add_row(str(g["group"]), ", ".join(g["members"]),
                       ", ".join(f"{name} {seconds:.1f}" for name, seconds in g["step_seconds"].items()),
                       f"{g['memory_gb']:.1f}",
                       ", ".join(f"{resource} ({holder or 'free'})" for resource, holder in g["holders"].items()))
    console.print(groups)
    for job in status["jobs"]:
        console.print(_progress_line(job))
    for name, reason in status["left"].items():
        console.print(f"{name}: {reason}")


@mux_group.command("stop")
@click.option("--ray-address", help=ADDRESS_HELP)
def stop_command(ray_address: str | None) -> None:
    """Stop the scheduler (running jobs lose their permits' arbiter: stop them first)."""
    import ray

    from agentgym.trainers.mux.client import scheduler_actor

    _connect(ray_address)
    try:
        ray.kill(scheduler_actor(), no_restart=True)
    except AgentGymError as error:
        raise click.ClickException(str(error)) from None
    click.echo("mux scheduler stopped")

"""``agentgym train CONFIG [a.b=value ...]`` (a YAML file or a bundled config's name) and
``agentgym train --resume RUN_DIR``."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from agentgym.config import config_or_exit
from agentgym.trainers.bundled_configs import ConfigArgument
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.loop import TrainResult, resume, train


@click.command("train", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("config", required=False, type=ConfigArgument(sft=False))
@click.argument("overrides", nargs=-1)
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, exists=True),
              help="Continue the run in this directory from its latest checkpoint.")
def train_command(config: Path | None, overrides: tuple[str, ...], resume_dir: str | None) -> None:
    """Train an agent with the decoupled asynchronous trainer.

    CONFIG is a YAML file or the name of a bundled config, e.g. quickstart (an unknown name lists them).
    """
    console = Console(stderr=True)
    if resume_dir is not None:
        if config is not None or overrides:
            raise click.UsageError("--resume takes the run directory only; its config.yaml is the config")
        result = resume(resume_dir, console=console)
    elif config is None:
        raise click.UsageError("name a config file or a bundled config (e.g. quickstart), or --resume RUN_DIR")
    else:
        result = train(config_or_exit(TrainConfig, config, overrides), console=console)
    _summary(result)


def _summary(result: TrainResult) -> None:
    def percent(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1%}"

    print(f"held-out success: {percent(result.success_before)} -> {percent(result.success_after)} "
          f"after {result.steps} steps in {result.wall_seconds:.0f} s", file=sys.stdout)
    print(f"run: {result.run_dir} (report.md, curves.png, metrics.jsonl, checkpoints/)", file=sys.stdout)

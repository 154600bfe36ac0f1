"""``agentgym sft CONFIG [a.b=value ...]`` (a YAML file or a bundled config's name): the SFT warm start."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from agentgym.config import config_or_exit
from agentgym.trainers.bundled_configs import ConfigArgument
from agentgym.trainers.sft_config import SFTRunConfig


@click.command("sft")
@click.argument("config_path", metavar="CONFIG", type=ConfigArgument(sft=True))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
def sft_command(config_path: Path, overrides: tuple[str, ...]) -> None:
    """Warm-start a local model on oracle demonstrations (TRL's SFTTrainer, loss on agent tokens only).

    CONFIG is a YAML file or the name of a bundled config, e.g. sft-quickstart (an unknown name lists them).
    """
    config = config_or_exit(SFTRunConfig, config_path, overrides)
    from agentgym.trainers.sft import run_sft  # torch, transformers and trl load only when a run starts

    try:
        result = run_sft(config, console=Console(stderr=True, highlight=False))
    except (ValueError, FileExistsError) as exc:
        raise click.UsageError(str(exc)) from None
    out = Console(highlight=False)
    out.print(f"[bold]SFT done[/bold] in {result.seconds:.1f} s: {result.demonstrations} demonstrations "
              f"({result.agent_tokens:,} agent tokens), {result.steps} steps")
    out.print(f"loss {result.first_loss:.4f} -> {result.last_loss:.4f} (mean {result.train_loss:.4f})")
    out.print(f"model saved to {result.model_dir}", markup=False)

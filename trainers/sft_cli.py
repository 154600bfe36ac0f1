"""``agentgym sft CONFIG.yaml [a.b=value ...]``: the SFT warm start from the command line."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from agentgym.config import config_or_exit
from agentgym.trainers.sft_config import SFTRunConfig


@click.command("sft")
@click.argument("config_path", metavar="CONFIG.yaml", type=click.Path(dir_okay=False, path_type=Path))
@click.argument("overrides", nargs=-1, metavar="[KEY=VALUE]...")
def sft_command(config_path: Path, overrides: tuple[str, ...]) -> None:
    """Warm-start a local model on oracle demonstrations (TRL's SFTTrainer, loss on agent tokens only)."""
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

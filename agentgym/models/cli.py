"""``agentgym model``: build a small local model (``init``) and describe a model folder (``info``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click

from agentgym.models.presets import ARCHITECTURES, PRESETS


@click.group()
def model() -> None:
    """Build and inspect small local models (nothing is fetched from a hub)."""


@model.command()
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--preset", type=click.Choice(sorted(PRESETS)), default="tiny", show_default=True, help="Model size.")
@click.option("--arch", type=click.Choice(sorted(ARCHITECTURES)), default="qwen2", show_default=True,
              help="Architecture (Qwen2ForCausalLM or LlamaForCausalLM).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seeds the weights and the tokenizer's corpus; the same seed gives identical files.")
@click.option("--corpus-episodes", type=click.IntRange(min=1),
              help="Episodes per environment, difficulty, policy and format for the tokenizer (default: the preset's).")
@click.option("--force", is_flag=True, help="Write into OUT_DIR even if it is not empty.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line instead of text.")
def init(out_dir: Path, preset: str, arch: str, seed: int, corpus_episodes: int | None, force: bool,
         as_json: bool) -> None:
    """Train a tokenizer on the bundled environments and save a freshly initialised model to OUT_DIR."""
    from agentgym.models.build import init_model, model_info

    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise click.UsageError(f"{out_dir} is not empty; choose another folder or pass --force to write into it")
    started = time.perf_counter()
    path = init_model(out_dir, preset, arch=arch, seed=seed, corpus_episodes=corpus_episodes)  # type: ignore[arg-type]
    details = {**model_info(path).model_dump(), "preset": preset, "seed": seed,
               "seconds": round(time.perf_counter() - started, 2)}
    if as_json:
        click.echo(json.dumps(details))
        return
    click.echo(f"{details['arch']} ({preset}): {details['parameters']:,} parameters, vocabulary "
               f"{details['vocab_size']:,} tokens, saved to {path} in {details['seconds']:.1f} s")


@model.command()
@click.argument("model_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line instead of text.")
def info(model_dir: Path, as_json: bool) -> None:
    """Show a model folder's architecture, parameters, vocabulary and whether it has a chat template."""
    from agentgym.models.build import model_info

    try:
        details = model_info(model_dir)
    except (ValueError, OSError) as exc:
        raise click.UsageError(str(exc)) from None
    if as_json:
        click.echo(details.model_dump_json())
        return
    click.echo(f"{details.path}\n  architecture   {details.arch}\n  parameters     {details.parameters:,}\n"
               f"  layers         {details.num_hidden_layers} (hidden size {details.hidden_size})\n"
               f"  vocabulary     {details.vocab_size:,} tokens\n"
               f"  chat template  {'yes' if details.chat_template else 'no'}")

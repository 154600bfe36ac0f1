"""``agentgym serve``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import click

from agentgym.serve.app import serve
from agentgym.serve.guard import DEFAULT_MAX_BODY_BYTES


@click.command("serve")
@click.option(
    "--model",
    "model",
    type=click.Path(path_type=Path),
    required=True,
    help="Local model folder (config, weights and tokenizer); served under its folder name.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="Port to listen on."
)
@click.option(
    "--max-batch-size",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Most requests the torch engine computes together.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Engine seed (for requests without their own)."
)
@click.option(
    "--max-body-mb",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_MAX_BODY_BYTES / 2**20,
    show_default=True,
    help="Largest request body in MiB; a larger one is refused (413) before it is read.",
)
def serve_command(
    model: Path, host: str, port: int, max_batch_size: int, seed: int, max_body_mb: float
) -> None:
    """Serve a model over an OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions)."""
    if not (model / "config.json").is_file():
        raise click.UsageError(f"--model {model}: no model there (expected a folder with config.json)")
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.UsageError(f"agentgym serve needs {' and '.join(missing)}: pip install 'agentgym[serve]'")
    max_body_bytes = max(1, int(max_body_mb * 2**20))
    serve(model, host, port, max_body_bytes=max_body_bytes, max_batch_size=max_batch_size, seed=seed)

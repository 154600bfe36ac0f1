"""``agentgym sandbox build|exec|reap``: images, one-off commands in a sandbox, and cleanup after crashes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import click

from agentgym.sandboxes import BACKENDS, ExecResult, SandboxSpec, choose_backend, open_sandbox, reap
from agentgym.sandboxes.base import TIMEOUT_EXIT
from agentgym.sandboxes.errors import SandboxError

SANDBOX_FAILURE_EXIT = 125
"""Exit status when the sandbox itself fails (as ``docker run`` reports a daemon failure)."""


@click.group("sandbox")
def sandbox_group() -> None:
    """Build sandbox images, run a command in a sandbox, remove what crashed runs left."""


@sandbox_group.command("build")
@click.argument("names", nargs=-1, metavar="[NAME]...")
@click.option("--force", is_flag=True, help="Rebuild even when the content tag exists.")
def build_command(names: tuple[str, ...], force: bool) -> None:
    """Build the base image from a local Debian root and the env images on top (all, or NAME...); starts
    the Docker engine when none runs, and leaves it running."""
    from agentgym.sandboxes.docker_engine import ensure_engine
    from agentgym.sandboxes.images import build_images

    with _sandbox_failures():
        engine = ensure_engine()
        engine.keep()
        if engine.started:
            click.echo("started the Docker engine (dockerd); it keeps running", err=True)
        for name, tag in build_images(list(names) or None, force=force).items():
            click.echo(f"{name}\t{tag}")


@sandbox_group.command("exec", context_settings={"ignore_unknown_options": True})
@click.option("--backend", type=click.Choice(["auto", *BACKENDS]), default="auto", show_default=True)
@click.option("--image", default=SandboxSpec().image, show_default=True, help="Image (docker backend).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60.0, show_default=True,
              help="Seconds before the command's process tree is killed (exit status 124).")
@click.option("--memory-mb", type=click.IntRange(min=16), default=SandboxSpec().memory_mb, show_default=True)
@click.option("--network", is_flag=True, help="Let the sandbox reach the network.")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_command(backend: str, image: str, timeout: float, memory_mb: int, network: bool,
                 command: tuple[str, ...]) -> None:
    """Run COMMAND in a fresh sandbox, print its output and exit with its status (124 on timeout)."""
    spec = SandboxSpec(image=image, memory_mb=memory_mb, network=network)
    with _sandbox_failures():
        result = asyncio.run(_exec_once(choose_backend(backend, spec), spec, list(command), timeout))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.truncated:
        click.echo(f"agentgym: output cut at {spec.output_limit} bytes per stream", err=True)
    sys.exit(TIMEOUT_EXIT if result.timed_out else result.exit_code)


@sandbox_group.command("reap")
@click.option("--all", "everything", is_flag=True, help="Remove every agentgym sandbox, not only orphans.")
def reap_command(everything: bool) -> None:
    """Remove the sandboxes whose creating process is gone (containers, volumes, work dirs, cgroups)."""
    with _sandbox_failures():
        click.echo(f"removed {reap(everything=everything)} sandbox(es)")


async def _exec_once(backend: str, spec: SandboxSpec, argv: list[str], timeout: float) -> ExecResult:
    async with await open_sandbox(backend, spec) as sandbox:
        return await sandbox.exec(argv, timeout=timeout)


@contextmanager
def _sandbox_failures() -> Iterator[None]:
    """A :class:`SandboxError` ends the command with one line on stderr and :data:`SANDBOX_FAILURE_EXIT`."""
    try:
        yield
    except SandboxError as exc:
        click.echo(f"agentgym: sandbox error: {exc}", err=True)
        sys.exit(SANDBOX_FAILURE_EXIT)

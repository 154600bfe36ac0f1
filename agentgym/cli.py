"""The ``agentgym`` command line: list, inspect, play, check and evaluate environments, compare evaluations.

Bad arguments exit with status 2 and a one-line reason; a failed check exits with status 1; an evaluation
that scored no episode exits with status 3. SIGTERM and SIGHUP stop every command as Ctrl-C does, closing what it
opened, with status 128 + the signal's number (Ctrl-C: 130); see :mod:`agentgym.lifetime`.
"""

from __future__ import annotations

import importlib
import json
import sys
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.table import Table
from rich.text import Text

from agentgym.check_pool import CheckOutcome, check_envs, usable_cores
from agentgym.checker import CHECKS
from agentgym.cli_shared import bad_arguments, err, out, select_envs
from agentgym.errors import AgentGymError
from agentgym.lifetime import command_process
from agentgym.messages import Message
from agentgym.models.cli import model
from agentgym.progress import LiveProgress
from agentgym.registration import list_envs, load_entry_point, make, spec, unavailable_families
from agentgym.serve import serve_command

COMMAND_GROUP = "agentgym.commands"
"""The entry-point group of commands that live outside the core (``train`` and ``sft`` in the trainers,
``sandbox`` in the sandboxes): each entry point is named for its command and loads it when run."""
_LAZY_COMMANDS = {
    "eval": ("agentgym.eval_commands", "eval_command"),
    "compare": ("agentgym.eval_commands", "compare_command"),
    "leaderboard": ("agentgym.eval_commands", "leaderboard_command"),
    "view": ("agentgym.view.cli", "view_command"),
}
"""The core's own commands imported only when run (evaluation pulls in matplotlib, the viewer FastAPI)."""


class _Cli(click.Group):
    """A group whose usage errors are one line on stderr with exit status 2, with the commands of
    :data:`_LAZY_COMMANDS` and :data:`COMMAND_GROUP` loaded when run (the trainers pull in torch and TRL)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_LAZY_COMMANDS, *_plugin_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in _LAZY_COMMANDS:
            module, name = _LAZY_COMMANDS[cmd_name]
            command: click.Command = getattr(importlib.import_module(module), name)
            return command
        if (entry := _plugin_commands().get(cmd_name)) is not None:
            plugin: click.Command = entry.load()
            return plugin
        return super().get_command(ctx, cmd_name)

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            return super().main(*args, **kwargs)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
            sys.exit(2)
        except click.UsageError as exc:
            _fail(exc.format_message())
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            sys.exit(130)


def _plugin_commands() -> dict[str, EntryPoint]:
    """The commands of :data:`COMMAND_GROUP`, by name."""
    return {entry.name: entry for entry in entry_points(group=COMMAND_GROUP)}


def _fail(reason: str) -> NoReturn:
    click.echo(f"agentgym: error: {' '.join(reason.split())}", err=True)
    sys.exit(2)


@click.group(cls=_Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="agentgym")
def cli() -> None:
    """agentgym: environments, rollout and training for LLM agents."""


@cli.command("list")
@click.option("--family", help="Only this family (games, tools, ...).")
@click.option("--tag", help="Only environments with this tag.")
@click.option("--json", "as_json", is_flag=True, help="Print the specs as a JSON list.")
def list_command(family: str | None, tag: str | None, as_json: bool) -> None:
    """List the registered environments."""
    specs = list_envs(family=family, tag=tag)
    missing = {name: row for name, row in unavailable_families().items() if family in (None, name) and tag is None}
    if as_json:
        rows = [{**s.model_dump(), "unavailable": s.unavailable} for s in specs]
        rows += [{"id": f"{name}/*", "description": text, "unavailable": reason} for name, (text, reason) in missing.items()]
        click.echo(json.dumps(rows))
        return
    table = Table("id", "tags", "description")
    for s in specs:
        reason = s.unavailable
        table.add_row(s.id, ", ".join(s.tags), s.description + (f" [red](unavailable: {reason})[/red]" if reason else ""))
    for name, (text, reason) in missing.items():
        table.add_row(f"{name}/*", "", f"{text} [red](unavailable: {reason})[/red]")
    out.print(table)


@cli.command()
@click.argument("env_id")
@click.option("--json", "as_json", is_flag=True, help="Print the details as JSON.")
def info(env_id: str, as_json: bool) -> None:
    """Show an environment's spec, difficulties, turn limits and tools."""
    with bad_arguments():
        env_spec = spec(env_id)
        env = make(env_id)
    try:
        details = {
            **env_spec.model_dump(),
            "class": f"{type(env).__module__}.{type(env).__qualname__}",
            "doc": (type(env).__doc__ or "").strip(),
            "difficulties": {d: {"max_turns": env.max_turns or env.turn_limit(d)} for d in env.difficulties},
            "tools": [t.to_openai()["function"] for t in env.tools],
        }
    finally:
        env.close()
    if as_json:
        click.echo(json.dumps(details))
        return
    out.print(f"[bold]{env_spec.id}[/bold]  ({details['class']})")
    out.print(details["doc"])
    out.print("difficulties: " + ", ".join(f"{d} ({v['max_turns']} turns)" for d, v in details["difficulties"].items()))
    for t in details["tools"]:
        out.print(f"tool [bold]{t['name']}[/bold]: {t['description']}")
        out.print(json.dumps(t["parameters"], indent=2), markup=False)


@cli.command()
@click.argument("env_id")
@click.option("--seed", type=int, default=0, show_default=True, help="Episode seed.")
@click.option("--difficulty", help="Difficulty level (see `agentgym info`).")
@click.option("--format", "call_format", type=click.Choice(["pythonic", "hermes"]), default="pythonic", show_default=True,
              help="How you write tool calls.")
@click.option("--screens", "screens_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where the screen is saved each turn, for web and GUI environments "
                   "(default runs/play/<family>-<name>-seed<seed>).")
def play(env_id: str, seed: int, difficulty: str | None, call_format: str, screens_dir: Path | None) -> None:
    """Play an environment yourself, one tool call per line (Ctrl-D ends). Web and GUI environments save
    the screen as a PNG each turn and print its path."""
    with bad_arguments():
        env_spec = spec(env_id)
        screens = "rgb_array" in load_entry_point(env_spec.entry_point).metadata["render_modes"]
        env = make(env_id, parser=call_format, **({"render_mode": "rgb_array"} if screens else {}))
        options = {"difficulty": difficulty} if difficulty else {}
    if screens and screens_dir is None:
        screens_dir = Path("runs/play") / f"{env_spec.id.replace('/', '-')}-seed{seed}"
    try:
        with bad_arguments():
            observation, reset_info = env.reset(seed=seed, options=options)
        out.print(f"[bold]{env_id}[/bold] seed={seed} difficulty={reset_info['difficulty']} turns={reset_info['max_turns']}")
        out.print(f"Write a tool call such as: {env.example_call()}", markup=False)
        _show(observation)
        _save_screen(env, screens_dir)
        total = 0.0
        while True:
            try:
                action = input(f"[turn {env.turn + 1}]> ")
            except EOFError:
                out.print("\n(stopped)")
                return
            observation, reward, terminated, truncated, step_info = env.step(action)
            total += reward
            _show(observation)
            _save_screen(env, screens_dir)
            if terminated or truncated:
                outcome = "solved" if step_info["success"] else "turn limit reached" if truncated else "failed"
                out.print(f"[bold]Episode over: {outcome}, reward {total:g}, {env.turn} turns.[/bold]")
                return
    finally:
        env.close()


def _save_screen(env: Any, folder: Path | None) -> None:
    """Write the environment's screen after this turn to ``folder`` and say where."""
    frame = env.render_frame() if folder is not None else None
    if frame is None or folder is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"turn-{env.turn:03d}.png"
    path.write_bytes(frame)
    out.print(f"[dim]screen: {path}[/dim]", markup=True)


def _show(messages: list[Message]) -> None:
    for message in messages:
        out.print(f"[dim]{message.role}{' ' + message.name if message.name else ''}:[/dim]")
        out.print(message.text, markup=False)


@cli.command()
@click.argument("env_ids", nargs=-1)
@click.option("--all", "check_all", is_flag=True, help="Check every registered environment.")
@click.option("--family", help="Check every environment of this family (e.g. web, gui).")
@click.option("--episodes", type=click.IntRange(min=1), default=3, show_default=True,
              help="Oracle episodes per difficulty level.")
@click.option("--concurrency", type=click.IntRange(min=1), default=usable_cores(), show_default="the cores",
              help="Environments checked at once, each in a process of its own; of those that run a browser, and of "
                   "those that run sandboxes, no more than the memory available holds (1 GiB each).")
@click.option("--only", "only", multiple=True, type=click.Choice(CHECKS),
              help="Run only this check (repeatable); every check by default.")
def check(env_ids: tuple[str, ...], check_all: bool, family: str | None, episodes: int, concurrency: int,
          only: tuple[str, ...]) -> None:
    """Run the conformance checks on environments; exit 1 if any fails. Off a terminal, a line per environment
    as it finishes (its result, seconds and failures); the table at the end lists them in order."""
    ids = select_envs(env_ids, check_all, family)
    specs = [spec(env_id) for env_id in ids]
    with LiveProgress("check", len(specs), console=err) as progress:

        def show(outcome: CheckOutcome) -> None:
            failures = "; ".join(" ".join(line.split()) for line in outcome.failures)
            result = f"FAIL: {failures}" if failures else "pass"
            progress.update(advance=1, status=f"{outcome.env_id} {outcome.seconds:.1f} s {result}", flush=True)

        outcomes = check_envs(specs, episodes=episodes, concurrency=concurrency, only=only or None, on_outcome=show)
    table = Table("environment", "result", "seconds", "detail")
    for outcome in outcomes:
        seconds = f"{outcome.seconds:.2f}"
        if outcome.failures:
            table.add_row(outcome.env_id, "[red]FAIL[/red]", seconds, Text("\n".join(outcome.failures)))  # no markup: "[check]"
        else:
            skipped = [f"{name} skipped: {why}" for name, why in outcome.skipped]
            table.add_row(outcome.env_id, "[green]pass[/green]", seconds, ", ".join([*outcome.passed, *skipped]))
    out.print(table)
    failed = sum(not outcome.ok for outcome in outcomes)
    if failed:
        click.echo(f"{failed} of {len(ids)} environments failed their checks", err=True)
        sys.exit(1)


cli.add_command(model)
cli.add_command(serve_command)


def main() -> None:
    """Console-script entry point."""
    with command_process():
        try:
            cli.main(prog_name="agentgym")
        except AgentGymError as exc:
            click.echo(f"agentgym: error: {exc}", err=True)
            sys.exit(1)

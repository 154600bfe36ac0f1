"""``agentgym eval``, ``agentgym compare`` and ``agentgym leaderboard``."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Literal, TypeVar

import click
import yaml
from pydantic import BaseModel, ValidationError
from rich.table import Table

from agentgym.cli_shared import bad_arguments, err, out, select_envs
from agentgym.cluster import BackendConfig, RayConfig, open_backend
from agentgym.evaluation.compare import compare_runs
from agentgym.evaluation.leaderboard import RECORDED_RUNS, write_leaderboard
from agentgym.evaluation.records import RunFolder, RunSpec, tasks_digest
from agentgym.evaluation.report import NOTHING_SCORED, number, percent
from agentgym.evaluation.run import Progress as RunProgress
from agentgym.evaluation.run import run_evaluation
from agentgym.evaluation.scores import RunScores
from agentgym.inference import ENGINES, SamplingParams, engine_spec, engines
from agentgym.parsers import resolve_parser
from agentgym.policies import POLICIES, Policy, get_policy
from agentgym.policies.context import ContextPolicy
from agentgym.policies.engines import engine_policy
from agentgym.progress import LiveProgress
from agentgym.registration import make
from agentgym.rollout.config import TreeRollout
from agentgym.rollout.runner import Backend
from agentgym.suites import load_suite, suite_names
from agentgym.tasks import Task, TaskSet

NOTHING_SCORED_EXIT = 3
"""The exit status of ``agentgym eval`` when no episode was scored (every one lost to infrastructure)."""
SettingsT = TypeVar("SettingsT", bound=BaseModel)


@click.command("eval")
@click.argument("env_ids", nargs=-1)
@click.option("--suite", help="A bundled suite (games-v0, tools-v0, swe-v0, ...: `agentgym eval SUITE` works too) "
                               "or a suite folder.")
@click.option("--all", "eval_all", is_flag=True, help="Every registered environment.")
@click.option("--family", help="Every environment of this family (e.g. web, gui).")
@click.option("--policy", type=click.Choice(sorted(POLICIES)), help="A reference policy.")
@click.option("--engine", metavar="NAME", callback=lambda _ctx, _param, name: _registered_engine(name),
              help=f"Evaluate a model on this inference engine: {', '.join(ENGINES)}, or one a package registers.")
@click.option("--model", "model_path", help="The model: a local folder (torch, vllm) or a served model name (openai).")
@click.option("--base-url", help="The OpenAI-compatible server's /v1 address (openai engine).")
@click.option("--tokenizer", type=click.Path(exists=True, file_okay=False),
              help="openai engine: the served model's local tokenizer, to evaluate token in, token out through "
                   "/v1/completions (exactly what the torch engine would see) instead of chat.")
@click.option("--temperature", type=click.FloatRange(min=0), default=1.0, show_default=True)
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True), default=1.0, show_default=True)
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True, help="Tokens per turn.")
@click.option("--max-context", type=click.IntRange(min=16), default=4096, show_default=True,
              help="Prompt plus response tokens of an episode (torch, vllm); a longer episode ends truncated.")
@click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True,
              help="Episodes per task (pass@k for k up to this).")
@click.option("--sampling", "rollout_sampling", type=click.Choice(["stochastic", "latr"]), default="stochastic",
              show_default=True,
              help="How a task's --samples are drawn: each on its own, or (latr, a torch or vllm model) as one tree "
                   "of episodes that fork where the model is unsure, as in training with rollout.sampling: latr.")
@click.option("--latr", "latr_args", multiple=True, metavar="KEY=VALUE",
              help="With --sampling latr: one of LATR's settings (rollout.latr of training, a YAML value), e.g. "
                   "tau_abs=0.1 or forced_turn=4; repeatable.")
@click.option("--context", "context_args", multiple=True, metavar="KEY=VALUE",
              help="A model's context policy, as `context:` of training (strategy, budget, compact_to, "
                   "observation_tokens, overflow, penalty), e.g. --context strategy=summarise.")
@click.option("--split", type=click.Choice(["train", "test"]), default="test", show_default=True)
@click.option("--episodes", type=click.IntRange(min=1), default=50, show_default=True,
              help="Tasks per named environment (not with --suite).")
@click.option("--difficulty", help="Only this difficulty (default: every level).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seeds the policy; with named environments also the first task seed within the split.")
@click.option("--env-arg", "env_args", multiple=True, metavar="[ENV_ID:]KEY=VALUE",
              help="A keyword argument of the environments (a YAML value), e.g. parser=pythonic or "
                   "games/FrozenLake-v0:describe=true; repeatable.")
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="Episodes in flight.")
@click.option("--retries", type=click.IntRange(min=0), default=2, show_default=True,
              help="Times an episode lost to infrastructure is played again.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The run's folder (default runs/eval/<suite or env>-<agent>-<time>).")
@click.option("--resume", is_flag=True, help="Continue the evaluation in --out, playing only what is missing.")
@click.option("--json", "as_json", is_flag=True, help="End with one JSON line holding the scores.")
@click.option("--backend", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where the episodes (and a torch or vllm engine) run: here, or in Ray actors.")
@click.option("--ray-address",
              help="ray backend: the cluster to join (default: RAY_ADDRESS, else a local Ray of this run's own).")
@click.option("--env-workers", type=click.IntRange(min=1), default=RayConfig().env_workers, show_default=True,
              help="ray backend: env-worker actors.")
@click.option("--engine-replicas", type=click.IntRange(min=1), default=RayConfig().engine_replicas, show_default=True,
              help="ray backend: engine replicas (torch, vllm).")
def eval_command(
    env_ids: tuple[str, ...], suite: str | None, eval_all: bool, family: str | None, policy: str | None,
    engine: str | None, model_path: str | None, base_url: str | None, tokenizer: str | None, temperature: float,
    top_p: float, max_tokens: int, max_context: int, samples: int, rollout_sampling: Literal["stochastic", "latr"],
    latr_args: tuple[str, ...], context_args: tuple[str, ...], split: str, episodes: int, difficulty: str | None, seed: int, env_args: tuple[str, ...],
    concurrency: int, retries: int, out_dir: Path | None, resume: bool, as_json: bool, backend: str, ray_address: str | None, env_workers: int, engine_replicas: int,
) -> None:
    """Evaluate a reference policy or a model on a suite or on environments; write a report.

    Each episode is appended to DIR/episodes.jsonl as it ends, so --resume continues a crashed run.
    Attempts lost to infrastructure are retried and reported apart, never scored; the first traceback
    among them is printed to stderr and put in the report. Exits with status 3 when no episode was
    scored: the success rate is then undefined (n/a, null in JSON)."""
    if bool(policy) == bool(engine):
        raise click.UsageError("choose --policy (a reference policy) or --engine with --model (a model)")
    if engine and not model_path:
        raise click.UsageError(f"--engine {engine} needs --model")
    if engine and engine_spec(engine).kind == "local" and not Path(model_path or "").is_dir():
        raise click.UsageError(f"--model {model_path} is not a folder; build one with `agentgym model init --preset tiny DIR`")
    if resume and out_dir is None:
        raise click.UsageError("--resume needs --out, the folder of the evaluation to continue")
    with bad_arguments():
        latr = _latr(rollout_sampling, latr_args, engine, samples)
        if context_args and engine is None:
            raise ValueError("--context keeps a model's conversation within its context; it needs --engine")
        context = _settings("--context", ContextPolicy, context_args) if context_args else None
        suite_name, suite_sha, tasks = _tasks(env_ids, suite, eval_all, family, split, episodes, difficulty, seed)
        parsed_args = _env_args(env_args, {t.env_id for t in tasks})
        if model_path is not None:  # parser=auto: the format the model's own chat template declares
            parsed_args = {target: resolve_parser(kwargs, tokenizer or model_path, "--env-arg parser")
                           for target, kwargs in parsed_args.items()}
    sampling = SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens) if engine else None
    agent = policy or f"{engine}-{Path(str(model_path)).name or model_path}"
    spec = RunSpec(agent=agent, policy=policy, engine=engine, model=model_path, base_url=base_url, tokenizer=tokenizer,
                   sampling=sampling, suite=suite_name, suite_sha256=suite_sha, split=split,
                   tasks_sha256=tasks_digest(tasks), samples=samples, rollout_sampling=rollout_sampling, latr=latr,
                   context=context, seed=seed, max_retries=retries, env_args=parsed_args)
    label = suite_name or (tasks[0].env_id.replace("/", "-") if len({t.env_id for t in tasks}) == 1 else "envs")
    out_dir = out_dir or Path("runs") / "eval" / f"{label}-{agent}-{time.strftime('%Y%m%d-%H%M%S')}"
    where = BackendConfig(backend=backend, ray=RayConfig(address=ray_address, env_workers=env_workers,
                                                         engine_replicas=engine_replicas))
    with bad_arguments(), open_backend(where) as opened:
        scores = asyncio.run(_run(spec, tasks, out_dir, resume=resume, concurrency=concurrency, max_context=max_context,
                                  backend=opened))
    _print(scores, out_dir)
    _print_first_traceback(RunFolder(out_dir))
    if as_json:
        click.echo(json.dumps(json_summary(scores, out_dir)))
    if scores.scored == 0:
        click.echo(f"agentgym: no episode was scored: all {scores.episodes} were lost to infrastructure, so the "
                   f"success rate is undefined; their causes are in {out_dir / 'report.md'}", err=True)
        sys.exit(NOTHING_SCORED_EXIT)


def _registered_engine(name: str | None) -> str | None:
    """``--engine``: the name of a registered engine (a plugin's included)."""
    if name is not None:
        try:
            engine_spec(name)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="'--engine'") from None
    return name


def json_summary(scores: RunScores, folder: Path) -> dict[str, Any]:
    """What ``--json`` prints: the headline scores and where the report is."""
    data = scores.model_dump(exclude={"per_task", "by_env"})
    return {**data, "out": str(folder), "report": str(folder / "report.md")}


def _tasks(env_ids: tuple[str, ...], suite: str | None, eval_all: bool, family: str | None, split: str, episodes: int,
           difficulty: str | None, seed: int) -> tuple[str | None, str | None, list[Task]]:
    """The suite's name, checksum and tasks of the split; or tasks generated for the environments named. A lone name
    without a slash that is a bundled suite's (environment ids have one) is that suite."""
    if suite is None and len(env_ids) == 1 and "/" not in env_ids[0] and env_ids[0] in suite_names():
        suite, env_ids = env_ids[0], ()
    if suite is not None:
        if env_ids or eval_all or family:
            raise click.UsageError("--suite chooses the tasks; name no environments and no --all or --family with it")
        loaded = load_suite(suite)
        tasks = [t for t in loaded.split(split) if difficulty is None or t.difficulty == difficulty]  # type: ignore[arg-type]
        if not tasks:
            raise ValueError(f"suite {loaded.name} has no {split} tasks" + (f" of difficulty {difficulty!r}" if difficulty else ""))
        return loaded.name, loaded.sha256, tasks
    tasks = []
    for env_id in select_envs(env_ids, eval_all, family):
        env = make(env_id)
        levels = list(env.difficulties)
        env.close()
        if difficulty is not None and difficulty not in levels:
            raise ValueError(f"{env_id} has no difficulty {difficulty!r}; choose one of: {', '.join(levels)}")
        tasks += TaskSet.generate(env_id, episodes, split=split, start=seed,  # type: ignore[arg-type]
                                  difficulties=[difficulty] if difficulty else levels)
    return None, None, tasks


def _latr(rollout_sampling: str, args: tuple[str, ...], engine: str | None, samples: int) -> TreeRollout | None:
    """LATR's settings with the ``--latr KEY=VALUE`` overrides (None under stochastic sampling); refuses a
    reference policy and an engine that cannot grow trees, and warns when the tree could never branch."""
    if rollout_sampling != "latr":
        if args:
            raise ValueError("--latr sets LATR's settings; it needs --sampling latr")
        return None
    if engine is None:
        raise ValueError("--sampling latr grows trees from a model's token distributions; evaluate a model "
                         "(--engine torch or vllm with --model), not a reference --policy")
    latr = _settings("--latr", TreeRollout, args)
    if not engine_spec(engine).trees:
        growers = [name for name, spec in engines().items() if spec.trees]
        raise ValueError(f"--sampling latr needs an engine that grows trees ({', '.join(growers)}); "
                         f"the {engine} engine does not")
    width = latr.width(samples, 0)
    if width < 2:
        click.echo(f"warning: --sampling latr with --samples {samples}: the tree holds {width} episode(s) "
                   "(round(samples * η) at step 0), so it never branches; trees want more --samples (or a larger η "
                   "in --latr width_schedule)", err=True)
    return latr


def _settings(option: str, model: type[SettingsT], args: tuple[str, ...]) -> SettingsT:
    """``model`` with the ``option KEY=VALUE`` overrides (each value read as YAML); the error names the key."""
    overrides: dict[str, Any] = {}
    for arg in args:
        key, sep, value = arg.partition("=")
        if not sep:
            raise ValueError(f"{option} {arg!r} is not KEY=VALUE")
        if key not in model.model_fields:
            raise ValueError(f"{option} {key}: not one of its settings; choose one of: {', '.join(model.model_fields)}")
        overrides[key] = yaml.safe_load(value)
    try:
        return model.model_validate(overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ValueError(f"{option} {first['loc'][0] if first['loc'] else ''}: {first['msg']}") from None


def _env_args(args: tuple[str, ...], env_ids: set[str]) -> dict[str, dict[str, Any]]:
    """``[ENV_ID:]KEY=VALUE`` pairs by environment (``*`` for all)."""
    parsed: dict[str, dict[str, Any]] = {}
    for arg in args:
        target, _, pair = arg.rpartition(":") if ":" in arg.split("=", 1)[0] else ("*", "", arg)
        key, sep, value = pair.partition("=")
        if not sep or not key.isidentifier():
            raise ValueError(f"--env-arg {arg!r} is not [ENV_ID:]KEY=VALUE")
        if target != "*" and target not in env_ids:
            raise ValueError(f"--env-arg {arg!r} names {target}, which this evaluation does not play")
        parsed.setdefault(target, {})[key] = yaml.safe_load(value)
    return parsed


async def _run(spec: RunSpec, tasks: list[Task], out_dir: Path, *, resume: bool, concurrency: int,
               max_context: int, backend: Backend) -> RunScores:
    """Start the policy (a model's engine once), then play the run on ``backend`` with a progress bar."""
    async with AsyncExitStack() as stack:
        agent: Policy
        if spec.engine is not None:
            err.print(f"starting the {spec.engine} engine on {spec.model} ...", markup=False)
            agent = await stack.enter_async_context(engine_policy(
                spec.engine, str(spec.model), base_url=spec.base_url, sampling=spec.sampling,
                tokenizer=spec.tokenizer, max_context=max_context, context=spec.context, backend=backend))
        else:
            agent = get_policy(str(spec.policy))
        # off a terminal, a line at most every 10 s: an evaluation has hundreds of episodes
        with LiveProgress(spec.agent, len(tasks) * spec.samples, console=err, every=10.0) as progress:

            def show(p: RunProgress) -> None:
                progress.update(completed=p.done, description=f"{p.env_id} · {spec.agent}")

            return await run_evaluation(spec, tasks, agent, out_dir, resume=resume, concurrency=concurrency,
                                        on_progress=show, backend=backend)


def _print(s: RunScores, out_dir: Path) -> None:
    table = Table("environment", "episodes", "success", "mean reward", "infra errors")
    for b in s.by_env:
        table.add_row(b.name, str(b.episodes), percent(b.success_rate), number(b.mean_reward, 3), str(b.infra_errors))
    out.print(table)
    passes = "  ".join(f"pass@{k} {v:.1%}" for k, v in s.pass_at_k.items())
    success = NOTHING_SCORED if s.success_rate is None else f"{s.success_rate:.1%} over {s.scored} episodes ({passes})"
    out.print(f"{s.agent}: success {success}, mean reward {number(s.mean_reward, 3)}, {s.infra_errors} unscored "
              f"infrastructure errors, {s.infra_retried} retried", markup=False)
    out.print(f"report: {out_dir / 'report.md'} (and report.html)", markup=False)


def _print_first_traceback(run: RunFolder) -> None:
    """Show on stderr where the first attempt lost to an exception failed, for whoever debugs the environment."""
    first = run.first_traceback()
    if first is not None:
        click.echo(f"the first traceback among the attempts lost to infrastructure ({first.key}, attempt "
                   f"{first.attempt}; every cause is in the report):\n{first.traceback}", err=True, nl=False)


@click.command("compare")
@click.argument("run_a", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
def compare_command(run_a: Path, run_b: Path, as_json: bool) -> None:
    """Compare two evaluations task by task, with paired significance tests (B minus A)."""
    with bad_arguments():
        result = compare_runs(run_a, run_b)
    if as_json:
        click.echo(result.model_dump_json())
        return
    out.print(result.markdown(), markup=False)


@click.command("leaderboard")
@click.option("--runs", "runs_dir", type=click.Path(file_okay=False, path_type=Path), default=RECORDED_RUNS,
              show_default=True, help="The recorded runs (one summary JSON per agent).")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path),
              default=RECORDED_RUNS.parent / "leaderboard.md", show_default=True)
@click.option("--suites", "suites_dir", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder of suite folders to score instead of the bundled suites.")
def leaderboard_command(runs_dir: Path, out_file: Path, suites_dir: Path | None) -> None:
    """Regenerate the leaderboard and the suites' score tables from the recorded runs."""
    with bad_arguments():
        written = write_leaderboard(runs_dir, out_file, suites_dir)
    for path in written:
        out.print(f"wrote {path}", markup=False)

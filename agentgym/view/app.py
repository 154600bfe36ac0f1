"""The viewer's web app: server-rendered pages over one run folder, or two compared.

``/`` opens the run (or the comparison of two); ``/run/{a|b}`` is a run's page, ``/run/{r}/episodes`` its episode
list (filters, search, sort, pages), ``/run/{r}/episode/{source}/{n}`` one episode (``?tab=tokens`` its tokens),
``/run/{r}/group/{step}/{position}`` a training group, ``/compare`` the two runs' tasks, ``/run/{r}/screens/...`` the
stored screens and ``/run/{r}/status.json`` the counts a page polls to say new episodes arrived.

Pages are Jinja2 templates with autoescape on; data is never marked safe, only the Markdown and SVG this package
renders from escaped text. Every response forbids inline script and anything from elsewhere
(Content-Security-Policy): the only script is ``/static/view.js``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.exceptions import HTTPException

from agentgym.evaluation.scores import breakdown
from agentgym.view import charts, pages
from agentgym.view.compare import compare
from agentgym.view.index import RESULTS, BadRecord, Entry
from agentgym.view.listing import OUTCOMES, PAGE_SIZE, SORTS, Listing, Query
from agentgym.view.markdown import SCREEN
from agentgym.view.runs import Run, Source, open_run
from agentgym.view.tokens import MODES, TOKENS_SHOWN, Tokenizers, token_view

HERE = Path(__file__).parent
STATIC = {"view.css": "text/css; charset=utf-8", "view.js": "text/javascript; charset=utf-8"}
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {"Content-Security-Policy": CONTENT_SECURITY_POLICY, "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
RUN_IDS = ("a", "b")
_SCREEN_TYPES = {"png": "image/png", "jpg": "image/jpeg", "jpeg": "image/jpeg", "webp": "image/webp",
                 "gif": "image/gif"}


@dataclass
class RunRef:
    """A run as the pages name it: its id in URLs (``a``, ``b``) and the run."""

    id: str
    run: Run

    @property
    def label(self) -> str:
        return self.run.name


def templates() -> Environment:
    """The pages' Jinja2 environment: autoescape on for everything, undefined names an error."""
    env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.globals["quote"] = lambda text: quote(str(text), safe="")
    return env


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def create_app(paths: Sequence[str | Path], *, refresh_seconds: float = 1.0, listing: Listing | None = None) -> FastAPI:
    """The viewer of one run folder, or of two (compared), its runs in ``app.state.runs``.
    :class:`~agentgym.view.runs.NotARun` where a path is not a run; files are looked at again at most every
    ``refresh_seconds``."""
    if not 1 <= len(paths) <= 2:
        raise ValueError(f"view one run or two, not {len(paths)}")
    refs = [RunRef(rid, open_run(path, refresh_seconds=refresh_seconds)) for rid, path in zip(RUN_IDS, paths,
                                                                                                   strict=False)]
    listing = listing or Listing()
    tokenizers = Tokenizers()
    env = templates()
    app = FastAPI(title="agentgym view", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.runs = [ref.run for ref in refs]

    @app.middleware("http")
    async def _headers(request: Request, call_next: Any) -> Any:
        response = await call_next(request)
        response.headers.update(HEADERS)
        return response

    def render(template: str, status: int = 200, *, current: RunRef | None = None, **context: Any) -> HTMLResponse:
        total = sum(len(s.index.entries) for s in current.run.sources().values()) if current else 0
        html = env.get_template(template).render(runs=refs, current=current, episodes_now=total,
                                                 status_url=f"/run/{current.id}/status.json" if current else "",
                                                 **context)
        return HTMLResponse(html, status_code=status, headers=HEADERS)  # also on a 500, which skips the middleware

    @app.exception_handler(HTTPException)
    async def _error(request: Request, exc: HTTPException) -> HTMLResponse:
        return render("error.html", exc.status_code, message=str(exc.detail), code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _not_a_page(request: Request, exc: RequestValidationError) -> HTMLResponse:
        return render("error.html", 404, message=f"no page {request.url.path}", code=404)

    @app.exception_handler(Exception)
    async def _failed(request: Request, exc: Exception) -> HTMLResponse:
        return render("error.html", 500, message=f"{request.url.path} failed: {type(exc).__name__}: {exc}", code=500)

    def ref_of(rid: str) -> RunRef:
        for ref in refs:
            if ref.id == rid:
                return ref
        raise HTTPException(404, f"no run {rid!r} here: this viewer shows {', '.join(r.id for r in refs)}")

    def source_of(ref: RunRef, name: str) -> Source:
        source = ref.run.source(name)
        if source is None:
            names = ", ".join(ref.run.sources())
            raise HTTPException(404, f"{ref.label} has no source {name!r} (it has {names or 'none yet'})")
        return source

    def entry_of(source: Source, number: int) -> Entry:
        entries = source.index.entries
        if not 0 <= number < len(entries):
            raise HTTPException(404, f"{source.label} has no episode {number} (it has {len(entries)})")
        return entries[number]

    @app.get("/", response_model=None)
    def home() -> Response:
        return RedirectResponse("/compare" if len(refs) == 2 else "/run/a", status_code=307)

    @app.get("/static/{name}", response_model=None)
    def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, f"no file {name!r}")
        return FileResponse(HERE / "static" / name, media_type=STATIC[name])

    @app.get("/favicon.ico", response_model=None)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/run/{rid}", response_model=None)
    def run_page(rid: str) -> Response:
        ref = ref_of(rid)
        run = ref.run
        sources = run.sources()
        evaluation = run.latest_evaluation()
        entries = evaluation.index.entries if evaluation is not None else []
        by_env = breakdown(entries, lambda e: e.env_id)
        by_level = breakdown(entries, lambda e: e.difficulty or "default")
        bars = [charts.bar_chart("success by environment", [(b.name, b.success_rate) for b in by_env]),
                charts.bar_chart("success by difficulty", [(b.name, b.success_rate) for b in by_level])]
        curves, metrics_problem = pages.training_charts(run) if run.kind == "train" else ([], None)
        infra = [(s, *run.infra(s)) for s in run.evaluations()]
        errors, error_total = pages.error_episodes(run)
        rollouts = sources.get("rollouts")
        return render(
            "run.html", current=ref, run=run, sources=sources, evaluation=evaluation,
            spec=run.spec(evaluation) if evaluation is not None else None,
            summary=run.summary(), headline=pages.headline(entries) if evaluation is not None else None,
            by_env=by_env, by_level=by_level, bars=bars if entries else [], curves=curves,
            metrics_problem=metrics_problem, infra=infra, infra_shown=pages.INFRA_SHOWN, errors=errors,
            error_total=error_total, steps=pages.step_rows(rollouts.index.entries) if rollouts else [])

    @app.get("/run/{rid}/episodes", response_model=None)
    def episodes(rid: str, request: Request) -> Response:
        ref = ref_of(rid)
        name = request.query_params.get("source") or ref.run.default_source
        source = source_of(ref, name)
        query = Query.from_params(request.query_params, source.name)
        page = listing.page(source.index, query)
        envs = listing.envs(source.index)
        return render("episodes.html", current=ref, source=source, sources=ref.run.sources(), query=query, page=page,
                      envs=envs, results=RESULTS, outcomes=OUTCOMES, sorts=SORTS, page_size=PAGE_SIZE)

    @app.get("/run/{rid}/episode/{name}/{number}", response_model=None)
    def episode(rid: str, name: str, number: int, request: Request) -> Response:
        ref = ref_of(rid)
        source = source_of(ref, name)
        entry = entry_of(source, number)
        query = Query.from_params(request.query_params, source.name)
        kept, _ = listing.ordered(source.index, query)
        at = next((i for i, e in enumerate(kept) if e is entry), None)
        if at is None:  # not in that list (opened from a group or the comparison): neighbours in file order
            entries = source.index.entries
            before = entries[number - 1] if number > 0 else None
            after = entries[number + 1] if number + 1 < len(entries) else None
            back = query
        else:
            before = kept[at - 1] if at > 0 else None
            after = kept[at + 1] if at + 1 < len(kept) else None
            back = replace(query, page=at // PAGE_SIZE + 1)
        try:
            record = source.index.record(entry)
        except BadRecord as exc:
            raise HTTPException(422, str(exc)) from None

        def screen_url(screen: str) -> str:
            return f"/run/{ref.id}/screens/{quote(source.name)}/{quote(screen)}"

        shown = pages.episode_shown(record, screen_url)
        tab = "tokens" if request.query_params.get("tab") == "tokens" else "turns"
        colour = request.query_params.get("colour", "behaviour")
        colour = colour if colour in MODES else "behaviour"
        tokens = None
        if tab == "tokens" and record.trajectory.token_ids:
            tokenizer, note = tokenizers.get(ref.run.tokenizer_path(source))
            try:
                start = max(0, int(request.query_params.get("from", "0")))
            except ValueError:
                start = 0
            trainer = record.trainer_logprobs if hasattr(record, "trainer_logprobs") else []
            tokens = token_view(record.trajectory, trainer, tokenizer, note, start=start)
            if colour != "behaviour" and not tokens.trained:
                colour = "behaviour"
        return render("episode.html", current=ref, source=source, entry=entry, record=record, shown=shown,
                      query=query, back=back, before=before, after=after, position=at, listed=len(kept), tab=tab,
                      colour=colour, modes=MODES, tokens=tokens, tokens_shown=TOKENS_SHOWN)

    @app.get("/run/{rid}/group/{step}/{position}", response_model=None)
    def group(rid: str, step: int, position: int, request: Request) -> Response:
        ref = ref_of(rid)
        source = source_of(ref, "rollouts")
        carried = request.query_params.get("carried") in ("1", "true")
        key = (step, position, carried)
        members = listing.groups(source.index).get(key)
        if not members:
            raise HTTPException(404, f"step {step} took no group at task position {position}"
                                     f"{' (carried over)' if carried else ''}")
        shown, roots, tree = pages.group_members(source, members)
        before, after = pages.neighbours(listing, source, key)
        return render("group.html", current=ref, source=source, step=step, position=position, carried=carried,
                      members=shown, roots=roots, tree=tree, before=before, after=after, task_id=members[0].task_id)

    @app.get("/run/{rid}/screens/{name}/{screen}", response_model=None)
    def screen(rid: str, name: str, screen: str) -> Response:
        ref = ref_of(rid)
        source = source_of(ref, name)
        match = re.fullmatch(SCREEN.pattern.removeprefix("screens/"), screen)
        if match is None:
            raise HTTPException(404, "not a stored screen's name")
        folder = source.screens.resolve()
        path = (folder / screen).resolve()
        if path.parent != folder or not path.is_file():
            raise HTTPException(404, f"no screen {screen!r} in {source.label}")
        return FileResponse(path, media_type=_SCREEN_TYPES[screen.rsplit(".", 1)[-1].lower()],
                            headers={"Cache-Control": "max-age=3600"})

    @app.get("/run/{rid}/status.json", response_model=None)
    def status(rid: str) -> Response:
        ref = ref_of(rid)
        sources = ref.run.sources()
        return JSONResponse({
            "run": ref.label, "episodes": sum(len(s.index.entries) for s in sources.values()),
            "sources": {name: {"episodes": len(s.index.entries), "bad_lines": s.index.bad_lines,
                               "read_percent": s.read_percent} for name, s in sources.items()}})

    @app.get("/compare", response_model=None)
    def compare_page() -> Response:
        if len(refs) != 2:
            raise HTTPException(404, "compare needs two runs: agentgym view RUN_A RUN_B")
        result = compare(refs[0].run, refs[1].run, listing)
        return render("compare.html", current=None, a=refs[0], b=refs[1], result=result, shown=200)

    return app

"""The FastAPI application over an inference engine, and running it with uvicorn."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.inference.types import GenerationRequest, GenerationResult, InferenceEngine, SamplingParams
from agentgym.serve.guard import DEFAULT_MAX_BODY_BYTES, RequestGuard
from agentgym.serve.openai_format import (
    ContextLimit,
    chat_choice,
    chat_prompt,
    completion_logprobs,
    envelope,
    prompt_ids,
    response_text,
    template_tools,
    usage_of,
)
from agentgym.serve.schemas import (
    DEFAULT_CHAT_MAX_TOKENS,
    DEFAULT_COMPLETION_MAX_TOKENS,
    APIError,
    ChatCompletionRequest,
    CompletionRequest,
)
from agentgym.serve.streaming import SHUT_DOWN, chat_events, completion_events

if TYPE_CHECKING:
    from fastapi import FastAPI

SHUTDOWN_GRACE_S = 5
"""How long ``agentgym serve`` waits on Ctrl-C for open connections, once it has aborted the generations
in flight."""


def create_app(
    engine: InferenceEngine,
    model_name: str,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    max_context_tokens: int | None = None,
) -> FastAPI:
    """An OpenAI-compatible app serving ``engine`` under the model id ``model_name``.

    A request body over ``max_body_bytes`` is refused (413) before it is read; a prompt that cannot fit
    ``max_context_tokens`` (default: the engine's ``max_model_len``, where it has one) is refused (400,
    ``context_length_exceeded``) before the whole of it is rendered. Prompts are rendered and tokenised
    in a worker thread, so the event loop keeps answering while a large one is. A client that goes away
    cancels its requests' generation (:class:`~agentgym.serve.guard.RequestGuard`).
    """
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse
    from starlette.exceptions import HTTPException

    app = FastAPI(title="agentgym serve")
    app.add_middleware(RequestGuard, max_bytes=max_body_bytes)
    created = int(time.time())
    tokenizer = engine.tokenizer
    if max_context_tokens is None:
        max_context_tokens = getattr(engine, "max_model_len", None)
    context = ContextLimit(tokenizer, max_context_tokens)

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        error = _body_error(exc.errors()[0], exc.body, request.headers.get("content-type", ""))
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException) -> JSONResponse:
        message = {
            404: f"no route {request.method} {request.url.path}; this server serves GET /v1/models, "
            "POST /v1/chat/completions and POST /v1/completions",
            405: f"{request.url.path} does not take {request.method}",
        }.get(exc.status_code, str(exc.detail))
        error = APIError(exc.status_code, message)
        return JSONResponse(error.body(), status_code=exc.status_code, headers=exc.headers)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {"id": model_name, "object": "model", "created": created, "owned_by": "agentgym"}
        return {"object": "list", "data": [card]}

    def check_model(name: str) -> None:
        if name != model_name:
            raise APIError(
                404,
                f"model {name!r} is not served here; this server serves {model_name!r} (see GET /v1/models)",
                param="model",
                code="model_not_found",
            )

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: ChatCompletionRequest) -> Any:
        check_model(body.model)
        if body.top_logprobs:
            raise APIError(
                400,
                "top_logprobs: only the sampled token's logprob is returned; use 0 or leave it out",
                param="top_logprobs",
            )
        tools = template_tools(body.tools) if body.tools and body.tool_choice != "none" else None
        # Rendering and tokenising a long conversation takes a while: off the event loop.
        prompt = await asyncio.to_thread(chat_prompt, tokenizer, body.messages, tools, context)
        max_tokens = body.max_completion_tokens or body.max_tokens or DEFAULT_CHAT_MAX_TOKENS
        requests = [_request(prompt, body.sampling(max_tokens, i)) for i in range(body.n)]
        if body.stream:
            events = chat_events(engine, model_name, body, requests, parse_tools=tools is not None)
            return StreamingResponse(events, media_type="text/event-stream")
        results = await _generate(engine, requests)
        choices = [
            chat_choice(tokenizer, i, r, body, parse_tools=tools is not None) for i, r in enumerate(results)
        ]
        return envelope("chat.completion", model_name, choices, usage_of([len(prompt)], results))

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest) -> Any:
        check_model(body.model)
        if body.logprobs is not None and body.logprobs > 1:
            raise APIError(
                400, "logprobs: only the sampled token's logprob is returned; use 0 or 1", param="logprobs"
            )
        prompts = await asyncio.to_thread(prompt_ids, tokenizer, body.prompt, context)
        max_tokens = body.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        requests = [_request(ids, body.sampling(max_tokens, i)) for ids in prompts for i in range(body.n)]
        prompt_lengths = [len(ids) for ids in prompts]
        if body.stream:
            events = completion_events(engine, model_name, body, requests, prompt_lengths)
            return StreamingResponse(events, media_type="text/event-stream")
        results = await _generate(engine, requests)
        choices = [
            {
                "index": i,
                "text": response_text(tokenizer, r, body.stop_strings),
                "finish_reason": r.finish_reason,
                "logprobs": None
                if body.logprobs is None
                else completion_logprobs(tokenizer, r.token_ids, r.logprobs, body.return_tokens_as_token_ids),
            }
            for i, r in enumerate(results)
        ]
        return envelope("text_completion", model_name, choices, usage_of(prompt_lengths, results))

    return app


def _request(prompt: list[int], sampling: SamplingParams) -> GenerationRequest:
    return GenerationRequest(prompt_ids=prompt, sampling=sampling)


def _body_error(first: dict[str, Any], body: Any, content_type: str) -> APIError:
    """The 400 for a body FastAPI could not read into the request model."""
    if first["type"] == "json_invalid":
        return APIError(400, _not_json(first, body))
    where = ".".join(str(part) for part in first["loc"][1:])
    if where:
        return APIError(400, f"{where}: {first['msg']}", param=where)
    if first["type"] == "missing":
        return APIError(400, "the request body is empty; send a JSON object")
    if "json" not in content_type:
        sent = content_type or "no content type"
        return APIError(400, f"the request body must be a JSON object sent as application/json, not {sent}")
    return APIError(400, "the request body must be a JSON object")


def _not_json(error: dict[str, Any], body: Any) -> str:
    """What is wrong with a body FastAPI could not decode (its error holds the character offset, not the line)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    where = json.JSONDecodeError(error["ctx"]["error"], text, error["loc"][-1])
    return f"request body is not valid JSON: {where.msg} at line {where.lineno} column {where.colno}"


async def _generate(engine: InferenceEngine, requests: list[GenerationRequest]) -> list[GenerationResult]:
    """Run the requests concurrently; an engine that refuses one (``ValueError``) makes a 400."""
    try:
        results = await asyncio.gather(*(engine.generate(request) for request in requests))
    except ValueError as exc:
        raise APIError(400, str(exc)) from None
    if any(r.finish_reason == "abort" for r in results):
        raise APIError(503, SHUT_DOWN)
    return results


def serve(
    model: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    **engine_kwargs: Any,
) -> None:
    """Serve the model folder ``model`` with the torch engine until interrupted (Ctrl-C): the generations
    in flight are then aborted (a stream ends with an error event) and open connections get
    :data:`SHUTDOWN_GRACE_S` to close."""
    if asyncio.run(_serve(Path(model), host, port, max_body_bytes, engine_kwargs)):
        # uvicorn re-raises the signal it stopped on, which cancels asyncio.run's task only if that task still
        # awaits something; when the engine's close had already finished, the run ends normally instead
        raise KeyboardInterrupt


async def _serve(
    model: Path, host: str, port: int, max_body_bytes: int, engine_kwargs: dict[str, Any]
) -> bool:
    """Serve until a signal stops the server; whether one did."""
    import uvicorn

    from agentgym.inference.torch.engine import TorchEngine

    engine = TorchEngine(model, **engine_kwargs)
    try:
        app = create_app(engine, model.name, max_body_bytes=max_body_bytes)
        config = uvicorn.Config(
            app, host=host, port=port, log_level="info", timeout_graceful_shutdown=SHUTDOWN_GRACE_S
        )
        server = uvicorn.Server(config)
        aborting = asyncio.create_task(_abort_on_exit(server, engine))
        try:
            await server.serve()
        finally:
            aborting.cancel()
    finally:
        await engine.close()
    return bool(server.should_exit)


async def _abort_on_exit(server: Any, engine: InferenceEngine) -> None:
    """Once the server is told to exit, close the engine: the generations in flight end (aborted), so open
    streams finish and the graceful shutdown does not wait for them."""
    while not server.should_exit:
        await asyncio.sleep(0.1)
    await engine.close()

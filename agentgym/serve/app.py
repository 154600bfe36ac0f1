"""The FastAPI application over an inference engine, and running it with uvicorn."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentgym.inference.types import GenerationRequest, GenerationResult, InferenceEngine, SamplingParams
from agentgym.serve.openai_format import (
    chat_choice,
    chat_chunks,
    chat_messages,
    completion_chunks,
    completion_logprobs,
    envelope,
    prompt_ids,
    render_prompt,
    response_text,
    sse_events,
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

if TYPE_CHECKING:
    from fastapi import FastAPI

def create_app(engine: InferenceEngine, model_name: str) -> FastAPI:
    """An OpenAI-compatible app serving ``engine`` under the model id ``model_name``."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI(title="agentgym serve")
    created = int(time.time())
    tokenizer = engine.tokenizer

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        if first["type"] == "json_invalid":
            return JSONResponse(APIError(400, _not_json(first, exc.body)).body(), status_code=400)
        where = ".".join(str(part) for part in first["loc"][1:]) or "body"
        return JSONResponse(APIError(400, f"{where}: {first['msg']}", param=where).body(), status_code=400)

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
        prompt_ids = render_prompt(tokenizer, chat_messages(body.messages), tools)
        max_tokens = body.max_completion_tokens or body.max_tokens or DEFAULT_CHAT_MAX_TOKENS
        results = await _generate(engine, [(prompt_ids, body.sampling(max_tokens, i)) for i in range(body.n)])
        choices = [
            chat_choice(tokenizer, i, r, body, parse_tools=tools is not None) for i, r in enumerate(results)
        ]
        response = envelope("chat.completion", model_name, choices, usage_of([len(prompt_ids)], results))
        if not body.stream:
            return response
        return StreamingResponse(
            sse_events(chat_chunks(response), response["usage"] if body.include_usage else None),
            media_type="text/event-stream",
        )

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest) -> Any:
        check_model(body.model)
        if body.logprobs is not None and body.logprobs > 1:
            raise APIError(
                400, "logprobs: only the sampled token's logprob is returned; use 0 or 1", param="logprobs"
            )
        prompts = prompt_ids(tokenizer, body.prompt)
        max_tokens = body.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        jobs = [(ids, body.sampling(max_tokens, i)) for ids in prompts for i in range(body.n)]
        results = await _generate(engine, jobs)
        choices = [
            {
                "index": i,
                "text": response_text(tokenizer, r, body.stop_strings),
                "finish_reason": r.finish_reason,
                "logprobs": None
                if body.logprobs is None
                else completion_logprobs(tokenizer, r, body.return_tokens_as_token_ids),
            }
            for i, r in enumerate(results)
        ]
        prompt_lengths = [len(ids) for ids in prompts]
        response = envelope("text_completion", model_name, choices, usage_of(prompt_lengths, results))
        if not body.stream:
            return response
        return StreamingResponse(
            sse_events(completion_chunks(response), response["usage"] if body.include_usage else None),
            media_type="text/event-stream",
        )

    return app


def _not_json(error: dict[str, Any], body: Any) -> str:
    """What is wrong with a body FastAPI could not decode (its error holds the character offset, not the line)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
    where = json.JSONDecodeError(error["ctx"]["error"], text, error["loc"][-1])
    return f"request body is not valid JSON: {where.msg} at line {where.lineno} column {where.colno}"


async def _generate(
    engine: InferenceEngine, jobs: list[tuple[list[int], SamplingParams]]
) -> list[GenerationResult]:
    """Run the requests concurrently; an engine that refuses one (``ValueError``) makes a 400."""
    try:
        results = await asyncio.gather(
            *(engine.generate(GenerationRequest(prompt_ids=ids, sampling=sampling)) for ids, sampling in jobs)
        )
    except ValueError as exc:
        raise APIError(400, str(exc)) from None
    if any(r.finish_reason == "abort" for r in results):
        raise APIError(503, "the engine was shut down while generating; retry against a running server")
    return results



def serve(model: Path, host: str = "127.0.0.1", port: int = 8000, **engine_kwargs: Any) -> None:
    """Serve the model folder ``model`` with the torch engine until interrupted (Ctrl-C)."""
    asyncio.run(_serve(Path(model), host, port, engine_kwargs))


async def _serve(model: Path, host: str, port: int, engine_kwargs: dict[str, Any]) -> None:
    import uvicorn

    from agentgym.inference.torch_engine import TorchEngine

    engine = TorchEngine(model, **engine_kwargs)
    try:
        config = uvicorn.Config(create_app(engine, model.name), host=host, port=port, log_level="info")
        await uvicorn.Server(config).serve()
    finally:
        await engine.close()

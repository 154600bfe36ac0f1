"""``agentgym serve``: an OpenAI-compatible HTTP server over an inference engine.

Endpoints: ``GET /v1/models``; ``POST /v1/chat/completions`` (tools and tool calls, ``n``, the
sampled tokens' logprobs, SSE streaming); ``POST /v1/completions`` (text or token-id prompts, and
vLLM's ``return_tokens_as_token_ids`` extension so a token-level client reads exact ids).
Conversations are rendered with the model's chat template; tool calls are read back from the text
with the Hermes parser. Streams are sent once the response is generated, in OpenAI's chunk format.

Errors use OpenAI's JSON shape: 400 names the bad field in ``param``; a request for a model other
than the served one is a 404 naming the served model; an engine shut down mid-request is a 503.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import BaseModel, ConfigDict, Field

from agentgym.inference.types import GenerationRequest, GenerationResult, InferenceEngine, SamplingParams
from agentgym.parsers import HermesParser

if TYPE_CHECKING:
    from fastapi import FastAPI

DEFAULT_CHAT_MAX_TOKENS = 512
"""``max_tokens`` of a chat completion that sets none."""
DEFAULT_COMPLETION_MAX_TOKENS = 16
"""``max_tokens`` of a completion that sets none (OpenAI's default)."""
_ROLES = {"system", "developer", "user", "assistant", "tool"}


class APIError(Exception):
    """A request the server refuses, sent back in OpenAI's error shape."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


class _SamplingFields(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str
    temperature: float | None = Field(None, ge=0.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    stop: str | list[str] | None = None
    seed: int | None = None
    n: int = Field(1, ge=1, le=64)
    stream: bool = False
    stream_options: dict[str, Any] | None = None

    def sampling(self, max_tokens: int, index: int) -> SamplingParams:
        """The engine's sampling settings for the ``index``-th of the ``n`` samples (seed + index)."""
        return SamplingParams(
            temperature=1.0 if self.temperature is None else self.temperature,
            top_p=1.0 if self.top_p is None else self.top_p,
            max_tokens=max_tokens,
            stop=tuple(self.stop_strings),
            seed=None if self.seed is None else self.seed + index,
        )

    @property
    def stop_strings(self) -> list[str]:
        return [self.stop] if isinstance(self.stop, str) else list(self.stop or [])

    @property
    def include_usage(self) -> bool:
        return bool((self.stream_options or {}).get("include_usage"))


class ChatCompletionRequest(_SamplingFields):
    """The body of ``POST /v1/chat/completions`` (fields the server does not use are ignored)."""

    messages: list[dict[str, Any]] = Field(min_length=1)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = None
    top_logprobs: int | None = None


class CompletionRequest(_SamplingFields):
    """The body of ``POST /v1/completions``."""

    prompt: Any
    """A string, a list of token ids, or a list of either (checked by :func:`_prompts`)."""
    max_tokens: int | None = Field(None, ge=1)
    logprobs: int | None = Field(None, ge=0)
    return_tokens_as_token_ids: bool = False
    """vLLM's extension: ``logprobs.tokens`` are ``"token_id:<id>"`` strings."""


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
        tools = _tools(body.tools) if body.tools and body.tool_choice != "none" else None
        prompt_ids = _render(tokenizer, _messages(body.messages), tools)
        max_tokens = body.max_completion_tokens or body.max_tokens or DEFAULT_CHAT_MAX_TOKENS
        results = await _generate(engine, [(prompt_ids, body.sampling(max_tokens, i)) for i in range(body.n)])
        choices = [
            _chat_choice(tokenizer, i, r, body, parse_tools=tools is not None) for i, r in enumerate(results)
        ]
        response = _envelope("chat.completion", model_name, choices, _usage([len(prompt_ids)], results))
        if not body.stream:
            return response
        return StreamingResponse(
            _events(_chat_chunks(response), response["usage"] if body.include_usage else None),
            media_type="text/event-stream",
        )

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest) -> Any:
        check_model(body.model)
        if body.logprobs is not None and body.logprobs > 1:
            raise APIError(
                400, "logprobs: only the sampled token's logprob is returned; use 0 or 1", param="logprobs"
            )
        prompts = _prompts(tokenizer, body.prompt)
        max_tokens = body.max_tokens or DEFAULT_COMPLETION_MAX_TOKENS
        jobs = [(ids, body.sampling(max_tokens, i)) for ids in prompts for i in range(body.n)]
        results = await _generate(engine, jobs)
        choices = [
            {
                "index": i,
                "text": _text(tokenizer, r, body.stop_strings),
                "finish_reason": r.finish_reason,
                "logprobs": None
                if body.logprobs is None
                else _completion_logprobs(tokenizer, r, body.return_tokens_as_token_ids),
            }
            for i, r in enumerate(results)
        ]
        prompt_lengths = [len(ids) for ids in prompts]
        response = _envelope("text_completion", model_name, choices, _usage(prompt_lengths, results))
        if not body.stream:
            return response
        return StreamingResponse(
            _events(_completion_chunks(response), response["usage"] if body.include_usage else None),
            media_type="text/event-stream",
        )

    return app


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


def _messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Hugging Face chat templates take them (tool-call arguments as dicts)."""
    converted = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in _ROLES:
            raise APIError(
                400,
                f"messages[{i}].role: must be one of {', '.join(sorted(_ROLES))}, not {role!r}",
                param=f"messages[{i}].role",
            )
        out: dict[str, Any] = {
            "role": "system" if role == "developer" else role,
            "content": _content(message.get("content"), f"messages[{i}].content"),
        }
        if message.get("tool_calls"):
            out["tool_calls"] = [
                _template_call(call, f"messages[{i}].tool_calls[{j}]")
                for j, call in enumerate(message["tool_calls"])
            ]
        for key in ("tool_call_id", "name"):
            if message.get(key) is not None:
                out[key] = message[key]
        converted.append(out)
    return converted


def _content(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" for p in content):
        return "".join(str(p.get("text", "")) for p in content)
    raise APIError(
        400, f"{where}: must be a string or a list of text parts (this server reads text only)", param=where
    )


def _template_call(call: Any, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise APIError(
            400,
            f'{where}: must look like {{"type": "function", "function": {{"name": ..., '
            f'"arguments": "<JSON>"}}}}',
            param=where,
        )
    arguments = function.get("arguments") or {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            arguments = None
    if not isinstance(arguments, dict):
        raise APIError(
            400,
            f"{where}.function.arguments: must be a JSON object (as a string)",
            param=f"{where}.function.arguments",
        )
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": function["name"], "arguments": arguments},
    }


def _tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, spec in enumerate(tools):
        function = spec.get("function")
        if (
            spec.get("type") != "function"
            or not isinstance(function, dict)
            or not isinstance(function.get("name"), str)
        ):
            raise APIError(
                400,
                f'tools[{i}]: must look like {{"type": "function", "function": {{"name": ..., '
                f'"parameters": {{...}}}}}}',
                param=f"tools[{i}]",
            )
    return tools


def _render(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    from jinja2 import TemplateError

    try:
        encoded = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_dict=True
        )
    except (TemplateError, ValueError, TypeError) as exc:
        raise APIError(400, f"messages: the chat template refused them: {exc}", param="messages") from None
    return list(encoded["input_ids"])


def _prompts(tokenizer: Any, prompt: Any) -> list[list[int]]:
    """A completion's prompts as token ids: a string, a list of ids, or a list of either."""
    single = isinstance(prompt, str) or (
        isinstance(prompt, list) and prompt and all(_is_id(t) for t in prompt)
    )
    items = [prompt] if single else prompt
    vocab = len(tokenizer)
    problem = APIError(
        400,
        f"prompt: must be a non-empty string, a non-empty list of token ids in [0, {vocab}), or a list of those",
        param="prompt",
    )
    if not isinstance(items, list) or not items:
        raise problem
    prompts = []
    for item in items:
        ids = tokenizer.encode(item) if isinstance(item, str) else item
        if not isinstance(ids, list) or not ids or not all(_is_id(t) and t < vocab for t in ids):
            raise problem
        prompts.append(ids)
    return prompts


def _is_id(token: Any) -> bool:
    return isinstance(token, int) and not isinstance(token, bool) and token >= 0


def _text(tokenizer: Any, result: GenerationResult, stop: Iterable[str]) -> str:
    """The response text: without a final end-of-turn token, cut before the first stop string."""
    ids = result.token_ids
    if result.finish_reason == "stop" and ids and ids[-1] in tokenizer.all_special_ids:
        ids = ids[:-1]
    text = tokenizer.decode(ids, skip_special_tokens=False)
    cuts = [text.find(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


def _chat_choice(
    tokenizer: Any, index: int, result: GenerationResult, body: ChatCompletionRequest, *, parse_tools: bool
) -> dict[str, Any]:
    text = _text(tokenizer, result, body.stop_strings)
    parsed = HermesParser().parse(text) if parse_tools else None
    calls = parsed.calls if parsed is not None and not parsed.errors else []
    message: dict[str, Any] = {"role": "assistant", "content": (parsed.content or None) if calls else text}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in calls
        ]
    logprobs = None
    if body.logprobs:
        logprobs = {
            "content": [
                {"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": []}
                for piece, lp in zip(_pieces(tokenizer, result.token_ids), result.logprobs)
            ]
        }
    finish = "tool_calls" if calls else result.finish_reason
    return {"index": index, "message": message, "finish_reason": finish, "logprobs": logprobs}


def _completion_logprobs(tokenizer: Any, result: GenerationResult, as_ids: bool) -> dict[str, Any]:
    pieces = _pieces(tokenizer, result.token_ids)
    tokens = [f"token_id:{t}" for t in result.token_ids] if as_ids else pieces
    offsets, position = [], 0
    for piece in pieces:
        offsets.append(position)
        position += len(piece)
    return {
        "tokens": tokens,
        "token_logprobs": result.logprobs,
        "text_offset": offsets,
        "top_logprobs": [{token: lp} for token, lp in zip(tokens, result.logprobs)],
    }


def _pieces(tokenizer: Any, token_ids: list[int]) -> list[str]:
    return [tokenizer.decode([t], skip_special_tokens=False) for t in token_ids]


def _usage(prompt_lengths: list[int], results: list[GenerationResult]) -> dict[str, int]:
    """Token counts; each prompt counts once however many samples were drawn from it."""
    prompt = sum(prompt_lengths)
    completion = sum(len(r.token_ids) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _envelope(kind: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def _chat_chunks(response: dict[str, Any]) -> Iterable[dict[str, Any]]:
    """A chat completion as the chunks a streaming server sends: role, content, tool calls, finish."""
    head = {k: response[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    for choice in response["choices"]:
        index, message = choice["index"], choice["message"]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        if message["content"]:
            deltas.append({"content": message["content"]})
        deltas += [
            {"tool_calls": [{"index": k, **call}]} for k, call in enumerate(message.get("tool_calls", []))
        ]
        for delta in deltas:
            yield head | {
                "choices": [{"index": index, "delta": delta, "finish_reason": None, "logprobs": None}]
            }
        yield head | {
            "choices": [
                {
                    "index": index,
                    "delta": {},
                    "finish_reason": choice["finish_reason"],
                    "logprobs": choice["logprobs"],
                }
            ]
        }


def _completion_chunks(response: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for choice in response["choices"]:
        yield {k: v for k, v in response.items() if k != "usage"} | {"choices": [choice]}


async def _events(chunks: Iterable[dict[str, Any]], usage: dict[str, int] | None) -> AsyncIterator[str]:
    """Server-sent events: one ``data:`` line per chunk, the usage chunk if asked for, then ``[DONE]``."""
    last = None
    for last in chunks:
        yield f"data: {json.dumps(last)}\n\n"
    if usage and last is not None:
        yield f"data: {json.dumps(last | {'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


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
def serve_command(model: Path, host: str, port: int, max_batch_size: int, seed: int) -> None:
    """Serve a model over an OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions)."""
    if not (model / "config.json").is_file():
        raise click.UsageError(f"--model {model}: no model there (expected a folder with config.json)")
    missing = [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.UsageError(f"agentgym serve needs {' and '.join(missing)}: pip install 'agentgym[serve]'")
    serve(model, host, port, max_batch_size=max_batch_size, seed=seed)

"""Between OpenAI's wire format and the engine: messages for the chat template, prompts, and the
response, logprob and stream-chunk bodies built from generation results."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from agentgym.inference.types import GenerationResult
from agentgym.parsers import HermesParser
from agentgym.serve.schemas import APIError, ChatCompletionRequest

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""The message roles a chat request may use."""

if TYPE_CHECKING:
    pass

def chat_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI chat messages as Hugging Face chat templates take them (tool-call arguments as dicts)."""
    converted = []
    for i, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            raise APIError(
                400,
                f"messages[{i}].role: must be one of {', '.join(sorted(ROLES))}, not {role!r}",
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


def template_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


def render_prompt(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[int]:
    from jinja2 import TemplateError

    try:
        encoded = tokenizer.apply_chat_template(
            messages, tools=tools, add_generation_prompt=True, return_dict=True
        )
    except (TemplateError, ValueError, TypeError) as exc:
        raise APIError(400, f"messages: the chat template refused them: {exc}", param="messages") from None
    return list(encoded["input_ids"])


def prompt_ids(tokenizer: Any, prompt: Any) -> list[list[int]]:
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


def response_text(tokenizer: Any, result: GenerationResult, stop: Iterable[str]) -> str:
    """The response text: without a final end-of-turn token, cut before the first stop string."""
    ids = result.token_ids
    if result.finish_reason == "stop" and ids and ids[-1] in tokenizer.all_special_ids:
        ids = ids[:-1]
    text = tokenizer.decode(ids, skip_special_tokens=False)
    cuts = [text.find(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


def chat_choice(
    tokenizer: Any, index: int, result: GenerationResult, body: ChatCompletionRequest, *, parse_tools: bool
) -> dict[str, Any]:
    text = response_text(tokenizer, result, body.stop_strings)
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


def completion_logprobs(tokenizer: Any, result: GenerationResult, as_ids: bool) -> dict[str, Any]:
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


def usage_of(prompt_lengths: list[int], results: list[GenerationResult]) -> dict[str, int]:
    """Token counts; each prompt counts once however many samples were drawn from it."""
    prompt = sum(prompt_lengths)
    completion = sum(len(r.token_ids) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def envelope(kind: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    prefix = "chatcmpl" if kind == "chat.completion" else "cmpl"
    return {
        "id": f"{prefix}-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": usage,
    }


def chat_chunks(response: dict[str, Any]) -> Iterable[dict[str, Any]]:
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


def completion_chunks(response: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for choice in response["choices"]:
        yield {k: v for k, v in response.items() if k != "usage"} | {"choices": [choice]}


async def sse_events(chunks: Iterable[dict[str, Any]], usage: dict[str, int] | None) -> AsyncIterator[str]:
    """Server-sent events: one ``data:`` line per chunk, the usage chunk if asked for, then ``[DONE]``."""
    last = None
    for last in chunks:
        yield f"data: {json.dumps(last)}\n\n"
    if usage and last is not None:
        yield f"data: {json.dumps(last | {'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"

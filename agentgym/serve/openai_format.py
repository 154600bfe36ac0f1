"""Between OpenAI's wire format and the engine: messages for the chat template, prompts (and the context
limit they are checked against), the response and logprob bodies built from generation results, and a
streamed response's text as it grows (:class:`TextStream`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable
from typing import Any

from agentgym.inference.types import GenerationResult
from agentgym.parsers import HermesParser
from agentgym.serve.schemas import APIError, ChatCompletionRequest

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
"""The message roles a chat request may use."""


class ContextLimit:
    """The model's context, checked before a prompt is rendered (a bound from its characters) and after it
    is tokenised (its exact length). ``max_tokens=None`` checks nothing (the engine still refuses a prompt
    that leaves no room)."""

    def __init__(self, tokenizer: Any, max_tokens: int | None) -> None:
        self.max_tokens = max_tokens
        # No token spans more characters than its vocabulary entry has (byte-level entries have one per
        # byte; others at least one per character), so a text needs at least chars / widest tokens.
        vocab = getattr(tokenizer, "get_vocab", None) if max_tokens else None
        self.widest_token: int | None = max(map(len, vocab()), default=1) if vocab is not None else None

    def check_chars(self, chars: int, items: int, param: str) -> None:
        """Refuse a prompt of ``chars`` characters in ``items`` parts (messages, prompts) that cannot fit."""
        if self.max_tokens is None or self.widest_token is None:
            return
        if chars > self.max_tokens * self.widest_token or items > self.max_tokens:
            raise APIError(
                400,
                f"{param}: {chars} characters in {items} part(s) cannot fit this model's context of "
                f"{self.max_tokens} tokens; shorten the prompt",
                param=param,
                code="context_length_exceeded",
            )

    def check_tokens(self, tokens: int, param: str) -> None:
        """Refuse a prompt of ``tokens`` tokens that leaves no room to generate."""
        if self.max_tokens is not None and tokens >= self.max_tokens:
            raise APIError(
                400,
                f"{param}: the prompt is {tokens} tokens, which leaves no room to generate in this model's "
                f"context of {self.max_tokens} tokens; shorten the prompt",
                param=param,
                code="context_length_exceeded",
            )


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


def chat_prompt(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, context: ContextLimit
) -> list[int]:
    """A conversation's token ids, refused before it is rendered where it plainly cannot fit ``context``."""
    converted = chat_messages(messages)
    context.check_chars(sum(len(m["content"]) for m in converted), len(converted), "messages")
    ids = render_prompt(tokenizer, converted, tools)
    context.check_tokens(len(ids), "messages")
    return ids


def prompt_ids(tokenizer: Any, prompt: Any, context: ContextLimit | None = None) -> list[list[int]]:
    """A completion's prompts as token ids: a string, a list of ids, or a list of either; with ``context``,
    a string that plainly cannot fit it is refused before it is tokenised."""
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
        if isinstance(item, str) and context is not None:
            context.check_chars(len(item), 1, "prompt")
        ids = tokenizer.encode(item) if isinstance(item, str) else item
        if not isinstance(ids, list) or not ids or not all(_is_id(t) and t < vocab for t in ids):
            raise problem
        if context is not None:
            context.check_tokens(len(ids), "prompt")
        prompts.append(ids)
    return prompts


def _is_id(token: Any) -> bool:
    return isinstance(token, int) and not isinstance(token, bool) and token >= 0


def response_text(tokenizer: Any, result: GenerationResult, stop: Iterable[str]) -> str:
    """The response text: without a final end-of-turn token, cut before the first stop string."""
    ids = result.token_ids
    if result.finish_reason == "stop" and ids and ids[-1] in tokenizer.all_special_ids:
        ids = ids[:-1]
    text: str = tokenizer.decode(ids, skip_special_tokens=False)
    cuts = [text.find(s) for s in stop if s and s in text]
    return text[: min(cuts)] if cuts else text


def chat_choice(
    tokenizer: Any, index: int, result: GenerationResult, body: ChatCompletionRequest, *, parse_tools: bool
) -> dict[str, Any]:
    text = response_text(tokenizer, result, body.stop_strings)
    parsed = HermesParser().parse(text) if parse_tools else None
    calls = parsed.calls if parsed is not None and not parsed.errors else []
    content = (parsed.content or None) if parsed is not None and calls else text
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)},
            }
            for c in calls
        ]
    logprobs = chat_logprobs(tokenizer, result.token_ids, result.logprobs) if body.logprobs else None
    finish = "tool_calls" if calls else result.finish_reason
    return {"index": index, "message": message, "finish_reason": finish, "logprobs": logprobs}


def chat_logprobs(tokenizer: Any, token_ids: list[int], logprobs: list[float]) -> dict[str, Any]:
    """A chat choice's ``logprobs``: each sampled token's text and logprob (no alternatives)."""
    return {
        "content": [
            {"token": piece, "logprob": lp, "bytes": list(piece.encode()), "top_logprobs": []}
            for piece, lp in zip(_pieces(tokenizer, token_ids), logprobs)
        ]
    }


def completion_logprobs(
    tokenizer: Any, token_ids: list[int], logprobs: list[float], as_ids: bool, start: int = 0
) -> dict[str, Any]:
    """A completion choice's ``logprobs``; ``text_offset`` counts from ``start`` (where a streamed chunk's
    tokens begin in the text)."""
    pieces = _pieces(tokenizer, token_ids)
    tokens = [f"token_id:{t}" for t in token_ids] if as_ids else pieces
    offsets, position = [], start
    for piece in pieces:
        offsets.append(position)
        position += len(piece)
    return {
        "tokens": tokens,
        "token_logprobs": logprobs,
        "text_offset": offsets,
        "top_logprobs": [{token: lp} for token, lp in zip(tokens, logprobs)],
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


class TextStream:
    """One choice's response text while its tokens arrive, in pieces that never have to be taken back.

    Tokens are decoded incrementally over a short window (a character whose bytes span several tokens
    waits for its last one, so none is split); a trailing special token waits for the next token (the
    end-of-turn token is not part of the text); text that is, or could be the start of, one of ``holds``
    (the stop strings, and ``<tool_call>`` when tool calls are parsed) is held back, and nothing is sent
    after the first one. ``hold_space`` also holds back trailing whitespace (a reply whose tool calls are
    parsed has its content stripped). :meth:`rest` gives what the final text adds to the pieces sent.
    """

    def __init__(self, tokenizer: Any, holds: Iterable[str], *, hold_space: bool = False) -> None:
        self._tokenizer = tokenizer
        self._special = frozenset(tokenizer.all_special_ids)
        self._holds = [h for h in holds if h]
        self._hold_space = hold_space
        self._ids: list[int] = []
        self._window = 0  # the first id of the decode window
        self._read = 0  # the ids before this one are decoded
        self._pending = ""  # decoded and not sent
        self._sent: list[str] = []
        self._held = False  # a hold string was found: nothing more is sent

    def push(self, token_ids: list[int]) -> str:
        """Take newly sampled tokens; return the text that may be sent now (possibly empty)."""
        self._ids.extend(token_ids)
        if self._held:
            return ""
        end = len(self._ids) - (1 if self._ids and self._ids[-1] in self._special else 0)
        if end > self._read:
            decode = self._tokenizer.decode
            before = decode(self._ids[self._window : self._read], skip_special_tokens=False)
            text = decode(self._ids[self._window : end], skip_special_tokens=False)
            if len(text) > len(before) and not text.endswith("\ufffd") and text.startswith(before):
                self._pending += text[len(before) :]
                self._window, self._read = self._read, end
        return self._release()

    def rest(self, final: str) -> str:
        """What ``final`` (the whole response text, as a reply that is not streamed gives it) adds to the
        pieces sent; empty where they are not its beginning."""
        sent = "".join(self._sent)
        return final[len(sent) :] if final.startswith(sent) else ""

    def _release(self) -> str:
        text = self._pending
        found = [text.find(h) for h in self._holds if h in text]
        if found:
            self._held = True
            ready = text[: min(found)]
        else:
            ready = text[: len(text) - self._partial_hold(text)]
        if self._hold_space:
            ready = ready.rstrip()
        self._pending = text[len(ready) :]
        if ready:
            self._sent.append(ready)
        return ready

    def _partial_hold(self, text: str) -> int:
        """The length of the longest end of ``text`` that begins one of the hold strings."""
        longest = 0
        for hold in self._holds:
            for size in range(min(len(hold) - 1, len(text)), longest, -1):
                if text.endswith(hold[:size]):
                    longest = size
                    break
        return longest


def sse(data: dict[str, Any] | str) -> str:
    """One server-sent event (``data: [DONE]`` for the string)."""
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n"

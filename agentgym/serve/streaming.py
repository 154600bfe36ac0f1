"""Streamed responses: every choice's tokens as the engine samples them, sent as OpenAI's chunks.

Each choice is one engine request, streamed through :func:`agentgym.inference.stream_generation` (one
chunk at the end from an engine that cannot stream); their chunks are sent as they come, choices
interleaved. Text goes out through :class:`~agentgym.serve.openai_format.TextStream`, so the pieces of a
choice concatenate to the text of the same reply unstreamed; a chat reply's tool calls are parsed once
it ends. The logprobs of the tokens behind a piece ride on it (the rest on the choice's last chunk).
A failure after the response has started is sent as an ``{"error": ...}`` event before ``[DONE]``.
Leaving the stream (the client went away: the server cancels the task sending it) cancels the
requests still generating, so the engine drops them at its next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any

from agentgym.inference.types import (
    GenerationChunk,
    GenerationRequest,
    GenerationResult,
    InferenceEngine,
    stream_generation,
)
from agentgym.serve.openai_format import (
    TextStream,
    chat_choice,
    chat_logprobs,
    completion_logprobs,
    response_text,
    sse,
)
from agentgym.serve.schemas import APIError, ChatCompletionRequest, CompletionRequest

logger = logging.getLogger(__name__)

SHUT_DOWN = "the engine was shut down while generating; retry against a running server"
"""The message of a 503: the engine closed under a request (the server is stopping)."""
TOOL_CALL_START = "<tool_call>"
"""Where a Hermes tool call begins: a chat reply whose calls are parsed streams no text from here on."""


@dataclass
class _Choice:
    """What one streamed choice has received so far."""

    text: TextStream
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    unsent: int = 0
    """How many of the last tokens have not had their logprobs sent yet."""
    offset: int = 0
    """A completion's ``text_offset`` of its next token whose logprobs are sent (the sent tokens' lengths)."""

    def take(self, chunk: GenerationChunk) -> None:
        self.token_ids += chunk.token_ids
        self.logprobs += chunk.logprobs
        self.versions += chunk.versions
        self.unsent += len(chunk.token_ids)

    def unsent_tokens(self) -> tuple[list[int], list[float]]:
        """The tokens whose logprobs go with the next chunk sent (and count them as sent)."""
        start, self.unsent = len(self.token_ids) - self.unsent, 0
        return self.token_ids[start:], self.logprobs[start:]

    def result(self, chunk: GenerationChunk) -> GenerationResult:
        assert chunk.finish_reason is not None
        return GenerationResult(
            request_id=chunk.request_id,
            token_ids=self.token_ids,
            logprobs=self.logprobs,
            versions=self.versions,
            finish_reason=chunk.finish_reason,
            prompt_tokens=chunk.prompt_tokens,
        )


async def chat_events(
    engine: InferenceEngine,
    model_name: str,
    body: ChatCompletionRequest,
    requests: list[GenerationRequest],
    *,
    parse_tools: bool,
) -> AsyncGenerator[str, None]:
    """The server-sent events of a streamed chat completion, one choice per request."""
    tokenizer = engine.tokenizer
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model_name,
    }
    holds = body.stop_strings + ([TOOL_CALL_START] if parse_tools else [])
    choices = [_Choice(TextStream(tokenizer, holds, hold_space=parse_tools)) for _ in requests]

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> str:
        logprobs = chat_logprobs(tokenizer, *choices[index].unsent_tokens()) if body.logprobs else None
        entry = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": logprobs}
        return sse(head | {"choices": [entry]})

    for index in range(len(requests)):
        yield sse(
            head
            | {
                "choices": [
                    {
                        "index": index,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                        "logprobs": None,
                    }
                ]
            }
        )
    failed = False
    async with contextlib.aclosing(_guarded(_merged(engine, requests))) as pieces:
        async for index, piece in pieces:
            if isinstance(piece, APIError):
                failed = True
                yield sse(piece.body())
                continue
            choice = choices[index]
            choice.take(piece)
            text = choice.text.push(piece.token_ids)
            if piece.finish_reason is None:
                if text:
                    yield chunk(index, {"content": text})
                continue
            final = chat_choice(tokenizer, index, choice.result(piece), body, parse_tools=parse_tools)
            message = final["message"]
            rest = text + choice.text.rest(message["content"] or "")
            calls = message.get("tool_calls", [])
            if rest:
                yield chunk(index, {"content": rest})
            for k, call in enumerate(calls):
                yield chunk(index, {"tool_calls": [{"index": k, **call}]})
            yield chunk(index, {}, final["finish_reason"])
    if body.include_usage and not failed:
        yield sse(head | {"choices": [], "usage": _usage(requests, choices)})
    yield sse("[DONE]")


async def completion_events(
    engine: InferenceEngine,
    model_name: str,
    body: CompletionRequest,
    requests: list[GenerationRequest],
    prompt_lengths: list[int],
) -> AsyncGenerator[str, None]:
    """The server-sent events of a streamed completion, one choice per request."""
    tokenizer = engine.tokenizer
    head = {
        "id": f"cmpl-{uuid.uuid4().hex}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": model_name,
    }
    choices = [_Choice(TextStream(tokenizer, body.stop_strings)) for _ in requests]

    def chunk(index: int, text: str, finish: str | None = None) -> str:
        choice = choices[index]
        logprobs = None
        if body.logprobs is not None:
            ids, values = choice.unsent_tokens()
            as_ids = body.return_tokens_as_token_ids
            logprobs = completion_logprobs(tokenizer, ids, values, as_ids, choice.offset)
            choice.offset += sum(len(tokenizer.decode([t], skip_special_tokens=False)) for t in ids)
        entry = {"index": index, "text": text, "finish_reason": finish, "logprobs": logprobs}
        return sse(head | {"choices": [entry]})

    failed = False
    async with contextlib.aclosing(_guarded(_merged(engine, requests))) as pieces:
        async for index, piece in pieces:
            if isinstance(piece, APIError):
                failed = True
                yield sse(piece.body())
                continue
            choice = choices[index]
            choice.take(piece)
            text = choice.text.push(piece.token_ids)
            if piece.finish_reason is None:
                if text:
                    yield chunk(index, text)
                continue
            final = response_text(tokenizer, choice.result(piece), body.stop_strings)
            yield chunk(index, text + choice.text.rest(final), piece.finish_reason)
    if body.include_usage and not failed:
        yield sse(head | {"choices": [], "usage": _usage(requests, choices, prompt_lengths)})
    yield sse("[DONE]")


def _usage(
    requests: list[GenerationRequest], choices: list[_Choice], prompt_lengths: list[int] | None = None
) -> dict[str, int]:
    prompt = sum(prompt_lengths) if prompt_lengths is not None else len(requests[0].prompt_ids)
    completion = sum(len(c.token_ids) for c in choices)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


async def _merged(
    engine: InferenceEngine, requests: list[GenerationRequest]
) -> AsyncGenerator[tuple[int, GenerationChunk], None]:
    """The chunks of every request as they come, with the request's index, until each has finished;
    leaving early cancels the requests still generating."""
    # A slow reader holds the pumps back (each request's tokens then wait in the engine's own queue).
    queue: asyncio.Queue[tuple[int, GenerationChunk | BaseException]] = asyncio.Queue(
        maxsize=16 * len(requests)
    )

    async def pump(index: int, request: GenerationRequest) -> None:
        try:
            async with contextlib.aclosing(stream_generation(engine, request)) as chunks:
                async for chunk in chunks:
                    await queue.put((index, chunk))
        except Exception as error:  # noqa: BLE001 - handed to the reader, which sends it as an error event
            await queue.put((index, error))

    tasks = [asyncio.create_task(pump(i, request)) for i, request in enumerate(requests)]
    try:
        running = len(tasks)
        while running:
            index, item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            running -= item.finish_reason is not None
            yield index, item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _guarded(
    chunks: AsyncGenerator[tuple[int, GenerationChunk], None],
) -> AsyncGenerator[tuple[int, GenerationChunk | APIError], None]:
    """The chunks, with the first failure (or an engine shut down mid-way) turned into an ``APIError`` to
    send, after which nothing more comes."""
    async with contextlib.aclosing(chunks):
        try:
            async for index, chunk in chunks:
                if chunk.finish_reason == "abort":
                    yield index, APIError(503, SHUT_DOWN)
                    return
                yield index, chunk
        except ValueError as error:  # the engine refused the request
            yield -1, APIError(400, str(error))
        except Exception as error:  # the response has started: report it in the stream
            logger.exception("a streamed generation failed")
            yield -1, APIError(500, f"the engine failed while generating: {error}")

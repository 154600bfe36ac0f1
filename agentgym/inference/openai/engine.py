"""The ``openai`` engine: any OpenAI-compatible endpoint, for evaluating served or hosted models.

:meth:`OpenAIEngine.chat` sends whole conversations to ``/v1/chat/completions`` with tools. Given a
local tokenizer, :meth:`OpenAIEngine.generate` also continues token-id prompts through
``/v1/completions``, reading exact ids from vLLM's ``return_tokens_as_token_ids`` extension (served
by vLLM and by ``agentgym serve``). The logprobs are whatever the server reports: ``agentgym serve``
reports the sampling distribution's (:mod:`agentgym.inference.sampling`); vLLM reports raw model
logprobs unless started with ``--logprobs-mode processed_logprobs``. The server owns the weights, so
:attr:`version` stays 0 and :meth:`update_weights` is refused.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI, Omit, omit

from agentgym.inference._clock import RequestClock
from agentgym.inference.types import (
    ChatResult,
    EngineStats,
    GenerationRequest,
    GenerationResult,
    SamplingParams,
)
from agentgym.messages import ToolCall

_TOKEN_ID = "token_id:"


class OpenAIEngine:
    """A client of one model at an OpenAI-compatible ``base_url`` (e.g. ``http://127.0.0.1:8000/v1``)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        tokenizer: str | Path | Any | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self._client = AsyncOpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
            timeout=timeout,
            max_retries=max_retries,
        )
        if isinstance(tokenizer, (str, Path)):
            from transformers import AutoTokenizer

            tokenizer = AutoTokenizer.from_pretrained(tokenizer)
        self._tokenizer = tokenizer
        self._clock = RequestClock()

    @property
    def version(self) -> int:
        """Always 0: the server owns the weights."""
        return 0

    @property
    def tokenizer(self) -> Any:
        """The local tokenizer given as ``tokenizer=`` (None without one)."""
        return self._tokenizer

    async def chat(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], sampling: SamplingParams
    ) -> ChatResult:
        """One assistant reply; a tool call whose arguments are not a JSON object is kept, as the model
        wrote it, in a ``<tool_call>`` block at the end of ``content`` for the environment to refuse."""
        with self._clock.busy():
            response = await self._client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                tools=tools or omit,  # type: ignore[arg-type]
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                max_completion_tokens=sampling.max_tokens,
                stop=list(sampling.stop) or omit,
                seed=_given(sampling.seed),
            )
        choice = response.choices[0]
        content, calls = choice.message.content or "", []
        for call in choice.message.tool_calls or []:
            function = getattr(call, "function", None)
            if function is None:  # a custom (non-function) tool call
                continue
            arguments = _arguments(function.arguments)
            if arguments is None:
                name = json.dumps(function.name)
                raw = f'<tool_call>\n{{"name": {name}, "arguments": {function.arguments}}}\n</tool_call>'
                content = f"{content}\n{raw}" if content else raw
            else:
                calls.append(ToolCall(id=call.id, name=function.name, arguments=arguments))
        usage = response.usage
        result = ChatResult(
            content=content,
            tool_calls=calls,
            finish_reason=choice.finish_reason,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
        )
        self._count(result.prompt_tokens, result.completion_tokens)
        return result

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Continue ``request.prompt_ids`` through ``/v1/completions``; needs ``tokenizer=`` and a server
        that honours ``return_tokens_as_token_ids`` (vLLM, ``agentgym serve``)."""
        if self._tokenizer is None:
            raise ValueError(
                "OpenAIEngine.generate needs token ids: build the engine with tokenizer=<the served "
                "model's local tokenizer path>"
            )
        sampling = request.sampling
        with self._clock.busy():
            response = await self._client.completions.create(
                model=self.model,
                prompt=request.prompt_ids,
                max_tokens=sampling.max_tokens,
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                stop=list(sampling.stop) or omit,
                seed=_given(sampling.seed),
                logprobs=1,
                extra_body={"return_tokens_as_token_ids": True},
            )
        choice = response.choices[0]
        logprobs = choice.logprobs
        tokens = (logprobs.tokens if logprobs else None) or []
        if not all(t.startswith(_TOKEN_ID) for t in tokens) or logprobs is None:
            raise RuntimeError(
                f"the server at {self._client.base_url} did not return token ids; it must support "
                "vLLM's return_tokens_as_token_ids (serve with vLLM or `agentgym serve`)"
            )
        token_ids = [int(t[len(_TOKEN_ID) :]) for t in tokens]
        prompt_tokens = response.usage.prompt_tokens if response.usage else len(request.prompt_ids)
        self._count(prompt_tokens, len(token_ids))
        return GenerationResult(
            request_id=request.request_id,
            token_ids=token_ids,
            logprobs=[float(lp) for lp in logprobs.token_logprobs or []],
            versions=[0] * len(token_ids),
            finish_reason="length" if choice.finish_reason == "length" else "stop",
            prompt_tokens=prompt_tokens,
        )

    async def update_weights(
        self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None
    ) -> int:
        """Refused: the server owns its weights."""
        raise NotImplementedError(
            "the openai engine cannot load weights into a server it does not own; restart the "
            "server on the new checkpoint, or train with the torch or vllm engine"
        )

    def stats(self) -> EngineStats:
        """Requests, tokens (as the server counts them) and the time at least one request was waiting."""
        return self._clock.snapshot()

    def reset_stats(self) -> None:
        """Start counting afresh."""
        self._clock.reset()

    async def close(self) -> None:
        """Close the HTTP connections; safe to call twice."""
        await self._client.close()


    def _count(self, prompt_tokens: int, generated_tokens: int) -> None:
        self._clock.counts.requests += 1
        self._clock.counts.prompt_tokens += prompt_tokens
        self._clock.counts.generated_tokens += generated_tokens


def _given(value: int | None) -> int | Omit:
    return omit if value is None else value


def _arguments(raw: str) -> dict[str, Any] | None:
    """Tool-call arguments decoded from their JSON text (empty means none); None if not a JSON object."""
    if not raw.strip():
        return {}
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return decoded if isinstance(decoded, dict) else None

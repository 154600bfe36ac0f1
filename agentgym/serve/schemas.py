"""The request bodies the server accepts and the error it answers with, in OpenAI's shapes."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.inference.types import SamplingParams

DEFAULT_CHAT_MAX_TOKENS = 512
"""``max_tokens`` of a chat completion that sets none."""
DEFAULT_COMPLETION_MAX_TOKENS = 16
"""``max_tokens`` of a completion that sets none (OpenAI's default)."""


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

"""A policy backed by a chat endpoint (any OpenAI-compatible server): for evaluating served models.

The endpoint answers with structured tool calls; they are written back in the environment's own
call format, so the environment reads them like any agent's text. The history sent back keeps the
calls structured, with the ids the environment gave their results.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from agentgym.core import Env
from agentgym.inference.types import ChatEngine, SamplingParams
from agentgym.messages import Message
from agentgym.trajectory import Trajectory


class ChatPolicy:
    """Asks ``engine`` for each turn with the whole conversation and the environment's tools."""

    def __init__(self, engine: ChatEngine, sampling: SamplingParams | None = None, *, name: str | None = None) -> None:
        self.engine = engine
        self.sampling = sampling or SamplingParams()
        self.name = name or engine.name

    def start(self, env: Env, rng: np.random.Generator) -> ChatSession:
        return ChatSession(self, env, rng)


class ChatSession:
    """The OpenAI-format history of one episode."""

    def __init__(self, policy: ChatPolicy, env: Env, rng: np.random.Generator) -> None:
        self.policy, self.env, self.rng = policy, env, rng
        self.messages: list[dict[str, Any]] = []
        self._tools = [t.to_openai() for t in env.tools]
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    async def act(self, observation: list[Message]) -> str:
        incoming = [m.to_openai() for m in observation]
        self._link_tool_results(incoming)
        self.messages.extend(incoming)
        sampling = self.policy.sampling.model_copy(update={"seed": int(self.rng.integers(2**31))})
        reply = await self.policy.engine.chat(self.messages, self._tools, sampling)
        self.usage["prompt_tokens"] += reply.prompt_tokens
        self.usage["completion_tokens"] += reply.completion_tokens
        assistant: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.tool_calls:
            assistant["tool_calls"] = [
                Message(role="assistant", content="", tool_calls=[c]).to_openai()["tool_calls"][0] for c in reply.tool_calls
            ]
        self.messages.append(assistant)
        return self.env.parser.format(reply.tool_calls, reply.content) if reply.tool_calls else reply.content

    def record(self, trajectory: Trajectory) -> None:
        trajectory.info["usage"] = dict(self.usage)

    def _link_tool_results(self, incoming: list[dict[str, Any]]) -> None:
        """Give the last assistant turn's calls the ids the environment answered them with; when the
        environment could not match them one to one, send that turn as plain text instead."""
        if not self.messages or "tool_calls" not in self.messages[-1]:
            return
        last = self.messages[-1]
        results = [m for m in incoming if m["role"] == "tool"]
        names = [c["function"]["name"] for c in last["tool_calls"]]
        if names == [m.get("name") for m in results]:
            for call, result in zip(last["tool_calls"], results):
                call["id"] = result["tool_call_id"]
            return
        calls = [f"{c['function']['name']}({c['function']['arguments']})" for c in last.pop("tool_calls")]
        last["content"] = "\n".join([last["content"] or "", *calls]).strip()
        for message in results:
            message["role"] = "user"
            message.pop("tool_call_id", None)

"""The ``openai`` engine against a real OpenAI-compatible server on loopback: ``create_app`` over the
torch engine (the tiny model overfit to call a tool), served by uvicorn in a thread of this process."""

from __future__ import annotations

import asyncio
import time

import pytest
from fastapi import FastAPI, Request

from agentgym.inference import ChatEngine, GenerationRequest, InferenceEngine, SamplingParams, load_engine
from agentgym.inference.openai.engine import OpenAIEngine
from agentgym.messages import Message, ToolCall
from tests.inference.serving import CALL, QUESTION, TOOLS, render, thread_server


@pytest.fixture(scope="module")
def server(weather_model_dir):
    with thread_server(weather_model_dir) as running:
        yield running


def run_with(engine: OpenAIEngine, coroutine_factory):
    """Run a coroutine that uses ``engine`` on a fresh event loop, closing the engine afterwards."""

    async def main():
        try:
            return await coroutine_factory()
        finally:
            await engine.close()
            await engine.close()  # safe twice

    return asyncio.run(main())


def test_chat_returns_tool_calls_and_takes_the_results_back(server, weather_model_dir):
    engine = OpenAIEngine(server.base_url, weather_model_dir.name, tokenizer=weather_model_dir)
    greedy = SamplingParams(temperature=0, max_tokens=64)

    async def conversation():
        first = await engine.chat(QUESTION, TOOLS, greedy)
        call = first.tool_calls[0]
        history = [
            *QUESTION,
            Message(role="assistant", content=first.content, tool_calls=first.tool_calls).to_openai(),
            Message(role="tool", content="Sunny, 21 C", tool_call_id=call.id, name=call.name).to_openai(),
        ]
        second = await engine.chat(history, TOOLS, SamplingParams(max_tokens=3, seed=0))
        return first, second

    first, second = run_with(engine, conversation)
    assert first.finish_reason == "tool_calls" and first.content == ""
    assert [(c.name, c.arguments) for c in first.tool_calls] == [("get_weather", {"city": "Paris"})]
    assert first.tool_calls[0].id.startswith("call_")
    tokenizer = engine.tokenizer
    assert first.prompt_tokens == len(render(tokenizer, QUESTION))
    assert (
        first.completion_tokens
        == len(render(tokenizer, [*QUESTION, CALL], generation_prompt=False)) - first.prompt_tokens - 1
    )
    result = {
        "role": "tool",
        "content": "Sunny, 21 C",
        "tool_call_id": first.tool_calls[0].id,
        "name": "get_weather",
    }
    assert second.prompt_tokens == len(render(tokenizer, [*QUESTION, CALL, result]))
    assert 1 <= second.completion_tokens <= 3
    stats = engine.stats()
    assert stats.requests == 2 and stats.prompt_tokens == first.prompt_tokens + second.prompt_tokens
    assert stats.generated_tokens == first.completion_tokens + second.completion_tokens
    assert 0 < stats.busy_seconds <= stats.wall_seconds


def test_generate_returns_the_served_engines_tokens(server, weather_model_dir):
    engine = OpenAIEngine(server.base_url, weather_model_dir.name, tokenizer=weather_model_dir)
    assert isinstance(engine, InferenceEngine) and isinstance(engine, ChatEngine) and engine.version == 0
    prompt = render(engine.tokenizer, QUESTION)
    sampled = GenerationRequest(
        prompt_ids=prompt, sampling=SamplingParams(temperature=0.8, max_tokens=10, seed=11)
    )
    greedy = GenerationRequest(prompt_ids=prompt, sampling=SamplingParams(temperature=0, max_tokens=64))

    results = run_with(engine, lambda: asyncio.gather(engine.generate(sampled), engine.generate(greedy)))
    direct = server.call(server.engine.generate(sampled))
    got, called = results
    assert got.request_id == sampled.request_id
    assert got.token_ids == direct.token_ids and got.logprobs == pytest.approx(direct.logprobs, abs=1e-5)
    assert got.versions == [0] * len(got.token_ids) and got.prompt_tokens == len(prompt)
    assert got.finish_reason == direct.finish_reason
    # greedy: the learnt tool call, ending with the end-of-turn token, with exact ids
    expected = render(engine.tokenizer, [*QUESTION, CALL], generation_prompt=False)[len(prompt) : -1]
    assert called.token_ids == expected and called.finish_reason == "stop"
    assert engine.stats().generated_tokens == len(got.token_ids) + len(called.token_ids)
    engine.reset_stats()
    assert engine.stats().requests == 0


def test_load_engine_builds_it_and_token_level_needs_a_tokenizer(server, weather_model_dir):
    engine = load_engine("openai", base_url=server.base_url, model=weather_model_dir.name)
    assert isinstance(engine, OpenAIEngine) and engine.tokenizer is None
    request = GenerationRequest(prompt_ids=[1, 2, 3])

    async def refused():
        with pytest.raises(ValueError, match="tokenizer="):
            await engine.generate(request)
        with pytest.raises(NotImplementedError, match="does not own"):
            await engine.update_weights({})

    run_with(engine, refused)


def test_tool_calls_with_undecodable_arguments_come_back_as_text(monkeypatch):
    """A hosted model may write arguments that are not JSON; the reply keeps them for the env to refuse."""
    app = FastAPI()
    seen: list[str] = []

    @app.get("/v1/models")
    async def models() -> dict:
        return {
            "object": "list",
            "data": [{"id": "hosted", "object": "model", "created": 0, "owned_by": "someone"}],
        }

    @app.post("/v1/chat/completions")
    async def reply(request: Request) -> dict:
        seen.append(request.headers["authorization"])
        calls = [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": Paris'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            },
            {"id": "call_c", "type": "function", "function": {"name": "now", "arguments": ""}},
        ]
        message = {"role": "assistant", "content": "Checking.", "tool_calls": calls}
        return {
            "id": "x",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "hosted",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }

    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with thread_server(app=app) as running:
        engine = OpenAIEngine(running.base_url, "hosted")
        result = run_with(engine, lambda: engine.chat(QUESTION, TOOLS, SamplingParams()))
    assert seen == ["Bearer sk-from-env"]
    assert result.tool_calls == [
        ToolCall(id="call_b", name="get_weather", arguments={"city": "Rome"}),
        ToolCall(id="call_c", name="now", arguments={}),
    ]
    assert (
        result.content
        == 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": Paris}\n</tool_call>'
    )
    assert result.finish_reason == "tool_calls" and result.prompt_tokens == 0

"""``agentgym serve`` as a user runs it (the console script on a loopback port), driven by the official
``openai`` client; the model is the tiny one overfit to answer one question with a tool call."""

from __future__ import annotations

import asyncio
import json
import subprocess

import httpx
import openai
import pytest
from transformers import AutoTokenizer

from agentgym.inference import GenerationRequest, SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from tests.inference.serving import AGENTGYM, CALL, QUESTION, TOOLS, cli_server, render


@pytest.fixture(scope="module")
def base_url(weather_model_dir):
    with cli_server(weather_model_dir) as url:
        yield url


@pytest.fixture(scope="module")
def client(base_url):
    with openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def tokenizer(weather_model_dir):
    return AutoTokenizer.from_pretrained(weather_model_dir)


def test_models_lists_the_served_model(client, weather_model_dir):
    assert [m.id for m in client.models.list()] == [weather_model_dir.name]


def test_chat_completion_with_a_tool_call_round_trips(client, weather_model_dir, tokenizer):
    reply = client.chat.completions.create(
        model=weather_model_dir.name, messages=QUESTION, tools=TOOLS, temperature=0
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and call.type == "function"
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    assert reply.usage.prompt_tokens == len(render(tokenizer, QUESTION))
    # The reply goes back with the tool's answer: the server renders both as the template does locally.
    result = {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"}
    sent = [*QUESTION, choice.message.model_dump(exclude_none=True), result]
    follow_up = client.chat.completions.create(
        model=weather_model_dir.name, messages=sent, tools=TOOLS, max_tokens=3, seed=0
    )
    assert follow_up.usage.prompt_tokens == len(render(tokenizer, [*QUESTION, CALL, result]))
    assert 1 <= follow_up.usage.completion_tokens <= 3


def test_completions_return_the_engine_tokens_and_logprobs(client, weather_model_dir, tokenizer):
    prompt = render(tokenizer, QUESTION)
    sampling = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=12, seed=7)
    reply = client.completions.create(
        model=weather_model_dir.name,
        prompt=prompt,
        max_tokens=12,
        temperature=1.0,
        top_p=0.9,
        seed=7,
        logprobs=1,
        extra_body={"return_tokens_as_token_ids": True},
    )
    logprobs = reply.choices[0].logprobs
    served_ids = [int(token.removeprefix("token_id:")) for token in logprobs.tokens]

    async def direct():
        engine = TorchEngine(weather_model_dir)
        try:
            return await engine.generate(GenerationRequest(prompt_ids=prompt, sampling=sampling))
        finally:
            await engine.close()

    expected = asyncio.run(direct())
    assert served_ids == expected.token_ids
    assert logprobs.token_logprobs == pytest.approx(expected.logprobs, abs=1e-4)
    assert reply.choices[0].finish_reason == expected.finish_reason
    assert reply.usage.prompt_tokens == len(prompt) and reply.usage.completion_tokens == len(served_ids)


def test_completions_take_several_prompts_and_samples(client, weather_model_dir):
    reply = client.completions.create(
        model=weather_model_dir.name, prompt=["The weather", "Paris"], n=2, max_tokens=4, seed=1, logprobs=0
    )
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    assert all(len(c.logprobs.tokens) == len(c.logprobs.token_logprobs) >= 1 for c in reply.choices)
    assert all(
        c.logprobs.tokens[0] and not c.logprobs.tokens[0].startswith("token_id:") for c in reply.choices
    )


def test_streaming_chat_and_completions(client, weather_model_dir, tokenizer):
    stream = client.chat.completions.create(
        model=weather_model_dir.name,
        messages=QUESTION,
        tools=TOOLS,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    calls = [call for chunk in chunks for choice in chunk.choices for call in choice.delta.tool_calls or []]
    assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert chunks[-1].usage.prompt_tokens == len(render(tokenizer, QUESTION))

    pieces = client.completions.create(
        model=weather_model_dir.name, prompt="Paris", max_tokens=5, seed=3, stream=True
    )
    whole = client.completions.create(model=weather_model_dir.name, prompt="Paris", max_tokens=5, seed=3)
    assert "".join(chunk.choices[0].text for chunk in pieces) == whole.choices[0].text


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"temperature": -1}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"logprobs": True, "top_logprobs": 2}, "top_logprobs"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role"),
        (
            {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
            "messages[0].content",
        ),
        (
            {
                "messages": [
                    *QUESTION,
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": "{city"},
                            }
                        ],
                    },
                ]
            },
            "messages[1].tool_calls[0].function.arguments",
        ),
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0]"),
    ],
)
def test_bad_chat_requests_are_400_naming_the_field(client, weather_model_dir, change, param):
    request = {"model": weather_model_dir.name, "messages": QUESTION, "max_tokens": 2} | change
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(**request)
    assert caught.value.status_code == 400
    assert caught.value.body["param"] == param and param in caught.value.body["message"]


def test_bad_completion_requests_and_unknown_models(client, weather_model_dir, tokenizer):
    for prompt in ([], [len(tokenizer) + 5], [[1, 2], []], 17, [-1]):
        with pytest.raises(openai.BadRequestError) as caught:
            client.completions.create(model=weather_model_dir.name, prompt=prompt, max_tokens=2)
        assert caught.value.body["param"] == "prompt"
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=weather_model_dir.name, prompt="x", max_tokens=2, logprobs=5)
    assert caught.value.body["param"] == "logprobs"
    with pytest.raises(openai.NotFoundError) as caught:
        client.chat.completions.create(model="gpt-unknown", messages=QUESTION)
    assert caught.value.body["code"] == "model_not_found" and weather_model_dir.name in caught.value.body["message"]


def test_invalid_json_body_is_400_saying_where(base_url):
    body = b'{"model": "tiny",\n "messages": [] "n": 1}'
    response = httpx.post(f"{base_url}/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json() == {
        "error": {
            "message": "request body is not valid JSON: Expecting ',' delimiter at line 2 column 17",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


def test_serve_without_a_model_folder_exits_2(tmp_path):
    done = subprocess.run(
        [AGENTGYM, "serve", "--model", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "--model" in done.stderr and "missing" in done.stderr

"""Streaming from ``agentgym serve``: tokens go out as the engine samples them, the pieces add up to the
unstreamed answer, a client that leaves cancels its generation, and Ctrl-C stops a server with a stream
open; the incremental detokeniser on its own."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer

from agentgym.inference import GenerationChunk, GenerationRequest, GenerationResult
from agentgym.serve import create_app
from agentgym.serve.openai_format import TextStream
from tests.inference.serving import AGENTGYM, ThreadServer, free_port, thread_server, wait_until_serving
from tests.waiting import until, until_async

LONG = {"prompt": "Hello", "seed": 1, "temperature": 1.0}
"""A long completion (the tiny model ends it after some 2,400 tokens; with :func:`endless`, only at max_tokens)."""


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    with thread_server(tiny_model_dir, seed=0) as running:
        yield running


@pytest.fixture
def endless(server, monkeypatch):
    """The server's engine ends a generation only at its max_tokens (it samples end-of-turn tokens as any other)."""
    monkeypatch.setattr(server.engine, "eos_token_ids", frozenset())


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON events of a server-sent event stream, up to ``[DONE]``."""
    for line in response.iter_lines():
        if line.startswith("data: "):
            if line == "data: [DONE]":
                return
            yield json.loads(line.removeprefix("data: "))


def test_the_first_chunk_comes_before_the_generation_ends(server, tiny_model_dir, endless):
    body = {"model": tiny_model_dir.name, "max_tokens": 256, "stream": True} | LONG
    texts: list[str] = []
    generating_at_first = False
    with httpx.stream("POST", f"{server.base_url}/completions", json=body, timeout=120) as response:
        for event in events(response):
            if event["choices"] and event["choices"][0]["text"]:
                generating_at_first = generating_at_first or (not texts and server.engine.in_flight == 1)
                texts.append(event["choices"][0]["text"])
    assert len(texts) > 10, "the text came in a handful of chunks, not as it was generated"
    assert generating_at_first, "the first text came once the engine had ended the generation"


def test_streamed_pieces_add_up_to_the_answer_unstreamed(server, tiny_model_dir):
    model = tiny_model_dir.name
    for fields in ({"seed": 3}, {"seed": 4, "stop": ["e", "\n\n"]}, {"seed": 5, "n": 2}):
        body = {"model": model, "prompt": "The weather", "max_tokens": 48, "logprobs": 1} | fields
        whole = httpx.post(f"{server.base_url}/completions", json=body, timeout=120).json()
        texts: dict[int, list[str]] = {}
        logprobs: dict[int, list[float]] = {}
        finish: dict[int, str] = {}
        body = body | {"stream": True, "stream_options": {"include_usage": True}}
        with httpx.stream("POST", f"{server.base_url}/completions", json=body, timeout=120) as response:
            chunks = list(events(response))
        for chunk in chunks[:-1]:
            (choice,) = chunk["choices"]
            texts.setdefault(choice["index"], []).append(choice["text"])
            logprobs.setdefault(choice["index"], []).extend(choice["logprobs"]["token_logprobs"])
            if choice["finish_reason"]:
                finish[choice["index"]] = choice["finish_reason"]
        for expected in whole["choices"]:
            index = expected["index"]
            assert "".join(texts[index]) == expected["text"], fields
            assert logprobs[index] == expected["logprobs"]["token_logprobs"]
            assert finish[index] == expected["finish_reason"]
        assert chunks[-1]["usage"] == whole["usage"]
        if "stop" not in fields:
            assert len(texts[0]) > 5, "the text came in one piece"

    body = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 40, "seed": 2}
    whole = httpx.post(f"{server.base_url}/chat/completions", json=body | {"logprobs": True}, timeout=120)
    with httpx.stream(
        "POST",
        f"{server.base_url}/chat/completions",
        json=body | {"logprobs": True, "stream": True},
        timeout=120,
    ) as response:
        chunks = list(events(response))
    deltas = [c["choices"][0]["delta"].get("content") or "" for c in chunks]
    entries = [
        e for c in chunks if c["choices"][0]["logprobs"] for e in c["choices"][0]["logprobs"]["content"]
    ]
    (expected,) = whole.json()["choices"]
    assert "".join(deltas) == expected["message"]["content"]
    assert entries == expected["logprobs"]["content"]
    assert chunks[-1]["choices"][0]["finish_reason"] == expected["finish_reason"]


def settled(engine: Any) -> int:
    """The engine's count of generated tokens once it has no request in flight and generates nothing more."""
    until(lambda: engine.in_flight == 0, "the engine dropping the request of a client that left")
    generated = engine.stats().generated_tokens
    time.sleep(0.5)
    assert engine.stats().generated_tokens == generated, "the engine still generates with nothing in flight"
    return generated


async def leave_once_generating(server: ThreadServer, body: dict[str, Any]) -> None:
    """Post ``body`` (not streamed) and close the connection once the engine generates for it."""
    before = server.engine.stats().generated_tokens
    async with httpx.AsyncClient(timeout=60) as client:
        posted = asyncio.create_task(client.post(f"{server.base_url}/completions", json=body))
        await until_async(lambda: server.engine.stats().generated_tokens > before, "the engine generating")
        posted.cancel()
        with pytest.raises(asyncio.CancelledError):
            await posted


def test_a_client_that_leaves_mid_stream_cancels_its_generation(server, tiny_model_dir, endless):
    engine = server.engine
    body = {"model": tiny_model_dir.name, "max_tokens": 3000, "stream": True} | LONG
    started = engine.stats().generated_tokens
    with httpx.stream("POST", f"{server.base_url}/completions", json=body, timeout=30) as response:
        for event in events(response):
            if event["choices"][0]["text"]:
                break
        assert engine.in_flight == 1
    assert settled(engine) - started < 3000, "the generation ran to its end"

    # A client that gives up on a response it is not streamed cancels it too.
    started = engine.stats().generated_tokens
    asyncio.run(leave_once_generating(server, body | {"stream": False}))
    assert settled(engine) - started < 3000, "the generation ran to its end"


def test_an_engine_that_cannot_stream_sends_one_piece_at_the_end(server, tiny_model_dir):
    class GenerateOnly:
        """The torch engine behind only the ``InferenceEngine`` protocol (no ``stream``)."""

        name = "generate-only"
        tokenizer = server.engine.tokenizer
        max_model_len = server.engine.max_model_len

        async def generate(self, request: GenerationRequest) -> GenerationResult:
            return await server.engine.generate(request)

    app = create_app(GenerateOnly(), tiny_model_dir.name)
    body = {"model": tiny_model_dir.name, "prompt": "Paris", "max_tokens": 12, "seed": 9}
    with thread_server(app=app) as other:
        whole = httpx.post(f"{other.base_url}/completions", json=body, timeout=60).json()
        with httpx.stream(
            "POST", f"{other.base_url}/completions", json=body | {"stream": True}, timeout=60
        ) as r:
            texts = [event["choices"][0]["text"] for event in events(r)]
    assert texts == [whole["choices"][0]["text"]]


def test_ctrl_c_stops_the_server_with_a_stream_open(tiny_model_dir, tmp_path):
    port = free_port()
    log = (tmp_path / "serve.log").open("w")
    process = subprocess.Popen(
        [AGENTGYM, "serve", "--model", str(tiny_model_dir), "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(base_url, lambda: None if process.poll() is None else "exited")
        body = {"model": tiny_model_dir.name, "max_tokens": 4000, "stream": True} | LONG
        with httpx.stream("POST", f"{base_url}/completions", json=body, timeout=30) as response:
            stream = events(response)
            next(stream)
            process.send_signal(signal.SIGINT)
            process.wait(timeout=60)
            rest = list(stream)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    assert process.returncode == 130, (tmp_path / "serve.log").read_text()[-2000:]  # the CLI's exit on Ctrl-C
    assert rest and "error" in rest[-1], "the stream did not say why it ended"  # it was cut, not run to its end


def test_text_stream_never_splits_a_character(tokenizer):
    text = "Météo à Paris: 21 °C ☀️, Tokyo 東京 雨"
    ids = tokenizer.encode(text)
    assert len(ids) > len(text) / 2  # the rare characters are spelled in bytes
    stream = TextStream(tokenizer, [])
    pieces = [stream.push([token]) for token in ids]
    assert all("\ufffd" not in piece for piece in pieces)
    assert "".join(pieces) + stream.rest(text) == text == "".join(pieces)


def test_text_stream_holds_back_what_may_start_a_stop_string(tokenizer):
    stream = TextStream(tokenizer, ["STOP here"])
    sent = ""
    for token in tokenizer.encode("go on STOP the STOP here and after"):
        piece = stream.push([token])
        sent += piece
        assert "STOP here" not in sent
    assert sent == "go on STOP the "  # the false start went out once it could no longer be the stop string
    assert stream.rest("go on STOP the ") == ""


def test_generation_chunk_of_a_result_is_the_whole_result():
    result = GenerationResult(
        request_id="r",
        token_ids=[1, 2],
        logprobs=[-0.1, -0.2],
        versions=[0, 0],
        finish_reason="stop",
        prompt_tokens=3,
    )
    assert GenerationChunk.of(result).model_dump() == result.model_dump()

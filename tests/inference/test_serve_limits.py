"""``agentgym serve`` under abuse: bodies over the size limit, prompts over the context, malformed requests
and a prompt that takes long to render, against a real uvicorn server on a loopback port."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from transformers import AutoTokenizer

from tests.inference.serving import cli_server, thread_server

ERROR_FIELDS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def base_url(tiny_model_dir):
    with cli_server(tiny_model_dir, "--max-body-mb", "1") as url:
        yield url


def chat(model: str, content: str, **fields: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": content}], "max_tokens": 1} | fields


def openai_error(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == ERROR_FIELDS, body
    return body["error"]


def twenty_megabytes(model: str) -> bytes:
    return b'{"model": "%s", "messages": [{"role": "user", "content": "%s"}]}' % (
        model.encode(),
        b"a" * 20_000_000,
    )


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_before_it_is_read(base_url, tiny_model_dir, framing):
    body = twenty_megabytes(tiny_model_dir.name)
    content = (
        body if framing == "content-length" else (body[i : i + 2**20] for i in range(0, len(body), 2**20))
    )
    started = time.perf_counter()
    response = httpx.post(
        f"{base_url}/chat/completions",
        content=content,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    elapsed = time.perf_counter() - started
    assert response.status_code == 413
    error = openai_error(response)
    assert error["code"] == "request_too_large" and str(2**20) in error["message"]
    assert elapsed < 1.0, f"a 20 MB body took {elapsed:.2f} s to refuse"
    # The server is still there, and a body under the limit (1 MiB, from --max-body-mb) is read.
    under = chat(tiny_model_dir.name, "a" * (2**20 - 200))
    assert httpx.post(f"{base_url}/chat/completions", json=under, timeout=10).status_code == 400


def test_a_prompt_over_the_context_is_refused_before_it_is_rendered(base_url, tiny_model_dir):
    url = f"{base_url}/chat/completions"
    started = time.perf_counter()
    response = httpx.post(url, json=chat(tiny_model_dir.name, "word " * 200_000), timeout=10)
    elapsed = time.perf_counter() - started
    assert response.status_code == 400
    error = openai_error(response)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "4096" in error["message"]
    assert elapsed < 1.0, f"a 1 MB prompt took {elapsed:.2f} s to refuse"

    # Just over the context: the characters could fit, the tokens do not.
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    content = "the weather in Paris is sunny today. " * 1000
    assert 4096 < len(tokenizer.encode(content)) < 20_000
    response = httpx.post(url, json=chat(tiny_model_dir.name, content), timeout=30)
    assert response.status_code == 400
    error = openai_error(response)
    assert error["code"] == "context_length_exceeded" and "tokens" in error["message"]

    ids = [10 + i % 1000 for i in range(4096)]
    response = httpx.post(
        f"{base_url}/completions", json={"model": tiny_model_dir.name, "prompt": ids}, timeout=10
    )
    assert response.status_code == 400 and openai_error(response)["param"] == "prompt"
    assert openai_error(response)["code"] == "context_length_exceeded"


@pytest.mark.parametrize(
    ("method", "path", "request_kwargs", "status"),
    [
        (
            "POST",
            "/chat/completions",
            {"content": b"{not json", "headers": {"content-type": "application/json"}},
            400,
        ),
        ("POST", "/chat/completions", {"content": b"", "headers": {"content-type": "application/json"}}, 400),
        ("POST", "/chat/completions", {"json": [1, 2, 3]}, 400),
        (
            "POST",
            "/chat/completions",
            {"content": b'{"model": "x"}', "headers": {"content-type": "text/plain"}},
            400,
        ),
        ("POST", "/completions", {"content": b"null", "headers": {"content-type": "application/json"}}, 400),
        ("GET", "/no/such/route", {}, 404),
        ("GET", "/chat/completions", {}, 405),
        ("DELETE", "/models", {}, 405),
    ],
)
def test_every_error_has_the_openai_shape(base_url, method, path, request_kwargs, status):
    response = httpx.request(method, f"{base_url}{path}", timeout=10, **request_kwargs)
    assert response.status_code == status
    error = openai_error(response)
    assert error["type"] == "invalid_request_error" and error["message"]


class SlowTemplate:
    """A tokenizer whose chat template takes ``delay`` seconds, as a very long conversation's does."""

    def __init__(self, tokenizer: Any, delay: float) -> None:
        self._tokenizer, self._delay = tokenizer, delay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def __len__(self) -> int:
        return len(self._tokenizer)

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self._delay)
        return self._tokenizer.apply_chat_template(*args, **kwargs)


def test_models_answers_while_a_prompt_is_rendered(tiny_model_dir):
    tokenizer = SlowTemplate(AutoTokenizer.from_pretrained(tiny_model_dir), delay=4.0)
    with thread_server(tiny_model_dir, tokenizer=tokenizer) as server:
        answers: list[int] = []
        slow = threading.Thread(
            target=lambda: answers.append(
                httpx.post(
                    f"{server.base_url}/chat/completions", json=chat(tiny_model_dir.name, "hi"), timeout=60
                ).status_code
            )
        )
        slow.start()
        time.sleep(0.5)  # the chat request is being rendered
        started = time.perf_counter()
        models = httpx.get(f"{server.base_url}/models", timeout=30)
        waited = time.perf_counter() - started
        slow.join(timeout=60)
    assert models.status_code == 200 and answers == [200]
    assert waited < 1.0, f"/v1/models waited {waited:.2f} s behind a prompt being rendered"

"""``agentgym serve`` under abuse: bodies over the size limit, prompts over the context, malformed requests
and a prompt that takes long to render, against a real uvicorn server on a loopback port."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from transformers import AutoTokenizer

from tests.inference.serving import cli_server, thread_server

ERROR_FIELDS = {"message", "type", "param", "code"}


@pytest.fixture(scope="module")
def base_url(tiny_model_dir):
    with cli_server(tiny_model_dir, "--max-body-mb", "1") as url:
        yield url


class WatchedTemplate:
    """A tokenizer whose chat template counts its renders; inside :meth:`held`, a render waits for the block to end,
    as a very long conversation's takes long."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.renders = 0
        self.rendering = threading.Event()
        self._release: threading.Event | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def __len__(self) -> int:
        return len(self._tokenizer)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold every render that starts in the block until the block ends; :attr:`rendering` is set once one did."""
        release = self._release = threading.Event()
        self.rendering.clear()
        try:
            yield
        finally:
            self._release = None
            release.set()

    def apply_chat_template(self, *args: Any, **kwargs: Any) -> Any:
        self.renders += 1
        release = self._release
        if release is not None:
            self.rendering.set()
            release.wait(timeout=60)
        return self._tokenizer.apply_chat_template(*args, **kwargs)


@pytest.fixture(scope="module")
def watched(tiny_model_dir):
    """A server in this process whose tokenizer is a :class:`WatchedTemplate`, and that template."""
    template = WatchedTemplate(AutoTokenizer.from_pretrained(tiny_model_dir))
    with thread_server(tiny_model_dir, tokenizer=template) as server:
        yield server, template


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


def cut_short(base_url: str, body: bytes, framing: str) -> tuple[int, dict[str, Any]]:
    """Send the head of a request for ``body`` and, chunked, only its first 2 MiB, never the rest; the status and
    JSON of the answer, which a server that waits for the whole body never gives."""
    url = urlsplit(base_url)
    head = [f"POST {url.path}/chat/completions HTTP/1.1", f"host: {url.netloc}", "content-type: application/json"]
    if framing == "content-length":  # none of the body at all
        head.append(f"content-length: {len(body)}")
        sent = b""
    else:
        head.append("transfer-encoding: chunked")
        sent = b"%x\r\n%s\r\n" % (2 * 2**20, body[: 2 * 2**20])
    with socket.create_connection((url.hostname, url.port), timeout=30) as connection:
        connection.sendall("\r\n".join([*head, "", ""]).encode() + sent)
        answer = http.client.HTTPResponse(connection)
        answer.begin()
        return answer.status, json.loads(answer.read())


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_before_it_is_read(base_url, tiny_model_dir, framing):
    status, body = cut_short(base_url, twenty_megabytes(tiny_model_dir.name), framing)
    assert status == 413 and set(body) == {"error"} and set(body["error"]) == ERROR_FIELDS, body
    assert body["error"]["code"] == "request_too_large" and str(2**20) in body["error"]["message"]
    # The server is still there, and a body under the limit (1 MiB, from --max-body-mb) is read.
    under = chat(tiny_model_dir.name, "a" * (2**20 - 200))
    assert httpx.post(f"{base_url}/chat/completions", json=under, timeout=10).status_code == 400


def test_a_prompt_over_the_context_is_refused_before_it_is_rendered(base_url, watched, tiny_model_dir):
    server, template = watched
    renders = template.renders
    response = httpx.post(f"{server.base_url}/chat/completions", json=chat(tiny_model_dir.name, "word " * 200_000),
                          timeout=30)
    assert response.status_code == 400
    error = openai_error(response)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert "4096" in error["message"]
    assert template.renders == renders, "the 1 MB prompt was rendered before it was refused"

    # Just over the context: the characters could fit, the tokens do not.
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    content = "the weather in Paris is sunny today. " * 1000
    assert 4096 < len(tokenizer.encode(content)) < 20_000
    response = httpx.post(f"{base_url}/chat/completions", json=chat(tiny_model_dir.name, content), timeout=30)
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


def test_models_answers_while_a_prompt_is_rendered(watched, tiny_model_dir):
    server, template = watched
    answers: list[int] = []
    slow = threading.Thread(
        target=lambda: answers.append(
            httpx.post(f"{server.base_url}/chat/completions", json=chat(tiny_model_dir.name, "hi"), timeout=60).status_code
        )
    )
    with template.held():
        slow.start()
        assert template.rendering.wait(timeout=60), "the chat request was never rendered"
        models = httpx.get(f"{server.base_url}/models", timeout=30)  # while the render is held
    slow.join(timeout=60)
    assert models.status_code == 200 and answers == [200]

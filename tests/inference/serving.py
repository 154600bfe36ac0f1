"""Helpers of the serving tests: a copy of the tiny model overfit to answer one question with a tool
call, and ``agentgym serve`` on a free loopback port (as a subprocess, or in a thread of this process)."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

T = TypeVar("T")
AGENTGYM = str(Path(sys.executable).with_name("agentgym"))

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]
QUESTION = [{"role": "user", "content": "What is the weather in Paris?"}]
CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
}
"""The reply the overfit model gives to QUESTION (as Hugging Face chat templates take it)."""


def render(tokenizer: Any, messages: list[dict[str, Any]], *, generation_prompt: bool = True) -> list[int]:
    """The ids of ``messages`` with TOOLS rendered by the model's chat template."""
    return list(
        tokenizer.apply_chat_template(
            messages, tools=TOOLS, add_generation_prompt=generation_prompt, return_dict=True
        )["input_ids"]
    )


def overfit_tool_caller(source: Path, out: Path, max_steps: int = 200) -> Path:
    """A copy of the model at ``source`` trained (Adam, teacher forcing) until it predicts every token of
    CALL after QUESTION, so greedy decoding answers with that tool call."""
    shutil.copytree(source, out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    prompt, full = render(tokenizer, QUESTION), render(tokenizer, [*QUESTION, CALL], generation_prompt=False)
    assert full[: len(prompt)] == prompt
    ids = torch.tensor([full])
    labels = ids.clone()
    labels[0, : len(prompt)] = -100
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(out)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(max_steps):
        out_ = model(input_ids=ids, labels=labels)
        predicted = out_.logits[0, len(prompt) - 1 : -1].argmax(-1)
        if out_.loss.item() < 0.2 and torch.equal(predicted, ids[0, len(prompt) :]):
            break
        optimizer.zero_grad()
        out_.loss.backward()
        optimizer.step()
    else:
        raise AssertionError(f"the model did not learn the tool call in {max_steps} steps")
    model.save_pretrained(out)
    return out


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until_serving(base_url: str, failed: Callable[[], str | None], timeout: float = 120.0) -> None:
    """Poll ``GET /v1/models`` until it answers; ``failed()`` returns why the server is gone, if it is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reason = failed()
        if reason is not None:
            raise RuntimeError(f"the server stopped before serving: {reason}")
        try:
            if httpx.get(f"{base_url}/models", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"{base_url} did not answer within {timeout:.0f} s")


@contextmanager
def cli_server(model: Path, *options: str) -> Iterator[str]:
    """``agentgym serve --model MODEL [OPTIONS]`` as a subprocess; yields its ``/v1`` URL, stops it on exit."""
    port = free_port()
    process = subprocess.Popen(
        [AGENTGYM, "serve", "--model", str(model), "--port", str(port), *options],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(base_url, lambda: None if process.poll() is None else process.stderr.read())
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()


@dataclass
class ThreadServer:
    """A server running in a thread of this process, with its engine and event loop."""

    base_url: str
    engine: Any
    loop: asyncio.AbstractEventLoop

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` (e.g. ``engine.generate(...)``) on the server's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=60)


@contextmanager
def thread_server(
    model: Path | None = None, *, app: Any = None, **engine_kwargs: Any
) -> Iterator[ThreadServer]:
    """``create_app`` over a torch engine on ``model`` (or the given ``app``), served by uvicorn in a
    background thread."""
    import uvicorn

    from agentgym.inference.torch.engine import TorchEngine
    from agentgym.serve import create_app

    port = free_port()
    started: dict[str, Any] = {}
    errors: list[BaseException] = []

    async def main() -> None:
        engine = TorchEngine(model, **engine_kwargs) if app is None else None
        try:
            served = create_app(engine, model.name) if engine is not None else app
            config = uvicorn.Config(served, host="127.0.0.1", port=port, log_level="warning")
            started.update(engine=engine, loop=asyncio.get_running_loop(), server=uvicorn.Server(config))
            await started["server"].serve()
        finally:
            if engine is not None:
                await engine.close()

    def run() -> None:
        try:
            asyncio.run(main())
        except BaseException as error:  # noqa: BLE001 - uvicorn exits on a taken port
            errors.append(error)  # wait_until_serving reports it

    thread = threading.Thread(target=run, name="test-server", daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_serving(base_url, lambda: repr(errors[0]) if errors else None)
        yield ThreadServer(base_url, started["engine"], started["loop"])
    finally:
        if "server" in started:
            started["server"].should_exit = True
        thread.join(timeout=30)
        assert not thread.is_alive(), "the server thread did not stop"

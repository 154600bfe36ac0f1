"""Fixtures of the inference tests."""

from __future__ import annotations

import importlib.util

import pytest

from agentgym.rollout.background import BackgroundLoop
from tests.inference.serving import overfit_tool_caller


@pytest.fixture(scope="module")
def background(request):
    """An event loop on its own thread for a module of vLLM tests (vLLM answers on the loop that started it);
    the module skips, naming the install step, where vLLM is missing."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("needs vLLM: bash scripts/setup.sh vllm")
    with BackgroundLoop(request.module.__name__.rpartition(".")[2]) as loop:
        yield loop


@pytest.fixture(scope="session")
def weather_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model overfit to answer the weather question with a ``get_weather`` call (built once)."""
    return overfit_tool_caller(tiny_model_dir, tmp_path_factory.mktemp("overfit") / "weather")

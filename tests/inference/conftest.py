"""Fixtures of the inference tests."""

from __future__ import annotations

import pytest

from tests.inference.serving import overfit_tool_caller


@pytest.fixture(scope="session")
def weather_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model overfit to answer the weather question with a ``get_weather`` call (built once)."""
    return overfit_tool_caller(tiny_model_dir, tmp_path_factory.mktemp("overfit") / "weather")

"""Every web environment chooses its task the same way: an index named by a reset option (never a bool,
which Python counts as an int), else one drawn at the reset's difficulty."""

from __future__ import annotations

import asyncio

import pytest

from agentgym.envs.web.booking import BookingEnv
from agentgym.envs.web.env import WebEnv
from agentgym.envs.web.mail import MailEnv
from agentgym.envs.web.shop import ShopEnv

pytestmark = pytest.mark.browser
INDEX_OPTION = [(BookingEnv, "task"), (MailEnv, "task"), (ShopEnv, "instruction")]


async def _reset(env_class: type[WebEnv], options: dict[str, object]) -> None:
    env = env_class()
    try:
        await env.areset(seed=0, options=options)
    finally:
        await env.aclose()


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize(("env_class", "option"), INDEX_OPTION)
def test_a_bool_is_not_a_task_index(env_class, option, flag):
    with pytest.raises(ValueError, match=rf"{option} must be an index from 0 to \d+ \(an int\), got {flag}"):
        asyncio.run(_reset(env_class, {option: flag}))


@pytest.mark.parametrize(("env_class", "option"), INDEX_OPTION)
def test_an_index_out_of_range_or_an_unknown_option_is_refused_by_name(env_class, option):
    with pytest.raises(ValueError, match=rf"{option} must be an index from 0 to \d+ \(an int\), got -1"):
        asyncio.run(_reset(env_class, {option: -1}))
    with pytest.raises(ValueError, match=rf"unknown reset options for {env_class.__name__}: colour; "
                                         rf"it takes difficulty, {option}"):
        asyncio.run(_reset(env_class, {"colour": "red"}))

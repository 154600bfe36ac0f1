"""The tokenizer's training text: episodes of the bundled environments rendered with the chat template.

Every environment registered from ``agentgym.envs``, but those that need a sandbox, is played at every
difficulty with the oracle and the random policy, writing tool calls in both the ``hermes`` and the
``pythonic`` format, so the corpus holds the tool schemas, the role markers, the calls and the
observations an agent will see.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, cast

import numpy as np

from agentgym.core import Env
from agentgym.messages import Message
from agentgym.models.chat_template import CHAT_TEMPLATE
from agentgym.registration import ADAPTED, list_envs, make

PARSERS = ("hermes", "pythonic")
POLICIES = ("oracle", "random")


def render(messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None, *,
           add_generation_prompt: bool = False) -> str:
    """Render OpenAI-format ``messages`` with :data:`CHAT_TEMPLATE` exactly as the saved tokenizer does."""
    from transformers.utils.chat_template_utils import render_jinja_template

    # it returns each conversation's text and generation indices, though annotated as returning str
    rendered, _ = cast(tuple[list[str], list[Any]], render_jinja_template(
        [messages],
        tools=None if tools is None else list(tools),
        chat_template=CHAT_TEMPLATE,
        add_generation_prompt=add_generation_prompt,
    ))
    return rendered[0]


def bundled_env_ids() -> list[str]:
    """The ids of the environments that ship with agentgym (entry point inside ``agentgym.envs``), except
    those tagged ``sandbox`` or ``browser`` (building a tokenizer must not start containers or browsers) or
    ``adapted`` (their tasks come from packages that may not be installed)."""
    return [s.id for s in list_envs()
            if s.entry_point.startswith("agentgym.envs.") and not {"sandbox", "browser", ADAPTED} & set(s.tags)]


def corpus(episodes: int = 4, *, seed: int = 0) -> Iterator[str]:
    """One rendered conversation per episode: ``episodes`` seeds for each bundled environment,
    difficulty, policy and tool-call format."""
    for env_id in bundled_env_ids():
        for parser in PARSERS:
            env = make(env_id, parser=parser)
            try:
                tools = [t.to_openai() for t in env.tools]
                for difficulty in env.difficulties:
                    for policy in POLICIES:
                        for episode in range(episodes):
                            rng = np.random.default_rng([seed, episode])
                            messages = play(env, policy, seed=seed + episode, difficulty=difficulty, rng=rng)
                            yield render([m.to_openai() for m in messages], tools)
            finally:
                env.close()


def play(env: Env, policy: str, *, seed: int, difficulty: str, rng: np.random.Generator) -> list[Message]:
    """The conversation of one episode of the ``oracle`` or ``random`` policy, to its end."""
    observation, _ = env.reset(seed=seed, options={"difficulty": difficulty})
    messages = list(observation)
    while True:
        action = env.oracle_action() if policy == "oracle" else env.random_action(rng)
        messages.append(Message(role="assistant", content=action))
        observation, _, terminated, truncated, _ = env.step(action)
        messages.extend(observation)
        if terminated or truncated:
            return messages

"""Policies: what chooses the agent's next message.

A policy starts one :class:`PolicySession` per episode; the session hears the messages the environment adds each
turn and answers with the agent's text. The text policies (:mod:`agentgym.policies.text`) are here; the
model-backed ones, which also record the tokens they generated, are in :mod:`agentgym.policies.lm` (token in,
token out, what trainers learn from, over the chat rendering of :mod:`agentgym.policies.render`, the token record
of :mod:`agentgym.policies.tokens` and the context policy of :mod:`agentgym.policies.context`),
:mod:`agentgym.policies.chat` (a chat endpoint),
:mod:`agentgym.policies.demonstrations` (a text policy's turns as tokens, for SFT) and
:mod:`agentgym.policies.engines` (a policy by engine name), imported when used.
"""

from agentgym.policies.text import (
    POLICIES,
    OraclePolicy,
    Policy,
    PolicySession,
    RandomPolicy,
    TextPolicy,
    get_policy,
)

__all__ = ["POLICIES", "OraclePolicy", "Policy", "PolicySession", "RandomPolicy", "TextPolicy", "get_policy"]

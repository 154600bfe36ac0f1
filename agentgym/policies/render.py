"""Token-in, token-out rendering: the conversation becomes token ids once and only grows.

The opening messages are rendered with the model's chat template; each later observation is rendered
as the *difference* the template adds after the finished assistant turn, tokenised on its own and
appended. History is never re-tokenised, so the ids the engine saw at one turn are a prefix of the
ids it sees at the next. A template that renders earlier turns differently once later ones follow
(Qwen3's drops past reasoning) has no such difference: :meth:`ChatRenderer.observation_ids` says so,
and the token record starts a new segment from a fresh rendering.
"""

from __future__ import annotations

from typing import Any

_PROBE = [{"role": "user", "content": "\x00probe"}, {"role": "assistant", "content": "\x00reply"}]


class ChatRenderer:
    """Renders OpenAI-format messages with a Hugging Face tokenizer's chat template, incrementally."""

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError("the tokenizer has no chat template; build the model with `agentgym model init` "
                             "or use a chat model's tokenizer")
        self.tokenizer = tokenizer
        probe = self._render(_PROBE)
        after_reply = probe[probe.rindex(_PROBE[1]["content"]) + len(_PROBE[1]["content"]):]
        eos = tokenizer.eos_token or ""
        if not eos or not after_reply.startswith(eos):
            raise ValueError(f"the chat template must close an assistant turn with the eos token {eos!r}; "
                             f"it writes {after_reply!r}")
        self.close_after_eos = self.encode(after_reply[len(eos):])
        """Ids that close a turn the model ended with its eos token (what the template adds after it)."""
        self.close_without_eos = self.encode(after_reply)
        """Ids that close a turn cut short (by ``max_tokens`` or a stop string): eos and what follows."""
        self.eos = self.encode(eos)
        """The ids of the end-of-turn (eos) token that ends every response."""
        self.eos_ids = frozenset(self.eos)

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[int]:
        """The opening prompt: ``messages`` with ``tools``, ending in the assistant's generation prompt."""
        return self.encode(self._render(messages, tools=tools or None, add_generation_prompt=True))

    def observation_ids(self, history: list[dict[str, Any]], messages: list[dict[str, Any]],
                        tools: list[dict[str, Any]] | None = None) -> list[int] | None:
        """What follows ``history``'s closed last assistant turn: ``messages`` and the next generation prompt; None
        where the template renders ``history`` differently once ``messages`` follow it."""
        before = self._render(history, tools=tools or None)
        after = self._render(history + messages, tools=tools or None, add_generation_prompt=True)
        if not after.startswith(before):
            return None
        return self.encode(after[len(before):])

    def close_ids(self, generated: list[int]) -> list[int]:
        """Ids to append after a response so the turn is closed the way the template closes it."""
        ended = bool(generated) and generated[-1] in self.eos_ids
        return list(self.close_after_eos if ended else self.close_without_eos)

    def response_text(self, generated: list[int]) -> str:
        """The agent's text: the response decoded without its closing eos token."""
        if generated and generated[-1] in self.eos_ids:
            generated = generated[:-1]
        return str(self.tokenizer.decode(generated, skip_special_tokens=False))

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """A fresh render of a whole conversation (for checks and display)."""
        return self._render(messages, tools=tools or None)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def head(self, text: str, tokens: int) -> str:
        """The text of ``text``'s first ``tokens`` tokens."""
        return str(self.tokenizer.decode(self.encode(text)[:tokens]))

    def _render(self, messages: list[dict[str, Any]], **kwargs: Any) -> str:
        return str(self.tokenizer.apply_chat_template(messages, tokenize=False, **kwargs))

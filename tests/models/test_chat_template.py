"""The chat template, rendered by the saved tokenizer exactly as ``transformers`` and vLLM render it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentgym import HermesParser, Message, ToolCall, make
from agentgym.models.corpus import play

pytest.importorskip("transformers")

MOVE = {"type": "function", "function": {"name": "move", "description": "Move one square.", "parameters": {
    "type": "object", "properties": {"direction": {"type": "string", "enum": ["up", "down"]}}, "required": ["direction"]}}}
LOOK = {"type": "function", "function": {"name": "look", "description": "Look around.", "parameters": {
    "type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir, local_files_only=True)


def render(tokenizer, messages, tools=None, generation_prompt=False):
    return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=generation_prompt)


def test_tools_block_lists_schemas_one_per_line_and_takes_the_system_message(tokenizer):
    text = render(tokenizer, [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Go."}],
                  tools=[MOVE, LOOK], generation_prompt=True)
    system, rest = text.split("<|im_end|>\n", 1)
    assert system.startswith("<|im_start|>system\nBe brief.\n\n# Tools")
    listed = system.split("<tools>\n", 1)[1].split("\n</tools>", 1)[0].split("\n")
    assert [json.loads(line) for line in listed] == [MOVE, LOOK]
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in system
    assert rest == "<|im_start|>user\nGo.<|im_end|>\n<|im_start|>assistant\n"
    assert text.count("Be brief.") == 1


def test_without_tools_a_system_message_is_its_own_turn(tokenizer):
    text = render(tokenizer, [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n"
    assert "<tools>" not in render(tokenizer, [{"role": "user", "content": "U"}], tools=[])


@pytest.mark.parametrize("content", ["plain", "  padded \n\n", "", "\n<tool_call> text that only looks like a call"])
def test_assistant_without_tool_calls_renders_content_verbatim(tokenizer, content):
    head = render(tokenizer, [{"role": "user", "content": "hi"}])
    text = render(tokenizer, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": content}])
    assert text == head + "<|im_start|>assistant\n" + content + "<|im_end|>\n"


def test_tool_calls_render_as_the_hermes_parser_writes_them(tokenizer):
    calls = [ToolCall(id="a", name="move", arguments={"direction": "up"}), ToolCall(id="b", name="look")]
    for content in ("", "Let me move."):
        message = Message(role="assistant", content=content, tool_calls=calls)
        text = render(tokenizer, [{"role": "user", "content": "go"}, message.to_openai()])
        body = text.split("<|im_start|>assistant\n", 1)[1]
        assert body == HermesParser().format(calls, content) + "<|im_end|>\n"
        parsed = HermesParser().parse(body.removesuffix("<|im_end|>\n"))
        assert [(c.name, c.arguments) for c in parsed.calls] == [("move", {"direction": "up"}), ("look", {})]
    # Hugging Face style: arguments as a dict, no "function" wrapper
    hf = {"role": "assistant", "content": None, "tool_calls": [{"name": "move", "arguments": {"direction": "down"}}]}
    assert '<tool_call>\n{"name": "move", "arguments": {"direction": "down"}}\n</tool_call><|im_end|>' in render(
        tokenizer, [{"role": "user", "content": "go"}, hf])


def test_consecutive_tool_messages_share_one_user_turn(tokenizer):
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "look", "arguments": {}}] * 2},
        {"role": "tool", "content": "a wall"},
        {"role": "tool", "content": [{"type": "text", "text": "a "}, {"type": "text", "text": "door"}]},
        {"role": "user", "content": "Error: too slow"},
    ]
    text = render(tokenizer, messages, generation_prompt=True)
    tail = text.split("</tool_call><|im_end|>\n", 1)[1]
    assert tail == (
        "<|im_start|>user\n<tool_response>\na wall\n</tool_response>\n<tool_response>\na door\n</tool_response>"
        "<|im_end|>\n<|im_start|>user\nError: too slow<|im_end|>\n<|im_start|>assistant\n"
    )
    assert render(tokenizer, messages[:4], generation_prompt=True).endswith(
        "door\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_content_parts_join_text_and_mark_images(tokenizer):
    message = Message(role="user", content=[{"type": "text", "text": "see "}, {"type": "image", "data": "AAAA"},
                                            {"type": "text", "text": " here"}])
    assert render(tokenizer, [message.to_openai()]) == "<|im_start|>user\nsee <image> here<|im_end|>\n"


def _episode(env_id: str, parser: str, policy: str) -> tuple[list[dict], list[dict]]:
    env = make(env_id, parser=parser)
    try:
        messages = play(env, policy, seed=3, difficulty=env.difficulties[-1], rng=np.random.default_rng(3))
        return [m.to_openai() for m in messages], [t.to_openai() for t in env.tools]
    finally:
        env.close()


@pytest.mark.parametrize(("env_id", "parser", "policy"), [
    ("tools/Calculator-v0", "hermes", "oracle"), ("games/Sokoban-v0", "pythonic", "random"),
    ("games/FrozenLake-v0", "hermes", "random"),
])
def test_every_prefix_renders_as_a_string_prefix(tokenizer, env_id, parser, policy):
    messages, tools = _episode(env_id, parser, policy)
    assert len(messages) > 4 and any(m["role"] == "tool" for m in messages)
    whole = render(tokenizer, messages, tools)
    for k in range(1, len(messages)):
        assert whole.startswith(render(tokenizer, messages[:k], tools)), f"prefix of {k} messages"
        if messages[k]["role"] == "assistant":
            prompt = render(tokenizer, messages[:k], tools, generation_prompt=True)
            assert whole.startswith(prompt)
            assert whole[len(prompt):].startswith(messages[k]["content"] + "<|im_end|>\n")


def test_prefix_property_with_structured_tool_calls(tokenizer):
    messages = [
        {"role": "system", "content": "S"}, {"role": "user", "content": "U"},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "move", "arguments": {"direction": "up"}}]},
        {"role": "tool", "content": "moved"}, {"role": "tool", "content": "moved again"},
        {"role": "assistant", "content": "done"}, {"role": "user", "content": "again"},
        {"role": "assistant", "content": "ok", "tool_calls": [{"name": "look", "arguments": "{}"}]},
        {"role": "tool", "content": "nothing"},
    ]
    for tools in (None, [MOVE, LOOK]):
        whole = render(tokenizer, messages, tools, generation_prompt=True)
        for k in range(1, len(messages) + 1):
            assert whole.startswith(render(tokenizer, messages[:k], tools))
        assert whole.endswith("nothing\n</tool_response><|im_end|>\n<|im_start|>assistant\n")

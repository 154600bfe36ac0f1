"""The tool-call formats of current open models (Qwen3-Coder, Llama 3, Mistral, DeepSeek, harmony): round trips,
the calls each family's chat template writes, bad text, and telling the format from a template."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from agentgym import ToolCall, ToolSpec, get_parser
from agentgym.parsers import MAX_DEPTH, PARSERS, chat_template, resolve_parser, template_format

NEW = ["qwen3_coder", "llama3_json", "mistral", "deepseek", "harmony"]
MARKERS = ["<tool_call>", "</tool_call>", "<function=", "</function>", "<parameter=", "</parameter>", "[TOOL_CALLS]",
           "[ARGS]", "[CALL_ID]", "tool▁call", "tool▁sep", "<|"]
"""Text a model writes only as the format's own tokens: no argument holds it."""

PIECES = [*"<>/_{}[]()\"':,=|\n namexyz019`", *MARKERS, "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>",
          "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<|message|>", "<|channel|>", "<|call|>", "<|start|>assistant",
          "to=functions.", '{"name": ', '"parameters": ', '"arguments": ', "```json"]
"""Pieces of every format, for text that is nearly calls."""
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=10,
)
calls = st.lists(
    st.builds(lambda name, args: ToolCall(id="x", name=name, arguments=args), names,
              st.dictionaries(names, json_values, max_size=4)),
    min_size=1, max_size=4, unique_by=lambda call: call.name,
)


def _tools(calls: list[ToolCall]) -> list[ToolSpec]:
    """Specs that declare which arguments are strings (what Qwen3-Coder's plain-text values need)."""
    return [ToolSpec(name=c.name, parameters={"type": "object", "properties": {
        key: {"type": "string"} if isinstance(value, str) else {} for key, value in c.arguments.items()}})
        for c in calls]


@pytest.mark.parametrize("name", NEW)
@given(calls=calls)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_format_then_parse_gives_back_the_calls_and_the_content(name, calls):
    assume(not any(marker in json.dumps([c.arguments for c in calls], ensure_ascii=False) for marker in MARKERS))
    parser = get_parser(name)
    result = parser.parse(parser.format(calls, content="Let me think."), _tools(calls))
    assert result.errors == []
    assert [(c.name, c.arguments) for c in result.calls] == [(c.name, c.arguments) for c in calls]
    assert [c.id for c in result.calls] == [f"call_{i}" for i in range(len(calls))]
    assert result.content == "Let me think."


@pytest.mark.parametrize("name", NEW)
@given(text=st.text(max_size=400) | st.lists(st.sampled_from(PIECES), max_size=60).map("".join))
@settings(max_examples=300)
def test_any_text_parses_without_raising(name, text):
    result = get_parser(name).parse(text)
    assert isinstance(result.calls, list) and isinstance(result.errors, list)


@pytest.mark.parametrize("name", NEW)
def test_plain_text_is_all_content(name):
    result = get_parser(name).parse("I would go up, then left.")
    assert (result.calls, result.errors, result.content) == ([], [], "I would go up, then left.")


MOVE = ToolSpec(name="move", parameters={"type": "object", "properties": {
    "direction": {"type": "string"}, "steps": {"type": "integer"}, "label": {"type": "string"}}})
UP = ("move", {"direction": "up", "steps": 2})


@pytest.mark.parametrize("name, text, content", [
    # Qwen3-Coder's template: content, then each call with one parameter block per argument
    ("qwen3_coder", ("Going up.\n\n<tool_call>\n<function=move>\n<parameter=direction>\nup\n</parameter>\n"
                    "<parameter=steps>\n2\n</parameter>\n</function>\n</tool_call>"), "Going up."),
    # Llama 3.1's JSON template: the object is the whole message; models may lead with <|python_tag|>
    ("llama3_json", '{"name": "move", "parameters": {"direction": "up", "steps": 2}}', ""),
    ("llama3_json", '<|python_tag|>{"name": "move", "parameters": {"direction": "up", "steps": 2}}', ""),
    # Mistral: the v11 layout, v13's call id, and the older JSON list with its 9-character id
    ("mistral", 'Going up.[TOOL_CALLS]move[ARGS]{"direction": "up", "steps": 2}', "Going up."),
    ("mistral", '[TOOL_CALLS]move[CALL_ID]a1b2c3d4e[ARGS]{"direction": "up", "steps": 2}', ""),
    ("mistral", '[TOOL_CALLS] [{"name": "move", "arguments": {"direction": "up", "steps": 2}, "id": "a1b2c3d4e"}]',
     ""),
    # DeepSeek V3.1 and V3 (R1): name then JSON, or "function", the name and a fenced block
    ("deepseek", ('Going up.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>move<｜tool▁sep｜>{"direction": "up", "steps": 2}'
                 "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"), "Going up."),
    ("deepseek", ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>move\n```json\n"
                 '{"direction": "up", "steps": 2}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'), ""),
    # gpt-oss: reasoning on analysis (left out), the call on commentary, recipient before or after the channel
    ("harmony", ("<|channel|>analysis<|message|>Up is free.<|end|><|start|>assistant<|channel|>commentary "
                'to=functions.move <|constrain|>json<|message|>{"direction": "up", "steps": 2}<|call|>'), ""),
    ("harmony", ('<|start|>assistant to=functions.move<|channel|>commentary json<|message|>{"direction": "up", '
                '"steps": 2}<|call|>'), ""),
])
def test_the_calls_each_family_writes(name, text, content):
    result = get_parser(name).parse(text, [MOVE])
    assert result.errors == []
    assert [(c.name, c.arguments) for c in result.calls] == [UP]
    assert result.content == content


def test_qwen3_coder_reads_values_by_the_tools_schema():
    text = ("<tool_call>\n<function=move>\n<parameter=direction>\nup\n</parameter>\n<parameter=steps>\n3\n"
            "</parameter>\n<parameter=label>\n3\n</parameter>\n<parameter=note>\nTrue\n</parameter>\n"
            "<parameter=path>\n[1, 2]\n</parameter>\n<parameter=code>\nif x:\n    y = 1\n</parameter>\n"
            "</function>\n</tool_call>")
    arguments = get_parser("qwen3_coder").parse(text, [MOVE]).calls[0].arguments
    assert arguments == {"direction": "up", "steps": 3, "label": "3", "note": True, "path": [1, 2],
                         "code": "if x:\n    y = 1"}


def test_qwen3_coder_reads_a_parameter_left_unclosed_up_to_the_next():
    text = "<tool_call><function=move><parameter=direction>up<parameter=steps>2</function></tool_call>"
    assert get_parser("qwen3_coder").parse(text, [MOVE]).calls[0].arguments == {"direction": "up", "steps": 2}


@pytest.mark.parametrize("name, text, error", [
    ("qwen3_coder", "<tool_call>\nmove up\n</tool_call>", "no <function=name>"),
    ("llama3_json", '{"name": "move", "parameters": {"direction": "up"', "not valid JSON"),
    ("llama3_json", '{"name": "move", "parameters": [1, 2]}', "not a JSON object"),
    ("mistral", "[TOOL_CALLS]move up", "must be [TOOL_CALLS]name[ARGS]"),
    ("mistral", '[TOOL_CALLS]move[ARGS]{"direction": ', "not valid JSON"),
    ("mistral", '[TOOL_CALLS] [{"name": "move", "arguments": {}', "not valid JSON"),
    ("deepseek", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>move<｜tool▁sep｜>{up}<｜tool▁call▁end｜>", "not a JSON"),
    ("harmony", "<|channel|>commentary to=functions.move <|constrain|>json<|message|>{up}<|call|>", "not a JSON"),
])
def test_a_broken_call_is_an_error_the_agent_reads(name, text, error):
    result = get_parser(name).parse(text, [MOVE])
    assert result.calls == [] and len(result.errors) == 1 and error in result.errors[0]


@pytest.mark.parametrize("name", NEW)
def test_too_many_calls_and_too_deep_arguments_are_refused(name):
    parser = get_parser(name)
    many = parser.parse(parser.format([ToolCall(id="x", name="m", arguments={}) for _ in range(20)]))
    assert len(many.calls) == 16 and "too many" in many.errors[0]
    deep = json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    result = parser.parse(parser.format([ToolCall(id="x", name="m", arguments={"d": deep})]))
    assert result.calls == [] and f"more than {MAX_DEPTH} levels" in result.errors[0]


@pytest.mark.parametrize("template, name", [
    ("{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}{{- '<parameter=' + args_name + '>' }}",
     "qwen3_coder"),
    ("For each function call, return a json object within <tool_call></tool_call> XML tags", "hermes"),
    ("{{- '<|python_tag|>' }}{{- '{\"name\": \"' + tool_call.name + '\", \"parameters\": ' }}", "llama3_json"),
    ("{{- '[TOOL_CALLS]' + tool.name + '[ARGS]' + arguments }}", "mistral"),
    ("{{'<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['function']['name'] + '<｜tool▁sep｜>'}}", "deepseek"),
    ("{{- ' to=functions.' + tool_call.name + ' <|constrain|>json<|message|>' }}", "harmony"),
    ("{% for message in messages %}{{ message.content }}{% endfor %}", None),
    (None, None),
])
def test_the_format_a_template_declares(template, name):
    assert template_format(template) == name


def test_every_format_is_registered_by_its_name():
    assert set(PARSERS) == {"hermes", "pythonic", *NEW}
    assert all(get_parser(name).name == name for name in PARSERS)


QWEN3_CODER_TEMPLATE = "{{- '<tool_call>\\n<function=' + name + '>\\n' }}{{- '<parameter=' + key + '>\\n' }}"


def test_parser_auto_reads_the_template_from_a_model_folder_in_either_file(tmp_path):
    (tmp_path / "jinja").mkdir()
    (tmp_path / "jinja" / "chat_template.jinja").write_text(QWEN3_CODER_TEMPLATE)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "tokenizer_config.json").write_text(json.dumps({"chat_template": [
        {"name": "default", "template": "{{ messages }}"},
        {"name": "tool_use", "template": "[TOOL_CALLS]"}]}))
    assert chat_template(tmp_path / "jinja") == QWEN3_CODER_TEMPLATE
    assert resolve_parser({"parser": "auto", "size": 4}, tmp_path / "jinja") == {"parser": "qwen3_coder", "size": 4}
    assert resolve_parser({"parser": "auto"}, tmp_path / "config") == {"parser": "mistral"}
    assert resolve_parser({"parser": "hermes"}, tmp_path / "missing") == {"parser": "hermes"}
    with pytest.raises(ValueError, match="env.kwargs.parser: auto takes the tool-call format"):
        resolve_parser({"parser": "auto"}, tmp_path / "missing", "env.kwargs.parser")


def test_an_env_made_with_parser_auto_on_its_own_is_told_to_name_the_format():
    with pytest.raises(ValueError, match="parser: auto is resolved from a model's chat template"):
        get_parser("auto")


"""The chat template of agentgym's local models: ChatML with Qwen2.5-style (Hermes) tool calls.

Rules the rollout relies on (token-in, token-out):

- An assistant message without tool calls renders exactly as ``<|im_start|>assistant\\n`` + content +
  ``<|im_end|>\\n``, the content verbatim (never stripped).
- Each message's text depends only on itself and the message before it, never on later ones, so
  rendering a prefix of a conversation gives a string prefix of rendering the whole conversation.
  That is why consecutive ``tool`` messages share one user turn that is closed by whatever comes
  next (the next message or the generation prompt), not by the last tool message itself: a
  conversation that ends with tool results and no generation prompt leaves that turn open.
- ``add_generation_prompt`` appends ``<|im_start|>assistant\\n`` (after closing an open tool turn).

With ``tools``, the first system block lists each tool's JSON schema on its own line inside
``<tools></tools>``; a leading system message's content goes first in that block. Assistant tool
calls render as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>`` blocks after the
content, one per line, exactly as :class:`agentgym.HermesParser` writes them. Content may be a
string or a list of parts: text parts are joined, image parts become ``<image>``.
"""

CHAT_TEMPLATE = r"""
{%- macro render_content(content) -%}
    {%- if content is none -%}
    {%- elif content is string -%}
        {{- content -}}
    {%- else -%}
        {%- for part in content -%}
            {%- if part.type == "text" -%}
                {{- part.text -}}
            {%- elif part.type in ("image", "image_url") -%}
                {{- "<image>" -}}
            {%- endif -%}
        {%- endfor -%}
    {%- endif -%}
{%- endmacro -%}

{%- set system_in_tools = tools and messages and messages[0].role == "system" -%}
{%- if tools -%}
    {{- "<|im_start|>system\n" -}}
    {%- if system_in_tools -%}
        {{- render_content(messages[0].content) + "\n\n" -}}
    {%- endif -%}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" -}}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\n<tools>" -}}
    {%- for tool in tools -%}
        {{- "\n" + tool | tojson -}}
    {%- endfor -%}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments " -}}
    {{- "within <tool_call></tool_call> XML tags:\n<tool_call>\n" -}}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- endif -%}

{%- for message in messages -%}
    {%- set after_tool = not loop.first and loop.previtem.role == "tool" -%}
    {%- if after_tool and message.role != "tool" -%}
        {{- "<|im_end|>\n" -}}
    {%- endif -%}
    {%- if loop.first and system_in_tools -%}
    {%- elif message.role == "tool" -%}
        {%- if not after_tool -%}
            {{- "<|im_start|>user" -}}
        {%- endif -%}
        {{- "\n<tool_response>\n" + render_content(message.content) + "\n</tool_response>" -}}
    {%- elif message.role == "assistant" and message.tool_calls -%}
        {%- set text = render_content(message.content) -%}
        {{- "<|im_start|>assistant\n" + text -}}
        {%- for call in message.tool_calls -%}
            {%- set call = call.function if call.function is defined else call -%}
            {%- if text or not loop.first -%}
                {{- "\n" -}}
            {%- endif -%}
            {{- '<tool_call>\n{"name": ' + call.name | tojson + ', "arguments": ' -}}
            {%- if call.arguments is string -%}
                {{- call.arguments -}}
            {%- else -%}
                {{- call.arguments | tojson -}}
            {%- endif -%}
            {{- "}\n</tool_call>" -}}
        {%- endfor -%}
        {{- "<|im_end|>\n" -}}
    {%- else -%}
        {{- "<|im_start|>" + message.role + "\n" + render_content(message.content) + "<|im_end|>\n" -}}
    {%- endif -%}
{%- endfor -%}

{%- if add_generation_prompt -%}
    {%- if messages and messages[-1].role == "tool" -%}
        {{- "<|im_end|>\n" -}}
    {%- endif -%}
    {{- "<|im_start|>assistant\n" -}}
{%- endif -%}
""".strip()
"""The Jinja source, as saved in ``tokenizer_config.json`` / ``chat_template.jinja``."""

"""``agentgym serve``: an OpenAI-compatible HTTP server over an inference engine.

Endpoints: ``GET /v1/models``; ``POST /v1/chat/completions`` (tools and tool calls, ``n``, the
sampled tokens' logprobs, SSE streaming); ``POST /v1/completions`` (text or token-id prompts, and
vLLM's ``return_tokens_as_token_ids`` extension so a token-level client reads exact ids).
Conversations are rendered with the model's chat template; tool calls are read back from the text
with the Hermes parser. Streams are sent once the response is generated, in OpenAI's chunk format.

Errors use OpenAI's JSON shape: 400 names the bad field in ``param``; a request for a model other
than the served one is a 404 naming the served model; an engine shut down mid-request is a 503.
"""

from agentgym.serve.app import create_app, serve
from agentgym.serve.cli import serve_command
from agentgym.serve.schemas import APIError

__all__ = ["APIError", "create_app", "serve", "serve_command"]

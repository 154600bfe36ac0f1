"""``agentgym serve``: an OpenAI-compatible HTTP server over an inference engine.

Endpoints: ``GET /v1/models``; ``POST /v1/chat/completions`` (tools and tool calls, ``n``, the
sampled tokens' logprobs, SSE streaming); ``POST /v1/completions`` (text or token-id prompts, and
vLLM's ``return_tokens_as_token_ids`` extension so a token-level client reads exact ids).
Conversations are rendered with the model's chat template (in a worker thread); tool calls are read
back from the text with the Hermes parser. Streams send the tokens as the engine samples them, in
OpenAI's chunk format (:mod:`agentgym.serve.streaming`); a client that goes away cancels its requests.

Errors use OpenAI's JSON shape: 400 names the bad field in ``param`` (``context_length_exceeded`` for
a prompt that cannot fit the model's context, refused before it is rendered); a body over the size
limit is a 413, refused before it is read; an unknown route is a 404 and a request for a model other
than the served one a 404 naming the served model; an engine shut down mid-request is a 503.
"""

from agentgym.serve.app import create_app, serve
from agentgym.serve.cli import serve_command
from agentgym.serve.schemas import APIError

__all__ = ["APIError", "create_app", "serve", "serve_command"]

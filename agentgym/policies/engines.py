"""Model-backed policies by engine name: what ``agentgym eval --engine`` and the trainers start from."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from agentgym.inference import engine_spec, engines
from agentgym.inference.hosts import EngineHost, LocalEngineHost
from agentgym.inference.types import SamplingParams
from agentgym.policies.chat import ChatPolicy
from agentgym.policies.context import ContextPolicy
from agentgym.policies.lm import LMPolicy


@asynccontextmanager
async def engine_policy(
    engine: str,
    model: str | Path,
    *,
    base_url: str | None = None,
    tokenizer: str | Path | None = None,
    sampling: SamplingParams | None = None,
    max_context: int = 4096,
    context: ContextPolicy | None = None,
    backend: EngineHost | None = None,
    **engine_kwargs: Any,
) -> AsyncIterator[LMPolicy | ChatPolicy]:
    """Start ``engine`` on ``model`` (a local folder for a local engine such as ``torch``/``vllm``, a served model
    name for a remote one such as ``openai`` at ``base_url``), yield a policy backed by it, and close the engine
    afterwards. On a remote engine, a local ``tokenizer`` makes the policy token-level (``/v1/completions``, as on
    ``torch``) instead of chat, which keeps within ``max_context`` as ``context`` says.
    ``backend`` makes a local engine (on ``ray``: replicas as actors)."""
    backend = backend or LocalEngineHost()
    label = f"{engine}-{Path(str(model)).name or model}"
    spec = engine_spec(engine)
    if spec.kind == "remote":
        if backend.name != "local":
            replicable = ", ".join(name for name, other in engines().items() if other.replicable)
            raise ValueError(f"the {backend.name} backend plays with an engine it can replicate ({replicable}), or a "
                             f"reference policy; the {engine} engine's connection stays in this process")
        if not base_url:
            raise ValueError(f"the {engine} engine needs base_url (the server's /v1 address)")
        client = spec.load()(base_url, str(model), tokenizer=tokenizer, **engine_kwargs)
        policy: LMPolicy | ChatPolicy = (LMPolicy(client, sampling, max_context=max_context, context=context, name=label) if tokenizer
                                         else ChatPolicy(client, sampling, name=label))
    else:
        if not Path(model).is_dir():
            raise ValueError(f"model {str(model)!r} is not a folder; build one with `agentgym model init --preset tiny DIR`")
        client = backend.engine(engine, model, **engine_kwargs)
        policy = LMPolicy(client, sampling, max_context=max_context, context=context, name=label)
    try:
        yield policy
    finally:
        await client.close()

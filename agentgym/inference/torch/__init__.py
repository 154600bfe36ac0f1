"""The ``torch`` engine: a Hugging Face model in this process with continuous batching, the default on the CPU and
in tests (:mod:`agentgym.inference.torch.engine`). Importing this package imports neither torch nor the engine."""

from __future__ import annotations

from typing import Any

from agentgym.inference.spec import EngineSettings, EngineSpec


def engine_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """The rows decoded together, the trainer's device, the episode's context and the run's CPU threads (which a
    replica in a process of its own sets; in the trainer's process they are set already)."""
    return {"max_batch_size": settings.max_batch_size, "device": settings.device,
            "max_model_len": settings.max_context, "threads": settings.threads}


SPEC = EngineSpec("torch", "agentgym.inference.torch.engine:TorchEngine", kind="local", replicable=True, trees=True,
                  sleeps=True, kwargs=engine_kwargs)

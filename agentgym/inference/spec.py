"""What agentgym knows of an inference engine before importing it: an :class:`EngineSpec` per engine name.

The config validator, the trainer, the Ray backend, ``agentgym eval`` and the policies read an engine's spec, never
its name. Adding an engine is one package (its class, behind :class:`~agentgym.inference.types.InferenceEngine`) and
one :func:`register_engine`; a package outside agentgym registers its engines from a function named in the
entry-point group ``agentgym.engines``, as environments are through ``agentgym.envs``.
"""

from __future__ import annotations

import difflib
import importlib
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from agentgym.plugins import EntryPointGroup

ENTRY_POINT_GROUP = "agentgym.engines"
EngineKind = Literal["local", "remote"]
"""``local``: the engine holds the model, built as ``Engine(model_folder, **kwargs)``; ``remote``: it talks to a
server that holds it, built as ``Engine(base_url, model_name, tokenizer=..., **kwargs)``."""


@dataclass(frozen=True)
class EngineSettings:
    """What a training run asks of its engine, whichever engine it is: its ``engine:`` section and what the run
    decided."""

    max_batch_size: int
    """Requests decoded together."""
    max_context: int
    """Prompt plus response tokens of an episode."""
    threads: int | None
    """CPU threads (None: the library's default)."""
    device: str
    """The device the trainer computes on."""
    dtype: str | None
    """The dtype the trainer trains in (None: the engine's default)."""
    sleeps: bool
    """Whether the engine is sent to sleep between its turns (colocated with the trainer, or multiplexed)."""


def no_kwargs(settings: EngineSettings) -> dict[str, Any]:
    """An engine that takes none of a run's settings: its own defaults and the config's ``engine.kwargs``."""
    return {}


@dataclass(frozen=True)
class EngineSpec:
    """An engine by name: where its class is, what it can do, and how a run's settings become its arguments."""

    name: str
    entry_point: str
    """``package.module:Class``, imported on first use."""
    kind: EngineKind = "local"
    replicable: bool = False
    """Ray can run it as replicas (actors), one per process: its arguments travel, and its weights come by value."""
    trees: bool = False
    """It grows LATR trees (:class:`~agentgym.inference.types.TreeEngine`)."""
    untempered_tree_logprobs: bool = False
    """Its tree tokens carry the logprobs of ``softmax(logits)``, the behaviour policy's only at temperature 1 with
    ``top_p`` 1 (vLLM); else those of the sampling distribution."""
    sleeps: bool = False
    """It hands its device to a colocated trainer (:class:`~agentgym.inference.types.SleepingEngine`), which a
    trainer drives."""
    kwargs: Callable[[EngineSettings], dict[str, Any]] = no_kwargs
    """A training run's settings as constructor arguments (the config's ``engine.kwargs`` go over them)."""

    @property
    def trainable(self) -> bool:
        """Whether a trainer can drive it: it holds the model, takes new weights, and sleeps."""
        return self.kind == "local" and self.sleeps

    def load(self) -> type:
        """The engine's class, imported now."""
        module, _, attr = self.entry_point.partition(":")
        cls: type = getattr(importlib.import_module(module), attr)
        return cls


ENGINES: dict[str, EngineSpec] = {}
"""The registered engines by name (:func:`engines` also loads the plugins' first)."""
_plugins = EntryPointGroup(ENTRY_POINT_GROUP)


def register_engine(spec: EngineSpec) -> EngineSpec:
    """Make ``spec`` known under its name; registering a name again replaces it with a warning."""
    if not isinstance(spec.entry_point, str) or ":" not in spec.entry_point:
        raise ValueError(f"entry_point of engine {spec.name!r} must be 'package.module:Class', got {spec.entry_point!r}")
    previous = ENGINES.get(spec.name)
    if previous is not None and previous != spec:
        warnings.warn(f"overriding the registered engine {spec.name}", stacklevel=2)
    ENGINES[spec.name] = spec
    return spec


def engines() -> dict[str, EngineSpec]:
    """Every registered engine, the plugins' included."""
    _plugins.load()
    return dict(ENGINES)


def engine_spec(name: str) -> EngineSpec:
    """The spec of engine ``name``; an unknown name is a :class:`ValueError` listing the registered ones."""
    if name not in ENGINES:
        _plugins.load()
    if name in ENGINES:
        return ENGINES[name]
    close = difflib.get_close_matches(name, ENGINES, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ValueError(f"unknown engine {name!r}; {hint}choose one of: {', '.join(ENGINES)}")

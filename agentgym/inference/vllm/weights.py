"""Sending a trainer's state dict to a running vLLM engine in the same process, over a chosen transport.

vLLM's weight-transfer API has a trainer side (a ``TrainerWeightTransferEngine`` that iterates a
``WeightSource`` and drives four control calls through a synchronous client) and a worker side inside
vLLM's workers. :class:`WeightSync` runs the trainer side on a thread and answers its control calls with
the ``AsyncLLM`` on the caller's event loop, so the same code serves every transport:

* ``agentgym_shm`` (:mod:`agentgym.inference.vllm.shm`): shared memory, for vLLM's CPU build;
* ``ipc``: CUDA IPC handles, for a trainer on the GPUs the engine runs on (colocated, as verl and ROLL);
* ``nccl``: a NCCL group between trainer and workers, for an engine on other GPUs (disaggregated, as
  slime and OpenRLHF); it needs ``master_address``, ``master_port`` and ``world_size`` in the options.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import os
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any

import torch
from vllm.distributed.weight_transfer.base import (
    ParamMeta,
    WeightSource,
    WeightTransferInitRequest,
    WeightTransferUpdatePayload,
    WeightTransferUpdateRequest,
)

TRANSPORTS: dict[str, str] = {
    "agentgym_shm": "agentgym.inference.vllm.shm:SharedMemoryTrainerInitInfo",
    "ipc": "vllm.distributed.weight_transfer.ipc_engine:IPCTrainerInitInfo",
    "nccl": "vllm.distributed.weight_transfer.nccl_engine:NCCLTrainerInitInfo",
}
"""Each transport's trainer-side settings class; its fields (but ``rank``) are the transport's options."""


def default_transport(device_type: str) -> str:
    """``agentgym_shm`` when vLLM runs on the CPU, CUDA IPC when it shares the trainer's GPUs."""
    return "agentgym_shm" if device_type == "cpu" else "ipc"


def with_tied_output(weights: Mapping[str, torch.Tensor], tied: bool) -> Mapping[str, torch.Tensor]:
    """``weights`` with ``lm_head.weight`` added as the input embedding where the model ties the two and the
    state dict leaves it out (as a saved checkpoint does): vLLM reloads a tied output layer only from its
    own name, and keeps serving the old one otherwise."""
    if not tied or "lm_head.weight" in weights:
        return weights
    inputs = [name for name in weights if name.endswith("embed_tokens.weight")]
    return {**weights, "lm_head.weight": weights[inputs[0]]} if len(inputs) == 1 else weights


class StateDictSource(WeightSource):
    """The tensors of the state dict being sent, in its order (Hugging Face names), on ``device``."""

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)
        self.weights: Mapping[str, torch.Tensor] = {}

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(name, tensor.dtype, tuple(tensor.shape)) for name, tensor in self.weights.items()]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for name, tensor in self.weights.items():
            yield name, tensor.to(self.device)


class _LoopClient:
    """vLLM's synchronous weight-sync client protocol, answered by an ``AsyncLLM`` on its event loop."""

    def __init__(self, llm: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._llm, self._loop = llm, loop

    def _call(self, coro: Coroutine[Any, Any, Any]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def init_weight_transfer_engine(self, init_info: dict[str, Any]) -> None:
        self._call(self._llm.init_weight_transfer_engine(WeightTransferInitRequest(init_info=init_info)))

    def start_weight_update(self) -> None:
        self._call(self._llm.start_weight_update())

    def update_weights(self, update_info: WeightTransferUpdatePayload) -> None:
        self._call(self._llm.update_weights(WeightTransferUpdateRequest(update_info=update_info)))

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        self._call(self._llm.finish_weight_update(weight_version))


def prepare_environment(transport: str) -> None:
    """Set what ``transport`` needs in this process's environment before vLLM starts (its engine process inherits
    it). ``ipc`` sends each update's CUDA IPC handles, tuples holding torch's tensor and storage classes and a dtype,
    to vLLM's engine process as a utility call, which vLLM's msgpack encoder carries only as a pickle, allowed by
    ``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (as vLLM's own IPC examples set it; the pickles travel over the engine's
    local socket between this process and the engine it started). A value the caller set is left as it is."""
    if transport == "ipc":
        os.environ.setdefault("VLLM_ALLOW_INSECURE_SERIALIZATION", "1")


def transport_settings(transport: str, options: Mapping[str, Any] | None = None) -> Any:
    """The trainer-side settings of ``transport`` (as sender, rank 0) from ``options``; a bad name or
    option is a :class:`ValueError` that names it and the valid ones."""
    if transport not in TRANSPORTS:
        raise ValueError(f"unknown weight transport {transport!r}; choose one of: {', '.join(TRANSPORTS)}")
    module, _, name = TRANSPORTS[transport].partition(":")
    cls = getattr(importlib.import_module(module), name)
    try:
        return cls(rank=0, **dict(options or {}))
    except TypeError as exc:
        fields = [f.name for f in dataclasses.fields(cls) if f.name != "rank"]
        raise ValueError(f"bad options for the {transport} weight transport ({exc}); "
                         f"its options are: {', '.join(fields) or 'none'}") from None


class WeightSync:
    """The trainer side of one transport to one engine: the handshake on the first :meth:`send`."""

    def __init__(self, llm: Any, transport: str, options: Mapping[str, Any] | None = None) -> None:
        from agentgym.inference.vllm.shm import register

        register()
        self.settings = transport_settings(transport, options)
        self._llm = llm
        self._tied = bool(getattr(llm.model_config.hf_text_config, "tie_word_embeddings", False))
        self._source = StateDictSource("cpu" if transport == "agentgym_shm" else "cuda")
        self._client: _LoopClient | None = None
        self._engine: Any = None

    async def send(self, weights: Mapping[str, torch.Tensor], version: int) -> None:
        """Load ``weights`` into every worker of the engine and tag them ``version``."""
        self._source.weights = with_tied_output({name: tensor.detach() for name, tensor in weights.items()}, self._tied)
        if self._client is None:  # vLLM's engine answers on the loop that first used it: this one
            self._client = _LoopClient(self._llm, asyncio.get_running_loop())
        try:
            await asyncio.to_thread(self._send, self._client)
        finally:
            self._source.weights = {}
        await self._llm.update_weight_version(str(version))

    def _send(self, client: _LoopClient) -> None:
        from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory

        if self._engine is None:
            self._engine = WeightTransferTrainerFactory.trainer_init(self.settings, client=client, source=self._source)
        self._engine.send_weights()

    async def close(self) -> None:
        """Release the transport on both sides (the engine keeps serving)."""
        if self._engine is None:
            return
        engine, self._engine = self._engine, None
        await asyncio.to_thread(engine.shutdown)
        await self._llm.shutdown_weight_transfer_engine()

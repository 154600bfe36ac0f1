"""The ``agentgym_shm`` weight transport of the ``vllm`` engine: shared memory between processes on one host.

It plugs into vLLM's weight-transfer API beside vLLM's own ``ipc`` (CUDA IPC, trainer and engine on the
same GPUs) and ``nccl`` (a process group, engine on other GPUs or hosts) transports, and speaks the same
four calls: ``init_weight_transfer_engine`` once, then per update ``start_weight_update``,
``update_weights`` and ``finish_weight_update``. This one carries CPU tensors, so it is the transport of
vLLM's CPU build, and it works for any model vLLM can load, since the worker loads the received tensors
through vLLM's layer-wise reload (as its ``ipc`` transport does).

* At ``init``, the trainer creates a file in ``/dev/shm`` sized to its weights, the workers map it, and the
  trainer unlinks it: the memory lives while both sides map it and nothing is left behind by a crash.
* Each update, the trainer copies every tensor into the mapping at a 64-byte-aligned offset and sends
  only names, dtypes, shapes and offsets; each worker views the mapping at those offsets and loads.
  An update therefore costs two memory copies and no socket traffic for the tensors.

:func:`register` is a vLLM plugin (entry point group ``vllm.general_plugins``), so both sides of the
transport are known in every process vLLM starts.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Self

import torch
from vllm.distributed.weight_transfer.base import (
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    VLLMWeightSyncClient,
    WeightSource,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
    materialize_full_tensor,
)

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.config.weight_transfer import WeightTransferConfig

_RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"


def _weightless_layers(record: logging.LogRecord) -> bool:
    """Drop the reload's warning that a rotary embedding (which holds no checkpoint weights) loaded none."""
    return not (
        isinstance(record.args, tuple)
        and record.args
        and str(record.args[0]).endswith("RotaryEmbedding")
        and "Failed to load" in record.msg
    )


BACKEND = "agentgym_shm"
"""The name both sides are registered under in vLLM's weight-transfer factories."""
_ALIGNMENT = 64
"""Each tensor starts at a multiple of this many bytes, so a view of it is aligned for any dtype."""


@dataclass
class SharedMemoryInitInfo(WeightTransferInitInfo):
    """What a worker maps: the shared file (still linked while workers open it) and its size."""

    path: str
    nbytes: int


@dataclass
class SharedMemoryUpdateInfo(WeightTransferUpdateInfo):
    """Where each tensor of an update lies in the mapping."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]
    offsets: list[int]

    def __post_init__(self) -> None:
        if not len(self.names) == len(self.dtype_names) == len(self.shapes) == len(self.offsets):
            raise ValueError("names, dtype_names, shapes and offsets must have the same length")


class SharedMemoryWeightTransferEngine(WeightTransferEngine[SharedMemoryInitInfo, SharedMemoryUpdateInfo]):
    """The worker side: maps the trainer's file once, then loads each update from views into it."""

    init_info_cls = SharedMemoryInitInfo
    update_info_cls = SharedMemoryUpdateInfo

    def __init__(self, config: WeightTransferConfig, vllm_config: VllmConfig, device: torch.device,
                 model: torch.nn.Module) -> None:
        super().__init__(config, vllm_config, device, model)
        self._mapping: torch.Tensor | None = None
        logging.getLogger(_RELOAD_LOGGER).addFilter(_weightless_layers)


    def init_transfer_engine(self, init_info: SharedMemoryInitInfo) -> None:
        self._mapping = torch.from_file(init_info.path, shared=True, size=init_info.nbytes, dtype=torch.uint8)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)  # type: ignore[no-untyped-call]

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # the base class synchronizes an accelerator afterwards; the copies here are done when they return
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: SharedMemoryUpdateInfo) -> None:
        if self._mapping is None:
            raise RuntimeError("agentgym_shm: update_weights before init_weight_transfer_engine")
        weights = []
        for name, dtype_name, shape, offset in zip(
            update_info.names, update_info.dtype_names, update_info.shapes, update_info.offsets, strict=True
        ):
            dtype = getattr(torch, dtype_name)
            nbytes = math.prod(shape) * dtype.itemsize
            weights.append((name, self._mapping[offset : offset + nbytes].view(dtype).view(shape)))
        self.model.load_weights(weights)  # type: ignore[operator]  # a vLLM model, typed as a torch Module

    def shutdown(self) -> None:
        self._mapping = None


@dataclass
class SharedMemoryTrainerInitInfo(TrainerInitInfo):
    """The trainer side's settings: where the shared file is made (a tmpfs, so it never reaches a disk)."""

    backend: ClassVar[str] = BACKEND
    directory: str = "/dev/shm"


class SharedMemoryTrainerEngine(TrainerWeightTransferEngine[SharedMemoryTrainerInitInfo]):
    """The trainer side: owns the mapping and copies the source's tensors into it on every update.

    As with vLLM's transports, every trainer rank iterates the source (gathering a sharded tensor is a
    collective) and only the sender (rank 0) writes and talks to the engine.
    """

    init_info_cls = SharedMemoryTrainerInitInfo

    def __init__(self, *, client: VLLMWeightSyncClient, source: WeightSource, is_sender: bool,
                 mapping: torch.Tensor | None) -> None:
        super().__init__(client=client, source=source, is_sender=is_sender)
        self._mapping = mapping

    @classmethod
    def trainer_init(cls, init_info: SharedMemoryTrainerInitInfo, *, client: VLLMWeightSyncClient,
                     source: WeightSource | None = None) -> Self:
        if source is None:
            raise ValueError("the agentgym_shm transport needs a WeightSource")
        mapping = None
        if init_info.is_sender:
            _, nbytes = _layout([(meta.dtype, meta.shape) for meta in source.metadata()])
            path = Path(init_info.directory) / f"agentgym-weights-{os.getpid()}-{uuid.uuid4().hex[:12]}"
            try:
                with path.open("wb") as file:
                    file.truncate(nbytes)
                mapping = torch.from_file(str(path), shared=True, size=nbytes, dtype=torch.uint8)
                client.init_weight_transfer_engine(asdict(SharedMemoryInitInfo(path=str(path), nbytes=nbytes)))
            finally:
                path.unlink(missing_ok=True)  # both sides hold their mappings; the name is no longer needed
        return cls(client=client, source=source, is_sender=init_info.is_sender, mapping=mapping)

    def send_weights(self) -> None:
        assert self.source is not None
        tensors = [(name, materialize_full_tensor(tensor).detach()) for name, tensor in self.source]
        if not self.is_sender:
            return
        assert self._mapping is not None
        offsets, nbytes = _layout([(tensor.dtype, tuple(tensor.shape)) for _, tensor in tensors])
        if nbytes > self._mapping.numel():
            raise ValueError(f"the weights grew to {nbytes} bytes, past the {self._mapping.numel()} mapped at init")
        self.client.start_weight_update()
        for (_, tensor), offset in zip(tensors, offsets, strict=True):
            flat = tensor.contiguous().reshape(-1).view(torch.uint8)
            self._mapping[offset : offset + flat.numel()].copy_(flat)
        update = SharedMemoryUpdateInfo(
            names=[name for name, _ in tensors],
            dtype_names=[str(tensor.dtype).removeprefix("torch.") for _, tensor in tensors],
            shapes=[list(tensor.shape) for _, tensor in tensors],
            offsets=offsets,
        )
        self.client.update_weights(asdict(update))
        self.client.finish_weight_update()

    def shutdown(self) -> None:
        self._mapping = None


def _layout(tensors: list[tuple[torch.dtype, tuple[int, ...]]]) -> tuple[list[int], int]:
    """Aligned byte offsets of tensors laid end to end, and the bytes they take."""
    offsets, end = [], 0
    for dtype, shape in tensors:
        start = -(-end // _ALIGNMENT) * _ALIGNMENT
        offsets.append(start)
        end = start + math.prod(shape) * dtype.itemsize
    return offsets, max(end, 1)


def register() -> None:
    """Make both sides of the transport known to vLLM's factories (a vLLM plugin: runs in each vLLM process)."""
    from vllm.distributed.weight_transfer.factory import (
        WeightTransferEngineFactory,
        WeightTransferTrainerFactory,
    )

    # a ValueError says it is registered already: plugins may load more than once per process
    with contextlib.suppress(ValueError):
        WeightTransferEngineFactory.register_engine(BACKEND, SharedMemoryWeightTransferEngine)
    with contextlib.suppress(ValueError):
        WeightTransferTrainerFactory.register_engine(BACKEND, SharedMemoryTrainerEngine)

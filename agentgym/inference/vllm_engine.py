"""The ``vllm`` engine: vLLM's async engine on a GPU, fed token ids, with weight updates in place.

Each request streams from vLLM's ``AsyncLLM`` as a ``TokensPrompt`` with one logprob per token; for a
vision-language model the request's images go with it as ``multi_modal_data`` (vLLM expands each image
placeholder the chat template wrote into the model's image tokens).
The logprobs are vLLM's *processed* ones (``logprobs_mode="processed_logprobs"``): the distribution
after temperature and top-p, which is the one :mod:`agentgym.inference.sampling` defines.

A weight update cancels the streams in flight (vLLM aborts their requests), loads the weights into
the running model through a worker extension (no restart), resets the prefix cache and bumps the
version. Each interrupted request then continues from its prompt plus what it had generated, so
every token carries the version that sampled it, as with the torch engine. vLLM is imported only
when an engine is built: ``agentgym`` imports without it.
"""

from __future__ import annotations

import asyncio
import base64
import io
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from agentgym.inference._clock import RequestClock
from agentgym.inference.types import EngineStats, FinishReason, GenerationRequest, GenerationResult
from agentgym.messages import ImagePart

_EXTENSION = f"{__name__}.WeightLoader"


class WeightLoader:
    """Methods vLLM mixes into its GPU workers (``worker_extension_cls``) to load weights in place."""

    def agentgym_load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> None:
        """Copy named tensors (Hugging Face names) into the running model."""
        self.model_runner.model.load_weights(weights=weights)  # type: ignore[attr-defined]

    def agentgym_load_checkpoint(self, path: str) -> None:
        """Copy the weights of a Hugging Face checkpoint folder into the running model."""
        tensors = _checkpoint_tensors(Path(path))
        self.model_runner.model.load_weights(weights=tensors)  # type: ignore[attr-defined]


def _checkpoint_tensors(folder: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """The named tensors of a checkpoint folder's ``*.safetensors`` (or ``pytorch_model*.bin``) files."""
    files = sorted(folder.glob("*.safetensors"))
    if files:
        from safetensors import safe_open

        for file in files:
            with safe_open(str(file), framework="pt") as reader:
                for name in reader.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    yield name, reader.get_tensor(name)
        return
    files = sorted(folder.glob("pytorch_model*.bin"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors or pytorch_model*.bin weights in {folder}")
    for file in files:
        yield from torch.load(file, map_location="cpu", weights_only=True).items()


def _pil_image(image: ImagePart) -> Any:
    """An image part as the PIL image vLLM's multimodal processor takes (in RGB)."""
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(image.data))).convert("RGB")


class VLLMEngine:
    """vLLM's ``AsyncLLM`` behind the :class:`~agentgym.inference.types.InferenceEngine` protocol.

    ``engine_args`` go to ``vllm.AsyncEngineArgs`` (e.g. ``dtype``, ``enforce_eager``,
    ``tensor_parallel_size``); ``logprobs_mode`` and ``worker_extension_cls`` are set here.
    """

    name = "vllm"

    def __init__(
        self,
        model: str | Path,
        *,
        seed: int = 0,
        gpu_memory_utilization: float = 0.5,
        max_model_len: int | None = None,
        **engine_args: Any,
    ) -> None:
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
        except ImportError as exc:
            raise ImportError(
                "the vllm engine needs vLLM on a CUDA machine: pip install 'agentgym[vllm]'"
            ) from exc
        from transformers import AutoTokenizer

        for fixed in ("logprobs_mode", "worker_extension_cls"):
            if fixed in engine_args:
                raise ValueError(f"VLLMEngine sets {fixed} itself; leave it out of the engine arguments")
        args = AsyncEngineArgs(
            model=str(model),
            seed=seed,
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            logprobs_mode="processed_logprobs",
            worker_extension_cls=_EXTENSION,
            **engine_args,
        )
        self._llm = AsyncLLMEngine.from_engine_args(args)
        self._tokenizer = AutoTokenizer.from_pretrained(str(model))
        self.multimodal = bool(self._llm.model_config.is_multimodal_model)
        """Whether the model takes images: a request's images go to it; otherwise they are left out."""
        self._version = 0
        self._closed = False
        self._running = asyncio.Event()
        self._running.set()
        self._update_lock = asyncio.Lock()
        self._segments: set[asyncio.Task[FinishReason]] = set()
        self._clock = RequestClock()

    @property
    def version(self) -> int:
        """The policy version of the loaded weights; 0 for those the engine was built with."""
        return self._version

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer."""
        return self._tokenizer

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; a weight update mid-way makes it continue under the new weights."""
        tokens: list[int] = []
        logprobs: list[float] = []
        versions: list[int] = []
        finish: FinishReason = "abort"
        with self._clock.busy():
            while not self._closed:
                await self._running.wait()
                if self._closed:
                    break
                if not self._running.is_set():  # woken by one update, overtaken by the next
                    continue
                segment = asyncio.create_task(
                    self._segment(request, tokens, logprobs, versions, self._version)
                )
                self._segments.add(segment)
                try:
                    await asyncio.wait({segment})
                except asyncio.CancelledError:
                    segment.cancel()
                    raise
                finally:
                    self._segments.discard(segment)
                if not segment.cancelled():
                    finish = segment.result()
                    break
                if len(tokens) >= request.sampling.max_tokens:
                    finish = "length"
                    break
        self._clock.counts.requests += 1
        self._clock.counts.prompt_tokens += len(request.prompt_ids)
        self._clock.counts.generated_tokens += len(tokens)
        return GenerationResult(
            request_id=request.request_id,
            token_ids=tokens,
            logprobs=logprobs,
            versions=versions,
            finish_reason=finish,
            prompt_tokens=len(request.prompt_ids),
        )

    async def _segment(
        self,
        request: GenerationRequest,
        tokens: list[int],
        logprobs: list[float],
        versions: list[int],
        version: int,
    ) -> FinishReason:
        """Stream one vLLM request continuing ``prompt + tokens`` under ``version``, appending as it goes."""
        from vllm import SamplingParams, TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        sampling = request.sampling
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens - len(tokens),
            stop=list(sampling.stop) or None,
            # a continued request draws a fresh stream rather than replaying the first one's
            seed=None if sampling.seed is None else sampling.seed + len(tokens),
            logprobs=0,
            output_kind=RequestOutputKind.DELTA,
        )
        prompt = TokensPrompt(prompt_token_ids=request.prompt_ids + tokens)
        if request.images and self.multimodal:
            prompt["multi_modal_data"] = {"image": [_pil_image(image) for image in request.images]}
        request_id = f"{request.request_id}-{uuid.uuid4().hex[:8]}"
        async for output in self._llm.generate(prompt, params, request_id):
            completion = output.outputs[0]
            for token, entry in zip(completion.token_ids, completion.logprobs or [], strict=True):
                tokens.append(token)
                logprobs.append(float(entry[token].logprob))
                versions.append(version)
            if output.finished:
                reason = completion.finish_reason
                return "length" if reason == "length" else "abort" if reason == "abort" else "stop"
        return "abort"

    async def update_weights(
        self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None
    ) -> int:
        """Load a state dict (Hugging Face names) or a checkpoint folder in place; requests in flight
        are interrupted and continue under the new weights. Returns the new version."""
        async with self._update_lock:
            if not isinstance(weights, Mapping) and not Path(weights).is_dir():
                raise FileNotFoundError(f"no checkpoint folder at {weights}")
            self._running.clear()
            interrupted = [task for task in self._segments if not task.done()]
            for task in interrupted:
                task.cancel()
            await asyncio.gather(*interrupted, return_exceptions=True)
            try:
                if isinstance(weights, Mapping):
                    named = [
                        (name, tensor.detach().to("cpu").contiguous()) for name, tensor in weights.items()
                    ]
                    await self._llm.collective_rpc("agentgym_load_weights", args=(named,))
                else:
                    await self._llm.collective_rpc(
                        "agentgym_load_checkpoint", args=(str(Path(weights).resolve()),)
                    )
                await self._llm.reset_prefix_cache()
                self._version = self._version + 1 if version is None else version
                self._clock.counts.weight_updates += 1
                self._clock.counts.interrupted += len(interrupted)
            finally:
                self._running.set()
            return self._version

    def stats(self) -> EngineStats:
        """Counters since start or the last :meth:`reset_stats`."""
        return self._clock.snapshot()

    def reset_stats(self) -> None:
        """Start counting afresh."""
        self._clock.reset()

    async def close(self) -> None:
        """Abort the requests in flight (they return ``finish_reason="abort"``) and shut vLLM down."""
        if self._closed:
            return
        self._closed = True
        self._running.set()
        pending = [task for task in self._segments if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        self._llm.shutdown()


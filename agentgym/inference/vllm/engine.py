"""The ``vllm`` engine: vLLM's ``AsyncLLM`` fed token ids, with weight updates in place; on a GPU, or on the
CPU with vLLM's CPU build (``bash scripts/setup.sh vllm`` installs the right one).

Each request streams from vLLM as token ids with one logprob per token; for a vision-language model the
request's images go with it as ``multi_modal_data`` (vLLM expands each image placeholder the chat template
wrote into the model's image tokens). The logprobs are vLLM's *processed* ones
(``logprobs_mode="processed_logprobs"``): the distribution after temperature and top-p, which is the one
:mod:`agentgym.inference.sampling` defines and the trainer scores.

A weight update pauses vLLM (``pause_generation``: requests in flight are aborted and the prefix and
multimodal caches are cleared), sends the state dict through vLLM's weight-transfer API over the chosen
transport (:mod:`agentgym.inference.vllm.weights`), sets vLLM's weight version, bumps the version here and
resumes. Each interrupted request then continues from its prompt plus what it had generated, so every
token carries the version that sampled it, as with the torch engine. A checkpoint folder is read here and
sent the same way. vLLM is imported only when an engine is built: ``agentgym``
imports without it.

A LATR tree (:meth:`VLLMEngine.generate_tree`) is driven from here by :mod:`agentgym.inference._tree_driver`:
greedy requests read each branch ahead with its top-k logprobs, and a fork is a new request on the prefix it shares
with its parent, served by vLLM's prefix cache. A greedy request's processed logprobs are the untempered ones
(vLLM applies no temperature or nucleus to a greedy row), which the branch rule needs and the tree tokens record.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import tempfile
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentgym.inference._checkpoint import read_checkpoint
from agentgym.inference._clock import RequestClock
from agentgym.inference._tree_driver import GreedyChunk, grow_tree
from agentgym.inference.tree import ExitBatch, LatrParams, math_token_ids
from agentgym.inference.types import (
    EngineStats,
    FinishReason,
    GenerationRequest,
    GenerationResult,
    TreeResult,
)
from agentgym.messages import ImagePart
from agentgym.models.adapters import adapter_base, write_merged

_SET_HERE = ("model", "seed", "logprobs_mode", "weight_transfer_config")
"""vLLM engine arguments this engine decides; passing them through ``engine_args`` is refused."""
_SHUTDOWN_SECONDS = 15.0
"""How long vLLM's processes get to exit on their own at :meth:`VLLMEngine.close` before they are killed."""
_RETRIES = 3
"""How often one request is sent again when vLLM answers that it should be."""
_CPU_KV_CACHE_BYTES = 1 << 30
"""The KV cache vLLM's CPU build reserves unless told otherwise (its own default sizes it from free memory)."""


@dataclass
class _Progress:
    """What the segments of one request have generated so far."""

    tokens: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    tops: list[tuple[list[int], list[float]]] = field(default_factory=list)
    """Per token, the top-k ids and logprobs, largest first (only when asked for)."""
    cached_tokens: int = 0


class VLLMEngine:
    """vLLM's ``AsyncLLM`` behind the :class:`~agentgym.inference.types.InferenceEngine` protocol.

    ``engine_args`` go to ``vllm.AsyncEngineArgs`` (e.g. ``dtype``, ``enforce_eager``,
    ``tensor_parallel_size``, ``gpu_memory_utilization``); ``dtype`` defaults to the checkpoint's, as the
    trainer loads it (vLLM's own default serves a float32 model in bfloat16). vLLM logs warnings and errors
    only, unless ``VLLM_LOGGING_LEVEL`` says otherwise. ``weight_transport`` picks how updates reach
    the workers: ``agentgym_shm`` (shared memory; the default on the CPU), ``ipc`` (CUDA IPC; the default
    on a GPU, for a trainer on the same GPUs) or ``nccl`` (an engine on other GPUs; its
    ``transport_options`` are ``master_address``, ``master_port`` and ``world_size``).
    """

    name = "vllm"

    def __init__(
        self,
        model: str | Path,
        *,
        seed: int = 0,
        max_model_len: int | None = None,
        weight_transport: str | None = None,
        transport_options: Mapping[str, Any] | None = None,
        **engine_args: Any,
    ) -> None:
        folder, self._merged = _served_folder(model)
        # vLLM logs its whole configuration at INFO from each of its processes, which inherit this setting
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine
            from vllm.config.weight_transfer import WeightTransferConfig
            from vllm.platforms import current_platform
        except ImportError as exc:
            raise ImportError("the vllm engine needs vLLM: run `bash scripts/setup.sh vllm` (vLLM's CPU build on a "
                              "machine without CUDA, vllm on one with it)") from exc
        from pydantic import ValidationError
        from transformers import AutoTokenizer

        from agentgym.inference.vllm.weights import (
            WeightSync,
            default_transport,
            prepare_environment,
            transport_settings,
        )

        for fixed in _SET_HERE:
            if fixed in engine_args:
                raise ValueError(f"VLLMEngine sets {fixed} itself; leave it out of the engine arguments")
        transport = weight_transport or default_transport(current_platform.device_type)
        transport_settings(transport, transport_options)  # a bad transport or option fails before vLLM starts
        prepare_environment(transport)
        engine_args = _with_defaults(engine_args, folder, on_cpu=current_platform.device_type == "cpu")
        try:
            args = AsyncEngineArgs(
                model=str(folder),
                seed=seed,
                max_model_len=max_model_len,  # type: ignore[arg-type]  # None (its default) derives it
                logprobs_mode="processed_logprobs",
                weight_transfer_config=WeightTransferConfig(backend=transport),
                **engine_args,
            )
        except TypeError as exc:
            unknown = ", ".join(sorted(set(engine_args) - set(AsyncEngineArgs.__dataclass_fields__)))
            raise ValueError(f"unknown vLLM engine argument(s): {unknown} (see vllm.AsyncEngineArgs)") from exc
        try:
            self._llm: Any = AsyncLLMEngine.from_engine_args(args)
        except ValidationError as exc:  # vLLM checks its settings before it starts a process
            raise ValueError(f"vLLM refused the engine arguments: {_first_problems(exc)}") from None
        self._tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self._eos_ids = _end_token_ids(self._tokenizer, self._llm.model_config.try_get_generation_config())
        self.multimodal = bool(self._llm.model_config.is_multimodal_model)
        """Whether the model takes images: a request's images go to it; otherwise they are left out."""
        self._weights: Any = WeightSync(self._llm, transport, transport_options)
        self.weight_transport = transport
        """The transport weight updates take (``agentgym_shm``, ``ipc`` or ``nccl``)."""
        self._version = 0
        self._closed = False
        self._running = asyncio.Event()
        self._running.set()
        self._asleep = False
        self._update_lock = asyncio.Lock()
        self._segments: set[asyncio.Task[FinishReason | None]] = set()
        self._clock = RequestClock()
        self._exit_batch = ExitBatch()

    @property
    def version(self) -> int:
        """The policy version of the loaded weights; 0 for those the engine was built with."""
        return self._version

    @property
    def llm(self) -> Any:
        """vLLM's ``AsyncLLM`` under this engine, for what the protocol does not cover (``None`` once closed)."""
        return self._llm

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer."""
        return self._tokenizer

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response; a weight update mid-way makes it continue under the new weights."""
        return (await self._run(request, top_k=0))[0]

    async def greedy_chunk(self, request: GenerationRequest, top_k: int) -> GreedyChunk:
        """Continue ``request`` greedily (its temperature must be 0) with the top ``top_k`` tokens of each position and
        their logprobs, which for a greedy request are vLLM's untempered ones (softmax of the raw logits)."""
        if request.sampling.temperature != 0:
            raise ValueError(f"a greedy chunk needs temperature 0, got {request.sampling.temperature}")
        result, progress = await self._run(request, top_k=top_k)
        return GreedyChunk(result=result, tops=progress.tops, cached_tokens=progress.cached_tokens)

    async def generate_tree(self, request: GenerationRequest, params: LatrParams, width: int) -> TreeResult:
        """Grow a LATR tree of at most ``width`` branches from ``request``'s prompt, then sample each branch on with
        ``request.sampling``: greedy chunks with their top-k, each fork a new request on the prefix it shares with
        its parent, which vLLM's prefix cache serves (:mod:`agentgym.inference._tree_driver`, where the tree tokens'
        logprobs are the untempered ones); cancelling the caller aborts every request of the tree."""
        if self._closed:
            raise RuntimeError("the vllm engine is closed")
        return await grow_tree(self, request, params, width, eos_ids=self._eos_ids,
                               vocab_size=self._llm.model_config.get_vocab_size(),
                               math_ids=math_token_ids(self._tokenizer), batch=self._exit_batch)

    async def _run(self, request: GenerationRequest, *, top_k: int) -> tuple[GenerationResult, _Progress]:
        """Generate one response (with the top ``top_k`` of each position where ``top_k`` > 0), continuing it under
        new weights after an update."""
        if self._closed:
            raise RuntimeError("the vllm engine is closed")
        progress = _Progress()
        finish: FinishReason = "abort"
        retries = 0
        with self._clock.busy():
            while not self._closed:
                await self._running.wait()
                if self._closed:
                    break
                segment = asyncio.create_task(self._segment(request, progress, self._version, top_k))
                self._segments.add(segment)
                try:
                    await asyncio.wait({segment})
                except asyncio.CancelledError:
                    segment.cancel()
                    raise
                finally:
                    self._segments.discard(segment)
                if not segment.cancelled():
                    if (outcome := segment.result()) is not None:
                        finish = outcome
                        break
                    retries += 1
                    if retries > _RETRIES:
                        raise RuntimeError(f"vLLM asked {retries} times to retry request {request.request_id}")
                    continue
                if len(progress.tokens) >= request.sampling.max_tokens:
                    finish = "length"
                    break
        self._clock.counts.requests += 1
        self._clock.counts.prompt_tokens += len(request.prompt_ids)
        self._clock.counts.generated_tokens += len(progress.tokens)
        return GenerationResult(
            request_id=request.request_id,
            token_ids=progress.tokens,
            logprobs=progress.logprobs,
            versions=progress.versions,
            finish_reason=finish,
            prompt_tokens=len(request.prompt_ids),
        ), progress

    async def _segment(
        self, request: GenerationRequest, progress: _Progress, version: int, top_k: int
    ) -> FinishReason | None:
        """Stream one vLLM request continuing ``prompt + tokens`` under ``version``, appending to ``progress`` as it
        goes; ``None`` when vLLM asks for the request again (its ``error`` finish: e.g. an image its cache lost after
        a refusal)."""
        from vllm import SamplingParams, TokensPrompt
        from vllm.renderers.inputs.preprocess import parse_model_prompt
        from vllm.sampling_params import RequestOutputKind

        sampling = request.sampling
        tokens = progress.tokens
        params = SamplingParams(
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            max_tokens=sampling.max_tokens - len(tokens),
            stop=list(sampling.stop) or None,
            # a continued request draws a fresh stream rather than replaying the first one's
            seed=None if sampling.seed is None else sampling.seed + len(tokens),
            logprobs=top_k,
            output_kind=RequestOutputKind.DELTA,
        )
        prompt = TokensPrompt(prompt_token_ids=request.prompt_ids + tokens)
        if request.images and self.multimodal:
            prompt["multi_modal_data"] = {"image": [_pil_image(image) for image in request.images]}
        (engine_input,) = await self._llm.renderer.render_cmpl_async([parse_model_prompt(self._llm.model_config, prompt)])
        request_id = f"{request.request_id}-{uuid.uuid4().hex[:8]}"
        first = True
        async for output in self._llm.generate(engine_input, params, request_id):
            if first and output.num_cached_tokens:
                self._clock.counts.cached_prompt_tokens += output.num_cached_tokens
                progress.cached_tokens += output.num_cached_tokens
            first = False
            completion = output.outputs[0]
            for token, entry in zip(completion.token_ids, completion.logprobs or [], strict=True):
                tokens.append(token)
                progress.logprobs.append(float(entry[token].logprob))
                progress.versions.append(version)
                if top_k:
                    ranked = sorted(entry, key=lambda candidate: (entry[candidate].rank, candidate != token))[:top_k]
                    progress.tops.append((ranked, [float(entry[candidate].logprob) for candidate in ranked]))
            if output.finished:
                reason = completion.finish_reason
                if reason == "error":
                    return None
                return "length" if reason == "length" else "abort" if reason == "abort" else "stop"
        return "abort"

    async def update_weights(self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None) -> int:
        """Load a state dict (Hugging Face names) or a checkpoint folder in place; requests in flight
        are interrupted and continue under the new weights. Returns the new version."""
        if self._closed:
            raise RuntimeError("the vllm engine is closed")
        if not isinstance(weights, Mapping):
            weights = read_checkpoint(_model_folder(weights))
        if not weights:
            raise ValueError("update_weights got an empty state dict")
        async with self._update_lock:
            new_version = self._version + 1 if version is None else version
            interrupted = await self._interrupt()
            try:
                await self._weights.send(weights, new_version)
                self._version = new_version
                self._clock.counts.weight_updates += 1
                self._clock.counts.interrupted += interrupted
            finally:
                if not self._asleep:
                    await self._llm.resume_generation()
                    self._running.set()
            return self._version

    async def sleep(self) -> None:
        """Hand the GPU to a colocated trainer with vLLM's sleep mode (level 1: the weights move to the CPU, the
        KV cache is freed; the engine needs ``enable_sleep_mode=True``): requests in flight are interrupted and
        wait for :meth:`wake_up`."""
        async with self._update_lock:
            if not self._asleep:
                self._clock.counts.interrupted += await self._interrupt()
                await self._llm.sleep(level=1)
                self._asleep = True

    async def wake_up(self) -> None:
        """Take the GPU back and go on generating; interrupted requests continue where they were."""
        async with self._update_lock:
            if self._asleep:
                await self._llm.wake_up()
                self._asleep = False
                await self._llm.resume_generation()
                self._running.set()

    async def _interrupt(self) -> int:
        """Stop the requests in flight (each then waits for ``_running``) and pause vLLM; how many were stopped."""
        self._running.clear()
        interrupted = [task for task in self._segments if not task.done()]
        for task in interrupted:
            task.cancel()
        await asyncio.gather(*interrupted, return_exceptions=True)
        await self._llm.pause_generation(mode="abort", clear_cache=True)
        return len(interrupted)

    def stats(self) -> EngineStats:
        """Counters since start or the last :meth:`reset_stats`."""
        return self._clock.snapshot()

    def reset_stats(self) -> None:
        """Start counting afresh."""
        self._clock.reset()

    async def close(self) -> None:
        """Abort the requests in flight (they return ``finish_reason="abort"``), release the weight transport
        and shut vLLM down with its processes; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._running.set()
        pending = [task for task in self._segments if not task.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        try:
            await self._weights.close()
        finally:
            # On this loop, so vLLM's output handler is cancelled before it could see the engine gone; vLLM
            # stops its processes, killing those that outlast the grace period. Dropping the engine here lets
            # it be collected now rather than at interpreter exit, where its finalizer fails.
            llm, self._llm = self._llm, None
            self._weights = None
            llm.shutdown(timeout=_SHUTDOWN_SECONDS)
            if self._merged is not None:
                self._merged.cleanup()


def _served_folder(model: str | Path) -> tuple[Path, tempfile.TemporaryDirectory[str] | None]:
    """``model``'s folder as vLLM loads it (:func:`_model_folder`): a LoRA adapter folder (a LoRA run's checkpoint)
    is merged into its base model and written to a temporary folder, also returned, for :meth:`VLLMEngine.close` to
    remove; vLLM then serves a plain model, whose weight updates take the same path as any other."""
    if adapter_base(Path(model).expanduser()) is None:
        return _model_folder(model), None
    merged = tempfile.TemporaryDirectory(prefix="agentgym-merged-")
    return _model_folder(write_merged(model, Path(merged.name))), merged


def _model_folder(model: str | Path) -> Path:
    """``model`` as a folder vLLM can load (a local folder, or a hub id already in the local Hugging Face cache:
    nothing is downloaded): a config and weights; otherwise a clear error."""
    folder = Path(model).expanduser().resolve()
    if not folder.is_dir():
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(str(model), local_files_only=True))
        except Exception:  # noqa: BLE001 - not an id, or not cached: the hub library raises several kinds
            raise FileNotFoundError(f"no model folder at {model}, nor a model of that name in the local Hugging Face "
                                    "cache (build one with `agentgym model init --preset tiny DIR`)") from None
    config = folder / "config.json"
    if not config.is_file():
        raise ValueError(f"{model} is not a Hugging Face model folder: it has no config.json")
    try:
        json.loads(config.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{config} is not valid JSON: {exc}") from None
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise ValueError(f"{model} holds no weights (*.safetensors or pytorch_model*.bin)")
    return folder


def _with_defaults(engine_args: dict[str, Any], folder: Path, *, on_cpu: bool) -> dict[str, Any]:
    """``engine_args`` completed with this engine's defaults (each one the caller may override)."""
    defaults: dict[str, Any] = {"dtype": _checkpoint_dtype(folder)}  # vLLM would serve a float32 model in bfloat16
    if on_cpu:
        defaults["enforce_eager"] = True  # compiling for the CPU costs minutes at every start
        # vLLM 0.32's CPU runner kills the engine when a seeded request's prefill is split over steps
        # ("CPU Generator does not use offset"): prefill each prompt whole
        defaults["enable_chunked_prefill"] = False
        if "gpu_memory_utilization" not in engine_args:
            defaults["kv_cache_memory_bytes"] = _CPU_KV_CACHE_BYTES
    return defaults | engine_args


def _end_token_ids(tokenizer: Any, generation_config: Mapping[str, Any]) -> frozenset[int]:
    """The tokens vLLM ends a response at: the tokenizer's end of sequence and the generation config's."""
    ids = set() if tokenizer.eos_token_id is None else {tokenizer.eos_token_id}
    value = generation_config.get("eos_token_id")
    ids.update([value] if isinstance(value, int) else value or [])
    return frozenset(ids)


def _first_problems(exc: Any) -> str:
    """A pydantic validation error in one line: the first complaint about each field."""
    problems: dict[str, str] = {}
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else ""
        problems.setdefault(field, f"{field}: {error['msg']}" if field else error["msg"])
    return "; ".join(problems.values())


def _checkpoint_dtype(folder: Path) -> str:
    """The dtype the weights were saved in (what the trainer loads them as); ``auto`` where the config says none."""
    config = json.loads((folder / "config.json").read_text())
    dtype = config.get("dtype") or config.get("torch_dtype") or config.get("text_config", {}).get("dtype")
    return dtype if dtype in ("float32", "bfloat16", "float16") else "auto"


def _pil_image(image: ImagePart) -> Any:
    """An image part as the PIL image vLLM's multimodal processor takes (in RGB)."""
    from PIL import Image

    return Image.open(io.BytesIO(base64.b64decode(image.data))).convert("RGB")

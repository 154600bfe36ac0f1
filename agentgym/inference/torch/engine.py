"""The ``torch`` engine: a Hugging Face causal LM in-process with continuous (iteration-level) batching.

``await generate(request)`` queues a request (``stream(request)`` too, yielding its tokens as they are
sampled); one worker thread loops: apply pending weight updates, drop cancelled requests, prefill the
waiting ones as a cohort and merge them into the running batch (up to ``max_batch_size`` rows), then
run one decode step for every row on the shared KV cache and sample each row with its own generator
(:mod:`agentgym.inference.sampling`). A finished row resolves its request and leaves the batch at once;
new requests join at the next step.

Rules:

* A response ends with ``finish_reason="stop"`` at an end-of-turn token (:attr:`TorchEngine.eos_token_ids`,
  kept as the last token) or at the token that completes one of ``SamplingParams.stop`` in the decoded
  response (that token is kept too: token ids are never cut); ``"length"`` at ``max_tokens`` or when
  prompt + response reach ``max_model_len``. A prompt that leaves no room is a :class:`ValueError`.
* Each row samples with its own ``torch.Generator``, seeded by ``SamplingParams.seed`` or else by the
  engine's own seeded RNG, so a seeded request gives the same tokens alone or batched.
* A weight update waits for the current step, loads the weights, bumps the version and interrupts the
  rows in flight: their caches are dropped and they are prefilled again (prompt + tokens so far)
  under the new weights, so each token keeps the version that sampled it.
* Automatic prefix caching: a finished request leaves the KV of its tokens in a bounded LRU cache
  (:mod:`agentgym.inference.torch._prefix_cache`, ``prefix_cache_tokens``); a new request reuses the longest
  cached prefix of its prompt (all but its last token at most) and prefills only the rest. A weight
  update empties the cache, so no KV computed under old weights is ever reused.
* If a model step raises, every request in that step gets the exception; the engine keeps serving.
* A request leaves when it finishes or fails, or at the next step once its caller is cancelled (or stops
  iterating its stream); :attr:`TorchEngine.in_flight` counts the requests that have not left.
* :meth:`TorchEngine.close` resolves every request in flight with ``finish_reason="abort"`` and the
  tokens generated so far; ``generate`` after ``close`` raises :class:`RuntimeError`.
* Tree rollouts (:meth:`TorchEngine.generate_tree`, LATR): a tree's branches are rows of the batch. While the
  tree phase lasts, each step's untempered top-k goes to the tree's :class:`~agentgym.inference.tree.TreeSearch`,
  which picks every branch's token; a fork copies the parent's KV row (nothing is recomputed) and a pruned
  branch leaves the batch. Then the branches sample on like any request. Forks may take the batch past
  ``max_batch_size`` by a tree's width. A weight update or a sleep ends the tree phase of the trees in flight
  (their branches are prefilled again one by one, so they no longer step together).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, cast

import torch
from transformers import PreTrainedModel

from agentgym.inference._checkpoint import read_checkpoint
from agentgym.inference.sampling import sample_token, sampling_logprobs
from agentgym.inference.torch._batch import KVBatch
from agentgym.inference.torch._futures import settle_future
from agentgym.inference.torch._loading import eos_token_ids, load_model, load_state, move
from agentgym.inference.torch._prefix_cache import CachedPrefix, PrefixCache
from agentgym.inference.torch._requests import TrackedRequest, WeightUpdate
from agentgym.inference.torch._tree_run import TreeRun
from agentgym.inference.tree import ExitBatch, LatrParams, TreeSearch, branch_seed, math_token_ids
from agentgym.inference.types import (
    EngineStats,
    FinishReason,
    GenerationChunk,
    GenerationRequest,
    GenerationResult,
    TreeResult,
)

_PREFILL_TOKENS = 32768
"""Most (padded) tokens one prefill forward takes; a single longer prompt still goes alone."""


class TorchEngine:
    """A ``transformers`` causal LM served in-process with continuous batching (see the module doc)."""

    name = "torch"

    def __init__(
        self,
        model: str | Path | PreTrainedModel,
        *,
        tokenizer: Any = None,
        device: str | torch.device = "auto",
        dtype: str | torch.dtype | None = None,
        max_batch_size: int = 64,
        max_model_len: int | None = None,
        seed: int = 0,
        threads: int | None = None,
        prefix_cache_tokens: int = 262_144,
    ) -> None:
        """Load ``model`` (a local checkpoint folder or a model object) and start the worker thread.
        ``dtype`` defaults to float32 on CPU and bfloat16 on GPU; ``threads`` is process-wide;
        ``prefix_cache_tokens`` bounds the prefix cache (0 turns it off)."""
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        self._prefix_cache = PrefixCache(prefix_cache_tokens)
        if threads is not None:
            torch.set_num_threads(threads)
        self.model, self._tokenizer = load_model(model, tokenizer, device, dtype)
        self.model.eval()  # type: ignore[no-untyped-call]
        self.device = next(self.model.parameters()).device
        self.eos_token_ids = eos_token_ids(self._tokenizer, self.model)
        self.max_batch_size = max_batch_size
        self.max_model_len = max_model_len or int(self.model.config.max_position_embeddings)
        self._vocab_size = int(cast(torch.nn.Embedding, self.model.get_input_embeddings()).num_embeddings)
        self._rng = random.Random(seed)
        self._version = 0
        self._exit_batch = ExitBatch()

        self._cond = threading.Condition()
        self._incoming: deque[TrackedRequest] = deque()
        self._updates: deque[WeightUpdate] = deque()
        self._sleeps: deque[tuple[bool, asyncio.Future[None], asyncio.AbstractEventLoop]] = deque()
        self._asleep = False
        self._closing = False
        self._failure: RuntimeError | None = None
        """Why the worker stopped, where a step raised (every later call raises it)."""
        self._stats = EngineStats()
        self._since = time.perf_counter()
        # Worker-owned state: requests waiting for a prefill, the rows in the batch, their cache.
        self._waiting: deque[TrackedRequest] = deque()
        self._active: list[TrackedRequest] = []
        self._batch: KVBatch | None = None
        self._held = 0  # len(_waiting) + len(_active) as of the worker's last step, read under _cond
        self._thread = threading.Thread(target=self._run, name="agentgym-torch-engine", daemon=True)
        self._thread.start()

    @property
    def version(self) -> int:
        """The policy version of the current weights; 0 for the weights the engine was built with."""
        return self._version

    @property
    def tokenizer(self) -> Any:
        """The Hugging Face tokenizer that defines the ids."""
        return self._tokenizer

    @property
    def in_flight(self) -> int:
        """Requests submitted and not yet finished, failed or dropped (a cancelled one leaves at the next step)."""
        with self._cond:
            return len(self._incoming) + self._held

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate one response to ``request``; cancelling the caller drops it at the next step."""
        seq = self._submit(request, stream=False)
        try:
            return await seq.future
        except asyncio.CancelledError:
            seq.cancelled = True
            raise

    async def generate_tree(self, request: GenerationRequest, params: LatrParams, width: int) -> TreeResult:
        """Grow a LATR tree of at most ``width`` branches from ``request``'s prompt, then sample each branch on
        with ``request.sampling`` (see the module doc); cancelling the caller drops every branch."""
        seq = self._submit(request, stream=False, tree=(params, width))
        assert seq.tree is not None
        try:
            return await seq.tree.future
        except asyncio.CancelledError:
            seq.tree.cancelled = True
            raise

    async def stream(self, request: GenerationRequest) -> AsyncIterator[GenerationChunk]:
        """Generate one response to ``request``, yielding the tokens sampled since the previous chunk as they
        come (the last chunk carries the finish reason); leaving the iteration early drops the request at
        the next step."""
        seq = self._submit(request, stream=True)
        assert seq.stream is not None
        try:
            while True:
                items = [await seq.stream.get()]
                while not seq.stream.empty():
                    items.append(seq.stream.get_nowait())
                sampled = [item for item in items if item is not None]
                finish: FinishReason | None = None
                if items[-1] is None:  # settled: the future is done (settled before the end was posted)
                    finish = (await seq.future).finish_reason
                if sampled or finish is not None:
                    ids, logprobs, versions = [list(c) for c in zip(*sampled)] if sampled else ([], [], [])
                    yield GenerationChunk(
                        request_id=request.request_id,
                        token_ids=ids,
                        logprobs=logprobs,
                        versions=versions,
                        finish_reason=finish,
                        prompt_tokens=len(request.prompt_ids),
                    )
                if finish is not None:
                    return
        finally:
            if not seq.future.done():
                seq.cancelled = True

    def _submit(
        self, request: GenerationRequest, *, stream: bool, tree: tuple[LatrParams, int] | None = None
    ) -> TrackedRequest:
        """Check ``request`` and queue it for the worker (as the root of a tree of ``(params, width)``)."""
        prompt = request.prompt_ids
        if len(prompt) >= self.max_model_len:
            raise ValueError(
                f"prompt of {len(prompt)} tokens leaves no room to generate under max_model_len="
                f"{self.max_model_len}; shorten the prompt or raise max_model_len"
            )
        if min(prompt) < 0 or max(prompt) >= self._vocab_size:
            raise ValueError(f"prompt ids must lie in [0, {self._vocab_size}) (the model's vocabulary)")
        sampling = request.sampling
        seed = sampling.seed if sampling.seed is not None else self._rng.getrandbits(63)
        loop = asyncio.get_running_loop()
        run = None
        if tree is not None:
            search = TreeSearch(tree[0], tree[1], self.eos_token_ids, sampling.max_tokens, math_token_ids(self._tokenizer),
                                self._exit_batch)
            run = TreeRun(search=search, seed=seed, future=loop.create_future(), loop=loop)
        seq = TrackedRequest(
            request=request,
            generator=torch.Generator(device=self.device).manual_seed(seed),
            future=loop.create_future(),
            loop=loop,
            stop_window=4 * max(map(len, sampling.stop)) + 1 if sampling.stop else 0,
            # Bounded: the worker posts at most max_tokens tokens, then the end.
            stream=asyncio.Queue(maxsize=sampling.max_tokens + 1) if stream else None,
            tree=run,
        )
        with self._cond:
            if self._closing:
                raise self._closed()
            self._incoming.append(seq)
            self._stats.requests += 1
            self._stats.prompt_tokens += len(prompt)
            self._cond.notify()
        return seq

    async def update_weights(
        self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None
    ) -> int:
        """Load a state dict or a safetensors checkpoint folder between two steps; requests in flight
        continue under the new weights. Returns the new version (``version`` or the current one + 1)."""
        state = weights if isinstance(weights, Mapping) else await asyncio.to_thread(read_checkpoint, weights)
        loop = asyncio.get_running_loop()
        update = WeightUpdate(state=state, version=version, future=loop.create_future(), loop=loop)
        with self._cond:
            if self._closing:
                raise self._closed()
            self._updates.append(update)
            self._cond.notify()
        return await update.future

    async def sleep(self) -> None:
        """Hand the device to a colocated trainer: generation holds (requests in flight drop their KV caches and
        wait) and the weights move to the CPU, until :meth:`wake_up`. Weight updates still apply meanwhile."""
        await self._set_asleep(True)

    async def wake_up(self) -> None:
        """Take the device back and go on generating (interrupted requests continue where they were)."""
        await self._set_asleep(False)

    async def _set_asleep(self, asleep: bool) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._cond:
            if self._closing:
                raise self._closed()
            self._sleeps.append((asleep, future, loop))
            self._cond.notify()
        await future

    def stats(self) -> EngineStats:
        """Counters since start or the last :meth:`reset_stats`."""
        with self._cond:
            return self._stats.model_copy(update={"wall_seconds": time.perf_counter() - self._since})

    def reset_stats(self) -> None:
        """Start counting afresh."""
        with self._cond:
            self._stats = EngineStats()
            self._since = time.perf_counter()

    def _closed(self) -> RuntimeError:
        """The error of a call after the engine stopped: its worker's failure, or the close."""
        return self._failure or RuntimeError("the torch engine is closed; build a new TorchEngine")

    async def close(self) -> None:
        """Abort requests in flight (``finish_reason="abort"``) and stop the worker; safe to call twice."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        await asyncio.to_thread(self._thread.join)

    # ---- worker thread -------------------------------------------------------------------------

    def _run(self) -> None:
        """The worker: serve until :meth:`close`, then abort what is left; a step that raises fails every request in
        flight, and every later call, with the error instead of leaving them waiting."""
        failure: RuntimeError | None = None
        with torch.inference_mode():
            try:
                self._serve()
            except Exception as error:  # noqa: BLE001 - handed to every waiting caller below
                failure = RuntimeError(f"the torch engine's worker failed: {type(error).__name__}: {error}")
                failure.__cause__ = error
        with self._cond:
            self._closing, self._failure = True, failure
            self._waiting.extend(self._incoming)
            self._incoming.clear()
            updates, sleeps = list(self._updates), list(self._sleeps)
            self._updates.clear()
            self._sleeps.clear()
        for update in updates:
            update.settle(None, failure or RuntimeError("the torch engine closed before the weight update was applied"))
        for _, future, loop in sleeps:
            settle_future(loop, future, None, failure)
        for seq in [*self._active, *self._waiting]:
            if failure is None:
                seq.resolve("abort")
            else:
                seq.fail(failure)
        self._active, self._batch = [], None
        self._waiting.clear()
        self._prefix_cache.clear()
        with self._cond:
            self._held = 0

    def _serve(self) -> None:
        """Take what callers queued and step the batch, until the engine closes."""
        while True:
            with self._cond:
                while not (
                    self._incoming or self._updates or self._sleeps or self._closing
                    or ((self._waiting or self._active) and not self._asleep)
                ):
                    self._cond.wait()
                if self._closing:
                    return
                self._waiting.extend(self._incoming)
                self._incoming.clear()
                self._held = len(self._waiting) + len(self._active)
                updates = list(self._updates)
                self._updates.clear()
                sleeps = list(self._sleeps)
                self._sleeps.clear()
            started = time.perf_counter()
            for update in updates:
                self._apply_update(update)
            for asleep, future, loop in sleeps:
                self._apply_sleep(asleep)
                settle_future(loop, future, None, None)
            if self._asleep:
                continue
            self._drop_cancelled()
            self._admit()
            if self._active:
                self._decode()
            with self._cond:
                self._stats.busy_seconds += time.perf_counter() - started
                self._held = len(self._waiting) + len(self._active)

    def _apply_update(self, update: WeightUpdate) -> None:
        self._prefix_cache.clear()  # before loading: even a failed load may have changed some weights
        try:
            load_state(self.model, update.state)
        except Exception as error:  # noqa: BLE001 - a bad checkpoint fails its caller, not the requests in flight
            update.settle(None, error)
            return
        self._version = update.version if update.version is not None else self._version + 1
        interrupted = [seq for seq in [*self._active, *self._waiting] if seq.token_ids]
        self._requeue_active()
        with self._cond:
            self._stats.weight_updates += 1
            self._stats.interrupted += len(interrupted)
        update.settle(self._version)

    def _apply_sleep(self, asleep: bool) -> None:
        if asleep and not self._asleep:
            self._requeue_active()
            self._prefix_cache.clear()
        move(self.model, "cpu" if asleep else self.device)
        if asleep and self.device.type == "cuda":
            torch.cuda.empty_cache()
        self._asleep = asleep

    def _requeue_active(self) -> None:
        """Drop the running batch and its KV cache; its requests wait first in line and continue from their tokens
        (a tree's branches by sampling: they are prefilled apart, so the tree phase ends)."""
        for seq in [*self._active, *self._waiting]:
            if seq.tree is not None:
                seq.tree.search.end()
        self._waiting.extendleft(reversed(self._active))
        self._active, self._batch = [], None

    def _drop_cancelled(self) -> None:
        for seq in [*self._waiting, *self._active]:
            if seq.tree is not None and seq.tree.cancelled:
                seq.tree.search.end()  # out of its exit batch, which must not wait for it
        self._waiting = deque(seq for seq in self._waiting if not seq.dropped)
        keep = [row for row, seq in enumerate(self._active) if not seq.dropped]
        if len(keep) < len(self._active):
            self._keep_rows(keep)

    def _admit(self) -> None:
        cohort: list[TrackedRequest] = []
        cached: list[CachedPrefix | None] = []
        width = 0
        while self._waiting and len(self._active) + len(cohort) < self.max_batch_size:
            context = self._waiting[0].context()
            prefix = self._prefix_cache.lookup(context, len(context) - 1)
            width = max(width, len(context) - (prefix.length if prefix is not None else 0))
            if cohort and width * (len(cohort) + 1) > _PREFILL_TOKENS:
                break
            cohort.append(self._waiting.popleft())
            cached.append(prefix)
        if not cohort:
            return
        with self._cond:
            self._stats.cached_prompt_tokens += sum(
                min(prefix.length, len(seq.request.prompt_ids))
                for seq, prefix in zip(cohort, cached, strict=True)
                if prefix is not None
            )
        try:
            batch, logits = KVBatch.prefill(
                self.model, [seq.context() for seq in cohort], self.device, cached
            )
            finished = self._step(batch, cohort, logits)
        except Exception as error:  # noqa: BLE001 - the prefill's requests fail with it; the worker goes on
            for seq in cohort:
                seq.fail(error)
            return
        keep = [row for row, done in enumerate(finished) if not done]
        cohort = [cohort[row] for row in keep]
        kept = batch.select(keep) if len(keep) < len(finished) else batch
        if kept is None:
            return
        self._batch = kept if self._batch is None else self._batch.merge(kept)
        self._active.extend(cohort)

    def _decode(self) -> None:
        assert self._batch is not None
        try:
            tokens = torch.tensor([seq.token_ids[-1] for seq in self._active], device=self.device)
            logits = self._batch.decode(self.model, tokens)
            finished = self._step(self._batch, self._active, logits)
        except Exception as error:  # noqa: BLE001 - the batch's requests fail with it; the worker goes on
            for seq in self._active:
                seq.fail(error)
            self._active, self._batch = [], None
            return
        if any(finished):
            self._keep_rows([row for row, done in enumerate(finished) if not done])

    def _step(self, batch: KVBatch, seqs: list[TrackedRequest], logits: torch.Tensor) -> list[bool]:
        """Sample (or let trees choose) one token per row, remember finished rows' KV and add the rows that
        forks made to ``batch`` and ``seqs``; which rows finished, the new ones included."""
        finished, forks = self._sample(seqs, logits)
        self._remember(batch, seqs, finished)
        if forks:
            batch.fork([row for row, _ in forks])
            seqs.extend(child for _, child in forks)
            finished += [False] * len(forks)
        return finished

    def _remember(self, batch: KVBatch, seqs: list[TrackedRequest], finished: list[bool]) -> None:
        """Put the KV of each finished row's tokens (all but the last sampled one) in the prefix cache."""
        for row, (seq, done) in enumerate(zip(seqs, finished, strict=True)):
            if done:
                ids = seq.context()[:-1]
                self._prefix_cache.insert(ids, batch.row_kv(row, len(ids)))

    def _keep_rows(self, rows: list[int]) -> None:
        self._active = [self._active[row] for row in rows]
        self._batch = self._batch.select(rows) if self._batch is not None else None

    def _sample(
        self, seqs: list[TrackedRequest], logits: torch.Tensor
    ) -> tuple[list[bool], list[tuple[int, TrackedRequest]]]:
        """Give each row its next token (sampled, or chosen by its tree), append it and resolve the rows that
        finish; which rows finished, and the forks made as (parent row, live child)."""
        groups: dict[tuple[float, float], list[int]] = {}
        for row, seq in enumerate(seqs):
            groups.setdefault((seq.request.sampling.temperature, seq.request.sampling.top_p), []).append(row)
        branching = [row for row, seq in enumerate(seqs) if seq.tree is not None and seq.tree.branching]
        tree_rows = set(branching)
        tokens = [0] * len(seqs)
        row_logprobs: list[torch.Tensor] = [logits[0]] * len(seqs)
        distributions = []
        for (temperature, top_p), rows in groups.items():
            logprobs = sampling_logprobs(logits.index_select(0, torch.tensor(rows, device=logits.device)),
                                         temperature, top_p)
            distributions.append((rows, logprobs))
            for i, row in enumerate(rows):
                row_logprobs[row] = logprobs[i]
                if row not in tree_rows:
                    tokens[row] = sample_token(logprobs[i], temperature, seqs[row].generator)
        forks = self._grow_trees(seqs, logits, branching, row_logprobs, tokens) if branching else []
        chosen = [0.0] * len(seqs)
        for rows, logprobs in distributions:
            picked = torch.tensor([tokens[row] for row in rows], device=logits.device)
            values = logprobs[torch.arange(len(rows), device=logits.device), picked]
            for row, value in zip(rows, values.tolist(), strict=True):
                chosen[row] = value
        with self._cond:
            self._stats.generated_tokens += len(seqs)
        finished = []
        for row, (seq, token, value) in enumerate(zip(seqs, tokens, chosen, strict=True)):
            seq.token_ids.append(token)
            seq.logprobs.append(value)
            seq.versions.append(self._version)
            if seq.tree is not None:
                seq.tree_chosen.append(row in tree_rows)
                seq.tree.decoded_tokens += 1
            seq.publish()
            finished.append(not seq.pruned and self._settle_if_done(seq))
        live = [(row, child) for row, child in forks if not self._settle_if_done(child)]
        return finished, live

    def _grow_trees(
        self, seqs: list[TrackedRequest], logits: torch.Tensor, rows: list[int], row_logprobs: list[torch.Tensor],
        tokens: list[int],
    ) -> list[tuple[int, TrackedRequest]]:
        """One step of the tree phase for the trees of ``rows``: each tree's search picks its branches' tokens
        (into ``tokens``), forks and prunes from the untempered top-k; the forks as (parent row, child)."""
        trees: dict[TreeRun, list[int]] = {}
        for row in rows:
            run = seqs[row].tree
            assert run is not None
            trees.setdefault(run, []).append(row)
        k = max(run.search.params.top_k for run in trees)
        index = torch.tensor(rows, device=logits.device)
        top_probs, top_ids = torch.softmax(logits.index_select(0, index).float(), dim=-1).topk(k, dim=-1)
        tops = dict(zip(rows, zip(top_ids.tolist(), top_probs.tolist(), strict=True), strict=True))
        forks: list[tuple[int, TrackedRequest]] = []
        for run, tree_rows in trees.items():
            by_branch = {seqs[row].branch: row for row in tree_rows}
            top_k = run.search.params.top_k
            decision = run.search.advance(
                {branch: (tops[row][0][:top_k], tops[row][1][:top_k]) for branch, row in by_branch.items()},
                allowed={branch: {t for t in tops[row][0][:top_k] if row_logprobs[row][t] > float("-inf")}
                         for branch, row in by_branch.items()},
            )
            run.tree_tokens += len(tree_rows)
            for row in tree_rows:
                tokens[row] = tops[row][0][0]
            children = {}
            for child, parent, token in decision.forks:
                row = by_branch[parent]
                children[child] = self._fork(seqs[row], child, token, float(row_logprobs[row][token]))
                forks.append((row, children[child]))
            for branch in decision.pruned:
                if branch in by_branch:
                    seqs[by_branch[branch]].pruned = True
                else:
                    children[branch].pruned = True
            run.check_done()
        return [(row, child) for row, child in forks if not child.pruned]

    def _fork(self, parent: TrackedRequest, branch: int, token: int, logprob: float) -> TrackedRequest:
        """A new branch of ``parent``'s tree: its tokens so far (this step's not yet appended), then ``token``."""
        run = parent.tree
        assert run is not None
        run.tree_tokens += 1
        run.decoded_tokens += 1
        return TrackedRequest(
            request=parent.request,
            generator=torch.Generator(device=self.device).manual_seed(branch_seed(run.seed, branch)),
            future=parent.future,  # never settled: a branch settles through its tree
            loop=parent.loop,
            stop_window=parent.stop_window,
            token_ids=[*parent.token_ids, token],
            logprobs=[*parent.logprobs, logprob],
            versions=[*parent.versions, self._version],
            tree=run,
            branch=branch,
            tree_chosen=[*parent.tree_chosen, True],
        )

    def _settle_if_done(self, seq: TrackedRequest) -> bool:
        """Resolve ``seq`` if its last token ends it (telling its tree, while the tree phase lasts); whether it did."""
        reason = self._finish_reason(seq)
        if reason is None:
            return False
        if seq.tree is not None and seq.tree.branching and seq.branch in seq.tree.search.branches:
            seq.tree.search.finish(seq.branch)
        seq.resolve(reason)
        return True

    def _finish_reason(self, seq: TrackedRequest) -> FinishReason | None:
        sampling = seq.request.sampling
        if seq.token_ids[-1] in self.eos_token_ids:
            return "stop"
        if seq.stop_window:
            tail = self._tokenizer.decode(seq.token_ids[-seq.stop_window :])
            if any(stop in tail for stop in sampling.stop):
                return "stop"
        if len(seq.token_ids) >= sampling.max_tokens:
            return "length"
        if len(seq.request.prompt_ids) + len(seq.token_ids) >= self.max_model_len:
            return "length"
        return None

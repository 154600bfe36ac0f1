"""One optimizer step of the corrected PPO loss on a batch of trajectories, with its metrics: in this process, or
as one rank of a distributed trainer (:mod:`agentgym.trainers.rank_group`) on its share of the batch."""

from __future__ import annotations

import math
import warnings
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from agentgym.algorithms import entropy_from_logits, k3_kl, masked_mean, policy_loss
from agentgym.algorithms.vcpo import (
    baseline_metrics,
    ess_lr_scale,
    logit_score_norms,
    min_variance_advantages,
    sequence_log_weights,
)
from agentgym.inference.sampling import token_logprobs
from agentgym.models.adapters import adapter_base
from agentgym.progress import quiet_progress_bars
from agentgym.trainers.batch import Share, TrainBatch, shares
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.lora import adapter_weights, add_adapters, merged_weights, save_adapter
from agentgym.trainers.parallel import (
    AgentLogits,
    clip_gradients,
    full_weights,
    gather_rows,
    gradient_sync,
    is_writer,
    load_optimizer,
    save_optimizer,
    world_size,
    wrap,
)
from agentgym.trainers.snapshots import VersionSnapshots

MODEL_DIR = "model"
OPTIMIZER_DIR = "optimizer"


def load_model(source: str | Path, config: TrainConfig, device: torch.device) -> PreTrainedModel:
    """The model to train, from a model folder, in the configured dtype, on ``device``; with ``model.lora``, the
    base model with trainable adapters, fresh or (``source`` a checkpoint's adapter folder) the checkpoint's."""
    dtype = getattr(torch, config.model.dtype) if config.model.dtype else None
    lora = config.model.lora
    adapter = Path(source) if lora is not None and adapter_base(source) is not None else None
    with quiet_progress_bars():
        model = AutoModelForCausalLM.from_pretrained(config.model.path if adapter else source, dtype=dtype)
    if lora is not None:
        model = add_adapters(model, lora, adapter)
    return model.to(device)


def resolve_device(name: str) -> torch.device:
    """``trainer.device``: ``auto`` is CUDA where this process sees a GPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


class Learner:
    """Owns the trained model (wrapped for ``trainer.strategy``), its optimizer and schedule. :meth:`step` trains
    on one batch and moves the policy to the next version; ``pi_old`` comes from version snapshots (``exact``)
    or from the current weights (``recompute``), as ``config.algorithm.old_logprobs`` says. Under ddp or fsdp
    it is one rank, and must be made inside the process group."""

    def __init__(self, model: PreTrainedModel, config: TrainConfig) -> None:
        self.model, self.config = model, config
        self.device = next(model.parameters()).device
        self.version = 0
        self.trainer_logprobs: dict[tuple[int, int], list[float]] = {}
        """The last step's first-pass logprobs of this rank's trained rows' agent tokens, by collated place and
        segment (:func:`by_trajectory` joins each trajectory's)."""
        exact = config.algorithm.old_logprobs == "exact"
        if config.trainer.activation_checkpointing:  # non-reentrant: works under ddp and fsdp, and with no_grad
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        # before wrapping: the snapshots' spare model is a whole copy, whose passes are this rank's alone
        self.snapshots = VersionSnapshots(model, keep=config.trainer.max_lag if exact else 0)
        self.policy = wrap(model, config.trainer.parallel)
        optim = config.optim
        self.optimizer = torch.optim.AdamW(
            [p for p in self.policy.parameters() if p.requires_grad],
            lr=optim.lr,
            betas=optim.betas,
            weight_decay=optim.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)

    def _lr_factor(self, step: int) -> float:
        optim, total = self.config.optim, self.config.trainer.steps
        if step < optim.warmup_steps:
            return (step + 1) / (optim.warmup_steps + 1)
        progress = (step - optim.warmup_steps) / max(1, total - optim.warmup_steps)
        if optim.schedule == "linear":
            return max(0.0, 1.0 - progress)
        if optim.schedule == "cosine":
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        return 1.0

    def logprobs(self, model: PreTrainedModel | torch.nn.Module, batch: TrainBatch, *, entropy: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``[B, T-1]`` logprobs of each agent token under ``model`` (or its :class:`AgentLogits`, wrapped or not)
        and the sampling distribution (temperature, top-p), and the entropy of the model's next-token
        distribution there when asked; 0 at every other position, which no loss or metric reads."""
        logits = self._agent_logits(model, batch)
        logprobs = self._logprobs_from(logits, batch)
        if not entropy:
            return logprobs, None
        return logprobs, torch.zeros_like(logprobs).masked_scatter(batch.loss_mask.bool(), entropy_from_logits(logits))

    def _agent_logits(self, model: PreTrainedModel | torch.nn.Module, batch: TrainBatch) -> torch.Tensor:
        """``[N, V]`` logits of ``batch``'s ``N`` agent tokens under ``model`` (or its :class:`AgentLogits`)."""
        policy = AgentLogits(model) if isinstance(model, PreTrainedModel) else model
        return policy(batch.input_ids, batch.attention_mask, batch.loss_mask.bool(),
                      packed=self.config.trainer.sequence_packing)

    def _logprobs_from(self, logits: torch.Tensor, batch: TrainBatch) -> torch.Tensor:
        """``[B, T-1]`` logprobs of ``batch``'s agent tokens under the sampling distribution, from their ``[N, V]``
        logits; 0 at every other position."""
        sampling, agent = self.config.sampling, batch.loss_mask.bool()
        values = token_logprobs(logits, batch.input_ids[:, 1:][agent], sampling.temperature or 1.0, sampling.top_p)
        return torch.zeros(agent.shape, dtype=values.dtype, device=values.device).masked_scatter(agent, values)

    def step(self, batch: TrainBatch) -> dict[str, float]:
        """Train on the whole ``batch`` (this process is the only rank); return the step's ``train/`` metrics."""
        trainer = self.config.trainer
        share = shares(batch, trainer.micro_batch_size, 1, trainer.max_tokens_per_micro_batch,
                       packed=trainer.sequence_packing)[0].to(self.device)
        return merge_metrics([self.train(share)], batch)

    def train(self, share: Share) -> dict[str, float]:
        """``algorithm.epochs`` passes over this rank's micro-batches, each an optimizer step (PPO epochs: a later
        pass's ratio to ``pi_old`` has moved, and the clip bounds it), then the next version; returns this rank's
        part of the last pass's metrics, for :func:`merge_metrics`. ``trainer_logprobs`` then holds the first pass's
        logprobs of this rank's rows' agent tokens, by their place in the collated list."""
        self.snapshots.save(self.version, self.model)
        self.policy.train()
        baseline: dict[str, float] = {}
        if self.config.algorithm.vcpo.baseline == "min_variance":
            share, baseline = self._min_variance(share)
        self.trainer_logprobs = {}
        for epoch in range(self.config.algorithm.epochs):
            metrics = self._pass(share, record=epoch == 0)
        self.scheduler.step()
        self.version += 1
        return {**metrics, **baseline}

    def _pass(self, share: Share, *, record: bool) -> dict[str, float]:
        """Accumulate the loss's gradient over this rank's micro-batches, each weighted by its part of the whole
        step (ranks' gradients are averaged, so each rank's is scaled by the world size to sum instead), clip,
        step the optimizer; ``record`` the logprobs of the weights the step started from."""
        self.optimizer.zero_grad(set_to_none=True)
        token_mean = self.config.algorithm.loss.aggregation == "token-mean"
        scale = world_size(self.policy)
        passes = len(share.micro_batches)
        metrics: dict[str, float] = {}
        log_weights = []
        for index, micro in enumerate(share.micro_batches):
            padding = index >= passes - share.padding
            with gradient_sync(self.policy, index == passes - 1):
                loss, micro_metrics, proximal = self._micro_step(micro)
                token_share = 0.0 if padding else micro.agent_tokens / share.agent_tokens
                loss_share = token_share if token_mean or padding else micro.trained_rows / share.sequences
                (loss * loss_share * scale).backward()
            if not padding:
                _combine(metrics, micro_metrics, token_share=token_share, loss_share=loss_share)
                agent = micro.loss_mask.bool()
                trained = agent.any(-1)
                log_weights += sequence_log_weights(proximal, micro.behaviour_logprobs, agent)[trained].tolist()
                if record:
                    for row in trained.nonzero()[:, 0].tolist():
                        key = int(micro.index[row]), int(micro.segment[row])
                        self.trainer_logprobs[key] = proximal[row][agent[row]].tolist()
        metrics["train/grad_norm"] = clip_gradients(self.policy.parameters(), self.config.optim.grad_clip)
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]
        metrics.update(self._ess_step(log_weights))
        return metrics

    def _ess_step(self, log_weights: list[float]) -> dict[str, float]:
        """Step the optimizer at VCPO's ESS-scaled learning rate (``algorithm.vcpo.lr_scaling``) from the sequence
        log weights of every rank's trajectories; the step's ESS, ESS ratio and the learning rate it took."""
        vcpo = self.config.algorithm.vcpo
        scale = ess_lr_scale(torch.tensor(gather_rows(self.policy, log_weights)), vcpo.base_ess_ratio, vcpo.lr_scaling)
        scheduled = [group["lr"] for group in self.optimizer.param_groups]
        for group, lr in zip(self.optimizer.param_groups, scheduled, strict=True):
            group["lr"] = lr * scale.lr_factor
        self.optimizer.step()
        for group, lr in zip(self.optimizer.param_groups, scheduled, strict=True):
            group["lr"] = lr
        return {"train/ess": scale.ess, "train/ess_ratio": scale.ratio,
                "train/effective_lr": scheduled[0] * scale.lr_factor}

    def _min_variance(self, share: Share) -> tuple[Share, dict[str, float]]:
        """``share`` with VCPO's minimum-variance advantages: each group's ``b*`` from the importance weights,
        gradient norms and rewards of its members on every rank; and the step's baseline metrics."""
        vcpo, mine = self.config.algorithm.vcpo, []
        own = len(share.micro_batches) - share.padding
        for index, micro in enumerate(share.micro_batches):  # every rank runs as many forward passes (FSDP)
            log_weights, norms = self._scores(micro, exact=vcpo.grad_norm == "exact" and index < own)
            trained = micro.loss_mask.sum(-1) > 0
            if index < own:
                mine.append(list(zip(micro.groups[trained].tolist(), micro.rewards[trained].tolist(),
                                     log_weights[trained].tolist(), norms[trained].tolist(), strict=True)))
        ranks = gather_rows(self.policy, [mine])
        rows = [row for rank in ranks for micro in rank for row in micro]
        groups, rewards, log_weights, norms = (torch.tensor(column, dtype=torch.float64) for column in zip(*rows))
        grpo = self.config.algorithm.advantage == "grpo"
        advantages, baselines = min_variance_advantages(rewards, groups, log_weights, norms, scale_by_std=grpo)
        start = sum(len(micro) for rank in ranks[:_rank(self.policy)] for micro in rank)
        micros = []
        for index, micro in enumerate(share.micro_batches):
            if index < own:
                trained = micro.loss_mask.sum(-1) > 0
                count = int(trained.sum())
                values = micro.advantages.clone()
                values[trained] = advantages[start:start + count].to(values)
                start += count
                micro = replace(micro, advantages=values)
            micros.append(micro)
        return replace(share, micro_batches=micros), baseline_metrics(rewards, groups, baselines)

    def _scores(self, micro: TrainBatch, *, exact: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """``[b]`` sequence log importance weights (the weights before the step over the behaviour policy) of
        ``micro``'s rows and ``[b]`` squared norms of ``grad log pi(tau)``: exact (a backward pass per row) or over
        the logits."""
        agent = micro.loss_mask.bool()
        with torch.no_grad():
            logits = self._agent_logits(self.policy, micro)
            log_weights = sequence_log_weights(self._logprobs_from(logits, micro), micro.behaviour_logprobs, agent)
            if not exact:
                return log_weights, logit_score_norms(logits, micro.input_ids[:, 1:][agent], agent,
                                                      self.config.sampling.temperature or 1.0)
        return log_weights, self._exact_score_norms(micro)

    def _exact_score_norms(self, micro: TrainBatch) -> torch.Tensor:
        """``[b]`` squared norms of each row's ``grad sum_t log pi(y_t)`` over every trained parameter, one backward
        pass of this rank's whole model per row (no gradient is synchronised)."""
        norms = torch.zeros(micro.rows, dtype=torch.float64)
        parameters = [p for p in self.model.parameters() if p.requires_grad]
        with gradient_sync(self.policy, False):
            for row in range(micro.rows):
                if not micro.loss_mask[row].any():
                    continue
                self.model.zero_grad(set_to_none=True)
                logprobs, _ = self.logprobs(self.model, _rows(micro, torch.arange(micro.rows) == row))
                logprobs.sum().backward()
                norms[row] = sum(p.grad.double().square().sum() for p in parameters if p.grad is not None)
        self.model.zero_grad(set_to_none=True)
        return norms

    def skip(self) -> dict[str, float]:
        """Publish the next version without an update (a batch with no signal): the schedule still advances."""
        self.trainer_logprobs = {}
        self.snapshots.save(self.version, self.model)
        with warnings.catch_warnings():  # stepping the schedule without an optimizer step is meant here
            warnings.simplefilter("ignore", UserWarning)
            self.scheduler.step()
        self.version += 1
        return {"train/skipped": 1.0}

    def offload(self) -> None:
        """Free the device for a colocated engine: weights, snapshots and optimizer state to the CPU, gradients
        dropped (:meth:`onload` brings them back)."""
        self.optimizer.zero_grad(set_to_none=True)
        self._move(torch.device("cpu"))

    def onload(self) -> None:
        self._move(self.device)

    def _move(self, device: torch.device) -> None:
        if self.device.type == "cpu":
            return  # on the CPU already: nothing to free
        self.policy.to(device)
        self.snapshots.to(device)
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and key != "step":
                    state[key] = value.to(device, non_blocking=True)
        if device.type == "cpu":
            torch.cuda.empty_cache()

    def weights(self) -> dict[str, torch.Tensor] | None:
        """The whole model's state dict under the base model's names, for the engines (``None`` on ranks other than
        0); with ``model.lora``, the adapters merged into their layers' weights."""
        state = full_weights(self.policy, self.model)
        lora = self.config.model.lora
        return merged_weights(state, lora.scale) if state is not None and lora is not None else state

    def save(self, folder: Path) -> None:
        """Write the model (a Hugging Face folder, by rank 0; with ``model.lora`` a peft adapter folder naming the
        base model) and this rank's part of the optimizer state."""
        lora = self.config.model.lora
        if lora is not None:
            adapter = adapter_weights(self.model)  # under fsdp a collective: every rank gathers
            if is_writer(self.policy):
                save_adapter(adapter, lora, self.config.model.path, folder / MODEL_DIR)
        else:
            state = self.weights()
            if is_writer(self.policy):
                with quiet_progress_bars():
                    self.model.save_pretrained(folder / MODEL_DIR, state_dict=state, safe_serialization=True)
        save_optimizer(self.policy, self.optimizer, folder / OPTIMIZER_DIR)

    def restore(self, checkpoint: Path, scheduler: dict[str, Any], version: int) -> None:
        """Continue from ``checkpoint`` (whose model this learner was loaded from), saved under any strategy and
        world size: the optimizer state resharded for this one, the schedule and the version."""
        load_optimizer(self.policy, self.optimizer, checkpoint / OPTIMIZER_DIR)
        self.scheduler.load_state_dict(scheduler)
        self.version = version

    def scheduler_state(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def _micro_step(self, micro: TrainBatch) -> tuple[torch.Tensor, dict[str, float], torch.Tensor]:
        """The loss of ``micro`` and its metrics, and the logprobs of its tokens under the weights of this pass
        (detached; on the first pass, those the step started from)."""
        algorithm = self.config.algorithm
        logprobs, entropy = self.logprobs(self.policy, micro, entropy=True)
        proximal = logprobs.detach()
        agent = micro.loss_mask.bool()
        stale = agent & (micro.versions < self.version)
        old, missing = self._old_logprobs(micro, proximal, stale)
        loss, metrics = policy_loss(logprobs, old, micro.behaviour_logprobs, micro.advantages, micro.loss_mask,
                                    algorithm.loss, entropy=entropy.detach(), sequence_tokens=micro.sequence_tokens)
        if algorithm.entropy_coef:
            loss = loss - algorithm.entropy_coef * masked_mean(entropy, agent)
        fresh = agent & ~stale
        metrics["train/loss"] = loss.item()
        metrics["train/mismatch_k3_fresh"] = k3_kl((proximal - micro.behaviour_logprobs), fresh).item()
        metrics["train/staleness_k3"] = k3_kl((proximal - old), stale).item()
        metrics["train/stale_token_fraction"] = masked_mean(stale.float(), agent).item()
        metrics["train/old_logprobs_missing_fraction"] = masked_mean(missing.float(), agent).item()
        lag = (self.version - micro.versions).clamp(min=0).float()
        metrics["train/staleness_mean"] = masked_mean(lag, agent).item()
        return loss, metrics, proximal

    def _old_logprobs(self, micro: TrainBatch, proximal: torch.Tensor, stale: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor]:
        """``pi_old`` per token: the proximal (current) logprobs, replaced on stale tokens by those of the
        version that sampled them when snapshots are kept; and the stale tokens whose version had none."""
        old = proximal.clone()
        if not stale.any() or self.snapshots.keep == 0:
            return old, torch.zeros_like(stale)
        missing = stale.clone()
        with torch.no_grad():
            for version in micro.versions[stale].unique().tolist():
                if version not in self.snapshots:
                    continue  # older than any snapshot: the proximal stands in
                tokens = stale & (micro.versions == version)
                missing &= ~tokens
                rows = tokens.any(-1)
                sub = _rows(micro, rows)
                version_logprobs, _ = self.logprobs(self.snapshots.model(version), sub)
                old[rows] = torch.where(tokens[rows], version_logprobs, old[rows])
        return old, missing


_LOSS_METRICS = ("train/loss", "train/policy_loss")
"""Metrics that are the loss itself, combined over micro-batches with the loss's weights; the others are
means over agent tokens, weighted by the micro-batch's share of them, or extremes (``_min``, ``_max``)."""


_STEP_METRICS = ("train/grad_norm", "train/lr", "train/ess", "train/ess_ratio", "train/effective_lr",
                 "train/baseline_mean", "train/baseline_shift")
"""Metrics of the whole step, the same on every rank (the baseline's only with ``vcpo.baseline: min_variance``)."""


def by_trajectory(pieces: dict[tuple[int, int], list[float]]) -> dict[int, list[float]]:
    """:attr:`Learner.trainer_logprobs` by the collated place of each trajectory: its segments' joined in order."""
    joined: dict[int, list[float]] = {}
    for place, segment in sorted(pieces):
        joined.setdefault(place, []).extend(pieces[place, segment])
    return joined


def merge_metrics(parts: list[dict[str, float]], batch: TrainBatch) -> dict[str, float]:
    """The step's metrics from each rank's part of them (:meth:`Learner.train`)."""
    metrics = {key: parts[0][key] for key in _STEP_METRICS if key in parts[0]}
    for part in parts:
        _combine(metrics, {k: v for k, v in part.items() if k not in _STEP_METRICS}, token_share=1.0, loss_share=1.0)
    metrics["train/agent_tokens"] = float(batch.agent_tokens)
    return metrics


def _combine(totals: dict[str, float], metrics: dict[str, float], *, token_share: float, loss_share: float) -> None:
    """Fold one micro-batch's ``metrics`` into the step's ``totals``."""
    for key, value in metrics.items():
        if key.endswith(("_min", "_max")):
            if token_share > 0:  # a micro-batch without agent tokens has no extremes
                pick = min if key.endswith("_min") else max
                totals[key] = pick(totals.get(key, value), value)
        else:
            weight = loss_share if key in _LOSS_METRICS else token_share
            totals[key] = totals.get(key, 0.0) + value * weight


def _rank(policy: torch.nn.Module) -> int:
    return torch.distributed.get_rank() if world_size(policy) > 1 else 0


def _rows(batch: TrainBatch, rows: torch.Tensor) -> TrainBatch:
    return TrainBatch(**{f.name: getattr(batch, f.name)[rows] for f in fields(batch)})

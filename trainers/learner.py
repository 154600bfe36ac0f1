"""One optimizer step of the corrected PPO loss on a batch of trajectories, with its metrics."""

from __future__ import annotations

import math
import warnings

import torch
from transformers import PreTrainedModel

from agentgym.algorithms import entropy_from_logits, grad_norm, k3_kl, masked_mean, policy_loss
from agentgym.inference.sampling import token_logprobs
from agentgym.trainers.batch import TrainBatch
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.snapshots import VersionSnapshots


class Learner:
    """Owns the trained model, its optimizer and schedule. :meth:`step` trains on one batch and moves the
    policy to the next version; ``pi_old`` comes from version snapshots (``exact``) or from the current
    weights (``recompute``), as ``config.algorithm.old_logprobs`` says."""

    def __init__(self, model: PreTrainedModel, config: TrainConfig) -> None:
        self.model, self.config = model, config
        self.version = 0
        optim = config.optim
        self.optimizer = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            lr=optim.lr,
            betas=optim.betas,
            weight_decay=optim.weight_decay,
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_factor)
        exact = config.algorithm.old_logprobs == "exact"
        self.snapshots = VersionSnapshots(model, keep=config.trainer.async_ratio if exact else 0)

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

    def logprobs(self, model: PreTrainedModel, batch: TrainBatch, *, entropy: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``[B, T-1]`` logprobs of each agent token under ``model`` and the sampling distribution
        (temperature, top-p), and the entropy of the model's next-token distribution there when asked;
        0 at every other position, which no loss or metric reads."""
        sampling = self.config.sampling
        agent = batch.loss_mask.bool()
        logits = _agent_logits(model, batch, agent)
        targets = batch.input_ids[:, 1:][agent]
        values = token_logprobs(logits, targets, sampling.temperature or 1.0, sampling.top_p)
        logprobs = torch.zeros(agent.shape, dtype=values.dtype, device=values.device).masked_scatter(agent, values)
        if not entropy:
            return logprobs, None
        return logprobs, torch.zeros_like(logprobs).masked_scatter(agent, entropy_from_logits(logits))

    def step(self, batch: TrainBatch) -> dict[str, float]:
        """Accumulate the loss's gradient over micro-batches, clip, step; return ``train/`` metrics."""
        self.snapshots.save(self.version, self.model)
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        total_tokens, total_rows = max(batch.agent_tokens, 1), max(_trained_rows(batch), 1)
        metrics: dict[str, float] = {}
        for micro in batch.micro_batches(self.config.trainer.micro_batch_size):
            loss, micro_metrics = self._micro_step(micro)
            token_share = micro.agent_tokens / total_tokens
            share = (token_share if self.config.algorithm.loss.aggregation == "token-mean"
                     else _trained_rows(micro) / total_rows)
            (loss * share).backward()
            _combine(metrics, micro_metrics, token_share=token_share, loss_share=share)
        metrics["train/grad_norm"] = grad_norm(self.model.parameters())
        if self.config.optim.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip)
        metrics["train/lr"] = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.version += 1
        metrics["train/agent_tokens"] = float(batch.agent_tokens)
        return metrics

    def skip(self) -> dict[str, float]:
        """Publish the next version without an update (a batch with no signal): the schedule still advances."""
        self.snapshots.save(self.version, self.model)
        with warnings.catch_warnings():  # stepping the schedule without an optimizer step is meant here
            warnings.simplefilter("ignore", UserWarning)
            self.scheduler.step()
        self.version += 1
        return {"train/skipped": 1.0}

    def _micro_step(self, micro: TrainBatch) -> tuple[torch.Tensor, dict[str, float]]:
        algorithm = self.config.algorithm
        logprobs, entropy = self.logprobs(self.model, micro, entropy=True)
        proximal = logprobs.detach()
        agent = micro.loss_mask.bool()
        stale = agent & (micro.versions < self.version)
        old, missing = self._old_logprobs(micro, proximal, stale)
        loss, metrics = policy_loss(logprobs, old, micro.behaviour_logprobs, micro.advantages, micro.loss_mask,
                                    algorithm.loss, entropy=entropy.detach())
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
        return loss, metrics

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


_LOGIT_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "logits_scaling")
"""Config fields of architectures that transform the output layer's logits (Gemma 2, Cohere, Granite)."""


def _agent_logits(model: PreTrainedModel, batch: TrainBatch, agent: torch.Tensor) -> torch.Tensor:
    """``[N, V]`` float logits predicting the ``N`` agent tokens. Only their positions go through the output
    layer: prompts and observations are most of a multi-turn sequence, and for a small model the output
    layer and the softmax over the vocabulary are most of the work."""
    mask = batch.attention_mask
    right_padded = bool((mask[:, 1:] <= mask[:, :-1]).all())  # pads only after each row's tokens
    # under causal attention no real token sees a pad that follows it: the mask changes nothing, and
    # without it attention takes its fused causal path
    inputs = {"input_ids": batch.input_ids, "attention_mask": None if right_padded else mask, "use_cache": False}
    if any(getattr(model.config, name, None) for name in _LOGIT_TRANSFORMS):
        return model(**inputs).logits[:, :-1][agent].float()
    hidden = model.base_model(**inputs).last_hidden_state[:, :-1]
    return model.get_output_embeddings()(hidden[agent]).float()


_LOSS_METRICS = ("train/loss", "train/policy_loss")
"""Metrics that are the loss itself, combined over micro-batches with the loss's weights; the others are
means over agent tokens, weighted by the micro-batch's share of them, or extremes (``_min``, ``_max``)."""


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


def _trained_rows(batch: TrainBatch) -> int:
    """Rows with at least one agent token (the others have no loss)."""
    return int((batch.loss_mask.sum(-1) > 0).sum().item())


def _rows(batch: TrainBatch, rows: torch.Tensor) -> TrainBatch:
    return TrainBatch(batch.input_ids[rows], batch.attention_mask[rows], batch.loss_mask[rows],
                      batch.behaviour_logprobs[rows], batch.versions[rows], batch.advantages[rows])

"""Hypothesis property: whatever padded positions (loss mask 0) hold, even -1e4, inf or nan, the loss, its
metrics and the gradients of the layer that made the logprobs are exactly those of zero padding."""

from __future__ import annotations

import math

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.algorithms import CorrectionConfig, PolicyLossConfig, policy_loss

from .test_properties import CORRECTIONS

VOCAB, HIDDEN = 7, 5


@st.composite
def paddings(draw: st.DrawFn) -> tuple[str, float]:
    """How a padded position is filled: a constant (extreme or any float32, nan included) or ``random``
    values of a large scale, one per position."""
    if draw(st.booleans()):
        extreme = st.sampled_from([-1e4, 1e4, -math.inf, math.inf, math.nan])
        return "constant", draw(extreme | st.floats(width=32))
    return "random", draw(st.sampled_from([1e2, 1e4, 1e30]))


def pad(values: torch.Tensor, agent: torch.Tensor, padding: tuple[str, float], generator: torch.Generator
        ) -> torch.Tensor:
    kind, value = padding
    filler = (torch.full_like(values, value) if kind == "constant"
              else torch.randn(values.shape, generator=generator, dtype=values.dtype) * value)
    return torch.where(agent, values, filler)


@st.composite
def padded_batches(draw: st.DrawFn) -> dict:
    """Logprobs of a linear layer over a ragged mask (a row may have no agent token), ``pi_old`` and
    behaviour logprobs near them, ``[B]`` or ``[B, T]`` advantages and an entropy, with the paddings
    of ``pi_old``, the behaviour logprobs, ``[B, T]`` advantages and the entropy."""
    rows, cols = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    noise = st.sampled_from([0.0, 0.1, 1.0])
    return {
        "inputs": torch.randn(rows, cols, HIDDEN, generator=generator),
        "targets": torch.randint(VOCAB, (rows, cols), generator=generator),
        "agent": torch.rand(rows, cols, generator=generator) < draw(st.sampled_from([0.5, 0.8])),
        "old_noise": torch.randn(rows, cols, generator=generator) * draw(noise),
        "behaviour_noise": torch.randn(rows, cols, generator=generator) * draw(noise),
        "advantages": torch.randn(rows, cols if draw(st.booleans()) else 1, generator=generator).squeeze(-1),
        "entropy": torch.rand(rows, cols, generator=generator),
        "paddings": [draw(paddings()) for _ in range(4)],
        "generator": generator,
    }


def loss_and_grads(batch: dict, config: PolicyLossConfig, *, padded: bool) -> tuple[torch.Tensor, dict, list]:
    torch.manual_seed(0)
    layer = torch.nn.Linear(HIDDEN, VOCAB)
    logprobs = layer(batch["inputs"]).log_softmax(-1).gather(-1, batch["targets"][..., None]).squeeze(-1)
    agent = batch["agent"]
    old = logprobs.detach() + batch["old_noise"]
    behaviour = old + batch["behaviour_noise"]
    advantages, entropy = batch["advantages"], batch["entropy"]
    zero = ("constant", 0.0)
    old_pad, behaviour_pad, advantage_pad, entropy_pad = batch["paddings"] if padded else [zero] * 4
    generator = batch["generator"]
    old = pad(old, agent, old_pad, generator)
    behaviour = pad(behaviour, agent, behaviour_pad, generator)
    if advantages.dim() == 2:
        advantages = pad(advantages, agent, advantage_pad, generator)
    entropy = pad(entropy, agent, entropy_pad, generator)
    loss, metrics = policy_loss(logprobs, old, behaviour, advantages, agent.float(), config, entropy=entropy)
    loss.backward()
    return loss.detach(), metrics, [layer.weight.grad, layer.bias.grad]


@settings(max_examples=150, deadline=None)
@given(
    padded_batches(),
    st.sampled_from(CORRECTIONS),
    st.sampled_from(["token-mean", "sequence-mean"]),
    st.sampled_from([None, 3.0]),
)
def test_padding_changes_neither_loss_nor_gradients(
    batch: dict, correction: CorrectionConfig, aggregation: str, dual_clip: float | None
) -> None:
    config = PolicyLossConfig(correction=correction, aggregation=aggregation, dual_clip=dual_clip)
    loss, metrics, grads = loss_and_grads(batch, config, padded=True)
    reference_loss, reference_metrics, reference_grads = loss_and_grads(batch, config, padded=False)
    assert torch.isfinite(loss) and all(torch.isfinite(grad).all() for grad in grads)
    torch.testing.assert_close(loss, reference_loss, rtol=0, atol=0)
    for grad, reference in zip(grads, reference_grads, strict=True):
        torch.testing.assert_close(grad, reference, rtol=0, atol=0)
    assert metrics == reference_metrics

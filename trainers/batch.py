"""Trajectories as padded tensors: one row per token segment (one per trajectory, unless its template rewrote earlier
turns or its context was compacted), per-token arrays aligned to the predicted token."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields

import torch

from agentgym.trajectory import Trajectory


@dataclass(frozen=True)
class TrainBatch:
    """Right-padded rows. ``input_ids``/``attention_mask`` are ``[B, T]``; the per-token tensors are
    ``[B, T-1]`` and describe token ``t+1``, the one predicted at position ``t``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    loss_mask: torch.Tensor
    behaviour_logprobs: torch.Tensor
    versions: torch.Tensor
    """The policy version that sampled each token (-1 where no model sampled it)."""
    advantages: torch.Tensor
    """``[B]``, one per trajectory."""
    rewards: torch.Tensor
    """``[B]``, each trajectory's reward (VCPO's baseline recomputes advantages from them)."""
    groups: torch.Tensor
    """``[B]``, the group (task) each trajectory belongs to."""
    index: torch.Tensor
    """``[B]``, each row's trajectory's place in the list collated (rows are sorted longest first)."""
    segment: torch.Tensor
    """``[B]``, which of its trajectory's token segments each row is (0 for the first)."""
    sequence_tokens: torch.Tensor
    """``[B]``, the agent tokens of each row's whole trajectory (a sequence-mean divides by them)."""

    @property
    def rows(self) -> int:
        return self.input_ids.shape[0]

    @property
    def agent_tokens(self) -> int:
        return int(self.loss_mask.sum().item())

    @property
    def trained_rows(self) -> int:
        """Rows with at least one agent token (the others have no loss)."""
        return int((self.loss_mask.sum(-1) > 0).sum().item())

    @property
    def trained_sequences(self) -> int:
        """Trajectories with at least one agent token (a sequence-mean averages over them)."""
        return len(set(self.index[self.loss_mask.sum(-1) > 0].tolist()))

    def to(self, device: torch.device | str) -> TrainBatch:
        return TrainBatch(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})

    def micro_batches(self, size: int, max_tokens: int | None = None, *, packed: bool = False) -> Iterator[TrainBatch]:
        """Consecutive slices of at most ``size`` rows and, with ``max_tokens``, at most that many tokens computed
        (:meth:`cost`; a longer row goes alone), each cut to its own longest row. Rows are collated longest first,
        so a token budget makes few-row slices of long rows and many-row ones of short."""
        lengths = [int(n) for n in self.attention_mask.sum(-1).tolist()]
        start = 0
        while start < self.rows:
            end, longest, tokens = start + 1, lengths[start], lengths[start]
            while end < self.rows and end - start < size:
                wider, more = max(longest, lengths[end]), tokens + lengths[end]
                if max_tokens is not None and (more if packed else (end + 1 - start) * wider) > max_tokens:
                    break
                end, longest, tokens = end + 1, wider, more
            yield self._slice(slice(start, end), longest)
            start = end

    def cost(self, *, packed: bool = False) -> int:
        """The tokens a pass over this batch computes: rows times the longest row, or packed, the rows' own."""
        if packed:
            return int(self.attention_mask.sum().item())
        return self.rows * int(self.attention_mask.sum(-1).max().item())

    def _slice(self, rows: slice, length: int) -> TrainBatch:
        """``rows``, cut to ``length`` tokens."""
        return TrainBatch(
            input_ids=self.input_ids[rows, :length],
            attention_mask=self.attention_mask[rows, :length],
            loss_mask=self.loss_mask[rows, : length - 1],
            behaviour_logprobs=self.behaviour_logprobs[rows, : length - 1],
            versions=self.versions[rows, : length - 1],
            advantages=self.advantages[rows],
            rewards=self.rewards[rows],
            groups=self.groups[rows],
            index=self.index[rows],
            segment=self.segment[rows],
            sequence_tokens=self.sequence_tokens[rows],
        )


@dataclass(frozen=True)
class Share:
    """One rank's part of a step: its micro-batches, of which the last ``padding`` repeat one with weight 0 (every
    rank runs as many passes, since under FSDP each pass is a collective), and the whole step's agent tokens and
    trained sequences, which weigh each micro-batch's loss so the ranks' gradients sum to the whole batch's."""

    micro_batches: list[TrainBatch]
    padding: int
    agent_tokens: int
    sequences: int

    def to(self, device: torch.device | str) -> Share:
        return Share([m.to(device) for m in self.micro_batches], self.padding, self.agent_tokens, self.sequences)


def shares(batch: TrainBatch, micro_batch_size: int, world_size: int, max_tokens: int | None = None, *,
           packed: bool = False) -> list[Share]:
    """``batch``'s micro-batches (``micro_batch_size`` rows, and ``max_tokens`` tokens computed if given, ``packed``
    or padded) dealt to ``world_size`` ranks, each padded to the same number of passes. Row micro-batches go
    round-robin (collated longest first, so the ranks get alike lengths); token-budget ones, each to the rank with
    the fewest tokens so far, largest first, so that no rank waits long for the others."""
    micros = list(batch.micro_batches(micro_batch_size, max_tokens, packed=packed))
    if max_tokens is None:
        dealt = [micros[rank::world_size] for rank in range(world_size)]
    else:
        dealt = [[] for _ in range(world_size)]
        load = [0] * world_size
        for micro in sorted(micros, key=lambda m: -m.cost(packed=packed)):
            rank = load.index(min(load))
            dealt[rank].append(micro)
            load[rank] += micro.cost(packed=packed)
    passes = max(len(own) for own in dealt)
    tokens, sequences = max(batch.agent_tokens, 1), max(batch.trained_sequences, 1)
    filler = min(micros, key=lambda m: m.cost(packed=packed))  # a weight-0 pass only keeps the ranks in step: the cheapest
    return [Share(own + [filler] * (passes - len(own)), passes - len(own), tokens, sequences) for own in dealt]


def collate(trajectories: Sequence[Trajectory], advantages: torch.Tensor, pad_id: int,
            groups: Sequence[int] | None = None) -> TrainBatch:
    """Stack ``trajectories`` (token-in/token-out records) with their ``advantages`` and group ids (default: one
    group) into a batch, a row per token segment, longest rows first so micro-batches pad little."""
    if not trajectories:
        raise ValueError("cannot collate an empty list of trajectories")
    if len(advantages) != len(trajectories):
        raise ValueError(f"{len(trajectories)} trajectories but {len(advantages)} advantages")
    empty = [t for t in trajectories if len(t.token_ids) < 2]
    if empty:
        raise ValueError(f"trajectory of {empty[0].env_id} has no tokens to train on; was it played by a token policy?")
    spans = [(i, segment, start, end) for i, t in enumerate(trajectories)
             for segment, (start, end) in enumerate(t.segment_spans())]
    spans.sort(key=lambda span: span[2] - span[3])
    length = spans[0][3] - spans[0][2]
    shape = (len(spans), length)
    input_ids = torch.full(shape, pad_id, dtype=torch.long)
    attention = torch.zeros(shape, dtype=torch.long)
    loss_mask = torch.zeros(shape, dtype=torch.float32)
    behaviour = torch.zeros(shape, dtype=torch.float32)
    versions = torch.full(shape, -1, dtype=torch.long)
    for row, (i, _, start, end) in enumerate(spans):
        t, n = trajectories[i], end - start
        input_ids[row, :n] = torch.tensor(t.token_ids[start:end])
        attention[row, :n] = 1
        loss_mask[row, :n] = torch.tensor(t.loss_mask[start:end], dtype=torch.float32)
        behaviour[row, :n] = torch.tensor(t.logprobs[start:end], dtype=torch.float32)
        versions[row, :n] = torch.tensor(t.versions[start:end])
    places = [i for i, *_ in spans]
    order = torch.tensor(places, dtype=torch.long)
    return TrainBatch(
        input_ids=input_ids,
        attention_mask=attention,
        loss_mask=loss_mask[:, 1:],
        behaviour_logprobs=behaviour[:, 1:],
        versions=versions[:, 1:],
        advantages=advantages[order].float(),
        rewards=torch.tensor([trajectories[i].reward for i in places], dtype=torch.float32),
        groups=torch.tensor([groups[i] if groups is not None else 0 for i in places], dtype=torch.long),
        index=order,
        segment=torch.tensor([segment for _, segment, *_ in spans], dtype=torch.long),
        sequence_tokens=torch.tensor([sum(trajectories[i].loss_mask) for i in places], dtype=torch.float32),
    )

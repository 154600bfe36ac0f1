"""A group's identity: which task's group it is, and which carry group of that task."""

from __future__ import annotations

from dataclasses import dataclass

from agentgym.trajectory import Trajectory


@dataclass(frozen=True, order=True)
class GroupId:
    """The group of the task at ``index`` in hand-out order; ``carry`` is 0 for the task's own group and ``n`` for
    its ``n``-th carry group (``carry_over``). It travels as this value from the scheduler to the trainer; a
    trajectory holds it as ``info["group"]``."""

    index: int
    carry: int = 0

    @property
    def carried(self) -> bool:
        """A carry group: its first members were carried over from the task's earlier group."""
        return self.carry > 0

    def stamp(self, trajectory: Trajectory, size: int) -> None:
        """Record in ``trajectory.info["group"]`` that it played for this group of ``size`` members."""
        trajectory.info["group"] = {"index": self.index, "carry": self.carry, "size": size}

    @classmethod
    def of(cls, trajectory: Trajectory) -> GroupId:
        """The group ``trajectory`` played for, as :meth:`stamp` recorded it."""
        group = trajectory.info["group"]
        return cls(group["index"], group["carry"])

    def __str__(self) -> str:
        return f"g{self.index}c{self.carry}" if self.carry else f"g{self.index}"

"""A training job's side of the RollMux scheduler: registration, permits and a heartbeat, riding out a scheduler
that Ray restarts (the job registers again, saying which group it was in and which permits it holds)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from agentgym.errors import AgentGymError
from agentgym.trainers.mux.estimate import Pool, Profile
from agentgym.trainers.mux.scheduler import NAME, NAMESPACE

logger = logging.getLogger(__name__)


class Refused(AgentGymError):
    """The scheduler would not admit the job: no group had room for it (memory, a member's SLO) and no pools
    were free for a new one."""


@dataclass(frozen=True)
class Placement:
    """Where admission put a job: its group and the Ray resources that mark its rollout node and its group's
    training pool."""

    group: int
    rollout_resource: str
    train_resource: str


def scheduler_actor() -> Any:
    """The scheduler actor of the Ray cluster this process is connected to."""
    import ray

    try:
        return ray.get_actor(NAME, namespace=NAMESPACE)
    except ValueError:
        raise AgentGymError("no mux scheduler runs on this Ray cluster: start one with `agentgym mux start`") from None


class MuxClient:
    """One job's registration with the scheduler, its permits, and a heartbeat thread that keeps its lease.
    Every call rides out a scheduler restart for up to ``patience`` seconds."""

    def __init__(self, job: str, profile: Profile, *, steps: int, run_dir: str, patience: float = 120.0) -> None:
        self.job, self.profile, self.steps, self.run_dir = job, profile, steps, run_dir
        self.patience = patience
        self.heartbeat_seconds = 2.0
        """Set by the scheduler on registration (a share of its lease)."""
        self.placement: Placement | None = None
        self.held: set[Pool] = set()
        self.step = 0
        self._actor = scheduler_actor()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def register(self, *, heartbeat: bool = True) -> Placement:
        """Join a group (or get back the one a submission chose); raises :class:`Refused` with the reason.
        ``heartbeat``: keep the job's lease from this process (the job's own, not the one submitting it)."""
        group = self.placement.group if self.placement else None
        rollout = self.placement.rollout_resource if self.placement else None
        reply = self._call("register", self.job, asdict(self.profile), steps=self.steps, run_dir=self.run_dir,
                           group=group, held=sorted(self.held), rollout=rollout)
        if "refused" in reply:
            raise Refused(f"the mux scheduler refused job {self.job}: {reply['refused']}")
        self.placement = Placement(reply["group"], reply["resources"]["rollout"], reply["resources"]["train"])
        self.heartbeat_seconds = reply["heartbeat_seconds"]
        if heartbeat and self._beat is None:
            self._beat = threading.Thread(target=self._heartbeat, name=f"mux-heartbeat-{self.job}", daemon=True)
            self._beat.start()
        return self.placement

    def acquire(self, pool: Pool) -> None:
        """Wait for this job's turn on ``pool`` and take its permit."""
        self._known("acquire", pool)
        self.held.add(pool)

    def release(self, pool: Pool) -> None:
        if pool in self.held:
            self._known("release", pool)
            self.held.discard(pool)

    def close(self, reason: str = "finished") -> None:
        """Leave the group (``finished``, or why the job ended) and stop the heartbeat."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        self._call("leave", self.job, reason)
        self.held.clear()

    def _known(self, method: str, *args: Any) -> None:
        """Call ``method`` on the scheduler, registering again first where it answers that it does not know
        this job (it was restarted)."""
        while not self._call(method, self.job, *args):
            self.register()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_seconds):
            try:
                if not self._call("heartbeat", self.job, self.step):
                    self.register()
            except AgentGymError as error:  # the training loop's own calls stop the run if it stays away
                logger.warning("mux heartbeat of job %s: %s", self.job, error)

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        deadline = time.monotonic() + self.patience
        while True:
            try:
                with self._lock:
                    actor = self._actor
                return ray.get(getattr(actor, method).remote(*args, **kwargs))
            except (RayActorError, ActorUnavailableError) as error:
                if time.monotonic() > deadline:
                    raise AgentGymError(f"the mux scheduler has been unreachable for {self.patience:.0f} s "
                                        f"({type(error).__name__}); is `agentgym mux start` still running?") from error
                time.sleep(0.5)
                try:
                    with self._lock:
                        self._actor = scheduler_actor()
                except AgentGymError:
                    continue

"""Engine replicas on Ray: each replica an actor holding one engine (``torch`` on CPU, ``vllm`` on a GPU), and
:class:`ReplicatedEngine`, the :class:`~agentgym.inference.types.InferenceEngine` that routes to them.

* Routing: every request of one conversation (``GenerationRequest.session``) goes to the same replica, whose
  prefix cache holds it, a LATR tree of a turn included (its forks share that prefix, and the replica's engine
  grows the whole tree); a new conversation goes to the least loaded replica. The routing runs in whichever
  process sends the request (the env workers), so requests go straight to the replicas.
* Weights: :meth:`ReplicatedEngine.update_weights` puts the state dict in Ray's object store once, posts it
  on a board and sends it to every replica; each interrupts its requests in flight, which continue under the
  new weights. The version returned (and :attr:`version`, which the scheduler's staleness bound reads) moves
  only once every replica holds the new weights.
* Faults: a replica that dies is restarted by Ray (on another node if its own is gone) and loads the latest
  weights from the board before it serves; requests it held are sent again to another replica, so every token
  is sampled, and tagged, by a replica holding the weights of its version.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import RayActorError

from agentgym.cluster.members import Members, answer
from agentgym.errors import AgentGymError
from agentgym.inference import EngineSpec, engine_spec
from agentgym.inference.tree import LatrParams
from agentgym.inference.types import (
    EngineStats,
    GenerationRequest,
    GenerationResult,
    SleepingEngine,
    TreeEngine,
    TreeResult,
)

SESSIONS = 65536
"""Conversations a client remembers the replica of (least recently used forgotten first)."""
REPLICA_WAIT = 120.0
"""Seconds a request waits for a live replica (one restarts in the time its engine takes to load)."""
RETRY_PAUSE = 0.2
"""Seconds between tries while every replica is down."""
STATS_EVERY = 1.0
"""Seconds between refreshes of the replicas' counters that :meth:`ReplicatedEngine.stats` returns."""


class EngineUnavailable(AgentGymError):
    """No engine replica could answer a request."""


class WeightBoard:
    """(A Ray actor.) The latest weights published: their version and where they are (an object reference,
    held in a list so Ray passes it on as a reference, or a checkpoint folder)."""

    def __init__(self) -> None:
        self._version = 0
        self._weights: list[Any] = []

    def publish(self, version: int, weights: list[Any]) -> None:
        self._version, self._weights = version, weights

    def latest(self) -> tuple[int, list[Any]]:
        return self._version, self._weights


class EngineReplica:
    """(A Ray actor.) One engine of ``spec`` (which travels whole: the engine need not be registered in the actor's
    process); on its first call after a (re)start it loads the latest weights from the board named ``board`` (a
    name, not a handle: a restart could not use arguments held in the object store)."""

    def __init__(self, spec: EngineSpec, model: str, kwargs: dict[str, Any], board: str) -> None:
        self.engine: SleepingEngine = spec.load()(model, **kwargs)
        self._board = board
        self._synced: asyncio.Lock | None = None
        self._current = False

    async def _catch_up(self) -> None:
        if self._current:
            return
        self._synced = self._synced or asyncio.Lock()
        async with self._synced:
            if not self._current:
                version, weights = await ray.get_actor(self._board).latest.remote()
                if weights and version != self.engine.version:
                    source = weights[0]
                    state = await source if isinstance(source, ray.ObjectRef) else source
                    await self.engine.update_weights(state, version=version)
                self._current = True

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        await self._catch_up()
        return await self.engine.generate(request)

    async def generate_tree(self, request: GenerationRequest, params: LatrParams, width: int) -> TreeResult:
        await self._catch_up()
        if not isinstance(self.engine, TreeEngine):
            raise AgentGymError(f"tree rollouts need an engine that grows trees (torch or vllm), not "
                                f"{self.engine.name}")
        return await self.engine.generate_tree(request, params, width)

    async def update_weights(self, weights: Mapping[str, Any] | str, version: int) -> int:
        await self._catch_up()
        return await self.engine.update_weights(weights, version=version)

    async def sleep(self) -> None:
        await self.engine.sleep()

    async def wake_up(self) -> None:
        await self.engine.wake_up()

    async def version(self) -> int:
        """The version this replica serves (after catching up)."""
        await self._catch_up()
        return self.engine.version

    def stats(self) -> EngineStats:
        return self.engine.stats()

    def reset_stats(self) -> None:
        self.engine.reset_stats()

    def where(self) -> dict[str, Any]:
        """The node id and process id of this replica."""
        return {"node": ray.get_runtime_context().get_node_id(), "pid": os.getpid()}

    async def close(self) -> None:
        await self.engine.close()


@functools.cache
def _remote(cls: type) -> Any:
    return ray.remote(cls)


class EngineClient:
    """Sends requests to engine replicas: one conversation to one replica, a new one to the least loaded, and a
    request whose replica died to another. Picklable: it is what an env worker's policy holds. A
    :class:`~agentgym.inference.types.TreeEngine` (its replicas grow the trees) whose weights and counters belong
    to the :class:`ReplicatedEngine` that owns the replicas: a client refuses ``update_weights`` and counts nothing."""

    def __init__(self, name: str, model: str, replicas: list[Any], version: int = 0) -> None:
        self.name, self.model = name, model
        self._replicas = replicas
        self._version = version
        self._members: Members[Any] | None = None
        self._sessions: OrderedDict[str, int] = OrderedDict()
        self._tokenizer: Any = None

    def __reduce__(self) -> tuple[Any, ...]:
        return EngineClient, (self.name, self.model, self._replicas, self._version)

    @property
    def members(self) -> Members[Any]:
        if self._members is None:
            self._members = Members(self._replicas, lambda replica: replica.version.remote(), "engine replica")
        return self._members

    @property
    def version(self) -> int:
        return self._version

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.model)
        return self._tokenizer

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        result: GenerationResult = await self._on_replica(request, lambda replica: replica.generate.remote(request))
        return result

    async def generate_tree(self, request: GenerationRequest, params: LatrParams, width: int) -> TreeResult:
        """Grow ``request``'s tree on the replica of its conversation (see
        :meth:`~agentgym.inference.types.TreeEngine.generate_tree`); a replica that dies meanwhile loses the tree,
        which is grown again on another."""
        result: TreeResult = await self._on_replica(
            request, lambda replica: replica.generate_tree.remote(request, params, width))
        return result

    async def update_weights(self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None) -> int:
        """Refused: only the :class:`ReplicatedEngine` that made the replicas publishes their weights."""
        raise AgentGymError("an engine client cannot update the replicas' weights; the ReplicatedEngine that owns "
                            "them does")

    def stats(self) -> EngineStats:
        """Nothing counted here (the :class:`ReplicatedEngine` that owns the replicas reads their counters)."""
        return EngineStats()

    def reset_stats(self) -> None:
        """Nothing to reset here (see :meth:`stats`)."""

    async def close(self) -> None:
        """Stop waiting for dead replicas to come back (the replicas themselves live on); safe to call twice."""
        if self._members is not None:
            self._members.stop_probing()

    async def _on_replica(self, request: GenerationRequest, call: Callable[[Any], ray.ObjectRef[Any]]) -> Any:
        """``call(replica)``'s answer from the replica of ``request``'s conversation, or from another where that
        one died (until one answers, or :class:`EngineUnavailable` after :data:`REPLICA_WAIT` seconds)."""
        members = self.members
        deadline = time.monotonic() + REPLICA_WAIT
        while True:
            index = self._route(request.session)
            with members.holding(index) as replica:
                try:
                    return await answer(call(replica))
                except RayActorError as exc:
                    members.died(index, exc)
                    if time.monotonic() > deadline:
                        raise EngineUnavailable(f"no engine replica answered request {request.request_id} within "
                                                f"{REPLICA_WAIT:g} s ({len(self._replicas)} replicas)") from exc
            if len(members.down) == len(self._replicas):  # every one is restarting
                await asyncio.sleep(RETRY_PAUSE)

    def _route(self, session: str | None) -> int:
        members = self.members
        index = members.pick(self._sessions.get(session) if session else None)
        if session:
            self._sessions[session] = index
            self._sessions.move_to_end(session)
            if len(self._sessions) > SESSIONS:
                self._sessions.popitem(last=False)
        return index


class ReplicatedEngine(EngineClient):
    """``replicas`` engines ``engine`` of ``model`` as Ray actors (``options``: their resources), behind the
    routing of :class:`EngineClient`; the process that makes it owns them and publishes their weights."""

    def __init__(self, engine: str, model: str | Path, *, replicas: int = 1, options: dict[str, Any] | None = None,
                 **engine_kwargs: Any) -> None:
        board = f"agentgym-weights-{uuid.uuid4().hex[:12]}"
        self._board = _remote(WeightBoard).options(name=board, num_cpus=0).remote()
        actor = _remote(EngineReplica).options(**(options or {}), max_restarts=-1, max_task_retries=0)
        spec = engine_spec(engine)
        handles = [actor.remote(spec, str(model), engine_kwargs, board) for _ in range(replicas)]
        super().__init__(engine, str(model), handles)
        self._stats = EngineStats()
        self._refresher: asyncio.Task[None] | None = None
        self._weights: list[Any] = []
        self._closed = False
        try:
            ray.get([replica.version.remote() for replica in handles])
        except RayActorError as exc:
            self._end()
            raise EngineUnavailable(f"an engine replica of {model} did not start: {_first_line(exc)}") from None

    @property
    def replicas(self) -> list[Any]:
        """The replica actors (for inspection and fault drills)."""
        return list(self._replicas)

    async def update_weights(self, weights: Mapping[str, Any] | str | Path, *, version: int | None = None) -> int:
        version = self._version + 1 if version is None else version
        if isinstance(weights, Mapping):
            payload: Any = ray.put({name: tensor.detach().cpu() for name, tensor in weights.items()})
        else:
            payload = str(weights)
        self._weights = [payload]
        await self._board.publish.remote(version, self._weights)
        results = await asyncio.gather(*(answer(r.update_weights.remote(payload, version)) for r in self._replicas),
                                       return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, RayActorError):
                raise result  # a replica that died loads the board's weights when it is back; any other failure is real
        self._version = version
        return version

    async def sleep(self) -> None:
        """Every replica hands its device to a colocated trainer (see the engines' ``sleep``)."""
        await asyncio.gather(*(answer(r.sleep.remote()) for r in self._replicas))

    async def wake_up(self) -> None:
        await asyncio.gather(*(answer(r.wake_up.remote()) for r in self._replicas))

    def stats(self) -> EngineStats:
        """The replicas' counters summed, busy time averaged over them (so its fraction stays within 0 and 1),
        as of the last refresh (every :data:`STATS_EVERY` seconds while an event loop runs here)."""
        if self._refresher is None and not self._closed:
            with contextlib.suppress(RuntimeError):  # no running loop: the counters stay as they are
                self._refresher = asyncio.get_running_loop().create_task(self._refresh_forever())
        return self._stats

    def reset_stats(self) -> None:
        ray.get([replica.reset_stats.remote() for replica in self._replicas])
        self._stats = EngineStats()

    async def refresh_stats(self) -> EngineStats:
        """Read every live replica's counters now."""
        live = [r for i, r in enumerate(self._replicas) if i not in self.members.down]
        found = await asyncio.gather(*(answer(r.stats.remote()) for r in live), return_exceptions=True)
        stats = [s for s in found if isinstance(s, EngineStats)]
        if stats:
            total = {field: sum(getattr(s, field) for s in stats) for field in EngineStats.model_fields}
            total["busy_seconds"] /= len(stats)
            total["wall_seconds"] = max(s.wall_seconds for s in stats)
            self._stats = EngineStats(**total)
        return self._stats

    async def _refresh_forever(self) -> None:
        while True:
            await self.refresh_stats()
            await asyncio.sleep(STATS_EVERY)

    async def close(self) -> None:
        """Stop every replica (each closes its engine first); safe to call twice."""
        if self._closed:
            return
        self._closed = True
        if self._refresher is not None:
            self._refresher.cancel()
        self.members.stop_probing()
        await asyncio.gather(*(answer(r.close.remote()) for r in self._replicas), return_exceptions=True)
        self._end()

    def _end(self) -> None:
        self._closed = True
        for actor in [*self._replicas, self._board]:
            ray.kill(actor)


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if lines else type(exc).__name__

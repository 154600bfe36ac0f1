"""Past one process: the rollout's env workers and the engine's replicas as Ray actors (``backend: ray``).

Nothing here imports Ray until a ray backend is opened; ``pip install 'agentgym[ray]'`` installs it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from agentgym.cluster.config import BackendConfig, RayConfig
from agentgym.rollout.runner import Backend, LocalBackend

__all__ = ["BackendConfig", "RayConfig", "open_backend"]


@contextmanager
def open_backend(config: BackendConfig) -> Iterator[Backend]:
    """The backend ``config`` names, for the duration of the block (a local Ray it started is stopped after)."""
    if config.backend == "local":
        yield LocalBackend()
        return
    from agentgym.cluster.backend import RayBackend

    backend = RayBackend(config.ray)
    try:
        yield backend
    finally:
        backend.close()


"""A sandbox's disk: an ext4 file system of ``disk_mb`` MiB in a sparse image on the host's disk, loop-mounted for
the sandbox's life. Both backends keep a sandbox's work dir and ``/tmp`` on it (its ``work`` and ``tmp`` folders),
so that what a sandbox writes takes at most ``disk_mb`` of the host's disk and none of its memory: past it a write
fails with ENOSPC. Mounting needs root, loop devices and ``mkfs.ext4``; where they are missing, :func:`disk_mb`
refuses a ``disk_mb`` that was set and drops the default one with a warning.

The image lives in the sandbox's state folder on the host (``tempfile.gettempdir()``): on a host whose temporary
folder is itself in memory (a tmpfs), set ``TMPDIR`` to a folder on a disk.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
import warnings
from pathlib import Path

from agentgym.sandboxes.base import MiB, SandboxSpec
from agentgym.sandboxes.errors import SandboxUnavailable

WORK, TMP = "work", "tmp"
"""The folders of the file system that a sandbox sees as its work dir and as ``/tmp``."""
HOST_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""Where the host's ``mkfs.ext4``, ``mount`` and ``umount`` are looked for."""
_warned: set[str] = set()
"""The fallbacks already announced in this process (each warns once)."""


def disk_mb(spec: SandboxSpec, refusal: str | None, *, backend: str, instead: str) -> int | None:
    """MiB of the disk to mount for ``spec``, ``None`` for none. Where none can be mounted (``refusal`` says why), a
    ``disk_mb`` that was set raises :class:`SandboxUnavailable` naming the key, and the default one is dropped with
    a warning (once per process) saying what ``backend``'s sandboxes get ``instead``."""
    if spec.disk_mb is None or refusal is None:
        return spec.disk_mb
    if "disk_mb" in spec.model_fields_set:
        raise SandboxUnavailable(f"disk_mb={spec.disk_mb} cannot be enforced here ({refusal}); run as root where"
                                 f" loop devices can be mounted, or set disk_mb to null ({instead})")
    if instead not in _warned:
        _warned.add(instead)
        warnings.warn(f"{backend} sandboxes get no disk of disk_mb here ({refusal}): {instead}; set disk_mb to null"
                      " to say that is meant", RuntimeWarning, stacklevel=3)
    return None


@functools.cache
def refusal() -> str | None:
    """Why no disk can be mounted here, ``None`` when one can: a small one is mounted and removed once."""
    with tempfile.TemporaryDirectory(prefix="agentgym-disk-probe-") as folder:
        try:
            mount(Path(folder), 16)
            unmount(Path(folder))
        except OSError as exc:
            return str(exc)
    return None


def mount(state: Path, size_mb: int) -> None:
    """Mount at ``state/disk`` a file system of ``size_mb`` MiB in ``state/disk.img``, through a loop device. The
    image is sparse (it takes on the host's disk what is written, at most its size) and has no journal (its
    contents die with the sandbox); unlike a tmpfs, what it holds is not pinned in memory: the page cache of what
    a sandbox writes is charged to it but reclaimed as the data reaches the disk."""
    image = state / "disk.img"
    with image.open("xb") as file:
        file.truncate(size_mb * MiB)
    image.chmod(0o600)
    _run_host(["mkfs.ext4", "-q", "-m", "0", "-O", "^has_journal,^resize_inode", "-E", "nodiscard", str(image)])
    (state / "disk").mkdir(mode=0o755, exist_ok=True)
    _run_host(["mount", "-o", "loop,nosuid,nodev,noinit_itable", str(image), str(state / "disk")])


def unmount(state: Path) -> None:
    """Unmount ``state/disk`` if it is mounted (the loop device goes with it once nothing else holds it); one
    unmounted meanwhile by a concurrent removal of the same sandbox counts as done."""
    if os.path.ismount(state / "disk"):
        try:
            _run_host(["umount", str(state / "disk")])
        except OSError:
            if os.path.ismount(state / "disk"):
                raise


def _run_host(argv: list[str]) -> None:
    """Run a host tool; an ``OSError`` naming it and its complaint when it fails."""
    try:
        done = subprocess.run(argv, env={"PATH": HOST_PATH}, capture_output=True, text=True, timeout=60,
                              check=False)
    except FileNotFoundError:
        raise OSError(f"{argv[0]} is not installed (apt-get install -y e2fsprogs mount)") from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise OSError(f"{argv[0]} failed: {exc}") from exc
    if done.returncode != 0:
        raise OSError(f"{argv[0]} failed: {done.stderr.strip()}")

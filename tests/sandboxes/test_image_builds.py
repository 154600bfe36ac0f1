"""Building images safely: concurrent builders of one image take turns (one build), and a build that fails or
is terminated leaves neither a Debian root nor a running debootstrap behind. No Docker engine is needed: the
failing builds are forced, so they reach debootstrap before they ask the engine anything."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import psutil
import pytest

from agentgym.sandboxes import SandboxError, images

BUILDER = textwrap.dedent("""
    import fcntl, sys, time
    from pathlib import Path
    from agentgym.sandboxes.images import _once

    out, me, other = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    take_lock = fcntl.flock

    def flock(fd, operation):  # says when this builder found the lock held
        try:
            return take_lock(fd, operation)
        except BlockingIOError:
            (out / f"blocked-{me}").touch()
            raise

    fcntl.flock = flock

    def build(lock):
        with open(out / "builds", "a") as log:
            log.write(me + "\\n")
        deadline = time.monotonic() + 60
        while not (out / f"blocked-{other}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # until the other builder waits at the lock this one holds
        (out / "image").touch()

    _once("test-image", (out / "image").is_file, build)
""")

TERMINATED = textwrap.dedent("""
    import sys
    from agentgym.sandboxes import images
    images.debian_mirror = lambda: sys.argv[1]
    images.build_images(["base"], force=True)
""")

needs_debootstrap = pytest.mark.skipif(
    shutil.which("debootstrap") is None or os.geteuid() != 0,
    reason="runs debootstrap, which needs root and `apt-get install -y debootstrap`",
)


def test_two_processes_building_the_same_image_build_it_once(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    builders = [subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp_path), me, other], env=env,
                                 stderr=subprocess.PIPE, text=True)
                for me, other in (("a", "b"), ("b", "a"))]
    for builder in builders:
        assert builder.wait(timeout=60) == 0, builder.stderr.read()
        builder.stderr.close()
    assert len((tmp_path / "builds").read_text().splitlines()) == 1
    assert len(list(tmp_path.glob("blocked-*"))) == 1  # the other builder waited, then found the image built
    assert (tmp_path / "cache" / "agentgym" / "locks" / "test-image.lock").is_file()


@needs_debootstrap
def test_a_failed_build_removes_its_root_and_those_that_dead_builds_left(tmp_path, monkeypatch):
    stale = tmp_path / f"{images.WORKSPACE_PREFIX}dead" / "root" / "etc"
    stale.mkdir(parents=True)
    monkeypatch.setattr(images, "CACHE", tmp_path)
    monkeypatch.setattr(images, "debian_mirror", lambda: f"http://127.0.0.1:{_closed_port()}/debian")
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    with pytest.raises(SandboxError, match="debootstrap failed"):
        images.build_images(["base"], force=True)
    assert not list(tmp_path.glob(f"{images.WORKSPACE_PREFIX}*"))


@needs_debootstrap
def test_a_terminated_build_kills_debootstrap_and_removes_its_root(tmp_path, silent_mirror):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "no_proxy": "127.0.0.1"}
    mirror = f"http://127.0.0.1:{silent_mirror.getsockname()[1]}/debian"
    builder = subprocess.Popen([sys.executable, "-c", TERMINATED, mirror], env=env, stderr=subprocess.PIPE,
                               text=True)
    helpers: list[psutil.Process] = []
    try:
        connection, _ = silent_mirror.accept()  # debootstrap asks for the Release file and waits
        with connection:
            helpers = psutil.Process(builder.pid).children(recursive=True)
            assert helpers and list((tmp_path / "agentgym").glob(f"{images.WORKSPACE_PREFIX}*"))
            builder.send_signal(signal.SIGTERM)
            assert builder.wait(timeout=30) == 128 + signal.SIGTERM, builder.stderr.read()
            assert not list((tmp_path / "agentgym").glob(f"{images.WORKSPACE_PREFIX}*"))
            assert not [process.pid for process in helpers if _alive(process)]
    finally:
        for process in helpers:
            if _alive(process):
                process.kill()
        if builder.poll() is None:
            builder.kill()
        builder.wait(timeout=30)
        builder.stderr.close()


@pytest.fixture
def silent_mirror() -> Iterator[socket.socket]:
    """A listening socket, as a Debian mirror that never answers what it is asked."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        yield server


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return server.getsockname()[1]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

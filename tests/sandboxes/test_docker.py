"""Docker-specific checks: the container really carries its limits (memory for the processes, a disk of its own
for the files), images are content-addressed, ports are reachable from the host, what the commands do cannot
bring the container down, and a container that dies under a sandbox is reported as such (killed from inside, or
from outside)."""

from __future__ import annotations

import asyncio
import gc
import os
import re
import shutil
import signal
import socket
import time
import urllib.request
import warnings
from pathlib import Path

import pytest

from agentgym.sandboxes import (
    SandboxDied,
    SandboxError,
    SandboxKilledFromInside,
    SandboxUnavailable,
    disk,
    oom_kills,
    open_sandbox,
    reap,
)
from agentgym.sandboxes.base import LABEL, OWNER_LABEL, MiB, owner
from agentgym.sandboxes.docker_engine import client, engine_mount_refusal
from agentgym.sandboxes.docker_sandbox import SERVER_CAPS, STATE_DIR, live
from agentgym.sandboxes.images import DEFINITIONS, build_images, content_tag, image_tag, rootfs_tag
from agentgym.sandboxes.pool import SandboxPool
from tests.sandboxes.conftest import mounts_under, run
from tests.sandboxes.test_isolation import sandbox_of_a_killed_process
from tests.sandboxes.test_pool import settle
from tests.waiting import until

pytestmark = pytest.mark.docker


@pytest.fixture
def opened(docker_engine):
    """``opened(**spec_fields)`` opens a docker sandbox; all are closed afterwards."""
    sandboxes = []

    def make(**fields):
        sandbox = run(open_sandbox("docker", **fields))
        sandboxes.append(sandbox)
        return sandbox

    yield make
    for sandbox in sandboxes:
        run(sandbox.close())


def test_the_container_carries_every_limit_and_drops_every_privilege(opened):
    sandbox = opened(memory_mb=300, disk_mb=200, pids=77, cpus=0.5)
    attrs = client().api.inspect_container(sandbox.id)
    host = attrs["HostConfig"]
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and host["CapAdd"] == SERVER_CAPS == ["SETUID", "SETGID", "KILL"]
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["NetworkMode"] == "none"
    assert (host["PidsLimit"], host["Memory"], host["MemorySwap"]) == (77, 300 * MiB, 300 * MiB)  # no more
    disk_folder = STATE_DIR / sandbox.id / "disk"
    assert sorted(host["Binds"]) == [f"{disk_folder}/tmp:/tmp:rw", f"{disk_folder}/work:/work:rw"]
    assert not host.get("Tmpfs")
    shm = 300 // 8 * MiB  # /dev/shm and System V shared memory: each an eighth of memory_mb, within it
    assert host["ShmSize"] == shm and host["Sysctls"]["kernel.shmmax"] == str(shm)
    assert host["NanoCpus"] == 500_000_000 and host["Init"] is True
    assert attrs["Config"]["User"] == "0:0"  # the init and the exec server; the commands run as 1000
    assert attrs["Config"]["Labels"][LABEL] == "1" and attrs["Config"]["Labels"][OWNER_LABEL] == owner()
    assert attrs["Config"]["Image"] == image_tag("python")
    inside = run(sandbox.exec("id -u; grep CapEff /proc/self/status; touch /etc/x 2>&1; echo ok > f; cat f;"
                              " df -m --output=size /work /tmp | tail -n 2", timeout=10))
    lines = inside.stdout.splitlines()
    assert lines[0] == "1000" and lines[1].split() == ["CapEff:", "0000000000000000"]
    assert "Read-only file system" in lines[2] and lines[3] == "ok"
    assert lines[4] == lines[5] and 180 < int(lines[4]) <= 200  # one file system of disk_mb for both


def test_image_tags_are_content_hashes_and_an_unchanged_definition_is_not_rebuilt(docker_engine, monkeypatch):
    import docker

    tags = build_images()
    assert set(tags) >= {"base", "python", "shell"}
    for name, tag in tags.items():
        assert re.fullmatch(rf"agentgym/{name}:[0-9a-f]{{12}}", tag)
        assert tag == content_tag(name) == image_tag(name)
        assert client().images.get(f"agentgym/{name}:latest").id == client().images.get(tag).id
        assert client().images.get(tag).labels[LABEL] == "1"

    def no_build(*args, **kwargs):
        raise AssertionError("an up-to-date image was rebuilt")

    monkeypatch.setattr(docker.models.images.ImageCollection, "build", no_build)
    monkeypatch.setattr(docker.api.client.APIClient, "import_image", no_build)
    assert build_images() == tags


def test_a_tag_changes_with_the_bytes_of_its_definition_and_of_what_it_is_built_from(tmp_path):
    copy = tmp_path / "images"
    shutil.copytree(DEFINITIONS, copy)
    names = ("base", "python", "shell")
    before = {name: content_tag(name, copy) for name in names}
    assert before == {name: content_tag(name, DEFINITIONS) for name in names}

    with open(copy / "shell" / "Dockerfile", "a") as dockerfile:
        dockerfile.write("\n")
    after_shell = {name: content_tag(name, copy) for name in names}
    assert after_shell["shell"] != before["shell"]
    assert (after_shell["base"], after_shell["python"]) == (before["base"], before["python"])

    rootfs = rootfs_tag(copy)
    with open(copy / "base" / "packages", "a") as packages:
        packages.write("less\n")
    assert rootfs_tag(copy) != rootfs
    assert all(content_tag(name, copy) != after_shell[name] for name in names)


def test_bytecode_written_beside_a_definition_changes_no_tag(tmp_path):
    copy = tmp_path / "images"
    shutil.copytree(DEFINITIONS, copy)
    before = content_tag("desktop", copy)
    (copy / "desktop" / "__pycache__").mkdir()
    (copy / "desktop" / "__pycache__" / "desktop.cpython-311.pyc").write_bytes(b"compiled by an install")
    (copy / "desktop" / "stray.pyc").write_bytes(b"compiled")
    assert content_tag("desktop", copy) == before


def test_expose_reaches_a_server_inside_a_networked_sandbox(opened):
    sandbox = opened(network=True)
    run(sandbox.write_file("hello.txt", "hello from inside"))
    # the command returns once the server is up: by then it has left the command's process group, which the
    # exec server kills when the command ends (right after `setsid -f` forks, the child has not left it yet)
    run(sandbox.exec("setsid -f python3 -u -m http.server 8000 >server.log 2>&1;"
                     " for _ in $(seq 300); do grep -q Serving server.log && break; sleep 0.1; done", timeout=60))
    address = run(sandbox.expose(8000))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + 60  # a cold Python in a fresh container on two busy cores takes its time
    while True:
        try:
            with opener.open(f"http://{address}/hello.txt", timeout=5) as response:
                assert response.read() == b"hello from inside"
                break
        except OSError as error:
            if time.monotonic() > deadline:
                server = run(sandbox.exec("cat server.log; ps -ef", timeout=10)).stdout
                raise AssertionError(f"nothing answered at {address}; inside the sandbox:\n{server}") from error
            time.sleep(0.2)
    with pytest.raises(SandboxError, match="no network"):
        run(opened().expose(8000))


def test_a_container_killed_from_outside_makes_the_next_exec_raise_sandbox_died(opened):
    sandbox = opened()
    assert run(sandbox.exec("true", timeout=10)).ok
    client().api.kill(sandbox.id)
    with pytest.raises(SandboxDied):
        run(sandbox.exec("true", timeout=10))
    run(sandbox.close())
    assert sandbox.id not in live()


def disk_mounts(name: str) -> list[str]:
    """The host's mounts and loop devices that belong to docker sandbox ``name``'s disk."""
    return mounts_under(STATE_DIR / name)


def test_the_container_removes_itself_when_the_process_that_made_it_is_killed_and_reap_its_disk(docker_engine):
    orphan = sandbox_of_a_killed_process("docker")
    until(lambda: orphan not in live(), "the orphaned container removed itself")
    assert disk_mounts(orphan)  # only the process that made it unmounts it, or reap
    assert reap(("docker",)) >= 1
    assert not disk_mounts(orphan) and not (STATE_DIR / orphan).exists()


def test_close_removes_the_container_then_unmounts_its_disk(opened):
    sandbox = opened(disk_mb=32)
    assert disk_mounts(sandbox.id)
    run(sandbox.close())
    assert sandbox.id not in live() and not disk_mounts(sandbox.id) and not (STATE_DIR / sandbox.id).exists()


def test_where_no_disk_can_be_mounted_a_set_disk_mb_is_refused_and_the_default_is_kept_in_memory(
        opened, monkeypatch):
    monkeypatch.setattr(disk, "refusal", lambda: "mount: permission denied")
    monkeypatch.setattr(disk, "_warned", set())
    with pytest.raises(SandboxUnavailable, match="disk_mb=64 cannot be enforced here"):
        opened(disk_mb=64)
    with pytest.warns(RuntimeWarning, match="in memory, taking from memory_mb"):
        sandbox = opened(memory_mb=96)
    host = client().api.inspect_container(sandbox.id)["HostConfig"]
    assert host["Memory"] == 96 * MiB and "size=96m" in host["Tmpfs"]["/work"] and not host["Binds"]
    assert run(sandbox.exec("echo fine > f && cat f", timeout=10)).stdout == "fine\n"
    assert not disk_mounts(sandbox.id)


def test_an_engine_that_does_not_see_this_hosts_mounts_gets_no_disk(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://192.0.2.1:2375")
    assert "is not on this host" in engine_mount_refusal()


def test_reap_removes_the_containers_of_dead_owners_and_keeps_the_rest(docker_engine):
    dead = f"{socket.gethostname()}:{os.getpid()}:0"  # this pid with another start time: a process that ended
    made = {}
    try:
        for who in (dead, owner()):
            made[who] = client().containers.run(image_tag("python"), ["sleep", "infinity"], detach=True,
                                                network_mode="none", labels={LABEL: "1", OWNER_LABEL: who}).name
        assert reap(("docker",)) >= 1
        assert made[dead] not in live() and made[owner()] in live()
    finally:
        for name in made.values():
            if name in live():
                client().api.remove_container(name, force=True)


def test_a_warm_container_killed_from_outside_is_found_dead_and_replaced_by_the_pool(docker_engine):
    async def scenario() -> None:
        async with SandboxPool("docker", size=1) as pool:
            await pool.release(await pool.acquire())
            await settle(pool)
            warm = pool._idle[0]
            assert warm.alive
            client().api.kill(warm.id)
            for _ in range(200):
                if not warm.alive:
                    break
                await asyncio.sleep(0.05)
            assert not warm.alive
            replacement = await pool.acquire()
            assert replacement is not warm and (await replacement.exec("echo ok", timeout=10)).stdout == "ok\n"
            assert pool.metrics.replaced == 1

    run(scenario())


def test_a_sandbox_that_garbles_its_answer_stream_is_reported_dead_not_believed(opened):
    sandbox = opened()
    refused = run(sandbox.exec("printf 'garbage, not a frame' > /proc/1/fd/1", timeout=10))
    assert refused.exit_code != 0 and "Permission denied" in refused.stderr  # not from a command
    # root, from outside: the init's stdout is the server's
    garble = ["sh", "-c", "sleep 1; printf 'garbage, not a frame' > /proc/1/fd/1"]
    client().api.exec_start(client().api.exec_create(sandbox.id, garble, user="0")["Id"], detach=True)
    with pytest.raises(SandboxDied) as raised:
        run(sandbox.exec("sleep 5", timeout=10))
    assert not isinstance(raised.value, SandboxKilledFromInside)
    assert not sandbox.alive
    with pytest.raises(SandboxDied):
        run(sandbox.exec("true", timeout=10))


def test_no_command_can_signal_the_server_or_the_init(opened):
    sandbox = opened()
    server = run(sandbox.exec("pgrep -u root -f AGENTGYM_EXEC_SERVER | tail -n 1", timeout=10)).stdout.strip()
    assert server.isdigit() and server != "1"
    attempt = run(sandbox.exec(f"kill -9 {server}; kill -9 1; kill -STOP {server}", timeout=10))
    assert attempt.stderr.count("Operation not permitted") == 3, attempt
    everything = run(sandbox.exec("sleep 300 & setsid -f sleep 301; kill -9 -1", timeout=10))
    assert everything.exit_code == 137  # its own `timeout` died; the server answers on
    left = run(sandbox.exec("ps -eo user=,args= | grep -c '^agent *sleep 30' || true", timeout=10))
    assert left.ok and left.stdout.strip() == "0"  # what ran as the agent is gone, the server is not
    assert run(sandbox.exec("cat /proc/self/oom_score_adj", timeout=10)).stdout.strip() == "1000"


BOMB = """
held = []
while True:
    chunk = bytearray(1 << 20)
    chunk[::4096] = b"x" * len(chunk[::4096])
    held.append(chunk)
    print(len(held), flush=True)
"""
"""Takes memory a MiB at a time until it is killed, saying how many MiB it holds after each."""
PEAK = "cat /sys/fs/cgroup/memory/memory.max_usage_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.peak"
"""The most memory the container's cgroup has held (cgroup v1, else v2)."""


def test_memory_mb_caps_the_processes_and_disk_mb_the_disk_neither_taking_from_the_other(opened):
    """The disk is on the host's disk, not in memory: nearly all of it can be written with four times less memory
    (what is written is in the page cache only until it reaches the disk), a write past it is ENOSPC, and a memory
    bomb then still gets most of memory_mb and no more."""
    sandbox = opened(memory_mb=128, disk_mb=512)
    host = client().api.inspect_container(sandbox.id)["HostConfig"]
    assert host["Memory"] == host["MemorySwap"] == 128 * MiB
    fill = run(sandbox.exec("head -c 480M /dev/zero > big && echo wrote; head -c 64M /dev/zero > /tmp/more",
                            timeout=300))
    assert fill.stdout == "wrote\n" and fill.exit_code != 0 and "No space left on device" in fill.stderr, fill
    assert run(sandbox.exec("stat -c %s big", timeout=30)).stdout == f"{480 * MiB}\n"
    bomb = run(sandbox.exec(["python3", "-c", BOMB], timeout=120))
    held = int(bomb.stdout.split()[-1])
    assert bomb.exit_code == 137 and 64 <= held <= 128, (held, bomb.stderr)
    assert int(run(sandbox.exec(PEAK, timeout=10)).stdout) <= 128 * MiB  # the server and the page cache included
    shared = run(sandbox.exec("head -c 500M /dev/zero > /dev/shm/fill; df -m --output=size /dev/shm | tail -n 1",
                              timeout=60))
    assert "No space left on device" in shared.stderr and shared.stdout.split() == [str(128 // 8)], shared
    system_v = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                "print(libc.shmget(0, 500 << 20, 0o1600), ctypes.get_errno())")
    assert run(sandbox.exec(["python3", "-c", system_v], timeout=30)).stdout.split()[0] == "-1"
    emptied = run(sandbox.exec("rm big /dev/shm/fill && echo emptied", timeout=30))
    assert emptied.stdout == "emptied\n"


def test_a_container_killed_by_its_own_memory_limit_is_killed_from_inside(opened):
    sandbox = opened(memory_mb=128, disk_mb=None)  # the work dir takes from memory_mb: filling it is fatal
    with pytest.raises(SandboxKilledFromInside, match="ran out of memory"):
        for _ in range(5):  # the kernel kills the filling command first, then the server when it next forks
            run(sandbox.exec("head -c 1000M /dev/zero > fill", timeout=30))
    assert not sandbox.alive
    with pytest.raises(SandboxKilledFromInside):
        run(sandbox.exec("true", timeout=10))


def test_a_command_that_makes_the_server_the_kernels_pick_brings_its_sandbox_down_from_inside(opened):
    """With the disk out of memory, a container can still die of its own limit: a command may lower its pick to
    the server's (no capability is needed down to 0) and hold its memory in processes smaller than the server."""
    sandbox = opened(memory_mb=128)
    small = "import time; b = bytearray(6 << 20); b[::4096] = b'x' * len(b[::4096]); time.sleep(60)"
    with pytest.raises(SandboxKilledFromInside, match="ran out of memory"):
        run(sandbox.exec(f"echo 0 > /proc/self/oom_score_adj; for i in $(seq 40); do python3 -c \"{small}\" & done;"
                         " wait", timeout=60))


def _exec_server_pid(container: str) -> int:
    """The host pid of the container's exec server: its init's only child."""
    init = client().api.inspect_container(container)["State"]["Pid"]
    (server,) = Path(f"/proc/{init}/task/{init}/children").read_text().split()
    return int(server)


def test_where_the_kernels_log_cannot_be_read_a_death_by_the_memory_limit_is_the_infrastructures(
        opened, monkeypatch):
    monkeypatch.setattr(oom_kills, "KMSG", "/nonexistent/kmsg")  # as for a process that is not root
    sandbox = opened(memory_mb=128, disk_mb=None)
    with pytest.raises(SandboxDied, match="its container stopped") as raised:
        for _ in range(5):
            run(sandbox.exec("head -c 1000M /dev/zero > fill", timeout=30))
    assert not isinstance(raised.value, SandboxKilledFromInside), raised.value


@pytest.mark.parametrize("outside", ["rm -f", "kill", "kill -9 of its server on the host"])
def test_a_container_killed_from_outside_is_not_killed_from_inside_even_after_running_out_of_memory(
        opened, outside):
    """Right after a command of the sandbox was killed for its memory limit, a death that the limit did not cause
    is the infrastructure's: a kill from outside, with or without the engine's knowing (the kernel's log has
    nothing about the server)."""
    if outside == "kill -9 of its server on the host" and os.geteuid() != 0:
        pytest.skip("killing a container's process on the host needs root")
    sandbox = opened(memory_mb=64, disk_mb=64)
    hog = run(sandbox.exec(["python3", "-c", "b = bytearray(1 << 31); b[::4096] = b'x' * len(b[::4096])"],
                           timeout=60))
    assert hog.exit_code == 137  # an out-of-memory kill in the container, which lives on

    async def killed_while_running() -> None:
        command = asyncio.ensure_future(sandbox.exec("sleep 300", timeout=600))
        while not (await sandbox.exec("pgrep -x sleep || true", timeout=30)).stdout.strip():
            await asyncio.sleep(0.05)  # until the command runs
        if outside == "kill":
            client().api.kill(sandbox.id)
        elif outside == "rm -f":
            client().api.remove_container(sandbox.id, force=True)
        else:
            os.kill(_exec_server_pid(sandbox.id), signal.SIGKILL)
        await command

    with pytest.raises(SandboxDied) as raised:
        run(killed_while_running())
    assert not isinstance(raised.value, SandboxKilledFromInside), raised.value


def test_a_command_that_ignores_the_polite_stop_is_killed_and_counts_as_timed_out(opened):
    sandbox = opened()
    result = run(sandbox.exec("trap '' TERM; sleep 3600", timeout=1))
    assert result.timed_out and result.duration < 60  # killed, not waited for
    assert run(sandbox.exec("ps -eo args | grep -c '^sleep 3600' || true", timeout=10)).stdout.strip() == "0"


def test_a_creation_cancelled_midway_leaves_no_container_and_no_socket(docker_engine):
    mine = {"label": f"{OWNER_LABEL}={owner()}"}
    gc.collect()  # what earlier tests left is not this test's

    async def cancel_once_the_container_exists():
        creating = asyncio.create_task(open_sandbox("docker"))
        while not await asyncio.to_thread(client().api.containers, all=True, filters=mine):
            await asyncio.sleep(0.01)
        creating.cancel()
        with pytest.raises(asyncio.CancelledError):
            await creating

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        run(cancel_once_the_container_exists())
        until(lambda: not client().api.containers(all=True, filters=mine), "the cancelled creation's container is gone")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


def test_a_missing_image_is_unavailable_not_pulled(docker_engine):
    with pytest.raises(SandboxUnavailable, match="docker pull"):
        run(open_sandbox("docker", image="agentgym-test/not-here:0"))


def test_an_engine_that_stopped_answering_makes_docker_unavailable_and_auto_pass_it_over(monkeypatch):
    import docker

    from agentgym.sandboxes import SandboxSpec, backend_module, choose_backend, docker_engine

    gone = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.41")
    monkeypatch.setattr(docker_engine, "_client", gone)
    with pytest.raises(SandboxUnavailable, match="stopped answering"):
        backend_module("docker").check(SandboxSpec())
    try:
        assert choose_backend("auto", SandboxSpec()) != "docker"
    except SandboxUnavailable as exc:
        assert "docker: the Docker engine stopped answering" in str(exc)


@pytest.mark.parametrize("address", ["missing", "refusing"])
def test_probing_an_engine_that_is_not_there_leaves_no_socket_open(tmp_path, monkeypatch, address):
    import docker

    from agentgym.sandboxes import SandboxSpec, backend_module, docker_engine

    path = tmp_path / "docker.sock"
    if address == "refusing":  # the socket file of a dockerd that was killed: nothing listens on it
        with socket.socket(socket.AF_UNIX) as left:
            left.bind(str(path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{path}")
    monkeypatch.setattr(docker_engine, "_client", None)
    gc.collect()  # what earlier tests left is not this test's
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        assert not docker_engine._answers(docker)
        with pytest.raises(SandboxUnavailable, match="no Docker engine answers"):
            client()
        gone = docker.DockerClient(base_url=f"unix://{path}", version="1.41")
        monkeypatch.setattr(docker_engine, "_client", gone)
        with pytest.raises(SandboxUnavailable, match="stopped answering"):
            backend_module("docker").check(SandboxSpec())
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []


@pytest.mark.parametrize("disk_mb", [1024, None])
def test_a_work_dir_from_the_image_starts_with_its_files_the_commands_own(opened, disk_mb, tmp_path):
    """On a disk of its own or in memory, the work dir holds the image's files at that path (which its mount hides),
    writable by the commands; nothing is left of the containers the files were read from."""
    before = {c.id for c in client().containers.list(all=True)}
    sandbox = opened(image="agentgym/swe-inflection", workdir="/testbed", workdir_from_image=True, disk_mb=disk_mb)
    listing = run(sandbox.exec("stat -c '%U %n' test_inflection.py inflection/__init__.py && echo x >> setup.py",
                               timeout=10))
    assert listing.ok and listing.stdout == "agent test_inflection.py\nagent inflection/__init__.py\n"
    assert {c.id for c in client().containers.list(all=True)} - before == {client().containers.get(sandbox.id).id}


def test_the_local_backend_refuses_a_work_dir_from_an_image():
    with pytest.raises(SandboxUnavailable, match="workdir_from_image needs an image"):
        run(open_sandbox("local", workdir_from_image=True))

"""agentgym's sandbox images, built here without a registry: ``agentgym/base`` is a Debian root made by
``debootstrap`` and imported into Docker, and each env image is a Dockerfile ``FROM agentgym/base``.

Definitions live in ``images/<name>/`` (a ``Dockerfile`` plus its files). Every image is tagged
``agentgym/<name>:<content hash>`` (the hash of its definition, its parent's tag and any host file it
copies) and ``agentgym/<name>:latest``, so an unchanged definition is never rebuilt. Builders of one image
take turns through a file lock under :data:`CACHE` (the second finds it built and skips), and a build that
fails, is interrupted or is terminated leaves no Debian root behind.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from agentgym.sandboxes.base import LABEL
from agentgym.sandboxes.docker_engine import client, docker_module
from agentgym.sandboxes.errors import SandboxError, SandboxUnavailable

DEFINITIONS = Path(__file__).with_name("images")
"""The image definitions shipped with agentgym: one folder per image."""
REPOSITORY = "agentgym"
BASE = "base"
ROOTFS = "rootfs"
"""The pseudo-image a ``FROM agentgym/rootfs`` line names: the imported debootstrap root."""
SUITE, VARIANT = "bookworm", "minbase"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
HOST_FILES = {BASE: {"ca-certificates.crt": HOST_CA_BUNDLE}}
"""Host files copied into an image's build context (and hashed into its tag), by image name."""
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentgym"
"""Where the debootstrap root tarballs (one per recipe), the build locks and the roots being made are kept."""
LOCK_TIMEOUT = 3600.0
"""Seconds a builder waits for another process's build of the same image before it gives up."""
WORKSPACE_PREFIX = "agentgym-rootfs-"
HASH_LENGTH = 12
BYTECODE = ("__pycache__", "*.pyc")
"""What Python writes beside an image's files when an install compiles them: no part of the definition, so neither
hashed nor built in."""
_FROM = re.compile(rf"^(FROM\s+){REPOSITORY}/([a-z0-9][a-z0-9_.-]*)\s*$", re.IGNORECASE | re.MULTILINE)


def image_names(definitions: Path = DEFINITIONS) -> list[str]:
    """The names of the defined images, each after the image it is built from."""
    names = sorted(p.parent.name for p in definitions.glob("*/Dockerfile"))
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name not in ordered:
            parent = _parent(name, definitions)
            if parent != ROOTFS:
                visit(parent)
            ordered.append(name)

    for name in names:
        visit(name)
    return ordered


def content_tag(name: str, definitions: Path = DEFINITIONS) -> str:
    """``agentgym/<name>:<hash>``: the tag the current definition of ``name`` builds to."""
    digest = hashlib.sha256(f"{name}\0{_parent_tag(name, definitions)}\0".encode())
    folder = _folder(name, definitions)
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not _bytecode(p.relative_to(folder))):
        digest.update(f"{path.relative_to(folder).as_posix()}\0".encode() + path.read_bytes() + b"\0")
    for target, source in sorted(HOST_FILES.get(name, {}).items()):
        digest.update(f"{target}\0".encode() + _host_file(source).read_bytes() + b"\0")
    return f"{REPOSITORY}/{name}:{digest.hexdigest()[:HASH_LENGTH]}"


def _bytecode(path: Path) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in path.parts for pattern in BYTECODE)


def image_tag(name: str) -> str:
    """The content tag of agentgym image ``name`` (``python`` or ``agentgym/python``); raises
    :class:`SandboxUnavailable` naming the build command when that image is not built."""
    name = name.removeprefix(f"{REPOSITORY}/")
    tag = content_tag(name)
    if not _present(tag):
        raise SandboxUnavailable(f"image {REPOSITORY}/{name} is not built (or is out of date): "
                                 f"run `agentgym sandbox build {name}`")
    return tag


def is_defined(image: str) -> bool:
    """Whether ``image`` (``agentgym/<name>``, no tag) is one of agentgym's defined images."""
    repository, _, name = image.partition("/")
    return repository == REPOSITORY and (DEFINITIONS / name / "Dockerfile").is_file()


def build_images(names: Iterable[str] | None = None, *, force: bool = False) -> dict[str, str]:
    """Build the images ``names`` (default: all) and what they are built from, skipping those whose content
    tag exists unless ``force``; returns each asked name's tag. The first build runs ``debootstrap`` (needs
    root and a Debian mirror) and keeps the root under :data:`CACHE`, so later base builds take seconds."""
    known = image_names()
    wanted = known if names is None else [n.removeprefix(f"{REPOSITORY}/") for n in names]
    unknown = sorted(set(wanted) - set(known))
    if unknown:
        raise SandboxUnavailable(f"no image definition for {', '.join(unknown)}; defined: {', '.join(known)}")
    built: dict[str, str] = {}
    with _terminate_as_exit():
        for name in known:
            needed = name in wanted or any(_depends_on(other, name) for other in wanted)
            if needed:
                built[name] = _build(name, force=force and name in wanted)
    return {name: built[name] for name in wanted}


def rootfs_recipe(definitions: Path = DEFINITIONS) -> list[str]:
    """The ``debootstrap`` arguments (without target and mirror) of the root ``agentgym/base`` comes from."""
    lines = (_folder(BASE, definitions) / "packages").read_text().splitlines()
    packages = sorted({line.split("#")[0].strip() for line in lines} - {""})
    return [f"--variant={VARIANT}", f"--include={','.join(packages)}", SUITE]


def rootfs_tag(definitions: Path = DEFINITIONS) -> str:
    """``agentgym/rootfs:<hash of the recipe>``: the tag of the imported debootstrap root."""
    digest = hashlib.sha256("\0".join(rootfs_recipe(definitions)).encode()).hexdigest()
    return f"{REPOSITORY}/{ROOTFS}:{digest[:HASH_LENGTH]}"


def debian_mirror() -> str:
    """The Debian mirror this host's apt uses for :data:`SUITE` (``/etc/apt/sources.list`` and
    ``sources.list.d``), else :data:`DEFAULT_MIRROR`."""
    sources = Path("/etc/apt/sources.list")
    texts = [sources.read_text()] if sources.is_file() else []
    texts += [p.read_text() for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))]
    texts += [p.read_text() for p in sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    for text in texts:
        for stanza in re.split(r"\n\s*\n", text):
            fields = dict(re.findall(r"^(URIs|Suites):\s*(.+)$", stanza, re.MULTILINE))
            if SUITE in fields.get("Suites", "").split():
                uri = fields.get("URIs", "").split()
                if uri and uri[0].rstrip("/").endswith("/debian"):
                    return uri[0].rstrip("/")
        for line in re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", text, re.MULTILINE):
            if line[1] == SUITE and line[0].rstrip("/").endswith("/debian"):
                return line[0].rstrip("/")
    return DEFAULT_MIRROR


# -- building ---------------------------------------------------------------------------------------


def _build(name: str, *, force: bool) -> str:
    tag = content_tag(name)
    _once(name, lambda: not force and _present(tag), lambda _: _docker_build(name, tag, force=force))
    return tag


def _docker_build(name: str, tag: str, *, force: bool) -> None:
    parent = _parent(name, DEFINITIONS)
    parent_tag = _import_rootfs(force=force) if parent == ROOTFS else content_tag(parent)
    with tempfile.TemporaryDirectory(prefix=f"agentgym-build-{name}-") as context:
        shutil.copytree(_folder(name, DEFINITIONS), context, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(*BYTECODE))
        for target, source in HOST_FILES.get(name, {}).items():
            shutil.copyfile(_host_file(source), Path(context) / target)
        dockerfile = Path(context) / "Dockerfile"
        dockerfile.write_text(_FROM.sub(lambda m: m.group(1) + parent_tag, dockerfile.read_text(), count=1))
        try:
            image, _ = client().images.build(path=context, tag=tag, labels={LABEL: "1"}, network_mode="host",
                                             rm=True, forcerm=True, nocache=force, pull=False)
        except (docker_module().errors.DockerException, OSError) as exc:
            log = "".join(str(e.get("stream", e.get("error", ""))) for e in getattr(exc, "build_log", []))
            raise SandboxError(f"building {tag} failed: {exc}\n{log[-2000:]}") from exc
    image.tag(f"{REPOSITORY}/{name}", "latest")


def _import_rootfs(*, force: bool) -> str:
    tag = rootfs_tag()
    _once(ROOTFS, lambda: not force and _present(tag), lambda lock: _import(_rootfs_tarball(lock), tag))
    return tag


def _import(tarball: Path, tag: str) -> None:
    repository, _, version = tag.partition(":")
    try:
        answer = client().api.import_image(src=str(tarball), repository=repository, tag=version,
                                           changes=[f"LABEL {LABEL}=1"])
    except (docker_module().errors.DockerException, OSError) as exc:
        raise SandboxError(f"importing {tarball} as {tag} failed: {exc}") from exc
    if not _present(tag):
        raise SandboxError(f"importing {tarball} as {tag} failed: {answer}")


def _rootfs_tarball(lock: int) -> Path:
    """The cached tarball of the debootstrap root for the current recipe, made when missing. Called holding
    the :data:`ROOTFS` build lock ``lock``, which debootstrap's processes inherit: a root found while holding
    it was left by a build that died, and is removed."""
    for stale in CACHE.glob(f"{WORKSPACE_PREFIX}*"):
        _remove_workspace(stale)
    tarball = CACHE / f"rootfs-{rootfs_tag().partition(':')[2]}.tar"
    if tarball.is_file():
        return tarball
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise SandboxUnavailable("building agentgym/base needs debootstrap: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise SandboxUnavailable("building agentgym/base runs debootstrap, which needs root")
    workspace = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX, dir=CACHE))
    root = workspace / "root"
    try:
        returncode, output = _run_group([debootstrap, *rootfs_recipe(), str(root), debian_mirror()], lock)
        if returncode != 0:
            raise SandboxError(f"debootstrap failed (exit {returncode}): {output[-2000:]}")
        partial = workspace / "rootfs.tar"
        excluded = ["--exclude=./var/cache/apt/archives/*.deb", "--exclude=./var/lib/apt/lists/*"]
        packed = subprocess.run(["tar", "-C", str(root), "--numeric-owner", *excluded, "-cf", str(partial),
                                 "."], check=False, capture_output=True, text=True)
        if packed.returncode != 0:
            raise SandboxError(f"packing the debootstrap root failed: {packed.stderr[-2000:]}")
        partial.rename(tarball)
    finally:
        _remove_workspace(workspace)
    return tarball


def _run_group(argv: list[str], lock: int) -> tuple[int, str]:
    """Run ``argv`` in a process group of its own that inherits ``lock``; returns its exit status and its
    output (stdout and stderr). When waiting is interrupted (an exception, Ctrl-C, SIGTERM under
    :func:`_terminate_as_exit`) the whole group is killed first, so nothing goes on writing into the root."""
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True, pass_fds=(lock,)) as process:
        try:
            output, _ = process.communicate()
        except BaseException:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            raise
    return process.returncode, output


def _remove_workspace(workspace: Path) -> None:
    """Remove a root being made, after lazily unmounting whatever debootstrap mounted inside it (deepest
    first), so that the removal never reaches into the host's ``/proc`` or ``/sys``."""
    prefix = str(workspace.resolve()) + "/"
    with open("/proc/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        subprocess.run(["umount", "-l", point], check=False)
    shutil.rmtree(workspace, ignore_errors=True)


# -- turns and interruptions ------------------------------------------------------------------------


def _once(name: str, built: Callable[[], bool], build: Callable[[int], object]) -> None:
    """Run ``build`` unless ``built()``, holding the build lock of image ``name``: a concurrent builder of it
    waits, then finds it built and skips. ``build`` gets the lock's descriptor, for child processes that must
    hold the lock for as long as they run."""
    if built():
        return
    with _build_lock(name) as lock:
        if not built():
            build(lock)


@contextmanager
def _build_lock(name: str) -> Iterator[int]:
    """Hold the lock file ``CACHE/locks/<name>.lock`` (``flock``: freed when every process holding it is
    gone, however it ended), waiting up to :data:`LOCK_TIMEOUT` seconds for the builder that holds it."""
    path = CACHE / "locks" / f"{name}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise SandboxError(f"another build of {REPOSITORY}/{name} has held {path} for over "
                                       f"{LOCK_TIMEOUT:g} s; wait for it or stop it") from None
                time.sleep(0.5)
        yield lock
    finally:
        os.close(lock)


@contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """While images build, SIGTERM (a timeout, a cancelled job) raises :class:`SystemExit` so that the cleanup
    of an unfinished build runs; only where SIGTERM still has its default action, in the main thread."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def exit_(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, exit_)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# -- definitions ------------------------------------------------------------------------------------


def _folder(name: str, definitions: Path) -> Path:
    folder = definitions / name
    if not (folder / "Dockerfile").is_file():
        known = ", ".join(sorted(p.parent.name for p in definitions.glob("*/Dockerfile")))
        raise SandboxUnavailable(f"no image definition {REPOSITORY}/{name} in {definitions}; "
                                 f"defined: {known}")
    return folder


def _parent(name: str, definitions: Path) -> str:
    """The agentgym image (or :data:`ROOTFS`) that ``name``'s Dockerfile starts from."""
    found = _FROM.search((_folder(name, definitions) / "Dockerfile").read_text())
    if found is None:
        raise SandboxError(f"the Dockerfile of {REPOSITORY}/{name} must start `FROM {REPOSITORY}/<image>`")
    return found.group(2)


def _parent_tag(name: str, definitions: Path) -> str:
    parent = _parent(name, definitions)
    return rootfs_tag(definitions) if parent == ROOTFS else content_tag(parent, definitions)


def _depends_on(name: str, ancestor: str) -> bool:
    parent = _parent(name, DEFINITIONS)
    return parent != ROOTFS and (parent == ancestor or _depends_on(parent, ancestor))


def _host_file(path: Path) -> Path:
    if not path.is_file():
        raise SandboxUnavailable(f"{path} is missing on this host: apt-get install -y ca-certificates")
    return path


def _present(tag: str) -> bool:
    try:
        client().images.get(tag)
    except docker_module().errors.ImageNotFound:
        return False
    return True

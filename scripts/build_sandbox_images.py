"""Build agentgym's sandbox images before the tests run, so that no per-test timeout covers a first build (a
fresh machine's debootstrap and desktop image take minutes). Starts the Docker engine for the build when none
runs and stops it afterwards; where a prerequisite is missing (no engine to start, no debootstrap), says so
and the Docker tests skip with the reason; a build that fails exits non-zero."""

from agentgym.sandboxes import SandboxUnavailable
from agentgym.sandboxes.docker_engine import ensure_engine
from agentgym.sandboxes.images import build_images

try:
    engine = ensure_engine()
    try:
        for name, tag in build_images().items():
            print(f"{name}\t{tag}")
    finally:
        engine.stop()
except SandboxUnavailable as exc:
    print(f"sandbox images not built: {exc}")

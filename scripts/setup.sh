#!/usr/bin/env bash
# Create .venv (if missing) and install agentgym into it with the given extras; prints the venv's bin dir.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-dev}"
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv >&2
fi
# torch first, pinned, so the extras never pull another (CUDA) build; a GPU user installs their own torch first.
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile "torch==${AGENTGYM_TORCH_VERSION:-2.13.0}" >&2
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-compile -e ".[${extras}]" >&2
# Bytecode once, up front: with PYTHONDONTWRITEBYTECODE set (as on CI), every process would otherwise
# recompile torch and transformers from source on import (~10 s each). Incremental; a file that fails
# to compile (some packages ship Python 2 test files) only stays uncompiled.
.venv/bin/python -m compileall -q -j 0 .venv/lib/python3*/site-packages >/dev/null 2>&1 || true
echo "$PWD/.venv/bin"

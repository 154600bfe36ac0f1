#!/usr/bin/env bash
# The README's first command: install, build a tiny model locally, warm-start it with SFT on oracle
# demonstrations, then train it with async RL on FrozenLake and report held-out success before and after.
# Arguments are overrides of the RL stage (e.g. trainer.steps=20). SHOWCASE=mixture runs the mixture showcase
# instead (scripts/mixture.sh): its SFT stages, then trainers/configs/$SHOWCASE.yaml.
set -euo pipefail
name="${SHOWCASE:-quickstart}"
# Each SFT stage starts from the one before it (its config's model:); the mixture learns the games, then
# Calculator alone, then the three together.
stages=("sft-$name")
[ "$name" = mixture ] && stages=(sft-games sft-calculator sft-mixture)
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
cd "$(dirname "$0")/.."
rm -rf "runs/$name" "${stages[@]/#/runs/}"
"$bin/agentgym" model init --preset tiny "runs/$name/tiny-model"
for stage in "${stages[@]}"; do
  "$bin/agentgym" sft "trainers/configs/$stage.yaml"
done
"$bin/agentgym" train "trainers/configs/$name.yaml" "$@"

#!/usr/bin/env bash
# The README's first command: install, check every bundled environment, evaluate the reference
# policies (oracle and random) on each of them, then build a tiny model locally and evaluate it
# through the asynchronous rollout on the torch engine.
set -euo pipefail
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
cd "$(dirname "$0")/.."
"$bin/agentgym" list
"$bin/agentgym" check --all
"$bin/agentgym" eval --all --policy oracle --policy random --episodes 60 --out runs/quickstart "$@"
"$bin/agentgym" model init --preset tiny --force runs/quickstart/tiny-model
"$bin/agentgym" eval games/FrozenLake-v0 --engine torch --model runs/quickstart/tiny-model --episodes 16 \
  --max-tokens 32 --concurrency 16 --out runs/quickstart

#!/usr/bin/env bash
# The README's first command: install, check every bundled environment, and evaluate the reference
# policies (oracle and random) on each of them.
set -euo pipefail
bin="$(bash "$(dirname "$0")/setup.sh" dev)"
"$bin/agentgym" list
"$bin/agentgym" check --all
"$bin/agentgym" eval --all --policy oracle --policy random --episodes 60 --out runs/quickstart "$@"

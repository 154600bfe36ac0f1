#!/usr/bin/env bash
# Record the reference agents on all-v0's test split, and those that can play them on miniwob-v0's and
# textarena-v0's, and regenerate the leaderboard from them.
# Needs the Docker engine running with the sandbox images built (`agentgym sandbox build desktop`), Chromium,
# the quickstart's tiny agents (`bash scripts/quickstart.sh` leaves runs/sft-quickstart/model and
# runs/quickstart/train/checkpoints/) and the mixture showcase's (`bash scripts/mixture.sh` leaves
# runs/mixture/train/checkpoints/). About 45 minutes on 2 cores. Each run keeps its whole folder in
# runs/reference/; its manifest and summary are recorded in benchmarks/results/recorded/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.venv/bin
last_model() { ls -d "$1"/checkpoints/step-*/model | sort | tail -1; }
rl_model="$(last_model runs/quickstart/train)"
mixture_model="$(last_model runs/mixture/train)"
tiny=(--env-arg parser=pythonic --env-arg games/FrozenLake-v0:describe=true --max-tokens 32 --temperature 1)
declare -A agents=(
  [oracle]="--policy oracle"
  [random]="--policy random"
  [sft-tiny]="--engine torch --model runs/sft-quickstart/model ${tiny[*]}"
  [rl-tiny]="--engine torch --model $rl_model ${tiny[*]}"
  [rl-mixture-tiny]="--engine torch --model $mixture_model ${tiny[*]} --env-arg games/Sokoban-v0:describe=true"
)
declare -A models=([sft-tiny]=runs/sft-quickstart/model [rl-tiny]="$rl_model" [rl-mixture-tiny]="$mixture_model")
for name in oracle random sft-tiny rl-tiny rl-mixture-tiny; do
  out="runs/reference/$name"
  resume=(); [ -f "$out/manifest.json" ] && resume=(--resume)
  # shellcheck disable=SC2086
  "$bin/agentgym" eval --suite all-v0 ${agents[$name]} --out "$out" "${resume[@]}"
  mkdir -p "benchmarks/results/recorded/$name"
  cp "$out/manifest.json" "$out/summary.json" "benchmarks/results/recorded/$name/"
done
# The suites of other projects' tasks, which have no oracle: MiniWoB++'s subset and TextArena's games.
for suite in miniwob-v0 textarena-v0; do
  for name in random sft-tiny rl-tiny rl-mixture-tiny; do
    out="runs/reference/$name/$suite"
    resume=(); [ -f "$out/manifest.json" ] && resume=(--resume)
    args=(--policy random)  # the games' arguments above name environments these suites do not play
    [ "$name" != random ] && args=(--engine torch --model "${models[$name]}" --env-arg parser=pythonic --max-tokens 32
                                  --temperature 1)
    "$bin/agentgym" eval --suite "$suite" "${args[@]}" --out "$out" "${resume[@]}"
    mkdir -p "benchmarks/results/recorded/$name/$suite"
    cp "$out/manifest.json" "$out/summary.json" "benchmarks/results/recorded/$name/$suite/"
  done
done
# A sample report: the RL tiny agent's (solved and failed lakes, desktops it could not work), with the screens it shows.
sample=benchmarks/results/sample-report
rm -rf "$sample" && mkdir -p "$sample/screens"
cp runs/reference/rl-tiny/report.md runs/reference/rl-tiny/report.html runs/reference/rl-tiny/scores.png "$sample/"
grep -o 'screens/[0-9a-f]*\.png' "$sample/report.md" | sort -u | xargs -I{} cp runs/reference/rl-tiny/{} "$sample/screens/"
"$bin/agentgym" leaderboard

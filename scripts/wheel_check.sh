#!/usr/bin/env bash
# agentgym installed as a user installs it (a step of CI): build the sdist and the wheel (the wheel from the sdist)
# and check both with twine; install the wheel, not editable, into a new virtual environment outside the checkout,
# torch's CPU build first; then, from an empty folder, run list, check, model init, one training step on a bundled
# config given by name, eval, view answering over HTTP and mux --help. Any failure fails the script; the
# environment and every folder it made are removed on exit. Most of its time is the install.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/.venv/bin"
if ! "$bin/python" -c "import build, twine" 2>/dev/null; then
  bash "$root/scripts/setup.sh" dev >/dev/null  # build and twine come with the dev extras
fi
extras="train,view"
torch_version="${AGENTGYM_TORCH_VERSION:-2.13.0}"
limit=1200  # seconds any one command may take: a hang fails the step, a loaded machine does not

work="$(mktemp -d -t agentgym-wheel-check.XXXXXX)"
view_pid=""
cleanup() {
  if [ -n "$view_pid" ]; then
    kill -KILL "$view_pid" 2>/dev/null || true
    wait "$view_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

step() { printf '\n== %s  [%d s]\n' "$*" "$SECONDS" >&2; }
fail() { echo "wheel check: $*" >&2; exit 1; }
# In the foreground (the script's process group), so that a Ctrl-C or a group's SIGTERM reaches the command too.
bounded() { timeout --foreground --kill-after=30 "$limit" "$@"; }
run() { step "$*"; bounded "$@"; }

step "build the sdist and the wheel, and check their metadata"
bounded "$bin/python" -m build --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; fail "python -m build failed"; }
"$bin/python" -m twine check --strict "$work"/dist/*
wheels=("$work"/dist/agentgym-*.whl)
wheel="${wheels[0]}"

step "a new virtual environment outside the checkout, and torch $torch_version in it first"
"$bin/python" -m venv "$work/venv"
venv="$work/venv/bin"
pip=("$venv/python" -m pip install --quiet --disable-pip-version-check --no-compile)
bounded "${pip[@]}" "torch==$torch_version"
step "pip install --dry-run $(basename "$wheel")[$extras] keeps that torch"
# A resolver that replaced it would pull a CUDA build.
bounded "${pip[@]}" --dry-run --report "$work/plan.json" "$wheel[$extras]"
"$venv/python" - "$work/plan.json" <<'EOF'
import json
import sys

names = [item["metadata"]["name"] for item in json.load(open(sys.argv[1]))["install"]]
torches = [name for name in names if name.lower() in {"torch", "triton"} or name.lower().startswith("nvidia-")]
sys.exit(f"wheel check: installing the wheel would also install {', '.join(torches)}" if torches else 0)
EOF
step "pip install $(basename "$wheel")[$extras]"
bounded "${pip[@]}" "$wheel[$extras]"

step "from an empty folder, with only the new environment on the path"
mkdir "$work/user"
cd "$work/user"
unset PYTHONPATH PYTHONDONTWRITEBYTECODE  # the checkout is not importable; the first run compiles what it imports
export PATH="$venv:$PATH"
[ "$(command -v agentgym)" = "$venv/agentgym" ] || fail "agentgym is not the new environment's"
python - <<'EOF'
import sys

import agentgym
import agentgym.trainers

for module in (agentgym, agentgym.trainers):
    if not module.__file__.startswith(sys.prefix):
        sys.exit(f"wheel check: {module.__name__} imports from {module.__file__}, not from the installed wheel")
EOF

run agentgym --version
run agentgym list >list.txt
grep -q "games/FrozenLake-v0" list.txt || fail "agentgym list does not list games/FrozenLake-v0"
run agentgym check games/FrozenLake-v0
run agentgym model init --preset tiny model
run agentgym train quickstart model.path=model output_dir=run trainer.steps=1 trainer.groups_per_step=2 \
  trainer.group_size=2 trainer.concurrency=4 trainer.micro_batch_size=4 eval.episodes=2 checkpoint.every=0 \
  algorithm.skip_uniform_groups=false  # an untrained model scores 0 everywhere: train on that group anyway
grep -q "\"train/loss\"" run/metrics.jsonl || fail "the training run recorded no trained step"
run agentgym eval games/FrozenLake-v0 --engine torch --model model --difficulty easy --episodes 3 --max-tokens 8 \
  --out eval
[ -s eval/summary.json ] || fail "agentgym eval wrote no summary.json"

step "agentgym view run --port 0, answering over HTTP, stopped by SIGINT"
agentgym view run --port 0 >view.log 2>&1 &
view_pid=$!
url=""
for _ in $(seq "$limit"); do
  url="$(grep -o 'http://[^ ]*' view.log | head -n 1 || true)"
  [ -n "$url" ] && break
  kill -0 "$view_pid" 2>/dev/null || { cat view.log >&2; fail "agentgym view exited before it served"; }
  sleep 1
done
[ -n "$url" ] || fail "agentgym view printed no address in $limit s"
curl -fsSL --retry 10 --retry-connrefused --max-time 120 "$url" -o page.html
grep -q "agentgym view</title>" page.html || fail "$url is not the viewer's run page"
curl -fsS --max-time 120 "${url%/}/static/view.css" -o /dev/null
kill -INT "$view_pid"
for _ in $(seq 120); do
  kill -0 "$view_pid" 2>/dev/null || break
  sleep 1
done
status=0
kill -0 "$view_pid" 2>/dev/null && fail "agentgym view still runs 120 s after SIGINT"
wait "$view_pid" || status=$?
view_pid=""
[ "$status" = 0 ] || [ "$status" = 130 ] || fail "agentgym view exited with status $status after SIGINT"

run agentgym mux --help >/dev/null
step "the sandbox image definitions shipped whole: the same content tags as the checkout's"
tags='from agentgym.sandboxes.images import content_tag, image_names; print(*map(content_tag, image_names()))'
[ "$(python -c "$tags")" = "$(cd "$root" && "$bin/python" -c "$tags")" ] \
  || fail "the installed sandbox image definitions differ from the checkout's"
step "the wheel works"

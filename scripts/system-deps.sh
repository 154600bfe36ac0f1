#!/usr/bin/env bash
# The system packages the sandbox and browser tests need (Docker engine, bubblewrap, debootstrap, Chromium),
# installed with apt when missing and this is root on Debian/Ubuntu; elsewhere the tests that need them skip
# with the reason.
set -euo pipefail
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing ${missing[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2 \
    || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2; }
fi

#!/usr/bin/env bash
# make demo: run hookd on its embedded SQLite default with a local receiver and show deliveries
# (and a retry) happening. Keeps running for exploration when started from a terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/hookd ] || { echo "build/hookd missing: run make demo" >&2; exit 1; }
exec node scripts/demo.mjs "$@"

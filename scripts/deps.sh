#!/usr/bin/env bash
# Installs the Debian 12 packages hookd needs to build, test, demo and benchmark.
# Idempotent: only packages that are missing are installed. Runs as root or via sudo.
set -euo pipefail

# libpq-dev: the outbox relay's client library; postgresql: a real server for its tests
pkgs=(build-essential cmake pkg-config
      libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev libjansson-dev
      libpq-dev postgresql libcmocka-dev clang libclang-rt-14-dev sqlite3 curl ca-certificates)
case "${1:-}" in
  --bench) pkgs+=(nginx wrk python3 openssl) ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js (black-box tests): 18.19 or later (node --test --test-concurrency); Debian 12's is
# 18.19 since its 12.5 point release. Installed (or brought up to date) from Debian when older.
node_ok() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 &&
    node -e 'const [a, b] = process.versions.node.split(".").map(Number);
             process.exit(a > 18 || (a === 18 && b >= 19) ? 0 : 1)'
}
node_ok || missing+=(nodejs npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
if ! node_ok; then
  echo "deps: Node.js 18.19 or later is needed (found $(node --version 2>/dev/null || echo none))" >&2
  exit 1
fi

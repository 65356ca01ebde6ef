#!/usr/bin/env bash
# Installs the Debian 12 packages hookd needs to build, test, demo and benchmark.
# Idempotent: only packages that are missing are installed. Runs as root or via sudo.
set -euo pipefail

# libpq-dev: the outbox relay's client library; postgresql: a real server for its tests
pkgs=(build-essential cmake pkg-config
      libmicrohttpd-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev libjansson-dev
      libpq-dev postgresql libcmocka-dev clang libclang-rt-14-dev sqlite3 curl ca-certificates)
case "${1:-}" in
  --bench) pkgs+=(nginx wrk) ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node.js (black-box tests): any version >= 18 will do; install Debian's if none is present.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

#!/usr/bin/env bash
# The test suite: unit tests (cmocka, one process per module) and black-box tests (node --test,
# a real daemon and real receivers on loopback), both on the ASan + UBSan build, then a short
# run of every fuzz target. Exits non-zero on any failure.
#   scripts/test.sh            everything
#   scripts/test.sh unit       unit tests only
#   scripts/test.sh blackbox   black-box tests only
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
JOBS="${JOBS:-2}"

scripts/deps.sh
cmake -S . -B build-asan -DHOOKD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
cmake --build build-asan -j"$JOBS"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

if [ "$what" = all ] || [ "$what" = unit ]; then
  echo "== unit tests (ASan + UBSan)"
  (cd build-asan && ctest --output-on-failure -j"$JOBS")
fi

if [ "$what" = all ] || [ "$what" = blackbox ]; then
  echo "== black-box tests (real daemon under ASan + UBSan, receivers on loopback)"
  (cd tests/blackbox && npm ci --no-audit --no-fund --loglevel=error)
  HOOKD_BIN="$PWD/build-asan/hookd" node --test --test-concurrency="$JOBS" tests/blackbox/*.test.mjs
fi

if [ "$what" = all ]; then
  echo "== fuzz smoke (each target briefly)"
  scripts/fuzz.sh smoke
fi
echo "== all tests passed"

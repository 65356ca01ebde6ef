#!/usr/bin/env bash
# Builds the libFuzzer targets (clang) and runs each one for a bounded time.
#   scripts/fuzz.sh smoke   a few seconds each (part of make test)
#   scripts/fuzz.sh long    FUZZ_SECONDS each (default 300; make fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-smoke}"
secs=5
[ "$mode" = long ] && secs="${FUZZ_SECONDS:-300}"
CC=clang cmake -S . -B build-fuzz -DHOOKD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
cmake --build build-fuzz -j"${JOBS:-2}" --target $targets
mkdir -p fuzz-out
for t in $targets; do
  corpus="fuzz-out/$t"
  mkdir -p "$corpus"
  seeds=""
  [ -d "tests/fuzz/corpus/$t" ] && seeds="tests/fuzz/corpus/$t"
  echo "-- $t (${secs}s)"
  ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/"$t" -max_total_time="$secs" -print_final_stats=0 \
    -artifact_prefix="fuzz-out/$t-" "$corpus" $seeds 2>&1 | tail -n 2
done

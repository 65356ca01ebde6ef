#!/usr/bin/env bash
# Builds the libFuzzer targets (clang) and runs each one for a bounded time, JOBS (2) at once.
#   scripts/fuzz.sh smoke   a few seconds each (part of make test)
#   scripts/fuzz.sh long    FUZZ_SECONDS each (default 300; make fuzz)
# Each target's output goes to fuzz-out/<target>.log: its last two lines are shown when it ends
# clean, all of it when it fails (a crash's report, the input saved under fuzz-out/).
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-smoke}"
secs=5
[ "$mode" = long ] && secs="${FUZZ_SECONDS:-300}"
jobs="${JOBS:-2}"
CC=clang cmake -S . -B build-fuzz -DHOOKD_FUZZ=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.c | sed 's/\.c$//')
cmake --build build-fuzz -j"$jobs" --target $targets
mkdir -p fuzz-out

run() { # target: runs it, its output in fuzz-out/<target>.log
  local t="$1" seeds=""
  mkdir -p "fuzz-out/$t"
  [ -d "tests/fuzz/corpus/$t" ] && seeds="tests/fuzz/corpus/$t"
  ASAN_OPTIONS=detect_leaks=1 ./build-fuzz/"$t" -max_total_time="$secs" -print_final_stats=0 \
    -artifact_prefix="fuzz-out/$t-" "fuzz-out/$t" $seeds > "fuzz-out/$t.log" 2>&1
}

declare -A pid_of=()
failed=0
report() { # target rc
  if [ "$2" -eq 0 ]; then
    echo "-- $1 (${secs}s)"
    tail -n 2 "fuzz-out/$1.log"
  else
    echo "-- $1 (${secs}s) FAILED (exit $2):"
    cat "fuzz-out/$1.log"
    failed=1
  fi
}
reap() { # waits for the oldest target still running, reports it
  local t="$1" rc=0
  wait "${pid_of[$t]}" || rc=$?
  unset "pid_of[$t]"
  report "$t" "$rc"
}
running=()
for t in $targets; do
  if [ "${#running[@]}" -ge "$jobs" ]; then
    reap "${running[0]}"
    running=("${running[@]:1}")
  fi
  run "$t" &
  pid_of[$t]=$!
  running+=("$t")
done
for t in "${running[@]}"; do reap "$t"; done
[ "$failed" -eq 0 ] || { echo "== a fuzz target failed (above)"; exit 1; }

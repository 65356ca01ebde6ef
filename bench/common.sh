# common.sh — shared shell helpers for the benchmark scripts (sourced, not run): the scratch
# directory, the registry of started processes and the cleanup trap that stops them, logging,
# medians, and the "is the machine quiet?" check.
# shellcheck shell=bash

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_OUT=${BENCH_OUT:-$BENCH_ROOT/bench/out}
BENCH_BIN=$BENCH_OUT/bin
mkdir -p "$BENCH_OUT" "$BENCH_BIN"
BENCH_TMP=${BENCH_TMP:-$(mktemp -d "${TMPDIR:-/tmp}/hookd-bench.XXXXXX")}
mkdir -p "$BENCH_TMP"
BENCH_RESULTS=${BENCH_RESULTS:-$BENCH_OUT/results.md}
export BENCH_ROOT BENCH_OUT BENCH_BIN BENCH_TMP BENCH_RESULTS

_BENCH_PIDS=()

# Registers a process started by the benchmark; bench_cleanup stops it.
bench_track() { _BENCH_PIDS+=("$1"); }

# Stops one tracked process: SIGTERM, then SIGKILL after $2 seconds (default 10).
bench_kill() {
  local pid=$1 grace=${2:-10} i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for ((i = 0; i < grace * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

# Stops every process this run started (newest first) and removes the scratch directory.
bench_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#_BENCH_PIDS[@]} - 1; i >= 0; i--)); do bench_kill "${_BENCH_PIDS[i]}" 5; done
  if [ "${BENCH_KEEP_TMP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "bench: scratch files kept in $BENCH_TMP" >&2
  else
    rm -rf "$BENCH_TMP"
  fi
  exit "$rc"
}

bench_install_trap() {
  trap bench_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Prints a line to the terminal and appends it to the results file.
say() { printf '%s\n' "$*" | tee -a "$BENCH_RESULTS"; }
log() { printf 'bench: %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }

now() { printf '%s\n' "$EPOCHREALTIME"; }

# nap SECONDS — sleep without starting a process (read with a timeout on a pipe nobody writes).
nap() {
  [ -n "${_NAP_FD:-}" ] || exec {_NAP_FD}<> <(:)
  read -r -t "$1" -u "$_NAP_FD" _ || true
}

# median of the arguments (numbers)
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else printf "%.2f\n", (v[NR/2]+v[NR/2+1])/2}'; }

# Percentage of the machine's CPU time that was busy over $1 seconds (from /proc/stat).
machine_busy() {
  local a b
  a=$(head -1 /proc/stat)
  sleep "${1:-1}"
  b=$(head -1 /proc/stat)
  awk -v a="$a" -v b="$b" 'BEGIN {
    split(a, x); split(b, y); t = 0; idle = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6])
    printf "%.0f\n", t ? 100 * (t - idle) / t : 0 }'
}

# Waits (up to BENCH_QUIET_WAIT seconds, default 30) until the machine is quiet: less than
# BENCH_QUIET_PCT (default 15) percent busy. Other work on the machine skews every figure, so
# a run that starts on a busy machine says so in its results. The previous step's dirty pages
# are written back first: left to the kernel, their writeback lands in the next step's fsyncs
# (40–50 ms fdatasyncs and p99 stalls of 30–300 ms in a 2,000/s latency run that followed a
# drain, 2026-12-01).
wait_quiet() {
  local waited=0 busy limit=${BENCH_QUIET_WAIT:-30} pct=${BENCH_QUIET_PCT:-15}
  sync
  while :; do
    busy=$(machine_busy 1)
    [ "$busy" -lt "$pct" ] && return 0
    if [ "$waited" -ge "$limit" ]; then
      say "WARNING: the machine was ${busy}% busy with other work when this step started;" \
        "figures may be low."
      return 0
    fi
    if [ "$waited" -eq 0 ]; then log "machine is ${busy}% busy with other work; waiting up to ${limit}s"; fi
    waited=$((waited + 1))
  done
}

# Steal and busy CPU over a window: snapshot of /proc/stat's cpu line.
cpu_snapshot() { head -1 /proc/stat; }
# cpu_window BEFORE AFTER → "busy=N% steal=N%" for the machine between two snapshots.
cpu_window() {
  awk -v a="$1" -v b="$2" 'BEGIN {
    split(a, x); split(b, y); t = 0
    for (i = 2; i <= 9; i++) t += y[i] - x[i]
    idle = (y[5] - x[5]) + (y[6] - x[6]); steal = y[9] - x[9]
    printf "busy=%.0f%% steal=%.0f%%\n", t ? 100 * (t - idle) / t : 0, t ? 100 * steal / t : 0 }'
}

# calc EXPR [FORMAT] — floating-point arithmetic (awk), e.g. calc "10 / 3" %.1f
calc() { awk "BEGIN { printf \"${2:-%.2f}\", $1 }"; }

# field KEY LINE — the value of KEY in a line of key=value pairs (the load tools' summaries).
field() { sed -n "s/.*[ ^]$1=\([^ ]*\).*/\1/p" <<<" $2"; }

# pass_miss VALUE TARGET — PASS when VALUE >= TARGET.
pass_miss() { awk -v v="$1" -v t="$2" 'BEGIN { print (v + 0 >= t + 0) ? "PASS" : "MISS" }'; }
# PASS when value $1 is at most the ceiling $2, else MISS.
at_most() { awk -v v="$1" -v t="$2" 'BEGIN { print (v + 0 <= t + 0) ? "PASS" : "MISS" }'; }
# The line a node bench script (bench/*.mjs) prints that begins with $2, the script $1 run
# against build/hookd with the VAR=value settings that follow; status 1 when it failed.
node_line() {
  local script=$1 prefix=$2 err
  shift 2
  err="$BENCH_TMP/$(basename "$script").stderr"
  env HOOKD_BIN="$PWD/build/hookd" "$@" node "$script" 2>"$err" | grep "^$prefix" || {
    log "$script failed; the end of its stderr:"
    tail -n 20 "$err" >&2
    return 1
  }
}

# fs_type DIR — the file system DIR is on (fsync costs depend on it; tmpfs makes fsync free).
fs_type() { findmnt -n -o FSTYPE -T "$1" 2>/dev/null || stat -f -c %T "$1"; }

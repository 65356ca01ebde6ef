# threads.sh — per-thread and per-process CPU accounting from /proc (sourced, not run): snapshot
# the CPU time of every thread of a process (or of whole processes) before and after a measured
# window, then report each one's share of one core over the window.
# shellcheck shell=bash

# threads_snapshot PID → lines "TID NAME TICKS" (utime + stime, clock ticks) for each thread.
threads_snapshot() {
  local pid=$1 t
  for t in /proc/"$pid"/task/*; do
    [ -r "$t/stat" ] || continue
    awk -v tid="${t##*/}" -v name="$(cat "$t/comm" 2>/dev/null)" '{
      s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
      print tid, name, f[12] + f[13] }' "$t/stat" 2>/dev/null
  done
}

# procs_snapshot LABEL:PID... → lines "LABEL TICKS" for whole processes (all their threads).
procs_snapshot() {
  local item label pid
  for item in "$@"; do
    label=${item%%:*} pid=${item#*:}
    [ -r "/proc/$pid/stat" ] || continue
    awk -v label="$label" '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " ");
      print label, f[12] + f[13] }' "/proc/$pid/stat"
  done
}

# threads_report BEFORE_FILE AFTER_FILE SECONDS → "name(tid) NN%" per thread that used CPU,
# busiest first (100% = one core fully busy over the window).
threads_report() {
  local hz
  hz=$(getconf CLK_TCK)
  awk -v hz="$hz" -v secs="$3" '
    FNR == NR { before[$1] = $3; next }
    { d = $3 - before[$1]; if (d > 0) printf "%s %.0f\n", $2 "(" $1 ")", 100 * d / hz / secs }
  ' "$1" "$2" | sort -k2 -n -r
}

# procs_report BEFORE_FILE AFTER_FILE SECONDS → "label NN%" per process (summed by label).
procs_report() {
  local hz
  hz=$(getconf CLK_TCK)
  awk -v hz="$hz" -v secs="$3" '
    FNR == NR { before[$1] += $2; next }
    { after[$1] += $2 }
    END { for (k in after) printf "%s %.0f\n", k, 100 * (after[k] - before[k]) / hz / secs }
  ' "$1" "$2" | sort -k2 -n -r
}

# cpu_summary BUSY PROCS OTHERS — one line for a window: the machine's "busy=N% steal=N%" (from
# cpu_window), each process of PROCS (procs_report's "label NN" lines) in % of one core, and the
# rest of the busy time as "everything else (OTHERS)".
cpu_summary() {
  printf 'machine %s; processes (%% of one core): ' "$1"
  awk -v b="$1" -v n="$(nproc)" -v others="$3" '
    NF { printf "%s=%s%% ", $1, $2; s += $2 }
    END { sub(/^busy=/, "", b); b += 0; printf "everything else (%s)=%.0f%%", others, b * n - s }' <<<"$2"
}

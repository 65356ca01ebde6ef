# publish.sh — the publish API latency benchmark (sourced by run.sh): POST /v1/tenants/tN/events
# at a fixed offered rate (open loop, bench/openloop.c), p50/p99 of the 202 answers. hookd runs
# as in production: every event is also delivered to the nginx sink while the load runs, and a
# 202 is sent only after the group commit's fsync.
# shellcheck shell=bash

PUB_RATES=${BENCH_PUBLISH_RATES:-"2000 5000"}
PUB_REPS=${BENCH_REPS:-3}
PUB_SECONDS=${BENCH_PUBLISH_SECONDS:-10}
PUB_WARMUP=2
PUB_CONNS=256
PUB_TENANTS=8
PUB_BODY=1024

publish_run() {
  local rate=$1 rep=$2
  local dir=$BENCH_TMP/publish-$rate-$rep urls=() i cb ca t0 t1
  mkdir -p "$dir"
  hookd_start "$dir" --max-in-flight 512
  hookd_setup "$PUB_TENANTS" "$SINK_URL" 64
  for ((i = 1; i <= PUB_TENANTS; i++)); do urls+=("$HOOKD_URL/v1/tenants/t$i/events"); done
  local procs=("nginx:$NGINX_PID" "hookd:$HOOKD_PID") w secs busy ours TIMEFORMAT='%U %S'
  for w in $(nginx_workers); do procs+=("nginx:$w"); done
  threads_snapshot "$HOOKD_PID" >"$dir/threads.0"
  procs_snapshot "${procs[@]}" >"$dir/procs.0"
  cb=$(cpu_snapshot)
  t0=$(now)
  { time "$BENCH_BIN/openloop" -r "$rate" -d "$PUB_SECONDS" -w "$PUB_WARMUP" -c "$PUB_CONNS" \
    -b "$PUB_BODY" -H "Authorization: Bearer $HOOKD_KEY" -s 202 "${urls[@]}" >"$dir/openloop.txt"; } \
    2>"$dir/openloop.time" || log "openloop reported no successful request"
  t1=$(now)
  ca=$(cpu_snapshot)
  threads_snapshot "$HOOKD_PID" >"$dir/threads.1"
  procs_snapshot "${procs[@]}" >"$dir/procs.1"
  hookd_metrics >"$dir/metrics.txt"
  hookd_stop
  secs=$(calc "$t1 - $t0" %.3f)
  PUB_LINE=$(cat "$dir/openloop.txt")
  busy=$(cpu_window "$cb" "$ca")
  ours=$(procs_report "$dir/procs.0" "$dir/procs.1" "$secs"
    tail -1 "$dir/openloop.time" | awk -v s="$secs" '{printf "openloop %.0f\n", 100 * ($1 + $2) / s}')
  PUB_CPU="$(cpu_summary "$busy" "$ours" "kernel threads, other work")
  hookd threads: $(threads_report "$dir/threads.0" "$dir/threads.1" "$secs" | awk '$2 >= 1 {printf "%s=%s%% ", $1, $2}')"
}

publish_main() {
  local rate rep p50s p99s achs
  say ""
  say "## Publish API latency (open loop)"
  say ""
  say "bench/openloop: POST /v1/tenants/t1..t$PUB_TENANTS/events, ${PUB_BODY}-byte JSON body," \
    "fixed offered rate for ${PUB_SECONDS}s after ${PUB_WARMUP}s warm-up, at most $PUB_CONNS" \
    "keep-alive connections; latency from each request's due time to its 202 (includes any wait" \
    "for a connection). hookd delivers every event to the nginx sink meanwhile."
  say ""
  for rate in $PUB_RATES; do
    p50s=() p99s=() achs=()
    for ((rep = 1; rep <= PUB_REPS; rep++)); do
      wait_quiet
      publish_run "$rate" "$rep"
      p50s+=("$(field p50_ms "$PUB_LINE")")
      p99s+=("$(field p99_ms "$PUB_LINE")")
      achs+=("$(field achieved_rps "$PUB_LINE")")
      say "run $rep @ $rate/s: $PUB_LINE"
      say "  $PUB_CPU"
    done
    local ach
    ach=$(median "${achs[@]}")
    say "RESULT publish @ $rate req/s offered (median of $PUB_REPS): p50 $(median "${p50s[@]}") ms," \
      "p99 $(median "${p99s[@]}") ms, achieved $ach req/s" \
      "($(awk -v a="$ach" -v r="$rate" 'BEGIN { print (a >= 0.98 * r) ? "sustained" : "NOT sustained: latency grows without bound" }'))"
  done
}

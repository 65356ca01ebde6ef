# outbound.sh — the outbound end-to-end benchmark (sourced by run.sh): events published through
# the API, delivered to the nginx sink, every attempt recorded durably; compared with the raw
# libcurl → nginx request rate measured in the same run.
#
# Each repetition measures, on a fresh store:
#   ceiling — curl_ceiling (libcurl multi, keep-alive, ~1 KB JSON POST) against the same nginx, at
#             a few concurrencies; the ceiling is the best of them.
#   drain   — the delivery engine alone: EVENTS events are published (8 tenants, one endpoint
#             each) while hookd runs with --max-in-flight 1, so almost all stay pending; hookd is
#             restarted with --max-in-flight 512 (8 endpoints x max_in_flight 64) and the time
#             from "listening" until hookd_deliveries_delivered_total covers the backlog gives
#             deliveries/s. Publishing is over, so it cannot be the bottleneck. This is the
#             headline figure compared with the targets.
#   steady  — publish and deliver at once, flat out: STEADY_EVENTS events published by wrk while
#             hookd delivers; reports the publish rate and first-publish → last-delivery rate.
# After each phase hookd is stopped and the store (SQLite, or BENCH_STORE=postgres) is read back
# to check that every delivery is "delivered" with one successful attempt row.
# shellcheck shell=bash

OUT_EVENTS=${BENCH_EVENTS:-100000}
OUT_STEADY_EVENTS=${BENCH_STEADY_EVENTS:-50000}
OUT_REPS=${BENCH_REPS:-3}
OUT_TENANTS=8
OUT_EP_MIF=64
OUT_MIF=512
OUT_BODY=1024
OUT_WRK_CONNS=${BENCH_WRK_CONNS:-256}
OUT_CEIL_CONNS=${BENCH_CEIL_CONNS:-"16 64 512"}
OUT_TARGET_RATE=20000
OUT_TARGET_RATIO=0.35

# publish_events N — wrk publishes N events (each wrk thread stops sending after its share; the
# few requests in flight at that moment are answered too) and is stopped (SIGINT: it prints its
# summary) once hookd has accepted N events. wrk has no request-count option, hence the poll.
publish_events() {
  local n=$1 threads=1 per pid i v
  per=$(((n + threads - 1) / threads))
  wrk -t"$threads" -c"$OUT_WRK_CONNS" -d300s --timeout 30s -s "$BENCH_ROOT/bench/publish.lua" \
    "$HOOKD_URL/" -- "$HOOKD_KEY" "$OUT_TENANTS" "$per" "$OUT_BODY" >"$PHASE_DIR/wrk.log" 2>&1 &
  pid=$!
  bench_track "$pid"
  for ((i = 0; ; i++)); do
    v=$(hookd_metric_fast hookd_events_published_total)
    [ "${v%.*}" -ge "$n" ] 2>/dev/null && break
    kill -0 "$HOOKD_PID" 2>/dev/null || die "hookd exited while wrk was publishing (log: $HOOKD_LOG)"
    kill -0 "$pid" 2>/dev/null || { cat "$PHASE_DIR/wrk.log" >&2; die "wrk exited early"; }
    [ "$i" -lt 6000 ] || die "publishing $n events took more than 300 s"
    nap 0.05
  done
  kill -INT "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  # requests wrk abandoned may still be committed: wait until the count settles
  local a b=-1
  a=$(hookd_metric hookd_events_published_total)
  while [ "$a" != "$b" ]; do
    nap 0.1
    b=$a
    a=$(hookd_metric hookd_events_published_total)
  done
  if grep -q 'Non-2xx' "$PHASE_DIR/wrk.log"; then log "wrk: $(grep Non-2xx "$PHASE_DIR/wrk.log")"; fi
  return 0
}

# Checks the store after hookd stopped: all deliveries delivered, one success attempt each.
verify_store() {
  local dir=$1 expect=$2 s
  s=$(hookd_store_summary "$dir")
  echo "$s" >"$dir/store-summary.txt"
  case "$s" in
  *journal_mode=wal\ *deliveries.delivered=$expect\ *attempts.success=$expect\ *) ;;
  postgres\ *deliveries.delivered=$expect\ *attempts.success=$expect\ *) ;;
  *) say "  WARNING: store check failed (expected $expect delivered + $expect success attempts): $s" ;;
  esac
  echo "$s"
}

ceiling_run() {
  local best=0 c line r
  CEIL_DETAIL="" CEIL_AT_MIF=""
  for c in $OUT_CEIL_CONNS; do
    line=$("$BENCH_BIN/curl_ceiling" "$SINK_URL" -c "$c" -d 3 -w 1 -b "$OUT_BODY" -m poll)
    r=$(sed -n 's/^requests_per_s=\([0-9]*\).*/\1/p' <<<"$line")
    CEIL_DETAIL+="c=$c:$r/s "
    if [ "${r:-0}" -gt "$best" ]; then best=$r; fi
    if [ "$c" = "$OUT_MIF" ]; then CEIL_AT_MIF=$r; fi
  done
  CEIL_BEST=$best
}

# drain_prepare DIR — the backlog: publishes OUT_EVENTS events with a trickle of deliveries
# (--max-in-flight 1), stops hookd; sets DRAIN_PENDING, DRAIN_TOTAL, DRAIN_PUB, DRAIN_PUB_SECS.
drain_prepare() {
  local dir=$1 p0 p1
  PHASE_DIR=$dir
  mkdir -p "$dir"
  hookd_start "$dir" --max-in-flight 1
  hookd_setup "$OUT_TENANTS" "$SINK_URL" "$OUT_EP_MIF"
  p0=$(now)
  publish_events "$OUT_EVENTS"
  p1=$(now)
  DRAIN_PUB=$(hookd_metric hookd_events_published_total)
  DRAIN_PUB_SECS=$(calc "$p1 - $p0" %.3f)
  hookd_stop
  DRAIN_PENDING=$(hookd_sql "$dir" "SELECT COUNT(*) FROM deliveries WHERE state = 'pending'")
  DRAIN_TOTAL=$(hookd_sql "$dir" "SELECT COUNT(*) FROM deliveries")
}

# store_label → the store the run measures, for the report.
store_label() {
  if [ "${BENCH_STORE:-sqlite}" = postgres ]; then
    echo "PostgreSQL store (a private server on the same machine, fsync on) in $BENCH_TMP"
  else
    echo "SQLite store (WAL, synchronous=FULL) in $BENCH_TMP ($(fs_type "$BENCH_TMP"))"
  fi
}

drain_run() {
  local rep=$1
  local dir=$BENCH_TMP/outbound-drain-$rep t0 t1 secs cb ca w procs=()
  drain_prepare "$dir"
  hookd_start "$dir" --max-in-flight "$OUT_MIF"
  t0=$(now)
  procs=("nginx:$NGINX_PID" "hookd:$HOOKD_PID")
  for w in $(nginx_workers); do procs+=("nginx:$w"); done
  threads_snapshot "$HOOKD_PID" >"$dir/threads.0"
  procs_snapshot "${procs[@]}" >"$dir/procs.0"
  cb=$(cpu_snapshot)
  t1=$(hookd_wait_delivered "$DRAIN_PENDING" 600) || die "drain did not finish"
  ca=$(cpu_snapshot)
  threads_snapshot "$HOOKD_PID" >"$dir/threads.1"
  procs_snapshot "${procs[@]}" >"$dir/procs.1"
  secs=$(calc "$t1 - $t0" %.3f)
  hookd_metrics >"$dir/metrics.txt"
  hookd_stop
  DRAIN_RATE=$(calc "$DRAIN_PENDING / $secs" %.0f)
  DRAIN_LINE="published $DRAIN_PUB events in ${DRAIN_PUB_SECS}s ($(calc "$DRAIN_PUB / $DRAIN_PUB_SECS" %.0f)/s, 8 tenants x 1 endpoint, --max-in-flight 1); drained $DRAIN_PENDING pending deliveries in ${secs}s"
  local busy ours
  busy=$(cpu_window "$cb" "$ca")
  ours=$(procs_report "$dir/procs.0" "$dir/procs.1" "$secs")
  DRAIN_CPU=$(cpu_summary "$busy" "$ours" "kernel threads, other work")
  DRAIN_THREADS=$(threads_report "$dir/threads.0" "$dir/threads.1" "$secs" |
    awk -v n="$DRAIN_PENDING" -v s="$secs" '$2 >= 1 {printf "%s=%s%% (%.0f us/delivery) ", $1, $2, $2 / 100 * s * 1e6 / n}')
  DRAIN_BATCH=$(awk '$1=="hookd_store_commit_batch_size_sum"{s=$2} $1=="hookd_store_commit_batch_size_count"{c=$2}
    $1=="hookd_store_commit_seconds_sum"{cs=$2}
    END {printf "%d commits, %.1f ops/commit, %.2f ms/commit (fsync), commit time %.0f%% of the window", c, c ? s/c : 0, c ? 1000*cs/c : 0, 100*cs/'"$secs"'}' "$dir/metrics.txt")
  DRAIN_STORE=$(verify_store "$dir" "$DRAIN_TOTAL")
}

steady_run() {
  local rep=$1
  local dir=$BENCH_TMP/outbound-steady-$rep t0 t1 tp pub secs cb ca
  PHASE_DIR=$dir
  mkdir -p "$dir"
  hookd_start "$dir" --max-in-flight "$OUT_MIF"
  hookd_setup "$OUT_TENANTS" "$SINK_URL" "$OUT_EP_MIF"
  threads_snapshot "$HOOKD_PID" >"$dir/threads.0"
  cb=$(cpu_snapshot)
  t0=$(now)
  publish_events "$OUT_STEADY_EVENTS"
  tp=$(now)
  pub=$(hookd_metric hookd_events_published_total)
  t1=$(hookd_wait_delivered "$pub" 600) || die "steady run did not deliver everything"
  ca=$(cpu_snapshot)
  threads_snapshot "$HOOKD_PID" >"$dir/threads.1"
  secs=$(calc "$t1 - $t0" %.3f)
  hookd_metrics >"$dir/metrics.txt"
  hookd_stop
  STEADY_RATE=$(calc "$pub / $secs" %.0f)
  STEADY_PUB_RATE=$(calc "$pub / ($tp - $t0)" %.0f)
  STEADY_LINE="published $pub events in $(calc "$tp - $t0" %.1f)s ($STEADY_PUB_RATE/s); last delivery $(calc "$t1 - $tp" %.2f)s after the last publish"
  STEADY_CPU="machine $(cpu_window "$cb" "$ca")"
  STEADY_THREADS=$(threads_report "$dir/threads.0" "$dir/threads.1" "$secs" |
    awk -v n="$pub" -v s="$secs" '$2 >= 1 {printf "%s=%s%% (%.0f us/event) ", $1, $2, $2 / 100 * s * 1e6 / n}')
  STEADY_STORE=$(verify_store "$dir" "$pub")
}

outbound_main() {
  local rep drains=() ratios=() ratios_mif=() ceils=() steadies=() pubs=()
  say ""
  say "## Outbound end to end"
  say ""
  say "hookd: 8 tenants x 1 endpoint (max_in_flight $OUT_EP_MIF), --max-in-flight $OUT_MIF," \
    "$(store_label)," \
    "events with a ${OUT_BODY}-byte JSON body, sink: nginx 'return 200' ($NGINX_WORKERS worker)."
  say "Publisher: wrk -t1 -c$OUT_WRK_CONNS + bench/publish.lua (each request a new event)."
  say "Ceiling: bench/curl_ceiling (libcurl multi, perform+poll like hookd's egress, keep-alive," \
    "${OUT_BODY}-byte POST with hookd's headers) at $OUT_CEIL_CONNS connections; best taken."
  say ""
  for ((rep = 1; rep <= OUT_REPS; rep++)); do
    wait_quiet
    ceiling_run
    ceils+=("$CEIL_BEST")
    drain_run "$rep"
    drains+=("$DRAIN_RATE")
    ratios+=("$(calc "$DRAIN_RATE / $CEIL_BEST" %.3f)")
    if [ -n "$CEIL_AT_MIF" ]; then ratios_mif+=("$(calc "$DRAIN_RATE / $CEIL_AT_MIF" %.3f)"); fi
    say "run $rep: drain $DRAIN_RATE deliveries/s | ceiling $CEIL_BEST req/s ($CEIL_DETAIL) | ratio ${ratios[-1]}"
    say "  drain: $DRAIN_LINE"
    say "  drain CPU: $DRAIN_CPU"
    say "  drain threads (% of one core): $DRAIN_THREADS"
    say "  drain store writer: $DRAIN_BATCH"
    say "  drain store check: $DRAIN_STORE"
    if [ "$OUT_STEADY_EVENTS" -gt 0 ]; then
      steady_run "$rep"
      steadies+=("$STEADY_RATE")
      pubs+=("$STEADY_PUB_RATE")
      say "  steady: $STEADY_RATE deliveries/s first publish → last delivery; $STEADY_LINE"
      say "  steady CPU: $STEADY_CPU; threads: $STEADY_THREADS"
      say "  steady store check: $STEADY_STORE"
    fi
  done
  OUT_DRAIN_MEDIAN=$(median "${drains[@]}")
  OUT_CEIL_MEDIAN=$(median "${ceils[@]}")
  OUT_RATIO_MEDIAN=$(median "${ratios[@]}")
  say ""
  say "RESULT outbound deliveries/s (drain, median of $OUT_REPS): $OUT_DRAIN_MEDIAN" \
    "— target >= $OUT_TARGET_RATE: $(pass_miss "$OUT_DRAIN_MEDIAN" "$OUT_TARGET_RATE")"
  say "RESULT ceiling libcurl -> nginx req/s (median of $OUT_REPS): $OUT_CEIL_MEDIAN"
  say "RESULT ratio deliveries/ceiling (median of per-run ratios): $OUT_RATIO_MEDIAN" \
    "— target >= $OUT_TARGET_RATIO: $(pass_miss "$OUT_RATIO_MEDIAN" "$OUT_TARGET_RATIO")"
  if [ ${#ratios_mif[@]} -gt 0 ]; then
    say "RESULT ratio to the ceiling at hookd's concurrency ($OUT_MIF connections; median): $(median "${ratios_mif[@]}")" \
      "(libcurl's cost per request grows with the number of connections it drives)"
  fi
  if [ ${#steadies[@]} -gt 0 ]; then
    say "RESULT steady publish+deliver (median of $OUT_REPS): $(median "${steadies[@]}") deliveries/s," \
      "publish $(median "${pubs[@]}") events/s (not compared with the target: the publisher" \
      "shares the 2 cores)"
  fi
}

# replay.sh — bulk replay (docs/replay.md): a replay job over BENCH_REPLAY_DELIVERIES (100,000)
# DEAD deliveries written into the store with sqlite3, 8 tenants × 1 endpoint to the nginx sink
# as in the outbound benchmark. Measured: the preview (the snapshot of every delivery, stored
# with the job) and the job's drain at an unbounded rate, from its confirmation to the last
# delivery. Ceiling: the same deliveries pending as a live backlog, drained by the same daemon
# from its start. Targets: the replay drains at >= 0.8 of the live backlog's rate (a replayed
# delivery is a delivery like any other, plus its share of a writer step); a preview of 100,000
# in <= 2 s. Also, once: the inbound acks of a 2,000/s open loop (bench/openloop, as in
# inbound.sh) while one preview of all of them is stored — the snapshot goes to the writer a chunk
# at a time, so the acks queued behind it wait for a chunk: the slowest ack <= 50 ms.
# (sourced by run.sh, not run)

REPLAY_TENANTS=8
REPLAY_EP_MIF=64
REPLAY_MIF=512

# replay_fill DIR N STATE — tenants t1..t8, one endpoint each, N events round-robin over them,
# each with one delivery in STATE (dead: failed once, given up; pending: due now).
replay_fill() {
  local dir=$1 n=$2 state=$3 t
  t=$(($(date +%s) * 1000))
  hookd_start "$dir" --max-in-flight "$REPLAY_MIF"
  hookd_setup "$REPLAY_TENANTS" "$SINK_URL" "$REPLAY_EP_MIF"
  hookd_stop
  sqlite3 "$dir/hookd.db" <<SQL
PRAGMA journal_mode=WAL;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
INSERT INTO events(seq, id, tenant_id, type, body, request_hash, occurred_at, created_at)
  SELECT i, 'evt_' || i, 't' || (1 + i % $REPLAY_TENANTS), 'invoice.paid', randomblob(600),
    randomblob(32), $t - 60000, $t - 60000 + i / 100 FROM n;
INSERT INTO deliveries(seq, id, event_seq, endpoint_id, tenant_id, state, attempt_count,
  cycle_base, cycle_started_at, next_attempt_at, policy_id, created_at, updated_at, dead_at,
  dead_reason, last_error, last_status)
  SELECT v.seq, 'dlv_' || v.seq, v.seq, p.id, v.tenant_id, '$state',
    CASE '$state' WHEN 'dead' THEN 1 ELSE 0 END, 0, v.created_at,
    CASE '$state' WHEN 'dead' THEN NULL ELSE $t END, p.policy_id, v.created_at, v.created_at,
    CASE '$state' WHEN 'dead' THEN $t ELSE NULL END,
    CASE '$state' WHEN 'dead' THEN 'max_attempts' ELSE NULL END,
    CASE '$state' WHEN 'dead' THEN 'http_5xx' ELSE NULL END,
    CASE '$state' WHEN 'dead' THEN 503 ELSE NULL END
  FROM events v JOIN endpoints p ON p.tenant_id = v.tenant_id;
COMMIT;
SQL
}

# replay_acks N — the slowest inbound ack while a preview of N DEAD deliveries is stored (one
# tenant): sets REPLAY_ACKS_LINE (openloop's summary) and REPLAY_ACKS_CREATE (the create's time).
replay_acks() {
  local n=$1 dir=$BENCH_TMP/replay-acks ol t0 r
  mkdir -p "$dir"
  REPLAY_TENANTS=1 replay_fill "$dir" "$n" dead
  hookd_start "$dir" --max-in-flight "$REPLAY_MIF"
  in_setup
  "$BENCH_BIN/openloop" -r 2000 -d 6 -w 1 -c 64 -b "$IN_BODY" -S "$IN_SECRET" \
    -g "$(printf 'r%02dx%04x' 1 $((RANDOM % 65536)))" -s 200 "$HOOKD_URL/in/$IN_SOURCE" \
    >"$dir/openloop.txt" &
  ol=$!
  sleep 3 # the preview lands mid-run (1 s of warm-up, then 2 s measured before it)
  t0=$(now)
  r=$(hookd_api POST /v1/tenants/t1/replays '{"reason":"bench","filter":{"state":"dead"}}')
  REPLAY_ACKS_CREATE=$(calc "$(now) - $t0" %.2f)
  [ "${r%% *}" = 201 ] || die "replay job: ${r:0:300}"
  wait "$ol" || die "openloop reported no successful request"
  REPLAY_ACKS_LINE=$(cat "$dir/openloop.txt")
  hookd_stop
  [ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
}

replay_main() {
  local n=${BENCH_REPLAY_DELIVERIES:-100000} reps=${BENCH_REPS:-3} dir i r t t0 t1 tc id ids
  local live_rates=() replay_rates=() ratios=() previews=()
  say ""
  say "## Bulk replay: a job over $n DEAD deliveries ($REPLAY_TENANTS tenants, one job each)"
  for ((i = 1; i <= reps; i++)); do
    wait_quiet
    dir=$BENCH_TMP/replay-live-$i
    replay_fill "$dir" "$n" pending
    t0=$(now)
    hookd_start "$dir" --max-in-flight "$REPLAY_MIF"
    t1=$(hookd_wait_delivered "$n" 600) || die "live backlog not delivered"
    hookd_stop
    live_rates+=("$(calc "$n / ($t1 - $t0)" %.0f)")
    [ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"

    wait_quiet
    dir=$BENCH_TMP/replay-job-$i
    replay_fill "$dir" "$n" dead
    hookd_start "$dir" --max-in-flight "$REPLAY_MIF"
    ids=()
    t0=$(now)
    for ((t = 1; t <= REPLAY_TENANTS; t++)); do
      r=$(hookd_api POST "/v1/tenants/t$t/replays" \
        '{"reason":"bench","rate":{"per_second":10000},"filter":{"state":"dead"}}')
      [ "${r%% *}" = 201 ] || die "replay job t$t: ${r:0:300}"
      ids+=("$(sed 's/.*"id":"\(rpl_[^"]*\)".*/\1/' <<<"${r#* }")")
    done
    tc=$(now)
    previews+=("$(calc "$tc - $t0" %.2f)")
    for ((t = 1; t <= REPLAY_TENANTS; t++)); do
      id=${ids[t - 1]}
      r=$(hookd_api POST "/v1/tenants/t$t/replays/$id/confirm")
      [ "${r%% *}" = 200 ] || die "confirm t$t: ${r:0:300}"
    done
    t1=$(hookd_wait_delivered "$n" 600) || die "replayed deliveries not delivered"
    hookd_stop
    replay_rates+=("$(calc "$n / ($t1 - $tc)" %.0f)")
    ratios+=("$(calc "${replay_rates[-1]} / ${live_rates[-1]}" %.3f)")
    log "replay run $i: live ${live_rates[-1]}/s, replay ${replay_rates[-1]}/s, previews ${previews[-1]} s"
    [ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
  done
  say "- live backlog (ceiling): ${live_rates[*]} deliveries/s; replay job: ${replay_rates[*]} deliveries/s (from the confirmations to the last delivery)"
  say "- previews of all $n (8 jobs, one request each, in turn): ${previews[*]} s"
  say "RESULT bulk replay: $(median "${replay_rates[@]}") deliveries/s, $(median "${ratios[@]}") of the live backlog's rate — target >= 0.8: $(pass_miss "$(median "${ratios[@]}")" 0.8)"
  say "RESULT replay preview: $(median "${previews[@]}") s for $n deliveries — target <= 2 s: $(awk -v v="$(median "${previews[@]}")" 'BEGIN { print (v <= 2) ? "PASS" : "MISS" }')"
  wait_quiet
  replay_acks "$n"
  local mx
  mx=$(field max_ms "$REPLAY_ACKS_LINE")
  say "- inbound acks at 2,000/s while a preview of $n is stored (created in $REPLAY_ACKS_CREATE s): $REPLAY_ACKS_LINE"
  say "RESULT inbound acks during a preview of $n: slowest $mx ms (p99 $(field p99_ms "$REPLAY_ACKS_LINE") ms) — target <= 50 ms: $(awk -v v="$mx" 'BEGIN { print (v <= 50) ? "PASS" : "MISS" }')"
}

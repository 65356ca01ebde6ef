# retention.sh — event retention (--event-retention-s) on a store of BENCH_RETENTION_EVENTS
# (200,000) settled outbound events, each with one delivery and one attempt, written ten days in
# the past with sqlite3: how fast the job deletes them, and what it costs the publish path while
# it runs. Ceiling: the same publish probe (one request at a time) on the same daemon once the
# job is done. Target: the job keeps up with the seed's peak intake (1,160 events/s, O18).
# (sourced by run.sh, not run)

# retention_fill DIR N — a store with tenant t1, one endpoint and N old settled events.
retention_fill() {
  local dir=$1 n=$2 r ep old
  hookd_start "$dir"
  r=$(hookd_api POST /v1/tenants '{"id":"t1"}')
  [ "${r%% *}" = 201 ] || die "tenant: $r"
  r=$(hookd_api POST /v1/tenants/t1/endpoints "{\"url\":\"$SINK_URL\",\"enabled\":false}")
  [ "${r%% *}" = 201 ] || die "endpoint: $r"
  ep=$(sed 's/.*"id":"\([^"]*\)".*/\1/' <<<"${r#* }")
  hookd_stop
  old=$((($(date +%s) - 10 * 86400) * 1000))
  sqlite3 "$dir/hookd.db" <<SQL
PRAGMA journal_mode=WAL;
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $n)
INSERT INTO events(seq, id, tenant_id, type, body, request_hash, occurred_at, created_at)
  SELECT i, 'evt_' || i, 't1', 'a.b', randomblob(600), randomblob(32), $old, $old + i FROM n;
INSERT INTO deliveries(seq, id, event_seq, endpoint_id, tenant_id, state, attempt_count,
  cycle_started_at, policy_id, created_at, updated_at, delivered_at)
  SELECT seq, 'dlv_' || seq, seq, '$ep', 't1', 'delivered', 1, $old,
    (SELECT policy_id FROM endpoints WHERE id = '$ep'), $old, $old, $old FROM events;
INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome,
  http_status, latency_ms, lease_token, kind)
  SELECT seq, 1, $old, $old, 'success', 200, 5, 1, 'live' FROM deliveries;
COMMIT;
SQL
}

# retention_probe OUT — one publish, its time in seconds appended to OUT.
retention_probe() {
  curl -s -o /dev/null -w '%{time_total}\n' -H "Authorization: Bearer $HOOKD_KEY" \
    -d '{"type":"a.b","payload":{}}' "$HOOKD_URL/v1/tenants/t1/events" >>"$1"
}

# retention_pct FILE Q — the Q-quantile (0..1) of FILE's seconds, in ms.
retention_pct() { sort -g "$1" | awk -v q="$2" '{v[NR] = $1} END {printf "%.1f", NR ? 1000 * v[int((NR - 1) * q) + 1] : 0}'; }

retention_main() {
  local n=${BENCH_RETENTION_EVENTS:-200000} dir=$BENCH_TMP/retention t0 t1 v i rate
  say ""
  say "## Event retention: $n settled events (1 delivery + 1 attempt each)"
  wait_quiet
  retention_fill "$dir" "$n"
  : >"$dir/during"
  : >"$dir/after"
  t0=$(now)
  hookd_start "$dir" --event-retention-s 86400
  while :; do
    v=$(curl -s "$HOOKD_URL/metrics" | sed -n 's/^hookd_events_expired_total //p')
    [ "${v:-0}" -ge $((n - 1)) ] && break # the newest may stay, if no probe came after it
    retention_probe "$dir/during"
  done
  t1=$(now)
  for ((i = 0; i < 300; i++)); do retention_probe "$dir/after"; done
  hookd_stop
  rate=$(awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN {printf "%.0f", n / (b - a)}')
  say "- deleted $n events in $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s from the daemon's start (first run: the two indexes are built first)"
  say "- publishes during the job: $(wc -l <"$dir/during"), p50 $(retention_pct "$dir/during" 0.5) / p99 $(retention_pct "$dir/during" 0.99) / max $(retention_pct "$dir/during" 1) ms"
  say "- publishes after it (ceiling): p50 $(retention_pct "$dir/after" 0.5) / p99 $(retention_pct "$dir/after" 0.99) ms"
  say "RESULT event retention: $rate events/s deleted — target >= 1,160/s: $(awk -v r="$rate" 'BEGIN { print (r >= 1160) ? "PASS" : "MISS" }')"
}

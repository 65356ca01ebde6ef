# delete.sh — an endpoint's delete under load: one tenant's endpoint holds BENCH_DELETE_DELIVERIES
# (500,000) pending deliveries (written with sqlite3, the endpoint disabled so nothing is sent)
# and is deleted while an open loop sends 2,000 signed inbound webhooks a second to another
# tenant's source (bench/openloop, as in inbound.sh). Measured: the delete's answer time, the
# time until every delivery is cancelled (hookd_deliveries_cancelled_total), then until the URL
# walk has read the tenant's deliveries (its attempts' URLs cut: url_cuts empty), and the slowest
# inbound ack meanwhile (the open loop runs BENCH_DELETE_SECONDS, 24: past both walks). Target: the slowest ack <= 50 ms — a delete cancels in bounded writer
# steps (docs/architecture.md "Deletes"), so another tenant's acks wait for one step at most.
# (sourced by run.sh, not run)

# delete_fill DIR N — tenant t1 with one disabled endpoint holding N pending deliveries, each
# with BENCH_DELETE_ATTEMPTS (1) failed attempts whose URL has a path: the URL walk's to cut.
delete_fill() {
  local dir=$1 n=$2
  REPLAY_TENANTS=1 replay_fill "$dir" "$n" pending
  sqlite3 "$dir/hookd.db" "UPDATE endpoints SET enabled = 0 WHERE tenant_id = 't1';
    WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k
      WHERE i < ${BENCH_DELETE_ATTEMPTS:-1})
    INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome,
      http_status, latency_ms, lease_token, kind, url)
    SELECT d.seq, k.i, 1, 1, 'http_error', 500, 10, 0, 'live',
      'https://hooks.example.com/services/T0/B0/secret-path' FROM deliveries d, k
    WHERE d.tenant_id = 't1';"
}

delete_main() {
  local n=${BENCH_DELETE_DELIVERIES:-500000} reps=${BENCH_REPS:-3} dir i r t0 ans done_s ol
  local ep k mx urls_s maxes=() answers=() finishes=() walks=() lines=()
  say ""
  say "## An endpoint's delete with $n pending deliveries, inbound acks at 2,000/s meanwhile"
  for ((i = 1; i <= reps; i++)); do
    wait_quiet
    dir=$BENCH_TMP/delete-$i
    delete_fill "$dir" "$n"
    hookd_start "$dir" --max-in-flight "$REPLAY_MIF"
    IN_TENANT=tin in_setup
    ep=$(sqlite3 "$dir/hookd.db" "SELECT id FROM endpoints WHERE tenant_id = 't1';")
    "$BENCH_BIN/openloop" -r 2000 -d "${BENCH_DELETE_SECONDS:-24}" -w 1 -c 64 -b "$IN_BODY" -S "$IN_SECRET" \
      -g "$(printf 'd%02dx%04x' "$i" $((RANDOM % 65536)))" -s 200 "$HOOKD_URL/in/$IN_SOURCE" \
      >"$dir/openloop.txt" &
    ol=$!
    sleep 3 # the delete lands mid-run (1 s of warm-up, then 2 s measured before it)
    t0=$(now)
    r=$(hookd_api DELETE "/v1/tenants/t1/endpoints/$ep")
    ans=$(calc "$(now) - $t0" %.2f)
    [ "${r%% *}" = 200 ] || die "delete: ${r:0:300}"
    for ((k = 0; k < 6000; k++)); do
      [ "$(hookd_metric_fast hookd_deliveries_cancelled_total)" -ge "$n" ] && break
      sleep 0.05
    done
    done_s=$(calc "$(now) - $t0" %.2f)
    # then the URL walk over the tenant's deliveries (its attempts' URLs cut to their origin)
    for ((k = 0; k < 6000; k++)); do
      # (a build without the walk has no url_cuts: nothing to wait for)
      [ "$(sqlite3 -cmd '.timeout 1000' "$dir/hookd.db" "SELECT COUNT(*) FROM url_cuts;" \
        2>/dev/null || echo 0)" = 0 ] && break
      sleep 0.05
    done
    urls_s=$(calc "$(now) - $t0" %.2f)
    wait "$ol" || die "openloop reported no successful request"
    lines+=("$(cat "$dir/openloop.txt")")
    hookd_stop
    mx=$(field max_ms "${lines[-1]}")
    maxes+=("$mx")
    answers+=("$ans")
    finishes+=("$done_s")
    walks+=("$urls_s")
    log "delete run $i: answered in $ans s, all cancelled in $done_s s, URLs walked in $urls_s s, slowest ack $mx ms"
    [ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
  done
  say "- the delete answered in: ${answers[*]} s; every delivery cancelled after: ${finishes[*]} s; the URL walk done after: ${walks[*]} s"
  say "- inbound acks meanwhile (one line a run): ${lines[*]}"
  say "RESULT inbound acks during an endpoint delete of $n: slowest $(median "${maxes[@]}") ms — target <= 50 ms: $(awk -v v="$(median "${maxes[@]}")" 'BEGIN { print (v <= 50) ? "PASS" : "MISS" }')"
}

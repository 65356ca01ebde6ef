# isolation.sh — the isolation benchmarks (sourced by run.sh).
#
# Part 1, one slow endpoint must not drag the rest down. 50 endpoints in 5 tenants (endpoint j
# in tenant t(j % 5), event type t0jj routed to it alone by its filter), all served by
# bench/hang_receiver on loopback. Two modes, each on a fresh store and receiver:
#   healthy  — every endpoint answers 200 at once;
#   hanging  — endpoints 0, 11, 22, 33, 44 (10 %, one per tenant) never answer; hookd gives up
#              at their timeout_ms (10 s).
# Each mode measures:
#   latency  — bench/openloop publishes BENCH_ISO_RATE events/s for BENCH_ISO_SECONDS (open loop,
#              event i of type i % 50 to tenant i % 5, so each endpoint gets 1/50 of the load);
#              first-attempt latency of a healthy delivery = the receiver's arrival time of its
#              first request minus the event's created_at in the store (the same clock:
#              CLOCK_REALTIME, one machine). Events of the first 2 s (connection warm-up) are
#              left out in both modes.
#   drain    — BENCH_ISO_BACKLOG events published while hookd runs with --max-in-flight 1, then
#              hookd restarted with --max-in-flight 512: healthy deliveries per second from its
#              exec until every healthy delivery is delivered (the hanging endpoints
#              hold their max_in_flight of 16 connections each meanwhile).
# Targets (issue 5): hanging p99 <= 2x healthy p99; hanging drain >= 80 % of healthy drain.
#
# Part 2, a large backlog. BENCH_ISO_BIG (default 10,000,000) pending deliveries are written
# into the store directly with sqlite3 (hookd's own schema, created by hookd; rows shaped like
# the publish path's: 1 event per 10 deliveries, 10 tenants x 10 endpoints, nginx sink), next
# to a small backlog of BENCH_ISO_SMALL (100,000) built the same way. For each: hookd started,
# time from exec to the first delivery, deliveries/s from the first delivery until 80 % of the
# small backlog is delivered (the same count for both, so the small one never runs dry inside
# the window), peak RSS (VmHWM); for the big store also kill -9, a restart to the first
# delivery, and the same count again after it (peak RSS then); BENCH_REPS repetitions.
# Part 3, waves (bench/waves.mjs): a tenant (cap 256) with a slow endpoint adds BENCH_WAVES_N
# (500) endpoints that all hang (5 s timeout); its healthy endpoint's first attempts, once the
# wave is sending. Ceiling: 1 s (a timeout, 5 s, without the newcomer share).
# Part 4, wide (bench/wide.mjs): one event to a tenant's BENCH_WIDE_N (20,000) endpoints, all due
# at once, beside another tenant publishing every 20 ms: the fan-out's time, the writer's queue at
# its deepest and the other tenant's publishes refused (each claim is a writer operation: before
# their bound, one per endpoint filled the queue past --max-store-queue).
# BENCH_ISO_PARTS ("hanging backlog waves wide") picks the parts to run.
# Targets: RSS < 512 MB, big-backlog rate >= 80 % of the small-backlog rate, restart <= 5 s.
# shellcheck shell=bash

ISO_REPS=${BENCH_REPS:-3}
ISO_RATE=${BENCH_ISO_RATE:-2000}
ISO_SECONDS=${BENCH_ISO_SECONDS:-20}
ISO_BACKLOG=${BENCH_ISO_BACKLOG:-100000}
ISO_BIG=${BENCH_ISO_BIG:-10000000}
ISO_SMALL=${BENCH_ISO_SMALL:-100000}
ISO_PARTS=${BENCH_ISO_PARTS:-"hanging backlog waves wide"}
ISO_ENDPOINTS=50
ISO_TENANTS=5
ISO_HANG=" 0 11 22 33 44 "
ISO_EP_MIF=16
ISO_TIMEOUT_MS=10000
ISO_WARMUP_MS=2000
ISO_TARGET_P99_X=2
ISO_TARGET_TPUT=0.8
ISO_TARGET_RSS_MB=512
ISO_TARGET_RESTART_S=5
ISO_BIG_WINDOW=$((ISO_SMALL * 8 / 10))

# iso_receiver_start DIR — bench/hang_receiver on a free port; sets ISO_RCV_PID, ISO_RCV_URL.
iso_receiver_start() {
  local dir=$1 i port=
  "$BENCH_BIN/hang_receiver" -l "$dir/receiver.log" -H 60 >"$dir/receiver.out" 2>"$dir/receiver.err" &
  ISO_RCV_PID=$!
  bench_track "$ISO_RCV_PID"
  for ((i = 0; i < 100; i++)); do
    port=$(sed -n 's/^port=//p' "$dir/receiver.out")
    [ -n "$port" ] && break
    kill -0 "$ISO_RCV_PID" 2>/dev/null || die "hang_receiver exited: $(cat "$dir/receiver.err")"
    nap 0.05
  done
  [ -n "$port" ] || die "hang_receiver did not start"
  ISO_RCV_URL=http://127.0.0.1:$port
}
iso_receiver_stop() { [ -n "${ISO_RCV_PID:-}" ] && bench_kill "$ISO_RCV_PID" 10; ISO_RCV_PID=; }

iso_hangs() { [ "$1" = hanging ] && [[ $ISO_HANG == *" $2 "* ]]; }

# iso_hang_types MODE → the event types routed to hanging endpoints as an SQL list ('t000',…),
# from ISO_HANG; "''" (matches no type) when MODE is healthy.
iso_hang_types() {
  local e out=""
  [ "$1" = hanging ] && for e in $ISO_HANG; do out+="${out:+,}'t$(printf %03d "$e")'"; done
  echo "${out:-"''"}"
}

# iso_setup MODE — tenants t0..t4, endpoints 0..49.
iso_setup() {
  local mode=$1 i j r path
  for ((i = 0; i < ISO_TENANTS; i++)); do
    r=$(hookd_api POST /v1/tenants "{\"id\":\"t$i\"}")
    [ "${r%% *}" = 201 ] || die "tenant t$i: $r"
  done
  for ((j = 0; j < ISO_ENDPOINTS; j++)); do
    path=ok
    iso_hangs "$mode" "$j" && path=hang
    r=$(hookd_api POST "/v1/tenants/t$((j % ISO_TENANTS))/endpoints" \
      "{\"url\":\"$ISO_RCV_URL/$path/$j\",\"event_types\":[\"$(printf 't%03d' "$j")\"],
        \"max_in_flight\":$ISO_EP_MIF,\"timeout_ms\":$ISO_TIMEOUT_MS}")
    [ "${r%% *}" = 201 ] || die "endpoint $j: $r"
  done
}

# iso_publish RATE SECONDS OUT — openloop to the 5 tenants, types cycling over the 50 endpoints.
iso_publish() {
  local urls=() i
  for ((i = 0; i < ISO_TENANTS; i++)); do urls+=("$HOOKD_URL/v1/tenants/t$i/events"); done
  "$BENCH_BIN/openloop" -r "$1" -d "$2" -w 0 -c 256 -b 1024 -T "$ISO_ENDPOINTS" \
    -H "Authorization: Bearer $HOOKD_KEY" -s 202 "${urls[@]}" >"$3" ||
    log "openloop reported no successful request"
}

# iso_healthy_events DIR MODE → how many stored events go to a healthy endpoint (hookd stopped
# or not: reads the WAL-mode store concurrently).
iso_healthy_events() {
  sqlite3 "$2/hookd.db" "PRAGMA busy_timeout=5000;
    SELECT COUNT(*) FROM events WHERE type NOT IN ($(iso_hang_types "$1"))" | tail -1
}

# iso_latency DIR MODE — first-attempt latency of healthy deliveries (hookd and the receiver
# stopped): "p50_ms=… p99_ms=… max_ms=… n=… late=…".
iso_latency() {
  local dir=$1 hang_types
  hang_types=$(iso_hang_types "$2")
  awk '$2 == "o" { print $1 "," $4 }' "$dir/receiver.log" >"$dir/arrivals.csv"
  sqlite3 "$dir/hookd.db" <<EOF
CREATE TEMP TABLE arr(t_us INTEGER, id TEXT);
.mode csv
.import $dir/arrivals.csv arr
.mode list
CREATE TEMP TABLE lat AS
  SELECT (MIN(a.t_us) / 1000.0 - e.created_at) AS ms FROM events e JOIN arr a ON a.id = e.id
  WHERE e.type NOT IN ($hang_types)
    AND e.created_at >= (SELECT MIN(created_at) FROM events) + $ISO_WARMUP_MS
  GROUP BY e.id;
SELECT 'n=' || COUNT(*) FROM lat;
SELECT 'p50_ms=' || printf('%.1f', ms) FROM lat ORDER BY ms LIMIT 1 OFFSET (SELECT COUNT(*) / 2 FROM lat);
SELECT 'p99_ms=' || printf('%.1f', ms) FROM lat ORDER BY ms LIMIT 1 OFFSET (SELECT COUNT(*) * 99 / 100 FROM lat);
SELECT 'max_ms=' || printf('%.1f', MAX(ms)) FROM lat;
SELECT 'undelivered=' || COUNT(*) FROM events e WHERE e.type NOT IN ($hang_types)
  AND NOT EXISTS (SELECT 1 FROM arr a WHERE a.id = e.id);
EOF
}

# iso_max_hung LOG → the most requests one hanging endpoint held at once: a hung request stays
# open until hookd's timeout (10 s after it was sent), so requests that arrived less than 9.5 s
# apart were certainly open together.
iso_max_hung() {
  awk '$2 == "h" { t[$3, ++n[$3]] = $1 }
    END { for (e in n) for (i = 1; i <= n[e]; i++) { c = 0
            for (j = 1; j <= i; j++) if (t[e, i] - t[e, j] < 9500000) c++
            if (c > m) m = c }
          print m + 0 }' "$1"
}

# iso_run MODE REP — one mode: latency phase, then drain phase. Sets ISO_P50 ISO_P99 ISO_LAT_LINE
# ISO_DRAIN ISO_DRAIN_LINE ISO_HUNG.
iso_run() {
  local mode=$1 rep=$2 dir=$BENCH_TMP/isolation-$1-$2 healthy t0 t1 secs line
  mkdir -p "$dir/lat" "$dir/drain"

  # latency
  iso_receiver_start "$dir/lat"
  hookd_start "$dir/lat" --max-in-flight 512
  iso_setup "$mode"
  iso_publish "$ISO_RATE" "$ISO_SECONDS" "$dir/lat/openloop.txt"
  healthy=$(iso_healthy_events "$mode" "$dir/lat")
  hookd_wait_delivered "$healthy" 120 >/dev/null || die "healthy deliveries did not finish"
  ISO_BREAKERS=$(hookd_metrics | grep -E '^hookd_breaker_(opened|transitions)' | tr '\n' ' ' || true)
  hookd_stop
  iso_receiver_stop
  # batches of 100 ms or more (logged at most once a second): a stall of the store — the disk's
  # fsync when their commit_ms is most of it — rather than of the scheduler
  ISO_SLOW=$({ grep '"msg":"store.slow_batch"' "$HOOKD_LOG" || true; } |
    sed -n 's/.*"commit_ms":\([0-9]*\).*/\1/p' | paste -sd, -)
  line=$(iso_latency "$dir/lat" "$mode" | tr '\n' ' ')
  ISO_P50=$(field p50_ms "$line") ISO_P99=$(field p99_ms "$line")
  ISO_HUNG=$(awk '$2 == "h"' "$dir/lat/receiver.log" | wc -l)
  ISO_LAT_LINE="$line(healthy deliveries, first attempt); publish: $(cat "$dir/lat/openloop.txt");"
  ISO_LAT_LINE+=" requests to hanging endpoints: $ISO_HUNG, at most $(iso_max_hung "$dir/lat/receiver.log")"
  ISO_LAT_LINE+=" open at once on one endpoint (cap $ISO_EP_MIF); store batches of 100 ms or more"
  ISO_LAT_LINE+=" logged (their commit ms): ${ISO_SLOW:-none}"

  # drain
  iso_receiver_start "$dir/drain"
  hookd_start "$dir/drain" --max-in-flight 1
  iso_setup "$mode"
  # 5,000 events/s: far more than one in-flight slot delivers, so most stay pending
  iso_publish 5000 "$(((ISO_BACKLOG + 4999) / 5000))" "$dir/drain/openloop.txt"
  hookd_stop
  healthy=$(iso_healthy_events "$mode" "$dir/drain")
  local done_before
  done_before=$(sqlite3 "$dir/drain/hookd.db" "SELECT COUNT(*) FROM deliveries WHERE state = 'delivered'")
  [ $((2 * (healthy - done_before))) -ge "$healthy" ] ||
    say "  WARNING: only $((healthy - done_before)) of $healthy healthy deliveries were left for the drain: its rate means little"
  t0=$(now)
  hookd_start "$dir/drain" --max-in-flight 512
  t1=$(hookd_wait_delivered "$((healthy - done_before))" 300) || die "drain did not finish"
  hookd_stop
  iso_receiver_stop
  secs=$(calc "$t1 - $t0" %.3f)
  ISO_DRAIN=$(calc "($healthy - $done_before) / $secs" %.0f)
  ISO_DRAIN_LINE="$((healthy - done_before)) healthy deliveries pending, delivered in ${secs}s from exec"
  ISO_DRAIN_LINE+=" (requests to hanging endpoints meanwhile: $(awk '$2 == "h"' "$dir/drain/receiver.log" | wc -l))"
}

# --- part 2: the large backlog ------------------------------------------------------------------

# iso_big_prepare DIR N — a store with N pending deliveries to the nginx sink.
iso_big_prepare() {
  local dir=$1 n=$2 i j r events
  mkdir -p "$dir"
  hookd_start "$dir" --max-in-flight 1
  for ((i = 0; i < 10; i++)); do
    r=$(hookd_api POST /v1/tenants "{\"id\":\"b$i\"}")
    [ "${r%% *}" = 201 ] || die "tenant b$i: $r"
    for ((j = 0; j < 10; j++)); do
      r=$(hookd_api POST "/v1/tenants/b$i/endpoints" "{\"url\":\"$SINK_URL\",\"max_in_flight\":16}")
      [ "${r%% *}" = 201 ] || die "endpoint: $r"
    done
  done
  # one real event, published through the API: the template of the bulk rows
  r=$(hookd_api POST /v1/tenants/b0/events '{"id":"evt_template","type":"order.created","payload":{"order":1,"pad":"'"$(head -c 900 /dev/zero | tr '\0' x)"'"}}')
  [ "${r%% *}" = 202 ] || die "template event: $r"
  hookd_stop
  events=$((n / 10))
  # The bulk rows copy the template's columns; ids follow hookd's prefixes. The template's own
  # deliveries are delivered already (the trickle above) or pending: either way counted below.
  sqlite3 "$dir/hookd.db" >/dev/null <<EOF
PRAGMA journal_mode = WAL;
PRAGMA synchronous = OFF;
PRAGMA cache_size = -262144;
BEGIN;
WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < $events)
INSERT INTO events(id, tenant_id, type, body, request_hash, occurred_at, created_at, kind)
  SELECT printf('evt_bulk%09d', k.i), 'b' || (k.i % 10), t.type,
         CAST(replace(CAST(t.body AS TEXT), 'evt_template', printf('evt_bulk%09d', k.i)) AS BLOB),
         t.request_hash, t.occurred_at, t.created_at, 'outbound'
  FROM k, (SELECT * FROM events WHERE id = 'evt_template') t;
INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,
                       next_attempt_at, policy_id, created_at, updated_at)
  SELECT printf('dlv_bulk%09d_%s', e.seq, ep.id), e.seq, ep.id, e.tenant_id, 'pending',
         e.created_at, e.created_at, ep.policy_id, e.created_at, e.created_at
  FROM events e JOIN endpoints ep ON ep.tenant_id = e.tenant_id
  WHERE e.id LIKE 'evt_bulk%' ORDER BY e.seq;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
EOF
  ISO_BIG_PENDING=$(sqlite3 "$dir/hookd.db" "SELECT COUNT(*) FROM deliveries WHERE state IN ('pending','retrying')")
  # The bulk load leaves gigabytes of dirty pages in the page cache (synchronous=OFF); without
  # this the kernel writes them back during the first measurement and every fsync of hookd's
  # group commits waits behind them (measured: 6.0k/s in the first window, 7.6k/s after).
  sync
}

# iso_rss PID → VmHWM (peak resident set) in MB.
iso_rss() { awk '/^VmHWM:/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0; }

# iso_first_delivery T0 → seconds from T0 to hookd_deliveries_delivered_total >= 1.
iso_first_delivery() {
  local t1
  t1=$(hookd_wait_delivered 1 120) || die "no first delivery"
  calc "$t1 - $1" %.2f
}

# iso_big_window → "SECONDS RATE": from hookd's first delivery until ISO_BIG_WINDOW more.
iso_big_window() {
  local ta tb
  ta=$(now)
  tb=$(hookd_wait_delivered "$((ISO_BIG_WINDOW + 1))" 300) || die "the window's deliveries did not come"
  echo "$(calc "$tb - $ta" %.2f) $(calc "$ISO_BIG_WINDOW / ($tb - $ta)" %.0f)"
}

# iso_big_run DIR KILL — start, first delivery, rate over ISO_BIG_WINDOW deliveries, peak RSS;
# with KILL=1 also kill -9, restart to the first delivery and the window again. Sets ISO_B_LINE,
# ISO_B_FIRST, ISO_B_RATE, ISO_B_RSS, ISO_B_RESTART, ISO_B_RATE2.
iso_big_run() {
  local dir=$1 kill=$2 t0 w rss
  t0=$(now)
  hookd_start "$dir" --max-in-flight 512
  ISO_B_FIRST=$(iso_first_delivery "$t0")
  read -r -a w <<<"$(iso_big_window)"
  ISO_B_RATE=${w[1]} ISO_B_RSS=$(iso_rss "$HOOKD_PID")
  ISO_B_LINE="start to first delivery ${ISO_B_FIRST}s; the next $ISO_BIG_WINDOW delivered in ${w[0]}s = ${w[1]}/s; peak RSS ${ISO_B_RSS} MB"
  if [ "$kill" = 1 ]; then
    kill -9 "$HOOKD_PID"
    wait "$HOOKD_PID" 2>/dev/null || true
    HOOKD_PID=
    t0=$(now)
    hookd_start "$dir" --max-in-flight 512
    ISO_B_RESTART=$(iso_first_delivery "$t0")
    read -r -a w <<<"$(iso_big_window)"
    ISO_B_RATE2=${w[1]}
    rss=$(iso_rss "$HOOKD_PID")
    ISO_B_LINE+="; after kill -9: restart to first delivery ${ISO_B_RESTART}s, the next $ISO_BIG_WINDOW in ${w[0]}s = ${w[1]}/s, peak RSS ${rss} MB"
    [ "$rss" -gt "$ISO_B_RSS" ] && ISO_B_RSS=$rss
  fi
  hookd_stop
}

isolation_main() {
  [[ " $ISO_PARTS " == *" hanging "* ]] && iso_hanging_main
  [[ " $ISO_PARTS " == *" backlog "* ]] && iso_backlog_main
  [[ " $ISO_PARTS " == *" waves "* ]] && iso_waves_main
  [[ " $ISO_PARTS " == *" wide "* ]] && iso_wide_main
  return 0
}

# iso_node_part TITLE SCRIPT PREFIX VAR=value… — a part run by a node script (bench/*.mjs): its
# heading, its line said and left in ISO_LINE; status 1 (said) when the run failed.
iso_node_part() {
  local title=$1 script=$2 prefix=$3
  shift 3
  say ""
  say "## Isolation: $title"
  wait_quiet
  ISO_LINE=$(node_line "$script" "$prefix" "$@") || {
    say "$(basename "$script" .mjs) run failed"
    return 1
  }
  say "$ISO_LINE"
}

# One event to a tenant's N endpoints beside another tenant's steady publishes (bench/wide.mjs).
# Targets: none of the other tenant's publishes refused, the writer's queue under a quarter of
# --max-store-queue (20,000) plus the outcomes in flight (the claims' bound: 5,000 + 1,024).
iso_wide_main() {
  local n=${BENCH_WIDE_N:-20000} refused queue
  iso_node_part "one event to $n endpoints of one tenant, another tenant publishing meanwhile" \
    bench/wide.mjs wide_ N="$n" || return 0
  refused=$(field other_refused "$ISO_LINE")
  queue=$(field queue_max "$ISO_LINE")
  say "RESULT the other tenant's publishes refused during the fan-out: $refused —" \
    "target 0: $(at_most "$refused" 0)"
  say "RESULT the writer's queue at its deepest: $queue writes — target <= 6024:" \
    "$(at_most "$queue" 6024)"
}

# A tenant's wall of new hanging endpoints beside a slow one (bench/waves.mjs): its healthy
# endpoint's first attempts. Ceiling: 1 s at the most (before the newcomer share: a timeout, 5 s).
iso_waves_main() {
  local n=${BENCH_WAVES_N:-500} ms
  iso_node_part "a wave of $n new hanging endpoints beside a slow one (tenant cap 256)" \
    bench/waves.mjs waves_ N="$n" || return 0
  ms=$(field waves_healthy_ms_max "$ISO_LINE")
  say "RESULT healthy endpoint's first attempts beside $n new hanging endpoints: max ${ms} ms —" \
    "ceiling <= 1000 ms: $(at_most "$ms" 1000)"
}

iso_hanging_main() {
  local rep mode h50=() h99=() g50=() g99=() hd=() gd=()
  say ""
  say "## Isolation: 10 % of endpoints hanging"
  say ""
  say "50 endpoints in 5 tenants (max_in_flight $ISO_EP_MIF, timeout_ms $ISO_TIMEOUT_MS), one event type" \
    "each, served by bench/hang_receiver on loopback; hookd --max-in-flight 512, default breaker." \
    "hanging = endpoints 0, 11, 22, 33, 44 never answer. Latency: openloop publishes $ISO_RATE events/s" \
    "for ${ISO_SECONDS}s; first-attempt latency of healthy deliveries = receiver arrival - event" \
    "created_at (first ${ISO_WARMUP_MS} ms left out). Drain: $ISO_BACKLOG events published with" \
    "--max-in-flight 1, then hookd restarted with 512: healthy deliveries/s from exec."
  say ""
  for ((rep = 1; rep <= ISO_REPS; rep++)); do
    for mode in healthy hanging; do
      wait_quiet
      iso_run "$mode" "$rep"
      say "run $rep $mode: first-attempt p50 $ISO_P50 ms, p99 $ISO_P99 ms; drain $ISO_DRAIN healthy deliveries/s"
      say "  latency: $ISO_LAT_LINE"
      say "  drain: $ISO_DRAIN_LINE"
      [ -n "$ISO_BREAKERS" ] && say "  breaker metrics: $ISO_BREAKERS"
      if [ "$mode" = healthy ]; then h50+=("$ISO_P50") h99+=("$ISO_P99") hd+=("$ISO_DRAIN")
      else g50+=("$ISO_P50") g99+=("$ISO_P99") gd+=("$ISO_DRAIN"); fi
    done
  done
  local hp99 gp99 hdr gdr x t
  hp99=$(median "${h99[@]}") gp99=$(median "${g99[@]}") hdr=$(median "${hd[@]}") gdr=$(median "${gd[@]}")
  x=$(calc "$gp99 / $hp99" %.2f) t=$(calc "$gdr / $hdr" %.2f)
  say ""
  say "RESULT isolation first-attempt latency, all healthy (median of $ISO_REPS): p50 $(median "${h50[@]}") ms, p99 $hp99 ms"
  say "RESULT isolation first-attempt latency, 10 % hanging (median of $ISO_REPS): p50 $(median "${g50[@]}") ms, p99 $gp99 ms" \
    "= ${x}x the healthy p99 — target <= ${ISO_TARGET_P99_X}x: $(awk -v x="$x" -v t="$ISO_TARGET_P99_X" 'BEGIN { print (x + 0 <= t + 0) ? "PASS" : "MISS" }')"
  say "RESULT isolation drain to healthy endpoints: all healthy $hdr/s, 10 % hanging $gdr/s = ${t} — target >= $ISO_TARGET_TPUT: $(pass_miss "$t" "$ISO_TARGET_TPUT")"
}

iso_backlog_main() {
  say ""
  say "## Large backlog: $ISO_BIG pending deliveries"
  say ""
  local dsmall=$BENCH_TMP/backlog-small dbig=$BENCH_TMP/backlog-big t0 secs
  wait_quiet
  t0=$(now)
  iso_big_prepare "$dsmall" "$ISO_SMALL"
  local small_pending=$ISO_BIG_PENDING
  iso_big_prepare "$dbig" "$ISO_BIG"
  secs=$(calc "$(now) - $t0" %.0f)
  say "Stores written with sqlite3 in ${secs}s: small $small_pending pending deliveries ($(du -sh "$dsmall" | cut -f1))," \
    "big $ISO_BIG_PENDING ($(du -sh "$dbig" | cut -f1)); 10 tenants x 10 endpoints (the nginx sink," \
    "max_in_flight 16), one event per 10 deliveries; hookd --max-in-flight 512; rate = the $ISO_BIG_WINDOW deliveries after the first one."
  # the small store is restored before each repetition (a window uses 80 % of it); the big one
  # loses 2 x 80,000 of 10M per repetition, which changes nothing measurable
  cp "$dsmall/hookd.db" "$dsmall/pristine.db"
  local rep small=() big=() big2=() rss=() restart=() ratio
  for ((rep = 1; rep <= ISO_REPS; rep++)); do
    rm -f "$dsmall/hookd.db-wal" "$dsmall/hookd.db-shm"
    cp "$dsmall/pristine.db" "$dsmall/hookd.db"
    wait_quiet
    iso_big_run "$dsmall" 0
    small+=("$ISO_B_RATE")
    say "run $rep small backlog: $ISO_B_LINE"
    wait_quiet
    iso_big_run "$dbig" 1
    big+=("$ISO_B_RATE") big2+=("$ISO_B_RATE2") rss+=("$ISO_B_RSS") restart+=("$ISO_B_RESTART")
    say "run $rep big backlog: $ISO_B_LINE"
  done
  local bm sm rssmax
  bm=$(median "${big[@]}") sm=$(median "${small[@]}")
  rssmax=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
  ratio=$(calc "$bm / $sm" %.2f)
  say ""
  say "RESULT backlog $ISO_BIG_PENDING pending: peak RSS (largest of $ISO_REPS runs) $rssmax MB — target < $ISO_TARGET_RSS_MB MB:" \
    "$(awk -v v="$rssmax" -v t="$ISO_TARGET_RSS_MB" 'BEGIN { print (v + 0 < t + 0) ? "PASS" : "MISS" }')"
  say "RESULT backlog dispatch rate (median of $ISO_REPS): big $bm/s vs small $sm/s = $ratio (big after kill -9 and restart: $(median "${big2[@]}")/s)" \
    "— target >= $ISO_TARGET_TPUT: $(pass_miss "$ratio" "$ISO_TARGET_TPUT")"
  say "RESULT backlog restart after kill -9 to first delivery (median of $ISO_REPS): $(median "${restart[@]}")s — target <= ${ISO_TARGET_RESTART_S}s:" \
    "$(awk -v v="$(median "${restart[@]}")" -v t="$ISO_TARGET_RESTART_S" 'BEGIN { print (v + 0 <= t + 0) ? "PASS" : "MISS" }')"
}

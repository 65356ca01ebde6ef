# inbound.sh — the inbound receive-path benchmark (sourced by run.sh): signed Stripe-style
# webhooks posted to POST /in/{source}, each verified (HMAC-SHA256 over the raw body, timestamp
# tolerance), deduplicated (UNIQUE(source, identity)), stored durably (the 200 is sent after the
# group commit's fsync) and forwarded to a destination (the nginx sink) as in production.
#
# Each repetition, on a fresh store:
#   presign  — bench/inbound_sign signs BENCH_INBOUND_PRESIGN requests with distinct event ids
#              just before the run (Stripe's tolerance is 300 s), for wrk's Lua script;
#   ceiling  — wrk with the same script and the same requests against nginx `return 200`;
#   new      — wrk -> hookd, every request a new event (no id sent twice): acknowledgements/s
#              (200 answers with duplicate=false) and wrk's latency percentiles (closed loop);
#   dup      — wrk -> hookd, every request repeats one event id already stored (the duplicate
#              path: verified, found, answered 200 duplicate=true, nothing written);
#   check    — hookd stopped, the store read back: every acknowledged inbox id is stored once,
#              one inbound event and one forward delivery each, no identity twice;
#   open     — bench/openloop signs each request as it leaves, at a fixed offered rate
#              (BENCH_INBOUND_RATES, default 2000 and 10000/s) on a fresh hookd: p50/p99 from each
#              request's due time (no coordinated omission).
# shellcheck shell=bash

IN_REPS=${BENCH_REPS:-3}
IN_SECONDS=${BENCH_INBOUND_SECONDS:-10}
# Closed-loop concurrency. hookd acknowledges only after a group commit's fsync, so its ack rate
# grows with the requests in flight until the CPU is spent: 64 → 256 → 1000 connections measured
# ~2.8k → ~4.1k → 5.6–6.4k acks/s on the 2-vCPU machine (BENCHMARKS.md). The default is the plateau
# (the peak rate); the same wrk settings measure the nginx ceiling. Set BENCH_INBOUND_CONNS to
# compare.
IN_CONNS=${BENCH_INBOUND_CONNS:-1000}
IN_WRK_THREADS=${BENCH_INBOUND_WRK_THREADS:-1}
IN_PRESIGN=${BENCH_INBOUND_PRESIGN:-400000}
IN_RATES=${BENCH_INBOUND_RATES:-"2000 10000"}
IN_OPEN_SECONDS=${BENCH_INBOUND_OPEN_SECONDS:-10}
IN_OPEN_CONNS=256
IN_BODY=1024
IN_DEST_MIF=64
IN_SECRET=whsec_benchInboundSecret0123456789
IN_SOURCE=src_bench
IN_TENANT=shop
IN_TARGET_RATE=30000
IN_TARGET_RATIO=0.25
IN_TARGET_P99_MS=10
IN_TARGET_P99_RATE=10000

# in_setup — tenant + Stripe source whose one destination is the nginx sink.
in_setup() {
  local r
  r=$(hookd_api POST /v1/tenants "{\"id\":\"$IN_TENANT\"}")
  [ "${r%% *}" = 201 ] || die "tenant: $r"
  r=$(hookd_api POST /v1/sources "{\"id\":\"$IN_SOURCE\",\"tenant\":\"$IN_TENANT\",\"provider\":\"stripe\",
    \"secrets\":[\"$IN_SECRET\"],\"destinations\":[{\"url\":\"$SINK_URL\",\"max_in_flight\":$IN_DEST_MIF}]}")
  [ "${r%% *}" = 201 ] || die "source: $r"
}

# in_wrk URL MODE OUT [IDS_OUT] — runs wrk with bench/inbound.lua for IN_SECONDS; the script's
# summary line goes to OUT.
in_wrk() {
  local url=$1 mode=$2 out=$3 ids=${4:--}
  wrk -t"$IN_WRK_THREADS" -c"$IN_CONNS" -d"${IN_SECONDS}s" --timeout 30s -s "$BENCH_ROOT/bench/inbound.lua" \
    "$url" -- "$IN_SIGNED" "$mode" "$IN_WRK_THREADS" "$ids" >"$out" 2>&1 ||
    { cat "$out" >&2; die "wrk failed"; }
  grep -q '^inbound_lua ' "$out" || { cat "$out" >&2; die "wrk printed no summary"; }
}

# in_window_start / in_window_end DIR NAME — CPU per hookd thread and per process over a window.
in_window_start() {
  local w
  IN_PROCS=("nginx:$NGINX_PID" "hookd:$HOOKD_PID")
  for w in $(nginx_workers); do IN_PROCS+=("nginx:$w"); done
  threads_snapshot "$HOOKD_PID" >"$1/threads.$2.0"
  procs_snapshot "${IN_PROCS[@]}" >"$1/procs.$2.0"
  IN_CB=$(cpu_snapshot)
  IN_IO0=$(awk '/^write_bytes:/ {print $2}' "/proc/$HOOKD_PID/io")
  IN_COMMITS0=$(hookd_metric hookd_store_commit_seconds_count)
  IN_COMMIT_S0=$(hookd_metric hookd_store_commit_seconds_sum)
  IN_T0=$(now)
}
in_window_end() {
  local dir=$1 name=$2 n=$3 secs busy ours
  secs=$(calc "$(now) - $IN_T0" %.3f)
  threads_snapshot "$HOOKD_PID" >"$dir/threads.$name.1"
  procs_snapshot "${IN_PROCS[@]}" >"$dir/procs.$name.1"
  busy=$(cpu_window "$IN_CB" "$(cpu_snapshot)")
  ours=$(procs_report "$dir/procs.$name.0" "$dir/procs.$name.1" "$secs")
  IN_CPU=$(cpu_summary "$busy" "$ours" "wrk, kernel threads, other work")
  IN_THREADS=$(threads_report "$dir/threads.$name.0" "$dir/threads.$name.1" "$secs" |
    awk -v n="$n" -v s="$secs" '$2 >= 1 {printf "%s=%s%% (%.0f us/request) ", $1, $2, n ? $2 / 100 * s * 1e6 / n : 0}')
  # what the store costs besides CPU: bytes sent to the disk (WAL and checkpoints) and the time
  # the writer spent in COMMIT (WAL writes + fsync) per request
  local io1 c1 cs1
  io1=$(awk '/^write_bytes:/ {print $2}' "/proc/$HOOKD_PID/io")
  c1=$(hookd_metric hookd_store_commit_seconds_count) cs1=$(hookd_metric hookd_store_commit_seconds_sum)
  IN_STORE=$(awk -v n="$n" -v s="$secs" -v io="$((io1 - IN_IO0))" -v c="$(calc "$c1 - $IN_COMMITS0" %.0f)" \
    -v cs="$(calc "$cs1 - $IN_COMMIT_S0" %.6f)" 'BEGIN { if (!n) n = 1;
      printf "disk writes %.1f KiB/request; %d commits (%.1f requests each), in COMMIT %.0f%% of the time (%.0f us/request)",
        io / 1024 / n, c, c ? n / c : 0, 100 * cs / s, cs * 1e6 / n }')
}

# in_closed DIR MODE ANSWERS [IDS_OUT] — one closed-loop wrk run against hookd in MODE (new, dup),
# measured: IN_RATE (ANSWERS — the script's count of the answers that matter — per second), IN_P50,
# IN_P99, IN_LINE (the script's summary), and in_window_end's IN_CPU, IN_THREADS, IN_STORE.
in_closed() {
  local dir=$1 mode=$2 ok
  in_window_start "$dir" "$mode"
  in_wrk "$HOOKD_URL/in/$IN_SOURCE" "$mode" "$dir/wrk-$mode.txt" "${4:--}"
  IN_LINE=$(grep '^inbound_lua ' "$dir/wrk-$mode.txt")
  ok=$(field "$3" "$IN_LINE")
  in_window_end "$dir" "$mode" "$ok"
  IN_RATE=$(calc "$ok / $(field duration_s "$IN_LINE")" %.0f)
  IN_P50=$(field p50_ms "$IN_LINE") IN_P99=$(field p99_ms "$IN_LINE")
}

# in_store_check DIR ACKED_FILE DUP_ID — the store's account after hookd stopped (SQLite's file,
# or BENCH_STORE=postgres: its database): one "name=value" line each.
in_store_check() {
  local dir=$1 acked=$2 dup_id=$3 checks
  checks="SELECT 'acked', COUNT(*) FROM acked;
SELECT 'acked_distinct', COUNT(DISTINCT id) FROM acked;
SELECT 'acked_missing', COUNT(*) FROM acked a WHERE NOT EXISTS (SELECT 1 FROM inbox i WHERE i.id = a.id);
SELECT 'acked_not_forwardable', COUNT(*) FROM acked a JOIN inbox i ON i.id = a.id
  WHERE i.event_seq IS NULL OR i.status NOT IN ('received','completed');
SELECT 'inbox', COUNT(*) FROM inbox;
SELECT 'inbox_distinct_event_ids', COUNT(DISTINCT provider_event_id) FROM inbox;
SELECT 'inbox_distinct_identities', COUNT(DISTINCT identity_key) FROM inbox;
SELECT 'inbox_rows_of_dup_id', COUNT(*) FROM inbox WHERE provider_event_id = '$dup_id';
SELECT 'inbound_events', COUNT(*) FROM events WHERE kind = 'inbound';
SELECT 'deliveries', COUNT(*) FROM deliveries;
SELECT 'deliveries_delivered', COUNT(*) FROM deliveries WHERE state = 'delivered';
SELECT 'inbox_completed', COUNT(*) FROM inbox WHERE status = 'completed';"
  if [ "${BENCH_STORE:-sqlite}" = postgres ]; then
    psql -qAt -F= "$(hookd_pg_url "$dir")" <<EOF
CREATE TEMP TABLE acked(id text);
\copy acked FROM '$acked' WITH (FORMAT csv)
$checks
EOF
    return
  fi
  sqlite3 "$dir/hookd.db" <<EOF
CREATE TEMP TABLE acked(id TEXT);
.mode csv
.import $acked acked
.mode list
.separator =
SELECT 'journal_mode', (SELECT journal_mode FROM pragma_journal_mode);
$checks
EOF
}

in_rep() {
  local rep=$1 dir=$BENCH_TMP/inbound-$1 tag line n
  mkdir -p "$dir"
  tag=$(printf 'r%02dx%04x' "$rep" $((RANDOM % 65536)))
  IN_SIGNED=$dir/signed.txt
  "$BENCH_BIN/inbound_sign" -k "$IN_SECRET" -n "$IN_PRESIGN" -g "$tag" -b "$IN_BODY" >"$IN_SIGNED"

  # ceiling: the same requests, same wrk, nginx `return 200`
  in_wrk "http://127.0.0.1:$NGINX_PORT/in/$IN_SOURCE" cycle "$dir/wrk-ceiling.txt"
  line=$(grep '^inbound_lua ' "$dir/wrk-ceiling.txt")
  IN_CEIL=$(calc "$(field ok "$line") / $(field duration_s "$line")" %.0f)

  hookd_start "$dir" --max-in-flight 512
  in_setup
  # new events
  in_closed "$dir" new new_answers "$dir/acked"
  IN_NEW=$IN_RATE IN_NEW_P50=$IN_P50 IN_NEW_P99=$IN_P99 IN_NEW_LINE=$IN_LINE
  IN_NEW_CPU=$IN_CPU IN_NEW_THREADS=$IN_THREADS IN_NEW_STORE=$IN_STORE
  [ "$(field exhausted "$IN_LINE")" = 0 ] ||
    say "  WARNING: the $IN_PRESIGN pre-signed requests ran out before ${IN_SECONDS}s (raise BENCH_INBOUND_PRESIGN)"
  cat "$dir"/acked.* >"$dir/acked.txt" 2>/dev/null || : >"$dir/acked.txt"

  # forwards of the new events finish before the duplicate run (they would share the CPU)
  n=$(hookd_metric 'hookd_inbound_received_total{outcome="new"}')
  local t0 t1
  t0=$(now)
  t1=$(hookd_wait_delivered "${n%.*}" 300) || die "forwards did not finish"
  IN_FWD_SECS=$(calc "$t1 - $t0" %.1f)
  # received and forwarded: every new event of the burst over the burst plus the time its last
  # forward took to land (forwards share the CPU with the receive path and fall behind)
  IN_E2E=$(calc "${n%.*} / ($(field duration_s "$IN_NEW_LINE") + $IN_FWD_SECS)" %.0f)

  # duplicates: every request repeats the first pre-signed event, stored by the run above
  in_closed "$dir" dup dup_answers
  IN_DUP=$IN_RATE IN_DUP_P50=$IN_P50 IN_DUP_P99=$IN_P99 IN_DUP_LINE=$IN_LINE
  IN_DUP_CPU=$IN_CPU IN_DUP_THREADS=$IN_THREADS IN_DUP_STORE=$IN_STORE
  hookd_metrics >"$dir/metrics.txt"
  hookd_stop

  IN_CHECK=$(in_store_check "$dir" "$dir/acked.txt" "$(sed -n '4s/ .*//p' "$IN_SIGNED")" | tr '\n' ' ')
  echo "$IN_CHECK" >"$dir/store-check.txt"
  local a ad miss nf ib ide idd dupr ev dl
  a=$(field acked "$IN_CHECK") ad=$(field acked_distinct "$IN_CHECK")
  miss=$(field acked_missing "$IN_CHECK") nf=$(field acked_not_forwardable "$IN_CHECK")
  ib=$(field inbox "$IN_CHECK") ide=$(field inbox_distinct_event_ids "$IN_CHECK")
  idd=$(field inbox_distinct_identities "$IN_CHECK") dupr=$(field inbox_rows_of_dup_id "$IN_CHECK")
  ev=$(field inbound_events "$IN_CHECK") dl=$(field deliveries "$IN_CHECK")
  if [ "$a" = "$ad" ] && [ "$miss" = 0 ] && [ "$nf" = 0 ] && [ "$ib" = "$ide" ] && [ "$ib" = "$idd" ] &&
    [ "$dupr" = 1 ] && [ "$ev" = "$ib" ] && [ "$dl" = "$ib" ] && [ "$ib" -ge "$a" ]; then
    IN_CHECK_VERDICT="ok: $a acknowledged, each stored once (inbox $ib rows = $ide distinct event ids;"
    IN_CHECK_VERDICT+=" $((ib - a)) stored whose answer wrk did not read before it stopped), $ev inbound"
    IN_CHECK_VERDICT+=" events, $dl forward deliveries ($(field deliveries_delivered "$IN_CHECK") delivered);"
    IN_CHECK_VERDICT+=" the duplicate run's id stored once"
  else
    IN_CHECK_VERDICT="FAILED: $IN_CHECK"
  fi
}

# in_open RATE REP — open-loop latency at RATE req/s offered, on a fresh hookd.
in_open() {
  local rate=$1 rep=$2 dir=$BENCH_TMP/inbound-open-$1-$2 tag TIMEFORMAT='%U %S' secs
  mkdir -p "$dir"
  tag=$(printf 'o%02dx%04x' "$rep" $((RANDOM % 65536)))
  hookd_start "$dir" --max-in-flight 512
  in_setup
  in_window_start "$dir" open
  { time "$BENCH_BIN/openloop" -r "$rate" -d "$IN_OPEN_SECONDS" -w 2 -c "$IN_OPEN_CONNS" -b "$IN_BODY" \
    -S "$IN_SECRET" -g "$tag" -s 200 "$HOOKD_URL/in/$IN_SOURCE" >"$dir/openloop.txt"; } \
    2>"$dir/openloop.time" || log "openloop reported no successful request"
  IN_OPEN_LINE=$(cat "$dir/openloop.txt")
  in_window_end "$dir" open "$(field ok "$IN_OPEN_LINE")"
  secs=$(calc "$(now) - $IN_T0" %.3f)
  IN_OPEN_CPU="$IN_CPU; openloop=$(tail -1 "$dir/openloop.time" | awk -v s="$secs" '{printf "%.0f%%", 100 * ($1 + $2) / s}')"
  IN_OPEN_THREADS=$IN_THREADS IN_OPEN_DISK=$IN_STORE
  hookd_metrics >"$dir/metrics.txt"
  hookd_stop
  local stored
  stored=$(hookd_sql "$dir" "SELECT COUNT(*) FROM inbox")
  IN_OPEN_STORE="inbox rows $stored for $(field sent "$IN_OPEN_LINE") requests sent ($(field ok "$IN_OPEN_LINE") acknowledged in the measured window)"
}

inbound_main() {
  local rep news=() ceils=() ratios=() dups=() e2es=() p50s=() p99s=() dp50s=() dp99s=() rate
  say ""
  say "## Inbound receive path (Stripe-style signed webhooks)"
  say ""
  say "hookd: source '$IN_SOURCE' (provider stripe, one secret, tolerance 300 s), one destination" \
    "(the nginx sink, max_in_flight $IN_DEST_MIF), --max-in-flight 512, $(store_label)." \
    "Requests: POST /in/$IN_SOURCE," \
    "a ${IN_BODY}-byte Stripe invoice.paid event, Stripe-Signature t=…,v1=HMAC-SHA256."
  say "Closed loop: wrk -t$IN_WRK_THREADS -c$IN_CONNS -d${IN_SECONDS}s + bench/inbound.lua with" \
    "$IN_PRESIGN requests pre-signed by bench/inbound_sign just before the run (distinct event ids);" \
    "acks/s = 200 answers with duplicate=false per second. Ceiling: the same wrk, script and" \
    "requests against nginx 'return 200'. Forwards to the destination run meanwhile, as in production."
  say ""
  for ((rep = 1; rep <= IN_REPS; rep++)); do
    wait_quiet
    in_rep "$rep"
    news+=("$IN_NEW") ceils+=("$IN_CEIL") dups+=("$IN_DUP") e2es+=("$IN_E2E")
    ratios+=("$(calc "$IN_NEW / $IN_CEIL" %.3f)")
    p50s+=("$IN_NEW_P50") p99s+=("$IN_NEW_P99") dp50s+=("$IN_DUP_P50") dp99s+=("$IN_DUP_P99")
    say "run $rep: new events $IN_NEW acks/s (p50 $IN_NEW_P50 ms, p99 $IN_NEW_P99 ms) | ceiling wrk -> nginx $IN_CEIL req/s | ratio ${ratios[-1]} | duplicates $IN_DUP acks/s (p50 $IN_DUP_P50 ms, p99 $IN_DUP_P99 ms)"
    say "  new: $IN_NEW_LINE"
    say "  new CPU: $IN_NEW_CPU"
    say "  new threads (% of one core): $IN_NEW_THREADS"
    say "  new store: $IN_NEW_STORE"
    say "  forwards of the new events finished ${IN_FWD_SECS}s after wrk stopped: $IN_E2E events/s received and forwarded"
    say "  dup: $IN_DUP_LINE"
    say "  dup CPU: $IN_DUP_CPU"
    say "  dup threads (% of one core): $IN_DUP_THREADS"
    say "  dup store: $IN_DUP_STORE"
    say "  store check: $IN_CHECK_VERDICT"
  done
  local opens_p50=() opens_p99=() opens_ach=()
  for rate in $IN_RATES; do
    opens_p50=() opens_p99=() opens_ach=()
    for ((rep = 1; rep <= IN_REPS; rep++)); do
      wait_quiet
      in_open "$rate" "$rep"
      opens_p50+=("$(field p50_ms "$IN_OPEN_LINE")")
      opens_p99+=("$(field p99_ms "$IN_OPEN_LINE")")
      opens_ach+=("$(field achieved_rps "$IN_OPEN_LINE")")
      say "open run $rep @ $rate/s: $IN_OPEN_LINE"
      say "  $IN_OPEN_CPU"
      say "  hookd threads: $IN_OPEN_THREADS"
      say "  hookd store: $IN_OPEN_DISK"
      say "  store: $IN_OPEN_STORE"
    done
    IN_OPEN_RESULT[$rate]="p50 $(median "${opens_p50[@]}") ms, p99 $(median "${opens_p99[@]}") ms, achieved $(median "${opens_ach[@]}") req/s"
    IN_OPEN_P99[$rate]=$(median "${opens_p99[@]}")
    IN_OPEN_ACH[$rate]=$(median "${opens_ach[@]}")
  done
  local new_m ceil_m ratio_m dup_m
  new_m=$(median "${news[@]}") ceil_m=$(median "${ceils[@]}") ratio_m=$(median "${ratios[@]}")
  dup_m=$(median "${dups[@]}")
  say ""
  say "RESULT inbound acks/s (new events, wrk closed loop, median of $IN_REPS): $new_m" \
    "(p50 $(median "${p50s[@]}") ms, p99 $(median "${p99s[@]}") ms) — target >= $IN_TARGET_RATE: $(pass_miss "$new_m" "$IN_TARGET_RATE")"
  say "RESULT inbound ceiling wrk -> nginx return 200 (median of $IN_REPS): $ceil_m req/s"
  say "RESULT inbound ratio acks/ceiling (median of per-run ratios): $ratio_m — target >= $IN_TARGET_RATIO: $(pass_miss "$ratio_m" "$IN_TARGET_RATIO")"
  for rate in $IN_RATES; do
    local verdict=""
    if [ "$rate" = "$IN_TARGET_P99_RATE" ]; then
      verdict=" — target p99 <= $IN_TARGET_P99_MS ms: $(awk -v p="${IN_OPEN_P99[$rate]}" -v t="$IN_TARGET_P99_MS" -v a="${IN_OPEN_ACH[$rate]}" -v r="$rate" \
        'BEGIN { print (p + 0 <= t + 0 && a >= 0.98 * r) ? "PASS" : "MISS" }')"
    fi
    say "RESULT inbound @ $rate req/s offered (open loop, median of $IN_REPS): ${IN_OPEN_RESULT[$rate]}$verdict"
  done
  say "RESULT inbound received and forwarded per second (the new-event burst over the burst plus the" \
    "time to its last forward, median of $IN_REPS): $(median "${e2es[@]}") (no target; forwards follow the acks)"
  say "RESULT inbound duplicate path acks/s (every request repeats one id, median of $IN_REPS): $dup_m" \
    "(p50 $(median "${dp50s[@]}") ms, p99 $(median "${dp99s[@]}") ms) — target >= the new-event path ($new_m): $(pass_miss "$dup_m" "$new_m")"
}
declare -A IN_OPEN_RESULT IN_OPEN_P99 IN_OPEN_ACH

# outbox.sh — the transactional outbox's relay (docs/outbox.md; sourced by run.sh, not run).
# A private PostgreSQL server (initdb in the scratch dir; fsync and synchronous_commit on, as a
# producer's database runs) holds BENCH_OUTBOX_ROWS (50,000) committed outbox rows for 8 tenants,
# ~1 KB payloads. hookd starts with --outbox-url and --max-in-flight 1 (so the deliveries stay
# pending: the relay is measured, not the sending), and the time from "listening" until
# hookd_outbox_relayed_total covers the rows gives rows/s. Reference in the same run: the same
# number of events published through the API by wrk (bench/publish.lua, as outbound.sh's
# publish phase) into a fresh store with the same tenants and endpoints. Target: the relay
# moves rows at >= 0.5 of the API's publish rate (one thread and one PostgreSQL transaction per
# batch against many concurrent clients).
# shellcheck shell=bash

OB_ROWS=${BENCH_OUTBOX_ROWS:-50000}
OB_TARGET_RATIO=0.5

# ob_pg_start DIR — a PostgreSQL server on a free port; sets OB_PG_URL, OB_PG_PID.
ob_pg_start() {
  local dir=$1 bin v i
  v=$(ls /usr/lib/postgresql | sort -n | tail -1)
  bin=/usr/lib/postgresql/$v/bin
  [ -x "$bin/initdb" ] || die "no PostgreSQL server binaries (scripts/deps.sh --bench)"
  local as=()
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$dir"
    chmod a+x "$BENCH_TMP" "$(dirname "$dir")" # (mktemp's 0700: the server must get through)
    as=(setpriv --reuid=postgres --regid=postgres --init-groups --)
  fi
  "${as[@]}" "$bin/initdb" -D "$dir/data" -A trust -U hookd -E UTF8 --no-locale >/dev/null
  OB_PG_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  "${as[@]}" "$bin/postgres" -D "$dir/data" -k "$dir" -p "$OB_PG_PORT" \
    -c listen_addresses=127.0.0.1 -c log_min_messages=fatal 2>"$dir/postgres.log" &
  OB_PG_PID=$!
  bench_track "$OB_PG_PID"
  OB_PG_URL="postgresql://hookd@127.0.0.1:$OB_PG_PORT/postgres"
  for ((i = 0; i < 300; i++)); do
    psql -q "$OB_PG_URL" -c 'SELECT 1' >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  die "postgres did not start (log: $dir/postgres.log)"
}

# ob_fill N — N committed outbox rows, tenants t1..t8, ~1 KB payloads.
ob_fill() {
  psql -q -v ON_ERROR_STOP=1 "$OB_PG_URL" -f "$BENCH_ROOT/sql/outbox_postgres.sql" >/dev/null
  psql -q -v ON_ERROR_STOP=1 "$OB_PG_URL" -c "INSERT INTO hookd_outbox (tenant, type, payload)
    SELECT 't' || (g % 8 + 1), 'order.created',
           jsonb_build_object('order', g, 'customer', 'c_0001', 'pad', repeat('x', 960))
    FROM generate_series(1, $1) g" >/dev/null
}

outbox_main() {
  local reps=${BENCH_REPS:-3} i dir t0 t1 v k relay api ratios=() relays=() apis=()
  say ""
  say "## The transactional outbox's relay: $OB_ROWS committed rows of a PostgreSQL outbox"
  say ""
  say "hookd --max-in-flight 1 (the deliveries stay pending), 8 tenants x 1 endpoint; PostgreSQL" \
    "$(ls /usr/lib/postgresql | sort -n | tail -1) on loopback, fsync on. Reference: the same" \
    "number of ~1 KB events published by wrk -c$OUT_WRK_CONNS through the API."
  for ((i = 1; i <= reps; i++)); do
    wait_quiet
    dir=$BENCH_TMP/outbox-$i
    ob_pg_start "$dir/pg"
    ob_fill "$OB_ROWS"
    # the relay: tenants and endpoints first (a row of an unknown tenant is refused), then go
    hookd_start "$dir/relay" --max-in-flight 1
    hookd_setup 8 "$SINK_URL" 64
    hookd_stop
    t0=$(now)
    hookd_start "$dir/relay" --max-in-flight 1 --outbox-url "$OB_PG_URL"
    for ((k = 0; k < 12000; k++)); do
      v=$(hookd_metric_fast hookd_outbox_relayed_total)
      [ "${v%.*}" -ge "$OB_ROWS" ] 2>/dev/null && break
      kill -0 "$HOOKD_PID" 2>/dev/null || die "hookd exited (log: $HOOKD_LOG)"
      nap 0.05
    done
    t1=$(now)
    [ "${v%.*}" -ge "$OB_ROWS" ] || die "the relay moved $v of $OB_ROWS rows in 600 s"
    relay=$(calc "$OB_ROWS / ($t1 - $t0)" %.0f)
    [ "$(hookd_metric hookd_outbox_refused_total)" = 0 ] || die "rows refused (log: $HOOKD_LOG)"
    hookd_stop
    bench_kill "$OB_PG_PID" 30
    # the API: the same events from wrk into a fresh store
    PHASE_DIR=$dir/api
    hookd_start "$dir/api" --max-in-flight 1
    hookd_setup 8 "$SINK_URL" 64
    t0=$(now)
    publish_events "$OB_ROWS"
    t1=$(now)
    api=$(calc "$(hookd_metric hookd_events_published_total) / ($t1 - $t0)" %.0f)
    hookd_stop
    relays+=("$relay")
    apis+=("$api")
    ratios+=("$(calc "$relay / $api" %.3f)")
    say "run $i: relay $relay rows/s (from the start, connecting included) | API publish $api events/s | ratio ${ratios[-1]}"
    [ "${BENCH_KEEP_TMP:-0}" = 1 ] || rm -rf "$dir"
  done
  say "RESULT outbox relay rows/s (median of $reps): $(median "${relays[@]}"); API publish events/s: $(median "${apis[@]}")"
  say "RESULT outbox relay / API publish (median of ratios): $(median "${ratios[@]}") — target >= $OB_TARGET_RATIO: $(pass_miss "$(median "${ratios[@]}")" "$OB_TARGET_RATIO")"
}

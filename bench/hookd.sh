# hookd.sh — start, configure, query and stop the hookd under test (sourced, not run). The
# daemon listens on 127.0.0.1 port 0 (the port is read from its "listening" log line), stores
# in sqlite:DIR/hookd.db (WAL, synchronous=FULL: hookd's defaults; BENCH_STORE=postgres: a
# PostgreSQL database) and may deliver to loopback.
# shellcheck shell=bash

HOOKD_BIN=${HOOKD_BIN:-$BENCH_ROOT/build/hookd}
HOOKD_KEY=bench-admin-key-0001
HOOKD_ARGS_BASE=(--api-key "$HOOKD_KEY" --egress-allow 127.0.0.0/8 --allow-http
  --egress-ports any --log-level info)
# BENCH_HOOKD_ARGS: more `hookd serve` options for every daemon of the run (e.g.
# "--payload-retention-s 86400" to measure what a setting costs), split on spaces
read -r -a _extra <<<"${BENCH_HOOKD_ARGS:-}"
HOOKD_ARGS_BASE+=("${_extra[@]}")

# BENCH_STORE=postgres: each store directory of the run is a PostgreSQL database of its own
# (docs/postgres.md), on one private server of the run (outbox.sh's, fsync on), created on the
# directory's first start and used again when hookd restarts on it (the drain's two phases); else
# sqlite:DIR/hookd.db. hookd_sql reads either. (The benchmarks that write rows into the store
# behind hookd's back — delete, isolation, replay, retention — work on SQLite only.)
_hookd_store() {
  local dir=$1 n
  if [ "${BENCH_STORE:-sqlite}" != postgres ]; then
    HOOKD_STORE_ARGS=(--store "sqlite:$dir/hookd.db")
    return 0
  fi
  [ -n "${OB_PG_URL:-}" ] || ob_pg_start "$BENCH_TMP/pg-store"
  if [ ! -s "$dir/store.n" ]; then
    n=$_HOOKD_N
    psql -q "$OB_PG_URL" -c "CREATE DATABASE hookd_$n" >/dev/null || die "create database"
    echo "$n" >"$dir/store.n"
  fi
  HOOKD_STORE_ARGS=(--store "$(hookd_pg_url "$dir")" --node-id "bench-$(cat "$dir/store.n")")
  export HOOKD_MASTER_KEY=${HOOKD_MASTER_KEY:-$(head -c 32 /dev/urandom | base64)}
}

# hookd_sql DIR SQL — runs SQL on DIR's store (SQLite's file, or its PostgreSQL database): one
# line per row, columns separated by '|'.
hookd_sql() {
  if [ "${BENCH_STORE:-sqlite}" != postgres ]; then
    sqlite3 "$1/hookd.db" "$2"
  else
    psql -qAt "$(hookd_pg_url "$1")" -c "$2"
  fi
}

# hookd_pg_url DIR — the URL of DIR's PostgreSQL database (BENCH_STORE=postgres).
hookd_pg_url() { echo "${OB_PG_URL%/*}/hookd_$(cat "$1/store.n")"; }

# hookd_start DIR [extra hookd serve args...] — sets HOOKD_PID, HOOKD_PORT, HOOKD_URL.
hookd_start() {
  local dir=$1 i log
  shift
  mkdir -p "$dir"
  _HOOKD_N=$((${_HOOKD_N:-0} + 1))
  log=$dir/hookd.$_HOOKD_N.log
  : >"$log" # exists before the loop below reads it
  _hookd_store "$dir"
  "$HOOKD_BIN" serve --listen 127.0.0.1:0 "${HOOKD_STORE_ARGS[@]}" "${HOOKD_ARGS_BASE[@]}" \
    "$@" 2>"$log" >"$dir/hookd.$_HOOKD_N.out" &
  HOOKD_PID=$!
  HOOKD_LOG=$log
  bench_track "$HOOKD_PID"
  for ((i = 0; i < 200; i++)); do
    HOOKD_PORT=$(sed -n '/"msg":"listening"/ { s/.*"port":\([0-9]*\).*/\1/p; q }' "$log")
    if [ -n "$HOOKD_PORT" ]; then
      HOOKD_URL=http://127.0.0.1:$HOOKD_PORT
      return 0
    fi
    kill -0 "$HOOKD_PID" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$log" >&2
  die "hookd did not start"
}

# hookd_stop — SIGTERM (graceful: drains the store queue), SIGKILL after 30 s.
hookd_stop() { [ -n "${HOOKD_PID:-}" ] && bench_kill "$HOOKD_PID" 30; HOOKD_PID=; }

# hookd_api METHOD PATH [JSON] → prints "STATUS BODY".
hookd_api() {
  curl -s -X "$1" -H "Authorization: Bearer $HOOKD_KEY" -H 'Content-Type: application/json' \
    ${3:+-d "$3"} -w '\n%{http_code}' "$HOOKD_URL$2" | awk '{l[NR]=$0} END {print l[NR], l[1]}'
}

# hookd_setup TENANTS SINK_URL MAX_IN_FLIGHT — tenants t1..tN, one endpoint each.
# BENCH_ENDPOINT_FIELDS: more JSON members for each endpoint (e.g. '"payload_filter":{"order":
# {"$gte":1}}' to measure what a payload filter costs the publish's fan-out).
hookd_setup() {
  local n=$1 url=$2 mif=$3 i r
  for ((i = 1; i <= n; i++)); do
    r=$(hookd_api POST /v1/tenants "{\"id\":\"t$i\"}")
    [ "${r%% *}" = 201 ] || die "tenant t$i: $r"
    r=$(hookd_api POST "/v1/tenants/t$i/endpoints" "{\"url\":\"$url\",\"max_in_flight\":$mif${BENCH_ENDPOINT_FIELDS:+,$BENCH_ENDPOINT_FIELDS}}")
    [ "${r%% *}" = 201 ] || die "endpoint for t$i: $r"
  done
}

# hookd_metrics → the /metrics text; hookd_metric NAME → one sample's value (0 if absent).
hookd_metrics() { curl -s "$HOOKD_URL/metrics"; }
hookd_metric() {
  curl -s "$HOOKD_URL/metrics" | awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'
}

# hookd_metric_fast NAME — one sample's value read with bash builtins only (/dev/tcp, no curl or
# awk process per call), so polling every 50 ms costs the measured machine almost nothing.
hookd_metric_fast() {
  local line v=0 fd
  { exec {fd}<>"/dev/tcp/127.0.0.1/$HOOKD_PORT"; } 2>/dev/null || { echo 0; return 0; }
  printf 'GET /metrics HTTP/1.0\r\n\r\n' >&"$fd"
  while IFS= read -r line <&"$fd"; do
    case $line in "$1 "*) v=${line#* }; v=${v%$'\r'} ;; esac
  done
  exec {fd}>&-
  echo "$v"
}

# hookd_wait_delivered TARGET TIMEOUT_S — polls every 50 ms until
# hookd_deliveries_delivered_total >= TARGET; prints the time it was reached (epoch seconds)
# or fails.
hookd_wait_delivered() {
  local target=$1 deadline=$((SECONDS + $2)) v
  while :; do
    v=$(hookd_metric_fast hookd_deliveries_delivered_total)
    if [ "${v%.*}" -ge "$target" ]; then
      now
      return 0
    fi
    if ! kill -0 "$HOOKD_PID" 2>/dev/null; then
      log "hookd exited before delivering everything (log: $HOOKD_LOG)"
      return 1
    fi
    if [ "$SECONDS" -gt "$deadline" ]; then
      log "timed out: $v of $target deliveries"
      return 1
    fi
    nap 0.05
  done
}

# hookd_store_summary DIR → the store's own account (read after hookd stopped): the store (and
# SQLite's journal mode), deliveries by state, attempts by outcome.
hookd_store_summary() {
  local mode=postgres
  [ "${BENCH_STORE:-sqlite}" = postgres ] ||
    mode="journal_mode=$(hookd_sql "$1" "PRAGMA journal_mode")"
  {
    echo "$mode"
    hookd_sql "$1" "SELECT 'deliveries.' || state || '=' || COUNT(*) FROM deliveries GROUP BY state"
    hookd_sql "$1" "SELECT 'attempts.' || outcome || '=' || COUNT(*) FROM attempts GROUP BY outcome"
    hookd_sql "$1" "SELECT 'events=' || COUNT(*) FROM events"
  } | tr '\n' ' '
}

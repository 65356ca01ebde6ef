#!/usr/bin/env bash
# run.sh — hookd's benchmarks (`make bench`). Installs the benchmark dependencies, builds hookd
# (build/, RelWithDebInfo) and the load tools (bench/out/bin), starts a private nginx sink on
# loopback, runs the benchmarks and writes bench/out/results.md. Every process it starts is
# stopped on exit, failure or Ctrl-C.
#
#   bench/run.sh            all benchmarks (about 30 minutes on 2 vCPUs)
#   bench/run.sh outbound   outbound end to end: deliveries/s vs the libcurl -> nginx ceiling
#   bench/run.sh publish    publish API latency at fixed offered loads
#   bench/run.sh inbound    signed Stripe-style webhooks to /in/{source}: acks/s vs wrk -> nginx,
#                           latency at a fixed offered rate, the duplicate path
#   bench/run.sh isolation  10 % of endpoints hanging vs all healthy; a 10M-delivery backlog;
#                           a wave of new hanging endpoints beside a slow one
#   bench/run.sh idle       hookd at rest with 20,000 inbound sources (the periodic refresh)
#   bench/run.sh retention  --event-retention-s deleting 200,000 old events; publishes meanwhile
#   bench/run.sh replay     a bulk replay job over 100,000 DEAD deliveries vs the same live backlog
#   bench/run.sh delete     an endpoint's delete of 500,000 pending deliveries; inbound acks meanwhile
#   bench/run.sh outbox     the transactional outbox's relay: 50,000 PostgreSQL rows vs the API
#   bench/run.sh tls        deliveries over TLS to a receiver closing every connection (a
#                           handshake each) vs raw libcurl doing the same
#
# Environment knobs (defaults in brackets): BENCH_REPS [3], BENCH_EVENTS [100000] (drain backlog),
# BENCH_STEADY_EVENTS [50000] (0 = skip the steady phase), BENCH_PUBLISH_RATES ["2000 5000"],
# BENCH_PUBLISH_SECONDS [10], BENCH_QUIET_WAIT [30] (seconds to wait for a quiet machine),
# BENCH_KEEP_TMP [0] (keep logs, stores and metrics of every run), BENCH_HOOKD_ARGS [""] (more
# `hookd serve` options for every daemon); bench/inbound.sh and
# bench/isolation.sh list their own.
# These are benchmarks, not tests: a slow figure prints MISS, it never fails the run.
set -euo pipefail

what=${1:-all}
case "$what" in
all | outbound | publish | inbound | isolation | idle | retention | replay | delete | outbox | tls) ;;
*) echo "usage: bench/run.sh [all|outbound|publish|inbound|isolation|idle|retention|replay|delete|outbox|tls]" >&2; exit 2 ;;
esac

cd "$(dirname "$0")/.."
. bench/common.sh
. bench/threads.sh
. bench/nginx.sh
. bench/hookd.sh
. bench/outbound.sh
. bench/publish.sh
. bench/inbound.sh
. bench/isolation.sh
. bench/idle.sh
. bench/retention.sh
. bench/replay.sh
. bench/delete.sh
. bench/outbox.sh
. bench/tls.sh
bench_install_trap

started=$(date +%s)
scripts/deps.sh --bench
# the node scripts (waves, idle sources) use the black-box tests' receiver and its packages
(cd tests/blackbox && npm ci --no-audit --no-fund --loglevel=error)
log "building hookd (build/, RelWithDebInfo)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target hookd >/dev/null
log "building the load tools (bench/out/bin)"
read -r -a curl_flags <<<"$(pkg-config --cflags --libs libcurl)"
cc -O2 -Wall -Wextra -o "$BENCH_BIN/curl_ceiling" bench/curl_ceiling.c "${curl_flags[@]}"
cc -O2 -Wall -Wextra -o "$BENCH_BIN/openloop" bench/openloop.c "${curl_flags[@]}" -lcrypto -lm
cc -O2 -Wall -Wextra -o "$BENCH_BIN/inbound_sign" bench/inbound_sign.c -lcrypto
read -r -a mhd_flags <<<"$(pkg-config --cflags --libs libmicrohttpd)"
cc -O2 -Wall -Wextra -o "$BENCH_BIN/hang_receiver" bench/hang_receiver.c "${mhd_flags[@]}" -lpthread

NGINX_WORKERS=${BENCH_NGINX_WORKERS:-1}
: >"$BENCH_RESULTS"
say "# hookd benchmark results ($(date -u +%Y-%m-%dT%H:%M:%SZ))"
say ""
say "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
say "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | sort | uniq -c | sed 's/^ *\([0-9]*\) /\1 x /' | paste -sd ';'), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, kernel $(uname -r)"
say "- scratch dir: $BENCH_TMP on $(df -P "$BENCH_TMP" | awk 'NR==2 {print $1}') ($(fs_type "$BENCH_TMP"))"
say "- versions: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(wrk -v 2>&1 | head -1 | awk '{print "wrk", $2}'), libcurl $(curl-config --version | awk '{print $2}'), SQLite $(sqlite3 --version | awk '{print $1}'), libmicrohttpd $(pkg-config --modversion libmicrohttpd)"
say "- command: bench/run.sh $what"

nginx_start "$NGINX_WORKERS"
log "nginx sink at $SINK_URL (pid $NGINX_PID)"

case "$what" in
all) outbound_main; publish_main; inbound_main; isolation_main; idle_main; retention_main; replay_main; delete_main; outbox_main; tls_main ;;
outbound) outbound_main ;;
publish) publish_main ;;
inbound) inbound_main ;;
isolation) isolation_main ;;
idle) idle_main ;;
retention) retention_main ;;
replay) replay_main ;;
delete) delete_main ;;
outbox) outbox_main ;;
tls) tls_main ;;
esac

nginx_stop
say ""
say "Finished in $(($(date +%s) - started))s. Results: ${BENCH_RESULTS#"$BENCH_ROOT"/}"
echo
echo "Summary:"
grep '^RESULT' "$BENCH_RESULTS" | sed 's/^RESULT /  /'

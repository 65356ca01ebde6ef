#!/usr/bin/env bash
# profile.sh — where hookd's CPU goes, per thread, in the benchmarks' scenarios.
# Not part of `make bench`; the analysis in BENCHMARKS.md was made with it.
#
#   bench/profile.sh drain    the delivery engine alone (backlog drained, nothing published)
#   bench/profile.sh steady   publish (wrk) and deliver at the same time
#   bench/profile.sh inbound  signed Stripe-style webhooks (wrk, closed loop) received and forwarded
#
# Runs the scenario once with a shorter backlog, samples hookd with `perf record -e cpu-clock`
# (a software clock: hardware counters are often missing in VMs) with DWARF call stacks for
# PROFILE_SECONDS (default 4) in the middle of it, then prints for each busy thread: its CPU
# share, its flat top functions, and an inclusive breakdown by activity (the first matching rule
# in the tables below wins, so each sample counts once). Needs perf (Debian: linux-perf);
# hookd is built RelWithDebInfo, so its own frames resolve; stripped libraries show addresses.
set -euo pipefail

what=${1:-drain}
case "$what" in drain | steady | inbound) ;; *) echo "usage: bench/profile.sh [drain|steady|inbound]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
. bench/common.sh
. bench/threads.sh
. bench/nginx.sh
. bench/hookd.sh
. bench/outbound.sh
. bench/inbound.sh
bench_install_trap
command -v perf >/dev/null || die "perf is not installed (Debian: apt-get install linux-perf)"
perf record -e cpu-clock -o /dev/null -- true >/dev/null 2>&1 ||
  die "perf record -e cpu-clock does not work here (see /proc/sys/kernel/perf_event_paranoid)"

OUT_EVENTS=${BENCH_EVENTS:-60000}
OUT_STEADY_EVENTS=${BENCH_STEADY_EVENTS:-40000}
SECS=${PROFILE_SECONDS:-4}
PERF_DATA=$BENCH_OUT/perf-$what.data
[ -x "$HOOKD_BIN" ] || die "build hookd first (bench/run.sh or make build)"
NGINX_WORKERS=1

# Activity rules per thread: "label=extended regex over the sample's stack (leaf first)".
writer_rules=(
  'wake-ups (curl_multi_wakeup, MHD resume)=curl_multi_wakeup|MHD_resume_connection'
  'SAVEPOINT/RELEASE (sqlite3_exec parses each)=sqlite3_prepare|sqlite3RunParser'
  'COMMIT (WAL write, fsync)=sqlite3VdbeHalt|CommitPhase|fdatasync'
  'publish: random ids (RAND_bytes)=hookd_random_bytes.*sq_publish'
  'publish SQL (event, tenant, fan-out)=sq_publish'
  'record_outcome SQL=sq_record_outcome'
  'claim SQL=sq_claim'
  'completions (done callbacks)=op_done|item_done_post|op_done_post'
  'queue locking=futex|pthread_mutex|pthread_cond'
)
dispatcher_rules=(
  'libcurl perform: kernel TCP send=(tcp_sendmsg|__sys_sendto|__sys_sendmsg).*curl_multi_perform'
  'libcurl perform: kernel TCP recv=(tcp_recvmsg|__sys_recvfrom).*curl_multi_perform'
  'libcurl perform: other syscalls=entry_SYSCALL.*curl_multi_perform'
  'libcurl perform: malloc/free=(malloc|_int_free|cfree|calloc|realloc|malloc_consolidate).*curl_multi_perform'
  'libcurl perform: user code=curl_multi_perform'
  'libcurl poll=curl_multi_poll'
  'easy handle init/cleanup (pool overflow)=curl_easy_init|curl_easy_cleanup'
  'remove_handle + curl_easy_reset=curl_multi_remove_handle|curl_easy_reset'
  'curl_easy_setopt (per request)=curl_easy_setopt'
  'signing (HMAC-SHA256)=hookd_sign_v1'
  'header list=curl_slist_append|curl_slist_free_all'
  'outcome decision + record op=on_http_done'
  'inbox (claims, completions, hints)=process_inbox'
  'claim scheduling=dispatch_ready|claim_due|ep_schedule|submit_claim'
)
mhd_rules=(
  'kernel TCP (recv/send/epoll)=entry_SYSCALL'
  'JSON parse (jansson)=hookd_json_parse|json_loadb'
  'request hash (JCS + SHA-256)=hookd_jcs|jcs_|EVP_Digest'
  'envelope serialisation=hookd_json_dump|hookd_json_quote|hookd_buf_printf'
  'auth (API key hash)=hookd_auth_check'
  'suspend/resume=MHD_suspend_connection|MHD_resume_connection|hookd_req_suspend'
  'publish handler (other)=hookd_api_event_publish'
  'response build/queue=hookd_req_reply|json_dumps|MHD_queue_response|MHD_create_response'
  'routing=hookd_api_handle'
  'metrics endpoint=hookd_api_metrics'
)
inbound_mhd_rules=(
  'kernel TCP (recv/send/epoll)=entry_SYSCALL'
  'verify (Stripe HMAC-SHA256)=hookd_in_verify'
  'JSON parse (jansson)=hookd_json_parse|json_loadb'
  'payload hash (JCS + SHA-256)=hookd_jcs|jcs_'
  'keys (SHA-256)=hookd_in_sha256_hex'
  'JSON free=json_decref|json_delete'
  'source lookup=hookd_source_cache'
  'queue to the writer=hookd_api_submit|hookd_storeq'
  'receive handler (other)=hookd_inbound_handle'
  'suspend/resume=MHD_suspend_connection|MHD_resume_connection|hookd_req_suspend'
  'response build/queue=hookd_req_reply|json_dumps|MHD_queue_response|MHD_create_response'
  'request body/header collection=hookd_req_|on_request|MHD_lookup|MHD_get_connection_values'
  'MHD parsing and connection handling=MHD_'
)
inbound_writer_rules=(
  'wake-ups (curl_multi_wakeup, MHD resume)=curl_multi_wakeup|MHD_resume_connection'
  'SAVEPOINT/RELEASE per op=sq_savepoint|sq_release|sq_rollback_to'
  'COMMIT (WAL write, fsync)=sq_commit|CommitPhase|fdatasync'
  'receive: next seq=next_event_seq'
  'receive: inbox insert=inbox_insert'
  'receive: event row, forward delivery, the rest=sq_receive'
  'inbox follow (forward outcomes)=sq_inbox_follow'
  'record_outcome SQL=sq_record_outcome'
  'claim SQL=sq_claim'
  'completions (done callbacks)=op_done|item_done_post|op_done_post'
  'queue locking=futex|pthread_mutex|pthread_cond'
)

# classify TID RULES... < perf-script-output → "NN.N%  label" lines, busiest first
classify() {
  local tid=$1
  shift
  awk -v tid="$tid" -v rules="$(printf '%s\n' "$@")" '
    BEGIN { n = split(rules, r, "\n"); for (i = 1; i <= n; i++) { p = index(r[i], "=");
      label[i] = substr(r[i], 1, p - 1); re[i] = substr(r[i], p + 1) } }
    function flush(   i) { if (!cur) return; total++
      for (i = 1; i <= n; i++) if (stack ~ re[i]) { cnt[label[i]]++; return }
      cnt["other"]++ }
    /^[^ \t]/ { flush(); cur = ($2 == tid); stack = ""; next }
    /^[ \t]+[0-9a-f]+ / { if (cur) stack = stack " " $2 }
    END { flush(); for (k in cnt) printf "%5.1f%%  %s\n", 100 * cnt[k] / total, k | "sort -rn"
      close("sort -rn"); printf "        (%d samples)\n", total }'
}

wait_quiet
nginx_start 1
dir=$BENCH_TMP/profile-$what
PHASE_DIR=$dir
mkdir -p "$dir"
if [ "$what" = inbound ]; then
  hookd_start "$dir" --max-in-flight 512
  in_setup
  IN_SIGNED=$dir/signed.txt
  "$BENCH_BIN/inbound_sign" -k "$IN_SECRET" -n "$IN_PRESIGN" -g "$(printf 'p%07x' $((RANDOM % 65536)))" -b "$IN_BODY" >"$IN_SIGNED"
  target=
  delay=2
elif [ "$what" = drain ]; then
  log "publishing a backlog of $OUT_EVENTS events"
  drain_prepare "$dir"
  hookd_start "$dir" --max-in-flight "$OUT_MIF"
  target=$DRAIN_PENDING
  delay=1
else
  hookd_start "$dir" --max-in-flight "$OUT_MIF"
  hookd_setup "$OUT_TENANTS" "$SINK_URL" "$OUT_EP_MIF"
  target=
  delay=2
fi
t0=$(now)
threads_snapshot "$HOOKD_PID" >"$dir/threads.0"
(nap "$delay"; exec perf record -e cpu-clock -F 499 --call-graph dwarf,16384 -p "$HOOKD_PID" \
  -o "$PERF_DATA" -- sleep "$SECS") >"$dir/perf.log" 2>&1 &
perf_pid=$!
bench_track "$perf_pid"
if [ "$what" = steady ]; then
  publish_events "$OUT_STEADY_EVENTS"
  target=$(hookd_metric hookd_events_published_total)
elif [ "$what" = inbound ]; then
  in_wrk "$HOOKD_URL/in/$IN_SOURCE" new "$dir/wrk.txt"
  grep '^inbound_lua ' "$dir/wrk.txt"
  target=$(hookd_metric 'hookd_inbound_received_total{outcome="new"}')
  target=${target%.*}
fi
t1=$(hookd_wait_delivered "$target" 600) || die "not all delivered"
threads_snapshot "$HOOKD_PID" >"$dir/threads.1"
wait "$perf_pid" || true
secs=$(calc "$t1 - $t0" %.3f)
hookd_stop

echo "== $what: $target deliveries in ${secs}s ($(calc "$target / $secs" %.0f)/s); CPU per thread (% of one core):"
threads_report "$dir/threads.0" "$dir/threads.1" "$secs" |
  awk -v n="$target" -v s="$secs" '$2 >= 1 {printf "  %-22s %4s%%  %5.0f us per delivery\n", $1, $2, $2 / 100 * s * 1e6 / n}'
perf script -i "$PERF_DATA" 2>/dev/null >"$dir/perf.txt"
for name in dispatcher store-writer MHD-single; do
  tid=$(awk -v n="$name" '$2 == n {print $1; exit}' "$dir/threads.1")
  [ -n "$tid" ] || continue
  samples=$(awk -v t="$tid" '/^[^ \t]/ && $2 == t {c++} END {print c + 0}' "$dir/perf.txt")
  [ "$samples" -ge 50 ] || continue
  echo
  echo "== $name (tid $tid): flat profile, top 15 (share of this thread's samples)"
  perf report -i "$PERF_DATA" --tid "$tid" --no-children --percentage relative --sort dso,sym \
    --stdio -g none 2>/dev/null |
    grep -v '^#' | grep -v '^$' | head -15 | sed 's/^/  /' || true
  echo "== $name: inclusive breakdown by activity"
  case $name in
  dispatcher) classify "$tid" "${dispatcher_rules[@]}" <"$dir/perf.txt" ;;
  store-writer) if [ "$what" = inbound ]; then classify "$tid" "${inbound_writer_rules[@]}"
    else classify "$tid" "${writer_rules[@]}"; fi <"$dir/perf.txt" ;;
  MHD-single) if [ "$what" = inbound ]; then classify "$tid" "${inbound_mhd_rules[@]}"
    else classify "$tid" "${mhd_rules[@]}"; fi <"$dir/perf.txt" ;;
  esac | sed 's/^/  /' || true
done
echo
echo "perf data: ${PERF_DATA#"$BENCH_ROOT"/} (perf report -i ...)"

# tls.sh — deliveries to an HTTPS receiver that closes every connection (sourced by run.sh): each
# delivery is a new TCP connection and a full TLS handshake on hookd's one dispatcher thread,
# with the trust store of a real machine (the system's CA bundle, ~140 certificates, plus the
# benchmark's own CA). Compared with raw libcurl doing the same against the same receiver.
#
# Each repetition:
#   ceiling — curl_ceiling (libcurl multi, perform+poll, -k: the CA file alone, its parsed store
#             kept as hookd keeps it) against a private nginx with `keepalive_timeout 0`, at a few
#             concurrencies; the best is taken.
#   drain   — outbound.sh's drain (TLS_EVENTS events published with deliveries held back, then
#             delivered at --max-in-flight TLS_MIF: 8 tenants x 1 endpoint) against that nginx,
#             hookd run with --egress-ca-file set to the same bundle. Reports deliveries/s and
#             each hookd thread's CPU per delivery (the dispatcher's is the handshake's cost).
# A new connection once cost ~21 ms of the dispatcher (libcurl parsed the whole bundle for each:
# docs/security.md); the target below is what a handshake costs raw libcurl, give or take.
# shellcheck shell=bash

TLS_EVENTS=${BENCH_TLS_EVENTS:-4000}
TLS_REPS=${BENCH_REPS:-3}
TLS_EP_MIF=8
TLS_MIF=64
TLS_CEIL_CONNS=${BENCH_TLS_CEIL_CONNS:-"8 64"}
TLS_TARGET_RATIO=0.5

# tls_nginx_start — a self-signed P-256 certificate for 127.0.0.1, a bundle of the system's CAs
# and it, nginx answering 200 over TLS and closing each connection. Sets TLS_NGINX_PID,
# TLS_SINK_URL, TLS_CA_BUNDLE.
tls_nginx_start() {
  local dir=$BENCH_TMP/nginx-tls system=/etc/ssl/certs/ca-certificates.crt
  mkdir -p "$dir"
  [ -r "$system" ] || die "no system CA bundle at $system (the ca-certificates package)"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj /CN=hookd-bench -addext subjectAltName=IP:127.0.0.1 \
    -keyout "$dir/key.pem" -out "$dir/cert.pem" >/dev/null 2>&1 || die "openssl req failed"
  TLS_CA_BUNDLE=$dir/bundle.pem
  cat "$system" "$dir/cert.pem" >"$TLS_CA_BUNDLE"
  nginx_launch "$dir" "$NGINX_WORKERS" https "keepalive_timeout 0;
  ssl_session_cache off;
  ssl_session_tickets off;" " ssl;
    ssl_certificate $dir/cert.pem;
    ssl_certificate_key $dir/key.pem;" --cacert "$dir/cert.pem"
  TLS_NGINX_PID=$LAUNCHED_NGINX_PID
  TLS_SINK_URL="https://127.0.0.1:$LAUNCHED_NGINX_PORT/hook"
}

tls_ceiling_run() {
  local best=0 c line r
  TLS_CEIL_DETAIL=""
  for c in $TLS_CEIL_CONNS; do
    line=$("$BENCH_BIN/curl_ceiling" "$TLS_SINK_URL" -c "$c" -d 3 -w 1 -b "$OUT_BODY" -m poll \
      -k "$TLS_CA_BUNDLE")
    r=$(sed -n 's/^requests_per_s=\([0-9]*\).*/\1/p' <<<"$line")
    TLS_CEIL_DETAIL+="c=$c:$r/s "
    if [ "${r:-0}" -gt "$best" ]; then best=$r; fi
  done
  TLS_CEIL_BEST=$best
}

# tls_drain REP — outbound.sh's drain pointed at the TLS receiver: its settings are locals here,
# which bash lets the functions called see (not a subshell: a hookd started in one outlived a
# failure, the cleanup trap's list of processes being the subshell's copy). Sets DRAIN_*.
tls_drain() {
  # shellcheck disable=SC2034
  local OUT_EVENTS=$TLS_EVENTS OUT_EP_MIF=$TLS_EP_MIF OUT_MIF=$TLS_MIF SINK_URL=$TLS_SINK_URL \
    NGINX_PID=$TLS_NGINX_PID
  local HOOKD_ARGS_BASE=("${HOOKD_ARGS_BASE[@]}" --egress-ca-file "$TLS_CA_BUNDLE")
  drain_run "tls-$1"
}

tls_main() {
  local rep drains=() ratios=() ceils=()
  tls_nginx_start
  say ""
  say "## Outbound over TLS, a new connection per delivery"
  say ""
  say "hookd: 8 tenants x 1 endpoint (max_in_flight $TLS_EP_MIF), --max-in-flight $TLS_MIF," \
    "$(store_label), $TLS_EVENTS events; receiver: nginx over TLS (P-256 certificate," \
    "keepalive_timeout 0, no session resumption); --egress-ca-file: the system's CA bundle" \
    "($(grep -c 'BEGIN CERTIFICATE' "$TLS_CA_BUNDLE") certificates with the benchmark's own)."
  say "Ceiling: bench/curl_ceiling -k (the same bundle, its parsed store kept) at $TLS_CEIL_CONNS" \
    "connections; best taken."
  say ""
  for ((rep = 1; rep <= TLS_REPS; rep++)); do
    wait_quiet
    tls_ceiling_run
    ceils+=("$TLS_CEIL_BEST")
    tls_drain "$rep"
    drains+=("$DRAIN_RATE")
    ratios+=("$(calc "$DRAIN_RATE / $TLS_CEIL_BEST" %.3f)")
    say "run $rep: drain $DRAIN_RATE deliveries/s | ceiling $TLS_CEIL_BEST req/s ($TLS_CEIL_DETAIL) | ratio ${ratios[-1]}"
    say "  drain: $DRAIN_LINE"
    say "  drain CPU: $DRAIN_CPU"
    say "  drain threads (% of one core): $DRAIN_THREADS"
    say "  drain store check: $DRAIN_STORE"
  done
  bench_kill "$TLS_NGINX_PID" 10
  say ""
  say "RESULT TLS deliveries/s, a new connection each (drain, median of $TLS_REPS): $(median "${drains[@]}")"
  say "RESULT TLS ceiling libcurl -> nginx, a new connection each (median): $(median "${ceils[@]}")"
  say "RESULT TLS ratio deliveries/ceiling (median): $(median "${ratios[@]}")" \
    "— target >= $TLS_TARGET_RATIO: $(pass_miss "$(median "${ratios[@]}")" "$TLS_TARGET_RATIO")"
}

# nginx.sh — the benchmark's webhook receiver (sourced, not run): a private nginx that answers
# every request with 200, started from a config in the scratch directory (its own pid file,
# error log and temp paths, no access log, runs as the current user) and stopped by the caller
# or by the cleanup trap.
# shellcheck shell=bash

# nginx_start [WORKERS] — sets NGINX_PID, NGINX_PORT, SINK_URL (used by the callers).
# shellcheck disable=SC2034
nginx_start() {
  command -v nginx >/dev/null || die "nginx is not installed (scripts/deps.sh --bench)"
  nginx_launch "$BENCH_TMP/nginx" "${1:-1}" http "keepalive_requests 100000000;
  keepalive_timeout 300s;" ";"
  NGINX_PID=$LAUNCHED_NGINX_PID
  NGINX_PORT=$LAUNCHED_NGINX_PORT
  SINK_URL="http://127.0.0.1:$NGINX_PORT/hook"
}

# nginx_launch DIR WORKERS SCHEME HTTP_LINES LISTEN_REST [CURL_ARGS...] — an nginx answering 200
# on a random loopback port, its config in DIR with HTTP_LINES in its http block and LISTEN_REST
# ending its listen line (";", or " ssl;" and the certificate lines for https); ready once curl
# (with CURL_ARGS) gets a 200. Sets LAUNCHED_NGINX_PID and LAUNCHED_NGINX_PORT.
nginx_launch() {
  local dir=$1 workers=$2 scheme=$3 http_lines=$4 listen_rest=$5 port user_line=""
  shift 5
  mkdir -p "$dir/tmp"
  if [ "$(id -u)" -eq 0 ]; then user_line="user root;"; fi
  for _ in 1 2 3 4 5; do # a random port may be taken: try another
    port=$((20000 + RANDOM % 30000))
    cat >"$dir/nginx.conf" <<EOF
# hookd benchmark sink: 200 for every request, no logging.
daemon off;
$user_line
worker_processes $workers;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  client_body_buffer_size 64k;
  $http_lines
  server {
    listen 127.0.0.1:$port$listen_rest
    location / { return 200 "ok\n"; }
  }
}
EOF
    nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
    LAUNCHED_NGINX_PID=$!
    bench_track "$LAUNCHED_NGINX_PID"
    local i
    for ((i = 0; i < 50; i++)); do
      if curl -fs "$@" -o /dev/null -X POST -d '{}' "$scheme://127.0.0.1:$port/hook" 2>/dev/null; then
        LAUNCHED_NGINX_PORT=$port
        return 0
      fi
      kill -0 "$LAUNCHED_NGINX_PID" 2>/dev/null || break
      sleep 0.1
    done
    bench_kill "$LAUNCHED_NGINX_PID" 5
  done
  cat "$dir/error.log" "$dir/stdout.log" >&2 2>/dev/null
  die "nginx did not start ($dir)"
}

nginx_stop() { [ -n "${NGINX_PID:-}" ] && bench_kill "$NGINX_PID" 10; NGINX_PID=; }

# The nginx worker processes' pids (for CPU accounting).
nginx_workers() { pgrep -P "$NGINX_PID" 2>/dev/null | tr "\n" " " || true; }

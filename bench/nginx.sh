# nginx.sh — the benchmark's webhook receiver (sourced, not run): a private nginx that answers
# every request with 200, started from a config in the scratch directory (its own pid file,
# error log and temp paths, no access log, runs as the current user) and stopped by the caller
# or by the cleanup trap.
# shellcheck shell=bash

# nginx_start [WORKERS] — sets NGINX_PID, NGINX_PORT, SINK_URL (used by the callers).
# shellcheck disable=SC2034
nginx_start() {
  local workers=${1:-1} dir=$BENCH_TMP/nginx try port user_line=""
  command -v nginx >/dev/null || die "nginx is not installed (scripts/deps.sh --bench)"
  mkdir -p "$dir/tmp"
  if [ "$(id -u)" -eq 0 ]; then user_line="user root;"; fi
  for try in 1 2 3 4 5; do # a random port may be taken: try another
    port=$((20000 + RANDOM % 30000))
    cat >"$dir/nginx.conf" <<EOF
# hookd benchmark sink: 200 for every request, keep-alive, no logging.
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
  keepalive_requests 100000000;
  keepalive_timeout 300s;
  server {
    listen 127.0.0.1:$port;
    location / { return 200 "ok\n"; }
  }
}
EOF
    nginx -c "$dir/nginx.conf" -p "$dir" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
    NGINX_PID=$!
    bench_track "$NGINX_PID"
    local i
    for ((i = 0; i < 50; i++)); do
      if curl -fs -o /dev/null -X POST -d '{}' "http://127.0.0.1:$port/hook" 2>/dev/null; then
        NGINX_PORT=$port
        SINK_URL="http://127.0.0.1:$port/hook"
        return 0
      fi
      kill -0 "$NGINX_PID" 2>/dev/null || break
      sleep 0.1
    done
    bench_kill "$NGINX_PID" 5
  done
  cat "$dir/error.log" "$dir/stdout.log" >&2 2>/dev/null
  die "nginx did not start"
}

nginx_stop() { [ -n "${NGINX_PID:-}" ] && bench_kill "$NGINX_PID" 10; NGINX_PID=; }

# The nginx worker processes' pids (for CPU accounting).
nginx_workers() { pgrep -P "$NGINX_PID" 2>/dev/null | tr "\n" " " || true; }

/* curl_ceiling.c — the ceiling for hookd's outbound benchmark: how many HTTP POSTs per second
 * raw libcurl (the multi interface, the library hookd's egress uses) completes against the
 * benchmark's nginx sink on this machine, with no storage, signing or bookkeeping.
 *
 *   curl_ceiling URL [-c CONNECTIONS] [-d SECONDS] [-w WARMUP_SECONDS] [-b BODY_BYTES]
 *                    [-m poll|socket|hookd] [-k CA_FILE]
 *
 * Keeps CONNECTIONS requests in flight, one per keep-alive connection (each easy handle is
 * re-added when it completes, so its connection is reused), each a POST of a BODY_BYTES JSON
 * document with the header set hookd sends. Two ways to drive the multi handle:
 *   poll   — curl_multi_perform + curl_multi_poll, as hookd's egress does (src/egress/egress.c);
 *   socket — curl_multi_socket_action with epoll and a timer: libcurl only touches the
 *            transfers whose sockets are ready (the default);
 *   hookd  — poll, plus what hookd's egress once did for every request: curl_easy_reset, its
 *            full list of options, a freshly built header list (a diagnostic: the gap between
 *            poll and hookd is the cost of that per-request setup, not of HTTP).
 * Prints one line:
 *   requests_per_s=N completed=N errors=N seconds=S connections=C body_bytes=B mode=M
 * With -k (an https URL), the receiver's CAs are read from CA_FILE alone, the parsed store kept
 * between connections as hookd keeps it (src/egress/egress.c; bench/tls.sh: a receiver closing
 * every connection, each request a new TLS handshake).
 * Requests completed during the warm-up are not counted. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#include "bench_util.h"

static struct curl_slist *headers;
static char *body;
static size_t body_len;
static long completed, errors;
static int hookd_mode;
static const char *the_url;
static const char *ca_file;

static void set_ca(CURL *e) {
  if (!ca_file) return;
  curl_easy_setopt(e, CURLOPT_CAINFO, ca_file);
  curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
  curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 3600L);
}

/* What src/egress/egress.c set on a pooled handle for every request after curl_easy_reset (it
 * sets the constant ones once per handle now), with the header list src/daemon/dispatcher.c
 * builds for it. */
static void setup_like_hookd(CURL *e) {
  static char err[CURL_ERROR_SIZE];
  char h[256];
  struct curl_slist *hs = NULL;
  snprintf(h, sizeof h, "Content-Type: application/json");
  hs = curl_slist_append(hs, h);
  snprintf(h, sizeof h, "webhook-id: %s", "evt_01m8mc9e8rf7hcrrvkcqkw5c4c");
  hs = curl_slist_append(hs, h);
  snprintf(h, sizeof h, "webhook-timestamp: %lld", (long long)time(NULL));
  hs = curl_slist_append(hs, h);
  snprintf(h, sizeof h, "webhook-signature: %s", "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=");
  hs = curl_slist_append(hs, h);
  snprintf(h, sizeof h, "hookd-delivery-id: %s", "dlv_01m8mc9e8rf7hcrrvkcqkw5c4d");
  hs = curl_slist_append(hs, h);
  snprintf(h, sizeof h, "hookd-attempt: %d", 1);
  hs = curl_slist_append(hs, h);
  hs = curl_slist_append(hs, "Expect:");
  curl_easy_setopt(e, CURLOPT_URL, the_url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)hs);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, hs);
  curl_easy_setopt(e, CURLOPT_USERAGENT, "hookd/0.1.0");
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 15000L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, discard);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, err);
  set_ca(e);
}

static void setup(CURL *e, const char *url) {
  curl_easy_setopt(e, CURLOPT_URL, url);
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, discard);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 15000L);
  set_ca(e);
}

/* Counts finished transfers and starts each handle again. */
static void reap(CURLM *m) {
  CURLMsg *msg;
  int left;
  while ((msg = curl_multi_info_read(m, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    CURL *e = msg->easy_handle;
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (msg->data.result == CURLE_OK && status >= 200 && status < 300)
      completed++;
    else
      errors++;
    curl_multi_remove_handle(m, e);
    if (hookd_mode) {
      struct curl_slist *hs = NULL;
      curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&hs);
      curl_slist_free_all(hs);
      curl_easy_reset(e);
      setup_like_hookd(e);
    }
    curl_multi_add_handle(m, e);
  }
}

/* ---------- socket mode: epoll + timer callbacks ---------- */

static int epfd;
static long timeout_ms = -1;

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp) {
  (void)e;
  (void)userp;
  struct epoll_event ev = {.data.fd = s};
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(epfd, EPOLL_CTL_DEL, s, NULL);
    return 0;
  }
  ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
  if (epoll_ctl(epfd, EPOLL_CTL_MOD, s, &ev) != 0) epoll_ctl(epfd, EPOLL_CTL_ADD, s, &ev);
  (void)socketp;
  return 0;
}

static int on_timer(CURLM *m, long ms, void *userp) {
  (void)m;
  (void)userp;
  timeout_ms = ms;
  return 0;
}

int main(int argc, char **argv) {
  const char *url = NULL, *mode = "socket";
  long conns = 64;
  double duration = 5, warmup = 1;
  long bytes = 1024;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-c") && i + 1 < argc) conns = atol(argv[++i]);
    else if (!strcmp(argv[i], "-d") && i + 1 < argc) duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "-w") && i + 1 < argc) warmup = atof(argv[++i]);
    else if (!strcmp(argv[i], "-b") && i + 1 < argc) bytes = atol(argv[++i]);
    else if (!strcmp(argv[i], "-m") && i + 1 < argc) mode = argv[++i];
    else if (!strcmp(argv[i], "-k") && i + 1 < argc) ca_file = argv[++i];
    else if (argv[i][0] != '-' && !url) url = argv[i];
    else {
      fprintf(stderr, "usage: %s URL [-c CONNECTIONS] [-d SECONDS] [-w WARMUP] [-b BODY_BYTES] "
                      "[-m poll|socket|hookd] [-k CA_FILE]\n", argv[0]);
      return 2;
    }
  }
  int socket_mode = !strcmp(mode, "socket");
  hookd_mode = !strcmp(mode, "hookd");
  the_url = url;
  if (!url || conns < 1 || duration <= 0 || bytes < 200 ||
      (!socket_mode && !hookd_mode && strcmp(mode, "poll"))) {
    fprintf(stderr, "curl_ceiling: bad arguments\n");
    return 2;
  }

  /* A JSON envelope of `bytes` bytes, shaped like the one hookd stores and sends. */
  body = malloc((size_t)bytes + 1);
  int head = snprintf(body, (size_t)bytes + 1,
                      "{\"id\":\"evt_01m8mc9e8rf7hcrrvkcqkw5c4c\",\"type\":\"order.created\","
                      "\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"data\":{\"pad\":\"");
  memset(body + head, 'x', (size_t)bytes - (size_t)head - 3);
  memcpy(body + bytes - 3, "\"}}", 4);
  body_len = (size_t)bytes;

  /* The header set hookd's dispatcher sends (values of the same length). */
  const char *hs[] = {"Content-Type: application/json",
                      "webhook-id: evt_01m8mc9e8rf7hcrrvkcqkw5c4c",
                      "webhook-timestamp: 1767225600",
                      "webhook-signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
                      "hookd-delivery-id: dlv_01m8mc9e8rf7hcrrvkcqkw5c4d",
                      "hookd-attempt: 1",
                      "Expect:"};
  for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) headers = curl_slist_append(headers, hs[i]);

  curl_global_init(CURL_GLOBAL_DEFAULT);
  CURLM *m = curl_multi_init();
  curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, conns);
  curl_multi_setopt(m, CURLMOPT_MAX_TOTAL_CONNECTIONS, conns);
  if (socket_mode) {
    epfd = epoll_create1(EPOLL_CLOEXEC);
    curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
  }
  for (long i = 0; i < conns; i++) {
    CURL *e = curl_easy_init();
    if (hookd_mode)
      setup_like_hookd(e);
    else
      setup(e, url);
    curl_multi_add_handle(m, e);
  }

  double t_start = now_s() + warmup, t_end = 0;
  int counting = 0, running = 1;
  struct epoll_event evs[256];
  if (socket_mode) curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
  for (;;) {
    double t = now_s();
    if (!counting && t >= t_start) {
      counting = 1;
      completed = errors = 0;
      t_start = t;
      t_end = t + duration;
    }
    if (counting && t >= t_end) break;
    if (socket_mode) {
      int wait = timeout_ms < 0 || timeout_ms > 100 ? 100 : (int)timeout_ms;
      int n = epoll_wait(epfd, evs, 256, wait);
      if (n <= 0) {
        curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
      } else {
        for (int i = 0; i < n; i++) {
          int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                      (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                      (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
          curl_multi_socket_action(m, evs[i].data.fd, flags, &running);
        }
      }
      reap(m);
      if (timeout_ms == 0) curl_multi_socket_action(m, CURL_SOCKET_TIMEOUT, 0, &running);
    } else {
      curl_multi_perform(m, &running);
      reap(m);
      curl_multi_poll(m, NULL, 0, 100, NULL);
    }
  }
  double secs = now_s() - t_start;
  printf("requests_per_s=%.0f completed=%ld errors=%ld seconds=%.2f connections=%ld "
         "body_bytes=%ld mode=%s\n",
         completed / secs, completed, errors, secs, conns, bytes, mode);
  curl_multi_cleanup(m); /* easy handles and sockets are reclaimed at exit */
  curl_global_cleanup();
  return errors && !completed ? 1 : 0;
}

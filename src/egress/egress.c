/* egress.c — libcurl multi driver (see egress.h). One thread owns it; other threads may only
 * call hookd_egress_wakeup. Easy handles are pooled so a request does not pay for curl_easy_init;
 * connections live in the multi handle's cache and are reused across requests. */
#include "egress/egress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "core/clock.h"
#include "core/strmap.h"

#define POOL_MAX 8192 /* above any in-flight cap: a request never pays for curl_easy_init */

struct hookd_egress {
  hookd_egress_config cfg;
  CURLM *multi;
  hookd_egress_req *live;       /* requests in flight (for hookd_egress_abort_all) */
  /* Kept-alive connections, so that a reused one's socket can be found before a request is
   * sent on it: "local ip|port|peer ip|port" → fd + 1, and by fd its key. */
  hookd_strmap conns;
  char **conn_key;
  int conn_key_cap;
  CURL *pool[POOL_MAX];
  int pool_len;
  bool ca_file_only; /* the CAs come from one file: no CA directory, the parsed store kept */
  int64_t read_us;   /* monotonic µs at the end of the last read of the sockets (0: none yet) */
  bool live_at_read; /* requests were in flight at that read (a stall holds up only those) */
  int64_t stall_ms;  /* a stall found before the read being drained (0: none) */
};

/* Whether libcurl's built-in CA bundle can be read: then its CA directory (a copy of the same
 * certificates on Debian) is not needed, and the parsed store can be kept (set_constant_options). */
static bool default_ca_file_readable(void) {
  CURL *e = curl_easy_init();
  if (!e) return false;
  char *file = NULL;
  bool ok = curl_easy_getinfo(e, CURLINFO_CAINFO, &file) == CURLE_OK && file &&
            access(file, R_OK) == 0;
  curl_easy_cleanup(e);
  return ok;
}

hookd_egress *hookd_egress_new(const hookd_egress_config *cfg) {
  hookd_egress *eg = calloc(1, sizeof *eg);
  if (!eg) return NULL;
  eg->cfg = *cfg;
  if (!eg->cfg.connect_timeout_ms) eg->cfg.connect_timeout_ms = 5000;
  if (!eg->cfg.conn_max_age_s) eg->cfg.conn_max_age_s = 300;
  if (!eg->cfg.max_response_bytes) eg->cfg.max_response_bytes = 64 * 1024;
  if (!eg->cfg.excerpt_bytes) eg->cfg.excerpt_bytes = 4096;
  if (!eg->cfg.max_connects) eg->cfg.max_connects = 1024;
  if (!eg->cfg.user_agent) eg->cfg.user_agent = "hookd/" HOOKD_VERSION;
  eg->multi = curl_multi_init();
  if (!eg->multi) {
    free(eg);
    return NULL;
  }
  curl_multi_setopt(eg->multi, CURLMOPT_MAXCONNECTS, eg->cfg.max_connects);
  eg->ca_file_only = eg->cfg.ca_file || default_ca_file_readable();
  curl_multi_setopt(eg->multi, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING); /* (egress.h) */
  hookd_strmap_init(&eg->conns);
  return eg;
}

void hookd_egress_free(hookd_egress *eg) {
  if (!eg) return;
  for (int i = 0; i < eg->pool_len; i++) curl_easy_cleanup(eg->pool[i]);
  curl_multi_cleanup(eg->multi); /* closes the cached connections (on_close_socket) */
  for (int fd = 0; fd < eg->conn_key_cap; fd++) free(eg->conn_key[fd]);
  free(eg->conn_key);
  hookd_strmap_free(&eg->conns);
  free(eg);
}

void hookd_egress_wakeup(hookd_egress *eg) { curl_multi_wakeup(eg->multi); }

void hookd_egress_req_cleanup(hookd_egress_req *req) { hookd_buf_free(&req->response); }

/* ---------- callbacks ---------- */

static size_t on_body(char *p, size_t size, size_t n, void *arg) {
  hookd_egress_req *req = arg;
  size_t len = size * n;
  req->response_total += len;
  size_t room = req->response.max - req->response.len;
  if (room) hookd_buf_append(&req->response, p, len < room ? len : room);
  if (req->response_total > req->eg->cfg.max_response_bytes) return 0; /* abort: too large */
  return len;
}

/* Copies the value of header line p (after the name of length nl) into out, trimmed and
 * truncated; control bytes and bytes past ASCII end it (it is shown as JSON text). */
static void header_value(const char *p, size_t len, size_t nl, char *out, size_t cap) {
  const char *v = p + nl;
  size_t vl = len - nl;
  while (vl && (*v == ' ' || *v == '\t')) v++, vl--;
  size_t o = 0;
  while (o < vl && o + 1 < cap && (unsigned char)v[o] >= 0x20 && (unsigned char)v[o] < 0x7f) {
    out[o] = v[o];
    o++;
  }
  while (o && out[o - 1] == ' ') o--;
  out[o] = '\0';
}

/* Header bytes of one answer, its 1xx answers counted in: libcurl's own bound (300 KB) came in
 * 8.3.0 only, and a receiver streaming header lines (or 1xx answers) for ever would hold memory
 * in every request in flight. */
#define HEADER_BYTES_MAX (64 * 1024)

/* How long an answer's body may take after its head (its final status line and headers): past
 * it the transfer is cut, the status deciding as before (docs/security.md). libcurl 7.88 parses
 * a chunked body's chunk extensions unbounded and uncounted — on_body and on_header never see
 * them — so a 200 followed by an endless `1;aaaa…` held this one thread parsing until the
 * endpoint's timeout, every other endpoint's deliveries waiting behind it (a review). */
#define BODY_GRACE_US (1000 * 1000)

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow) {
  (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
  hookd_egress_req *req = arg;
  if (!req->head_done_us || hookd_mono_us() - req->head_done_us <= BODY_GRACE_US) return 0;
  req->body_cut = true;
  return 1; /* CURLE_ABORTED_BY_CALLBACK: the status read decides (map_result) */
}

/* Renegotiation refused: a TLS 1.2 receiver asking for it over and over had each handshake
 * made on this one thread (docs/security.md). */
static CURLcode on_ssl_ctx(CURL *e, void *ctx, void *arg) {
  (void)e, (void)arg;
  SSL_CTX_set_options((SSL_CTX *)ctx, SSL_OP_NO_RENEGOTIATION);
  return CURLE_OK;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg) {
  hookd_egress_req *req = arg;
  size_t len = size * n;
  req->header_total += len;
  if (req->header_total > HEADER_BYTES_MAX) return 0; /* abort: too large (a write error) */
  if ((len == 2 && p[0] == '\r' && p[1] == '\n') || (len == 1 && p[0] == '\n')) {
    /* a head's end: the final answer's (not a 1xx, not a proxy's answer to CONNECT, which
     * comes before the request is sent) starts the body's grace */
    long code = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &code);
    if (req->request_sent && code >= 200 && !req->head_done_us)
      req->head_done_us = hookd_mono_us();
    return len;
  }
  if (len >= 5 && memcmp(p, "HTTP/", 5) == 0) {
    if (len > 5 && (p[5] == '2' || p[5] == '3') && strncasecmp(req->url, "https:", 6) != 0) {
      /* HTTP/2 or 3 cannot be spoken over http:// here (no upgrade is asked): refused before
       * libcurl takes the connection's host for a multiplexing one (egress.h) */
      req->bad_version = true;
      return 0;
    }
    req->retry_after[0] = req->result_ref[0] = '\0'; /* a new response (after 1xx) starts */
  } else if (len > 12 && strncasecmp(p, "retry-after:", 12) == 0) {
    header_value(p, len, 12, req->retry_after, sizeof req->retry_after);
  } else if (len > 17 && strncasecmp(p, "hookd-result-ref:", 17) == 0) {
    header_value(p, len, 17, req->result_ref, sizeof req->result_ref);
  } else if (len > 9 && strncasecmp(p, "location:", 9) == 0 && !req->result_ref[0]) {
    header_value(p, len, 9, req->result_ref, sizeof req->result_ref);
  } else if (len > 19 && strncasecmp(p, "proxy-authenticate:", 19) == 0) {
    req->proxy_auth_asked = true; /* (a CONNECT's answer: the proxy asks for credentials) */
  }
  return len;
}

static curl_socket_t on_open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a) {
  hookd_egress_req *req = arg;
  hookd_egress *eg = req->eg;
  if (eg->cfg.url_check &&
      eg->cfg.url_check(eg->cfg.addr_check_ctx, req->url, req->blocked_rule,
                        sizeof req->blocked_rule) != 0)
    return CURL_SOCKET_BAD;
  /* through a proxy every socket is the proxy's, an address the operator chose (a sidecar on
   * 127.0.0.1, a proxy on 10.x): not a destination, not judged as one — judged, every delivery
   * was refused `blocked` and went dead at once; the proxy judges the hop it makes */
  if (eg->cfg.addr_check && !eg->cfg.proxy) {
    const char *rule = eg->cfg.addr_check(eg->cfg.addr_check_ctx, &a->addr, a->addrlen);
    if (rule) {
      snprintf(req->blocked_rule, sizeof req->blocked_rule, "%s", rule);
      return CURL_SOCKET_BAD;
    }
  }
  req->sockets_opened++;
  curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  if (fd == CURL_SOCKET_BAD && (errno == EMFILE || errno == ENFILE)) req->fd_exhausted = true;
  return fd;
}

/* ---------- kept-alive connections ---------- */

static void conn_key(char *out, size_t cap, const char *lip, long lport, const char *pip,
                     long pport) {
  snprintf(out, cap, "%s|%ld|%s|%ld", lip ? lip : "", lport, pip ? pip : "", pport);
}

static void conn_forget(hookd_egress *eg, int fd) {
  if (fd < 0 || fd >= eg->conn_key_cap || !eg->conn_key[fd]) return;
  hookd_strmap_del(&eg->conns, eg->conn_key[fd]);
  free(eg->conn_key[fd]);
  eg->conn_key[fd] = NULL;
}

/* After a request: the connection it used, if libcurl kept it, is remembered by its addresses.
 * The handle must still be in the multi handle (CURLINFO_ACTIVESOCKET needs it). */
static void conn_remember(hookd_egress *eg, CURL *e) {
  long connects = 0, version = 0;
  curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &connects);
  if (connects == 0) return; /* a reused connection: known since its first request */
  /* HTTP/1 only: an HTTP/2 connection multiplexes (other streams' frames wait on it as a rule)
   * and frames its answers, so a stray one cannot be taken for the next request's */
  curl_easy_getinfo(e, CURLINFO_HTTP_VERSION, &version);
  if (version != CURL_HTTP_VERSION_1_0 && version != CURL_HTTP_VERSION_1_1) return;
  curl_socket_t fd = CURL_SOCKET_BAD; /* (found by a walk of libcurl's connection cache) */
  if (curl_easy_getinfo(e, CURLINFO_ACTIVESOCKET, &fd) != CURLE_OK || fd == CURL_SOCKET_BAD ||
      fd < 0)
    return;
  if (fd < eg->conn_key_cap && eg->conn_key[fd]) return; /* known already */
  if (fd >= eg->conn_key_cap) {
    int nc = eg->conn_key_cap ? eg->conn_key_cap : 256;
    while (nc <= fd) nc *= 2;
    char **nk = realloc(eg->conn_key, (size_t)nc * sizeof *nk);
    if (!nk) return;
    memset(nk + eg->conn_key_cap, 0, (size_t)(nc - eg->conn_key_cap) * sizeof *nk);
    eg->conn_key = nk;
    eg->conn_key_cap = nc;
  }
  char *lip = NULL, *pip = NULL;
  long lport = 0, pport = 0;
  curl_easy_getinfo(e, CURLINFO_LOCAL_IP, &lip);
  curl_easy_getinfo(e, CURLINFO_LOCAL_PORT, &lport);
  curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &pip);
  curl_easy_getinfo(e, CURLINFO_PRIMARY_PORT, &pport);
  char key[160];
  conn_key(key, sizeof key, lip, lport, pip, pport);
  char *own = strdup(key);
  if (!own) return;
  /* an entry left by a socket closed outside on_close_socket would name another fd */
  void *old = hookd_strmap_get(&eg->conns, key);
  if (old) conn_forget(eg, (int)((intptr_t)old - 1));
  if (hookd_strmap_put(&eg->conns, key, (void *)(intptr_t)(fd + 1)) != 0) {
    free(own);
    return;
  }
  eg->conn_key[fd] = own;
}

static int on_close_socket(void *arg, curl_socket_t fd) {
  conn_forget(arg, fd);
  return close(fd);
}

/* Bytes (or the end of the stream) already waiting on a reused connection's socket. */
static bool conn_has_input(hookd_egress *eg, const char *lip, int lport, const char *pip,
                           int pport) {
  char key[160];
  conn_key(key, sizeof key, lip, lport, pip, pport);
  void *v = hookd_strmap_get(&eg->conns, key);
  if (!v) return false;
  char b;
  if (recv((int)((intptr_t)v - 1), &b, 1, MSG_PEEK | MSG_DONTWAIT) >= 0) return true;
  return errno != EAGAIN && errno != EWOULDBLOCK; /* a reset connection is no better */
}

static int on_prereq(void *arg, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port) {
  hookd_egress_req *req = arg;
  if (!req->request_sent && !req->fresh) {
    long connects = 1;
    curl_easy_getinfo(req->easy, CURLINFO_NUM_CONNECTS, &connects);
    if (connects == 0 && conn_has_input(req->eg, conn_local_ip, conn_local_port,
                                        conn_primary_ip, conn_primary_port)) {
      req->stale_conn = true; /* not sent: started again on a new connection (finish) */
      return CURL_PREREQFUNC_ABORT;
    }
  }
  /* Called before each send: a second call means libcurl is sending the request again by
   * itself, on a new connection after a reused one closed without an answer — which the peer
   * may have read and acted on. Never: that send would be an attempt the history does not show,
   * outside the backoff and max_attempts. The attempt ends ambiguous (sent, no answer) and the
   * retry policy decides, or the hold of a non-idempotent destination. */
  if (req->request_sent) {
    req->resend_refused = true;
    return CURL_PREREQFUNC_ABORT;
  }
  req->request_sent = true;
  return CURL_PREREQFUNC_OK;
}

/* ---------- requests ---------- */

/* Options that are the same for every request are set once per handle. */
static void set_constant_options(hookd_egress *eg, CURL *e) {
  curl_easy_setopt(e, CURLOPT_POST, 1L);
  curl_easy_setopt(e, CURLOPT_USERAGENT, eg->cfg.user_agent);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  /* An HTTPS proxy is verified against the same CAs: one trust for every TLS connection the
   * egress opens, and one kept store (libcurl keeps one per multi handle, replaced when a
   * connection's CA file differs) */
  if (eg->cfg.ca_file) {
    curl_easy_setopt(e, CURLOPT_CAINFO, eg->cfg.ca_file);
    curl_easy_setopt(e, CURLOPT_PROXY_CAINFO, eg->cfg.ca_file);
  }
  /* The CAs parsed once and kept: libcurl keeps its parsed CA store (in the multi handle) only
   * when the CAs come from a file alone, and Debian's names a directory beside its bundle — every
   * new connection parsed the whole bundle again, ~21 ms of this one thread (docs/security.md) */
  if (eg->ca_file_only) {
    curl_easy_setopt(e, CURLOPT_CAPATH, NULL);
    curl_easy_setopt(e, CURLOPT_PROXY_CAPATH, NULL);
    curl_easy_setopt(e, CURLOPT_CA_CACHE_TIMEOUT, 3600L);
  }
  /* The key exchanges a receiver may choose: elliptic curves, or RSA key transport. A
   * finite-field Diffie-Hellman one costs the client by the size of the group the server picks:
   * a receiver forcing an 8192-bit group took ~240 ms of this one thread per handshake, every
   * endpoint's deliveries waiting behind it (a review). Neither TLS 1.2's DHE suites nor TLS
   * 1.3's ffdhe groups, then (a receiver that speaks only those fails its handshake: a failed
   * attempt, its error said). */
  curl_easy_setopt(e, CURLOPT_SSL_CIPHER_LIST, "DEFAULT:!kDHE");
  curl_easy_setopt(e, CURLOPT_SSL_EC_CURVES, "X25519:P-256:X448:P-521:P-384");
  curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
  /* a kept-alive connection is found again by host and port alone, whatever the name resolves
   * to now: busy, it was reused for ever, past a receiver's DNS change (a move, a failover) or a
   * --resolve pin changed. Past this age a new one is made (its address resolved and judged).
   * (libcurl 7.80; the 7.87 this file needs has it.) */
  curl_easy_setopt(e, CURLOPT_MAXLIFETIME_CONN, eg->cfg.conn_max_age_s);
  curl_easy_setopt(e, CURLOPT_PROXY, eg->cfg.proxy ? eg->cfg.proxy : "");
  /* no host skips the configured proxy: without this, libcurl reads no_proxy / NO_PROXY from
   * the environment, and a matching destination bypassed the operator's enforcing proxy */
  curl_easy_setopt(e, CURLOPT_NOPROXY, "");
  /* A request ended while its name is still being resolved must not wait for the resolver
   * thread: libcurl 7.88 joins it, and a name server that never answers froze the one
   * dispatcher thread — every endpoint's deliveries — for the resolver's whole timeout (~10 s)
   * on each attempt. With this, the thread is left to finish on its own. */
#if LIBCURL_VERSION_NUM >= 0x075700
  curl_easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
#else
#error "libcurl 7.87.0 or later is needed (CURLOPT_QUICK_EXIT)"
#endif
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
  curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, eg);
  curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(e, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
}

int hookd_egress_start(hookd_egress *eg, hookd_egress_req *req) {
  CURL *e = eg->pool_len ? eg->pool[--eg->pool_len] : NULL;
  if (!e) {
    if (!(e = curl_easy_init())) return -1;
    set_constant_options(eg, e);
  }
  req->easy = e;
  req->eg = eg;
  req->net = HOOKD_NET_PROTOCOL;
  req->status = 0;
  req->retry_after[0] = req->blocked_rule[0] = req->error[0] = req->primary_ip[0] = '\0';
  req->local_failure = NULL;
  req->result_ref[0] = '\0';
  req->response_total = req->header_total = 0;
  req->request_sent = req->fd_exhausted = req->lookup_abandoned = false;
  req->stale_conn = req->fresh = req->resend_refused = req->bad_version = false;
  req->proxy_auth_asked = req->body_cut = false;
  req->head_done_us = 0;
  req->sockets_opened = 0;
  hookd_buf_init(&req->response, eg->cfg.excerpt_bytes);

  /* per request: what differs, and the pointers to this request's state */
  curl_easy_setopt(e, CURLOPT_URL, req->url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)req);
  curl_easy_setopt(e, CURLOPT_POSTFIELDS, req->body);
  curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, req->headers);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                   eg->cfg.connect_timeout_ms < req->timeout_ms ? eg->cfg.connect_timeout_ms
                                                                : req->timeout_ms);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, req);
  curl_easy_setopt(e, CURLOPT_PREREQDATA, req);
  curl_easy_setopt(e, CURLOPT_XFERINFODATA, req);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->error);
  curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 0L);
  if (eg->cfg.resolve_list) curl_easy_setopt(e, CURLOPT_RESOLVE, eg->cfg.resolve_list(eg->cfg.resolve_ctx));

  req->started_ms = hookd_now_ms();
  req->t0_us = hookd_mono_us();
  if (curl_multi_add_handle(eg->multi, e) != CURLM_OK) {
    if (eg->pool_len < POOL_MAX)
      eg->pool[eg->pool_len++] = e;
    else
      curl_easy_cleanup(e);
    hookd_buf_free(&req->response);
    req->easy = NULL;
    return -1;
  }
  req->live_prev = NULL;
  req->live_next = eg->live;
  if (eg->live) eg->live->live_prev = req;
  eg->live = req;
  return 0;
}

static hookd_net map_result(CURLcode rc, hookd_egress_req *req) {
  /* Refused only when no address was allowed: with one refused and another allowed, libcurl
   * goes on to the allowed one, and what happened there is the outcome (a 200 there is a
   * delivery, a refused connection a retryable error). */
  if (req->blocked_rule[0] && req->sockets_opened == 0) return HOOKD_NET_BLOCKED;
  if (req->bad_version) return HOOKD_NET_PROTOCOL; /* (its status was read, then refused) */
  /* A status line already received decides the outcome whatever becomes of the rest (a header
   * libcurl refuses — too long, a NUL in it —, a body cut short, too large, or still trickling
   * at the timeout): the receiver has answered. A 2xx read as a timeout or a protocol error was
   * sent again. (hookd's own aborts come before any status, but the cut of a body that
   * outlasted its grace.) */
  if (rc == CURLE_OK ||
      (req->status >= 200 && (rc != CURLE_ABORTED_BY_CALLBACK || req->body_cut)))
    return HOOKD_NET_OK;
  switch (rc) {
  case CURLE_OPERATION_TIMEDOUT: return HOOKD_NET_TIMEOUT;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY: return HOOKD_NET_DNS;
  case CURLE_COULDNT_CONNECT: return HOOKD_NET_CONNECT;
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS: return HOOKD_NET_TLS;
  case CURLE_WRITE_ERROR: return HOOKD_NET_TOO_LARGE;
  default: return HOOKD_NET_PROTOCOL;
  }
}

/* A request is over (rc from libcurl, or a timeout made up by hookd_egress_abort_all): its
 * outcome is read, its handle goes back to the pool, and on_done gets it. */
static void finish(hookd_egress *eg, CURL *e, CURLcode rc, const char *why,
                   void (*on_done)(hookd_egress_req *req, void *arg), void *arg) {
  hookd_egress_req *req = NULL;
  curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&req);
  if (rc == CURLE_ABORTED_BY_CALLBACK && req->stale_conn && !req->fresh) {
    /* nothing was sent on the connection with bytes waiting (libcurl has closed it): the same
     * request again, on a new connection */
    curl_multi_remove_handle(eg->multi, e);
    req->stale_conn = false;
    req->fresh = true;
    req->error[0] = '\0';
    curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    if (curl_multi_add_handle(eg->multi, e) == CURLM_OK) return;
    /* could not start again: an error before sending (not ambiguous), retried later */
  }
  if (rc == CURLE_OK) conn_remember(eg, e);
  long status = 0;
  curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
  req->status = (int)status;
  req->abandoned = why != NULL;
  req->net = map_result(rc, req);
  /* ended before its name was resolved: no socket yet, and no lookup time (a pinned or literal
   * address takes a few µs, a cached name too); through a proxy, libcurl resolves no name */
  curl_off_t looked = 0;
  curl_easy_getinfo(e, CURLINFO_NAMELOOKUP_TIME_T, &looked);
  req->lookup_abandoned = !eg->cfg.proxy && req->sockets_opened == 0 && looked == 0 &&
                          (rc == CURLE_OPERATION_TIMEDOUT || why != NULL);
  /* sent, then libcurl's own resend (the kept-alive connection closed without an answer) failed
   * before it could send — a refused connect, DNS, TLS, a rule: the outcome is the first send's,
   * sent with no answer (ambiguous), not "nothing was sent", which is retried at once and sent
   * a destination marked idempotent: false the request a second time */
  bool resend_failed = req->request_sent && !why &&
                       (req->net == HOOKD_NET_DNS || req->net == HOOKD_NET_CONNECT ||
                        req->net == HOOKD_NET_TLS || req->net == HOOKD_NET_BLOCKED);
  if (resend_failed) req->net = HOOKD_NET_PROTOCOL;
  /* a failure before sending may be hookd's own want of descriptors, not the receiver's: the
   * socket (on_open_socket) but also libcurl's resolver thread or the CA file */
  if (!req->request_sent && !req->fd_exhausted &&
      (req->net == HOOKD_NET_DNS || req->net == HOOKD_NET_CONNECT || req->net == HOOKD_NET_TLS)) {
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) close(fd);
    else if (errno == EMFILE || errno == ENFILE) req->fd_exhausted = true;
  }
  /* before sending, hookd's own side may be what failed: the receiver is not in question (no
   * attempt, no breaker failure, no failing run: given back as for want of descriptors) — its
   * HTTP proxy not reached (no answer to CONNECT: down, or its name not resolved), the proxy
   * asking for hookd's credentials (407 with a Proxy-Authenticate challenge), its CA file. A
   * proxy that answers CONNECT 403 refuses the destination: `blocked`, as hookd's own rules; so
   * does a 407 without a challenge — Smokescreen's refusal ("Request rejected by proxy"), which,
   * taken for a credentials problem, gave the delivery back every second for ever, no attempt
   * recorded, the operator told to fix credentials. (A SOCKS proxy's refusals cannot be told
   * from its being down: left the receiver's, retried. Nor is a connect's errno read: an IPv6
   * receiver from a host without IPv6 gives EADDRNOTAVAIL too — the receiver's, not hookd's.)
   * A request hookd's own policy refused opened no socket (CURLE_COULDNT_CONNECT, no CONNECT
   * answer) and stays `blocked`: taken for the proxy being down, it was given back every second
   * for ever instead of going DEAD. */
  if (!req->request_sent && !why && !req->fd_exhausted && req->net != HOOKD_NET_OK &&
      req->net != HOOKD_NET_BLOCKED) {
    long connect_code = 0;
    curl_easy_getinfo(e, CURLINFO_HTTP_CONNECTCODE, &connect_code);
    bool http_proxy = eg->cfg.proxy && strncasecmp(eg->cfg.proxy, "socks", 5) != 0;
    if (http_proxy && connect_code == 403) {
      req->net = HOOKD_NET_BLOCKED;
      snprintf(req->blocked_rule, sizeof req->blocked_rule, "of the egress proxy (CONNECT 403)");
    } else if (http_proxy && connect_code == 407 && !req->proxy_auth_asked) {
      req->net = HOOKD_NET_BLOCKED;
      snprintf(req->blocked_rule, sizeof req->blocked_rule,
               "of the egress proxy (CONNECT 407 refusal)");
    } else if (http_proxy && connect_code == 407) {
      req->local_failure = "the egress proxy asks for credentials (407)";
    } else if (http_proxy && connect_code == 0 &&
               (rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_COULDNT_CONNECT)) {
      req->local_failure = "the egress proxy could not be reached";
    } else if (rc == CURLE_SSL_CACERT_BADFILE) {
      req->local_failure = "hookd's CA certificates could not be read";
    }
  }
  if (req->net == HOOKD_NET_OK) {
    req->error[0] = '\0';
  } else if (why) {
    snprintf(req->error, sizeof req->error, "%s", why);
  } else if (req->bad_version) {
    snprintf(req->error, sizeof req->error,
             "the answer's status line claims HTTP/2 or 3 on a cleartext HTTP/1.1 connection");
  } else if (req->header_total > HEADER_BYTES_MAX) {
    snprintf(req->error, sizeof req->error,
             "the answer's header lines (its 1xx answers' counted in) passed %d bytes",
             HEADER_BYTES_MAX);
  } else if (req->resend_refused || resend_failed) {
    snprintf(req->error, sizeof req->error,
             "the connection closed after the request was sent, before any response");
  } else if (!req->error[0]) {
    snprintf(req->error, sizeof req->error, "%s", curl_easy_strerror(rc));
  }
  if (req->net == HOOKD_NET_BLOCKED)
    snprintf(req->error, sizeof req->error, "destination refused by rule %s",
             req->blocked_rule);
  req->stalled_ms = why ? 0 : eg->stall_ms;
  if (rc == CURLE_OPERATION_TIMEDOUT && req->stalled_ms) {
    /* its deadline judged before what waits on its socket was read (docs/architecture.md "A
     * stall of hookd's own") */
    char was[sizeof req->error];
    memcpy(was, req->error, sizeof was);
    snprintf(req->error, sizeof req->error,
             "%.160s; hookd stalled for %lld ms before reading its answer", was,
             (long long)eg->stall_ms);
  }
  char *ip = NULL;
  if (curl_easy_getinfo(e, CURLINFO_PRIMARY_IP, &ip) == CURLE_OK && ip)
    snprintf(req->primary_ip, sizeof req->primary_ip, "%s", ip);
  req->latency_us = hookd_mono_us() - req->t0_us;
  curl_multi_remove_handle(eg->multi, e);
  if (req->live_prev) req->live_prev->live_next = req->live_next;
  else eg->live = req->live_next;
  if (req->live_next) req->live_next->live_prev = req->live_prev;
  req->live_prev = req->live_next = NULL;
  /* the handle keeps its constant options for the next request; the error buffer points
   * into this request, so detach it */
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, NULL);
  if (eg->pool_len < POOL_MAX)
    eg->pool[eg->pool_len++] = e;
  else
    curl_easy_cleanup(e);
  req->easy = NULL;
  on_done(req, arg);
}

/* Hands every ended transfer to on_done; returns how many. */
static int drain(hookd_egress *eg, void (*on_done)(hookd_egress_req *req, void *arg), void *arg) {
  CURLMsg *msg;
  int left, n = 0;
  while ((msg = curl_multi_info_read(eg->multi, &left)))
    if (msg->msg == CURLMSG_DONE) {
      finish(eg, msg->easy_handle, msg->data.result, NULL, on_done, arg);
      n++;
    }
  return n;
}

/* Reads the sockets and runs libcurl's timers. `waited_ms`: how long the caller was entitled to
 * leave them unread since the last read (the poll's wait; 0 for the owner's turn): a read later
 * than that by HOOKD_EGRESS_STALL_MS, with requests in flight, follows a stall — the timeouts it
 * finds may be of answers that waited unread. Returns the stall's length in ms, else 0. */
static int64_t perform(hookd_egress *eg, int64_t waited_ms) {
  int64_t now = hookd_mono_us();
  /* (the stall is the time past the wait allowed, with requests out since the last read: one
   * started during a long turn was not held up by it) */
  int64_t late_ms = eg->read_us ? (now - eg->read_us) / 1000 - waited_ms : 0;
  eg->stall_ms = eg->live_at_read && eg->live && late_ms > HOOKD_EGRESS_STALL_MS ? late_ms : 0;
  int running = 0;
  curl_multi_perform(eg->multi, &running);
  eg->read_us = hookd_mono_us();
  eg->live_at_read = eg->live != NULL;
  return eg->stall_ms;
}

int64_t hookd_egress_poll(hookd_egress *eg, int timeout_ms,
                          void (*on_done)(hookd_egress_req *req, void *arg), void *arg) {
  int64_t stalled = perform(eg, 0);
  /* Transfers the first perform ended are handed over before sleeping: a response read whole on
   * a reused connection waited out the poll (up to the caller's timeout, ~1 s), inflating its
   * latency, holding its slot and making a fast endpoint look slow. */
  int ended = drain(eg, on_done, arg);
  /* (libcurl shortens the wait to its next deadline: that is the wait allowed) */
  long wait = ended ? 0 : timeout_ms, next = -1;
  if (curl_multi_timeout(eg->multi, &next) == CURLM_OK && next >= 0 && next < wait) wait = next;
  int numfds = 0;
  curl_multi_poll(eg->multi, NULL, 0, ended ? 0 : timeout_ms, &numfds);
  int64_t after = perform(eg, wait);
  drain(eg, on_done, arg);
  eg->stall_ms = 0;
  return after > stalled ? after : stalled;
}

hookd_egress_req *hookd_egress_live(hookd_egress *eg) { return eg->live; }

int64_t hookd_egress_unread_ms(const hookd_egress *eg) {
  return eg->read_us ? (hookd_mono_us() - eg->read_us) / 1000 : 0;
}

void hookd_egress_abort(hookd_egress *eg, hookd_egress_req *req, const char *why,
                        void (*on_done)(hookd_egress_req *req, void *arg), void *arg) {
  finish(eg, req->easy, CURLE_OPERATION_TIMEDOUT, why, on_done, arg);
}

void hookd_egress_abort_all(hookd_egress *eg, const char *why,
                            void (*on_done)(hookd_egress_req *req, void *arg), void *arg) {
  while (eg->live) finish(eg, eg->live->easy, CURLE_OPERATION_TIMEDOUT, why, on_done, arg);
}

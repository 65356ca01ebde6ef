/* server.c — libmicrohttpd glue (see server.h).
 *
 * MHD calls the access handler several times per request: once with the head, then with body
 * chunks, then with an empty chunk when the body is complete. The request moves through
 * READING → HANDLED; a handler that suspends sets `async`, and the answer (from any thread)
 * stores the response and resumes the connection, after which MHD calls us once more and the
 * stored response is queued.
 *
 * A request whose body is BIG_BODY bytes or more is handled on a body worker instead
 * (body_work): suspended, queued, its handler run there — parsing a big body (an object of
 * 60,000 keys: 40–75 ms) on libmicrohttpd's one thread held every other request behind it
 * (docs/architecture.md). Its connection is resumed once the handler has returned and the
 * answer is given, whichever is last (`pins`). */
#include "daemon/server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

/* The head checks below lean on how libmicrohttpd 0.9.7x holds a request's head: values cut at
 * a NUL (clean_value), a folded header's name and value where its pool put them (folded_header),
 * a value's trailing blanks cut in place and never read again by its stored size (scan_header).
 * Checked on 0.9.75 (Debian 12); a 1.x library must be checked again before hookd is built on
 * it — the request-smuggling and NUL tests (api_hardening.test.mjs) are where to start. */
#if MHD_VERSION < 0x00097500 || MHD_VERSION >= 0x01000000
#error "hookd's request-head checks were made for libmicrohttpd 0.9.75-0.9.x (see above)"
#endif

#include "core/buf.h"
#include "core/clock.h"
#include "core/inbound.h"
#include "core/jsonio.h"
#include "core/utf8.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

#define MAX_RESP_HEADERS 8 /* (the dashboard sends five) */
#ifndef HOOKD_BIG_BODY     /* (-DHOOKD_BIG_BODY=1: every body, to test the handlers on them) */
#define BIG_BODY 16384     /* a body from this size is handled on a body worker */
#else
#define BIG_BODY HOOKD_BIG_BODY
#endif
#define BODY_WORKERS 2     /* (two: one giant body does not hold every other big one) */

struct hookd_server {
  struct MHD_Daemon *mhd;
  hookd_server_config cfg;
  int port;
  _Atomic int suspended;
  /* shutdown: set by quiesce; a request reaching its handler after it is refused. in_handler
   * counts handlers running, so the drain cannot miss one that checked `closing` just before it
   * was set and suspends just after the drain saw none suspended (both seq_cst) */
  _Atomic bool closing;
  _Atomic int in_handler;
  _Atomic size_t buffered; /* request-body bytes held, all connections together */
  _Atomic int unsent;      /* answers given (hookd_req_reply) that MHD has not finished sending:
                            * the drain lets them go out before it stops the daemon, which
                            * closes every connection */
  int quiesced_fd; /* the listening socket MHD_quiesce_daemon handed back, -1 until then */
  /* The head deadline: every connection's slot, listed under conns_lock from libmicrohttpd's
   * NOTIFY_STARTED to its NOTIFY_CLOSED (before it closes the descriptor: a slot's fd is never
   * used after); the watchdog thread shuts down those whose head is late (head_watch) */
  pthread_mutex_t conns_lock;
  pthread_cond_t conns_wake; /* (the monotonic clock) the watchdog's tick, or its stop */
  struct conn_slot *conns;
  bool watchdog_stop, watchdog_running;
  pthread_t watchdog;
  /* request-body bytes held by each client address (addr_hold; libmicrohttpd's thread only) */
  struct addr_hold *holds[256];
  /* the body workers' queue: big-bodied requests, suspended, waiting for a worker (body_work) */
  pthread_mutex_t work_lock;
  pthread_cond_t work_wake;
  struct hookd_req *work_head, *work_tail;
  bool work_stop;
  _Atomic int work_queued; /* waiting, not yet taken (a gauge) */
  int workers;             /* started */
  bool workers_joined;     /* (stop_workers: once) */
  pthread_t worker[BODY_WORKERS];
};

/* The bodies one client address holds while they arrive: at most addr_share() of
 * --max-buffered-bytes, so that one address sending bodies slowly to a public /in/{source}
 * cannot fill the budget and turn every provider away (a review: 300 unsigned 1 MB bodies from
 * one address held 256 MB). Listed while a request of the address holds a charge. */
typedef struct addr_hold {
  struct addr_hold *next;
  unsigned char key[8]; /* an IPv4 address (IPv4-mapped too), or an IPv6 address's /64 */
  size_t bytes;
  int refs; /* requests charged to it */
} addr_hold;

struct hookd_req {
  hookd_server *srv;
  struct MHD_Connection *conn;
  const char *method;              /* owned by MHD, valid for the request */
  char *path;
  const char *query;               /* points into url copy */
  char *url_copy;
  hookd_buf body;
  int64_t started_us;              /* the request line arrived (monotonic, µs) */
  bool handled;
  bool encoded_slash;              /* the raw path holds %2F: one segment, or two? */
  bool refused;                    /* answered at its request line (on_uri): not served */
  bool async;                      /* the handler suspended the connection */
  _Atomic bool ready;              /* a response is stored */
  bool unsent;                     /* counted in srv->unsent until MHD completes the request */
  bool queued;
  bool discarding;                 /* its answer made at its head (413): the body read, thrown
                                    * away, then the answer queued (read_then_answer) */
  /* what a suspended request waits for before its connection is resumed: its answer (1), and
   * on a body worker its handler's return too (2) — whoever ends it resumes (req_resume) */
  _Atomic int pins;
  struct hookd_req *work_next;     /* in the body workers' queue */
  int status;
  char *resp;
  size_t resp_len;
  const char *content_type;
  char *hdr_name[MAX_RESP_HEADERS], *hdr_value[MAX_RESP_HEADERS];
  int n_hdr;
  char *params[HOOKD_REQ_MAX_PARAMS];
  void *app_data;
  void (*app_free)(void *);
  void *kept;                      /* hookd_req_keep: freed with the request */
  void (*kept_free)(void *);
  const void *route;               /* the gate's choice */
  size_t announced;                /* the head's Content-Length (0: none, or chunked) */
  addr_hold *hold;                 /* its client address's, once it holds body memory */
  size_t buffered;                 /* body memory counted in srv->buffered (its buffer's
                                    * capacity: a chunked body's doubling holds up to twice its
                                    * bytes) */
};

/* ---------- request accessors ---------- */

const char *hookd_req_method(const hookd_req *r) { return r->method; }
const char *hookd_req_path(const hookd_req *r) { return r->path; }
const char *hookd_req_query_string(const hookd_req *r) { return r->query ? r->query : ""; }

const char *hookd_req_header(const hookd_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *hookd_req_query(const hookd_req *r, const char *key) {
  const char *v = NULL;
  size_t n = 0;
  if (MHD_lookup_connection_value_n(r->conn, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v, &n) !=
      MHD_YES)
    return NULL;
  return v ? v : ""; /* "?limit" without a value: given, and empty (refused), not absent */
}

typedef struct name_iter {
  const char **names;
  size_t max, n;
} name_iter;

static enum MHD_Result add_name(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
  (void)kind, (void)value;
  name_iter *it = cls;
  if (it->n < it->max) it->names[it->n] = key;
  it->n++;
  return MHD_YES;
}

size_t hookd_req_query_names(const hookd_req *r, const char **names, size_t max) {
  name_iter it = {names, max, 0};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, add_name, &it);
  return it.n;
}

size_t hookd_req_announced(const hookd_req *r) { return r->announced; }

const char *hookd_req_body(const hookd_req *r, size_t *len) {
  *len = r->body.len;
  return hookd_buf_str(&r->body);
}

void hookd_req_body_take(hookd_req *r, hookd_buf *out) {
  *out = r->body;
  hookd_buf_init(&r->body, r->body.max);
}

typedef struct hdr_iter {
  const char **names, **values;
  size_t max, n;
} hdr_iter;

static enum MHD_Result collect_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                      const char *value) {
  hdr_iter *it = cls;
  if (it->n < it->max) {
    it->names[it->n] = key;
    it->values[it->n] = value ? value : "";
  }
  it->n++;
  return MHD_YES;
}

size_t hookd_req_headers(const hookd_req *r, const char **names, const char **values, size_t max) {
  hdr_iter it = {names, values, max, 0};
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect_header, &it);
  return it.n;
}

int64_t hookd_req_age_ms(const hookd_req *r) {
  return hookd_req_age_us(r) / 1000;
}

int64_t hookd_req_age_us(const hookd_req *r) {
  return r->started_us ? hookd_mono_us() - r->started_us : 0;
}

const char *hookd_req_param(const hookd_req *r, int i) {
  return i >= 0 && i < HOOKD_REQ_MAX_PARAMS ? r->params[i] : NULL;
}

int hookd_req_set_param(hookd_req *r, int i, const char *v, size_t len) {
  if (i < 0 || i >= HOOKD_REQ_MAX_PARAMS) return -1;
  free(r->params[i]);
  r->params[i] = strndup(v, len);
  return r->params[i] ? 0 : -1;
}

size_t hookd_server_buffered(hookd_server *s) { return atomic_load(&s->buffered); }

void hookd_req_set_route(hookd_req *r, const void *route) { r->route = route; }
const void *hookd_req_route(const hookd_req *r) { return r->route; }

void hookd_req_set_app(hookd_req *r, void *data, void (*free_fn)(void *)) {
  if (r->app_free) r->app_free(r->app_data);
  r->app_data = data;
  r->app_free = free_fn;
}

void *hookd_req_get_app(const hookd_req *r) { return r->app_data; }

void hookd_req_keep(hookd_req *r, void *data, void (*free_fn)(void *)) {
  if (r->kept_free) r->kept_free(r->kept);
  r->kept = data;
  r->kept_free = free_fn;
}

/* ---------- answering ---------- */

/* A suspended request's answer is given and its handler done: from here on the request belongs
 * to MHD's thread again (it may be freed at once: r is not read after the resume). */
static void req_resume(hookd_req *r) {
  hookd_server *srv = r->srv;
  struct MHD_Connection *conn = r->conn;
  /* counted until resumed: the drain, seeing 0, stops the daemon, and a connection still
   * suspended then aborts libmicrohttpd's stop (srv outlives every request) */
  MHD_resume_connection(conn);
  atomic_fetch_sub(&srv->suspended, 1);
}

void hookd_req_suspend(hookd_req *r) {
  if (r->async) return; /* on a body worker: suspended before its handler ran */
  r->async = true;
  atomic_fetch_add(&r->srv->suspended, 1);
  MHD_suspend_connection(r->conn);
}

void hookd_req_add_header(hookd_req *r, const char *name, const char *value) {
  if (r->n_hdr >= MAX_RESP_HEADERS) return;
  char *n = strdup(name), *v = strdup(value);
  if (!n || !v) { /* out of memory: the answer goes without it (a NULL would be read) */
    free(n);
    free(v);
    return;
  }
  r->hdr_name[r->n_hdr] = n;
  r->hdr_value[r->n_hdr] = v;
  r->n_hdr++;
}

void hookd_req_reply(hookd_req *r, int status, const char *content_type, char *body, size_t len) {
  r->status = status;
  r->content_type = content_type;
  r->resp = body;
  r->resp_len = len;
  if (!r->unsent) { /* before the handler or the suspension stops counting it */
    r->unsent = true;
    atomic_fetch_add(&r->srv->unsent, 1);
  }
  atomic_store(&r->ready, true);
  /* (a handler still running on a body worker resumes the request as it returns) */
  if (r->async && atomic_fetch_sub(&r->pins, 1) == 1) req_resume(r);
}

void hookd_req_reply_json(hookd_req *r, int status, json_t *v) {
  char *s = hookd_json_text_shown(v);
  json_decref(v);
  const char *m = hookd_req_method(r);
  if (!s && status >= 200 && status < 300 && strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0) {
    /* out of memory for the answer to a write that was done (committed): still a success, or
     * its client would send it again (a read's empty success would be a wrong answer) */
    s = strdup("{}");
  } else if (!s) {
    s = strdup("{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}");
    status = 500;
  }
  size_t len = s ? strlen(s) : 0;
  hookd_req_reply(r, status, "application/json", s, len);
}

/* The field a validation error is about, for a client to point at it (Stripe's `param`): every
 * `*_field` and `destination_refused` message begins with the field's path (`url must be …`,
 * `destinations[0].url refused …`, `generic settings are …`); an unknown field, whose name the
 * message quotes cut short, names it with hookd_req_field_error. Empty when the message does
 * not fit (then no param is given). */
static void error_param(const char *code, const char *msg, char *out, size_t cap) {
  size_t cl = strlen(code);
  out[0] = '\0';
  if ((cl < 6 || strcmp(code + cl - 6, "_field") != 0) && strcmp(code, "destination_refused"))
    return;
  if (!strcmp(code, "unknown_field")) return; /* its message quotes the name cut short: it is
                                               * named by hookd_api_unknown_field */
  size_t n = 0;
  while (msg[n] && (isalnum((unsigned char)msg[n]) || strchr("_.[]", msg[n])) && n + 1 < cap) n++;
  if (!n || !isalpha((unsigned char)msg[0]) || (msg[n] && msg[n] != ' ' && msg[n] != ':')) return;
  memcpy(out, msg, n);
  out[n] = '\0';
}

static void verror(hookd_req *r, int status, const char *code, const char *param,
                   const char *fmt, va_list ap) {
  char msg[512], derived[128];
  vsnprintf(msg, sizeof msg, fmt, ap);
  /* a message quoting input may hold bytes that are not UTF-8 (input cut mid-character by
   * %.64s): those become '?', the rest (the field's name) stays readable */
  hookd_utf8_scrub(msg);
  if (!param) { /* read from the message */
    error_param(code, msg, derived, sizeof derived);
    param = derived[0] ? derived : NULL;
  } else if (!*param) { /* none */
    param = NULL;
  }
  json_t *v = param ? json_pack("{s:{s:s,s:s,s:s}}", "error", "code", code, "message", msg,
                                "param", param)
                    : json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg);
  if (!v) v = json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", "invalid request");
  hookd_req_reply_json(r, status, v);
}

void hookd_req_error(hookd_req *r, int status, const char *code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror(r, status, code, NULL, fmt, ap);
  va_end(ap);
}

void hookd_req_field_error(hookd_req *r, int status, const char *code, const char *param,
                           const char *fmt, ...) {
  /* (a name from a parsed body is UTF-8; a longer one is not echoed whole) */
  if (param && strlen(param) > 256) param = NULL;
  va_list ap;
  va_start(ap, fmt);
  verror(r, status, code, param ? param : "", fmt, ap);
  va_end(ap);
}

static enum MHD_Result queue(hookd_req *r) {
  struct MHD_Response *resp = MHD_create_response_from_buffer_with_free_callback(
      r->resp_len, r->resp, free);
  if (!resp) return MHD_NO;
  r->resp = NULL; /* owned by the response now */
  if (r->content_type) MHD_add_response_header(resp, "Content-Type", r->content_type);
  bool cache_said = false;
  for (int i = 0; i < r->n_hdr; i++) {
    MHD_add_response_header(resp, r->hdr_name[i], r->hdr_value[i]);
    cache_said |= !strcasecmp(r->hdr_name[i], "Cache-Control");
  }
  /* an answer of the API may carry a secret (an endpoint's, a new key's token) or a customer's
   * data: no cache keeps it — a browser's, the dashboard's, a proxy's (a review) */
  if (!cache_said) MHD_add_response_header(resp, "Cache-Control", "no-store");
  enum MHD_Result rc = MHD_queue_response(r->conn, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  r->queued = true;
  int cls = r->status / 100;
  HOOKD_INC(http_requests[cls >= 1 && cls <= 5 ? cls : 0]);
  return rc;
}

/* ---------- bodies held per client address ---------- */

/* The share of --max-buffered-bytes one address may hold: an eighth, and at least one largest
 * body (so that an address can always send one). */
static size_t addr_share(const hookd_server *srv) {
  size_t share = srv->cfg.max_buffered / 8;
  return share > srv->cfg.max_body ? share : srv->cfg.max_body;
}

/* The connection's client address as a key: false when it has none (a Unix socket). IPv6 is
 * counted by its /64, the block one client is usually given. */
static bool addr_key(struct MHD_Connection *conn, unsigned char key[8]) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *sa = ci ? ci->client_addr : NULL;
  memset(key, 0, 8);
  if (sa && sa->sa_family == AF_INET) {
    memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return true;
  }
  if (!sa || sa->sa_family != AF_INET6) return false;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(a)) memcpy(key, a->s6_addr + 12, 4);
  else memcpy(key, a->s6_addr, 8);
  return true;
}

static addr_hold **addr_slot(hookd_server *srv, const unsigned char key[8]) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (int i = 0; i < 8; i++) h = (h ^ key[i]) * 16777619u;
  addr_hold **p = &srv->holds[h % (sizeof srv->holds / sizeof srv->holds[0])];
  while (*p && memcmp((*p)->key, key, 8) != 0) p = &(*p)->next;
  return p;
}

/* Body bytes the request's client address holds now (0: none, or no address). */
static size_t addr_held(hookd_req *r) {
  if (r->hold) return r->hold->bytes;
  unsigned char key[8];
  if (!addr_key(r->conn, key)) return 0;
  addr_hold *h = *addr_slot(r->srv, key);
  return h ? h->bytes : 0;
}

/* Charges n more bytes to the request's address: false (nothing charged) past its share. */
static bool addr_charge(hookd_req *r, size_t n) {
  if (!r->hold) {
    unsigned char key[8];
    if (!addr_key(r->conn, key)) return true;
    addr_hold **p = addr_slot(r->srv, key);
    if (!*p && !(*p = calloc(1, sizeof **p))) return true; /* (out of memory: the global bound
                                                             * still holds) */
    memcpy((*p)->key, key, 8);
    r->hold = *p;
    r->hold->refs++;
  }
  if (n && r->hold->bytes + n > addr_share(r->srv)) return false;
  r->hold->bytes += n;
  return true;
}

static void addr_release(hookd_server *srv, addr_hold *h, size_t n) {
  h->bytes -= n < h->bytes ? n : h->bytes;
  if (--h->refs > 0) return;
  addr_hold **p = addr_slot(srv, h->key);
  *p = h->next;
  free(h);
}

/* The answer to a body its client address has no room for: 503, as for the budget itself (a
 * provider retries), other addresses served meanwhile. */
static void address_busy(hookd_req *r) {
  HOOKD_INC(http_address_busy);
  hookd_req_add_header(r, "Retry-After", "1");
  hookd_req_error(r, 503, "unavailable",
                  "too many request bodies arriving at once from this client address (its share "
                  "of --max-buffered-bytes: %zu bytes): retry",
                  addr_share(r->srv));
}

/* ---------- MHD callbacks ---------- */

static void req_free(hookd_req *r) {
  if (r->buffered) atomic_fetch_sub(&r->srv->buffered, r->buffered);
  if (r->hold) addr_release(r->srv, r->hold, r->buffered);
  if (r->unsent) atomic_fetch_sub(&r->srv->unsent, 1); /* sent, or its connection gone */
  hookd_buf_free(&r->body);
  free(r->path);
  free(r->url_copy);
  free(r->resp);
  for (int i = 0; i < r->n_hdr; i++) {
    free(r->hdr_name[i]);
    free(r->hdr_value[i]);
  }
  for (int i = 0; i < HOOKD_REQ_MAX_PARAMS; i++) free(r->params[i]);
  if (r->app_free) r->app_free(r->app_data);
  if (r->kept_free) r->kept_free(r->kept);
  free(r);
}

/* Headers hookd reads as one value: sent twice, which one counts depends on the parser (MHD
 * takes the first, a proxy may take the last), so such a request is refused. Host last: it is
 * also required (HOST_AT); a provider's request may be verified over the URL rebuilt from it
 * (Twilio's without --public-url), and the first of two would decide what is. */
static const char *const single_headers[] = {"Authorization", "Idempotency-Key", "Hookd-Reason",
                                             "Content-Type", "Content-Encoding", "Host"};
#define N_SINGLE (sizeof single_headers / sizeof single_headers[0])
#define HOST_AT (N_SINGLE - 1)

typedef struct head_scan {
  int headers, content_length, transfer_encoding;
  bool body_length;    /* a Content-Length other than "0" */
  size_t cookie_bytes; /* Cookie values, as libmicrohttpd copies them to split (head_leaves_room) */
  bool chunked; /* the last Transfer-Encoding is exactly "chunked" */
  bool bad_name, bad_value, folded;
  int single[N_SINGLE];
} head_scan;

/* A field value holds visible bytes, spaces and tabs only. (A bare CR libmicrohttpd reads as a
 * space, as RFC 9112 allows.) A raw NUL is not caught here: libmicrohttpd 0.9.75 hands the value
 * over already cut at it, its length too ("Bearer k\0junk" as "Bearer k"; docs/security.md,
 * "Known limit"); the length check guards a version that would not. */
static bool clean_value(const char *v, size_t n) {
  if (!v) return true; /* a header without a value */
  if (strlen(v) != n) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)v[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

/* A header sent with an obsolete line folding ("Content-Length:\r\n 5": RFC 9112 §5.2 lets a
 * server refuse it, and a proxy may unfold it): libmicrohttpd 0.9.75 appends the continuation to
 * the header's *name* ("Content-Length5", value ""), in a copy elsewhere in the connection's
 * memory pool, so hookd's framing checks would not see the Content-Length a proxy unfolds (a
 * request-smuggling vector). Every other header is parsed in place, in the request's own bytes:
 * the name, the NUL written over its colon, the blanks skipped, then the value. A header whose
 * value does not follow its name so was folded. (Both point into the same pool; the walk stops
 * at the value or at the first byte that is not a blank.) */
static bool folded_header(const char *key, size_t key_size, const char *value) {
  if (!value) return false;
  uintptr_t k = (uintptr_t)key, v = (uintptr_t)value;
  if (v <= k + key_size) return true; /* the name was copied after its value */
  if (key[key_size] != '\0') return true;
  for (const char *p = key + key_size + 1; p < value; p++)
    if (*p != ' ' && *p != '\t') return true;
  return false;
}

static enum MHD_Result scan_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                   size_t key_size, const char *value, size_t value_size) {
  head_scan *h = cls;
  h->headers++;
  /* a name not a token ("Content-Length " with a space before the colon, a control byte) is
   * kept by libmicrohttpd 0.9.75 as a name of its own, which hookd's framing checks would not
   * recognise while a proxy that trims it would */
  if (!hookd_http_token(key, key_size)) h->bad_name = true;
  if (!clean_value(value, value_size)) h->bad_value = true;
  if (folded_header(key, key_size, value)) h->folded = true;
  if (!strcasecmp(key, "Content-Length")) {
    h->content_length++;
    if (value && strcmp(value, "0") != 0) h->body_length = true;
    return MHD_YES;
  }
  if (!strcasecmp(key, "Cookie")) h->cookie_bytes += value_size + 1 + 16;
  if (!strcasecmp(key, "Transfer-Encoding")) {
    /* as libmicrohttpd read it, untrimmed: "chunked " is no chunked to it (it reads the body
     * until the connection closes), and a proxy trimming it would frame the body otherwise */
    h->transfer_encoding++;
    h->chunked = value && !strcasecmp(value, "chunked");
    return MHD_YES;
  }
  for (size_t i = 0; i < N_SINGLE; i++)
    if (!strcasecmp(key, single_headers[i])) h->single[i]++;
  /* blanks after a value are no part of it (RFC 9110 §5.5), but libmicrohttpd 0.9.75 keeps them:
   * "Idempotency-Key: abc " was refused, a Hookd-Reason audited with them, Twilio's rebuilt URL
   * broken by a Host's. Cut where the value lies, once, before hookd reads it (MHD's read
   * buffer: each value's bytes its own, read by MHD again as a C string at most — the framing
   * headers above are left as MHD framed the body by them; its stored size goes stale: no
   * size-based lookup of a header is made) */
  if (value) {
    char *v = (char *)value;
    while (value_size && (v[value_size - 1] == ' ' || v[value_size - 1] == '\t'))
      v[--value_size] = '\0';
  }
  return MHD_YES;
}

/* The first header hookd reads as one value that was sent more than once, or NULL. */
static const char *repeated_header(const head_scan *h) {
  for (size_t i = 0; i < N_SINGLE; i++)
    if (h->single[i] > 1) return single_headers[i];
  return NULL;
}

/* Framing that another parser on the way (a proxy) could read differently from libmicrohttpd is
 * a request-smuggling vector: MHD 0.9.75 decodes Transfer-Encoding: chunked and ignores a
 * Content-Length beside it, uses the first of several Content-Length headers, and reads a body
 * with another transfer coding until the connection closes. Such a request is refused before a
 * byte of its body is read, and its connection is closed (what follows cannot be trusted to be
 * the next request). Several Content-Length headers are refused even when they agree: no client
 * needs to send two. Returns the problem, or NULL. */
static const char *framing_problem(const head_scan *h, const char *version) {
  if (h->folded)
    return "a header folded over two lines (obsolete line folding: a line starting with a blank)";
  if (h->bad_name) return "a header name that is not an HTTP token (a space before the colon?)";
  if (h->bad_value) return "a header value holding a control byte (DEL, or one below 0x20 but tab)";
  /* HTTP/1.0 has no chunked coding: such framing is faulty (RFC 9112 §6.1) */
  if (h->transfer_encoding && version && !strcmp(version, "HTTP/1.0"))
    return "Transfer-Encoding in an HTTP/1.0 request";
  if (h->transfer_encoding && h->content_length)
    return "Transfer-Encoding and Content-Length together: the body's length is ambiguous";
  if (h->content_length > 1) return "more than one Content-Length header";
  if (h->transfer_encoding > 1) return "more than one Transfer-Encoding header";
  if (h->transfer_encoding && !h->chunked)
    return "unsupported Transfer-Encoding (only \"chunked\" is accepted)";
  return NULL;
}

/* Answers now and closes the connection after the answer. */
static enum MHD_Result queue_close(hookd_req *r) {
  hookd_req_add_header(r, "Connection", "close");
  return queue(r);
}

/* Answers in the middle of the body and closes the connection, reading no more of it.
 * libmicrohttpd 0.9.75 takes a response only before it reads a body or after the whole body,
 * so hookd writes this one on the socket itself — MHD has written nothing there yet but perhaps
 * a complete "100 Continue", and hookd speaks plain HTTP — then returns MHD_NO, on which MHD
 * closes the connection (shutdown, then close) without reading further. Best effort: a client
 * still sending may see the connection reset before it reads the answer. send_direct writes
 * such an answer (the watchdog's 408 too), on a non-blocking socket. */
static void send_direct(int fd, int status, const char *content_type, char *const *names,
                        char *const *values, int n_hdr, const char *body, size_t len) {
  const char *reason = MHD_get_reason_phrase_for((unsigned)status);
  char head[1024];
  int n = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nConnection: close\r\nContent-Type: %s\r\n",
                   status, reason ? reason : "", content_type);
  bool cache_said = false; /* as queue(): no cache keeps an answer of hookd's */
  for (int i = 0; i < n_hdr && n > 0 && (size_t)n < sizeof head; i++) { /* Retry-After … */
    n += snprintf(head + n, sizeof head - (size_t)n, "%s: %s\r\n", names[i], values[i]);
    cache_said |= !strcasecmp(names[i], "Cache-Control");
  }
  if (n > 0 && (size_t)n < sizeof head)
    n += snprintf(head + n, sizeof head - (size_t)n, "%sContent-Length: %zu\r\n\r\n",
                  cache_said ? "" : "Cache-Control: no-store\r\n", len);
  if (fd >= 0 && n > 0 && (size_t)n < sizeof head) {
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)body, len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    /* a fresh socket's send buffer takes a few hundred bytes at once; a short write is left
     * short (the connection closes either way) */
    (void)sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

static enum MHD_Result answer_mid_body(hookd_req *r) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  send_direct(ci ? ci->connect_fd : -1, r->status, r->content_type, r->hdr_name, r->hdr_value,
              r->n_hdr, r->resp, r->resp_len);
  r->queued = true;
  int cls = r->status / 100;
  HOOKD_INC(http_requests[cls >= 1 && cls <= 5 ? cls : 0]);
  return MHD_NO;
}

/* Decodes %HH in the path and query arguments like libmicrohttpd, except a string holding an
 * encoded NUL ("%00"), which stays as sent: decoded, it would cut the C string short, and
 * "/v1/tenants/t%00x" would act on tenant "t". Left encoded, no route or id matches it. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls;
  (void)c;
  for (const char *p = s; (p = strchr(p, '%')) != NULL; p++)
    if (p[1] == '0' && p[2] == '0') return strlen(s);
  return MHD_http_unescape(s);
}

/* A body announced over --max-body-bytes whose answer is made: closed unread, the client's
 * kernel resets the connection on the bytes still coming, and its HTTP stack often drops the
 * 413 that arrived first (a review: 7 of 20 with curl, 9 of 20 with node's http) — a provider
 * sees a network error and retries, not a final answer. So, unless the client waits to be told
 * (Expect: 100-continue: answered at once, nothing sent), a body up to four times the limit (64
 * MiB at most) is read and thrown away first (bounded in time as any body: --request-timeout-s);
 * past that it is answered unread. true: discarding (the answer queued at the body's end). */
static bool read_then_answer(hookd_req *r, struct MHD_Connection *conn, unsigned long long len) {
  const char *expect = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
  unsigned long long cap = (unsigned long long)r->srv->cfg.max_body * 4;
  if (cap > 64ULL << 20) cap = 64ULL << 20;
  if ((expect && !strcasecmp(expect, "100-continue")) || len > cap) return false;
  r->discarding = true;
  return true;
}

/* Past --request-timeout-s since the request line (the inactivity timer alone lets a client
 * trickle a request for ever): answered 408, true. */
static bool too_slow(hookd_req *r) {
  int limit = r->srv->cfg.request_timeout_s;
  if (limit <= 0 || hookd_req_age_ms(r) <= (int64_t)limit * 1000) return false;
  hookd_req_error(r, 408, "request_timeout", "the request did not arrive whole within %d s",
                  limit);
  HOOKD_ADD(http_request_timeouts, 1);
  return true;
}

/* A connection's own slot: the request on_uri made for it until MHD completes that request.
 * MHD completes only requests it handed to the access handler; one it drops while reading the
 * head (too many query parameters for its memory pool, say) is freed here, at the next request
 * of the connection or when it closes — else every such request leaked ~11 KB. The slot also
 * keeps the connection's head deadline (head_watch). Every field under srv->conns_lock. */
typedef struct conn_slot {
  hookd_req *pending;
  struct conn_slot *prev, *next; /* srv->conns */
  int fd;
  int64_t since_us;  /* the head's clock: the connection's start, or its last request's end */
  bool in_request;   /* its head is complete: the request's own limits hold from here */
  int64_t head_us;   /* when its head was complete */
  bool body_in;      /* its body too (the handler runs or ran): no deadline of the watchdog's */
  bool cut;          /* shut down by the watchdog: a head completing now is not served */
} conn_slot;

static conn_slot *slot_of(struct MHD_Connection *conn) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

/* The head is complete (the access handler's first call of a request): from here the request's
 * own limits hold (--request-timeout-s), not the head deadline. false: the watchdog has cut the
 * connection already — the request is not served (its client was told 408, or saw the close). */
static bool head_arrived(hookd_server *srv, struct MHD_Connection *conn) {
  conn_slot *s = slot_of(conn);
  if (!s) return true;
  pthread_mutex_lock(&srv->conns_lock);
  bool cut = s->cut;
  s->in_request = true;
  s->head_us = hookd_mono_us();
  s->body_in = false;
  pthread_mutex_unlock(&srv->conns_lock);
  return !cut;
}

/* The body is complete (the request goes to its handler): the watchdog's request deadline no
 * longer holds — an answer that takes its time (a commit) is not a client's trickle. */
static void body_arrived(hookd_server *srv, struct MHD_Connection *conn) {
  conn_slot *s = slot_of(conn);
  if (!s) return;
  pthread_mutex_lock(&srv->conns_lock);
  s->body_in = true;
  pthread_mutex_unlock(&srv->conns_lock);
}

static void body_handle(hookd_server *srv, hookd_req *r);

/* A connection's memory (libmicrohttpd's pool, HTTP_POOL_BYTES) holds the request's head, a
 * record for each of its headers, query arguments and cookies, and then the answer's head. A head
 * that fits with too little left for an answer was served and its answer dropped: the connection
 * closed with nothing sent (a review: a request line of 20,100 bytes; 81 headers in a head of
 * 15 KiB, a create among them served unanswered). Such a request is refused before it is served:
 * its 431 is written on the socket, which needs none of the pool. HTTP_ENTRY_BYTES is
 * libmicrohttpd 0.9.75's record with its allocation's alignment (64-bit); HTTP_ANSWER_ROOM holds
 * the largest answer head of hookd's and what libmicrohttpd allocates beside it (~400 bytes
 * measured for a 431). */
#define HTTP_POOL_BYTES(max_head) ((size_t)((max_head) ? (max_head) : 32768) + HOOKD_HTTP_HEAD_ROOM)
#define HTTP_ENTRY_BYTES 64
#define HTTP_ANSWER_ROOM 1024
static void path_too_long(hookd_req *r) {
  hookd_req_error(r, 414, "uri_too_long", "request path longer than %zu bytes",
                  r->srv->cfg.max_url_len);
}

static bool head_leaves_room(const hookd_server *srv, struct MHD_Connection *conn,
                             const head_scan *h, size_t *head, int *entries) {
  const union MHD_ConnectionInfo *hs =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  *entries = MHD_get_connection_values(
      conn, MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND | MHD_COOKIE_KIND, NULL, NULL);
  *head = hs ? hs->header_size : 0;
  if (!hs || *entries < 0) return true;
  size_t pool = HTTP_POOL_BYTES(srv->cfg.max_head_bytes);
  bool body = h->transfer_encoding || h->body_length;
  /* the read buffer: cut back to the head once a head without a body is in; with a body to
   * come, as libmicrohttpd first made it (half the pool) or larger, holding the body's first
   * bytes while the answer at its head is made */
  size_t read_buf = body && *head < pool / 2 ? pool / 2 : *head;
  return read_buf + h->cookie_bytes + (size_t)*entries * HTTP_ENTRY_BYTES + HTTP_ANSWER_ROOM <=
         pool;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  hookd_server *srv = cls;
  hookd_req *r = *con_cls;

  if (!r || !r->conn) {
    if (!head_arrived(srv, conn)) return MHD_NO; /* too late: its connection is shut down */
    if (r && r->refused) return MHD_NO;          /* answered already (too many parameters) */
    if (!r && !(r = calloc(1, sizeof *r))) return MHD_NO;
    if (!r->started_us) r->started_us = hookd_mono_us();
    r->srv = srv;
    r->conn = conn;
    r->method = method;
    hookd_buf_init(&r->body, srv->cfg.max_body);
    *con_cls = r;
    /* MHD passes the path without the query; keep the raw query from the request line. */
    r->path = strdup(url);
    if (!r->path) return MHD_NO;
    head_scan h = {0};
    MHD_get_connection_values_n(conn, MHD_HEADER_KIND, scan_header, &h);
    size_t head_bytes;
    int entries;
    /* a head too large for its path's length alone is refused for its path (414, as a long
     * path's is whatever the head's size: not 414, 431 or libmicrohttpd's page by the size) */
    bool long_path = srv->cfg.max_url_len && strlen(url) > srv->cfg.max_url_len;
    if (!head_leaves_room(srv, conn, &h, &head_bytes, &entries)) {
      if (long_path) path_too_long(r);
      else
        hookd_req_error(r, 431, "headers_too_large",
                        "request head of %zu bytes with %d headers and query arguments leaves "
                        "no room for the answer in a connection's memory (--max-header-bytes)",
                        head_bytes, entries);
      return answer_mid_body(r);
    }
    /* first: an answer to a request whose framing a proxy may read otherwise closes the
     * connection — any other refusal (431, 404, 414) kept it, and the bytes MHD took for the
     * next request could be what the proxy took for this one's body (smuggled) */
    const char *framing = framing_problem(&h, version);
    if (framing) {
      hookd_req_error(r, 400, "invalid_header", "%s", framing);
      return queue_close(r);
    }
    /* an HTTP/1.0 body without a Content-Length runs to the connection's close (RFC 1945 §7.2,
     * RFC 9112 §6.3), which libmicrohttpd 0.9.75 does not read: it served such a POST as an
     * empty body — a credential-checked provider's event stored empty and acknowledged, every
     * later one answered as its duplicate (a review). The connection is closed: the body's
     * bytes are no next request */
    if (version && !strcmp(version, "HTTP/1.0") && !h.content_length &&
        (!strcmp(method, "POST") || !strcmp(method, "PUT") || !strcmp(method, "PATCH"))) {
      hookd_req_error(r, 411, "length_required",
                      "an HTTP/1.0 %s request needs a Content-Length: a body running to the "
                      "connection's close is not read", method);
      return queue_close(r);
    }
    /* the head's bytes: libmicrohttpd's pool holds them and the answer's head
     * (HOOKD_HTTP_HEAD_ROOM more), so the limit is hookd's to keep */
    const union MHD_ConnectionInfo *hs =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    if (srv->cfg.max_head_bytes && hs && hs->header_size > srv->cfg.max_head_bytes) {
      if (long_path) path_too_long(r);
      else
        hookd_req_error(r, 431, "headers_too_large",
                        "request head of %zu bytes exceeds the limit of %zu bytes "
                        "(--max-header-bytes)",
                        hs->header_size, srv->cfg.max_head_bytes);
      return queue_close(r);
    }
    if (srv->cfg.max_headers && h.headers > srv->cfg.max_headers) {
      hookd_req_error(r, 431, "headers_too_large", "more than %d request headers",
                      srv->cfg.max_headers);
      return queue(r);
    }
    /* the leftovers of a body shorter than its Content-Length read as the next request line:
     * a "method" such as {"a": is no HTTP token — a malformed request, not a method this route
     * lacks (it was answered 405 naming it: a review) */
    if (!method || !hookd_http_token(method, strlen(method))) {
      hookd_req_error(r, 400, "invalid_request", "the request method is not an HTTP token");
      return queue_close(r);
    }
    /* decoded, "/v1/…/ep_1%2Fsecret" would reach the route of ".../ep_1/secret" (a proxy's
     * rule on paths would see one segment where hookd saw two): no id holds a '/' */
    if (r->encoded_slash) {
      hookd_req_error(r, 404, "not_found", "no such resource (an encoded '/' in the path)");
      return queue(r);
    }
    if (long_path) {
      path_too_long(r);
      return queue(r);
    }
    const char *twice = repeated_header(&h);
    if (twice) {
      hookd_req_error(r, 400, "invalid_header", "more than one %s header", twice);
      return queue(r);
    }
    if (!h.single[HOST_AT] && version && strcmp(version, "HTTP/1.0") != 0) { /* RFC 9112 §3.2 */
      hookd_req_error(r, 400, "invalid_header", "an HTTP/1.1 request without a Host header");
      return queue(r);
    }
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    char *cl_end = NULL;
    unsigned long long len = cl ? strtoull(cl, &cl_end, 10) : 0;
    bool known = cl && *cl_end == '\0'; /* (libmicrohttpd refuses any other form itself) */
    if (known && len > srv->cfg.max_body) {
      if (srv->cfg.too_large) srv->cfg.too_large(r, srv->cfg.app);
      hookd_req_error(r, 413, "body_too_large",
                      "request body of %llu bytes exceeds the limit of %zu bytes", len,
                      srv->cfg.max_body);
      return read_then_answer(r, conn, len) ? MHD_YES : queue(r);
    }
    if (known) r->announced = len > SIZE_MAX ? SIZE_MAX : (size_t)len;
    /* a request that cannot succeed is answered before its body is read (and then discarded) */
    if (srv->cfg.gate && !srv->cfg.gate(r, srv->cfg.app)) return queue(r);
    /* no GET or HEAD reads a body: the public ones (/healthz, GET /in/{id}) held it all the
     * same, and anonymous bodies could fill --max-buffered-bytes for every provider (a review) */
    bool body_coming = known ? len > 0
                             : MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                           "Transfer-Encoding") != NULL;
    if (body_coming && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) {
      hookd_req_error(r, 400, "invalid_request", "a %s request carries no body", method);
      return queue_close(r);
    }
    /* a body of known length that would not fit beside the bodies held now is refused at its
     * head: a whole answer, before any "100 Continue" (refused in mid-body, the client sending
     * it usually saw the connection reset). Not reserved: a client announcing lengths it never
     * sends would hold the whole budget for nothing — bodies are counted as their bytes come */
    if (known && srv->cfg.max_buffered &&
        atomic_load(&srv->buffered) + len > srv->cfg.max_buffered) {
      hookd_req_add_header(r, "Retry-After", "1");
      hookd_req_error(r, 503, "unavailable",
                      "too many request bodies arriving at once (--max-buffered-bytes): retry");
      return queue(r);
    }
    if (known && srv->cfg.max_buffered && addr_held(r) + len > addr_share(srv)) {
      address_busy(r);
      return queue(r);
    }
    /* a known length bounds the buffer's growth too: doubling, a body just past a power of two
     * held twice its bytes, only its bytes counted against --max-buffered-bytes */
    if (known) r->body.max = (size_t)len;
    return MHD_YES;
  }

  if (r->discarding) { /* its 413 made: the body thrown away as it comes, then answered */
    if (!*upload_data_size) return queue(r);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (r->queued) { /* answered early (413/414/431): discard whatever still arrives */
    *upload_data_size = 0;
    return MHD_YES;
  }

  if (*upload_data_size) {
    size_t n = *upload_data_size;
    /* bodies held across all connections are bounded too: a source's URL is public, and each
     * connection may bring max_body. Counted as the memory held, the buffer's growth (a body
     * past the limit is refused by the append, and charged nothing more) */
    size_t need = r->body.len + n, cap = need <= r->body.max ? hookd_buf_cap_for(&r->body, need)
                                                               : r->body.cap;
    size_t room = cap ? cap - 1 : 0; /* (its bytes: one more holds a NUL) */
    size_t charge = room > r->buffered ? room - r->buffered : 0;
    size_t held = atomic_fetch_add(&srv->buffered, charge) + charge;
    if (srv->cfg.max_buffered && held > srv->cfg.max_buffered) {
      atomic_fetch_sub(&srv->buffered, charge);
      *upload_data_size = 0;
      hookd_req_add_header(r, "Retry-After", "1");
      hookd_req_error(r, 503, "unavailable",
                      "too many request bodies arriving at once (--max-buffered-bytes): retry");
      return answer_mid_body(r);
    }
    if (srv->cfg.max_buffered && !addr_charge(r, charge)) { /* a chunked body, say */
      atomic_fetch_sub(&srv->buffered, charge);
      *upload_data_size = 0;
      address_busy(r);
      return answer_mid_body(r);
    }
    r->buffered += charge;
    int rc = hookd_buf_append(&r->body, upload_data, n);
    *upload_data_size = 0;
    if (rc == HOOKD_BUF_OK && too_slow(r)) return answer_mid_body(r); /* a byte at a time */
    if (rc == HOOKD_BUF_OK) return MHD_YES;
    /* a chunked body (a Content-Length over the limit was refused above) passed the limit, or
     * memory ran out: answer now and read no more of it */
    if (rc == HOOKD_BUF_TOOBIG) {
      if (srv->cfg.too_large) srv->cfg.too_large(r, srv->cfg.app);
      hookd_req_error(r, 413, "body_too_large", "request body exceeds the limit of %zu bytes",
                      srv->cfg.max_body);
    } else
      hookd_req_error(r, 503, "unavailable", "out of memory");
    return answer_mid_body(r);
  }

  if (!r->handled) {
    r->handled = true;
    body_arrived(srv, conn);
    /* a chunked body's size lines, extensions and trailers reach hookd as no data: a request
     * whose end trickled in past the limit is refused here, not served late */
    if (too_slow(r)) return queue_close(r);
    atomic_fetch_add(&srv->in_handler, 1);
    if (atomic_load(&srv->closing)) {
      /* a keep-alive connection's next request during the drain: suspended now, it would
       * outlive the drain (libmicrohttpd aborts a stop with suspended connections) */
      atomic_fetch_sub(&srv->in_handler, 1);
      hookd_req_add_header(r, "Retry-After", "1");
      hookd_req_error(r, 503, "not_ready", "hookd is shutting down: retry");
      return queue_close(r);
    }
    if (r->body.len >= BIG_BODY) { /* (the workers run from the start: hookd_server_start) */
      atomic_store(&r->pins, 2); /* its answer and its handler's return */
      hookd_req_suspend(r);
      atomic_fetch_sub(&srv->in_handler, 1); /* (counted as suspended from here) */
      HOOKD_INC(http_body_worker_requests);
      pthread_mutex_lock(&srv->work_lock);
      bool stopped = srv->work_stop; /* (hookd_server_stop without a drain: handled here) */
      if (!stopped) {
        if (srv->work_tail) srv->work_tail->work_next = r;
        else srv->work_head = r;
        srv->work_tail = r;
        atomic_fetch_add(&srv->work_queued, 1);
        pthread_cond_signal(&srv->work_wake);
      }
      pthread_mutex_unlock(&srv->work_lock);
      if (stopped) body_handle(srv, r);
      return MHD_YES; /* answered after resume */
    }
    atomic_store(&r->pins, 1); /* its answer, should it suspend */
    srv->cfg.handler(r, srv->cfg.app);
    atomic_fetch_sub(&srv->in_handler, 1);
    if (r->async) return MHD_YES; /* answered after resume */
  }
  if (atomic_load(&r->ready) && !r->queued) return queue(r);
  return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
  hookd_server *srv = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    conn_slot *s = calloc(1, sizeof *s); /* NULL: requests are still freed when MHD completes
                                          * them (the connection is left to the idle timer) */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (s) {
      s->fd = ci ? ci->connect_fd : -1;
      s->since_us = hookd_mono_us();
      pthread_mutex_lock(&srv->conns_lock);
      s->next = srv->conns;
      if (s->next) s->next->prev = s;
      srv->conns = s;
      pthread_mutex_unlock(&srv->conns_lock);
    }
    *socket_context = s;
  } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
    conn_slot *s = *socket_context;
    if (s) {
      /* unlisted before MHD closes the descriptor: the watchdog never shuts down a number the
       * process may have given to another file since */
      pthread_mutex_lock(&srv->conns_lock);
      if (s->prev) s->prev->next = s->next;
      else srv->conns = s->next;
      if (s->next) s->next->prev = s->prev;
      pthread_mutex_unlock(&srv->conns_lock);
      if (s->pending) req_free(s->pending);
    }
    free(s);
    *socket_context = NULL;
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  (void)toe;
  hookd_server *srv = cls;
  hookd_req *r = *con_cls;
  conn_slot *s = slot_of(conn);
  if (s) { /* the next head's deadline runs from here (a keep-alive connection) */
    pthread_mutex_lock(&srv->conns_lock);
    if (s->pending == r) s->pending = NULL;
    s->in_request = false;
    s->since_us = hookd_mono_us();
    pthread_mutex_unlock(&srv->conns_lock);
  }
  if (r) req_free(r);
  *con_cls = NULL;
}

/* A query of more parameters than a connection's memory can index: libmicrohttpd 0.9.75 then
 * has no memory left for its own answer and drops the request without a word, the client
 * waiting for the idle timer (a review: ~250 short ones at the default 16 KiB; hookd's own "more
 * than 32" came after MHD's parse, below that only). Counted here, on the raw target, before MHD
 * parses the query: past one parameter per 256 bytes of --max-header-bytes (64 at the default,
 * at least 16; a provider's query holds ~15-30), answered 400 on the socket itself — MHD has
 * written nothing of this request — and the connection's sending side shut down: MHD does not
 * serve the request (on_request) and closes the connection. */
static void refuse_many_params(hookd_server *srv, hookd_req *r, struct MHD_Connection *conn,
                               const char *query) {
  size_t limit = srv->cfg.max_head_bytes / 256, n = 1;
  if (limit < 16) limit = 16;
  for (const char *p = query; *p && *p != '#'; p++) n += *p == '&';
  if (n <= limit) return;
  char body[192];
  int len = snprintf(body, sizeof body,
                     "{\"error\":{\"code\":\"invalid_parameter\",\"message\":\"more than %zu "
                     "query parameters (one per 256 bytes of --max-header-bytes)\"}}",
                     limit);
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (!ci || len <= 0 || (size_t)len >= sizeof body) return;
  r->refused = true;
  send_direct(ci->connect_fd, 400, "application/json", NULL, NULL, 0, body, (size_t)len);
  shutdown(ci->connect_fd, SHUT_WR);
  HOOKD_INC(http_requests[4]);
}

/* Called with the raw request target before MHD splits it: keep the query string verbatim
 * (provider signatures such as Twilio's and VNPay's cover it). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  hookd_server *srv = cls;
  hookd_req *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->started_us = hookd_mono_us();
  const char *q = strchr(uri, '?');
  if (q && (r->url_copy = strdup(q + 1))) r->query = r->url_copy;
  for (const char *p = uri; *p && *p != '?'; p++)
    if (p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f')) r->encoded_slash = true;
  if (q) refuse_many_params(srv, r, conn, q + 1);
  conn_slot *s = slot_of(conn);
  if (s) {
    pthread_mutex_lock(&srv->conns_lock);
    hookd_req *dropped = s->pending; /* the last request, dropped by MHD */
    s->pending = r;
    pthread_mutex_unlock(&srv->conns_lock);
    if (dropped) req_free(dropped);
  }
  return r;
}

/* The head deadline. libmicrohttpd 0.9.75 reads a request's head without calling hookd, under
 * its idle timer alone: a client sending a header byte every few seconds held its connection
 * for ever, and enough of them (--max-connections) kept every other client in the listen queue
 * (a review: a /healthz waited 32 s, as long as the attack). Once a second this thread shuts
 * down (shutdown(2): MHD then reads the end and closes it) every connection whose head has not
 * arrived whole within --header-timeout-s of the connection's start or of its last request's
 * end, telling the client 408 when its request line had come (a connection idle between
 * requests is closed without a word, as the idle timer does). Counted always, logged at most
 * once a second.
 * It bounds a request whose head is complete too: one whose body has not arrived whole
 * REQUEST_GRACE_US past --request-timeout-s is shut down without an answer (libmicrohttpd may
 * be sending an early one). too_slow answers 408 when the bytes reach hookd; a chunk
 * extension or a trailer reaches it as no data, and trickled a byte at a time held its slot
 * until libmicrohttpd's buffer filled, hours (a review). */
#define REQUEST_GRACE_US 5000000
static void *head_watch(void *arg) {
  hookd_server *srv = arg;
  int64_t limit_us = (int64_t)srv->cfg.idle_timeout_s * 1000000;
  int64_t req_limit_us = (int64_t)srv->cfg.request_timeout_s * 1000000;
  if (req_limit_us > 0) req_limit_us += REQUEST_GRACE_US;
  char body[192];
  int blen = snprintf(body, sizeof body,
                      "{\"error\":{\"code\":\"request_timeout\",\"message\":\"the request "
                      "head did not arrive whole within %d s (--header-timeout-s)\"}}",
                      srv->cfg.idle_timeout_s);
  pthread_mutex_lock(&srv->conns_lock);
  while (!srv->watchdog_stop) {
    struct timespec tick = hookd_mono_deadline(1000);
    pthread_cond_timedwait(&srv->conns_wake, &srv->conns_lock, &tick);
    if (srv->watchdog_stop) break;
    int64_t now = hookd_mono_us();
    int cut = 0, late = 0;
    for (conn_slot *s = srv->conns; s; s = s->next) {
      if (s->cut || s->fd < 0) continue;
      if (s->in_request) { /* its body still arriving past the request's deadline */
        if (s->body_in || !req_limit_us || now - s->head_us <= req_limit_us) continue;
        s->cut = true;
        shutdown(s->fd, SHUT_RDWR);
        late++;
        continue;
      }
      if (now - s->since_us <= limit_us) continue;
      s->cut = true;
      if (s->pending && blen > 0 && (size_t)blen < sizeof body)
        send_direct(s->fd, 408, "application/json", NULL, NULL, 0, body, (size_t)blen);
      shutdown(s->fd, SHUT_RDWR);
      cut++;
    }
    if (!cut && !late) continue;
    if (cut) HOOKD_ADD(http_head_timeouts, (uint64_t)cut);
    if (late) HOOKD_ADD(http_request_timeouts, (uint64_t)late);
    pthread_mutex_unlock(&srv->conns_lock);
    if (cut)
      HLOG(HOOKD_LOG_WARN, "http.head_timeout", KV_I("connections", cut),
           KV_I("header_timeout_s", srv->cfg.idle_timeout_s));
    if (late)
      HLOG(HOOKD_LOG_WARN, "http.request_timeout", KV_I("connections", late),
           KV_I("request_timeout_s", srv->cfg.request_timeout_s));
    pthread_mutex_lock(&srv->conns_lock);
  }
  pthread_mutex_unlock(&srv->conns_lock);
  return NULL;
}

/* Runs a big-bodied request's handler; r is not read after (it may be freed). */
static void body_handle(hookd_server *srv, hookd_req *r) {
  srv->cfg.handler(r, srv->cfg.app);
  if (atomic_fetch_sub(&r->pins, 1) == 1) req_resume(r); /* answered already: ours to resume */
}

/* A body worker: runs the handlers of big-bodied requests, in their order of arrival, until
 * told to stop with none left (hookd_server_stop, after the drain). */
static void *body_work(void *arg) {
  hookd_server *srv = arg;
  pthread_mutex_lock(&srv->work_lock);
  for (;;) {
    while (!srv->work_head && !srv->work_stop) pthread_cond_wait(&srv->work_wake, &srv->work_lock);
    hookd_req *r = srv->work_head;
    if (!r) break;
    srv->work_head = r->work_next;
    if (!srv->work_head) srv->work_tail = NULL;
    atomic_fetch_sub(&srv->work_queued, 1);
    pthread_mutex_unlock(&srv->work_lock);
    body_handle(srv, r);
    pthread_mutex_lock(&srv->work_lock);
  }
  pthread_mutex_unlock(&srv->work_lock);
  return NULL;
}

static void stop_workers(hookd_server *s) {
  if (s->workers_joined) return;
  s->workers_joined = true;
  pthread_mutex_lock(&s->work_lock);
  s->work_stop = true;
  pthread_cond_broadcast(&s->work_wake);
  pthread_mutex_unlock(&s->work_lock);
  for (int i = 0; i < s->workers; i++) pthread_join(s->worker[i], NULL);
}

__attribute__((format(printf, 2, 0))) /* fmt is libmicrohttpd's own */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  size_t n = strlen(msg);
  while (n && msg[n - 1] == '\n') msg[--n] = '\0';
  /* the listener out of descriptors (EMFILE, ENFILE: libmicrohttpd stops accepting a while) is
   * the operator's to know — every client waits meanwhile, and it was said at debug alone (a
   * review: /healthz waited 18 s, nothing logged); once every 10 s at most */
  if (strstr(msg, "resource limit")) {
    static _Atomic int64_t last_ms;
    int64_t now = hookd_mono_ms(), was = atomic_load(&last_ms);
    if ((!was || now - was >= 10000) && atomic_compare_exchange_strong(&last_ms, &was, now))
      HLOG(HOOKD_LOG_WARN, "http.accept_failed", KV_S("detail", msg),
           KV_S("hint", "out of file descriptors? raise the limit (systemd LimitNOFILE=) or "
                        "lower --max-connections"));
    return;
  }
  HLOG(HOOKD_LOG_DEBUG, "http.server", KV_S("detail", msg));
}

static void server_free(hookd_server *s) {
  stop_workers(s);
  pthread_cond_destroy(&s->work_wake);
  pthread_mutex_destroy(&s->work_lock);
  pthread_cond_destroy(&s->conns_wake);
  pthread_mutex_destroy(&s->conns_lock);
  free(s);
}

hookd_server *hookd_server_start(const hookd_server_config *cfg, char *err, size_t errlen) {
  hookd_server *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  s->cfg = *cfg;
  s->quiesced_fd = -1;
  if (hookd_mono_cond_init(&s->conns_wake) != 0) {
    snprintf(err, errlen, "cannot start the HTTP server (a condition variable)");
    free(s);
    return NULL;
  }
  if (pthread_cond_init(&s->work_wake, NULL) != 0) {
    snprintf(err, errlen, "cannot start the HTTP server (a condition variable)");
    pthread_cond_destroy(&s->conns_wake);
    free(s);
    return NULL;
  }
  pthread_mutex_init(&s->conns_lock, NULL);
  pthread_mutex_init(&s->work_lock, NULL);
  /* before libmicrohttpd's thread, which reads `workers` (none is started after) */
  while (s->workers < BODY_WORKERS &&
         pthread_create(&s->worker[s->workers], NULL, body_work, s) == 0)
    pthread_setname_np(s->worker[s->workers++], "hookd-body");
  if (s->workers < BODY_WORKERS) {
    snprintf(err, errlen, "cannot start the HTTP server's body workers");
    server_free(s);
    return NULL;
  }
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ERROR_LOG;
  if (inet_pton(AF_INET, cfg->host, &sin->sin_addr) == 1) {
    sin->sin_family = AF_INET;
    sin->sin_port = htons((uint16_t)cfg->port);
  } else if (inet_pton(AF_INET6, cfg->host, &sin6->sin6_addr) == 1) {
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons((uint16_t)cfg->port);
    /* "::" takes IPv4 too, as a Linux socket does by default (libmicrohttpd sets IPV6_V6ONLY
     * unless told otherwise: `--listen [::]:8080` turned every IPv4 provider away) */
    flags |= IN6_IS_ADDR_UNSPECIFIED(&sin6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
  } else {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(cfg->host, NULL, &hints, &res) != 0 || !res) {
      snprintf(err, errlen, "cannot resolve listen host \"%s\"", cfg->host);
      server_free(s);
      return NULL;
    }
    memcpy(&ss, res->ai_addr, res->ai_addrlen);
    if (ss.ss_family == AF_INET6) {
      sin6->sin6_port = htons((uint16_t)cfg->port);
      flags |= MHD_USE_IPv6;
    } else {
      sin->sin_port = htons((uint16_t)cfg->port);
    }
    freeaddrinfo(res);
  }
  s->mhd = MHD_start_daemon(
      flags, (uint16_t)cfg->port, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER,
      on_mhd_log, s, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&ss, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
      MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
      MHD_OPTION_URI_LOG_CALLBACK, on_uri, s, MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
      /* libmicrohttpd's idle timer is the watchdog's backstop, two seconds behind it: at the
       * same length it closed a client silent after its request line before the watchdog's 408
       * (a review: a reset, where the docs promise 408) */
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout_s + 2, MHD_OPTION_CONNECTION_LIMIT,
      (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)cfg->max_connections_per_ip, /* 0: no limit, as for libmicrohttpd */
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, HTTP_POOL_BYTES(cfg->max_head_bytes),
      MHD_OPTION_END); /* SO_REUSEADDR only: never a port shared with another process */
  if (!s->mhd) {
    snprintf(err, errlen, "cannot listen on %s:%d (address in use or not permitted)", cfg->host,
             cfg->port);
    server_free(s);
    return NULL;
  }
  s->watchdog_running = pthread_create(&s->watchdog, NULL, head_watch, s) == 0;
  if (!s->watchdog_running) {
    snprintf(err, errlen, "cannot start the HTTP server's watchdog thread");
    stop_workers(s);
    MHD_stop_daemon(s->mhd);
    server_free(s);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : cfg->port;
  return s;
}

int hookd_server_port(const hookd_server *s) { return s->port; }

int hookd_server_waiting(const hookd_server *s) { return atomic_load(&s->suspended); }

int hookd_server_body_queued(const hookd_server *s) { return atomic_load(&s->work_queued); }

int hookd_server_unsent(const hookd_server *s) { return atomic_load(&s->unsent); }

int hookd_server_suspended(const hookd_server *s) {
  int running = atomic_load(&s->in_handler); /* first: a handler ending between the two loads
                                              * has already counted its suspension */
  return running + atomic_load(&s->suspended);
}

/* The listening socket is shut down at once (new connections are refused, not left waiting in
 * the backlog through the drain) but closed only after MHD_stop_daemon, as libmicrohttpd's
 * documentation of MHD_quiesce_daemon asks: with its own threads, one may still be using the
 * descriptor (ThreadSanitizer saw a close race the polling thread's epoll_ctl on it), and a
 * closed number could be reused meanwhile. */
void hookd_server_quiesce(hookd_server *s) {
  if (atomic_exchange(&s->closing, true)) return; /* once (a stop, then the common exit) */
  MHD_socket fd = MHD_quiesce_daemon(s->mhd);
  if (fd == MHD_INVALID_SOCKET) return;
  shutdown(fd, SHUT_RDWR);
  s->quiesced_fd = fd;
}

void hookd_server_stop(hookd_server *s) {
  if (!s) return;
  if (s->watchdog_running) {
    pthread_mutex_lock(&s->conns_lock);
    s->watchdog_stop = true;
    pthread_cond_signal(&s->conns_wake);
    pthread_mutex_unlock(&s->conns_lock);
    pthread_join(s->watchdog, NULL);
  }
  stop_workers(s); /* (after the drain none is queued; any that is runs and is answered) */
  MHD_stop_daemon(s->mhd);
  if (s->quiesced_fd >= 0) close(s->quiesced_fd);
  server_free(s);
}

/* egress.h — outbound HTTP on one libcurl multi handle, driven by its owner's thread.
 *
 * The owner (the dispatcher) starts requests and calls hookd_egress_poll(), which waits for
 * network activity (or a wakeup from another thread) and hands back finished requests. Nothing
 * blocks and nothing sleeps: every request has a connect timeout and a total timeout, redirects
 * are never followed, only http/https are spoken, the response body is read up to a bound, and
 * connections are kept alive and reused through the multi handle's cache.
 *
 * The address about to be connected to is passed to the configured policy callback first
 * (CURLOPT_OPENSOCKETFUNCTION): a refused address never gets a socket, so DNS rebinding cannot
 * slip past a check done at registration.
 *
 * A kept-alive HTTP/1 connection with bytes waiting on it (a peer that wrote a second,
 * unsolicited response, or a TLS alert) is not reused: they would be read as the next request's
 * answer (HTTP/2 frames its answers: not checked).
 * libcurl 7.88 reuses such a connection (later versions refuse it), so before a request is
 * sent on a reused connection its socket is peeked; bytes there abort the request before it
 * is sent and it starts again on a new connection.
 *
 * No connection carries two requests at once: multiplexing is off, HTTP/2 included. libcurl
 * 7.88 takes an answer whose status line says "HTTP/2", even on a cleartext HTTP/1.1
 * connection, for a sign that every connection to that host and port multiplexes, and sent the
 * next request on a connection still waiting for another's answer: each got the other's (across
 * tenants sharing a receiver). Such an answer over http:// is also refused (protocol_error) and
 * its connection closed. */
#ifndef HOOKD_EGRESS_EGRESS_H
#define HOOKD_EGRESS_EGRESS_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/buf.h"
#include "core/classify.h"

/* Returns NULL to allow the address, or the name of the rule that forbids it. */
typedef const char *(*hookd_egress_addr_check)(void *ctx, const struct sockaddr *sa,
                                               socklen_t len);

typedef struct hookd_egress_config {
  long connect_timeout_ms;       /* default 5000 */
  long conn_max_age_s;           /* a connection is not reused once this old; default 300 */
  size_t max_response_bytes;     /* read at most this much of a response; default 64 KiB */
  size_t excerpt_bytes;          /* keep this much of it; default 4096 */
  const char *user_agent;        /* "hookd/<version>" */
  long max_connects;             /* connection cache size; default 1024 */
  hookd_egress_addr_check addr_check; /* NULL = allow every address */
  void *addr_check_ctx;
  /* The URL under the current policy (scheme, port: an endpoint registered under a laxer one
   * keeps its URL), asked before every new connection: 0 allows it, else the forbidding rule's
   * name is written to rule. NULL = every URL. Its ctx is addr_check_ctx. */
  int (*url_check)(void *ctx, const char *url, char *rule, size_t rule_len);
  const char *ca_file;           /* PEM bundle of the CAs trusted for destinations, instead of
                                    the system's; NULL = the system's */
  const char *proxy;             /* egress proxy URL, NULL = direct (environment proxies are
                                    ignored either way) */
  /* CURLOPT_RESOLVE entries (development and tests), asked for at every request; the list must
   * stay valid while requests that used it are in flight. NULL = none. */
  struct curl_slist *(*resolve_list)(void *ctx);
  void *resolve_ctx;
} hookd_egress_config;

typedef struct hookd_egress_req {
  /* In: set by the caller before hookd_egress_start; borrowed until completion. */
  const char *url;
  struct curl_slist *headers;    /* request headers */
  const char *body;
  size_t body_len;
  long timeout_ms;               /* total */
  void *user;

  /* Out: filled when the request completes. */
  hookd_net net;
  int status;                    /* HTTP status, 0 if none */
  char retry_after[64];          /* Retry-After header value, "" if none */
  char result_ref[256];          /* Hookd-Result-Ref (else Location) header value, "" if none */
  hookd_buf response;            /* excerpt of the body (excerpt_bytes) */
  size_t response_total;         /* bytes of body received */
  size_t header_total;           /* bytes of header lines received, 1xx answers' too */
  int64_t started_ms;            /* wall clock at start */
  int64_t latency_us;            /* start to end (monotonic, µs) */
  bool request_sent;             /* the connection was made and the request may have reached
                                    the peer (an ambiguous outcome if no response follows; never
                                    sent twice: libcurl's own resend on a new connection, after a
                                    reused one closed without an answer, is refused) */
  bool abandoned;                /* ended by hookd_egress_abort_all (shutdown), not the peer */
  int64_t stalled_ms;            /* ended at the first read of the sockets after hookd's own
                                    thread did not read them for this long (a stall: SIGSTOP, a
                                    paused VM, swapping, a long turn of the owner's loop): its
                                    latency holds the stall, and a timeout then may be of an
                                    answer that waited unread — not the peer's doing (0: none) */
  bool fd_exhausted;             /* a socket could not be opened for want of file descriptors
                                    (EMFILE, ENFILE): hookd's own failure, not the peer's */
  bool lookup_abandoned;         /* ended (timed out or stopped) before its name was resolved:
                                    libcurl's resolver thread goes on, detached, until the
                                    lookup ends (docs/isolation.md) */
  const char *local_failure;     /* else, hookd's side failed before sending — its HTTP proxy
                                    unreachable or asking for credentials, its CA file —: why
                                    (NULL) */
  char blocked_rule[48];         /* rule that refused an address (net == BLOCKED when every
                                    address tried was refused) */
  char error[CURL_ERROR_SIZE];   /* transport error text, "" on HTTP responses */
  char primary_ip[64];

  /* Internal. */
  struct hookd_egress_req *live_prev, *live_next; /* requests in flight */
  bool stale_conn;               /* the reused connection had bytes waiting: start again */
  bool fresh;                    /* started again on a new connection */
  bool resend_refused;           /* libcurl's own second send was refused (on_prereq) */
  bool bad_version;              /* a cleartext answer's status line claimed HTTP/2 or 3 */
  bool proxy_auth_asked;         /* an answer (the proxy's to CONNECT) had Proxy-Authenticate */
  bool body_cut;                 /* the body outlasted BODY_GRACE_MS after the head: cut */
  int64_t head_done_us;          /* monotonic µs the final answer's head ended (0: not yet) */
  int sockets_opened;            /* to addresses the policy allowed */
  CURL *easy;
  struct hookd_egress *eg;
  int64_t t0_us;
} hookd_egress_req;

typedef struct hookd_egress hookd_egress;

hookd_egress *hookd_egress_new(const hookd_egress_config *cfg);
void hookd_egress_free(hookd_egress *eg); /* aborts requests still in flight */

/* Starts req. Returns 0, or -1 on allocation failure: nothing will complete, and req's result
 * fields may have been reset (its request fields are as they were: it may be started again). */
int hookd_egress_start(hookd_egress *eg, hookd_egress_req *req);

/* Waits up to timeout_ms for activity, then calls on_done for every finished request. The
 * request's response buffer belongs to the caller afterwards (hookd_egress_req_cleanup).
 * Returns the length in ms of a stall this call found (the sockets read more than
 * HOOKD_EGRESS_STALL_MS later than the waits asked for allow, requests in flight), else 0;
 * the requests the read after it ended have req->stalled_ms set. */
#define HOOKD_EGRESS_STALL_MS 1000
int64_t hookd_egress_poll(hookd_egress *eg, int timeout_ms,
                          void (*on_done)(hookd_egress_req *req, void *arg), void *arg);

/* Ends every request in flight now, each as a timeout whose error is `why`, through on_done
 * (a shutdown's grace period is over). The owner's thread only. */
void hookd_egress_abort_all(hookd_egress *eg, const char *why,
                            void (*on_done)(hookd_egress_req *req, void *arg), void *arg);

/* Ends one request in flight now, as abort_all does (its owner decided it must not go: its
 * payload was deleted). The owner's thread only. */
void hookd_egress_abort(hookd_egress *eg, hookd_egress_req *req, const char *why,
                        void (*on_done)(hookd_egress_req *req, void *arg), void *arg);

/* The requests in flight, linked by live_next (the owner's thread; NULL if none). */
hookd_egress_req *hookd_egress_live(hookd_egress *eg);

/* How long ago (ms) the sockets were last read: a turn of the owner's loop past
 * HOOKD_EGRESS_STALL_MS is a stall of its own, not yet told by hookd_egress_poll. */
int64_t hookd_egress_unread_ms(const hookd_egress *eg);

/* Makes a poll in progress return early. Safe from any thread. */
void hookd_egress_wakeup(hookd_egress *eg);

/* Frees what a completed request still holds (its response buffer). */
void hookd_egress_req_cleanup(hookd_egress_req *req);

#endif

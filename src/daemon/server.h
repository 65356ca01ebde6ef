/* server.h — the HTTP front door on libmicrohttpd (one epoll thread; a body of 16 KiB or more
 * is handled on one of two body workers instead).
 *
 * The server reads a request (head limits; ambiguous framing — Transfer-Encoding with
 * Content-Length, several Content-Length or Transfer-Encoding headers, a coding other than
 * chunked — 400 and the connection closed; a body bounded by max_body: 413 beyond, answered
 * without reading the rest, a chunked body as soon as it passes the limit), then calls the
 * handler once with the complete request (on a body worker for a big body: a handler must be
 * safe to run on several threads at once). The handler
 * answers at once (hookd_req_reply*), or calls hookd_req_suspend() and answers later from any
 * thread — typically the store writer, after the commit. A suspended request costs no thread. */
#ifndef HOOKD_DAEMON_SERVER_H
#define HOOKD_DAEMON_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct hookd_buf;

typedef struct hookd_req hookd_req;
typedef struct hookd_server hookd_server;

typedef void (*hookd_handler_fn)(hookd_req *r, void *app);

typedef struct hookd_server_config {
  const char *host;          /* IP literal or name to bind */
  int port;                  /* 0 = any free port (see hookd_server_port) */
  int idle_timeout_s;        /* slow or idle clients are disconnected after this */
  int request_timeout_s;     /* a request still arriving after this gets 408 (0: none) */
  int max_connections;
  int max_connections_per_ip; /* 0 = no limit */
  size_t max_body;           /* 413 beyond */
  size_t max_head_bytes;     /* request line + headers; 431 beyond */
  int max_headers;           /* header count; 431 beyond */
  size_t max_url_len;        /* 414 beyond */
  size_t max_buffered;       /* request-body bytes held across all connections: a request
                              * whose body would pass it is answered 503 (0: no limit) */
  /* Called with a request's head, before a byte of its body is read (NULL: none): true to read
   * the body and call the handler, false once it has answered (hookd_req_error …). A request
   * that cannot succeed — no route, no valid API key, no such source — never has its body
   * held: a client without a key cannot make the server hold max_body per connection. */
  bool (*gate)(hookd_req *r, void *app);
  /* Told of a request the server itself answers 413, its body over max_body by its
   * Content-Length or as it arrives (NULL: none): a provider's event refused so is counted. */
  void (*too_large)(hookd_req *r, void *app);
  hookd_handler_fn handler;
  void *app;
} hookd_server_config;

hookd_server *hookd_server_start(const hookd_server_config *cfg, char *err, size_t errlen);
int hookd_server_port(const hookd_server *s);
/* Stops accepting connections (requests in progress continue); a request that reaches its
 * handler from then on (the next one on a keep-alive connection) is answered 503 and its
 * connection closed. */
void hookd_server_quiesce(hookd_server *s);
/* Request-body bytes held right now, all connections together. */
size_t hookd_server_buffered(hookd_server *s);
/* Requests not yet answered: suspended, or in their handler right now. */
int hookd_server_suspended(const hookd_server *s);
/* Requests suspended while their store op runs (a gauge: /metrics). */
int hookd_server_waiting(const hookd_server *s);
/* Requests with a big body waiting for a body worker (a gauge: /metrics). */
int hookd_server_body_queued(const hookd_server *s);
/* Answers given that libmicrohttpd has not finished sending (stopping it closes connections). */
int hookd_server_unsent(const hookd_server *s);
void hookd_server_stop(hookd_server *s);

/* ---- the request (valid until answered) ---- */
const char *hookd_req_method(const hookd_req *r);
const char *hookd_req_path(const hookd_req *r);      /* path without the query */
const char *hookd_req_header(const hookd_req *r, const char *name); /* case-insensitive */
const char *hookd_req_query(const hookd_req *r, const char *key);
const char *hookd_req_body(const hookd_req *r, size_t *len);
/* The body's length its head announced (Content-Length, checked by the server; 0 without one:
 * none, or a chunked body), known at the gate, before the body is read. */
size_t hookd_req_announced(const hookd_req *r);
/* Moves the body into *out, which the caller frees (the request's body is empty after). Its
 * bytes stay counted against max_buffered until the request is freed, after its answer: a
 * handler that keeps the body until it answers holds it once and counts it once. */
void hookd_req_body_take(hookd_req *r, struct hookd_buf *out);
/* Raw query string (without '?'), "" if none. */
const char *hookd_req_query_string(const hookd_req *r);
/* Iterates request headers: returns the number of headers, filling up to max pairs. */
size_t hookd_req_headers(const hookd_req *r, const char **names, const char **values, size_t max);
/* The query's parameter names (borrowed), up to max; returns how many there are. */
size_t hookd_req_query_names(const hookd_req *r, const char **names, size_t max);
/* How long ago the request line arrived, in ms (monotonic clock). */
int64_t hookd_req_age_ms(const hookd_req *r);
int64_t hookd_req_age_us(const hookd_req *r); /* the same, to the µs */
/* A connection's memory beyond the request head it may hold (max_head_bytes): the answer's head,
 * which libmicrohttpd builds in the same pool — with none left it closes the connection without
 * a word, after the handler has served the request. (The pool holds the headers' records and a
 * body's first bytes too: a head leaving too little is refused before it is served, server.c
 * head_leaves_room.) */
#define HOOKD_HTTP_HEAD_ROOM 4096
/* Router-captured path parameters. */
#define HOOKD_REQ_MAX_PARAMS 4
const char *hookd_req_param(const hookd_req *r, int i);
int hookd_req_set_param(hookd_req *r, int i, const char *v, size_t len); /* -1: no memory */
/* Per-request data of the application (e.g. the authenticated principal), freed with the
 * request by free_fn. */
/* The route the gate chose for the request, for the handler (the application's own). */
void hookd_req_set_route(hookd_req *r, const void *route);
const void *hookd_req_route(const hookd_req *r);
void hookd_req_set_app(hookd_req *r, void *data, void (*free_fn)(void *));
void *hookd_req_get_app(const hookd_req *r);
/* Data freed with the request by free_fn on the HTTP thread, once the request is done (after
 * its answer): what a store op reads until it answers, and the store's thread should not spend
 * its time freeing (a publish's parsed payload). One per request: a second frees the first. */
void hookd_req_keep(hookd_req *r, void *data, void (*free_fn)(void *));

/* ---- answering (exactly once per request; from any thread once suspended) ---- */
void hookd_req_suspend(hookd_req *r);
/* Adds a response header (before reply). name and value are copied. */
void hookd_req_add_header(hookd_req *r, const char *name, const char *value);
/* body is taken over (freed by the server). */
void hookd_req_reply(hookd_req *r, int status, const char *content_type, char *body, size_t len);
/* v is taken over (decref'd). v NULL, or out of memory for its text: a write's 2xx stays one
 * (what was done is done) with the body {}; a read's, and any other status, becomes 500. */
void hookd_req_reply_json(hookd_req *r, int status, json_t *v);
/* {"error": {"code": code, "message": message}} */
void hookd_req_error(hookd_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with the field named in "param" as given (a path into the body, at most 256 bytes;
 * else none), where hookd_req_error reads it from the message's start. */
void hookd_req_field_error(hookd_req *r, int status, const char *code, const char *param,
                           const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif

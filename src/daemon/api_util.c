/* api_util.c — the async store-op helper, error mapping, body parsing and JSON renderers
 * shared by the API handlers. */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/bucket.h"
#include "core/clock.h"
#include "core/cursor.h"
#include "core/custom_headers.h"
#include "core/ids.h"
#include "core/jsonio.h"
#include "core/num.h"
#include "core/shown_text.h"
#include "core/strmap.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/destination.h"
#include "daemon/dispatcher.h"
#include "daemon/metrics.h"

static int op_run(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  hookd_api_op *op = arg;
  /* the connection's last error belongs to an earlier op, perhaps another tenant's */
  be->clear_error(c);
  op->err[0] = '\0'; /* and a first run's, when its batch is redone */
  int rc = op->run(c, be, op);
  /* a message the handler wrote itself names the problem better than the store's */
  if (rc < 0 && !op->err[0]) snprintf(op->err, sizeof op->err, "%s", be->errmsg(c));
  return rc;
}

/* The reads of each API key waiting for the store or running (docs/api.md 429): key id → count
 * (as a pointer), taken on the HTTP thread, given back wherever the op ends. */
static pthread_mutex_t reads_mu = PTHREAD_MUTEX_INITIALIZER;
static hookd_strmap reads_by_key;

/* A read of op's key may go to the store: false when --max-reads-per-key are out already. Only
 * a GET's (or HEAD's) counts: ops of no request (the daemon's own), of public routes, and of
 * writes that read first (a replay job's snapshot, a republish's event: --max-store-queue's)
 * are not counted. */
static bool read_slot_take(hookd_api_op *op) {
  const char *m = op->req ? hookd_req_method(op->req) : NULL;
  if (!m || !op->actor[0] || (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0)) return true;
  pthread_mutex_lock(&reads_mu);
  intptr_t n = (intptr_t)hookd_strmap_get(&reads_by_key, op->actor);
  bool ok = n < op->app->cfg->max_reads_per_key &&
            hookd_strmap_put(&reads_by_key, op->actor, (void *)(n + 1)) == 0;
  pthread_mutex_unlock(&reads_mu);
  op->read_counted = ok;
  return ok;
}

static void read_slot_give(hookd_api_op *op) {
  if (!op->read_counted) return;
  op->read_counted = false;
  pthread_mutex_lock(&reads_mu);
  intptr_t n = (intptr_t)hookd_strmap_get(&reads_by_key, op->actor);
  if (n > 1) hookd_strmap_put(&reads_by_key, op->actor, (void *)(n - 1)); /* (no allocation) */
  else hookd_strmap_del(&reads_by_key, op->actor);
  pthread_mutex_unlock(&reads_mu);
}

static void op_free(hookd_api_op *op) {
  read_slot_give(op);
  if (op->cleanup) op->cleanup(op);
  if (op->keys) hookd_api_keys_free(op->keys, op->n_keys);
  free(op);
}

/* On the dispatcher thread, once the changes posted before are applied. */
static void op_applied(void *arg) {
  hookd_api_op *op = arg;
  json_t *v = op->applied_body;
  op->applied_body = NULL;
  hookd_req_reply_json(op->req, op->applied_status, v);
  op_free(op);
}

void hookd_api_reply_json_applied(hookd_api_op *op, int status, json_t *v) {
  op->applied_status = status;
  op->applied_body = v ? v : json_object(); /* (hookd_req_reply_json answers a NULL as 500) */
  if (!op->applied_body) hookd_req_reply_json(op->req, status, NULL);
}

static void op_done(void *arg, int rc) {
  hookd_api_op *op = arg;
  /* the key's read slot is free before its answer leaves: a client sending its reads one after
   * the other must never find its own last one still counted */
  read_slot_give(op);
  op->reply(op, rc);
  if (op->applied_body) { /* the last touch of op here: the dispatcher may free it at once */
    hookd_dispatcher_sync(op->app->disp, op_applied, op);
    return;
  }
  if (op->chain) {
    hookd_store *s = op->app->store;
    int where = op->chain - 1;
    hookd_storeq *q = where == HOOKD_API_WRITER ? s->writer
                      : where == HOOKD_API_SCAN ? s->scan
                                                : s->reader;
    op->chain = 0;
    hookd_storeq_submit(q, &op->sop);
    return;
  }
  op_free(op);
}

void hookd_api_chain(hookd_api_op *op,
                     int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                     void (*reply)(hookd_api_op *, int), int where) {
  op->run = run;
  op->reply = reply;
  op->chain = 1 + where;
}

bool hookd_api_dest_retry(hookd_req *r, const struct hookd_dest_check *c, const char *field) {
  if (c->rc == HOOKD_DEST_BUSY) {
    hookd_req_add_header(r, "Retry-After", "1");
    hookd_req_error(r, 503, "unavailable",
                    "too many destination checks are waiting for DNS; retry after a second");
    return true;
  }
  if (c->rc != HOOKD_DEST_DNS_AGAIN) return false;
  hookd_req_add_header(r, "Retry-After", "5"); /* (a name server's trouble: seconds, not ms) */
  hookd_req_error(r, 503, "unavailable", "%s: %s; retry", field, c->err.message);
  return true;
}

bool hookd_api_reason_valid(const char *s) {
  bool visible;
  return hookd_shown_text_ok(s, false, &visible) && visible && strlen(s) <= 255;
}

bool hookd_api_reason_only_body(hookd_req *r, hookd_app *app, char out[256]) {
  static const char *const names[] = {"reason", NULL};
  out[0] = '\0';
  size_t body_len;
  hookd_req_body(r, &body_len);
  json_t *body = body_len ? hookd_api_body_object(r, app) : NULL;
  if (body_len && !body) return false;
  const char *reason = NULL;
  bool ok = !body || (hookd_api_known_members(r, body, NULL, names) &&
                      hookd_api_body_reason(r, body, &reason));
  if (ok && reason) snprintf(out, 256, "%s", reason); /* (255 bytes at most: it fits) */
  json_decref(body);
  return ok;
}

bool hookd_api_body_reason(hookd_req *r, const json_t *body, const char **reason) {
  *reason = NULL;
  if (body && (hookd_json_get_str(body, "reason", reason) < 0 ||
               (*reason && !hookd_api_reason_valid(*reason)))) {
    hookd_req_error(r, 422, "invalid_field",
                    "reason must be text of 1 to 255 bytes, not blank, without control "
                    "characters");
    return false;
  }
  return true;
}

bool hookd_api_idempotency_key(hookd_req *r, const char **key) {
  const char *s = hookd_req_header(r, "Idempotency-Key");
  size_t n = s ? strlen(s) : 0;
  bool ok = !s || (n >= 1 && n <= 255);
  for (size_t i = 0; ok && i < n; i++)
    ok = (unsigned char)s[i] >= 0x21 && (unsigned char)s[i] <= 0x7e; /* visible ASCII */
  if (!ok) {
    hookd_req_error(r, 400, "invalid_header",
                    "Idempotency-Key must be 1-255 visible ASCII characters (no space)");
    return false;
  }
  *key = s;
  return true;
}

void *hookd_api_op_new_internal(size_t size, hookd_app *app,
                                int (*run)(hookd_store_conn *, const hookd_store_backend *,
                                           hookd_api_op *),
                                void (*reply)(hookd_api_op *, int), const char *actor) {
  hookd_api_op *op = calloc(1, size);
  if (!op) return NULL;
  op->app = app;
  op->run = run;
  op->reply = reply;
  op->sop.run = op_run;
  op->sop.done = op_done;
  op->sop.arg = op;
  snprintf(op->actor, sizeof op->actor, "%s", actor);
  return op;
}

void *hookd_api_op_new(size_t size, hookd_req *r, hookd_app *app,
                       int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                       void (*reply)(hookd_api_op *, int)) {
  const hookd_principal *p = hookd_api_principal(r);
  hookd_api_op *op = hookd_api_op_new_internal(size, app, run, reply, p ? p->key_id : "");
  if (!op) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return NULL;
  }
  op->req = r;
  const char *reason = hookd_req_header(r, "Hookd-Reason");
  if (reason) snprintf(op->reason, sizeof op->reason, "%s", reason);
  return op;
}

int hookd_api_audit(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                    const char *action, const char *target, const char *tenant_id,
                    const char *detail) {
  hookd_audit a = {.at_ms = hookd_now_ms(),
                   .actor = op->actor[0] ? op->actor : (char *)"anonymous",
                   .action = (char *)action,
                   .target = (char *)target,
                   .tenant_id = (char *)tenant_id,
                   .reason = op->reason[0] ? op->reason : NULL,
                   .detail = (char *)detail};
  return be->audit_append(c, &a);
}

/* A read refused for its key's reads out already (read_slot_take): 429, the op freed. */
static bool read_refused(hookd_api_op *op) {
  if (read_slot_take(op)) return false;
  hookd_req_add_header(op->req, "Retry-After", "1");
  hookd_req_error(op->req, 429, "too_many_requests",
                  "this API key has %d reads waiting for the store already "
                  "(--max-reads-per-key): retry once they are answered",
                  op->app->cfg->max_reads_per_key);
  op_free(op);
  return true;
}

void hookd_api_submit(hookd_api_op *op, bool write) {
  if (!write && read_refused(op)) return;
  hookd_req_suspend(op->req);
  hookd_storeq_submit(write ? op->app->store->writer : op->app->store->reader, &op->sop);
}

bool hookd_api_type_pattern_valid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 256 || s[0] == ' ' || s[n - 1] == ' ') return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c > 0x7e || c == ',') return false;
    if (c == '*' && !(n == 1 || (i == n - 1 && (s[i - 1] == '.' || s[i - 1] == '/'))))
      return false;
  }
  return true;
}

int hookd_api_type_query(hookd_req *r, const char **type) {
  *type = hookd_req_query(r, "event_type");
  if (*type && !hookd_api_type_pattern_valid(*type)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "event_type",
                          "event_type must be an event type, a prefix as \"invoice.*\" or "
                          "\"orders/*\", or \"*\"");
    return -1;
  }
  return 0;
}

int hookd_api_type_time_query(hookd_req *r, const char **type, int64_t *since_ms,
                              int64_t *until_ms) {
  const char *since = hookd_req_query(r, "since"), *until = hookd_req_query(r, "until");
  *since_ms = *until_ms = 0;
  if (hookd_api_type_query(r, type) != 0) return -1;
  const char *bad = since && (hookd_parse_rfc3339_bound(since, since_ms) != 0 || *since_ms <= 0)
                        ? "since"
                    : until && (hookd_parse_rfc3339_bound(until, until_ms) != 0 || *until_ms <= 0)
                        ? "until"
                        : NULL;
  if (bad) {
    /* an offset's '+' sent unencoded reads as a blank (a query's '+'): said, as the fix */
    bool blank = strchr(bad[0] == 's' ? since : until, ' ') != NULL;
    hookd_req_field_error(r, 400, "invalid_parameter", bad,
                          "%s must be an RFC 3339 time after 1970-01-01T00:00:00Z%s", bad,
                          blank ? " (a '+' in a query reads as a blank: send it as %2B)" : "");
    return -1;
  }
  if (*since_ms && *until_ms && *since_ms >= *until_ms) { /* swapped: not "nothing happened" */
    hookd_req_field_error(r, 400, "invalid_parameter", "since", "since must be before until");
    return -1;
  }
  return 0;
}

void hookd_api_submit_scan(hookd_api_op *op) {
  if (read_refused(op)) return;
  hookd_req_suspend(op->req);
  hookd_storeq_submit(op->app->store->scan, &op->sop);
}

void hookd_api_store_error(hookd_api_op *op, int rc, const char *what) {
  const char *msg = op->err[0] ? op->err : hookd_store_strerror(rc);
  if (op->bad_after && rc == HOOKD_STORE_NOTFOUND) {
    hookd_req_field_error(op->req, 400, "invalid_parameter", "after",
                          "after must be a next_cursor of this list: the id (or name) of "
                          "one of the objects it lists");
    return;
  }
  switch (rc) {
  case HOOKD_STORE_NOTFOUND:
    hookd_req_error(op->req, 404, "not_found", "%s not found", what);
    break;
  case HOOKD_STORE_EXISTS: /* the store's own words when it has some (a deleted one's id) */
    if (op->err[0]) hookd_req_error(op->req, 409, "already_exists", "%s", op->err);
    else hookd_req_error(op->req, 409, "already_exists", "%s already exists", what);
    break;
  case HOOKD_STORE_CONFLICT:
    hookd_req_error(op->req, 409, "conflict", "%s", msg);
    break;
  case HOOKD_STORE_STATE:
    hookd_req_error(op->req, 409, "invalid_state", "%s", msg);
    break;
  case HOOKD_STORE_LIMIT:
    hookd_req_error(op->req, 422, "limit_exceeded", "%s", msg);
    break;
  default:
    hookd_req_add_header(op->req, "Retry-After", "1");
    hookd_req_error(op->req, 503, "storage_unavailable",
                    "the store could not complete the request; retry later");
  }
}

bool hookd_api_store_behind(hookd_app *app, uint64_t *depth) {
  hookd_storeq_stats st;
  hookd_storeq_get_stats(app->store->writer, &st);
  *depth = st.queue_depth;
  /* stalled: fewer HTTP writes than --max-connections can wait, under the default queue bound —
   * without this, every connection slot filled with requests waiting on it (and /readyz,
   * which would have said so, could no longer be reached) */
  return st.queue_depth > (uint64_t)app->cfg->max_store_queue ||
         st.stalled_ms > HOOKD_STORE_STALL_MS;
}

bool hookd_api_clock_outvoted(hookd_req *r, hookd_app *app) {
  if (!hookd_dispatcher_clock_outvoted(app->disp)) return false;
  hookd_req_add_header(r, "Retry-After", "1");
  hookd_req_error(r, 503, "not_ready",
                  "this node's clock is off the database's and most other nodes' (the clock "
                  "guard): it claims nothing, and what it takes would be stamped by its clock");
  return true;
}

void hookd_api_reply_overloaded(hookd_req *r, hookd_app *app, uint64_t depth) {
  hookd_storeq_stats st;
  hookd_storeq_get_stats(app->store->writer, &st);
  hookd_req_add_header(r, "Retry-After", "1");
  if (depth <= (uint64_t)app->cfg->max_store_queue && st.stalled_ms > HOOKD_STORE_STALL_MS)
    hookd_req_error(r, 503, "overloaded",
                    "the store has not committed for %lld ms (%llu writes waiting); retry "
                    "after a second",
                    (long long)st.stalled_ms, (unsigned long long)depth);
  else
    hookd_req_error(r, 503, "overloaded",
                    "the store is falling behind (%llu writes waiting); retry after a second",
                    (unsigned long long)depth);
}

bool hookd_api_store_overloaded(hookd_req *r, hookd_app *app) {
  uint64_t depth;
  if (!hookd_api_store_behind(app, &depth)) return false;
  HOOKD_INC(publish_backpressure);
  hookd_api_reply_overloaded(r, app, depth);
  return true;
}

json_t *hookd_api_body_object(hookd_req *r, hookd_app *app) {
  size_t len;
  const char *body = hookd_req_body(r, &len);
  /* a compressed body parsed as it is read as "a NUL byte" (a review): said as what it is */
  const char *coding = hookd_req_header(r, "Content-Encoding");
  size_t coding_len = coding ? strlen(coding) : 0; /* (its trailing blanks cut: scan_header) */
  if (coding_len && !(coding_len == 8 && !strncasecmp(coding, "identity", 8))) {
    hookd_req_error(r, 415, "unsupported_media_type",
                    "Content-Encoding %.32s is not accepted: send the JSON uncompressed", coding);
    return NULL;
  }
  if (len == 0) {
    hookd_req_error(r, 400, "invalid_json", "request body is empty; expected a JSON object");
    return NULL;
  }
  if (len >= 3 && !memcmp(body, "\xEF\xBB\xBF", 3)) {
    hookd_req_error(r, 400, "invalid_json",
                    "a UTF-8 byte order mark (EF BB BF) precedes the JSON: send it without one");
    return NULL;
  }
  char err[HOOKD_JSON_ERR_MAX];
  json_t *v = hookd_json_parse(body, len, &app->json_limits, err);
  if (!v && hookd_json_out_of_memory(err)) { /* (not the body's fault: a 400 is never retried) */
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return NULL;
  }
  if (!v) {
    hookd_req_error(r, 400, "invalid_json", "%s", err);
    return NULL;
  }
  if (!json_is_object(v)) {
    json_decref(v);
    hookd_req_error(r, 400, "invalid_json", "request body must be a JSON object");
    return NULL;
  }
  return v;
}

const hookd_principal *hookd_api_principal(hookd_req *r) { return hookd_req_get_app(r); }

/* A refused request, counted and logged (auth.refused: at most one line a second, the lines
 * left out counted in the next; never a token — the key's id when one was found): after a
 * revocation, an operator sees which client is refused, and for what (an operator review). */
static void refused(hookd_req *r, int status, const char *why) {
  static _Atomic int64_t last_ms;
  static _Atomic uint64_t skipped;
  HOOKD_INC(auth_failures);
  int64_t now = hookd_mono_ms(), last = atomic_load(&last_ms);
  if ((last && now - last < 1000) || !atomic_compare_exchange_strong(&last_ms, &last, now)) {
    atomic_fetch_add(&skipped, 1);
    return;
  }
  const hookd_principal *p = hookd_api_principal(r);
  char path[200];
  snprintf(path, sizeof path, "%s", hookd_req_path(r) ? hookd_req_path(r) : "");
  HLOG(HOOKD_LOG_INFO, "auth.refused", KV_I("status", status),
       KV_S("method", hookd_req_method(r)), KV_S("path", path),
       KV_S("key_id", p ? p->key_id : NULL), KV_S("reason", why),
       KV_I("not_logged_before", (int64_t)atomic_exchange(&skipped, 0)));
}

/* the 401 or 403 answered with its message, after refused() */
static void refuse(hookd_req *r, int status, const char *fmt, va_list ap) {
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  refused(r, status, msg);
  if (status == 401) hookd_req_add_header(r, "WWW-Authenticate", "Bearer");
  hookd_req_error(r, status, status == 401 ? "unauthorized" : "forbidden", "%s", msg);
}

void hookd_api_forbid(hookd_req *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  refuse(r, 403, fmt, ap);
  va_end(ap);
}

void hookd_api_unauthorized(hookd_req *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  refuse(r, 401, fmt, ap);
  va_end(ap);
}

bool hookd_api_tenant_allowed(hookd_req *r, const char *tenant_id) {
  const hookd_principal *p = hookd_api_principal(r);
  if (!p || hookd_principal_has_tenant(p, tenant_id)) return true;
  hookd_api_forbid(r, "this API key is not scoped to tenant %s", tenant_id);
  return false;
}

bool hookd_api_parse_headers(hookd_req *r, const json_t *v, const char *field, char **out) {
  *out = NULL;
  if (!v || json_is_null(v)) return true; /* absent or null: none */
  char err[512];
  if (!hookd_custom_headers_check(v, field, err, sizeof err)) {
    /* the message begins with the path it is about: `<field>.<Name>` (a header name is a
     * token: no blank, no colon) or `<field>` */
    char param[160];
    snprintf(param, sizeof param, "%.*s", (int)strcspn(err, " :"), err);
    hookd_req_field_error(r, 422, "invalid_field", param, "%s", err);
    return false;
  }
  if (json_object_size(v) == 0) return true;
  /* the names in their order (jansson keeps it), which the endpoint shows */
  if (!(*out = json_dumps(v, JSON_COMPACT))) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }
  return true;
}

json_t *hookd_json_without_nulls(json_t *body, const char *value, bool *dropped) {
  json_t *given = json_object();
  const char *k;
  json_t *v;
  *dropped = false;
  json_object_foreach(body, k, v) {
    if (json_is_null(v) && (!value || strcmp(k, value) != 0)) {
      *dropped = true;
      continue;
    }
    if (given && json_object_set(given, k, v) != 0) {
      json_decref(given);
      given = NULL;
    }
  }
  return given;
}

json_t *hookd_api_header_names(const hookd_app *app, const hookd_endpoint *ep) {
  json_t *h = ep->headers ? hookd_keyring_open_json(&app->keyring, ep->headers, ep->id) : NULL;
  /* a value that does not open (a key the store was not sealed with) shows null: unknown */
  json_t *names = ep->headers && !json_is_object(h) ? json_null() : json_array();
  const char *k;
  json_t *val;
  json_object_foreach(h, k, val) json_array_append_new(names, json_string(k));
  json_decref(h);
  return names;
}

int hookd_api_parse_rate(hookd_req *r, const json_t *v, const char *field, double max,
                         double *per_second) {
  if (!v || json_is_null(v)) {
    *per_second = 0;
    return 0;
  }
  json_t *s = json_object_get(v, "per_second"), *m = json_object_get(v, "per_minute");
  if (!json_is_object(v) || json_object_size(v) != 1 || (!json_is_number(s) && !json_is_number(m))) {
    hookd_req_error(r, 422, "invalid_field",
                    "%s must be null, {\"per_second\": n} or {\"per_minute\": n}", field);
    return -1;
  }
  double n = json_number_value(s ? s : m);
  double ps = s ? n : n / 60.0;
  if (!(n > 0) || ps > max || ps < HOOKD_BUCKET_MIN_RATE) { /* (param: the member's path) */
    hookd_req_error(r, 422, "invalid_field",
                    "%s.%s must be a rate of at least one per hour (per_second >= 1/3600,"
                    " per_minute >= 1/60) and at most %.0f per second",
                    field, s ? "per_second" : "per_minute", max);
    return -1;
  }
  *per_second = ps;
  return 0;
}

bool hookd_api_int_in(hookd_req *r, const json_t *obj, const char *prefix, const char *key,
                      int64_t min, int64_t max, int64_t *out) {
  int64_t v;
  const json_t *given = json_object_get(obj, key);
  if (given && json_is_null(given)) { /* it would silently mean the default */
    hookd_req_error(r, 422, "invalid_field", "%s%s%s may not be null", prefix ? prefix : "",
                    prefix ? "." : "", key);
    return false;
  }
  int rc = hookd_json_get_int(obj, key, &v); /* 1: absent */
  if (rc == 1) return true;
  if (rc < 0 || v < min || v > max) {
    hookd_req_error(r, 422, "invalid_field", "%s%s%s must be an integer in [%lld, %lld]",
                    prefix ? prefix : "", prefix ? "." : "", key, (long long)min, (long long)max);
    return false;
  }
  *out = v;
  return true;
}

void hookd_api_unknown_field(hookd_req *r, const char *prefix, const char *name,
                             const char *what) {
  char path[300];
  int n = snprintf(path, sizeof path, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", name);
  const char *param = n > 0 && (size_t)n < sizeof path ? path : ""; /* too long: not echoed */
  if (what)
    hookd_req_field_error(r, 422, "unknown_field", param,
                          "unknown field \"%.64s\" (%s takes none)", path, what);
  else
    hookd_req_field_error(r, 422, "unknown_field", param, "unknown field \"%.64s\"", path);
}

bool hookd_api_known_members(hookd_req *r, const json_t *obj, const char *prefix,
                             const char *const *names) {
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)obj, k, x) {
    size_t i = 0;
    while (names[i] && strcmp(names[i], k)) i++;
    if (!names[i]) {
      hookd_api_unknown_field(r, prefix, k, NULL);
      return false;
    }
  }
  return true;
}

int hookd_api_parse_retry(hookd_req *r, const json_t *v, const char *field, hookd_api_retry *out) {
  static const char *const names[] = {"max_attempts",      "backoff_base_ms",
                                      "backoff_cap_ms",    "max_age_s",
                                      "retry_after_cap_s", "retry_statuses", NULL};
  const int64_t year_s = 366LL * 24 * 3600;
  const int64_t min[] = {1, 1, 1, 1, 0}, max[] = {1000, year_s * 1000, year_s * 1000, year_s, year_s};
  int64_t *dst[] = {&out->max_attempts, &out->backoff_base_ms, &out->backoff_cap_ms,
                    &out->max_age_s, &out->retry_after_cap_s};
  for (size_t i = 0; i < 5; i++) *dst[i] = -1;
  out->has_statuses = false;
  out->statuses[0] = out->statuses[1] = 0;
  if (!json_is_object(v)) {
    hookd_req_error(r, 422, "invalid_field", "%s must be an object", field);
    return -1;
  }
  if (!hookd_api_known_members(r, v, field, names)) return -1;
  for (size_t i = 0; i < 5; i++)
    if (!hookd_api_int_in(r, v, field, names[i], min[i], max[i], dst[i])) return -1;
  /* 4xx statuses retried instead of permanent (O6): e.g. [409, 423] */
  const json_t *list = json_object_get(v, "retry_statuses");
  if (!list) return 0;
  size_t i;
  const json_t *x;
  if (!json_is_array(list) || json_array_size(list) > 100) goto bad;
  json_array_foreach(list, i, x) {
    json_int_t st = json_is_integer(x) ? json_integer_value(x) : 0;
    if (!hookd_retry_status_listable((int)st) || st != (int)st) goto bad;
    out->statuses[(st - 400) / 64] |= 1ULL << ((st - 400) % 64);
  }
  out->has_statuses = true;
  return 0;
bad:
  hookd_req_error(r, 422, "invalid_field",
                  "%s.retry_statuses must be a list of 4xx statuses to retry (400-499; not 408 "
                  "or 429, retried anyway; 410 listed is retried instead of disabling the "
                  "endpoint)",
                  field);
  return -1;
}

void hookd_api_retry_apply(const hookd_api_retry *in, hookd_retry_policy *p) {
  if (in->max_attempts >= 0) p->max_attempts = (int)in->max_attempts;
  if (in->backoff_base_ms >= 0) p->base_ms = in->backoff_base_ms;
  if (in->backoff_cap_ms >= 0) p->cap_ms = in->backoff_cap_ms;
  if (in->max_age_s >= 0) p->max_age_ms = in->max_age_s * 1000;
  if (in->retry_after_cap_s >= 0) p->retry_after_cap_ms = in->retry_after_cap_s * 1000;
  if (in->has_statuses) {
    p->retry_4xx[0] = in->statuses[0];
    p->retry_4xx[1] = in->statuses[1];
  }
}

int hookd_api_limit(hookd_req *r, int def, int max) {
  const char *s = hookd_req_query(r, "limit");
  if (!s) return def;
  long long v;
  if (hookd_parse_ll(s, 1, max, &v) != 0) {
    hookd_req_field_error(r, 400, "invalid_parameter", "limit",
                          "limit must be an integer in [1, %d]", max);
    return -1;
  }
  return (int)v;
}

int hookd_api_page(hookd_req *r, const char *prefix, int *limit, char *after,
                   size_t after_size) {
  *limit = hookd_api_limit(r, 50, 500);
  if (*limit < 0) return -1;
  const char *a = hookd_req_query(r, "after");
  if (a && !hookd_id_valid(a, 128)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "after", "after must be an id");
    return -1;
  }
  if (a && prefix && !hookd_id_generated(a, prefix)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "after",
                          "after must be a next_cursor of this list");
    return -1;
  }
  snprintf(after, after_size, "%s", a ? a : "");
  return 0;
}

json_t *hookd_api_page_body(json_t *data, const char *last_id) {
  return json_pack("{s:o,s:o}", "data", data, "next_cursor",
                   last_id ? json_string(last_id) : json_null());
}

json_t *hookd_api_cursor_json(const hookd_app *app, char list, const char *scope, int64_t seq) {
  char c[HOOKD_CURSOR_LEN + 1];
  return seq > 0 && hookd_cursor_seal(&app->cursor_key, list, scope, seq, c) == 0
             ? json_string(c)
             : json_null();
}

json_t *hookd_api_seq_page_body(const hookd_app *app, char list, const char *scope, json_t *data,
                                int64_t next_seq) {
  return json_pack("{s:o,s:o}", "data", data, "next_cursor",
                   hookd_api_cursor_json(app, list, scope, next_seq));
}

int hookd_api_list_scope(hookd_req *r, const hookd_app *app, char list, const char *tenant,
                         long long *before) {
  const hookd_principal *p = hookd_api_principal(r);
  if (p && p->tenants[0] && !tenant) {
    hookd_api_forbid(r, "a key scoped to tenants must ask for one (?tenant=)");
    return -1;
  }
  if (tenant && !hookd_api_tenant_allowed(r, tenant)) return -1;
  return hookd_api_before(r, app, list, NULL, before);
}

int hookd_api_before(hookd_req *r, const hookd_app *app, char list, const char *scope,
                     long long *before) {
  const char *s = hookd_req_query(r, "before");
  int64_t seq = 0;
  *before = 0;
  if (s && hookd_cursor_open(&app->cursor_key, list, scope, s, &seq) != 0) {
    hookd_req_field_error(r, 400, "invalid_parameter", "before",
                          "before must be a next_cursor value of this list (cursors are opaque)");
    return -1;
  }
  *before = seq;
  return 0;
}

json_t *hookd_json_time(int64_t ms) {
  if (!ms) return json_null();
  char buf[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(ms, buf);
  return json_string(buf);
}

int hookd_api_after_known(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                          int kind, const char *tenant, const char *after) {
  if (!after || !after[0]) return HOOKD_STORE_OK;
  int rc;
  if (kind < 0) {
    hookd_event_type t = {0};
    rc = be->event_type_get(c, after, &t);
    free(t.name);
    free(t.description);
    free(t.schemas);
  } else {
    rc = be->ever_made(c, kind, tenant, after);
  }
  op->bad_after = rc == HOOKD_STORE_NOTFOUND;
  return rc;
}

int hookd_api_tenant_known(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                           const char *tenant) {
  hookd_tenant t;
  int rc = be->tenant_get(c, tenant, &t);
  if (rc == 0) hookd_tenant_free(&t);
  if (rc == HOOKD_STORE_NOTFOUND) snprintf(op->err, sizeof op->err, "tenant");
  return rc;
}

json_t *hookd_json_str_or_null(const char *s) {
  if (!s) return json_null();
  json_t *v = json_string(s);
  return v ? v : json_string("(not valid UTF-8)");
}
#define str_or_null hookd_json_str_or_null

int hookd_api_timeout_shown(int timeout_ms, int max_timeout_ms) {
  return max_timeout_ms > 0 && timeout_ms > max_timeout_ms ? max_timeout_ms : timeout_ms;
}

/* A whole number as a JSON integer (a typed client's int field refuses 50.0), else a real. */
static json_t *json_tidy_number(double v) {
  if (v == floor(v) && fabs(v) < 9007199254740992.0) return json_integer((json_int_t)v);
  return json_real(v);
}

json_t *hookd_json_rate(double per_second) {
  if (!(per_second > 0)) return json_null();
  /* below one a second, a whole number a minute reads as given ({"per_minute": 2} stored as
   * 2/60 per second would show 0.0333…) */
  double per_minute = per_second * 60;
  if (per_second < 1 && per_minute >= 1 && fabs(per_minute - round(per_minute)) < 1e-9)
    return json_pack("{s:o}", "per_minute", json_integer((json_int_t)round(per_minute)));
  return json_pack("{s:o}", "per_second", json_tidy_number(per_second));
}

json_t *hookd_json_metadata(const char *text) {
  json_t *v = text ? json_loads(text, 0, NULL) : NULL;
  if (json_is_object(v)) return v;
  json_decref(v);
  return json_object();
}

int hookd_api_metadata(hookd_req *r, const json_t *v, char **out) {
  *out = NULL;
  if (!v || json_is_null(v)) return 0;
  bool ok = json_is_object(v) && json_object_size(v) <= 16;
  const char *k;
  json_t *x;
  json_object_foreach((json_t *)v, k, x) {
    const char *s = json_string_value(x);
    size_t kl = strlen(k);
    ok = ok && s && kl >= 1 && kl <= 64 && strlen(s) <= 256 &&
         hookd_shown_text_ok(k, false, NULL) && hookd_shown_text_ok(s, false, NULL);
  }
  if (!ok) {
    hookd_req_field_error(r, 422, "invalid_field", "metadata",
                          "metadata must be null or an object of at most 16 members, names of 1 "
                          "to 64 bytes and string values of at most 256 bytes, without control "
                          "characters");
    return -1;
  }
  if (json_object_size(v) == 0) return 0; /* {}: none */
  *out = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
  if (!*out) hookd_req_error(r, 503, "unavailable", "out of memory");
  return *out ? 0 : -1;
}

json_t *hookd_json_tenant(const hookd_tenant *t) {
  return json_pack("{s:s,s:s,s:o,s:o,s:o,s:o,s:i,s:o}", "id", t->id, "name", t->name ? t->name : "",
                   "metadata", hookd_json_metadata(t->metadata),
                   "max_in_flight", t->max_in_flight ? json_integer(t->max_in_flight) : json_null(),
                   "rate_limit", hookd_json_rate(t->rate_limit),
                   "created_at", hookd_json_time(t->created_ms), "weight",
                   t->weight > 0 ? t->weight : 1, "updated_at",
                   hookd_json_time(t->updated_ms ? t->updated_ms : t->created_ms));
}

json_t *hookd_json_csv(const char *csv) {
  if (!csv) return json_null();
  json_t *a = json_array();
  for (const char *p = csv; a && *p;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    json_array_append_new(a, json_stringn(p, len));
    if (!c) break;
    p = c + 1;
  }
  return a ? a : json_null();
}

int hookd_api_channels(hookd_req *r, const json_t *v, const char *field, size_t max,
                       char **out) {
  *out = NULL;
  if (!v || json_is_null(v)) return 0;
  size_t n = json_is_array(v) ? json_array_size(v) : 0, distinct = 0;
  bool ok = n >= 1 && n <= 64, nomem = false; /* (at most max once each is kept once) */
  hookd_buf b;
  hookd_buf_init(&b, n * 130 + 1); /* (room for 64 names: never HOOKD_BUF_TOOBIG) */
  size_t bad = n; /* the element refused, named in param (n: the list, or too many) */
  for (size_t i = 0; ok && i < n; i++) {
    const char *c = json_string_value(json_array_get(v, i));
    ok = c && hookd_id_valid(c, 128);
    if (!ok) bad = i; /* (too many: the list's fault, named by it) */
    size_t j = 0; /* a name given twice is kept once */
    while (ok && j < i && strcmp(json_string_value(json_array_get(v, j)), c)) j++;
    if (ok && j == i) {
      ok = ++distinct <= max;
      nomem = ok && ((b.len && hookd_buf_puts(&b, ",")) || hookd_buf_puts(&b, c));
    }
    if (nomem) break;
  }
  if (ok && !nomem && !(*out = hookd_buf_steal(&b))) nomem = true;
  if (nomem) { /* (before, a 422 with the list's rule, and a steal's failure left unanswered) */
    hookd_buf_free(&b);
    if (r) hookd_req_error(r, 503, "unavailable", "out of memory");
    return -2;
  }
  if (!ok) {
    hookd_buf_free(&b);
    char param[64]; /* (a review: "channels", where the docs give the path: "channels[1]") */
    if (bad < n) snprintf(param, sizeof param, "%s[%zu]", field, bad);
    if (r) /* (none: the caller words the refusal) */
      hookd_req_field_error(r, 422, "invalid_field", bad < n ? param : field,
                            "%s must be null or an array of 1 to %zu channel names (1 to 128 "
                            "of letters, digits, '_', '-', '.', ':')",
                            field, max);
    return -1;
  }
  return 0;
}

json_t *hookd_json_retry(const hookd_retry_policy *p) {
  json_t *statuses = json_array();
  for (int s = 400; s <= 499; s++)
    if (hookd_retry_policy_retries(p, s)) json_array_append_new(statuses, json_integer(s));
  return json_pack("{s:I,s:i,s:I,s:I,s:I,s:I,s:o}", "policy_version", (json_int_t)p->id,
                   "max_attempts", p->max_attempts, "backoff_base_ms", (json_int_t)p->base_ms,
                   "backoff_cap_ms", (json_int_t)p->cap_ms, "max_age_s",
                   (json_int_t)(p->max_age_ms / 1000), "retry_after_cap_s",
                   (json_int_t)(p->retry_after_cap_ms / 1000), "retry_statuses", statuses);
}

json_t *hookd_json_endpoint(const hookd_endpoint *e, int max_timeout_ms) {
  json_t *types = hookd_json_csv(e->event_types);
  json_t *v = json_pack(
      "{s:s,s:s,s:s,s:s,s:o,s:b,s:o,s:i,s:i,s:o,s:s,s:o,s:o,s:o}", "id",
      e->id, "tenant_id", e->tenant_id, "url", e->url, "description",
      e->description ? e->description : "", "event_types", types, "enabled", e->enabled,
      "disabled_reason", str_or_null(e->disabled_reason), "max_in_flight", e->max_in_flight,
      "timeout_ms", hookd_api_timeout_shown(e->timeout_ms, max_timeout_ms), "retry",
      hookd_json_retry(&e->policy), "signing",
      e->signing ? e->signing : "hmac", "previous_secret_expires_at",
      /* an overlap that has ended shows none */
      e->previous_secret && e->previous_expires_ms > hookd_now_ms()
          ? hookd_json_time(e->previous_expires_ms)
          : json_null(),
      "created_at",
      hookd_json_time(e->created_ms), "updated_at", hookd_json_time(e->updated_ms));
  /* when (null while enabled): what support asks first of one disabled by its answers */
  json_object_set_new(v, "disabled_at", hookd_json_time(e->enabled ? 0 : e->disabled_ms));
  json_object_set_new(v, "rate_limit", hookd_json_rate(e->rate_limit));
  json_object_set_new(v, "ordered", json_boolean(e->ordered));
  json_object_set_new(v, "lane_policy", json_string(e->lane_policy ? e->lane_policy : "skip"));
  json_object_set_new(v, "failing_since", hookd_json_time(e->failing_since_ms));
  json_object_set_new(v, "channels", hookd_json_csv(e->channels));
  json_object_set_new(v, "metadata", hookd_json_metadata(e->metadata));
  json_t *pf = e->payload_filter ? json_loads(e->payload_filter, 0, NULL) : NULL;
  json_object_set_new(v, "payload_filter", pf ? pf : json_null());
  json_object_set_new(v, "body_format",
                      json_string(e->body_format ? e->body_format : "envelope"));
  /* an inbound source's destination gets its source's events, whatever their types: event_types
   * (null, "every type") is left out, and kind says what it is */
  json_object_set_new(v, "kind", json_string(e->source_id ? "destination" : "endpoint"));
  if (e->source_id) {
    json_object_set_new(v, "source_id", json_string(e->source_id));
    json_object_set_new(v, "idempotent", json_boolean(e->idempotent));
    json_object_del(v, "event_types");
    json_object_del(v, "body_format"); /* (a forward is the provider's body) */
  }
  return v;
}

/* When a delivery still to be sent may go: its own time, held back by its endpoint's open
 * breaker or Retry-After pause (this node's view, hh as read; NULL: none read); 0 while the
 * endpoint is disabled (it goes when an operator enables it). An operator reading it during an
 * outage sees when it is really tried, not a time already past (an outage audit, then a review
 * of the deliveries'). */
static int64_t held_next(const hookd_delivery *dl, const hookd_endpoint_health *hh) {
  int64_t next = dl->next_attempt_ms;
  if (!next || !hh) return next;
  if (!hh->sending) return 0;
  if (hh->breaker_retry_ms > next) next = hh->breaker_retry_ms;
  if (hh->paused_until_ms > next) next = hh->paused_until_ms;
  return next;
}

/* The endpoint's health as this node sees it, into hh; NULL when there is none to read. */
static const hookd_endpoint_health *health_of(hookd_app *app, const hookd_delivery *dl,
                                              hookd_endpoint_health *hh) {
  return app && app->disp && dl->endpoint_id &&
                 hookd_dispatcher_endpoint_health(app->disp, dl->endpoint_id, hh) == 0
             ? hh
             : NULL;
}

int64_t hookd_api_delivery_next(hookd_app *app, const hookd_delivery *dl) {
  hookd_endpoint_health hh;
  return held_next(dl, dl->next_attempt_ms ? health_of(app, dl, &hh) : NULL);
}

json_t *hookd_api_delivery_json(hookd_app *app, const hookd_delivery *d) {
  json_t *v = hookd_json_delivery(d);
  if (!v || !hookd_dstate_active(d->state)) return v;
  hookd_endpoint_health hh;
  const hookd_endpoint_health *seen = d->next_attempt_ms ? health_of(app, d, &hh) : NULL;
  int64_t next = held_next(d, seen); /* (one read of the health: by and until agree) */
  json_t *held = json_null();
  if (seen && !next)
    held = json_pack("{s:s,s:n}", "by", "disabled", "until");
  else if (seen && next > d->next_attempt_ms)
    held = json_pack("{s:s,s:o}", "by", next == seen->paused_until_ms ? "retry_after" : "breaker",
                     "until", hookd_json_time(next));
  json_object_set_new(v, "held", held ? held : json_null());
  return v;
}

json_t *hookd_json_delivery(const hookd_delivery *d) {
  json_t *v = json_pack(
      "{s:s,s:s,s:o,s:s,s:s,s:s,s:i,s:o,s:o,s:o,s:I,s:o,s:o,s:o,s:o,s:o,s:o}", "id", d->id,
      "event_id", d->event_id ? d->event_id : "", "event_type", str_or_null(d->event_type),
      "endpoint_id", d->endpoint_id, "tenant_id", d->tenant_id, "state",
      hookd_dstate_name(d->state), "attempt_count", d->attempt_count, "next_attempt_at",
      hookd_dstate_active(d->state) ? hookd_json_time(d->next_attempt_ms) : json_null(),
      "last_error", str_or_null(d->last_error), "last_status",
      d->last_status ? json_integer(d->last_status) : json_null(), "policy_version",
      (json_int_t)d->policy_id, "lease",
      d->leased_until_ms
          ? json_pack("{s:o,s:I,s:o}", "owner", str_or_null(d->lease_owner), "token",
                      (json_int_t)d->lease_token, "until", hookd_json_time(d->leased_until_ms))
          : json_null(),
      "created_at", hookd_json_time(d->created_ms), "updated_at", hookd_json_time(d->updated_ms),
      "delivered_at", hookd_json_time(d->delivered_ms), "dead_at", hookd_json_time(d->dead_ms),
      "dead_reason", str_or_null(d->dead_reason));
  /* an inbound forward's: each destination's own (the inbox record shows the latest) */
  if (v && d->result_ref) json_object_set_new(v, "result_ref", json_string(d->result_ref));
  /* its lane: a delivery waiting behind its lane's head reads as due now, and its key is how an
   * operator finds that head among the endpoint's DEAD ones (a review: nothing pointed to it) */
  if (v && d->ordering_key) json_object_set_new(v, "ordering_key", str_or_null(d->ordering_key));
  return v;
}

json_t *hookd_json_attempt(const hookd_attempt *a, const char *delivery_id) {
  json_t *resp = json_null();
  if (a->response && a->response_len) {
    /* the excerpt is the receiver's bytes: shown as text when they are UTF-8 (the cut never
     * splits a character) without a NUL, else not at all (a body of NULs, as a decoded
     * Transfer-Encoding bomb gives, was 4 KiB of \u0000: 24 KB of JSON — a review) */
    json_t *text = memchr(a->response, '\0', a->response_len)
                       ? NULL
                       : json_stringn(a->response, a->response_len);
    resp = text ? text : json_string("(binary response not shown)");
  }
  char aid[HOOKD_ATTEMPT_ID_MAX];
  const char *id = hookd_attempt_id(delivery_id, a->number, aid);
  return json_pack("{s:o,s:i,s:s,s:o,s:o,s:o,s:o,s:I,s:o,s:o,s:o,s:I}", "id", str_or_null(id),
                   "attempt", a->number, "outcome",
                   a->outcome ? a->outcome : "", "trigger", str_or_null(a->trigger),
                   "url", str_or_null(a->url),
                   "http_status", a->http_status ? json_integer(a->http_status) : json_null(),
                   "started_at", hookd_json_time(a->started_ms), "latency_ms",
                   (json_int_t)a->latency_ms, "finished_at", hookd_json_time(a->finished_ms),
                   "error", str_or_null(a->error), "response_excerpt", resp, "lease_token",
                   (json_int_t)a->lease_token);
}

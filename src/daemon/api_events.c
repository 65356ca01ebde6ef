/* api_events.c — publishing and reading events.
 *   POST /v1/tenants/{t}/events  {type, payload, id?, occurred_at?, schema_version?,
 *        ordering_key?, ordering_version?}  + Idempotency-Key?
 *        → 202 {id, deliveries, duplicate} after the commit (never before).
 *   GET  /v1/events/{id}, GET /v1/tenants/{t}/events/{id}  → the event with its deliveries.
 *   GET  /v1/tenants/{t}/events?event_type=&kind=&since=&until=&limit=&before=  → newest first,
 *        without payloads.
 *   POST /v1/tenants/{t}/events/{id}/republish  {id?, reason?}  → 202 as a publish: "send as a
 *        new event" (O12), a new event of the same type and payload; a replay keeps the id.
 *   DELETE /v1/tenants/{t}/events/{id}/payload  {reason?}  → its payload emptied now, what it
 *        still had to send cancelled (an event sent with what it should not carry).
 *
 * The Standard Webhooks envelope {"id","type","timestamp","data"} (with "schema_version" after
 * "type" when the publish gave one) is serialised here, once, and
 * stored as the exact bytes every attempt and replay sends. The request hash that decides
 * "same request" for idempotency is SHA-256 over the request's canonical JSON, so key order and
 * whitespace do not matter. */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/b64.h"
#include "core/clock.h"
#include "core/ids.h"
#include "core/inbound.h"
#include "core/redact.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

/* A caller's id of the form hookd generates (hookd_id_reserved) only repeats an event of its
 * tenant: a new event under it is refused, so that hookd's own ids stay unique everywhere. */
#define RESERVED_ID                                                                            \
  "id has the form of the ids hookd generates (evt_ or in_ and 26 base32 characters): it "     \
  "may repeat an event of this tenant, not name a new one (hookd's own ids are unique across "  \
  "tenants)"
/* The same id with another request: for an id hookd generated, said as it is — a publish that
 * sent no id is repeated by its Idempotency-Key, never by sending back the id it was given. */
#define RESERVED_ID_REPEAT                                                                     \
  "an event with this id exists, published by another request: an id hookd generated repeats "\
  "only a publish that sent that id itself; to repeat a publish that sent none, send its "      \
  "Idempotency-Key again"

typedef struct pub_op {
  hookd_api_op base;
  hookd_publish_req req;
  hookd_publish_res res;
  char tenant[HOOKD_ID_MAX + 64];
  char event_id[160];
  char type[260];
  char idem[260];
  char ordering_key[260];
  char schema_version[80]; /* its JSON text ("\"v2\"" or "2"); "" when none */
  char *channels;          /* comma-separated; NULL when none */
  char only_ep[HOOKD_ID_MAX + 64]; /* a test event's endpoint; "" otherwise */
  hookd_buf body;
  unsigned char hash[32];
  unsigned char hash_legacy[32]; /* the body hashed with its null members (has_legacy) */
  bool has_legacy;
  bool reserved_id; /* the caller's id has hookd's form: existing_only */
} pub_op;

static void pub_cleanup(hookd_api_op *base) {
  pub_op *op = (pub_op *)base;
  hookd_buf_free(&op->body);
  hookd_publish_res_free(&op->res);
  free(op->channels);
  op->channels = NULL;
}

/* The parsed payload handed to the writer's fan-out (req.payload: it matches payload filters
 * without parsing the envelope again) is kept with the request and freed on the HTTP thread
 * after the answer — not on the writer, which every tenant waits for. Within KEPT_MAX bytes of
 * envelopes kept so at once (a dense payload parses to some 20 times its bytes); past that the
 * writer parses the envelope when a filter needs it, as without. */
#define KEPT_MAX ((size_t)16 << 20)
static atomic_size_t kept_bytes;

typedef struct kept {
  json_t *v;
  size_t bytes;
} kept;

static void kept_free(void *p) {
  kept *k = p;
  json_decref(k->v);
  atomic_fetch_sub(&kept_bytes, k->bytes);
  free(k);
}

/* Takes v (which holds op->req.payload, or NULL): kept with request r, or freed now and the
 * payload left to the writer's parse. */
static void keep_payload(pub_op *op, hookd_req *r, json_t *v) {
  size_t bytes = op->body.len;
  kept *k = NULL;
  if (v && op->req.payload && atomic_fetch_add(&kept_bytes, bytes) + bytes <= KEPT_MAX) {
    if ((k = malloc(sizeof *k))) {
      *k = (kept){.v = v, .bytes = bytes};
      hookd_req_keep(r, k, kept_free);
      return;
    }
  }
  if (v && op->req.payload) atomic_fetch_sub(&kept_bytes, bytes);
  op->req.payload = NULL;
  json_decref(v);
}

static int run_publish(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  pub_op *op = (pub_op *)base;
  hookd_publish_res_free(&op->res); /* a second run (its batch redone) starts afresh */
  return be->publish(c, &op->req, &op->res);
}

/* What a committed publish makes known: counters, logs, the dispatcher's hints. */
static void published(pub_op *op) {
  if (op->res.duplicate) {
    HOOKD_INC(publish_duplicates);
    return;
  }
  HOOKD_INC(events_published);
  HOOKD_ADD(deliveries_created, (uint64_t)op->res.n_deliveries);
  if (op->res.n_superseded) {
    /* created DEAD: never reaches the dispatcher, which counts every other DEAD */
    HOOKD_ADD(dead[M_DEAD_SUPERSEDED], (uint64_t)op->res.n_superseded);
    HLOG(HOOKD_LOG_WARN, "event.superseded", KV_S("event_id", op->res.event_id),
         KV_S("tenant_id", op->tenant), KV_S("reason", "superseded"),
         KV_I("deliveries", op->res.n_superseded));
  }
  if (op->res.filters_over) {
    HOOKD_ADD(filters_over, (uint64_t)op->res.filters_over);
    HLOG(HOOKD_LOG_WARN, "payload_filter.gave_up", KV_S("event_id", op->res.event_id),
         KV_S("tenant_id", op->tenant), KV_I("endpoints", op->res.filters_over),
         KV_S("hint", "a payload filter took more than 10,000 steps on this payload, or the "
                      "event's filters more than 200,000 together (a long array against many "
                      "values, a long text searched): those endpoints did not take the event"));
  }
  for (size_t i = 0; i < op->res.n_endpoints; i++)
    hookd_dispatcher_hint(op->base.app->disp, op->res.endpoints[i], op->res.due_ms);
  if (op->res.endpoints_truncated) hookd_dispatcher_rescan(op->base.app->disp);
  HLOG(HOOKD_LOG_DEBUG, "event.published", KV_S("event_id", op->res.event_id),
       KV_S("tenant_id", op->tenant), KV_I("deliveries", op->res.n_deliveries));
}

static void reply_publish(hookd_api_op *base, int rc) {
  pub_op *op = (pub_op *)base;
  if (rc) {
    if (rc == HOOKD_STORE_CONFLICT) HOOKD_INC(publish_conflicts);
    if (rc == HOOKD_STORE_STATE && op->reserved_id)
      hookd_req_error(base->req, 422, "invalid_field", RESERVED_ID);
    else if (rc == HOOKD_STORE_CONFLICT && op->reserved_id && !op->res.key_conflict)
      hookd_req_error(base->req, 409, "conflict", RESERVED_ID_REPEAT);
    else
      hookd_api_store_error(base, rc, "tenant");
    return;
  }
  published(op);
  if (op->res.duplicate) hookd_req_add_header(base->req, "Idempotent-Replayed", "true");
  hookd_hist_observe_us(&hookd_m.publish_ack, hookd_req_age_us(base->req));
  /* superseded: of those deliveries, how many were created DEAD, behind a higher version of
   * their lane (never sent) */
  json_t *v = json_pack("{s:s,s:i,s:i,s:b}", "id", op->res.event_id, "deliveries",
                        op->res.n_deliveries, "superseded", op->res.n_superseded, "duplicate",
                        op->res.duplicate);
  /* endpoints whose payload filter gave up on this payload (they did not take the event): said,
   * not only counted — 0 deliveries read as "no subscribers" (a review) */
  if (v && op->res.filters_over)
    json_object_set_new(v, "filters_gave_up", json_integer(op->res.filters_over));
  hookd_req_reply_json(base->req, 202, v);
}

/* The Standard Webhooks envelope, serialised once into op->body. */
static int envelope(pub_op *op, hookd_app *app, int64_t occurred_ms, const json_t *payload) {
  char ts[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(occurred_ms, ts);
  hookd_buf_init(&op->body, app->cfg->max_body_bytes * 2 + 1024);
  hookd_buf *b = &op->body;
  int brc = hookd_buf_puts(b, "{\"id\":");
  if (!brc) brc = hookd_json_quote(b, op->event_id, strlen(op->event_id));
  if (!brc) brc = hookd_buf_puts(b, ",\"type\":");
  if (!brc) brc = hookd_json_quote(b, op->type, strlen(op->type));
  if (!brc && op->schema_version[0])
    brc = hookd_buf_printf(b, ",\"schema_version\":%s", op->schema_version);
  if (!brc) brc = hookd_buf_printf(b, ",\"timestamp\":\"%s\",\"data\":", ts);
  if (!brc) brc = hookd_json_dump(payload, b);
  if (!brc) brc = hookd_buf_puts(b, "}");
  return brc;
}

/* The store request from op's fields (no ordering key: the caller sets it). */
static void fill_req(pub_op *op, hookd_app *app, int64_t occurred_ms, int64_t now) {
  op->req.tenant_id = op->tenant;
  op->req.event_id = op->event_id;
  op->req.type = op->type;
  op->req.body = op->body.data;
  op->req.body_len = op->body.len;
  op->req.request_hash = op->hash;
  op->req.request_hash_legacy = op->has_legacy ? op->hash_legacy : NULL;
  op->req.idempotency_key = op->idem[0] ? op->idem : NULL;
  op->req.schema_version = op->schema_version[0] ? op->schema_version : NULL;
  op->req.channels = op->channels;
  op->req.occurred_ms = occurred_ms;
  op->req.now_ms = now;
  op->req.expires_ms = app->cfg->event_ttl_s ? now + app->cfg->event_ttl_s * 1000 : 0;
}

static bool valid_type(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 256) return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '_' || c == '-' || c == '.' || c == ':'))
      return false;
  }
  return true;
}

#define SCHEMA_VERSION_RULE                                                                    \
  "schema_version must be a string of 1-64 characters of letters, digits, '_', '-', '.', ':' "  \
  "or an integer in [0, 2^53)"

/* A publish's schema_version as the JSON text kept and sent (out: "" when absent or null, as
 * the other optional members read null); false when it is none of the two forms. */
static bool schema_version_text(const json_t *v, char *out, size_t cap) {
  out[0] = '\0';
  if (!v || json_is_null(v)) return true;
  if (json_is_integer(v)) {
    json_int_t n = json_integer_value(v);
    if (n < 0 || n >= 9007199254740992LL) return false;
    snprintf(out, cap, "%" JSON_INTEGER_FORMAT, n);
    return true;
  }
  const char *s = json_string_value(v);
  if (!s || !hookd_id_valid(s, 64)) return false;
  snprintf(out, cap, "\"%s\"", s); /* (nothing in that alphabet needs escaping) */
  return true;
}

/* Where a publish's refusal goes: the HTTP request's answer, or (no request: the outbox relay)
 * the outcome's status, code and message. */
typedef struct perr {
  hookd_req *r;
  hookd_publish_outcome *o;
} perr;

static void fail(perr *e, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(perr *e, int status, const char *code, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (e->r) {
    hookd_req_error(e->r, status, code, "%s", msg);
    return;
  }
  e->o->status = status;
  snprintf(e->o->code, sizeof e->o->code, "%s", code);
  snprintf(e->o->message, sizeof e->o->message, "%s", msg);
}

/* The request hash that tells "the same request" for a repeated id or Idempotency-Key:
 * SHA-256 over request's canonical JSON, built in at most cap bytes. 0, or a hookd_buf code
 * (-1 for NULL: out of memory building it). */
static int request_hash(const json_t *request, size_t cap, unsigned char hash[32]) {
  hookd_buf canon;
  hookd_buf_init(&canon, cap);
  int brc = request ? hookd_jcs(request, &canon) : -1;
  if (!brc && hookd_sha256(canon.data, canon.len, hash) != 0) brc = -1;
  hookd_buf_free(&canon);
  return brc;
}

/* Answers a failure of the envelope or the request hash (a hookd_buf code). A body parsed within
 * the limits holds nothing the two cannot write (valid UTF-8, finite numbers, nested at most
 * --max-json-depth, under the canonical form's 4096): any failure but the size's is out of
 * memory — not the request's fault, and not to be refused for good (the outbox relay marks a
 * 4xx's row refused; before, a 400 invalid_payload). */
static void serialise_failed(perr *e, int brc) {
  if (brc == HOOKD_BUF_TOOBIG)
    fail(e, 413, "invalid_payload", "payload cannot be serialised (too large)");
  else
    fail(e, 503, "unavailable", "out of memory");
}

/* Checks a publish's body (its members already known to be a publish's) and fills op from it:
 * the event, its envelope, its request hash, the store request. op->idem is set by the caller.
 * -1 when refused (e answered). */
static int prepare(pub_op *op, hookd_app *app, const char *tenant, json_t *body, perr *e) {
  const char *type = NULL, *id = NULL, *occurred = NULL, *okey = NULL;
  int64_t over = 0;
  json_t *payload = json_object_get(body, "payload");
  int64_t now = hookd_now_ms(), occurred_ms = now;
  /* no tenant's id (an outbox row's column is any text): never cut short into another's, nor
   * into invalid UTF-8 that a PostgreSQL store refuses on every try */
  if (!hookd_id_valid(tenant, 64)) {
    fail(e, 404, "not_found", "tenant not found");
    return -1;
  }
  if (!json_object_get(body, "type")) {
    fail(e, 422, "missing_field",
         "type is required: 1-256 characters of letters, digits, '_', '-', '.', ':'");
    return -1;
  }
  if (hookd_json_get_str(body, "type", &type) != 0 || !valid_type(type)) {
    fail(e, 422, "invalid_field",
         "type must be 1-256 characters of letters, digits, '_', '-', '.', ':'");
    return -1;
  }
  if (!payload) {
    fail(e, 422, "missing_field", "payload is required (any JSON value)");
    return -1;
  }
  if (hookd_json_get_str(body, "id", &id) < 0 || (id && !hookd_id_valid(id, 128))) {
    fail(e, 422, "invalid_field",
         "id must be 1-128 characters of letters, digits, '_', '-', '.', ':'");
    return -1;
  }
  if (hookd_json_get_str(body, "occurred_at", &occurred) < 0 ||
      (occurred && hookd_parse_rfc3339(occurred, &occurred_ms) != 0)) {
    fail(e, 422, "invalid_field", "occurred_at must be an RFC 3339 timestamp");
    return -1;
  }
  if (hookd_json_get_str(body, "ordering_key", &okey) < 0 || (okey && !hookd_id_valid(okey, 256))) {
    fail(e, 422, "invalid_field",
         "ordering_key must be 1-256 characters of letters, digits, '_', '-', '.', ':'");
    return -1;
  }
  int has_over = hookd_json_get_int(body, "ordering_version", &over);
  if (has_over < 0) {
    fail(e, 422, "invalid_field", "ordering_version must be an integer");
    return -1;
  }
  if (has_over == 0 && !okey) { /* a version orders within a lane: without one it did nothing */
    fail(e, 422, "invalid_field",
         "ordering_version needs an ordering_key (the lane it orders within)");
    return -1;
  }
  if (!schema_version_text(json_object_get(body, "schema_version"), op->schema_version,
                           sizeof op->schema_version)) {
    fail(e, 422, "invalid_field", SCHEMA_VERSION_RULE);
    return -1;
  }
  int crc = hookd_api_channels(e->r, json_object_get(body, "channels"), "channels", 5,
                               &op->channels);
  if (crc != 0) {
    if (!e->r && crc == -2) fail(e, 503, "unavailable", "out of memory");
    else if (!e->r)
      fail(e, 422, "invalid_field",
           "channels must be null or an array of 1 to 5 channel names (1 to 128 of letters, "
           "digits, '_', '-', '.', ':')");
    return -1;
  }
  snprintf(op->tenant, sizeof op->tenant, "%s", tenant);
  snprintf(op->type, sizeof op->type, "%s", type);
  if (id)
    snprintf(op->event_id, sizeof op->event_id, "%s", id);
  else
    hookd_id_new("evt", now, op->event_id);
  if (okey) snprintf(op->ordering_key, sizeof op->ordering_key, "%s", okey);

  /* request hash: SHA-256 of the canonical request body. It only matters when the request can
   * be repeated — a caller's event id or an Idempotency-Key; a generated id never collides. */
  int brc = 0;
  /* canonical numbers take up to 5.25 times their bytes ("1e20" is 21 digits) */
  if (id || op->idem[0]) {
    size_t cap = app->cfg->max_body_bytes * 6 + 1024;
    bool dropped;
    json_t *given = hookd_json_without_nulls(body, "payload", &dropped); /* (a value there) */
    brc = request_hash(given, cap, op->hash);
    json_decref(given);
    /* earlier builds hashed the nulls too: a request they stored is still this one (upgrades) */
    if (!brc && dropped) brc = request_hash(body, cap, op->hash_legacy);
    op->has_legacy = !brc && dropped;
  }

  if (!brc) brc = envelope(op, app, occurred_ms, payload);
  if (brc) {
    serialise_failed(e, brc);
    return -1;
  }
  fill_req(op, app, occurred_ms, now);
  op->req.payload = payload; /* (body's: the caller keeps body until the op is done) */
  op->reserved_id = id && hookd_id_reserved(id);
  op->req.existing_only = op->reserved_id;
  op->req.ordering_key = okey ? op->ordering_key : NULL;
  op->req.ordering_version = over;
  op->req.has_ordering_version = has_over == 0;
  /* publish refuses (409, 404) before its first write and may run twice */
  op->base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT;
  return 0;
}

static const char *const publish_members[] = {
    "type", "payload", "id", "occurred_at", "ordering_key", "ordering_version",
    "schema_version", "channels", NULL};

void hookd_api_event_publish(hookd_req *r, hookd_app *app) {
  if (hookd_api_store_overloaded(r, app)) return;
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  pub_op *op = NULL;
  const char *idem;
  perr e = {.r = r};
  if (!hookd_api_known_members(r, body, NULL, publish_members)) goto done;
  op = hookd_api_op_new(sizeof *op, r, app, run_publish, reply_publish);
  if (!op) goto done;
  op->base.cleanup = pub_cleanup;
  /* the key goes into the request hash; it is checked after the body's own checks, as before
   * (and after the envelope is built: a body too big for one answers 413 first now) */
  const char *key = hookd_req_header(r, "Idempotency-Key");
  if (key) snprintf(op->idem, sizeof op->idem, "%s", key);
  if (prepare(op, app, hookd_req_param(r, 0), body, &e) != 0 ||
      !hookd_api_idempotency_key(r, &idem)) {
    pub_cleanup(&op->base);
    free(op);
    goto done;
  }
  keep_payload(op, r, body); /* the HTTP thread touches body no more */
  body = NULL;
  hookd_api_submit(&op->base, true);
done:
  json_decref(body);
}

/* ---------- a publish without an HTTP request: the outbox relay (docs/outbox.md) ---------- */

typedef struct relay_pub_op {
  pub_op pub;
  void (*done)(void *arg, const hookd_publish_outcome *o);
  void *arg;
} relay_pub_op;

static void reply_relay(hookd_api_op *base, int rc) {
  relay_pub_op *op = (relay_pub_op *)base;
  hookd_publish_outcome o = {.status = 202};
  perr e = {.o = &o};
  if (!rc) {
    published(&op->pub);
    o.duplicate = op->pub.res.duplicate;
    o.deliveries = op->pub.res.n_deliveries;
  } else {
    const char *msg = base->err[0] ? base->err : hookd_store_strerror(rc);
    if (rc == HOOKD_STORE_CONFLICT) HOOKD_INC(publish_conflicts);
    if (rc == HOOKD_STORE_STATE && op->pub.reserved_id)
      fail(&e, 422, "invalid_field", RESERVED_ID);
    else if (rc == HOOKD_STORE_CONFLICT && op->pub.reserved_id && !op->pub.res.key_conflict)
      fail(&e, 409, "conflict", RESERVED_ID_REPEAT);
    else if (rc == HOOKD_STORE_NOTFOUND)
      fail(&e, 404, "not_found", "tenant not found");
    else if (rc == HOOKD_STORE_CONFLICT || rc == HOOKD_STORE_STATE)
      fail(&e, 409, rc == HOOKD_STORE_CONFLICT ? "conflict" : "invalid_state", "%s", msg);
    else if (rc == HOOKD_STORE_LIMIT)
      fail(&e, 422, "limit_exceeded", "%s", msg);
    else
      fail(&e, 503, "storage_unavailable", "the store could not complete the publish");
  }
  op->done(op->arg, &o);
}

int hookd_api_publish_submit(hookd_app *app, const char *tenant, json_t *body,
                             void (*done)(void *arg, const hookd_publish_outcome *o), void *arg,
                             hookd_publish_outcome *refused) {
  memset(refused, 0, sizeof *refused);
  perr e = {.o = refused};
  relay_pub_op *op = hookd_api_op_new_internal(sizeof *op, app, run_publish, reply_relay,
                                               "outbox");
  if (!op) {
    fail(&e, 503, "unavailable", "out of memory");
    return -1;
  }
  op->pub.base.cleanup = pub_cleanup;
  op->done = done;
  op->arg = arg;
  if (!json_is_object(body)) { /* (the relay builds it of a publish's members only) */
    fail(&e, 422, "invalid_field", "not a publish's fields");
    pub_cleanup(&op->pub.base);
    free(op);
    return -1;
  }
  if (prepare(&op->pub, app, tenant, body, &e) != 0) {
    pub_cleanup(&op->pub.base);
    free(op);
    return -1;
  }
  hookd_storeq_submit(app->store->writer, &op->pub.base.sop);
  return 0;
}

/* ---------- read ---------- */

typedef struct event_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64]; /* "" = any */
  char scope[512];                /* the key's tenants ("a,b"), when it is scoped */
  char id[160];
  hookd_event ev;
  hookd_delivery *dl;
  size_t n;
  bool loaded;
} event_op;

static void event_cleanup(hookd_api_op *base) {
  event_op *op = (event_op *)base;
  if (op->loaded) {
    hookd_event_free(&op->ev);
    hookd_deliveries_free(op->dl, op->n);
  }
}

static int run_event_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  event_op *op = (event_op *)base;
  if (op->tenant[0] || !op->scope[0]) {
    int rc = be->event_get(c, op->tenant[0] ? op->tenant : NULL, op->id, &op->ev, &op->dl, &op->n);
    op->loaded = rc == 0;
    return rc;
  }
  /* A scoped key looks the id up in its own tenants only: another tenant's event of the same id
   * neither answers nor makes the id ambiguous (which would tell that it exists). */
  int found = HOOKD_STORE_NOTFOUND;
  const char *cur = op->scope, *t;
  size_t len;
  char found_in[sizeof op->tenant] = "";
  while (hookd_scope_next(&cur, &t, &len)) {
    char tenant[sizeof op->tenant];
    snprintf(tenant, sizeof tenant, "%.*s", (int)(len < sizeof tenant ? len : sizeof tenant - 1), t);
    if (op->loaded && !strcmp(tenant, found_in)) continue; /* a scope naming a tenant twice */
    hookd_event ev;
    hookd_delivery *dl;
    size_t n;
    int rc = be->event_get(c, tenant, op->id, &ev, &dl, &n);
    if (rc == 0) {
      if (op->loaded) { /* in two of its own tenants */
        hookd_event_free(&ev);
        hookd_deliveries_free(dl, n);
        return HOOKD_STORE_CONFLICT;
      }
      op->ev = ev;
      op->dl = dl;
      op->n = n;
      op->loaded = true;
      found = 0;
      snprintf(found_in, sizeof found_in, "%s", tenant);
    } else if (rc != HOOKD_STORE_NOTFOUND) {
      return rc;
    }
  }
  return found;
}

/* An event's occurred_at: always set (1970-01-01T00:00:00Z is a time, not "absent"). */
static json_t *occurred_json(int64_t ms) {
  char buf[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(ms, buf);
  return json_string(buf);
}

/* An event as GET and the list show it (the list without payload and deliveries). */
static json_t *event_json(const hookd_event *e) {
  json_t *version = e->schema_version ? json_loads(e->schema_version, JSON_DECODE_ANY, NULL) : NULL;
  json_t *v = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id", e->id,
                        "tenant_id",
                   e->tenant_id, "type", e->type, "kind", e->inbound ? "inbound" : "outbound",
                   "schema_version", version ? version : json_null(), "occurred_at",
                   occurred_json(e->occurred_ms), "created_at", hookd_json_time(e->created_ms),
                   "expires_at", hookd_json_time(e->expires_ms), "payload_purged_at",
                   hookd_json_time(e->purged_ms), "ordering_key",
                   hookd_json_str_or_null(e->ordering_key), "ordering_version",
                   e->has_ordering_version ? json_integer(e->ordering_version) : json_null(),
                   "channels", hookd_json_csv(e->channels));
  /* a test event: the one endpoint it is for */
  if (v) json_object_set_new(v, "test_endpoint", hookd_json_str_or_null(e->test_endpoint));
  return v;
}

/* An inbound event's stored header lines ("name: value\n"…, written by the receive path) as the
 * object its forwards' headers make: a name given twice has its values joined by ", "; a
 * signature's value shown "[redacted]", as in a response excerpt (the forward carries it: a
 * viewer could replay a signed body — GitHub's and Shopify's signatures carry no time). A generic
 * HMAC source's signature header is named by its operator ("X-Webhook-Digest" holds none of the
 * words that mark a signature): `sig_header`, when not NULL, is masked as well. */
static json_t *meta_json(const char *meta, const char *sig_header) {
  json_t *o = json_object();
  for (const char *l = meta ? meta : ""; o && *l;) {
    const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
    const char *colon = memchr(l, ':', (size_t)(end - l));
    if (colon && colon > l) {
      size_t nlen = (size_t)(colon - l);
      const char *val = colon + 1 + (colon[1] == ' ');
      char name[256];
      snprintf(name, sizeof name, "%.*s", (int)(nlen < sizeof name ? nlen : sizeof name - 1), l);
      size_t vlen = (size_t)(end - val);
      if (hookd_redact_name_masked(name) || (sig_header && !strcasecmp(name, sig_header))) {
        val = "[redacted]";
        vlen = strlen(val);
      }
      json_t *had = json_object_getn(o, l, nlen);
      json_t *s = had ? json_sprintf("%s, %.*s", json_string_value(had), (int)vlen, val)
                      : json_stringn(val, vlen);
      if (!s || json_object_setn_new(o, l, nlen, s)) { /* out of memory: none rather than a part */
        json_decref(o);
        return json_null();
      }
    }
    l = nl ? nl + 1 : end;
  }
  return o ? o : json_null();
}

/* The signature header of the generic HMAC source an inbound event came through, copied into
 * out ("" if none: another provider, or the source deleted — its secrets are erased then). */
static void generic_sig_header(hookd_app *app, const char *meta, char *out, size_t cap) {
  out[0] = '\0';
  static const char key[] = "hookd-source-id: "; /* the receive path writes it first */
  const char *at = meta ? strstr(meta, key) : NULL;
  if (!at || (at != meta && at[-1] != '\n')) return;
  at += sizeof key - 1;
  char id[HOOKD_ID_MAX];
  size_t n = strcspn(at, "\n");
  if (n >= sizeof id) return;
  memcpy(id, at, n);
  id[n] = '\0';
  hookd_source_rt *rt = app->sources ? hookd_source_cache_get(app->sources, id) : NULL;
  if (!rt) return;
  if (rt->has_generic && rt->generic.mode == HOOKD_GENERIC_HMAC && rt->generic.header)
    snprintf(out, cap, "%s", rt->generic.header);
  hookd_source_rt_release(rt);
}

static void reply_event_get(hookd_api_op *base, int rc) {
  event_op *op = (event_op *)base;
  if (rc == HOOKD_STORE_CONFLICT) {
    hookd_req_error(base->req, 409, "ambiguous_id",
                    "several tenants use this event id: use /v1/tenants/{tenant}/events/{id}");
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, "event");
    return;
  }
  const hookd_principal *p = hookd_api_principal(base->req);
  if (p && !hookd_principal_has_tenant(p, op->ev.tenant_id)) {
    hookd_req_error(base->req, 404, "not_found", "event not found");
    return;
  }
  json_t *payload, *binary = NULL;
  bool lossy = false;
  if (op->ev.inbound) {
    /* the provider's request body as received: JSON as JSON, anything else (a form) as text,
     * and bytes that are not UTF-8 as base64 beside a null payload (null alone would read as a
     * JSON null, or a purged payload). JSON is read as the receive path reads it: a body hookd
     * took though it is not I-JSON (a \u0000, a lone surrogate, a key twice, an integer beyond
     * 64 bits; docs/inbound.md) is still JSON, shown with payload_lossy where the value shown
     * is not the one the bytes hold (a strict read made it a string of its text). */
    char err[HOOKD_JSON_ERR_MAX];
    payload = op->ev.body_len ? hookd_json_parse_body(op->ev.body, op->ev.body_len,
                                                      &base->app->json_limits, &lossy, NULL, err)
                              : NULL;
    /* deeper than --max-json-depth: kept as bytes, but jansson (its own bound) reads it */
    if (!payload) payload = json_loadb(op->ev.body, op->ev.body_len, JSON_DECODE_ANY, NULL);
    if (!payload) payload = json_stringn(op->ev.body, op->ev.body_len); /* NULL: not UTF-8 */
    char *b64 = !payload && op->ev.body ? malloc(HOOKD_B64_ENCLEN(op->ev.body_len)) : NULL;
    if (b64) {
      hookd_b64_encode((const unsigned char *)op->ev.body, op->ev.body_len, b64);
      binary = json_string(b64);
      free(b64);
    }
  } else { /* the envelope's data */
    json_t *env = json_loadb(op->ev.body, op->ev.body_len, 0, NULL);
    payload = env ? json_incref(json_object_get(env, "data")) : NULL;
    json_decref(env);
  }
  json_t *dl = json_array();
  for (size_t i = 0; i < op->n; i++)
    json_array_append_new(dl, hookd_api_delivery_json(op->base.app, &op->dl[i]));
  json_t *v = event_json(&op->ev);
  if (op->ev.inbound) {
    json_object_set_new(v, "content_type", hookd_json_str_or_null(op->ev.content_type));
    char sig_header[256];
    generic_sig_header(base->app, op->ev.meta, sig_header, sizeof sig_header);
    json_object_set_new(v, "headers", meta_json(op->ev.meta, sig_header[0] ? sig_header : NULL));
  }
  json_object_set_new(v, "payload", payload ? payload : json_null());
  if (lossy) json_object_set_new(v, "payload_lossy", json_true());
  if (binary) json_object_set_new(v, "payload_base64", binary);
  json_object_set_new(v, "deliveries", dl);
  hookd_req_reply_json(base->req, 200, v);
}

void hookd_api_event_get(hookd_req *r, hookd_app *app) {
  event_op *op = hookd_api_op_new(sizeof *op, r, app, run_event_get, reply_event_get);
  if (!op) return;
  op->base.cleanup = event_cleanup;
  bool scoped = hookd_req_param(r, 1) != NULL;
  if (scoped) snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, scoped ? 1 : 0));
  const hookd_principal *p = hookd_api_principal(r);
  if (!scoped && p && p->tenants[0]) snprintf(op->scope, sizeof op->scope, "%s", p->tenants);
  hookd_api_submit(&op->base, false);
}

/* ---------- list ---------- */

typedef struct list_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64];
  char type[272];
  char channel[129];
  hookd_event_filter f;
  hookd_event *list;
  size_t n;
} list_op;

static void list_cleanup(hookd_api_op *base) {
  list_op *op = (list_op *)base;
  if (op->list) hookd_events_free(op->list, op->n);
  op->list = NULL;
  op->n = 0;
}

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  list_op *op = (list_op *)base;
  list_cleanup(base);
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  return rc ? rc : be->event_list(c, &op->f, &op->list, &op->n);
}

static void reply_list(hookd_api_op *base, int rc) {
  list_op *op = (list_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "events");
    return;
  }
  size_t shown = op->n > (size_t)op->f.limit - 1 ? (size_t)op->f.limit - 1 : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++) json_array_append_new(data, event_json(&op->list[i]));
  int64_t next = op->n > shown ? op->list[shown - 1].seq : 0;
  hookd_req_reply_json(base->req, 200,
                       hookd_api_seq_page_body(base->app, 'e', op->tenant, data, next));
}

void hookd_api_event_list(hookd_req *r, hookd_app *app) {
  int limit = hookd_api_limit(r, 50, 500);
  if (limit < 0) return;
  const char *kind = hookd_req_query(r, "kind"), *type;
  int64_t since_ms, until_ms;
  if (hookd_api_type_time_query(r, &type, &since_ms, &until_ms) != 0) return;
  int k = !kind ? 0 : !strcmp(kind, "outbound") ? 1 : !strcmp(kind, "inbound") ? 2 : -1;
  if (k < 0) {
    hookd_req_field_error(r, 400, "invalid_parameter", "kind", "kind must be outbound or inbound");
    return;
  }
  const char *channel = hookd_req_query(r, "channel");
  if (channel && !hookd_id_valid(channel, 128)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "channel",
                          "channel must be a channel name (1 to 128 of letters, digits, '_', "
                          "'-', '.', ':')");
    return;
  }
  long long before;
  if (hookd_api_before(r, app, 'e', hookd_req_param(r, 0), &before) != 0) return;
  list_op *op = hookd_api_op_new(sizeof *op, r, app, run_list, reply_list);
  if (!op) return;
  op->base.cleanup = list_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->type, sizeof op->type, "%s", type ? type : "");
  op->f.tenant_id = op->tenant;
  op->f.event_type = type ? op->type : NULL;
  op->f.kind = k;
  snprintf(op->channel, sizeof op->channel, "%s", channel ? channel : "");
  op->f.channel = channel ? op->channel : NULL;
  op->f.since_ms = since_ms;
  op->f.until_ms = until_ms;
  op->f.before_seq = before;
  op->f.limit = limit + 1; /* one more tells whether there is a next page */
  if (type || kind || channel || since_ms || until_ms)
    hookd_api_submit_scan(&op->base); /* it may walk much of the tenant's events */
  else
    hookd_api_submit(&op->base, false);
}

/* ---------- a test event to one endpoint ---------- */

static int run_test_event(hookd_store_conn *c, const hookd_store_backend *be,
                          hookd_api_op *base) {
  pub_op *op = (pub_op *)base;
  int rc = run_publish(c, be, base);
  /* a retry of a test already sent (its Idempotency-Key) did nothing: nothing to audit */
  return rc || op->res.duplicate ? rc
                                 : hookd_api_audit(base, c, be, "endpoint.test", op->only_ep,
                                                   op->tenant, op->event_id);
}

static void reply_test_event(hookd_api_op *base, int rc) {
  if (rc == HOOKD_STORE_STATE && !strcmp(base->err, "endpoint")) { /* none in this tenant */
    hookd_req_error(base->req, 404, "not_found", "endpoint not found");
    return;
  }
  reply_publish(base, rc);
}

void hookd_api_endpoint_test(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"type", "payload", NULL};
  if (hookd_api_store_overloaded(r, app)) return;
  size_t body_len;
  hookd_req_body(r, &body_len);
  json_t *body = body_len ? hookd_api_body_object(r, app) : json_object();
  if (!body) return;
  const char *type = "hookd.test";
  json_t *payload = json_object_get(body, "payload");
  json_t *dflt = payload ? NULL : json_pack("{s:s}", "message", "a test event from hookd");
  pub_op *op = NULL;
  if (!hookd_api_known_members(r, body, NULL, names)) goto done;
  /* an operator sends hookd's own test event: a type or payload of one's choosing, signed with
   * the endpoint's secret, is an event its receiver cannot tell from a real one — a publish */
  const hookd_principal *who = hookd_api_principal(r);
  if ((payload || json_object_get(body, "type")) && who && who->role != HOOKD_ROLE_ADMIN) {
    hookd_api_forbid(r, /* (counted and logged as every refusal: it was not, a review) */
                     "an operator's key sends hookd's own test event (type hookd.test, its "
                     "default payload): a type or payload of one's choosing takes an admin's key");
    goto done;
  }
  if (hookd_json_get_str(body, "type", &type) != (json_object_get(body, "type") ? 0 : 1) ||
      !type || !valid_type(type)) { /* (null is no type) */
    hookd_req_error(r, 422, "invalid_field",
                    "type must be 1-256 characters of letters, digits, '_', '-', '.', ':'");
    goto done;
  }
  /* a retry after a lost answer sends no second test: the key as on a publish, kept with the
   * event (the same key for another endpoint, type or payload is 409) */
  const char *idem;
  if (!hookd_api_idempotency_key(r, &idem)) goto done;
  if (!(op = hookd_api_op_new(sizeof *op, r, app, run_test_event, reply_test_event))) goto done;
  op->base.cleanup = pub_cleanup;
  int64_t now = hookd_now_ms();
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->only_ep, sizeof op->only_ep, "%s", hookd_req_param(r, 1));
  snprintf(op->type, sizeof op->type, "%s", type);
  if (idem) snprintf(op->idem, sizeof op->idem, "%s", idem);
  hookd_id_new("evt", now, op->event_id);
  int brc = payload || dflt ? envelope(op, app, now, payload ? payload : dflt) : HOOKD_BUF_NOMEM;
  if (!brc && idem) { /* (test_endpoint: no publish's body has it, so no publish is the same) */
    json_t *request = json_pack("{s:o,s:s,s:O}", "test_endpoint",
                                hookd_json_str_or_null(op->only_ep), "type", type, "payload",
                                payload ? payload : dflt);
    brc = request_hash(request, app->cfg->max_body_bytes * 6 + 1024, op->hash);
    json_decref(request);
  }
  if (brc) {
    serialise_failed(&(perr){.r = r}, brc);
    pub_cleanup(&op->base);
    free(op);
    goto done;
  }
  fill_req(op, app, now, now);
  op->req.only_endpoint = op->only_ep;
  op->base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT; /* refuses before writing, as publish */
  hookd_api_submit(&op->base, true);
done:
  json_decref(dflt);
  json_decref(body);
}

/* ---------- payload delete ---------- */

typedef struct payload_del_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64];
  char id[160];
  int64_t seq, purged_ms;
  int cancelled;
  bool now; /* emptied by this request (not before) */
} payload_del_op;

static int run_payload_delete(hookd_store_conn *c, const hookd_store_backend *be,
                              hookd_api_op *base) {
  payload_del_op *op = (payload_del_op *)base;
  int64_t now = hookd_now_ms();
  op->now = false; /* (a redone batch runs the op again) */
  int rc = be->event_payload_delete(c, op->tenant, op->id, now, &op->seq, &op->purged_ms,
                                    &op->cancelled);
  if (rc || op->purged_ms != now) return rc; /* emptied before: nothing done, nothing audited */
  op->now = true;
  char detail[64];
  snprintf(detail, sizeof detail, "cancelled_deliveries=%d", op->cancelled);
  return hookd_api_audit(base, c, be, "event.payload_delete", op->id, op->tenant, detail);
}

static void reply_payload_delete(hookd_api_op *base, int rc) {
  payload_del_op *op = (payload_del_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "event");
    return;
  }
  /* what this node claimed of it and has not sent is given back, not sent; a lane behind a
   * cancelled one, or behind a DEAD head whose payload is gone (a blocking lane's head holds it
   * only while a replay could send it), goes on now. (Emptied before: done then — a repeated
   * DELETE made the dispatcher walk every endpoint's queues each time, a review.) */
  if (op->now) {
    hookd_dispatcher_event_purged(base->app->disp, op->seq);
    hookd_dispatcher_rescan(base->app->disp);
  }
  if (op->cancelled > 0) HOOKD_ADD(cancelled, (uint64_t)op->cancelled);
  HLOG(HOOKD_LOG_INFO, "event.payload_deleted", KV_S("event_id", op->id),
       KV_S("tenant_id", op->tenant), KV_I("cancelled", op->cancelled),
       KV_S("actor", base->actor[0] ? base->actor : NULL));
  hookd_req_reply_json(base->req, 200,
                       json_pack("{s:s,s:o,s:i}", "id", op->id, "payload_purged_at",
                                 hookd_json_time(op->purged_ms), "cancelled_deliveries",
                                 op->cancelled));
}

void hookd_api_event_payload_delete(hookd_req *r, hookd_app *app) {
  char reason[256];
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  payload_del_op *op =
      hookd_api_op_new(sizeof *op, r, app, run_payload_delete, reply_payload_delete);
  if (!op) return;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  hookd_api_submit(&op->base, true);
}

/* ---------- republish: "send as a new event" (O12) ---------- */

/* A new event with the source event's type, payload and occurred_at, under a new id (the
 * caller's, which makes a retry safe, or a generated one): fanned out to the endpoints
 * subscribed now, and received as new — unlike a replay, which keeps the event id so that
 * receivers deduplicate it. The source is read on the reader, the new event published and
 * audited (event.republish) on the writer. */
typedef struct repub_op {
  pub_op pub; /* first: the op becomes a publish */
  char source[160];
  bool caller_id;
  hookd_event ev;
  bool loaded;
  bool purged_since; /* the source's payload deleted after the reader read it */
  bool gone_since;   /* the source deleted (event retention) after the reader read it */
} repub_op;

static void repub_cleanup(hookd_api_op *base) {
  repub_op *op = (repub_op *)base;
  if (op->loaded) hookd_event_free(&op->ev);
  pub_cleanup(base);
}

static int run_republish(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  repub_op *op = (repub_op *)base;
  op->pub.req.existing_only = op->pub.reserved_id; /* (a second run: as reply_source set it,
                                                    * not as a rolled-back first run did) */
  /* the source again, on the writer: a payload deleted (DELETE …/payload) since the reader
   * read it is not sent again under a new id — the delete answered first; its republish is
   * then as one made after it (reply_republish) */
  hookd_event now_ev;
  int rc = be->event_get(c, op->pub.tenant, op->source, &now_ev, NULL, NULL);
  if (rc && rc != HOOKD_STORE_NOTFOUND) return rc;
  op->gone_since = rc == HOOKD_STORE_NOTFOUND;
  op->purged_since = op->gone_since || now_ev.purged_ms;
  if (!rc) hookd_event_free(&now_ev);
  if (op->purged_since) {
    if (!op->caller_id && !op->pub.idem[0]) return HOOKD_STORE_NOTFOUND;
    op->pub.req.existing_only = true; /* a retry of a republish made before still answered */
  }
  rc = run_publish(c, be, base);
  if (op->purged_since) return rc;
  if (rc || op->pub.res.duplicate) return rc;
  char detail[200];
  snprintf(detail, sizeof detail, "republished from %s", op->source);
  return hookd_api_audit(base, c, be, "event.republish", op->pub.event_id, op->pub.tenant, detail);
}

static int run_source(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  repub_op *op = (repub_op *)base;
  if (op->loaded) hookd_event_free(&op->ev);
  int rc = be->event_get(c, op->pub.tenant, op->source, &op->ev, NULL, NULL);
  op->loaded = rc == 0;
  return rc;
}

/* The answer to republishing a purged event: a repeat of a republish made before the purge is
 * answered as a duplicate; anything else is refused. */
static void reply_purged(hookd_api_op *base, int rc) {
  if (rc == HOOKD_STORE_NOTFOUND || rc == HOOKD_STORE_STATE) { /* (STATE: no such republish) */
    hookd_req_error(base->req, 409, "invalid_state",
                    "its payload was deleted (DELETE …/payload) or purged"
                    " (--payload-retention-s): nothing left to send");
    return;
  }
  reply_publish(base, rc);
}

/* The answer to republishing an event event retention deleted: a repeat of a republish made
 * before is answered as a duplicate; anything else is 404, as before — an id another event
 * has too (there is no source to be in conflict about); an Idempotency-Key sent before with
 * another request stays the caller's 409, as for any source. */
static void reply_gone(hookd_api_op *base, int rc) {
  bool key_reused = rc == HOOKD_STORE_CONFLICT && ((pub_op *)base)->res.key_conflict;
  if (rc == HOOKD_STORE_NOTFOUND || rc == HOOKD_STORE_STATE ||
      (rc == HOOKD_STORE_CONFLICT && !key_reused)) {
    hookd_req_error(base->req, 404, "not_found", "event not found");
    return;
  }
  reply_publish(base, rc);
}

static void reply_republish(hookd_api_op *base, int rc) {
  repub_op *op = (repub_op *)base;
  if (op->gone_since) reply_gone(base, rc); /* as a republish read after the delete */
  else if (op->purged_since) reply_purged(base, rc);
  else reply_publish(base, rc);
}

static void reply_source(hookd_api_op *base, int rc) {
  repub_op *op = (repub_op *)base;
  hookd_app *app = base->app;
  if (rc && rc != HOOKD_STORE_NOTFOUND) {
    hookd_api_store_error(base, rc, "event");
    return;
  }
  if (!rc && op->ev.inbound) {
    hookd_req_error(base->req, 409, "invalid_state",
                    "an inbound event is the provider's request: replay its forwards instead");
    return;
  }
  if (!rc && op->ev.test_endpoint) { /* it is for one endpoint: not fanned out to the others */
    hookd_req_error(base->req, 409, "invalid_state",
                    "a test event goes to its own endpoint alone: send another test instead");
    return;
  }
  int64_t now = hookd_now_ms();
  if (!op->caller_id) hookd_id_new("evt", now, op->pub.event_id);
  if (!rc) snprintf(op->pub.type, sizeof op->pub.type, "%s", op->ev.type);
  /* "the same request" for a repeated id or Idempotency-Key: the same source (and the same new
   * id, when the caller chose it; a generated one differs on every retry) */
  json_t *request = op->caller_id ? json_pack("{s:s,s:s}", "id", op->pub.event_id,
                                              "republish_of", op->source)
                                  : json_pack("{s:s}", "republish_of", op->source);
  int brc = request_hash(request, 1024, op->pub.hash);
  json_decref(request);
  if (rc) { /* no such event, or event retention deleted it */
    if (brc || (!op->caller_id && !op->pub.idem[0])) {
      reply_gone(base, HOOKD_STORE_NOTFOUND);
      return;
    }
    /* a retry of a republish made before the delete still gets that republish's answer */
    fill_req(&op->pub, app, 0, now);
    op->pub.req.existing_only = true;
    op->pub.base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT;
    hookd_api_chain(base, run_publish, reply_gone, HOOKD_API_WRITER);
    return;
  }
  if (!brc && op->ev.purged_ms) {
    /* Nothing left to send, but a retry of a republish made before the purge (the same id or
     * Idempotency-Key) still gets that republish's answer: the writer looks for it. */
    if (!op->caller_id && !op->pub.idem[0]) {
      reply_purged(base, HOOKD_STORE_NOTFOUND);
      return;
    }
    fill_req(&op->pub, app, op->ev.occurred_ms, now);
    op->pub.req.existing_only = true;
    op->pub.base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT;
    hookd_api_chain(base, run_publish, reply_purged, HOOKD_API_WRITER);
    return;
  }
  json_t *env = json_loadb(op->ev.body, op->ev.body_len, 0, NULL);
  json_t *payload = env ? json_object_get(env, "data") : NULL;
  if (!payload) brc = -1;
  /* the payload's schema version goes with it (as stored: checked when it was published) */
  if (!brc && op->ev.schema_version)
    snprintf(op->pub.schema_version, sizeof op->pub.schema_version, "%s", op->ev.schema_version);
  /* and to the same channels: the endpoints that take them now */
  if (!brc && op->ev.channels && !(op->pub.channels = strdup(op->ev.channels))) brc = -1;
  if (!brc) brc = envelope(&op->pub, app, op->ev.occurred_ms, payload);
  if (brc) json_decref(env);
  if (brc == HOOKD_BUF_TOOBIG) { /* published under a larger --max-body-bytes: as a publish */
    hookd_req_error(base->req, 413, "invalid_payload",
                    "the source event's payload is too large to send again under "
                    "--max-body-bytes (%zu)",
                    app->cfg->max_body_bytes);
    return;
  }
  if (brc) {
    hookd_req_error(base->req, 500, "internal", "the source event's payload cannot be sent again");
    return;
  }
  fill_req(&op->pub, app, op->ev.occurred_ms, now);
  op->pub.req.payload = payload; /* parsed here, on the reader's thread: not again on the writer */
  keep_payload(&op->pub, base->req, env);
  op->pub.reserved_id = op->caller_id && hookd_id_reserved(op->pub.event_id);
  op->pub.req.existing_only = op->pub.reserved_id;
  op->pub.base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT; /* refuses before writing, as publish */
  hookd_api_chain(base, run_republish, reply_republish, HOOKD_API_WRITER);
}

void hookd_api_event_republish(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"id", "reason", NULL};
  if (hookd_api_store_overloaded(r, app)) return;
  size_t body_len;
  hookd_req_body(r, &body_len);
  json_t *body = body_len ? hookd_api_body_object(r, app) : NULL;
  if (body_len && !body) return;
  const char *id = NULL, *reason = NULL;
  const char *idem = NULL;
  repub_op *op = NULL;
  if (body && !hookd_api_known_members(r, body, NULL, names)) goto done;
  if (body && (hookd_json_get_str(body, "id", &id) < 0 || (id && !hookd_id_valid(id, 128)))) {
    hookd_req_error(r, 422, "invalid_field",
                    "id must be 1-128 characters of letters, digits, '_', '-', '.', ':'");
    goto done;
  }
  if (!hookd_api_body_reason(r, body, &reason)) goto done;
  if (!hookd_api_idempotency_key(r, &idem)) goto done;
  op = hookd_api_op_new(sizeof *op, r, app, run_source, reply_source);
  if (!op) goto done;
  op->pub.base.cleanup = repub_cleanup;
  snprintf(op->pub.tenant, sizeof op->pub.tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->source, sizeof op->source, "%s", hookd_req_param(r, 1));
  if (id) {
    snprintf(op->pub.event_id, sizeof op->pub.event_id, "%s", id);
    op->caller_id = true;
  }
  if (idem) snprintf(op->pub.idem, sizeof op->pub.idem, "%s", idem);
  if (reason) snprintf(op->pub.base.reason, sizeof op->pub.base.reason, "%s", reason);
  hookd_api_submit(&op->pub.base, false);
done:
  json_decref(body);
}

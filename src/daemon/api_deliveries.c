/* api_deliveries.c — finding and replaying deliveries.
 *   GET  /v1/deliveries/{id}, /v1/tenants/{t}/deliveries/{id}   the delivery, every attempt
 *   GET  /v1/tenants/{t}/deliveries?state=&endpoint=&event=&event_type=&since=&until=&limit=&after=
 *        newest first (by type or time: on the scan executor, which may walk many rows)
 *   POST /v1/deliveries/{id}/replay (or under /v1/tenants/{t}/)   same ids, a new attempt
 *   POST /v1/tenants/{t}/events/{id}/deliveries {endpoint, reason?}   the event's delivery to
 *        an endpoint that has none (published while it was disabled, or before it was made) */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

typedef struct dl_op {
  hookd_api_op base;
  char id[HOOKD_ID_MAX + 64];
  hookd_principal who;     /* copy: the scope check runs on the executor thread */
  bool scoped;
  hookd_delivery d;
  hookd_attempt *att;
  size_t n_att;
  bool loaded;
  bool retried_now; /* replay of a delivery still scheduled: its next attempt brought forward */
  bool already_due; /* … which was due already: nothing changed, nothing audited */
  hookd_kept k;     /* replay: an Idempotency-Key's answer */
  /* listing */
  char tenant[HOOKD_ID_MAX + 64], endpoint[HOOKD_ID_MAX + 64], event[160], after[HOOKD_ID_MAX + 64];
  char event_type[272];
  hookd_delivery_filter f;
  hookd_delivery *list;
  size_t n;
} dl_op;

static void dl_cleanup(hookd_api_op *base) {
  dl_op *op = (dl_op *)base;
  if (op->loaded) hookd_delivery_free(&op->d);
  if (op->att) hookd_attempts_free(op->att, op->n_att);
  if (op->list) hookd_deliveries_free(op->list, op->n);
  free(op->k.answer);
  op->k.answer = NULL;
}

static dl_op *new_op(hookd_req *r, hookd_app *app,
                     int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                     void (*reply)(hookd_api_op *, int)) {
  dl_op *op = hookd_api_op_new(sizeof *op, r, app, run, reply);
  if (!op) return NULL;
  op->base.cleanup = dl_cleanup;
  const hookd_principal *p = hookd_api_principal(r);
  if (p) {
    op->who = *p;
    op->scoped = true;
  }
  return op;
}

/* The delivery a route names: /v1/deliveries/{id}, or /v1/tenants/{t}/deliveries/{id} (then
 * one of that tenant only). */
static void take_id(dl_op *op, hookd_req *r) {
  bool in_tenant = hookd_req_param(r, 1) != NULL;
  if (in_tenant) snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, in_tenant ? 1 : 0));
}

/* A delivery outside the key's tenants, or the route's, does not exist, as far as that key can
 * tell. */
static int hide_foreign(dl_op *op) {
  if ((op->scoped && !hookd_principal_has_tenant(&op->who, op->d.tenant_id)) ||
      (op->tenant[0] && strcmp(op->tenant, op->d.tenant_id) != 0)) {
    hookd_delivery_free(&op->d);
    op->loaded = false;
    return HOOKD_STORE_NOTFOUND;
  }
  return 0;
}

/* ---------- get ---------- */

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  dl_op *op = (dl_op *)base;
  int rc = be->delivery_get(c, op->id, &op->d, &op->att, &op->n_att);
  op->loaded = rc == 0;
  return rc ? rc : hide_foreign(op);
}

static void reply_get(hookd_api_op *base, int rc) {
  dl_op *op = (dl_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "delivery");
    return;
  }
  json_t *v = hookd_api_delivery_json(op->base.app, &op->d);
  json_t *att = json_array();
  for (size_t i = 0; i < op->n_att; i++)
    json_array_append_new(att, hookd_json_attempt(&op->att[i], op->d.id));
  json_object_set_new(v, "attempts", att);
  hookd_req_reply_json(base->req, 200, v);
}

void hookd_api_delivery_get(hookd_req *r, hookd_app *app) {
  dl_op *op = new_op(r, app, run_get, reply_get);
  if (!op) return;
  take_id(op, r);
  hookd_api_submit(&op->base, false);
}

/* ---------- list ---------- */

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  dl_op *op = (dl_op *)base;
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  if (!rc) rc = be->delivery_list(c, &op->f, &op->list, &op->n);
  /* nothing for an endpoint: none left, or a mistyped id (404, as a mistyped tenant); for an
   * event, a mistyped id too (a review: it read as "no deliveries") */
  if (!rc && !op->n && op->f.endpoint_id &&
      (rc = be->ever_made(c, HOOKD_MADE_ENDPOINT, op->tenant, op->f.endpoint_id)) ==
          HOOKD_STORE_NOTFOUND)
    snprintf(base->err, sizeof base->err, "endpoint");
  if (!rc && !op->n && op->f.event_id &&
      (rc = be->ever_made(c, HOOKD_MADE_EVENT, op->tenant, op->f.event_id)) ==
          HOOKD_STORE_NOTFOUND)
    snprintf(base->err, sizeof base->err, "event");
  return rc;
}

static void reply_list(hookd_api_op *base, int rc) {
  dl_op *op = (dl_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "deliveries");
    return;
  }
  size_t shown = op->n > (size_t)op->f.limit - 1 ? (size_t)op->f.limit - 1 : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++)
    json_array_append_new(data, hookd_api_delivery_json(op->base.app, &op->list[i]));
  json_t *next = op->n > shown ? json_string(op->list[shown - 1].id) : json_null();
  hookd_req_reply_json(base->req, 200, json_pack("{s:o,s:o}", "data", data, "next_cursor", next));
}

void hookd_api_delivery_list(hookd_req *r, hookd_app *app) {
  /* the cursor is the last delivery id of a page: anything else (another list's cursor) would
   * be read as a position and list from the start again, or nothing */
  int limit;
  char after[sizeof ((dl_op *)0)->after];
  if (hookd_api_page(r, "dlv", &limit, after, sizeof after) != 0) return;
  const char *state = hookd_req_query(r, "state"), *ep = hookd_req_query(r, "endpoint"),
             *ev = hookd_req_query(r, "event"), *type;
  int64_t since_ms, until_ms;
  if (hookd_api_type_time_query(r, &type, &since_ms, &until_ms) != 0) return;
  /* one state, or several comma-separated (retrying,dead) */
  unsigned states = 0;
  for (const char *p = state; p;) {
    const char *c = strchr(p, ',');
    char one[16];
    size_t len = c ? (size_t)(c - p) : strlen(p);
    hookd_dstate st;
    if (len >= sizeof one || (snprintf(one, sizeof one, "%.*s", (int)len, p),
                              hookd_dstate_parse(one, &st) != 0)) {
      hookd_req_field_error(r, 400, "invalid_parameter", "state",
                            "state must be one or more (comma-separated) of pending, retrying, "
                            "delivered, dead, cancelled, unknown");
      return;
    }
    states |= 1u << st;
    p = c ? c + 1 : NULL;
  }
  if ((ep && !hookd_id_valid(ep, 128)) || (ev && !hookd_id_valid(ev, 128))) {
    const char *bad = ep && !hookd_id_valid(ep, 128) ? "endpoint" : "event";
    hookd_req_field_error(r, 400, "invalid_parameter", bad, "%s must be an id", bad);
    return;
  }
  dl_op *op = new_op(r, app, run_list, reply_list);
  if (!op) return;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->endpoint, sizeof op->endpoint, "%s", ep ? ep : "");
  snprintf(op->event, sizeof op->event, "%s", ev ? ev : "");
  memcpy(op->after, after, sizeof after);
  op->f.tenant_id = op->tenant;
  op->f.endpoint_id = ep ? op->endpoint : NULL;
  op->f.event_id = ev ? op->event : NULL;
  op->f.states = states;
  op->f.after_id = after[0] ? op->after : NULL;
  snprintf(op->event_type, sizeof op->event_type, "%s", type ? type : "");
  op->f.event_type = type ? op->event_type : NULL;
  op->f.since_ms = since_ms;
  op->f.until_ms = until_ms;
  op->f.limit = limit + 1; /* one more tells whether there is a next page */
  /* by type, time, state or endpoint it may walk much of the tenant's deliveries (no index
   * orders them by id within a state or an endpoint): on the scan connection, so that the API's
   * other reads do not wait for it; one event's deliveries are an index lookup */
  if (type || since_ms || until_ms || (!ev && (states || ep)))
    hookd_api_submit_scan(&op->base);
  else
    hookd_api_submit(&op->base, false);
}

/* A create sent again: the delivery as it stands now, with what holds it on this node (`held`,
 * as GET shows it), in place of the text kept under the Idempotency-Key. */
static void answer_now(dl_op *op) {
  json_t *v = hookd_api_delivery_json(op->base.app, &op->d);
  char *text = v ? hookd_json_text_shown(v) : NULL;
  json_decref(v);
  if (!text) return; /* (out of memory: the kept text, as it was) */
  free(op->k.answer);
  op->k.answer = text;
}

/* ---------- replay ---------- */

static int run_replay(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  dl_op *op = (dl_op *)base;
  if (op->loaded) hookd_delivery_free(&op->d); /* a second run (its batch redone) */
  op->loaded = false;
  int rc = be->delivery_get(c, op->id, &op->d, NULL, NULL);
  op->loaded = rc == 0;
  if (rc || (rc = hide_foreign(op)) != 0) return rc; /* (the path's tenant: first, as a key's
                                                      * kept answer does not name it) */
  /* a request sent again with its Idempotency-Key gets its answer, and sends nothing again */
  rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  int64_t now = hookd_now_ms();
  op->retried_now = op->d.state == HOOKD_DS_PENDING || op->d.state == HOOKD_DS_RETRYING;
  /* due already (waiting for a slot, its endpoint's rate or breaker): the store changes nothing
   * and answers it as it stands — not an action to audit (a review: each repeat was a row) */
  op->already_due = op->retried_now && op->d.next_attempt_ms <= now;
  hookd_delivery_free(&op->d);
  op->loaded = false;
  rc = be->delivery_replay(c, op->id, now, false, &op->d);
  op->loaded = rc == 0;
  if (!rc && !op->already_due)
    rc = hookd_api_audit(base, c, be, op->retried_now ? "delivery.retry_now" : "delivery.replay",
                         op->d.id, op->d.tenant_id, op->d.event_id);
  /* with what holds it, as GET shows it (a replay into an open breaker is not "sent now": a
   * review); kept so: a request sent again gets this first answer as it was */
  return rc ? rc
            : hookd_kept_store(&op->k, c, be, 202, hookd_api_delivery_json(base->app, &op->d));
}

static void reply_replay(hookd_api_op *base, int rc) {
  dl_op *op = (dl_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "delivery");
    return;
  }
  if (op->k.replayed) {
    hookd_kept_reply(&op->k, base->req);
    return;
  }
  if (!op->retried_now) HOOKD_INC(replays);
  hookd_dispatcher_hint(base->app->disp, op->d.endpoint_id, op->d.next_attempt_ms);
  HLOG(HOOKD_LOG_INFO,
       op->already_due   ? "delivery.already_due"
       : op->retried_now ? "delivery.retried_now"
                         : "delivery.replayed",
       KV_S("delivery_id", op->d.id),
       KV_S("event_id", op->d.event_id), KV_S("tenant_id", op->d.tenant_id),
       KV_S("endpoint_id", op->d.endpoint_id), KV_S("actor", base->actor[0] ? base->actor : NULL));
  hookd_kept_reply(&op->k, base->req);
}

void hookd_api_delivery_replay(hookd_req *r, hookd_app *app) {
  /* it takes a reason alone (as the Hookd-Reason header): another field (a "send as a new
   * event" flag, say) is refused, not ignored */
  char reason[256];
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  dl_op *op = new_op(r, app, run_replay, reply_replay);
  if (!op) return;
  take_id(op, r);
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  if (!hookd_kept_prepare(r, app, &op->k, "delivery.replay", op->id, reason[0] ? reason : NULL,
                          NULL, false)) {
    dl_cleanup(&op->base);
    free(op);
    return;
  }
  hookd_api_submit(&op->base, true);
}

/* ---------- an event's delivery to one more endpoint ---------- */

static int run_deliver(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  dl_op *op = (dl_op *)base;
  if (op->loaded) hookd_delivery_free(&op->d); /* a second run (its batch redone) */
  op->loaded = false;
  /* sent again with its Idempotency-Key: its answer (before, a 409 "replay it" — and a client
   * following it sent the delivery twice: a review) */
  int rc = hookd_kept_lookup(&op->k, base, c, be);
  if (!rc && op->k.replayed) { /* a create's answer: the delivery it made as it is now */
    char made[HOOKD_ID_MAX + 64];
    if (!hookd_kept_id(&op->k, made, sizeof made)) return HOOKD_STORE_ERR;
    rc = be->delivery_get(c, made, &op->d, NULL, NULL);
    op->loaded = rc == 0;
    if (rc == HOOKD_STORE_NOTFOUND) {
      snprintf(base->err, sizeof base->err,
               "this Idempotency-Key's request created delivery %s, gone since (its event's "
               "retention)", made);
      return HOOKD_STORE_STATE;
    }
    return rc;
  }
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  rc = be->event_deliver(c, op->tenant, op->event, op->endpoint, hookd_now_ms(), &op->d);
  op->loaded = rc == 0 || rc == HOOKD_STORE_EXISTS;
  if (!rc)
    rc = hookd_api_audit(base, c, be, "delivery.create", op->d.id, op->tenant, op->d.event_id);
  return rc ? rc
            : hookd_kept_store(&op->k, c, be, 201, hookd_api_delivery_json(base->app, &op->d));
}

static void reply_deliver(hookd_api_op *base, int rc) {
  dl_op *op = (dl_op *)base;
  if (rc) { /* "event" or "endpoint" not found; else the store's words */
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "delivery");
    return;
  }
  if (op->k.replayed) {
    answer_now(op); /* (the delivery as it is now, as a create's answer is) */
    hookd_kept_reply(&op->k, base->req);
    return;
  }
  HOOKD_INC(deliveries_created);
  hookd_dispatcher_hint(base->app->disp, op->d.endpoint_id, op->d.next_attempt_ms);
  HLOG(HOOKD_LOG_INFO, "delivery.created", KV_S("delivery_id", op->d.id),
       KV_S("event_id", op->d.event_id), KV_S("tenant_id", op->d.tenant_id),
       KV_S("endpoint_id", op->d.endpoint_id), KV_S("actor", base->actor[0] ? base->actor : NULL));
  hookd_kept_reply(&op->k, base->req);
}

void hookd_api_event_deliver(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"endpoint", "reason", NULL};
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  const char *ep = NULL, *reason = NULL;
  dl_op *op = NULL;
  if (!hookd_api_known_members(r, body, NULL, names) || !hookd_api_body_reason(r, body, &reason))
    goto done;
  if (!json_object_get(body, "endpoint")) {
    hookd_req_error(r, 422, "missing_field", "endpoint is required: the id of an endpoint of "
                                             "this tenant");
    goto done;
  }
  if (hookd_json_get_str(body, "endpoint", &ep) != 0 || !hookd_id_valid(ep, 128)) {
    hookd_req_error(r, 422, "invalid_field", "endpoint must be an endpoint id");
    goto done;
  }
  if (!(op = new_op(r, app, run_deliver, reply_deliver))) goto done;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->event, sizeof op->event, "%s", hookd_req_param(r, 1));
  snprintf(op->endpoint, sizeof op->endpoint, "%s", ep);
  if (reason) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  char record[sizeof op->tenant + sizeof op->event]; /* (the path's: the body names neither) */
  snprintf(record, sizeof record, "%s/%s", op->tenant, op->event);
  if (!hookd_kept_prepare(r, app, &op->k, "delivery.create", record, reason, body, false)) {
    dl_cleanup(&op->base);
    free(op);
    goto done;
  }
  hookd_api_submit(&op->base, true);
done:
  json_decref(body);
}

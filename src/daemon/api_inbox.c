/* api_inbox.c — the inbound dedup records (docs/inbound.md):
 *   GET  /v1/inbox?tenant=&source=&state=&since=&until=…   newest first (e.g. state=conflict)
 *   GET  /v1/inbox/{id}                                     the record and its deliveries
 *   POST /v1/inbox/{id}/resolve {"outcome", "reason"}       settle a record held in unknown
 *   POST /v1/inbox/resolve {"ids", "outcome", "reason"}     settle up to 100 records at once
 *   POST /v1/inbox/replay {"ids", "reason"}                 replay up to 100 records at once
 *   POST /v1/inbox/{id}/replay                              its dead-lettered forwards again
 * The write routes keep their answer under an Idempotency-Key for 24 hours (api_answers). */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/inbound.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

#define str_or_null hookd_json_str_or_null /* not UTF-8: a placeholder */


typedef struct inbox_op {
  hookd_api_op base;
  char id[HOOKD_ID_MAX + 64];
  char tenant[HOOKD_ID_MAX + 64], source[HOOKD_ID_MAX + 64], status[32];
  char event_id[256]; /* list: the provider's event id (as the record shows it) */
  char event_type[272]; /* list: a type pattern */
  hookd_inbox_filter f;
  hookd_principal who;
  bool scoped;
  hookd_inbox rec;
  bool loaded;
  hookd_delivery *dl;
  size_t n;
  hookd_inbox *list;
  size_t n_list;
  hookd_dstate to;
  hookd_due_hint *hints;
  size_t n_hints;
  size_t n_resolved; /* deliveries settled by a resolve */
  hookd_kept k;      /* resolve, replay: an Idempotency-Key's answer */
  unsigned states;   /* list: ?state=a,b — several (bits of list_states[]); 0: one or none */
} inbox_op;

/* The statuses a list filters by (as records show them). */
static const char *const list_states[] = {"received",  "processing", "retryable_failed",
                                          "completed", "dead_lettered", "unknown", "filtered",
                                          "stale",     "conflict",      "duplicate", NULL};

static void inbox_cleanup(hookd_api_op *base) {
  inbox_op *op = (inbox_op *)base;
  free(op->k.answer);
  op->k.answer = NULL;
  if (op->loaded) hookd_inbox_free(&op->rec);
  if (op->dl) hookd_deliveries_free(op->dl, op->n);
  if (op->list) hookd_inboxes_free(op->list, op->n_list);
  hookd_due_hints_free(op->hints, op->n_hints);
}

/* The request's API key, for the tenant-scope check (none on a public route: not scoped). */
static void take_principal(hookd_req *r, hookd_principal *who, bool *scoped) {
  const hookd_principal *p = hookd_api_principal(r);
  if (p) *who = *p;
  *scoped = p != NULL;
}

static inbox_op *new_op(hookd_req *r, hookd_app *app,
                        int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                        void (*reply)(hookd_api_op *, int)) {
  inbox_op *op = hookd_api_op_new(sizeof *op, r, app, run, reply);
  if (!op) return NULL;
  op->base.cleanup = inbox_cleanup;
  take_principal(r, &op->who, &op->scoped);
  return op;
}

/* The status as shown: a record waiting for a forward that holds a live lease is processing. */
static const char *shown_status(const hookd_inbox *r, bool *live) {
  *live = r->lease_until_ms > hookd_now_ms();
  if (*live && (!strcmp(r->status, "received") || !strcmp(r->status, "retryable_failed")))
    return "processing";
  return r->status;
}

/* A record without a type reads "unknown", as the event its request made (which needs one) and
 * its deliveries do; the list's event_type filter finds it so (the stores' *_INBOX_TYPE). */
static json_t *event_type_json(const hookd_inbox *r) {
  return r->event_type && r->event_type[0] ? str_or_null(r->event_type) : json_string("unknown");
}

static json_t *inbox_json(const hookd_inbox *r) {
  bool live;
  const char *status = shown_status(r, &live);
  return json_pack("{s:s,s:s,s:s,s:s,s:o,s:s,s:o,s:s,s:s,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "id",
                   r->id, "source_id", r->source_id, "tenant_id", r->tenant_id, "provider",
                   r->provider, "event_id", str_or_null(r->provider_event_id), "identity_kind",
                   r->identity_kind, "event_type", event_type_json(r), "payload_hash",
                   r->payload_hash, "status", status, "attempt_count", r->attempt_count,
                   "lease_until", live ? hookd_json_time(r->lease_until_ms) : json_null(),
                   "received_at", hookd_json_time(r->received_ms), "completed_at",
                   hookd_json_time(r->completed_ms), "result_ref", str_or_null(r->result_ref),
                   "last_error", str_or_null(r->last_error), "conflict_of",
                   str_or_null(r->conflict_of));
}

/* Records of tenants outside the key's scope do not exist for it. */
static bool foreign(bool scoped, const hookd_principal *who, const char *tenant_id) {
  return scoped && !hookd_principal_has_tenant(who, tenant_id);
}
static int hide_foreign(inbox_op *op) {
  return foreign(op->scoped, &op->who, op->rec.tenant_id) ? HOOKD_STORE_NOTFOUND : 0;
}

/* ---------- get ---------- */

/* The record with its deliveries (forwards) and the earliest next attempt among them. */
static json_t *record_json(const inbox_op *op) {
  json_t *v = inbox_json(&op->rec);
  json_t *d = json_array();
  int64_t next = 0; /* the earliest next attempt of a forward still to be sent */
  for (size_t i = 0; i < op->n; i++) {
    const hookd_delivery *dl = &op->dl[i];
    json_array_append_new(d, hookd_api_delivery_json(op->base.app, dl));
    int64_t at = dl->state == HOOKD_DS_PENDING || dl->state == HOOKD_DS_RETRYING
                     ? hookd_api_delivery_next(op->base.app, dl)
                     : 0;
    if (at && (!next || at < next)) next = at;
  }
  json_object_set_new(v, "next_attempt_at", hookd_json_time(next));
  json_object_set_new(v, "deliveries", d);
  return v;
}

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  inbox_op *op = (inbox_op *)base;
  int rc = be->inbox_get(c, op->id, &op->rec, &op->dl, &op->n);
  op->loaded = rc == 0;
  return rc ? rc : hide_foreign(op);
}

static void reply_get(hookd_api_op *base, int rc) {
  inbox_op *op = (inbox_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "inbox record");
    return;
  }
  hookd_req_reply_json(base->req, 200, record_json(op));
}

void hookd_api_inbox_get(hookd_req *r, hookd_app *app) {
  inbox_op *op = new_op(r, app, run_get, reply_get);
  if (!op) return;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, false);
}

/* ---------- list ---------- */

static int by_seq_desc(const void *a, const void *b) {
  int64_t x = ((const hookd_inbox *)a)->seq, y = ((const hookd_inbox *)b)->seq;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Several states (?state=dead_lettered,unknown, as the deliveries list takes them): each state's
 * page read from its own index range, as one state's is, then merged newest first and cut to
 * the page (the states are disjoint: "processing" is the leasable ones under a live lease, which
 * "received" and "retryable_failed" leave out). */
static int list_states_merged(inbox_op *op, hookd_store_conn *c, const hookd_store_backend *be) {
  size_t cap = 0;
  int rc = 0;
  for (int i = 0; !rc && list_states[i]; i++) {
    if (!(op->states & (1u << i))) continue;
    op->f.status = list_states[i];
    hookd_inbox *part = NULL;
    size_t n = 0;
    if ((rc = be->inbox_list(c, &op->f, &part, &n)) != 0) break;
    if (op->n_list + n > cap) {
      size_t want = op->n_list + n;
      hookd_inbox *grown = realloc(op->list, want * sizeof *grown);
      if (!grown) {
        hookd_inboxes_free(part, n);
        rc = HOOKD_STORE_ERR;
        break;
      }
      op->list = grown;
      cap = want;
    }
    if (n) memcpy(op->list + op->n_list, part, n * sizeof *part);
    op->n_list += n;
    free(part); /* (its records are op->list's now) */
  }
  op->f.status = NULL;
  if (rc) return rc;
  if (op->n_list) qsort(op->list, op->n_list, sizeof *op->list, by_seq_desc);
  while (op->n_list > (size_t)op->f.limit) hookd_inbox_free(&op->list[--op->n_list]);
  return 0;
}

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  inbox_op *op = (inbox_op *)base;
  /* a deleted tenant's records stay listed, as its audit log: those held unknown by its
   * destinations' delete are still to settle (a review: 404 once the tenant was deleted) */
  int rc = op->f.tenant_id ? be->ever_made(c, HOOKD_MADE_TENANT, NULL, op->f.tenant_id) : 0;
  if (rc == HOOKD_STORE_NOTFOUND) snprintf(base->err, sizeof base->err, "tenant");
  if (!rc) rc = op->states ? list_states_merged(op, c, be)
                           : be->inbox_list(c, &op->f, &op->list, &op->n_list);
  /* nothing for a source: none left, or a mistyped id (404, as a mistyped tenant) */
  if (!rc && !op->n_list && op->f.source_id &&
      (rc = be->ever_made(c, HOOKD_MADE_SOURCE, op->f.tenant_id, op->f.source_id)) ==
          HOOKD_STORE_NOTFOUND)
    snprintf(base->err, sizeof base->err, "source");
  return rc;
}

static void reply_list(hookd_api_op *base, int rc) {
  inbox_op *op = (inbox_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "inbox");
    return;
  }
  size_t shown = op->n_list > (size_t)op->f.limit - 1 ? (size_t)op->f.limit - 1 : op->n_list;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++) json_array_append_new(data, inbox_json(&op->list[i]));
  int64_t next = op->n_list > shown ? op->list[shown - 1].seq : 0;
  hookd_req_reply_json(base->req, 200, hookd_api_seq_page_body(base->app, 'i', NULL, data, next));
}

void hookd_api_inbox_list(hookd_req *r, hookd_app *app) {
  const char *const *states = list_states;
  int limit = hookd_api_limit(r, 50, 500);
  if (limit < 0) return;
  const char *tenant = hookd_req_query(r, "tenant"), *source = hookd_req_query(r, "source"),
             *state = hookd_req_query(r, "state"), *event_id = hookd_req_query(r, "event_id"),
             *type;
  if ((tenant && !hookd_id_valid(tenant, 64)) || (source && !hookd_id_valid(source, 128))) {
    const char *bad = tenant && !hookd_id_valid(tenant, 64) ? "tenant" : "source";
    hookd_req_field_error(r, 400, "invalid_parameter", bad, "%s must be an id", bad);
    return;
  }
  /* the provider's id, written as the record's event_id shows it (a byte beyond printable
   * ASCII as %XX: evt_ñ or evt_%C3%B1): "which record is Stripe's evt_…?" */
  char shown[3 * 255 + 1]; /* a value of 255 bytes, each written %XX: never cut */
  bool fits = event_id && *event_id && strlen(event_id) <= 255;
  if (fits) hookd_in_display_id(event_id, shown, sizeof shown);
  if (event_id && (!fits || strlen(shown) >= sizeof ((inbox_op *)0)->event_id)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "event_id",
                          "event_id must be the provider's id, 1-255 characters as records show "
                          "it");
    return;
  }
  int64_t since_ms, until_ms;
  if (hookd_api_type_time_query(r, &type, &since_ms, &until_ms) != 0) return;
  /* one state, or several comma-separated (each named once) */
  unsigned mask = 0;
  int n_states = 0;
  for (const char *s = state; s;) {
    size_t n = strcspn(s, ",");
    int i = 0;
    while (states[i] && (strlen(states[i]) != n || memcmp(states[i], s, n))) i++;
    if (!states[i] || (mask & (1u << i))) {
      hookd_req_field_error(r, 400, "invalid_parameter", "state",
                            "state must be received, processing, retryable_failed, completed, "
                            "dead_lettered, unknown, filtered, stale, conflict or duplicate "
                            "(several comma-separated, each once)");
      return;
    }
    mask |= 1u << i;
    n_states++;
    s = s[n] == ',' ? s + n + 1 : NULL;
  }
  long long b;
  if (hookd_api_list_scope(r, app, 'i', tenant, &b) != 0) return;
  inbox_op *op = new_op(r, app, run_list, reply_list);
  if (!op) return;
  snprintf(op->tenant, sizeof op->tenant, "%s", tenant ? tenant : "");
  snprintf(op->source, sizeof op->source, "%s", source ? source : "");
  snprintf(op->status, sizeof op->status, "%s", n_states == 1 ? state : "");
  op->states = n_states > 1 ? mask : 0;
  op->f.tenant_id = tenant ? op->tenant : NULL;
  op->f.source_id = source ? op->source : NULL;
  op->f.status = n_states == 1 ? op->status : NULL;
  snprintf(op->event_id, sizeof op->event_id, "%s", event_id ? shown : "");
  op->f.event_id = event_id ? op->event_id : NULL;
  snprintf(op->event_type, sizeof op->event_type, "%s", type ? type : "");
  op->f.event_type = type ? op->event_type : NULL;
  op->f.since_ms = since_ms;
  op->f.until_ms = until_ms;
  op->f.now_ms = hookd_now_ms();
  op->f.before_seq = b;
  op->f.limit = limit + 1;
  /* but a tenant's records of one stored state (an index's range), a list may walk much of the
   * inbox (no index holds a tenant's records in order, nor a source's, a provider id, a type or
   * a time; "processing" is two stored states' records under a live lease — a backlog's worth to
   * read for a few): on the scan connection, so that the API's other reads do not wait for it */
  if (!tenant || !state || n_states > 1 || !strcmp(state, "processing") || source || event_id ||
      type || since_ms || until_ms)
    hookd_api_submit_scan(&op->base);
  else
    hookd_api_submit(&op->base, false);
}

/* ---------- resolve ---------- */

/* A write op's start: a second run (its batch undone and run again) forgets the first's. */
static void rerun_reset(inbox_op *op) {
  inbox_cleanup(&op->base);
  memset(&op->rec, 0, sizeof op->rec);
  op->loaded = false;
  op->dl = NULL;
  op->hints = NULL;
  op->n = op->n_hints = op->n_resolved = 0;
}

/* A write op's end: the record read again, as its answer shows it, and the action audited. */
static int reread_audited(inbox_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                          const char *action, const char *detail) {
  hookd_inbox_free(&op->rec);
  hookd_deliveries_free(op->dl, op->n);
  op->dl = NULL;
  op->n = 0;
  int rc = be->inbox_get(c, op->id, &op->rec, &op->dl, &op->n);
  op->loaded = rc == 0;
  return rc ? rc : hookd_api_audit(&op->base, c, be, action, op->id, op->rec.tenant_id, detail);
}

/* A write op's answer begins: false once a failure is answered; else the dispatcher hears of
 * the endpoints it made due. */
static bool answered_or_hinted(hookd_api_op *base, int rc, const hookd_due_hint *hints,
                               size_t n_hints) {
  if (rc) {
    hookd_api_store_error(base, rc, "inbox record");
    return false;
  }
  for (size_t i = 0; i < n_hints; i++)
    hookd_dispatcher_hint(base->app->disp, hints[i].endpoint_id, hints[i].due_ms);
  return true;
}

/* A resolve's outcome as the operator gave it (the deliveries' state is "dead" for
 * dead_lettered, "pending" for retry): what the audit and the log name. */
static const char *outcome_name(hookd_dstate to) {
  return to == HOOKD_DS_DELIVERED ? "completed"
         : to == HOOKD_DS_PENDING ? "retry"
                                  : "dead_lettered";
}

static int run_resolve(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  inbox_op *op = (inbox_op *)base;
  rerun_reset(op);
  int rc = be->inbox_get(c, op->id, &op->rec, NULL, NULL);
  op->loaded = rc == 0;
  if (rc || (rc = hide_foreign(op)) != 0) return rc; /* (first: a kept answer names no tenant) */
  rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc; /* given again, or refused */
  rc = be->inbox_resolve(c, op->id, op->to, hookd_now_ms(), &op->n_resolved, &op->hints,
                         &op->n_hints);
  if (rc || (rc = reread_audited(op, c, be, "inbox.resolve", outcome_name(op->to))) != 0)
    return rc;
  /* as GET shows it, with how many forwards this resolve settled (or, for retry, sent again):
   * a forward whose destination was deleted stays held, and shows so */
  json_t *v = record_json(op);
  json_object_set_new(v, "resolved", json_integer((json_int_t)op->n_resolved));
  return hookd_kept_store(&op->k, c, be, 200, v);
}

/* A settled record's count and log line (after the commit). */
static void resolved_told(hookd_dstate to, const char *id, const char *tenant_id, size_t n,
                          const char *actor) {
  if (to == HOOKD_DS_DEAD) { /* forwards all: the inbound share of the total too */
    HOOKD_ADD(dead[M_DEAD_OPERATOR], n);
    HOOKD_ADD(inbound_dead, n);
  }
  /* (completed by an operator: no 2xx, so not hookd_deliveries_delivered_total, whose success
   * ratio it skewed — a review; the audit log and this line count them) */
  HLOG(HOOKD_LOG_INFO, "inbox.resolved", KV_S("inbox_id", id), KV_S("event_id", id),
       KV_S("tenant_id", tenant_id), KV_S("outcome", outcome_name(to)),
       KV_I("forwards", (int64_t)n),
       KV_S("actor", actor));
}

static void reply_resolve(hookd_api_op *base, int rc) {
  inbox_op *op = (inbox_op *)base;
  if (!answered_or_hinted(base, rc, op->hints, op->n_hints)) return;
  if (!op->k.replayed)
    resolved_told(op->to, op->id, op->rec.tenant_id, op->n_resolved,
                  op->scoped ? op->who.key_id : NULL);
  hookd_kept_reply(&op->k, base->req);
}

/* A resolve's outcome and reason (the body's members among names): false once answered. */
static bool resolve_args(hookd_req *r, const json_t *body, const char *const *names,
                         hookd_dstate *out, const char **out_reason) {
  const char *outcome = NULL, *reason = NULL;
  hookd_dstate to = HOOKD_DS_DELIVERED;
  bool ok = hookd_api_known_members(r, body, NULL, names);
  if (ok && hookd_json_get_str(body, "outcome", &outcome) == 0 && !strcmp(outcome, "completed"))
    to = HOOKD_DS_DELIVERED;
  else if (ok && outcome && !strcmp(outcome, "retry"))
    to = HOOKD_DS_PENDING;
  else if (ok && outcome && !strcmp(outcome, "dead_lettered"))
    to = HOOKD_DS_DEAD;
  else if (ok) { /* absent or wrong: the codes every other route gives for either */
    hookd_req_error(r, 422, json_object_get(body, "outcome") ? "invalid_field" : "missing_field",
                    "outcome must be completed (the effect happened), retry or dead_lettered");
    ok = false;
  }
  /* the reason goes to the audit log: printable, not blank (as everywhere else); the body's,
   * else the Hookd-Reason header's (checked by the router) */
  if (ok && !json_object_get(body, "reason")) reason = hookd_req_header(r, "Hookd-Reason");
  else if (ok && hookd_json_get_str(body, "reason", &reason) != 0) reason = "";
  if (ok && (!reason || !hookd_api_reason_valid(reason))) {
    hookd_req_error(r, 422, reason ? "invalid_field" : "missing_field",
                    "reason is required (1-255 bytes of printable text, not blank; or the "
                    "Hookd-Reason header): it goes to the audit log");
    ok = false;
  }
  *out = to;
  *out_reason = reason;
  return ok;
}

void hookd_api_inbox_resolve(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"outcome", "reason", NULL};
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  hookd_dstate to;
  const char *reason;
  inbox_op *op = resolve_args(r, body, names, &to, &reason)
                     ? new_op(r, app, run_resolve, reply_resolve)
                     : NULL;
  if (op &&
      !hookd_kept_prepare(r, app, &op->k, "inbox.resolve.one", hookd_req_param(r, 0), reason,
                          body, false)) {
    inbox_cleanup(&op->base);
    free(op);
    op = NULL;
  }
  if (op) {
    snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
    snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
    op->to = to;
    hookd_api_submit(&op->base, true);
  }
  json_decref(body);
}

/* ---------- replay ---------- */

/* Every dead-lettered forward of the record sent again (each a delivery replay: a fresh retry
 * budget, the same Idempotency-Key) — what a Hookdeck user does with "retry" on an event whose
 * handler was fixed, in one call instead of one per destination. A forward cut off by its
 * destination's delete goes to each destination added since (the handler that replaced it). A
 * forward that cannot be (its destination disabled, its payload purged) is left as it is; none
 * at all is 409. */
/* more's n_more hints moved to the end of *all (more freed); false when they could not be (out
 * of memory: dropped). */
static bool hints_append(hookd_due_hint **all, size_t *n_all, hookd_due_hint *more,
                         size_t n_more) {
  hookd_due_hint *grown = n_more ? realloc(*all, (*n_all + n_more) * sizeof *grown) : NULL;
  if (n_more && !grown) {
    hookd_due_hints_free(more, n_more);
    return false;
  }
  if (grown) {
    *all = grown;
    memcpy(grown + *n_all, more, n_more * sizeof *more);
    *n_all += n_more;
  }
  free(more); /* the endpoint ids moved into *all */
  return true;
}

/* The replay of one record (its deliveries dl, n): how many forwards went again, and the
 * endpoints made due (appended to *hints). HOOKD_STORE_STATE with err written: none could.
 * swept: one of a batch — a sweep of records listed dead_lettered, not a record named: a forward
 * an operator gave up to a destination that is not idempotent (which may have applied it) is
 * left, as a replay job leaves it (a review: a batch after a give-up sent each again). */
static int replay_record(hookd_store_conn *c, const hookd_store_backend *be, const char *id,
                         const hookd_delivery *dl, size_t n, bool swept, size_t *count,
                         hookd_due_hint **hints, size_t *n_hints, char *err, size_t errlen) {
  *count = 0;
  hookd_due_hint *mine = n ? calloc(n, sizeof *mine) : NULL;
  if (n && !mine) return HOOKD_STORE_ERR;
  size_t n_mine = 0;
  int64_t now = hookd_now_ms();
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (dl[i].state != HOOKD_DS_DEAD) continue;
    rc = be->delivery_replay(c, dl[i].id, now, swept, NULL);
    if (rc == HOOKD_STORE_STATE) { /* refused before writing: left as it is */
      rc = 0;
      continue;
    }
    if (rc) break;
    (*count)++;
    char *eid = strdup(dl[i].endpoint_id); /* (without, the dispatcher's scan finds it) */
    if (eid) mine[n_mine++] = (hookd_due_hint){eid, now};
  }
  /* a forward its destination's delete cut off goes to the destinations that replaced it */
  size_t made = 0, n_more = 0;
  hookd_due_hint *more = NULL;
  if (rc == 0) rc = be->inbox_reforward(c, id, now, swept, &made, &more, &n_more);
  *count += made;
  if (rc == 0 && !*count) {
    snprintf(err, errlen,
             "nothing to replay: no dead-lettered forward can be sent again (a held one is "
             "settled with resolve; a disabled destination, a purged payload or a deleted "
             "destination without a replacement cannot be%s)",
             swept ? "; in a batch, nor one given up: replay its record alone" : "");
    rc = HOOKD_STORE_STATE;
  }
  if (rc) {
    hookd_due_hints_free(mine, n_mine);
    hookd_due_hints_free(more, n_more);
    return rc;
  }
  /* (out of memory, they are dropped: the dispatcher's scan finds those endpoints) */
  hints_append(hints, n_hints, mine, n_mine);
  hints_append(hints, n_hints, more, n_more);
  return 0;
}

static int run_replay(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  inbox_op *op = (inbox_op *)base;
  rerun_reset(op);
  int rc = be->inbox_get(c, op->id, &op->rec, &op->dl, &op->n);
  op->loaded = rc == 0;
  if (rc || (rc = hide_foreign(op)) != 0) return rc; /* (first: a kept answer names no tenant) */
  rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc; /* given again, or refused */
  rc = replay_record(c, be, op->id, op->dl, op->n, false, &op->n_resolved, &op->hints,
                     &op->n_hints, base->err, sizeof base->err);
  if (rc) return rc;
  char detail[48];
  snprintf(detail, sizeof detail, "replayed=%zu", op->n_resolved);
  if ((rc = reread_audited(op, c, be, "inbox.replay", detail)) != 0) return rc;
  json_t *v = record_json(op);
  json_object_set_new(v, "replayed", json_integer((json_int_t)op->n_resolved));
  return hookd_kept_store(&op->k, c, be, 202, v);
}

static void reply_replay(hookd_api_op *base, int rc) {
  inbox_op *op = (inbox_op *)base;
  if (!answered_or_hinted(base, rc, op->hints, op->n_hints)) return;
  if (!op->k.replayed) {
    HOOKD_ADD(replays, op->n_resolved);
    HLOG(HOOKD_LOG_INFO, "inbox.replayed", KV_S("inbox_id", op->id), KV_S("event_id", op->id),
         KV_S("tenant_id", op->rec.tenant_id), KV_I("forwards", (int64_t)op->n_resolved),
         KV_S("actor", base->actor[0] ? base->actor : NULL));
  }
  hookd_kept_reply(&op->k, base->req);
}

void hookd_api_inbox_replay(hookd_req *r, hookd_app *app) {
  char reason[256]; /* (the body's {"reason"}, or the Hookd-Reason header's) */
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  inbox_op *op = new_op(r, app, run_replay, reply_replay);
  if (!op) return;
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  if (!hookd_kept_prepare(r, app, &op->k, "inbox.replay.one", hookd_req_param(r, 0),
                          reason[0] ? reason : NULL, NULL, false)) {
    inbox_cleanup(&op->base);
    free(op);
    return;
  }
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, true);
}

/* ---------- resolve or replay, many records ---------- */

#define MANY_MAX 100 /* records per call: one writer transaction of a few ms */

typedef struct resolve_item {
  char id[HOOKD_ID_MAX + 64];
  char tenant_id[HOOKD_ID_MAX + 64];
  char status[24];   /* as GET shows it after the resolve */
  const char *code;  /* an item not settled: not_found or invalid_state */
  char message[256]; /* as the single route's */
  size_t n;          /* forwards settled, or sent again */
} resolve_item;

typedef struct many_op {
  hookd_api_op base;
  hookd_principal who;
  bool scoped;
  bool replay; /* POST /v1/inbox/replay: each record's dead-lettered forwards again */
  hookd_dstate to;
  resolve_item *items;
  size_t n_items;
  hookd_due_hint *hints;
  size_t n_hints;
  hookd_kept k; /* an Idempotency-Key's answer */
} many_op;

static void many_cleanup(hookd_api_op *base) {
  many_op *op = (many_op *)base;
  free(op->items);
  free(op->k.answer);
  hookd_due_hints_free(op->hints, op->n_hints);
}

/* The answer: one item per id, in the order given. NULL when out of memory. */
static json_t *many_answer(const many_op *op) {
  json_t *data = json_array();
  size_t records = 0, forwards = 0;
  for (size_t i = 0; data && i < op->n_items; i++) {
    const resolve_item *it = &op->items[i];
    if (it->code) {
      json_array_append_new(data, json_pack("{s:s,s:{s:s,s:s}}", "id", it->id, "error", "code",
                                            it->code, "message", it->message));
      continue;
    }
    records++;
    forwards += it->n;
    json_array_append_new(data, json_pack("{s:s,s:s,s:I}", "id", it->id, "status", it->status,
                                          op->replay ? "replayed" : "resolved",
                                          (json_int_t)it->n));
  }
  return json_pack("{s:o,s:I,s:I}", "data", data, "records", (json_int_t)records,
                   op->replay ? "replayed" : "resolved", (json_int_t)forwards);
}

/* One record settled (or replayed) as its own call would; a record that cannot be is an item's
 * error and wrote nothing (the store's refusals come before any write: a replay's at the
 * record's level, where none of its forwards could go); a failing store undoes them all. */
static int many_one(many_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                    resolve_item *it) {
  hookd_inbox rec;
  hookd_delivery *dl = NULL;
  size_t n = 0;
  char err[256] = "";
  be->clear_error(c);
  int rc = be->inbox_get(c, it->id, &rec, op->replay ? &dl : NULL, op->replay ? &n : NULL);
  if (rc == 0) {
    if (foreign(op->scoped, &op->who, rec.tenant_id)) rc = HOOKD_STORE_NOTFOUND;
    hookd_inbox_free(&rec);
  }
  hookd_due_hint *hints = NULL;
  size_t n_hints = 0;
  if (rc == 0 && op->replay)
    rc = replay_record(c, be, it->id, dl, n, true, &it->n, &op->hints, &op->n_hints, err,
                       sizeof err);
  else if (rc == 0)
    rc = be->inbox_resolve(c, it->id, op->to, hookd_now_ms(), &it->n, &hints, &n_hints);
  hookd_deliveries_free(dl, n);
  if (rc == HOOKD_STORE_NOTFOUND || rc == HOOKD_STORE_STATE) {
    it->code = rc == HOOKD_STORE_NOTFOUND ? "not_found" : "invalid_state";
    snprintf(it->message, sizeof it->message, "%s",
             rc == HOOKD_STORE_NOTFOUND ? "inbox record not found"
             : err[0]                   ? err
                                        : be->errmsg(c));
    return 0;
  }
  if (rc) return rc;
  if (!hints_append(&op->hints, &op->n_hints, hints, n_hints)) return HOOKD_STORE_ERR;
  if ((rc = be->inbox_get(c, it->id, &rec, NULL, NULL)) != 0) return rc;
  bool live;
  snprintf(it->status, sizeof it->status, "%s", shown_status(&rec, &live));
  snprintf(it->tenant_id, sizeof it->tenant_id, "%s", rec.tenant_id);
  hookd_inbox_free(&rec);
  char detail[48];
  snprintf(detail, sizeof detail, "replayed=%zu", it->n);
  return hookd_api_audit(&op->base, c, be, op->replay ? "inbox.replay" : "inbox.resolve", it->id,
                         it->tenant_id, op->replay ? detail : outcome_name(op->to));
}

static int run_many(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  many_op *op = (many_op *)base;
  hookd_due_hints_free(op->hints, op->n_hints); /* a second run forgets the first's */
  op->hints = NULL;
  op->n_hints = 0;
  int rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc; /* given again, or refused */
  rc = 0;
  for (size_t i = 0; rc == 0 && i < op->n_items; i++) {
    resolve_item *it = &op->items[i];
    it->code = NULL;
    it->n = 0;
    rc = many_one(op, c, be, it);
  }
  if (rc) return rc;
  be->clear_error(c); /* an item's refusal is its own, not the op's (a failure's message stays,
                       * for the store's count and log line) */
  /* a resolve is done when it answers; a replay's forwards go later, as the single replay's.
   * Kept with what it settled: a batch sent again gets it, whatever became of the records. */
  return hookd_kept_store(&op->k, c, be, op->replay ? 202 : 200, many_answer(op));
}

static void reply_many(hookd_api_op *base, int rc) {
  many_op *op = (many_op *)base;
  if (!answered_or_hinted(base, rc, op->hints, op->n_hints)) return;
  for (size_t i = 0; !op->k.replayed && i < op->n_items; i++) {
    const resolve_item *it = &op->items[i];
    if (it->code) continue;
    const char *actor = op->scoped ? op->who.key_id : NULL;
    if (!op->replay) {
      resolved_told(op->to, it->id, it->tenant_id, it->n, actor);
    } else {
      HOOKD_ADD(replays, it->n);
      HLOG(HOOKD_LOG_INFO, "inbox.replayed", KV_S("inbox_id", it->id), KV_S("event_id", it->id),
           KV_S("tenant_id", it->tenant_id), KV_I("forwards", (int64_t)it->n),
           KV_S("actor", actor));
    }
  }
  hookd_kept_reply(&op->k, base->req);
}

/* The ids: 1-100 distinct strings. False once answered. */
static bool resolve_ids(hookd_req *r, const json_t *ids, many_op *op) {
  size_t n = json_is_array(ids) ? json_array_size(ids) : 0;
  if (!ids || !json_is_array(ids) || n == 0 || n > MANY_MAX) {
    hookd_req_error(r, 422, ids ? "invalid_field" : "missing_field",
                    "ids must be an array of 1 to %d inbox record ids", MANY_MAX);
    return false;
  }
  if (!(op->items = calloc(n, sizeof *op->items))) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    const char *id = json_string_value(json_array_get(ids, i));
    /* (an id's characters: one that is not an id is named here, never echoed in a result) */
    if (!id || !hookd_id_valid(id, sizeof op->items[i].id - 1)) {
      hookd_req_error(r, 422, "invalid_field", "ids[%zu] must be an inbox record id", i);
      return false;
    }
    for (size_t j = 0; j < i; j++) {
      if (!strcmp(op->items[j].id, id)) {
        hookd_req_error(r, 422, "invalid_field", "ids[%zu] repeats ids[%zu]", i, j);
        return false;
      }
    }
    snprintf(op->items[i].id, sizeof op->items[i].id, "%s", id);
  }
  op->n_items = n;
  return true;
}

/* The request of either: ids, and for a resolve its outcome and reason (a replay's reason is
 * optional, as the single replay's Hookd-Reason). */
static void many_submit(hookd_req *r, hookd_app *app, bool replay) {
  static const char *const resolve_names[] = {"ids", "outcome", "reason", NULL};
  static const char *const replay_names[] = {"ids", "reason", NULL};
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  hookd_dstate to = HOOKD_DS_PENDING;
  const char *reason = NULL;
  bool ok = replay ? hookd_api_known_members(r, body, NULL, replay_names) &&
                         hookd_api_body_reason(r, body, &reason)
                   : resolve_args(r, body, resolve_names, &to, &reason);
  many_op *op = ok ? hookd_api_op_new(sizeof *op, r, app, run_many, reply_many) : NULL;
  if (op) {
    op->base.cleanup = many_cleanup;
    take_principal(r, &op->who, &op->scoped);
    if (reason) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
    op->to = to;
    op->replay = replay;
    if (resolve_ids(r, json_object_get(body, "ids"), op) &&
        hookd_kept_prepare(r, app, &op->k, replay ? "inbox.replay" : "inbox.resolve", NULL,
                           reason, body, false)) {
      hookd_api_submit(&op->base, true);
    } else {
      many_cleanup(&op->base);
      free(op);
    }
  }
  json_decref(body);
}

void hookd_api_inbox_resolve_many(hookd_req *r, hookd_app *app) { many_submit(r, app, false); }

void hookd_api_inbox_replay_many(hookd_req *r, hookd_app *app) { many_submit(r, app, true); }

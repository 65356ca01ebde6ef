/* api_replays.c — replay jobs: bulk replay with governance (O12, docs/replay.md).
 *   POST /v1/tenants/{t}/replays                       preview: count, endpoints, estimate
 *   POST /v1/tenants/{t}/replays/{id}/confirm|pause|resume|cancel
 *   GET  /v1/tenants/{t}/replays/{id}                  the job and its progress
 *   GET  /v1/tenants/{t}/replays?limit=&after=         newest first
 *
 * Creating a job is three store steps on one suspended request: the snapshot is selected on
 * the scan executor (a long scan holds up neither the writer nor the API's reads), stored with
 * the job and audited on the writer, and the job read back with its breakdown on the reader. An action is written and
 * audited on the writer, then read back the same way. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/replayer.h"

#define DEFAULT_RATE 50.0 /* deliveries a second a job moves back to pending */

typedef struct rp_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64];
  char id[HOOKD_ID_MAX + 64];
  /* create */
  char endpoint[HOOKD_ID_MAX + 64], event_type[272];
  hookd_replay_filter f;
  hookd_replay_snapshot snap;
  char *filter_json;
  double rate;
  bool tenant_missing;
  bool created;  /* the read back answers 201 */
  bool written;  /* the read back follows a committed write (create, an action) */
  size_t from;   /* create: snapshot items stored so far (committed), a chunk per writer op */
  int64_t built_seq, built_total;
  size_t next_from; /* what the chunk in flight stores, applied once it is committed */
  int64_t next_seq, next_total;
  int fail_rc;      /* a failed chunk's code, answered after the job is marked failed */
  char fail_err[256];
  /* act */
  hookd_replay_action action;
  bool expired; /* an action refused on an expired preview (its expiry written) */
  int64_t recalled; /* a pause's or a cancel's first chunk took back so many */
  /* read back */
  hookd_replay_job job;
  hookd_replay_detail detail;
  bool loaded;
  hookd_endpoint *eps;     /* one per detail endpoint, as stored (id NULL: not found) */
  /* list */
  char after[HOOKD_ID_MAX + 64];
  int limit;
  hookd_replay_job *list;
  size_t n;
} rp_op;

/* What a read back loaded (its job, breakdown and endpoint records). */
static void read_back_free(rp_op *op) {
  if (!op->loaded) return;
  for (size_t i = 0; op->eps && i < op->detail.n_endpoints; i++)
    if (op->eps[i].id) hookd_endpoint_free(&op->eps[i]);
  free(op->eps);
  op->eps = NULL;
  hookd_replay_detail_free(&op->detail);
  hookd_replay_job_free(&op->job);
  op->loaded = false;
}

static void rp_cleanup(hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  hookd_replay_snapshot_free(&op->snap);
  free(op->filter_json);
  read_back_free(op);
  if (op->list) hookd_replay_jobs_free(op->list, op->n);
}

static rp_op *new_op(hookd_req *r, hookd_app *app,
                     int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                     void (*reply)(hookd_api_op *, int)) {
  rp_op *op = hookd_api_op_new(sizeof *op, r, app, run, reply);
  if (!op) return NULL;
  op->base.cleanup = rp_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  return op;
}

/* ---------- rendering ---------- */

static json_t *counts_object(const hookd_replay_count *v, size_t n) {
  json_t *o = json_object();
  for (size_t i = 0; i < n; i++) json_object_set_new(o, v[i].key, json_integer(v[i].n));
  return o;
}

/* A job in a list: the job without what takes a scan of its items (endpoints, the estimate and
 * the breakdowns of progress); GET /replays/{id} has them. */
static json_t *render_brief(const hookd_replay_job *j) {
  json_t *filter = j->filter ? json_loads(j->filter, 0, NULL) : NULL;
  json_t *progress = json_pack("{s:I,s:I,s:I}", "replayed", (json_int_t)j->replayed, "skipped",
                               (json_int_t)j->skipped, "remaining",
                               (json_int_t)(j->total - j->replayed - j->skipped));
  json_t *v = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:o,s:I,s:o}", "id", j->id, "tenant_id",
                        j->tenant_id, "state", j->state, "filter", filter ? filter : json_null(),
                        "reason", hookd_json_str_or_null(j->reason), "actor",
                        hookd_json_str_or_null(j->actor), "rate",
                        hookd_json_rate(j->rate_per_s), "total",
                        (json_int_t)j->total, "progress", progress);
  json_object_set_new(v, "created_at", hookd_json_time(j->created_ms));
  json_object_set_new(v, "confirmed_at", hookd_json_time(j->confirmed_ms));
  json_object_set_new(v, "finished_at", hookd_json_time(j->finished_ms));
  json_object_set_new(v, "updated_at", hookd_json_time(j->updated_ms));
  json_object_set_new(v, "items_purged_at", hookd_json_time(j->items_purged_ms));
  /* held behind an endpoint that fell behind (docs/replay.md): only a running job's word */
  json_t *held = j->held_endpoint && !strcmp(j->state, "running")
                     ? json_pack("{s:s,s:o}", "endpoint_id", j->held_endpoint, "since",
                                 hookd_json_time(j->held_since_ms))
                     : NULL;
  json_object_set_new(v, "held", held ? held : json_null());
  return v;
}

/* The job as GET shows it: the listed form, and what the job's items tell. */
static json_t *render(rp_op *op) {
  const hookd_replay_job *j = &op->job;
  const hookd_replay_detail *d = &op->detail;
  int64_t remaining = j->total - j->replayed - j->skipped;
  bool live = !strcmp(j->state, "preview") || !strcmp(j->state, "running") ||
              !strcmp(j->state, "paused");
  double drain = live && j->rate_per_s > 0 ? (double)remaining / j->rate_per_s : 0;
  json_t *eps = json_array();
  /* (the breakdown reads one endpoint more than it shows: there are more) */
  size_t shown = d->n_endpoints < HOOKD_REPLAY_ENDPOINTS_SHOWN ? d->n_endpoints
                                                                : HOOKD_REPLAY_ENDPOINTS_SHOWN;
  for (size_t i = 0; i < shown; i++) {
    const hookd_endpoint *e = &op->eps[i];
    json_t *health = json_null();
    hookd_endpoint_health h;
    if (hookd_dispatcher_endpoint_health(op->base.app->disp, d->endpoints[i].key, &h) == 0)
      health = json_pack("{s:s,s:o,s:o}", "breaker", h.breaker, "failing_since",
                         hookd_json_time(h.failing_since_ms), "paused_until",
                         hookd_json_time(h.paused_until_ms));
    json_t *rate = hookd_json_rate(e->id ? e->rate_limit : 0);
    if (live && e->id && e->rate_limit > 0) {
      double t = (double)d->endpoints[i].remaining / e->rate_limit;
      if (t > drain) drain = t; /* the endpoint's own limit is the slower one */
    }
    json_array_append_new(
        eps, json_pack("{s:s,s:I,s:I,s:b,s:b,s:o,s:o,s:o}", "id", d->endpoints[i].key, "count",
                       (json_int_t)d->endpoints[i].n, "remaining",
                       (json_int_t)d->endpoints[i].remaining, "enabled",
                       e->id && e->enabled && !e->deleted_ms, "deleted",
                       !e->id || e->deleted_ms != 0, "disabled_reason",
                       hookd_json_str_or_null(e->id ? e->disabled_reason : NULL), "rate_limit",
                       rate, "health", health));
  }
  json_t *v = render_brief(j);
  json_t *progress = json_object_get(v, "progress");
  json_object_set_new(progress, "skipped_by_reason", counts_object(d->skipped, d->n_skipped));
  json_object_set_new(progress, "deliveries", counts_object(d->states, d->n_states));
  json_object_set_new(v, "endpoints", eps);
  json_object_set_new(v, "endpoints_truncated", json_boolean(d->n_endpoints > shown));
  json_object_set_new(v, "estimated_drain_s", json_real((double)(int64_t)(drain * 10 + 0.5) / 10));
  return v;
}

/* ---------- read back (get, and the end of create and act) ---------- */

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  read_back_free(op);
  /* a deleted tenant's jobs are 404 as its lists are (a review: read and acted on) */
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  if (!rc) rc = be->replay_get(c, op->tenant, op->id, &op->job, &op->detail);
  if (rc) return rc;
  op->loaded = true;
  op->eps = calloc(op->detail.n_endpoints ? op->detail.n_endpoints : 1, sizeof *op->eps);
  if (!op->eps) return HOOKD_STORE_ERR;
  for (size_t i = 0; i < op->detail.n_endpoints; i++) {
    rc = be->endpoint_get(c, op->detail.endpoints[i].key, &op->eps[i]);
    if (rc == HOOKD_STORE_NOTFOUND) continue;
    if (rc) return rc;
  }
  return 0;
}

/* The job's row alone, read on the writer's queue: what a write's answer falls back to. */
static int run_get_brief(hookd_store_conn *c, const hookd_store_backend *be,
                         hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  read_back_free(op);
  memset(&op->job, 0, sizeof op->job);
  memset(&op->detail, 0, sizeof op->detail);
  int rc = be->replay_get(c, op->tenant, op->id, &op->job, NULL);
  op->loaded = rc == 0; /* freed with the op (no detail, no endpoints) */
  return rc;
}

static void reply_brief(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc) { /* (the write is committed all the same: its success, with the id to GET the job by) */
    hookd_req_reply_json(base->req, op->created ? 201 : 200,
                         json_pack("{s:s,s:s}", "id", op->id, "tenant_id", op->tenant));
    return;
  }
  hookd_req_reply_json(base->req, op->created ? 201 : 200, render_brief(&op->job));
}

static void reply_get(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc && op->written) {
    /* the write is committed (and audited): a breakdown cut short — a graceful shutdown
     * interrupts the scans — must not answer 503, which a client retries (a second job, or a
     * 409 for an action done). The job as the list shows it, without its breakdown. */
    op->written = false;
    hookd_api_chain(base, run_get_brief, reply_brief, HOOKD_API_WRITER);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, !strcmp(base->err, "tenant") ? "tenant" : "replay job");
    return;
  }
  hookd_req_reply_json(base->req, op->created ? 201 : 200, render(op));
}

void hookd_api_replay_get(hookd_req *r, hookd_app *app) {
  rp_op *op = new_op(r, app, run_get, reply_get);
  if (!op) return;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  hookd_api_submit_scan(&op->base); /* its breakdown walks the job's items */
}

/* ---------- list ---------- */

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  return rc ? rc : be->replay_list(c, op->tenant, op->after, op->limit + 1, &op->list, &op->n);
}

static void reply_list(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "replay jobs");
    return;
  }
  size_t shown = op->n > (size_t)op->limit ? (size_t)op->limit : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++) json_array_append_new(data, render_brief(&op->list[i]));
  const char *next = op->n > shown ? op->list[shown - 1].id : NULL;
  hookd_req_reply_json(base->req, 200, hookd_api_page_body(data, next));
}

void hookd_api_replay_list(hookd_req *r, hookd_app *app) {
  int limit;
  char after[sizeof ((rp_op *)0)->after];
  if (hookd_api_page(r, "rpl", &limit, after, sizeof after) != 0) return;
  rp_op *op = new_op(r, app, run_list, reply_list);
  if (!op) return;
  op->limit = limit;
  memcpy(op->after, after, sizeof after);
  hookd_api_submit(&op->base, false);
}

/* ---------- create ---------- */

/* A chunk of the snapshot per writer op (HOOKD_REPLAY_CREATE_CHUNK): the acks queued behind it
 * wait for one chunk, not for the whole snapshot. The last chunk audits the preview. What a
 * chunk stored counts once its commit is known (reply_create): a chunk whose batch was undone
 * is never taken for stored. */
static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  hookd_replay_job j = {.id = op->id, .tenant_id = op->tenant, .filter = op->filter_json,
                        .actor = base->actor[0] ? base->actor : NULL, .reason = base->reason,
                        .rate_per_s = op->rate, .seq = op->built_seq, .total = op->built_total};
  size_t from = op->from;
  int rc = be->replay_create(c, &j, &op->snap, &from, HOOKD_REPLAY_CREATE_CHUNK, hookd_now_ms());
  if (rc) return rc;
  op->next_from = from;
  op->next_seq = j.seq;
  op->next_total = j.total;
  if (from < op->snap.n) return HOOKD_STORE_OK;
  char detail[128];
  snprintf(detail, sizeof detail, "preview of %lld %s", (long long)j.total,
           op->f.missing ? "events (missing)" : "deliveries");
  return hookd_api_audit(base, c, be, "replay.create", op->id, op->tenant, detail);
}

static int run_abandon(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  return be->replay_abandon(c, ((rp_op *)base)->built_seq, hookd_now_ms());
}

/* The failed chunk's answer, the job marked failed (or, that failing too, left to read as failed
 * once HOOKD_REPLAY_BUILD_STALE_MS have passed). */
static void reply_abandon(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  (void)rc;
  snprintf(base->err, sizeof base->err, "%s", op->fail_err);
  hookd_api_store_error(base, op->fail_rc, "replay job");
}

static void reply_create(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc) {
    if (!op->built_seq) { /* nothing of the job was committed */
      hookd_api_store_error(base, rc, "replay job");
      return;
    }
    /* earlier chunks are stored: the job ends as failed, not left building against the cap */
    op->fail_rc = rc;
    snprintf(op->fail_err, sizeof op->fail_err, "%s", base->err);
    hookd_api_chain(base, run_abandon, reply_abandon, HOOKD_API_WRITER);
    return;
  }
  op->from = op->next_from;
  op->built_seq = op->next_seq;
  op->built_total = op->next_total;
  if (op->from < op->snap.n) { /* the next chunk, behind whatever the writer has queued */
    hookd_api_chain(base, run_create, reply_create, HOOKD_API_WRITER);
    return;
  }
  HLOG(HOOKD_LOG_INFO, "replay.created", KV_S("replay_id", op->id), KV_S("tenant_id", op->tenant),
       KV_I("total", (int64_t)op->snap.n), KV_S("actor", base->actor[0] ? base->actor : NULL));
  if (op->snap.filters_over) { /* left out of the job: told as the fan-out tells it */
    HOOKD_ADD(filters_over, (uint64_t)op->snap.filters_over);
    HLOG(HOOKD_LOG_WARN, "payload_filter.gave_up", KV_S("replay_id", op->id),
         KV_S("tenant_id", op->tenant), KV_S("endpoint_id", op->snap.endpoint_id),
         KV_I("events", op->snap.filters_over),
         KV_S("hint", "the endpoint's payload filter took more than 10,000 steps on these "
                      "events' payloads: the missing job leaves them out"));
  }
  op->written = true;
  hookd_api_chain(base, run_get, reply_get, HOOKD_API_SCAN);
}

static int run_select(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  hookd_replay_snapshot_free(&op->snap);
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  if (rc) {
    op->tenant_missing = true;
    return rc;
  }
  return be->replay_select(c, op->tenant, &op->f, (int64_t)base->app->cfg->max_replay_items,
                           &op->snap);
}

static void reply_select(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc == HOOKD_STORE_NOTFOUND && !op->tenant_missing) {
    hookd_req_error(base->req, 422, "invalid_field", "%s", base->err);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "replay job");
    return;
  }
  hookd_id_new("rpl", hookd_now_ms(), op->id);
  hookd_api_chain(base, run_create, reply_create, HOOKD_API_WRITER);
}

static bool parse_time(hookd_req *r, const json_t *filter, const char *key, int64_t *ms) {
  const json_t *v = json_object_get(filter, key);
  if (!v || json_is_null(v)) return true;
  /* (rounded up to the millisecond, a time past 9999-12-31T23:59:59.999Z would be shown back
   * with a five-digit year, which no RFC 3339 parser reads: a review) */
  if (!json_is_string(v) || hookd_parse_rfc3339_bound(json_string_value(v), ms) != 0 ||
      *ms <= 0 || *ms > HOOKD_RFC3339_LAST_MS) {
    hookd_req_error(r, 422, "invalid_field", "filter.%s must be an RFC 3339 time", key);
    return false;
  }
  return true;
}

/* Validates the filter into op->f and its normalised JSON; answers 422 and returns false. */
static bool parse_filter(hookd_req *r, rp_op *op, const json_t *filter) {
  static const char *const names[] = {"state", "endpoint", "event_type", "since", "until", NULL};
  if (filter && !json_is_object(filter)) {
    hookd_req_error(r, 422, "invalid_field", "filter must be an object");
    return false;
  }
  json_t *empty = json_object();
  if (!filter) filter = empty;
  bool ok = false;
  if (!hookd_api_known_members(r, filter, "filter", names)) goto out;
  const json_t *st = json_object_get(filter, "state");
  op->f.state = HOOKD_DS_DEAD;
  if (st && !json_is_null(st)) {
    const char *s = json_is_string(st) ? json_string_value(st) : "";
    if (!strcmp(s, "dead")) {
      op->f.state = HOOKD_DS_DEAD;
    } else if (!strcmp(s, "delivered")) {
      op->f.state = HOOKD_DS_DELIVERED;
    } else if (!strcmp(s, "retrying")) {
      op->f.state = HOOKD_DS_RETRYING; /* each one's next attempt brought forward */
    } else if (!strcmp(s, "missing")) {
      op->f.missing = true; /* the events filter.endpoint never got, each given a delivery */
    } else {
      hookd_req_error(r, 422, "invalid_field",
                      "filter.state must be dead, delivered (replayed), retrying (its next "
                      "attempt brought forward) or missing (the events filter.endpoint never "
                      "got)");
      goto out;
    }
  }
  const json_t *ep = json_object_get(filter, "endpoint");
  if (ep && !json_is_null(ep)) {
    if (!json_is_string(ep) || !hookd_id_valid(json_string_value(ep), 128)) {
      hookd_req_error(r, 422, "invalid_field", "filter.endpoint must be an endpoint id");
      goto out;
    }
    snprintf(op->endpoint, sizeof op->endpoint, "%s", json_string_value(ep));
    op->f.endpoint_id = op->endpoint;
  }
  const json_t *ty = json_object_get(filter, "event_type");
  if (ty && !json_is_null(ty)) {
    if (!json_is_string(ty) || !hookd_api_type_pattern_valid(json_string_value(ty))) {
      hookd_req_error(r, 422, "invalid_field",
                      "filter.event_type must be an event type, a prefix as \"invoice.*\" or "
                      "\"orders/*\", or \"*\"");
      goto out;
    }
    snprintf(op->event_type, sizeof op->event_type, "%s", json_string_value(ty));
    op->f.event_type = op->event_type;
  }
  if (op->f.missing && !op->f.endpoint_id) {
    hookd_req_field_error(r, 422, "missing_field", "filter.endpoint",
                          "filter.endpoint is required with filter.state missing: the endpoint "
                          "the events go to");
    goto out;
  }
  if (!parse_time(r, filter, "since", &op->f.since_ms) ||
      !parse_time(r, filter, "until", &op->f.until_ms))
    goto out;
  if (op->f.since_ms && op->f.until_ms && op->f.since_ms >= op->f.until_ms) {
    hookd_req_error(r, 422, "invalid_field", "filter.since must be before filter.until");
    goto out;
  }
  char since[HOOKD_RFC3339_MAX], until[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(op->f.since_ms, since);
  hookd_fmt_rfc3339_ms(op->f.until_ms, until);
  json_t *norm = json_pack(
      "{s:s,s:o,s:o,s:o,s:o}", "state",
      op->f.missing ? "missing" : hookd_dstate_name(op->f.state), "endpoint",
      op->f.endpoint_id ? json_string(op->f.endpoint_id) : json_null(), "event_type",
      op->f.event_type ? json_string(op->f.event_type) : json_null(), "since",
      op->f.since_ms ? json_string(since) : json_null(), "until",
      op->f.until_ms ? json_string(until) : json_null());
  op->filter_json = norm ? json_dumps(norm, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(norm);
  if (!op->filter_json) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    goto out;
  }
  ok = true;
out:
  json_decref(empty);
  return ok;
}

/* reason: the field, else the Hookd-Reason header; required where `required`. */
static bool take_reason(hookd_req *r, rp_op *op, const json_t *body, bool required) {
  const char *s;
  if (!hookd_api_body_reason(r, body, &s)) return false; /* 255 bytes at most: it fits */
  if (s) snprintf(op->base.reason, sizeof op->base.reason, "%s", s);
  if (required && !op->base.reason[0]) {
    hookd_req_error(r, 422, "missing_field",
                    "reason is required (or a Hookd-Reason header): a bulk replay is audited "
                    "with who asked for it and why");
    return false;
  }
  return true;
}

void hookd_api_replay_create(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"filter", "reason", "rate", NULL};
  if (hookd_api_store_overloaded(r, app)) return;
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  rp_op *op = NULL;
  if (!hookd_api_known_members(r, body, NULL, names)) goto out;
  op = new_op(r, app, run_select, reply_select);
  if (!op) goto out;
  op->created = true;
  op->rate = DEFAULT_RATE;
  const json_t *rate = json_object_get(body, "rate");
  if (rate && json_is_null(rate)) {
    hookd_req_error(r, 422, "invalid_field",
                    "rate may not be null: a replay job's rate is bounded (default 50 per "
                    "second)");
    goto fail;
  }
  /* the bound a replay job has (the message names it, not an endpoint's) */
  if (rate && hookd_api_parse_rate(r, rate, "rate", HOOKD_REPLAY_RATE_MAX, &op->rate) != 0)
    goto fail;
  if (!parse_filter(r, op, json_object_get(body, "filter"))) goto fail;
  if (!take_reason(r, op, body, true)) goto fail;
  json_decref(body);
  hookd_api_submit_scan(&op->base); /* the snapshot's scan, then the writer, then the reader */
  return;
fail:
  rp_cleanup(&op->base);
  free(op);
out:
  json_decref(body);
}

/* ---------- actions ---------- */

static const char *const action_names[] = {"replay.confirm", "replay.pause", "replay.resume",
                                           "replay.cancel"};

static int run_act(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  rp_op *op = (rp_op *)base;
  hookd_replay_job j;
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  if (!rc) rc = be->replay_act(c, op->tenant, op->id, op->action, hookd_now_ms(), &j);
  if (rc) return rc;
  op->expired = !strcmp(j.state, "expired"); /* refused; its expiry written */
  op->recalled = j.recalled;
  hookd_replay_job_free(&j);
  if (op->expired) {
    snprintf(base->err, sizeof base->err, "%s", be->errmsg(c));
    return 0;
  }
  /* a pause or a cancel says how many moved deliveries it took back (docs/replay.md) */
  char detail[64];
  snprintf(detail, sizeof detail, "recalled %lld", (long long)op->recalled);
  bool takes = op->action == HOOKD_REPLAY_PAUSE || op->action == HOOKD_REPLAY_CANCEL;
  return hookd_api_audit(base, c, be, action_names[op->action], op->id, op->tenant,
                         takes ? detail : NULL);
}

static void reply_act(hookd_api_op *base, int rc) {
  rp_op *op = (rp_op *)base;
  if (rc || op->expired) {
    hookd_api_store_error(base, rc ? rc : HOOKD_STORE_STATE,
                          !strcmp(base->err, "tenant") ? "tenant" : "replay job");
    return;
  }
  /* (a pause's or a cancel's take-back goes on at the replayer's steps, in chunks) */
  hookd_replayer_wake(base->app->replayer);
  atomic_fetch_add_explicit(&hookd_m.replay_recalled, (uint64_t)op->recalled,
                            memory_order_relaxed);
  HLOG(HOOKD_LOG_INFO, action_names[op->action], KV_S("replay_id", op->id),
       KV_S("tenant_id", op->tenant), KV_S("actor", base->actor[0] ? base->actor : NULL));
  op->written = true;
  hookd_api_chain(base, run_get, reply_get, HOOKD_API_SCAN);
}

static void act(hookd_req *r, hookd_app *app, hookd_replay_action action) {
  char reason[256];
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  rp_op *op = new_op(r, app, run_act, reply_act);
  if (!op) return;
  op->action = action;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  hookd_api_submit(&op->base, true);
}

void hookd_api_replay_confirm(hookd_req *r, hookd_app *app) { act(r, app, HOOKD_REPLAY_CONFIRM); }
void hookd_api_replay_pause(hookd_req *r, hookd_app *app) { act(r, app, HOOKD_REPLAY_PAUSE); }
void hookd_api_replay_resume(hookd_req *r, hookd_app *app) { act(r, app, HOOKD_REPLAY_RESUME); }
void hookd_api_replay_cancel(hookd_req *r, hookd_app *app) { act(r, app, HOOKD_REPLAY_CANCEL); }

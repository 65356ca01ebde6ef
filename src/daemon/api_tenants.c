/* api_tenants.c — POST /v1/tenants, GET /v1/tenants (by id, paginated; a key scoped to tenants
 * sees its own), GET, PATCH and DELETE /v1/tenants/{tenant} (the delete: its endpoints, sources
 * and open replay jobs with it, in one transaction; docs/api.md "Tenants").
 * A tenant carries its isolation settings: max_in_flight, rate_limit and weight (its share of
 * sending turns); docs/isolation.md. */
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/shown_text.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/rejections.h"
#include "daemon/sources.h"

typedef struct tenant_op {
  hookd_api_op base;
  hookd_tenant t;
  char id[HOOKD_ID_MAX + 64];
  char name[256];
  char *metadata; /* compact JSON; NULL = none */
  unsigned fields;
  bool loaded;
  hookd_kept k; /* create: an Idempotency-Key's answer (the tenant's id) */
} tenant_op;

enum { T_NAME = 1, T_MAXIF = 2, T_RATE = 4, T_WEIGHT = 8, T_META = 16 };

static void tenant_cleanup(hookd_api_op *base) {
  tenant_op *op = (tenant_op *)base;
  if (op->loaded) hookd_tenant_free(&op->t);
  op->loaded = false;
  free(op->k.answer);
  op->k.answer = NULL;
  free(op->metadata);
  op->metadata = NULL;
}

/* Parses the fields shared by create and PATCH into op; answers and returns false on error. */
static bool parse_fields(hookd_req *r, json_t *body, tenant_op *op, bool create) {
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    if (!strcmp(k, "name")) op->fields |= T_NAME;
    else if (!strcmp(k, "max_in_flight")) op->fields |= T_MAXIF;
    else if (!strcmp(k, "rate_limit")) op->fields |= T_RATE;
    else if (!strcmp(k, "weight")) op->fields |= T_WEIGHT;
    else if (!strcmp(k, "metadata")) op->fields |= T_META;
    else if (strcmp(k, "id") != 0) {
      hookd_api_unknown_field(r, NULL, k, NULL);
      return false;
    } else if (!create) {
      hookd_req_error(r, 422, "immutable_field", "id cannot be changed");
      return false;
    }
  }
  const char *name = "";
  if (hookd_json_get_str(body, "name", &name) < 0 || (name && !hookd_shown_name_ok(name))) {
    hookd_req_error(r, 422, "invalid_field",
                    "name must be a string of at most 200 bytes, without control characters or "
                    "bidirectional controls");
    return false;
  }
  snprintf(op->name, sizeof op->name, "%s", name ? name : "");
  int64_t n;
  int rc = hookd_json_get_int(body, "max_in_flight", &n);
  if (rc < 0 || (rc == 0 && (n < 1 || n > 100000))) {
    hookd_req_error(r, 422, "invalid_field", "max_in_flight must be an integer in [1, 100000]");
    return false;
  }
  op->t.max_in_flight = rc == 0 ? (int)n : 0;
  rc = hookd_json_get_int(body, "weight", &n);
  if (rc < 0 || (rc == 0 && (n < 1 || n > 1000))) {
    hookd_req_error(r, 422, "invalid_field", "weight must be an integer in [1, 1000]");
    return false;
  }
  op->t.weight = rc == 0 ? (int)n : 1;
  if (hookd_api_metadata(r, json_object_get(body, "metadata"), &op->metadata) != 0) return false;
  return hookd_api_parse_rate(r, json_object_get(body, "rate_limit"), "rate_limit", 1e6,
                              &op->t.rate_limit) == 0;
}

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op) {
  tenant_op *t = (tenant_op *)op;
  if (t->loaded) hookd_tenant_free(&t->t); /* a second run (its batch redone) */
  t->loaded = false;
  int rc = hookd_kept_lookup(&t->k, op, c, be);
  if (rc == 0) { /* sent again with its Idempotency-Key: the tenant the first one made */
    char made[HOOKD_ID_MAX + 64];
    rc = hookd_kept_id(&t->k, made, sizeof made) ? be->tenant_get(c, made, &t->t)
                                                  : HOOKD_STORE_ERR;
    t->loaded = rc == 0;
    if (rc == HOOKD_STORE_NOTFOUND) {
      snprintf(op->err, sizeof op->err,
               "this Idempotency-Key's request created tenant %s, deleted since", made);
      rc = HOOKD_STORE_STATE;
    }
    return rc;
  }
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  t->t.id = t->id;
  t->t.name = t->name;
  t->t.metadata = t->metadata;
  rc = be->tenant_create(c, &t->t);
  if (!rc) rc = hookd_api_audit(op, c, be, "tenant.create", t->t.id, t->t.id, NULL);
  return rc ? rc : hookd_kept_store(&t->k, c, be, 201, json_pack("{s:s}", "id", t->t.id));
}

static void reply_changed(hookd_api_op *op, int rc, int status) {
  tenant_op *t = (tenant_op *)op;
  if (rc) {
    hookd_api_store_error(op, rc, "tenant");
    return;
  }
  if (t->k.replayed) hookd_req_add_header(op->req, "Idempotent-Replayed", "true");
  else hookd_dispatcher_tenant_changed(op->app->disp, &t->t);
  hookd_api_reply_json_applied(op, status, hookd_json_tenant(&t->t));
}
static void reply_create(hookd_api_op *op, int rc) { reply_changed(op, rc, 201); }
static void reply_patch(hookd_api_op *op, int rc) { reply_changed(op, rc, 200); }

void hookd_api_tenant_create(hookd_req *r, hookd_app *app) {
  size_t len;
  hookd_req_body(r, &len);
  /* every field is optional: no body is {} (a review: 400 "request body is empty") */
  json_t *body = len ? hookd_api_body_object(r, app) : json_object();
  if (!body && !len) hookd_req_error(r, 503, "unavailable", "out of memory");
  if (!body) return;
  tenant_op *op = hookd_api_op_new(sizeof *op, r, app, run_create, reply_create);
  if (!op) {
    json_decref(body);
    return;
  }
  const char *id = NULL;
  bool ok = parse_fields(r, body, op, true);
  if (ok && (hookd_json_get_str(body, "id", &id) < 0 || (id && !hookd_id_valid(id, 64)))) {
    hookd_req_error(r, 422, "invalid_field",
                    "id must be 1-64 characters of letters, digits, '_', '-', '.', ':'");
    ok = false;
  }
  /* a key scoped to some tenants creates only those (and so learns nothing of the others) */
  const hookd_principal *p = hookd_api_principal(r);
  if (ok && p && p->tenants[0] && (!id || !hookd_principal_has_tenant(p, id))) {
    hookd_api_forbid(r,
                    "an API key scoped to tenants may only create a tenant of its scope, by id");
    ok = false;
  }
  /* limits that share the machine among tenants are an unscoped admin's to set */
  if (ok && p && p->tenants[0] && (op->fields & (T_MAXIF | T_RATE | T_WEIGHT))) {
    hookd_api_forbid(r,
                    "max_in_flight, rate_limit and weight are set by an API key of every tenant");
    ok = false;
  }
  int64_t now = hookd_now_ms();
  if (ok) {
    if (id) snprintf(op->id, sizeof op->id, "%s", id);
    else hookd_id_new("ten", now, op->id);
  }
  if (ok)
    ok = hookd_kept_prepare(r, app, &op->k, "tenant.create", NULL, NULL, body, false);
  json_decref(body);
  if (!ok) {
    tenant_cleanup(&op->base);
    free(op);
    return;
  }
  op->base.cleanup = tenant_cleanup;
  op->t.created_ms = op->t.updated_ms = now;
  hookd_api_submit(&op->base, true);
}

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op) {
  tenant_op *t = (tenant_op *)op;
  int rc = be->tenant_get(c, t->id, &t->t);
  t->loaded = rc == 0;
  return rc;
}

static void reply_get(hookd_api_op *op, int rc) {
  tenant_op *t = (tenant_op *)op;
  if (rc) {
    hookd_api_store_error(op, rc, "tenant");
    return;
  }
  hookd_req_reply_json(op->req, 200, hookd_json_tenant(&t->t));
}

void hookd_api_tenant_get(hookd_req *r, hookd_app *app) {
  tenant_op *op = hookd_api_op_new(sizeof *op, r, app, run_get, reply_get);
  if (!op) return;
  op->base.cleanup = tenant_cleanup;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, false);
}

/* PATCH keeps what the body does not name. */
static int run_patch(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op) {
  tenant_op *t = (tenant_op *)op;
  hookd_tenant cur;
  int rc = be->tenant_get(c, t->id, &cur);
  if (rc) return rc;
  if (t->fields & T_NAME) {
    free(cur.name);
    cur.name = strdup(t->name);
  }
  if (t->fields & T_MAXIF) cur.max_in_flight = t->t.max_in_flight;
  if (t->fields & T_RATE) cur.rate_limit = t->t.rate_limit;
  if (t->fields & T_WEIGHT) cur.weight = t->t.weight;
  if (t->fields & T_META) {
    free(cur.metadata);
    cur.metadata = t->metadata ? strdup(t->metadata) : NULL;
  }
  cur.updated_ms = hookd_now_ms();
  t->t = cur;
  t->loaded = true;
  if ((rc = be->tenant_update(c, &t->t)) != 0) return rc;
  char detail[64]; /* the fields changed (names, not values) */
  snprintf(detail, sizeof detail, "%s%s%s%s%s", t->fields & T_NAME ? "name," : "",
           t->fields & T_MAXIF ? "max_in_flight," : "", t->fields & T_RATE ? "rate_limit," : "",
           t->fields & T_WEIGHT ? "weight," : "", t->fields & T_META ? "metadata," : "");
  size_t dl = strlen(detail);
  if (dl) detail[dl - 1] = '\0';
  return hookd_api_audit(op, c, be, "tenant.update", t->t.id, t->t.id, dl ? detail : NULL);
}

void hookd_api_tenant_patch(hookd_req *r, hookd_app *app) {
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  tenant_op *op = hookd_api_op_new(sizeof *op, r, app, run_patch, reply_patch);
  if (!op) {
    json_decref(body);
    return;
  }
  op->base.cleanup = tenant_cleanup;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  bool ok = parse_fields(r, body, op, false);
  json_decref(body);
  const hookd_principal *p = hookd_api_principal(r);
  if (ok && p && p->tenants[0] && (op->fields & (T_MAXIF | T_RATE | T_WEIGHT))) {
    hookd_api_forbid(r,
                    "max_in_flight, rate_limit and weight are set by an API key of every tenant");
    ok = false;
  }
  if (!ok) {
    tenant_cleanup(&op->base);
    free(op);
    return;
  }
  hookd_api_submit(&op->base, true);
}

/* ---------- delete ---------- */

typedef struct tenant_del_op {
  hookd_api_op base;
  char id[HOOKD_ID_MAX + 64];
  hookd_tenant_delete_res res;
} tenant_del_op;

static void del_cleanup(hookd_api_op *base) {
  hookd_tenant_delete_res_free(&((tenant_del_op *)base)->res);
}

static int run_delete(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  tenant_del_op *op = (tenant_del_op *)base;
  int64_t now = hookd_now_ms();
  int rc = be->tenant_delete(c, op->id, now, &op->res);
  if (rc) return rc;
  char detail[160];
  snprintf(detail, sizeof detail,
           "endpoints=%d sources=%zu replays_cancelled=%d keys_revoked=%d "
           "cancelled_deliveries=%d held_deliveries=%d",
           op->res.endpoints_deleted, op->res.n_sources, op->res.replays_cancelled,
           op->res.keys_revoked, op->res.counts.cancelled, op->res.counts.held);
  return hookd_api_audit(base, c, be, "tenant.delete", op->id, op->id, detail);
}

static void answer_delete(hookd_api_op *base) {
  tenant_del_op *op = (tenant_del_op *)base;
  hookd_api_reply_json_applied(base, 200,
                               json_pack("{s:s,s:b,s:i,s:I,s:i,s:i,s:i,s:i,s:b}", "id", op->id,
                                         "deleted", 1,
                                         "endpoints_deleted", op->res.endpoints_deleted,
                                         "sources_deleted", (json_int_t)op->res.n_sources,
                                         "replays_cancelled", op->res.replays_cancelled,
                                         "keys_revoked", op->res.keys_revoked,
                                         "cancelled_deliveries", op->res.counts.cancelled,
                                         "held_deliveries", op->res.counts.held, "cancelling",
                                         op->res.counts.more));
}

static void reply_delete(hookd_api_op *base, int rc) {
  tenant_del_op *op = (tenant_del_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "tenant");
    return;
  }
  hookd_app *app = base->app;
  int64_t now = hookd_now_ms();
  for (size_t i = 0; i < op->res.n_sources; i++) {
    hookd_source_cache_remove(app->sources, op->res.source_ids[i]);
    hookd_rejections_forget(app->rejections, op->res.source_ids[i]);
  }
  for (size_t i = 0; i < op->res.n_endpoints; i++) { /* the dispatcher forgets each */
    hookd_endpoint gone = {.id = op->res.endpoint_ids[i], .tenant_id = op->id, .deleted_ms = now};
    hookd_dispatcher_endpoint_changed(app->disp, &gone);
  }
  hookd_dispatcher_tenant_deleted(app->disp, op->id); /* and the tenant, once they are gone */
  hookd_held_unknown(op->res.counts.held, HOOKD_HELD_BY_DELETE);
  if (op->res.counts.cancelled > 0) HOOKD_ADD(cancelled, (uint64_t)op->res.counts.cancelled);
  HLOG(HOOKD_LOG_INFO, "tenant.deleted", KV_S("tenant_id", op->id),
       KV_I("endpoints", op->res.endpoints_deleted), KV_I("sources", (int64_t)op->res.n_sources),
       KV_I("replays_cancelled", op->res.replays_cancelled),
       KV_I("cancelled", op->res.counts.cancelled), KV_I("held", op->res.counts.held),
       KV_S("actor", base->actor[0] ? base->actor : NULL));
  /* the keys of it alone, revoked, stop working when the answer is sent */
  if (op->res.keys_revoked > 0) hookd_api_keys_reload(base, answer_delete);
  else answer_delete(base);
}

void hookd_api_tenant_delete(hookd_req *r, hookd_app *app) {
  char reason[256];
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  tenant_del_op *op = hookd_api_op_new(sizeof *op, r, app, run_delete, reply_delete);
  if (op) {
    op->base.cleanup = del_cleanup;
    snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
    if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
    hookd_api_submit(&op->base, true);
  }
}

/* ---------- list ---------- */

typedef struct tenants_op {
  hookd_api_op base;
  char after[HOOKD_ID_MAX + 64];
  char scope[512]; /* the key's tenants ("a,b"), when it is scoped */
  int limit;
  hookd_tenant *list;
  size_t n;
} tenants_op;

static void tenants_cleanup(hookd_api_op *base) {
  tenants_op *op = (tenants_op *)base;
  if (op->list) hookd_tenants_free(op->list, op->n);
}

static int by_id(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  tenants_op *op = (tenants_op *)base;
  if (!op->scope[0]) {
    int rc = hookd_api_after_known(base, c, be, HOOKD_MADE_TENANT, NULL, op->after);
    return rc ? rc : be->tenant_page(c, op->after, op->limit + 1, &op->list, &op->n);
  }
  /* a cursor outside its scope: another tenant's id, not told whether it exists */
  bool in_scope = !op->after[0];
  size_t l;
  for (const char *at = op->scope, *t; !in_scope && hookd_scope_next(&at, &t, &l);)
    in_scope = l == strlen(op->after) && !memcmp(t, op->after, l);
  if (!in_scope) {
    base->bad_after = true;
    return HOOKD_STORE_NOTFOUND;
  }
  /* a scoped key: its own tenants that exist, paged as the full list is — by id, after the
   * cursor, limit per page */
  char names[sizeof op->scope], *sorted[sizeof op->scope / 2 + 1]; /* each id cut out in place */
  memcpy(names, op->scope, sizeof names);
  size_t n_ids = 0;
  const char *cur = op->scope, *t;
  size_t len;
  while (n_ids < sizeof sorted / sizeof *sorted && hookd_scope_next(&cur, &t, &len)) {
    sorted[n_ids] = names + (t - op->scope);
    sorted[n_ids++][len] = '\0';
  }
  qsort(sorted, n_ids, sizeof *sorted, by_id);
  size_t cap = 8;
  op->list = calloc(cap, sizeof *op->list);
  if (!op->list) return HOOKD_STORE_ERR;
  for (size_t i = 0; i < n_ids && op->n <= (size_t)op->limit; i++) {
    const char *id = sorted[i];
    if ((i && !strcmp(id, sorted[i - 1])) || (op->after[0] && strcmp(id, op->after) <= 0))
      continue; /* named twice in the scope, or on an earlier page */
    if (op->n == cap) {
      hookd_tenant *nv = realloc(op->list, 2 * cap * sizeof *nv);
      if (!nv) return HOOKD_STORE_ERR;
      op->list = nv;
      cap *= 2;
    }
    int rc = be->tenant_get(c, id, &op->list[op->n]);
    if (rc == HOOKD_STORE_NOTFOUND) continue;
    if (rc) return rc;
    op->n++;
  }
  return 0;
}

static void reply_list(hookd_api_op *base, int rc) {
  tenants_op *op = (tenants_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "tenants");
    return;
  }
  size_t shown = op->n > (size_t)op->limit ? (size_t)op->limit : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++) json_array_append_new(data, hookd_json_tenant(&op->list[i]));
  const char *next = op->n > shown ? op->list[shown - 1].id : NULL;
  hookd_req_reply_json(base->req, 200, hookd_api_page_body(data, next));
}

void hookd_api_tenant_list(hookd_req *r, hookd_app *app) {
  int limit;
  char after[sizeof ((tenants_op *)0)->after];
  if (hookd_api_page(r, NULL, &limit, after, sizeof after) != 0) return;
  tenants_op *op = hookd_api_op_new(sizeof *op, r, app, run_list, reply_list);
  if (!op) return;
  op->base.cleanup = tenants_cleanup;
  op->limit = limit;
  memcpy(op->after, after, sizeof after);
  const hookd_principal *p = hookd_api_principal(r);
  if (p && p->tenants[0]) snprintf(op->scope, sizeof op->scope, "%s", p->tenants);
  hookd_api_submit(&op->base, false);
}

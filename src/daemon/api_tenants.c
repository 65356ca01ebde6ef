/* api_tenants.c — POST /v1/tenants, GET /v1/tenants/{tenant}. */
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "daemon/api.h"

typedef struct tenant_op {
  hookd_api_op base;
  hookd_tenant t;
  char id[HOOKD_ID_MAX + 64];
  char name[256];
} tenant_op;

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op) {
  tenant_op *t = (tenant_op *)op;
  int rc = be->tenant_create(c, &t->t);
  return rc ? rc : hookd_api_audit(op, c, be, "tenant.create", t->t.id, t->t.id, NULL);
}

static void reply_create(hookd_api_op *op, int rc) {
  tenant_op *t = (tenant_op *)op;
  if (rc) {
    hookd_api_store_error(op, rc, "tenant");
    return;
  }
  hookd_req_reply_json(op->req, 201, hookd_json_tenant(&t->t));
}

void hookd_api_tenant_create(hookd_req *r, hookd_app *app) {
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  const char *id = NULL, *name = "";
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    if (strcmp(k, "id") && strcmp(k, "name")) {
      hookd_req_error(r, 422, "unknown_field", "unknown field \"%.64s\"", k);
      json_decref(body);
      return;
    }
  }
  if (hookd_json_get_str(body, "id", &id) < 0 || (id && !hookd_id_valid(id, 64))) {
    hookd_req_error(r, 422, "invalid_field",
                    "id must be 1-64 characters of letters, digits, '_', '-', '.', ':'");
    json_decref(body);
    return;
  }
  if (hookd_json_get_str(body, "name", &name) < 0 || (name && strlen(name) > 200)) {
    hookd_req_error(r, 422, "invalid_field", "name must be a string of at most 200 bytes");
    json_decref(body);
    return;
  }
  tenant_op *op = hookd_api_op_new(sizeof *op, r, app, run_create, reply_create);
  if (!op) {
    json_decref(body);
    return;
  }
  int64_t now = hookd_now_ms();
  if (id)
    snprintf(op->id, sizeof op->id, "%s", id);
  else
    hookd_id_new("ten", now, op->id);
  snprintf(op->name, sizeof op->name, "%s", name ? name : "");
  op->t.id = op->id;
  op->t.name = op->name;
  op->t.created_ms = now;
  json_decref(body);
  hookd_api_submit(&op->base, true);
}

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op) {
  tenant_op *t = (tenant_op *)op;
  return be->tenant_get(c, t->id, &t->t);
}

static void reply_get(hookd_api_op *op, int rc) {
  tenant_op *t = (tenant_op *)op;
  if (rc) {
    hookd_api_store_error(op, rc, "tenant");
    return;
  }
  hookd_req_reply_json(op->req, 200, hookd_json_tenant(&t->t));
  hookd_tenant_free(&t->t);
}

void hookd_api_tenant_get(hookd_req *r, hookd_app *app) {
  tenant_op *op = hookd_api_op_new(sizeof *op, r, app, run_get, reply_get);
  if (!op) return;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, false);
}

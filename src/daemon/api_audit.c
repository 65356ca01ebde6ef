/* api_audit.c — GET /v1/audit?tenant=&limit=&before=  (admin): the append-only audit log,
 * newest first. A key scoped to tenants must name one of them. */
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "daemon/api.h"

/* never NULL: a row the JSON cannot hold (bytes that are not UTF-8, stored before the router
 * refused them) would otherwise vanish from the log */
#define str_or_null hookd_json_str_or_null

typedef struct audit_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64];
  int64_t before;
  int limit;
  hookd_audit *rows;
  size_t n;
} audit_op;

static void audit_cleanup(hookd_api_op *base) {
  audit_op *op = (audit_op *)base;
  hookd_audits_free(op->rows, op->n);
}

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  audit_op *op = (audit_op *)base;
  /* a deleted tenant's log stays readable: the record of what was done to it, its delete too */
  int rc = op->tenant[0] ? be->ever_made(c, HOOKD_MADE_TENANT, NULL, op->tenant) : 0;
  if (rc == HOOKD_STORE_NOTFOUND) snprintf(base->err, sizeof base->err, "tenant");
  return rc ? rc : be->audit_list(c, op->tenant[0] ? op->tenant : NULL, op->before,
                                  op->limit + 1, &op->rows, &op->n);
}

static void reply_list(hookd_api_op *base, int rc) {
  audit_op *op = (audit_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "audit log");
    return;
  }
  size_t shown = op->n > (size_t)op->limit ? (size_t)op->limit : op->n;
  json_t *data = json_array();
  for (size_t i = 0; i < shown; i++) {
    hookd_audit *a = &op->rows[i];
    json_array_append_new(
        data, json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:o,s:o}", "id",
                        hookd_api_cursor_json(base->app, 'a', NULL, a->seq), "at",
                        hookd_json_time(a->at_ms), "actor", str_or_null(a->actor ? a->actor : ""),
                        "action", str_or_null(a->action ? a->action : ""), "target", str_or_null(a->target),
                        "tenant_id", str_or_null(a->tenant_id), "reason", str_or_null(a->reason),
                        "detail", str_or_null(a->detail)));
  }
  int64_t next = op->n > shown ? op->rows[shown - 1].seq : 0;
  hookd_req_reply_json(base->req, 200, hookd_api_seq_page_body(base->app, 'a', NULL, data, next));
}

void hookd_api_audit_list(hookd_req *r, hookd_app *app) {
  int limit = hookd_api_limit(r, 100, 1000);
  if (limit < 0) return;
  const char *tenant = hookd_req_query(r, "tenant");
  if (tenant && !hookd_id_valid(tenant, 64)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "tenant", "tenant must be a tenant id");
    return;
  }
  long long b;
  if (hookd_api_list_scope(r, app, 'a', tenant, &b) != 0) return;
  audit_op *op = hookd_api_op_new(sizeof *op, r, app, run_list, reply_list);
  if (!op) return;
  op->base.cleanup = audit_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", tenant ? tenant : "");
  op->before = b;
  op->limit = limit;
  hookd_api_submit(&op->base, false);
}

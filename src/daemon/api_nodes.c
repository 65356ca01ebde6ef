/* api_nodes.c — GET /v1/nodes (docs/api.md "Operations"): the hookd nodes of the store as this
 * node sees them — on a shared store each node id's clock check (docs/postgres.md "The clock
 * guard"), whether it runs and agrees with this node's clock, this node's vote, whether it
 * claims, and whether its change feed listens. A key of every tenant's: the nodes serve every
 * tenant. */
#include <stdlib.h>
#include <string.h>

#include "core/clockvote.h"
#include "daemon/api.h"

typedef struct nodes_op {
  hookd_api_op base;
  hookd_node_row *rows;
  size_t n;
  int live;
} nodes_op;

static void nodes_cleanup(hookd_api_op *base) {
  nodes_op *op = (nodes_op *)base;
  hookd_node_rows_free(op->rows, op->n);
  op->rows = NULL;
  op->n = 0;
}

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  nodes_op *op = (nodes_op *)base;
  nodes_cleanup(base); /* (a redone batch) */
  return be->nodes_list(c, &op->rows, &op->n, &op->live);
}

/* What the answer says of this node whatever the store: its id, whether it claims, its feed. */
static json_t *this_node(hookd_app *app, const char *store, int live) {
  hookd_dispatcher_stats ds = {0};
  if (app->disp) hookd_dispatcher_get_stats(app->disp, &ds);
  /* (down: not listening yet, or reconnecting) */
  const char *feed = !strcmp(store, "sqlite") || app->cfg->no_change_feed ? "off"
                     : atomic_load(&app->watch_state) == HOOKD_WATCH_LISTENING ? "listening"
                                                                         : "down";
  return json_pack("{s:s,s:o,s:i,s:s,s:b}", "store", store, "node_id",
                   hookd_json_str_or_null(app->cfg->node_id), "live", live, "change_feed", feed,
                   "claiming", !ds.claims_held);
}

static void reply_list(hookd_api_op *base, int rc) {
  nodes_op *op = (nodes_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "nodes");
    return;
  }
  hookd_app *app = base->app;
  int64_t bound = hookd_clock_bound_ms(app->cfg->lease_margin_ms); /* as the dispatcher's vote */
  const hookd_node_row *self = NULL;
  for (size_t i = 0; i < op->n; i++)
    if (!strcmp(op->rows[i].node_id, app->cfg->node_id)) self = &op->rows[i];
  json_t *out = this_node(app, "postgres", op->live);
  json_t *data = json_array();
  hookd_clock_voter *others = calloc(op->n ? op->n : 1, sizeof *others);
  size_t n_others = 0;
  for (size_t i = 0; i < op->n; i++) {
    const hookd_node_row *x = &op->rows[i];
    json_t *row = json_pack("{s:o,s:b,s:b,s:I,s:I,s:o}", "node_id",
                            hookd_json_str_or_null(x->node_id), "self",
                            x == self, "live", x->live, "clock_skew_ms",
                            (json_int_t)x->clock.skew_ms, "clock_err_ms",
                            (json_int_t)x->clock.err_ms, "checked_at",
                            hookd_json_time(x->checked_ms));
    json_object_set_new(row, "agrees",
                        self ? json_boolean(hookd_clock_agree(self->clock, x->clock, bound))
                             : json_null());
    json_array_append_new(data, row);
    if (x != self && x->live && others) others[n_others++] = x->clock;
  }
  json_t *clock = json_null();
  if (self && others) {
    int agreeing, voters;
    hookd_clock_vote(self->clock, others, n_others, bound, &agreeing, &voters);
    clock = json_pack("{s:I,s:i,s:i}", "bound_ms", (json_int_t)bound, "agreeing", agreeing,
                      "voters", voters);
  }
  free(others);
  json_object_set_new(out, "clock", clock);
  json_object_set_new(out, "data", data);
  hookd_req_reply_json(base->req, 200, out);
}

void hookd_api_nodes_list(hookd_req *r, hookd_app *app) {
  const hookd_principal *p = hookd_api_principal(r);
  if (p && p->tenants[0]) {
    hookd_api_forbid(r, "the nodes serve every tenant: an API key of every tenant reads them");
    return;
  }
  if (!app->store->be->nodes_list) { /* SQLite: one node, its clock the only one */
    json_t *out = this_node(app, "sqlite", 1);
    json_object_set_new(out, "clock", json_null());
    json_object_set_new(out, "data",
                        json_pack("[{s:o,s:b,s:b}]", "node_id",
                                  hookd_json_str_or_null(app->cfg->node_id), "self", 1, "live",
                                  1));
    hookd_req_reply_json(r, 200, out);
    return;
  }
  nodes_op *op = hookd_api_op_new(sizeof *op, r, app, run_list, reply_list);
  if (!op) return;
  op->base.cleanup = nodes_cleanup;
  hookd_api_submit(&op->base, false);
}

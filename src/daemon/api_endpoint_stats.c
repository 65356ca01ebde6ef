/* api_endpoint_stats.c — GET /v1/tenants/{t}/endpoints/{id}/stats?since=&until= (docs/api.md
 * "Endpoints"): an endpoint's deliveries made in a window, counted by state as they are now, and
 * its success rate — what a customer's failure rate is, without paging through its deliveries.
 * Each state's count is an index range of ids (ids sort by creation time) cut at a bound, so
 * the read costs the same for an endpoint of millions. */
#include <stdio.h>
#include <string.h>

#include "core/delivery_stats.h"
#include "core/ids.h"
#include "daemon/api.h"

#define STATS_CAP 10000                         /* a count's bound (rows read: one more) */
#define STATS_DEFAULT_MS (7LL * 24 * 3600 * 1000) /* since, before until, when not given */

typedef struct stats_op {
  hookd_api_op base;
  char tenant[128], id[128];
  char from_id[HOOKD_ID_MAX], to_id[HOOKD_ID_MAX];
  int64_t since_ms, until_ms;
  hookd_delivery_counts n;
} stats_op;

static int run_stats(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  stats_op *op = (stats_op *)base;
  hookd_endpoint ep;
  int rc = be->endpoint_get(c, op->id, &ep);
  if (rc) return rc;
  bool mine = !strcmp(ep.tenant_id, op->tenant);
  hookd_endpoint_free(&ep);
  if (!mine) return HOOKD_STORE_NOTFOUND; /* another tenant's: as none */
  /* one row past the bound tells a count of exactly the bound from one over it */
  return be->endpoint_stats(c, op->id, op->from_id, op->to_id, STATS_CAP + 1, op->n.by_state,
                            &op->n.dead_unsent);
}

static void reply_stats(hookd_api_op *base, int rc) {
  stats_op *op = (stats_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "endpoint");
    return;
  }
  unsigned capped;
  hookd_delivery_counts_clamp(&op->n, STATS_CAP, &capped);
  json_t *counts = json_object(), *at_least = json_array();
  for (int s = 0; s <= HOOKD_DS__COUNT; s++) {
    const char *name = s == HOOKD_DS__COUNT ? "dead_unsent" : hookd_dstate_name((hookd_dstate)s);
    if (s < HOOKD_DS__COUNT) json_object_set_new(counts, name, json_integer(op->n.by_state[s]));
    if (capped & 1u << s) json_array_append_new(at_least, json_string(name));
  }
  double r;
  json_t *rate = hookd_delivery_success_rate(&op->n, capped, &r) ? json_real(r) : json_null();
  json_t *out = json_pack("{s:s,s:o,s:o,s:o,s:I,s:o,s:o}", "endpoint_id", op->id, "since",
                          hookd_json_time(op->since_ms), "until", hookd_json_time(op->until_ms),
                          "deliveries", counts, "dead_unsent", (json_int_t)op->n.dead_unsent,
                          "at_least", at_least, "success_rate", rate);
  if (!out) {
    hookd_req_error(base->req, 503, "unavailable", "out of memory");
    return;
  }
  hookd_req_reply_json(base->req, 200, out);
}

void hookd_api_endpoint_stats(hookd_req *r, hookd_app *app) {
  const char *type;
  int64_t since, until;
  /* (type stays NULL: the route reads no event_type) */
  if (hookd_api_type_time_query(r, &type, &since, &until) != 0) return;
  int64_t now = hookd_now_ms();
  bool open_top = !until || until >= now; /* a window ending now or later (below) */
  if (!until) until = now;
  if (!since) since = until > STATS_DEFAULT_MS ? until - STATS_DEFAULT_MS : 1;
  if (since >= until) { /* (since in the future, until left out: not "nothing happened") */
    hookd_req_field_error(r, 400, "invalid_parameter", "since", "since must be before until");
    return;
  }
  stats_op *op = hookd_api_op_new(sizeof *op, r, app, run_stats, reply_stats);
  if (!op) return;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  op->since_ms = since;
  op->until_ms = until;
  /* an id is never stamped behind the clock that made it, but after the wall clock is stepped
   * back ids carry on from the time it had reached (docs/architecture.md "Ids"), ahead of it:
   * a window that ends now or later is open at the top, so no delivery made in it is missed */
  hookd_id_floor("dlv", since, op->from_id);
  hookd_id_floor("dlv", open_top ? INT64_MAX : until, op->to_id);
  hookd_api_submit(&op->base, false);
}

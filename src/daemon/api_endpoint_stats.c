/* api_endpoint_stats.c — GET /v1/tenants/{t}/endpoints/{id}/stats?since=&until= (docs/api.md
 * "Endpoints"): an endpoint's deliveries made in a window, counted by state as they are now, and
 * its success rate — what a customer's failure rate is, without paging through its deliveries.
 * Each state's count is an index range of ids (ids sort by creation time) cut at a bound, so
 * the read costs the same for an endpoint of millions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "daemon/api.h"

#define STATS_CAP 10000                         /* rows read at most per state */
#define STATS_DEFAULT_MS (7LL * 24 * 3600 * 1000) /* since, before until, when not given */

typedef struct stats_op {
  hookd_api_op base;
  char tenant[128], id[128];
  char from_id[HOOKD_ID_MAX], to_id[HOOKD_ID_MAX];
  int64_t since_ms, until_ms;
  int64_t counts[HOOKD_DS__COUNT];
} stats_op;

static int run_stats(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  stats_op *op = (stats_op *)base;
  hookd_endpoint ep;
  int rc = be->endpoint_get(c, op->id, &ep);
  if (rc) return rc;
  bool mine = !strcmp(ep.tenant_id, op->tenant);
  hookd_endpoint_free(&ep);
  if (!mine) return HOOKD_STORE_NOTFOUND; /* another tenant's: as none */
  return be->endpoint_stats(c, op->id, op->from_id, op->to_id, STATS_CAP, op->counts);
}

static void reply_stats(hookd_api_op *base, int rc) {
  stats_op *op = (stats_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "endpoint");
    return;
  }
  json_t *counts = json_object(), *capped = json_array();
  for (int s = 0; s < HOOKD_DS__COUNT; s++) {
    const char *name = hookd_dstate_name((hookd_dstate)s);
    json_object_set_new(counts, name, json_integer(op->counts[s]));
    if (op->counts[s] >= STATS_CAP) json_array_append_new(capped, json_string(name));
  }
  int64_t ok = op->counts[HOOKD_DS_DELIVERED], dead = op->counts[HOOKD_DS_DEAD];
  json_t *rate = ok + dead ? json_real(round((double)ok / (double)(ok + dead) * 1e4) / 1e4)
                           : json_null();
  json_t *out = json_pack("{s:s,s:o,s:o,s:o,s:o,s:o}", "endpoint_id", op->id, "since",
                          hookd_json_time(op->since_ms), "until", hookd_json_time(op->until_ms),
                          "deliveries", counts, "at_least", capped, "success_rate", rate);
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
  if (!until) until = hookd_now_ms();
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
  hookd_id_floor("dlv", since, op->from_id);
  hookd_id_floor("dlv", until, op->to_id);
  hookd_api_submit(&op->base, false);
}

/* ops_events.c — operational events (ops_events.h): the envelope of one, published to the ops
 * tenant like any event, fanned out to its endpoints by their event_types. */
#include "daemon/ops_events.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/timefmt.h"
#include "daemon/log.h"

int hookd_ops_publish(hookd_store_conn *c, const hookd_store_backend *be, const char *ops_tenant,
                      const char *type, json_t *data, int64_t now_ms, hookd_publish_res *res) {
  static atomic_bool told; /* the tenant missing: logged once */
  char id[HOOKD_ID_MAX], ts[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(now_ms, ts);
  if (hookd_id_new("evt", now_ms, id) != 0) {
    json_decref(data);
    return HOOKD_STORE_ERR;
  }
  json_t *env = json_pack("{s:s,s:s,s:s,s:o}", "id", id, "type", type, "timestamp", ts, "data",
                          data);
  char *body = env ? json_dumps(env, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  if (!body) {
    json_decref(env);
    return HOOKD_STORE_ERR;
  }
  static const unsigned char no_hash[32]; /* a generated id: no request can repeat it */
  hookd_publish_req req = {.tenant_id = ops_tenant,
                           .event_id = id,
                           .type = type,
                           .body = body,
                           .body_len = strlen(body),
                           .payload = data, /* (env's: no parse of body for the filters) */
                           .request_hash = no_hash,
                           .occurred_ms = now_ms,
                           .now_ms = now_ms};
  hookd_publish_res_free(res); /* a redone batch runs the op again */
  int rc = be->publish(c, &req, res);
  free(body);
  json_decref(env);
  if (rc == HOOKD_STORE_NOTFOUND) { /* no such tenant (yet): nothing to tell it */
    hookd_publish_res_free(res);
    if (!atomic_exchange(&told, true))
      HLOG(HOOKD_LOG_WARN, "ops.no_tenant", KV_S("tenant_id", ops_tenant),
           KV_S("hint", "create the tenant --ops-tenant names to receive operational events"));
    return HOOKD_STORE_OK;
  }
  return rc;
}

/* ops_events.h — operational events (docs/api.md "Operational events"): what hookd tells the
 * platform's operator about its tenants' endpoints, published as events of one tenant
 * (--ops-tenant) in the transaction of the change they report. */
#ifndef HOOKD_DAEMON_OPS_EVENTS_H
#define HOOKD_DAEMON_OPS_EVENTS_H

#include <jansson.h>

#include "store/store.h"

/* Publishes an event of `type` with `data` (taken) to ops_tenant, inside the caller's
 * transaction (writer thread); res: the endpoints to hint. 0 also when the tenant does not
 * exist (nothing published; logged once); else the store's error. */
int hookd_ops_publish(hookd_store_conn *c, const hookd_store_backend *be, const char *ops_tenant,
                      const char *type, json_t *data, int64_t now_ms, hookd_publish_res *res);

#endif

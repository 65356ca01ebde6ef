/* rejections.h — what this node refused lately at each source's provider-facing URL: counts by
 * kind and the last few refusals with the message the provider was answered, shown with the
 * source (GET /v1/sources/{id} "rejected"; docs/inbound.md "What was refused, per source").
 * In memory only: a forged request costs a counter and a slot, never a store write.
 * Thread-safe (the receive path adds, the API's reader thread reads). */
#ifndef HOOKD_DAEMON_REJECTIONS_H
#define HOOKD_DAEMON_REJECTIONS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon/metrics.h"

#define HOOKD_REJECTIONS_RECENT 10 /* refusals kept per source, newest first */

typedef struct hookd_rejections hookd_rejections;

hookd_rejections *hookd_rejections_new(int64_t since_ms);
void hookd_rejections_free(hookd_rejections *j);
#define HOOKD_REJECTIONS_LOG_PER_S 10 /* log lines a second per source, the rest counted */

/* Records one refusal. message never quotes the request (it is shown to API readers); what is
 * not printable ASCII in it is shown as '?', and it is cut at 200 bytes. Out of memory: counted
 * nowhere, silently (the metric and the log still have it). Returns whether to log it: -1 when
 * the source's refusals had their HOOKD_REJECTIONS_LOG_PER_S lines in at_ms's second already
 * (anyone who knows a source's URL can send refused requests as fast as the link goes), else
 * the number not logged since the source's last line. */
int64_t hookd_rejections_add(hookd_rejections *j, const char *source_id, int64_t at_ms,
                             int status, hookd_reject_reason kind, const char *message);
/* {"since", "total", "by_kind": {kind: n}, "recent": [{"at", "status", "kind", "message"}]}
 * for the source (zero counts when none), or NULL when out of memory. */
json_t *hookd_rejections_json(hookd_rejections *j, const char *source_id);
/* A deleted source's record goes with it. */
void hookd_rejections_forget(hookd_rejections *j, const char *source_id);
/* Forgets the records of the sources alive(id, arg) says are gone (deleted through another
 * node, or refused while their delete went through). */
void hookd_rejections_prune(hookd_rejections *j, bool (*alive)(const char *id, void *arg),
                            void *arg);

#endif

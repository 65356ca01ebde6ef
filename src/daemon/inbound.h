/* inbound.h — the provider-facing receive path (POST /in/{source}); see docs/inbound.md. */
#ifndef HOOKD_DAEMON_INBOUND_H
#define HOOKD_DAEMON_INBOUND_H

#include "daemon/app.h"
#include "daemon/server.h"

void hookd_inbound_handle(hookd_req *r, hookd_app *app);
/* /in/{source}'s check on the head (the router's gate), before the body is read: 404 when
 * there is no such source; 405, 415 or 413 (MoMo) when the head alone cannot succeed. */
bool hookd_inbound_gate(hookd_req *r, hookd_app *app);
/* A method the router sends to no provider route (PUT, HEAD, …) on /in/{source_id}: 404 when
 * there is no such source, else 405 with the methods its provider sends in Allow. */
void hookd_inbound_wrong_method(hookd_req *r, hookd_app *app, const char *source_id);
/* A request to /in/{source_id} answered 413 by the server: counted (reason body_too_large) and
 * logged as inbound.rejected when it would have been received otherwise — the source exists
 * and takes the method (else it is a 404 or a 405 refused on its size first, not counted). */
void hookd_inbound_too_large(hookd_app *app, const char *source_id, const char *method);

#endif

/* api_routing.c — why an endpoint did or did not get an outbound event (docs/api.md "Events").
 *   GET /v1/tenants/{t}/events/{id}/routing?limit=&after=&endpoint=
 *        each of the tenant's own endpoints (by id, paged as the endpoints list; or the one
 *        named): the event's delivery to it, or every reason its settings now give for none.
 * Read-only, on the reader: the event with its deliveries, then a page of endpoints, matched
 * with the fan-out's own matchers (hookd_filter_match, hookd_channels_match, the payload
 * filter's) — not its SQL, whose result for a published event is the deliveries it made. */
#include <stdlib.h>
#include <string.h>

#include "core/delivery_state.h"
#include "core/ids.h"
#include "core/payload_filter.h"
#include "daemon/api.h"

typedef struct routing_op {
  hookd_api_op base;
  char tenant[HOOKD_ID_MAX + 64];
  char id[HOOKD_ID_MAX + 64];
  char after[HOOKD_ID_MAX + 64];
  char endpoint[HOOKD_ID_MAX + 64]; /* ?endpoint=: that one alone ("": every one) */
  bool no_endpoint;                 /* it is none of the tenant's own endpoints (404) */
  int limit;
  hookd_event ev;
  hookd_delivery *dl;
  size_t n_dl;
  bool loaded;
  bool no_tenant; /* the tenant is not there (404 names it, not the event) */
  hookd_endpoint *eps;
  size_t n_eps;
} routing_op;

static void routing_cleanup(hookd_api_op *base) {
  routing_op *op = (routing_op *)base;
  if (op->loaded) {
    hookd_event_free(&op->ev);
    hookd_deliveries_free(op->dl, op->n_dl);
  }
  if (op->eps) hookd_endpoints_free(op->eps, op->n_eps);
  op->loaded = false;
  op->eps = NULL;
  op->n_eps = 0;
}

static int run_routing(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  routing_op *op = (routing_op *)base;
  routing_cleanup(base);
  int rc = hookd_api_tenant_known(base, c, be, op->tenant);
  op->no_tenant = rc == HOOKD_STORE_NOTFOUND;
  if (rc) return rc;
  rc = be->event_get(c, op->tenant, op->id, &op->ev, &op->dl, &op->n_dl);
  if (rc) return rc;
  op->loaded = true;
  if (op->ev.inbound) return HOOKD_STORE_STATE;
  if ((rc = hookd_api_after_known(base, c, be, HOOKD_MADE_ENDPOINT, op->tenant, op->after)))
    return rc;
  if (op->endpoint[0]) { /* support knows the endpoint: no paging through thousands */
    if (!(op->eps = calloc(1, sizeof *op->eps))) return HOOKD_STORE_ERR;
    rc = be->endpoint_get(c, op->endpoint, op->eps);
    if (rc == 0) {
      op->n_eps = 1;
      /* another tenant's (not told apart from none), a deleted one, a source's destination */
      if (strcmp(op->eps->tenant_id, op->tenant) || op->eps->deleted_ms || op->eps->source_id)
        rc = HOOKD_STORE_NOTFOUND;
    }
    op->no_endpoint = rc == HOOKD_STORE_NOTFOUND;
    return rc;
  }
  return be->endpoint_list(c, op->tenant, op->after, op->limit + 1, HOOKD_EP_OWN, -1, &op->eps,
                           &op->n_eps);
}

/* The event's delivery to endpoint `id`, or NULL. */
static const hookd_delivery *delivery_to(const routing_op *op, const char *id) {
  for (size_t i = 0; i < op->n_dl; i++)
    if (op->dl[i].endpoint_id && !strcmp(op->dl[i].endpoint_id, id)) return &op->dl[i];
  return NULL;
}

/* Appends code to why (and its words to *detail, when it is the first). */
static void add_reason(json_t *why, const char **detail, const char *code, const char *words) {
  json_array_append_new(why, json_string(code));
  if (!*detail) *detail = words;
}

/* Every reason endpoint ep's settings now give for not taking the event; "changed_since" when
 * they take it (its settings, or its enabled state, were otherwise at the publish). *parsed
 * keeps the envelope's parse across the page's endpoints. */
static json_t *why_not(const routing_op *op, const hookd_endpoint *ep, json_t **parsed,
                       const char **detail) {
  const hookd_event *ev = &op->ev;
  json_t *why = json_array();
  if (!why) return NULL;
  if (ep->created_ms > ev->created_ms)
    add_reason(why, detail, "created_after_event",
               "the endpoint was made after the event was published");
  if (ev->test_endpoint && strcmp(ev->test_endpoint, ep->id) != 0)
    add_reason(why, detail, "test_event", "a test event, for another endpoint");
  if (!ep->enabled)
    add_reason(why, detail, "disabled",
               "the endpoint is disabled: events published while it is are not fanned out to it");
  if (!hookd_filter_match(ep->event_types, ev->type))
    add_reason(why, detail, "event_types", "the endpoint's event_types do not take the type");
  if (!hookd_channels_match(ep->channels, ev->channels))
    add_reason(why, detail, "channels", "none of the endpoint's channels is one of the event's");
  if (ep->payload_filter && ev->purged_ms) {
    add_reason(why, detail, "payload_purged",
               "the endpoint has a payload_filter and the event's payload was purged");
  } else if (ep->payload_filter) {
    int takes = hookd_pfilter_match_envelope(NULL, ep->payload_filter, ev->body, ev->body_len,
                                             parsed, NULL);
    if (takes == HOOKD_PFILTER_OVER)
      add_reason(why, detail, "payload_filter_gave_up",
                 "the endpoint's payload_filter gave up: more than 10,000 steps");
    else if (takes != HOOKD_PFILTER_YES)
      add_reason(why, detail, "payload_filter",
                 "the endpoint's payload_filter does not take the payload");
  }
  if (json_array_size(why) == 0)
    add_reason(why, detail, "changed_since",
               "the endpoint takes the event now: it was disabled, or its settings were "
               "different, when the event was published; POST .../events/{id}/deliveries gives "
               "it the event");
  return why;
}

static void reply_routing(hookd_api_op *base, int rc) {
  routing_op *op = (routing_op *)base;
  if (rc == HOOKD_STORE_STATE && op->loaded && op->ev.inbound) {
    hookd_req_error(base->req, 409, "invalid_state",
                    "an inbound event goes to its source's destinations: its deliveries are in "
                    "GET /v1/tenants/{tenant}/events/{id}");
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc,
                          op->no_tenant ? "tenant" : op->no_endpoint ? "endpoint" : "event");
    return;
  }
  json_t *data = json_array(), *parsed = NULL;
  size_t shown = op->n_eps > (size_t)op->limit ? (size_t)op->limit : op->n_eps;
  for (size_t i = 0; data && i < shown; i++) {
    const hookd_endpoint *ep = &op->eps[i];
    const hookd_delivery *d = delivery_to(op, ep->id);
    const char *detail = NULL;
    /* (the state as a delivery's JSON names it: hookd_api_delivery_json) */
    json_t *why = d ? json_array() : why_not(op, ep, &parsed, &detail);
    json_t *e = json_pack("{s:s,s:o,s:o,s:o,s:o}", "endpoint_id", ep->id, "delivery_id",
                          hookd_json_str_or_null(d ? d->id : NULL), "delivery_state",
                          hookd_json_str_or_null(d ? hookd_dstate_name(d->state) : NULL),
                          "why_not", why ? why : json_null(), "detail",
                          hookd_json_str_or_null(detail));
    if (!e || json_array_append_new(data, e)) {
      json_decref(data);
      data = NULL;
    }
  }
  json_decref(parsed);
  if (!data) {
    hookd_req_error(base->req, 500, "internal", "out of memory");
    return;
  }
  hookd_req_reply_json(base->req, 200,
                       hookd_api_page_body(data, op->n_eps > shown ? op->eps[shown - 1].id
                                                                   : NULL));
}

void hookd_api_event_routing(hookd_req *r, hookd_app *app) {
  routing_op *op = hookd_api_op_new(sizeof *op, r, app, run_routing, reply_routing);
  if (!op) return;
  op->base.cleanup = routing_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  const char *endpoint = hookd_req_query(r, "endpoint");
  if (hookd_api_page(r, NULL, &op->limit, op->after, sizeof op->after) != 0) {
    free(op);
    return;
  }
  if (endpoint && (!hookd_id_valid(endpoint, 128) || op->after[0])) {
    hookd_req_field_error(r, 400, "invalid_parameter", "endpoint",
                          op->after[0] ? "endpoint names one endpoint: it takes no after"
                                       : "endpoint must be an id");
    free(op);
    return;
  }
  snprintf(op->endpoint, sizeof op->endpoint, "%s", endpoint ? endpoint : "");
  hookd_api_submit(&op->base, false);
}

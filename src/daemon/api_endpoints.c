/* api_endpoints.c — the endpoints of a tenant:
 *   POST   /v1/tenants/{t}/endpoints           create (201, with its whsec_ secret)
 *   GET    /v1/tenants/{t}/endpoints           list (cursor pagination)
 *   GET    /v1/tenants/{t}/endpoints/{id}      one
 *   PATCH  /v1/tenants/{t}/endpoints/{id}      change url, filter, limits, policy, enabled
 *   DELETE /v1/tenants/{t}/endpoints/{id}      delete (its pending deliveries are cancelled)
 *   GET    /v1/tenants/{t}/endpoints/{id}/secret
 *   GET    /v1/tenants/{t}/endpoints/{id}/headers  its custom headers' values (admin)
 * A new or changed URL passes the destination policy (shape, then every resolved address)
 * before anything is stored: 422 naming the rule otherwise. */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/custom_headers.h"
#include "core/ids.h"
#include "core/payload_filter.h"
#include "core/secretbox.h"
#include "core/shown_text.h"
#include "core/sign.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/ops_events.h"

/* Fields a body may carry, and which of them were present (PATCH applies only those). */
enum {
  F_URL = 1 << 0, F_DESC = 1 << 1, F_TYPES = 1 << 2, F_ENABLED = 1 << 3, F_MAXIF = 1 << 4,
  F_TIMEOUT = 1 << 5, F_RETRY = 1 << 6, F_SECRET = 1 << 7, F_ID = 1 << 8, F_SIGNING = 1 << 9,
  F_RATE = 1 << 10, F_ORDERED = 1 << 11, F_LANE = 1 << 12, F_IDEMPOTENT = 1 << 13,
  F_HEADERS = 1 << 14, F_CHANNELS = 1 << 15, F_METADATA = 1 << 16, F_PFILTER = 1 << 17,
  F_BODY = 1 << 18,
};
static const char *const field_names[] = {"url",        "description", "event_types", "enabled",
                                          "max_in_flight", "timeout_ms", "retry",       "secret",
                                          "id",         "signing",     "rate_limit",  "ordered",
                                          "lane_policy", "idempotent", "headers", "channels",
                                          "metadata", "payload_filter", "body_format", NULL};

typedef struct ep_op {
  hookd_api_op base;
  unsigned fields;
  char tenant[HOOKD_ID_MAX + 64];
  char id[HOOKD_ID_MAX + 64];
  /* parsed input (owned) */
  char *url, *description, *event_types, *secret;
  size_t *types_at;          /* each kept pattern's index in the request's array (errors) */
  char *channels;            /* comma-separated; NULL = every event */
  char *metadata;            /* compact JSON; NULL = none */
  char *payload_filter;      /* compact JSON; NULL = every payload */
  char *headers;             /* custom headers as compact JSON, plain (NULL = none) */
  bool ed25519;              /* signing scheme asked for at creation */
  char *plain_secret;        /* the new secret, returned once to the caller */
  char public_key[HOOKD_ED_SECRET_MAX];
  int64_t expire_previous_s; /* rotation overlap */
  bool enabled;
  int max_in_flight, timeout_ms;
  double rate_limit;
  bool ordered;
  bool idempotent; /* an inbound destination's (PATCH only) */
  const char *lane_policy;
  const char *body_format; /* "envelope" or "payload" */
  hookd_api_retry retry; /* overrides; -1 = unchanged */
  /* result */
  hookd_endpoint ep;
  hookd_delete_counts deleted;
  bool listing;
  int kind; /* a listing's: HOOKD_EP_ANY, _OWN or _DEST */
  int enabled_filter; /* a listing's: -1 either, 1 the enabled ones, 0 the disabled ones */
  hookd_endpoint *list;
  size_t n;
  int limit;
  char after[HOOKD_ID_MAX + 64];
  bool want_secret;
  bool want_headers;         /* GET …/headers */
  hookd_dest_check check;
  hookd_kept k;              /* create: an Idempotency-Key's answer (the endpoint's id) */
  bool bad_types;            /* a pattern the event-type catalog has no type for (err) */
  /* create with an Idempotency-Key whose URL was refused: the kept answer is looked up first (the
   * first send may have made it, before DNS failed or the policy changed), else this refusal */
  bool refused;
  hookd_url_error refusal;
  bool not_managers; /* a manager's key at an inbound source's destination: 403 */
  hookd_publish_res ops;  /* the operational event of the change (--ops-tenant): its hints */
} ep_op;

static void ep_op_cleanup(hookd_api_op *op) {
  ep_op *e = (ep_op *)op;
  free(e->url);
  free(e->description);
  free(e->event_types);
  free(e->types_at);
  free(e->channels);
  free(e->metadata);
  free(e->payload_filter);
  hookd_secret_free(e->secret);
  hookd_secret_free(e->headers);
  hookd_secret_free(e->plain_secret);
  hookd_endpoint_free(&e->ep);
  hookd_publish_res_free(&e->ops);
  if (e->list) hookd_endpoints_free(e->list, e->n);
  free(e->check.url);
  free(e->k.answer);
  e->k.answer = NULL;
}

/* The operational event of a change to one of a tenant's own endpoints, in its transaction
 * (docs/api.md "Operational events"; Svix's endpoint.created, .updated, .deleted): what a
 * platform mirrors of the changes its customers make in the portal. fields: the ones the request
 * set (updated), comma-separated. Not of the ops tenant's own endpoints, nor a source's destination. */
static int ops_event(ep_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                     const char *type, const char *fields) {
  const char *ops = op->base.app->cfg->ops_tenant;
  hookd_publish_res_free(&op->ops); /* a redone batch runs the op again */
  if (!ops[0] || op->ep.source_id || !strcmp(op->tenant, ops)) return 0;
  int64_t now = hookd_now_ms();
  char at[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(now, at);
  json_t *data = json_pack("{s:s,s:s,s:s,s:s}", "tenant_id", op->tenant, "endpoint_id",
                           op->ep.id ? op->ep.id : op->id, "actor", op->base.actor, "at", at);
  if (data && fields) {
    json_t *list = json_array();
    for (const char *f = fields; list && *f;) {
      size_t n = strcspn(f, ",");
      json_array_append_new(list, json_stringn(f, n));
      f += n + (f[n] == ',');
    }
    json_object_set_new(data, "fields", list ? list : json_null());
  }
  if (!data) return HOOKD_STORE_ERR;
  return hookd_ops_publish(c, be, ops, type, data, now, &op->ops);
}

/* After the commit: counted, and the ops event's deliveries are due now. */
static void ops_hints(ep_op *op) {
  if (op->ops.event_id) HOOKD_INC(ops_events);
  for (size_t i = 0; i < op->ops.n_endpoints; i++)
    hookd_dispatcher_hint(op->base.app->disp, op->ops.endpoints[i], op->ops.due_ms);
  if (op->ops.endpoints_truncated) hookd_dispatcher_rescan(op->base.app->disp);
}

static bool valid_type_pattern(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 256) return false; /* as a published type */
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.' || c == ':';
    /* '*' only as "*" or a final ".*" after a prefix (".*" alone matched nothing) that does
     * not end with a '.' ("a..*", a typo of "a.*", matched "a..x" alone) */
    if (c == '*') ok = (n == 1) || (i == n - 1 && i > 1 && s[i - 1] == '.' && s[i - 2] != '.');
    if (!ok) return false;
  }
  return true;
}

static bool valid_secret(bool ed25519, const char *s) {
  if (ed25519) {
    char pk[HOOKD_ED_SECRET_MAX];
    return hookd_ed25519_public(s, pk) == 0;
  }
  hookd_hmac_key key;
  bool ok = strncmp(s, "whsec_", 6) == 0 && hookd_secret_parse(s, &key) == 0 && key.len >= 24 &&
            key.len <= 64;
  OPENSSL_cleanse(&key, sizeof key);
  return ok;
}

/* A new secret of the endpoint's scheme (malloc'd), and its public key for Ed25519. */
static char *new_secret(bool ed25519, char public_key[HOOKD_ED_SECRET_MAX]) {
  char sec[HOOKD_SECRET_MAX];
  int rc = ed25519 ? hookd_ed25519_generate(sec, public_key) : hookd_secret_generate(sec);
  char *out = rc == 0 ? strdup(sec) : NULL;
  OPENSSL_cleanse(sec, sizeof sec);
  return out;
}

/* "url,retry": the names of the fields present, for the audit log (values are not logged). */
static void fields_detail(unsigned fields, char *out, size_t len) {
  size_t o = 0;
  out[0] = '\0';
  for (int i = 0; field_names[i]; i++)
    if (fields & (1u << i))
      o += (size_t)snprintf(out + o, o < len ? len - o : 0, "%s%s", o ? "," : "", field_names[i]);
}

/* The endpoint as shown, with its custom headers' names in their order, never their values
 * (GET …/headers, admin). They are opened to be named: one sealed object holds both. */
static json_t *ep_json(const hookd_app *app, const hookd_endpoint *ep) {
  json_t *v = hookd_json_endpoint(ep, app->cfg->max_timeout_ms);
  json_object_set_new(v, "headers", hookd_api_header_names(app, ep));
  return v;
}

/* payload_filter: null or {} (every payload), or a filter (docs/api.md "Payload filters"),
 * kept as compact JSON; a refusal names the path of what is wrong in param. */
static bool parse_payload_filter(hookd_req *r, const json_t *body, ep_op *op) {
  const json_t *pf = json_object_get(body, "payload_filter");
  if (json_is_null(pf) || (json_is_object(pf) && json_object_size(pf) == 0)) return true;
  char path[600], why[200], param[700];
  if (hookd_pfilter_check(pf, path, sizeof path, why, sizeof why) != 0) {
    snprintf(param, sizeof param, "payload_filter%s%s", *path ? "." : "", path);
    /* (a param longer than 256 bytes is left out; the message names it, cut) */
    hookd_req_field_error(r, 422, "invalid_field", param, "%.300s: %s", param, why);
    return false;
  }
  op->payload_filter = json_dumps(pf, JSON_COMPACT);
  if (!op->payload_filter || strlen(op->payload_filter) > HOOKD_PFILTER_MAX_BYTES) {
    hookd_req_error(r, 422, "invalid_field",
                    "payload_filter must be at most %d bytes of compact JSON",
                    HOOKD_PFILTER_MAX_BYTES);
    return false;
  }
  return true;
}

/* Parses and validates the body into op; answers and returns false on error. */
static bool parse_fields(hookd_req *r, hookd_app *app, json_t *body, ep_op *op, bool create) {
  const hookd_config *cfg = app->cfg;
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    int i = 0;
    while (field_names[i] && strcmp(field_names[i], k)) i++;
    if (!field_names[i]) {
      hookd_api_unknown_field(r, NULL, k, NULL);
      return false;
    }
    /* whether a request may be sent again is a property of an inbound source's destination
     * (what its handler does with a repeat); an endpoint of the tenant's own is never asked */
    if (create && !strcmp(k, "idempotent")) {
      hookd_req_error(r, 422, "invalid_field",
                      "idempotent applies only to a destination of an inbound source (POST "
                      "/v1/sources/{id}/destinations)");
      return false;
    }
    if (!create && (!strcmp(k, "id") || !strcmp(k, "signing") || !strcmp(k, "secret"))) {
      /* (a rotation keeps the scheme: signing is fixed at creation — a review) */
      hookd_req_error(r, 422, "immutable_field", "%s cannot be changed%s", k,
                      !strcmp(k, "secret")    ? ": rotate with POST …/secret/rotate"
                      : !strcmp(k, "signing") ? ": it is fixed at creation (create an endpoint "
                                                "with the scheme wanted)"
                                              : "");
      return false;
    }
    /* null means "every type" / "no limit" / "empty" for these; for the others it would silently
     * mean the default (an endpoint PATCHed {"enabled": null} was enabled) */
    if (json_is_null(v) && strcmp(k, "event_types") && strcmp(k, "rate_limit") &&
        strcmp(k, "description") && strcmp(k, "headers") && strcmp(k, "channels") &&
        strcmp(k, "metadata") && strcmp(k, "payload_filter")) {
      hookd_req_error(r, 422, "invalid_field", "%s may not be null", k);
      return false;
    }
    op->fields |= 1u << i;
  }
  const char *s = NULL;
  if (create && !(op->fields & F_URL)) {
    hookd_req_error(r, 422, "missing_field", "url is required: the endpoint's https URL");
    return false;
  }
  if (hookd_json_get_str(body, "url", &s) < 0) {
    hookd_req_error(r, 422, "invalid_field", "url must be a string");
    return false;
  }
  if (op->fields & F_URL) op->url = strdup(s);
  if (hookd_json_get_str(body, "id", &s) < 0 ||
      ((op->fields & F_ID) && !hookd_id_valid(s, 64))) {
    hookd_req_error(r, 422, "invalid_field", "id must be 1-64 characters of [A-Za-z0-9_.:-]");
    return false;
  }
  if (op->fields & F_ID) snprintf(op->id, sizeof op->id, "%s", s);
  s = "";
  if (hookd_json_get_str(body, "description", &s) < 0 || strlen(s) > 1024 ||
      !hookd_shown_text_ok(s, true, NULL)) {
    hookd_req_error(r, 422, "invalid_field",
                    "description must be a string of at most 1024 bytes, without control "
                    "characters (but tabs and line feeds) or bidirectional controls");
    return false;
  }
  op->description = strdup(s);
  if (op->fields & F_TYPES) {
    json_t *types = json_object_get(body, "event_types");
    if (!json_is_null(types)) {
      if (!json_is_array(types) || json_array_size(types) == 0 ||
          json_array_size(types) > (size_t)cfg->max_event_types) {
        hookd_req_error(r, 422, "invalid_field",
                        "event_types must be null (every type) or an array of 1 to %d patterns",
                        cfg->max_event_types);
        return false;
      }
      hookd_buf b;
      hookd_buf_init(&b, json_array_size(types) * 257); /* each pattern and its comma */
      free(op->types_at);
      op->types_at = malloc(json_array_size(types) * sizeof *op->types_at);
      size_t i, kept = 0;
      json_t *t;
      json_array_foreach(types, i, t) {
        if (!json_is_string(t) || !valid_type_pattern(json_string_value(t))) {
          hookd_buf_free(&b);
          hookd_req_error(r, 422, "invalid_field",
                          "event_types[%zu] must be a type name (letters, digits, _ - . :), "
                          "\"*\" or a prefix ending in \".*\"",
                          i);
          return false;
        }
        /* a pattern given twice is kept once (it matches nothing more) */
        size_t j = 0;
        while (j < i && strcmp(json_string_value(json_array_get(types, j)), json_string_value(t)))
          j++;
        if (j < i) continue;
        if (op->types_at) op->types_at[kept++] = i;
        if (b.len) hookd_buf_puts(&b, ",");
        hookd_buf_puts(&b, json_string_value(t));
      }
      op->event_types = hookd_buf_steal(&b);
    }
  }
  if ((op->fields & F_METADATA) &&
      hookd_api_metadata(r, json_object_get(body, "metadata"), &op->metadata) != 0)
    return false;
  if ((op->fields & F_CHANNELS) &&
      hookd_api_channels(r, json_object_get(body, "channels"), "channels", 10, &op->channels) != 0)
    return false;
  if ((op->fields & F_PFILTER) && !parse_payload_filter(r, body, op)) return false;
  bool en = true;
  if (hookd_json_get_bool(body, "enabled", &en) < 0) {
    hookd_req_error(r, 422, "invalid_field", "enabled must be a boolean");
    return false;
  }
  op->enabled = en;
  int64_t mif = cfg->default_max_in_flight, to = cfg->default_timeout_ms;
  if (!hookd_api_int_in(r, body, NULL, "max_in_flight", 1, 10000, &mif) ||
      !hookd_api_int_in(r, body, NULL, "timeout_ms", 100, cfg->max_timeout_ms, &to))
    return false;
  op->max_in_flight = (int)mif;
  op->timeout_ms = (int)to;
  op->retry = (hookd_api_retry){-1, -1, -1, -1, -1, false, {0, 0}};
  if ((op->fields & F_RETRY) &&
      hookd_api_parse_retry(r, json_object_get(body, "retry"), "retry", &op->retry) != 0)
    return false;
  if (hookd_api_parse_rate(r, json_object_get(body, "rate_limit"), "rate_limit", 1e6,
                           &op->rate_limit))
    return false;
  if (hookd_json_get_bool(body, "idempotent", &op->idempotent) < 0) {
    hookd_req_error(r, 422, "invalid_field", "idempotent must be a boolean");
    return false;
  }
  if (hookd_json_get_bool(body, "ordered", &op->ordered) < 0) {
    hookd_req_error(r, 422, "invalid_field", "ordered must be a boolean");
    return false;
  }
  op->lane_policy = "skip";
  if (hookd_json_get_str(body, "lane_policy", &op->lane_policy) < 0 ||
      (strcmp(op->lane_policy, "skip") && strcmp(op->lane_policy, "block"))) {
    hookd_req_error(r, 422, "invalid_field", "lane_policy must be \"skip\" or \"block\"");
    return false;
  }
  op->lane_policy = !strcmp(op->lane_policy, "block") ? "block" : "skip";
  op->body_format = "envelope";
  if (hookd_json_get_str(body, "body_format", &op->body_format) < 0 ||
      (strcmp(op->body_format, "envelope") && strcmp(op->body_format, "payload"))) {
    hookd_req_error(r, 422, "invalid_field",
                    "body_format must be \"envelope\" ({\"id\", \"type\", \"timestamp\", "
                    "\"data\"}) or \"payload\" (the data alone, as Svix sends a message)");
    return false;
  }
  op->body_format = !strcmp(op->body_format, "payload") ? "payload" : "envelope";
  if (op->fields & F_SIGNING) {
    if (hookd_json_get_str(body, "signing", &s) != 0 ||
        (strcmp(s, "hmac") && strcmp(s, "ed25519"))) {
      hookd_req_error(r, 422, "invalid_field", "signing must be \"hmac\" or \"ed25519\"");
      return false;
    }
    op->ed25519 = !strcmp(s, "ed25519");
  }
  if (op->fields & F_SECRET) {
    if (hookd_json_get_str(body, "secret", &s) != 0 || !valid_secret(op->ed25519, s)) {
      hookd_req_error(r, 422, "invalid_field",
                      op->ed25519 ? "secret must be a \"whsk_\" Ed25519 signing key"
                                  : "secret must be \"whsec_\" followed by base64 of 24 to 64 bytes");
      return false;
    }
    op->secret = strdup(s);
  }
  if ((op->fields & F_HEADERS) && !hookd_api_parse_headers(r, json_object_get(body, "headers"),
                                                           "headers", &op->headers))
    return false;
  if ((op->fields & F_URL && !op->url) || !op->description) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }
  return true;
}

/* Applies the parsed fields onto ep (all of them on create, the present ones on PATCH). */
static const char *apply_fields(const ep_op *op, hookd_endpoint *ep, bool create) {
  unsigned f = create ? ~0u : op->fields;
  if (f & F_URL && op->url) {
    free(ep->url);
    ep->url = strdup(op->url);
  }
  if (f & F_DESC) {
    free(ep->description);
    ep->description = strdup(op->description);
  }
  if (f & F_TYPES) {
    free(ep->event_types);
    ep->event_types = op->event_types ? strdup(op->event_types) : NULL;
  }
  if (f & F_CHANNELS) {
    free(ep->channels);
    ep->channels = op->channels ? strdup(op->channels) : NULL;
  }
  if (f & F_PFILTER) {
    free(ep->payload_filter);
    ep->payload_filter = op->payload_filter ? strdup(op->payload_filter) : NULL;
  }
  if (f & F_METADATA) {
    free(ep->metadata);
    ep->metadata = op->metadata ? strdup(op->metadata) : NULL;
  }
  if (f & F_ENABLED) {
    if (op->enabled && !ep->enabled) {
      free(ep->disabled_reason);
      ep->disabled_reason = NULL;
    } else if (!op->enabled && ep->enabled) {
      free(ep->disabled_reason);
      ep->disabled_reason = strdup("disabled by an operator");
      /* a create's time (the store stamps a change's own, read back for its answer) */
      ep->disabled_ms = ep->updated_ms;
    }
    ep->enabled = op->enabled;
  }
  if (f & F_MAXIF) ep->max_in_flight = op->max_in_flight;
  if (f & F_RATE) ep->rate_limit = op->rate_limit;
  if (f & F_ORDERED) ep->ordered = op->ordered;
  if (f & F_LANE) {
    free(ep->lane_policy);
    ep->lane_policy = strdup(op->lane_policy);
  }
  if (f & F_BODY) {
    free(ep->body_format);
    ep->body_format = strdup(op->body_format);
  }
  if (f & F_TIMEOUT) ep->timeout_ms = op->timeout_ms;
  if ((f & F_IDEMPOTENT) && !create) ep->idempotent = op->idempotent;
  hookd_api_retry_apply(&op->retry, &ep->policy);
  return hookd_retry_policy_check(&ep->policy);
}

/* Every refused destination is answered the same way and logged (rule, tenant, endpoint;
 * never the URL, which may carry credentials). */
static void refuse_destination(hookd_req *r, const ep_op *op, const hookd_url_error *err) {
  hookd_req_error(r, 422, "destination_refused", "url refused by rule %s: %s", err->rule,
                  err->message);
  HLOG(HOOKD_LOG_INFO, "destination.refused", KV_S("rule", err->rule),
       KV_S("tenant_id", op->tenant), KV_S("endpoint_id", op->id[0] ? op->id : NULL));
}

/* After the destination check (resolver thread): store, or answer 422. */
static void dest_checked(hookd_dest_check *c, void *arg) {
  ep_op *op = arg;
  if (hookd_api_dest_retry(op->base.req, c, "url")) {
    /* answered: the name could not be judged now */
  } else if (c->rc != 0 && op->k.idem[0]) {
    op->refused = true; /* a create sent again: its kept answer, if any, first */
    op->refusal = c->err;
    hookd_storeq_submit(op->base.app->store->writer, &op->base.sop);
    return;
  } else if (c->rc != 0) {
    refuse_destination(op->base.req, op, &c->err);
  }
  if (c->rc != 0) {
    ep_op_cleanup(&op->base);
    free(op);
    return;
  }
  hookd_storeq_submit(op->base.app->store->writer, &op->base.sop);
}

/* Suspends the request; checks the URL (when one was given), then runs the store op. */
static void submit_with_check(ep_op *op) {
  hookd_req_suspend(op->base.req);
  if (!(op->fields & F_URL) || op->refused) {
    hookd_storeq_submit(op->base.app->store->writer, &op->base.sop);
    return;
  }
  op->check.url = strdup(op->url);
  op->check.done = dest_checked;
  op->check.arg = op;
  snprintf(op->check.who, sizeof op->check.who, "%s", op->tenant); /* (shared out by tenant) */
  hookd_destinations_check_async(op->base.app->dest, &op->check); /* (a NULL url: answered) */
}

/* ---------- create ---------- */

/* A create sent again with its Idempotency-Key: the endpoint the first one made, as it is now
 * (its kept answer is its id: the secret is not kept twice, in the clear). */
static int created_before(ep_op *op, hookd_store_conn *c, const hookd_store_backend *be) {
  char made[HOOKD_ID_MAX + 64];
  if (!hookd_kept_id(&op->k, made, sizeof made)) return HOOKD_STORE_ERR;
  hookd_endpoint_free(&op->ep); /* the one this request would have made */
  int rc = be->endpoint_get(c, made, &op->ep);
  if (rc == HOOKD_STORE_NOTFOUND) {
    snprintf(op->base.err, sizeof op->base.err,
             "this Idempotency-Key's request created endpoint %s, deleted since", made);
    return HOOKD_STORE_STATE;
  }
  /* the answer carries the secret as it is now (rotated since, maybe): read, and audited as
   * GET …/secret is */
  if (!rc)
    rc = hookd_api_audit(&op->base, c, be, "endpoint.secret.read", op->ep.id, op->ep.tenant_id,
                         "idempotent replay of its create");
  return rc;
}

/* 1 when the comma-separated list has the pattern p[0..len) itself. */
static bool list_has(const char *list, const char *p, size_t len) {
  for (const char *q = list; q && *q;) {
    size_t n = strcspn(q, ",");
    if (n == len && !memcmp(q, p, len)) return true;
    q = q[n] ? q + n + 1 : NULL;
  }
  return false;
}

/* While the event-type catalog holds a type, each pattern must match one (a typo would
 * subscribe to nothing, silently): HOOKD_STORE_LIMIT with err naming the pattern. The patterns
 * the endpoint had already (had: its list before a PATCH) are not checked again: archiving a
 * type stops new subscriptions to it, not the ones kept (a review: adding a type to the list
 * meant dropping one archived since). */
static int types_in_catalog(ep_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                            const char *had) {
  const char *all = op->ep.event_types;
  if (!all) return HOOKD_STORE_OK; /* every type */
  size_t n = strlen(all);
  char *fresh = malloc(n + 1);
  int *place = malloc((n / 2 + 1) * sizeof *place); /* (each pattern takes 2 bytes at least) */
  if (!fresh || !place) {
    free(fresh);
    free(place);
    return HOOKD_STORE_ERR;
  }
  size_t len = 0;
  int k = 0, i = 0;
  for (const char *q = all; *q; i++) {
    size_t m = strcspn(q, ",");
    if (!list_has(had, q, m)) {
      if (len) fresh[len++] = ',';
      memcpy(fresh + len, q, m);
      len += m;
      place[k++] = i;
    }
    if (!q[m]) break;
    q += m + 1;
  }
  fresh[len] = '\0';
  int bad = -1;
  int rc = k ? be->event_types_check(c, fresh, &bad) : HOOKD_STORE_OK;
  if (rc == HOOKD_STORE_STATE) bad = bad >= 0 && bad < k ? place[bad] : 0;
  free(fresh);
  free(place);
  if (rc != HOOKD_STORE_STATE) return rc;
  const char *p = op->ep.event_types;
  for (int j = 0; j < bad && p; j++) p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
  size_t plen = p ? strcspn(p, ",") : 0;
  /* named by its place in the request (a pattern given twice is stored once) */
  size_t at = op->types_at ? op->types_at[bad] : (size_t)bad;
  snprintf(op->base.err, sizeof op->base.err,
           "event_types[%zu] (%.*s) matches no event type in the catalog that is not archived "
           "(GET /v1/event-types?include_archived=true lists every one)",
           at, (int)(plen > 128 ? 128 : plen), p ? p : "");
  op->bad_types = true;
  return HOOKD_STORE_LIMIT;
}

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  ep_op *op = (ep_op *)base;
  int rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc == 0) return created_before(op, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  if (op->refused) return HOOKD_STORE_STATE; /* never made: the URL's refusal is the answer */
  if ((rc = types_in_catalog(op, c, be, NULL)) != 0) return rc;
  rc = be->endpoint_create(c, &op->ep, op->base.app->cfg->max_endpoints_per_tenant);
  if (!rc)
    rc = hookd_api_audit(base, c, be, "endpoint.create", op->ep.id, op->ep.tenant_id,
                         op->ep.signing);
  if (!rc) rc = ops_event(op, c, be, "endpoint.created", NULL);
  return rc ? rc : hookd_kept_store(&op->k, c, be, 201, json_pack("{s:s}", "id", op->ep.id));
}

static void reply_create(hookd_api_op *base, int rc) {
  ep_op *op = (ep_op *)base;
  if (rc && op->bad_types) {
    hookd_req_error(base->req, 422, "invalid_field", "%s", base->err);
    return;
  }
  if (rc == HOOKD_STORE_STATE && op->refused && !op->k.replayed) { /* (else: deleted since) */
    refuse_destination(base->req, op, &op->refusal);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, rc == HOOKD_STORE_NOTFOUND ? "tenant" : "endpoint");
    return;
  }
  if (op->k.replayed) { /* its secret as it is now (rotated since, say) */
    hookd_secret_free(op->plain_secret);
    op->plain_secret = hookd_keyring_open(&base->app->keyring, op->ep.secret, op->ep.id);
    op->public_key[0] = '\0';
    if (!op->plain_secret || (op->ep.signing && !strcmp(op->ep.signing, "ed25519") &&
                              hookd_ed25519_public(op->plain_secret, op->public_key) != 0)) {
      hookd_req_error(base->req, 500, "secret_unavailable",
                      "the stored secret cannot be opened with the configured master key");
      return;
    }
    hookd_req_add_header(base->req, "Idempotent-Replayed", "true");
  } else {
    hookd_dispatcher_endpoint_changed(base->app->disp, &op->ep);
    ops_hints(op);
    HLOG(HOOKD_LOG_INFO, "endpoint.created", KV_S("endpoint_id", op->ep.id),
         KV_S("tenant_id", op->ep.tenant_id));
  }
  json_t *v = ep_json(base->app, &op->ep);
  json_object_set_new(v, "secret", json_string(op->plain_secret));
  if (op->public_key[0]) json_object_set_new(v, "public_key", json_string(op->public_key));
  hookd_req_reply_json(base->req, 201, v);
}

void hookd_api_endpoint_create(hookd_req *r, hookd_app *app) {
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  ep_op *op = hookd_api_op_new(sizeof *op, r, app, run_create, reply_create);
  if (!op) {
    json_decref(body);
    return;
  }
  op->base.cleanup = ep_op_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  bool ok = parse_fields(r, app, body, op, true);
  /* the same request, sent again with its key: the tenant, the body (canonical JSON) */
  if (ok)
    ok = hookd_kept_prepare(r, app, &op->k, "endpoint.create", op->tenant, NULL, body, true);
  json_decref(body);
  int64_t now = hookd_now_ms();
  hookd_endpoint *ep = &op->ep;
  if (ok) {
    hookd_url_info info;
    hookd_url_error uerr;
    if (hookd_destinations_check_shape(app->dest, op->url, &info, &uerr) != 0) {
      if (op->k.idem[0]) { /* sent again with its key: its kept answer first (dest_checked) */
        op->refused = true;
        op->refusal = uerr;
      } else {
        refuse_destination(r, op, &uerr);
        ok = false;
      }
    }
  }
  if (ok) {
    if (!op->id[0]) hookd_id_new("ep", now, op->id);
    ep->id = strdup(op->id);
    ep->tenant_id = strdup(op->tenant);
    ep->enabled = true;
    hookd_retry_policy_defaults(&ep->policy);
    ep->policy = app->cfg->policy;
    ep->created_ms = ep->updated_ms = now;
    const char *bad = apply_fields(op, ep, true);
    ep->signing = strdup(op->ed25519 ? "ed25519" : "hmac");
    if (op->secret) {
      op->plain_secret = strdup(op->secret);
      if (op->ed25519) hookd_ed25519_public(op->secret, op->public_key);
    } else {
      op->plain_secret = new_secret(op->ed25519, op->public_key);
    }
    if (op->plain_secret) ep->secret = hookd_keyring_seal(&app->keyring, op->plain_secret, ep->id);
    /* sealed as the secret is: the values may be credentials */
    if (op->headers) ep->headers = hookd_keyring_seal(&app->keyring, op->headers, ep->id);
    if (bad) {
      hookd_req_error(r, 422, "invalid_field", "retry.%s is out of range (backoff_cap_ms must be "
                      ">= backoff_base_ms)", bad);
      ok = false;
    } else if (!ep->id || !ep->tenant_id || !ep->url || !ep->secret ||
               (op->headers && !ep->headers)) {
      hookd_req_error(r, 503, "unavailable", "out of memory");
      ok = false;
    }
  }
  if (!ok) {
    ep_op_cleanup(&op->base);
    free(op);
    return;
  }
  submit_with_check(op);
}

/* A manager looks after its tenants' own endpoints; an inbound source's destination — its URL,
 * secret and headers (a gateway's credential, say) — is the source's, an admin's: a manager
 * does with it what an operator does (reads it, enables or disables it). Before, a review: a
 * manager's key read a destination's headers and pointed it at a URL of its own. Checked on
 * the store thread once the endpoint is read (HOOKD_STORE_STATE), answered 403 by the reply. */
static bool manager_refused(ep_op *op, bool beyond_operator) {
  const hookd_principal *p = hookd_api_principal(op->base.req);
  op->not_managers = beyond_operator && p && p->role == HOOKD_ROLE_MANAGER && op->ep.source_id;
  return op->not_managers;
}

/* the reply to a manager_refused op; false when it was not */
static bool reply_not_managers(ep_op *op) {
  if (!op->not_managers) return false;
  hookd_api_forbid(op->base.req, "endpoint %s is a destination of inbound source %s: an admin's "
                                 "key changes it and reads its secret and headers",
                   op->id, op->ep.source_id);
  return true;
}

/* ---------- get / list / secret ---------- */

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  ep_op *op = (ep_op *)base;
  if (op->listing) {
    int rc = hookd_api_tenant_known(base, c, be, op->tenant);
    if (!rc) rc = hookd_api_after_known(base, c, be, HOOKD_MADE_ENDPOINT, op->tenant, op->after);
    return rc ? rc
              : be->endpoint_list(c, op->tenant, op->after, op->limit + 1, op->kind,
                                  op->enabled_filter, &op->list, &op->n);
  }
  int rc = be->endpoint_get(c, op->id, &op->ep);
  if (rc == 0 && strcmp(op->ep.tenant_id, op->tenant) != 0) {
    hookd_endpoint_free(&op->ep);
    rc = HOOKD_STORE_NOTFOUND;
  }
  if (rc == 0 && manager_refused(op, op->want_secret || op->want_headers))
    return HOOKD_STORE_STATE;
  if (rc == 0 && op->want_secret) /* reading a secret is itself audited */
    rc = hookd_api_audit(base, c, be, "endpoint.secret.read", op->id, op->tenant, NULL);
  if (rc == 0 && op->want_headers) /* and so are the headers, which may be credentials */
    rc = hookd_api_audit(base, c, be, "endpoint.headers.read", op->id, op->tenant, NULL);
  return rc;
}

static void reply_get(hookd_api_op *base, int rc) {
  ep_op *op = (ep_op *)base;
  if (reply_not_managers(op)) return;
  if (rc) {
    hookd_api_store_error(base, rc, op->listing && base->err[0] ? base->err : "endpoint");
    return;
  }
  if (op->want_headers) {
    json_t *h = op->ep.headers
                    ? hookd_keyring_open_json(&base->app->keyring, op->ep.headers, op->ep.id)
                    : json_object();
    if (!json_is_object(h)) {
      json_decref(h);
      hookd_req_error(base->req, 500, "secret_unavailable",
                      "the stored headers cannot be opened with the configured master key");
      return;
    }
    hookd_req_reply_json(base->req, 200, json_pack("{s:o}", "headers", h));
    return;
  }
  if (op->want_secret || op->public_key[0] == '?') {
    char *plain = hookd_keyring_open(&base->app->keyring, op->ep.secret, op->ep.id);
    if (!plain) {
      hookd_req_error(base->req, 500, "secret_unavailable",
                      "the stored secret cannot be opened with the configured master key");
      return;
    }
    json_t *v;
    if (op->want_secret) {
      v = json_pack("{s:s}", "secret", plain);
    } else if (op->ep.signing && !strcmp(op->ep.signing, "ed25519") &&
               hookd_ed25519_public(plain, op->public_key) == 0) {
      v = json_pack("{s:s,s:s}", "signing", "ed25519", "public_key", op->public_key);
    } else {
      v = NULL;
    }
    hookd_secret_free(plain);
    if (v)
      hookd_req_reply_json(base->req, 200, v);
    else
      hookd_req_error(base->req, 409, "invalid_state",
                      "this endpoint signs with HMAC (whsec_): it has no public key");
    return;
  }
  if (!op->listing) {
    json_t *v = ep_json(base->app, &op->ep);
    hookd_endpoint_health hh;
    if (hookd_dispatcher_endpoint_health(base->app->disp, op->ep.id, &hh) == 0)
      json_object_set_new(
          v, "health",
          json_pack("{s:s,s:o,s:o,s:I,s:i,s:i,s:o,s:b,s:o,s:b,s:o,s:{s:i,s:o}}", "breaker",
                    hh.breaker,
                    "breaker_opened_at", hookd_json_time(hh.breaker_opened_ms),
                    "breaker_retry_at", hookd_json_time(hh.breaker_retry_ms), "breaker_opens",
                    (json_int_t)hh.breaker_opens, "in_flight", hh.in_flight, "claimed",
                    hh.queued, "paused_until", hookd_json_time(hh.paused_until_ms), "slow",
                    hh.slow, "failing_since", hookd_json_time(hh.failing_since_ms), "sending",
                    hh.sending, "config_updated_at", hookd_json_time(hh.config_updated_ms),
                    "node_share", "max_in_flight", hh.share_max_in_flight, "rate_limit",
                    hh.share_rate > 0 ? json_pack("{s:f}", "per_second", hh.share_rate)
                                      : json_null()));
    hookd_req_reply_json(base->req, 200, v);
    return;
  }
  json_t *data = json_array();
  size_t shown = op->n > (size_t)op->limit ? (size_t)op->limit : op->n;
  for (size_t i = 0; i < shown; i++) json_array_append_new(data, ep_json(base->app, &op->list[i]));
  json_t *next = op->n > shown ? json_string(op->list[shown - 1].id) : json_null();
  hookd_req_reply_json(base->req, 200, json_pack("{s:o,s:o}", "data", data, "next_cursor", next));
}

static void submit_get(hookd_req *r, hookd_app *app, bool listing, bool secret, bool public_key,
                       bool headers) {
  ep_op *op = hookd_api_op_new(sizeof *op, r, app, run_get, reply_get);
  if (!op) return;
  op->base.cleanup = ep_op_cleanup;
  op->listing = listing;
  op->want_secret = secret;
  op->want_headers = headers;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  if (listing) {
    op->limit = hookd_api_limit(r, 50, 500);
    const char *after = hookd_req_query(r, "after");
    if (op->limit < 0 || (after && !hookd_id_valid(after, 128))) {
      if (op->limit >= 0)
        hookd_req_field_error(r, 400, "invalid_parameter", "after", "after must be an id");
      free(op);
      return;
    }
    snprintf(op->after, sizeof op->after, "%s", after ? after : "");
    const char *kind = hookd_req_query(r, "kind");
    op->kind = !kind ? HOOKD_EP_ANY
               : !strcmp(kind, "endpoint") ? HOOKD_EP_OWN
               : !strcmp(kind, "destination") ? HOOKD_EP_DEST
                                               : -1;
    if (op->kind < 0) {
      hookd_req_field_error(r, 400, "invalid_parameter", "kind",
                            "kind must be endpoint or destination");
      free(op);
      return;
    }
    const char *enabled = hookd_req_query(r, "enabled");
    op->enabled_filter = !enabled                  ? -1
                         : !strcmp(enabled, "true")  ? 1
                         : !strcmp(enabled, "false") ? 0
                                                     : -2;
    if (op->enabled_filter == -2) {
      hookd_req_field_error(r, 400, "invalid_parameter", "enabled",
                            "enabled must be true or false");
      free(op);
      return;
    }
  } else {
    snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  }
  if (public_key) op->public_key[0] = '?'; /* marks the public-key view */
  hookd_api_submit(&op->base, secret || headers); /* a read of either is audited */
}

void hookd_api_endpoint_get(hookd_req *r, hookd_app *app) {
  submit_get(r, app, false, false, false, false);
}
void hookd_api_endpoint_list(hookd_req *r, hookd_app *app) {
  submit_get(r, app, true, false, false, false);
}
void hookd_api_endpoint_secret(hookd_req *r, hookd_app *app) {
  submit_get(r, app, false, true, false, false);
}
void hookd_api_endpoint_public_key(hookd_req *r, hookd_app *app) {
  submit_get(r, app, false, false, true, false);
}
void hookd_api_endpoint_headers(hookd_req *r, hookd_app *app) {
  submit_get(r, app, false, false, false, true);
}

/* ---------- patch ---------- */

static int run_patch(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  ep_op *op = (ep_op *)base;
  int rc = be->endpoint_get(c, op->id, &op->ep);
  if (rc) return rc;
  if (strcmp(op->ep.tenant_id, op->tenant) != 0) return HOOKD_STORE_NOTFOUND;
  if (manager_refused(op, op->fields != F_ENABLED)) return HOOKD_STORE_STATE;
  /* an inbound source's destination gets every event its source accepts (the source's
   * event_types filter them), without lanes: stored, these would be ignored */
  if (op->ep.source_id &&
      (op->fields & (F_TYPES | F_ORDERED | F_LANE | F_CHANNELS | F_PFILTER | F_BODY))) {
    snprintf(op->base.err, sizeof op->base.err,
             "%s does not apply to a destination of inbound source %s (its events are the "
             "source's: filter them with the source's event_types)",
             op->fields & F_TYPES      ? "event_types"
             : op->fields & F_ORDERED  ? "ordered"
             : op->fields & F_CHANNELS ? "channels"
             : op->fields & F_PFILTER  ? "payload_filter"
             : op->fields & F_BODY     ? "body_format"
                                       : "lane_policy",
             op->ep.source_id);
    return HOOKD_STORE_LIMIT; /* answered 422 */
  }
  if (!op->ep.source_id && (op->fields & F_IDEMPOTENT)) {
    snprintf(op->base.err, sizeof op->base.err,
             "idempotent applies only to a destination of an inbound source");
    return HOOKD_STORE_LIMIT; /* answered 422 */
  }
  char *had = (op->fields & F_TYPES) && op->ep.event_types ? strdup(op->ep.event_types) : NULL;
  if ((op->fields & F_TYPES) && op->ep.event_types && !had) return HOOKD_STORE_ERR;
  const char *bad = apply_fields(op, &op->ep, false);
  if (bad) {
    free(had);
    snprintf(op->base.err, sizeof op->base.err,
             "retry.%s is out of range (backoff_cap_ms must be >= backoff_base_ms)", bad);
    return HOOKD_STORE_LIMIT; /* answered 422 */
  }
  rc = op->fields & F_TYPES ? types_in_catalog(op, c, be, had) : 0;
  free(had);
  if (rc) return rc;
  if (op->fields & F_HEADERS) { /* the whole set is replaced; null (or {}) clears it */
    hookd_secret_free(op->ep.headers);
    op->ep.headers =
        op->headers ? hookd_keyring_seal(&base->app->keyring, op->headers, op->id) : NULL;
    if (op->headers && !op->ep.headers) return HOOKD_STORE_ERR;
  }
  op->ep.updated_ms = hookd_now_ms();
  int rc2 = be->endpoint_update(c, &op->ep);
  /* answered and applied as stored: the update derives health fields of its own (a new URL or
   * a re-enable clears the failing window and a pause) */
  if (!rc2) {
    hookd_endpoint_free(&op->ep);
    rc2 = be->endpoint_get(c, op->id, &op->ep);
  }
  if (rc2) return rc2;
  char detail[256]; /* (every field's name fits) */
  fields_detail(op->fields, detail, sizeof detail);
  rc = hookd_api_audit(base, c, be, op->fields == F_ENABLED
                                        ? (op->ep.enabled ? "endpoint.enable" : "endpoint.disable")
                                        : "endpoint.update",
                       op->id, op->tenant, detail);
  /* (an empty PATCH changes nothing to report) */
  return rc || !op->fields ? rc : ops_event(op, c, be, "endpoint.updated", detail);
}

/* The shared ending of a change to a stored endpoint: false after answering the error (a
 * validation the store op made on the merged endpoint comes back as LIMIT with its message);
 * true once the dispatcher knows the new endpoint. */
static bool ep_changed(hookd_api_op *base, int rc) {
  if (reply_not_managers((ep_op *)base)) return false;
  if (rc == HOOKD_STORE_LIMIT && base->err[0]) {
    hookd_req_error(base->req, 422, "invalid_field", "%s", base->err);
    return false;
  }
  if (rc) {
    hookd_api_store_error(base, rc, "endpoint");
    return false;
  }
  hookd_dispatcher_endpoint_changed(base->app->disp, &((ep_op *)base)->ep);
  return true;
}

static void reply_patch(hookd_api_op *base, int rc) {
  ep_op *op = (ep_op *)base;
  if (!ep_changed(base, rc)) return;
  ops_hints(op);
  HLOG(HOOKD_LOG_INFO, "endpoint.updated", KV_S("endpoint_id", op->ep.id),
       KV_S("tenant_id", op->ep.tenant_id), KV_I("enabled", op->ep.enabled));
  hookd_api_reply_json_applied(base, 200, ep_json(base->app, &op->ep));
}

void hookd_api_endpoint_patch(hookd_req *r, hookd_app *app) {
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  ep_op *op = hookd_api_op_new(sizeof *op, r, app, run_patch, reply_patch);
  if (!op) {
    json_decref(body);
    return;
  }
  op->base.cleanup = ep_op_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  /* the role first: nothing of the body is looked at for a field the key may not change */
  const hookd_principal *p = hookd_api_principal(r);
  bool ok = true;
  if (p && !hookd_role_allows(p->role, HOOKD_PERM_MANAGE) &&
      (json_object_size(body) != 1 || !json_object_get(body, "enabled"))) {
    hookd_api_forbid(r, "the %s role may only change \"enabled\"",
                    hookd_role_name(p->role));
    ok = false;
  }
  ok = ok && parse_fields(r, app, body, op, false);
  json_decref(body);
  if (ok && (op->fields & F_URL)) {
    hookd_url_info info;
    hookd_url_error uerr;
    if (hookd_destinations_check_shape(app->dest, op->url, &info, &uerr) != 0) {
      refuse_destination(r, op, &uerr);
      ok = false;
    }
  }
  if (!ok) {
    ep_op_cleanup(&op->base);
    free(op);
    return;
  }
  submit_with_check(op);
}

/* ---------- delete ---------- */

static int run_delete(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  ep_op *op = (ep_op *)base;
  int rc = be->endpoint_get(c, op->id, &op->ep);
  if (rc) return rc;
  if (strcmp(op->ep.tenant_id, op->tenant) != 0) return HOOKD_STORE_NOTFOUND;
  if (manager_refused(op, true)) return HOOKD_STORE_STATE;
  op->ep.deleted_ms = hookd_now_ms();
  rc = be->endpoint_delete(c, op->id, op->ep.deleted_ms, &op->deleted);
  if (rc) return rc;
  char detail[96];
  snprintf(detail, sizeof detail, "cancelled_deliveries=%d held_deliveries=%d",
           op->deleted.cancelled, op->deleted.held);
  rc = hookd_api_audit(base, c, be, "endpoint.delete", op->id, op->tenant, detail);
  return rc ? rc : ops_event(op, c, be, "endpoint.deleted", NULL);
}

static void reply_delete(hookd_api_op *base, int rc) {
  ep_op *op = (ep_op *)base;
  if (reply_not_managers(op)) return;
  if (rc) {
    hookd_api_store_error(base, rc, "endpoint");
    return;
  }
  hookd_dispatcher_endpoint_changed(base->app->disp, &op->ep);
  ops_hints(op);
  HLOG(HOOKD_LOG_INFO, "endpoint.deleted", KV_S("endpoint_id", op->id),
       KV_S("tenant_id", op->tenant), KV_I("cancelled", op->deleted.cancelled),
       KV_I("held", op->deleted.held));
  hookd_held_unknown(op->deleted.held, HOOKD_HELD_BY_DELETE);
  if (op->deleted.cancelled > 0) HOOKD_ADD(cancelled, (uint64_t)op->deleted.cancelled);
  hookd_api_reply_json_applied(base, 200,
                               json_pack("{s:s,s:b,s:i,s:i,s:b}", "id", op->id, "deleted", 1,
                                         "cancelled_deliveries", op->deleted.cancelled,
                                         "held_deliveries", op->deleted.held, "cancelling",
                                         op->deleted.more));
}

void hookd_api_endpoint_delete(hookd_req *r, hookd_app *app) {
  char reason[256]; /* the body takes a reason for the audit (as a tenant's delete), nothing else */
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  ep_op *op = hookd_api_op_new(sizeof *op, r, app, run_delete, reply_delete);
  if (!op) return;
  op->base.cleanup = ep_op_cleanup;
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  hookd_api_submit(&op->base, true);
}

/* ---------- secret rotation ---------- */

static int run_rotate(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  ep_op *op = (ep_op *)base;
  int rc = be->endpoint_get(c, op->id, &op->ep);
  if (rc) return rc;
  if (strcmp(op->ep.tenant_id, op->tenant) != 0) return HOOKD_STORE_NOTFOUND;
  if (manager_refused(op, true)) return HOOKD_STORE_STATE;
  int64_t now = hookd_now_ms();
  /* the secret given is checked first (a malformed one is the caller's to fix, whatever the
   * overlap): of the endpoint's scheme, and not the one it has (a "rotation" to the same
   * secret changes nothing but ends nothing either) */
  bool ed = op->ep.signing && !strcmp(op->ep.signing, "ed25519");
  if (op->secret && !valid_secret(ed, op->secret)) {
    snprintf(base->err, sizeof base->err, "secret must be a new %s",
             ed ? "\"whsk_\" Ed25519 signing key" : "\"whsec_\" secret (24 to 64 bytes)");
    return HOOKD_STORE_LIMIT;
  }
  if (op->secret) {
    char *cur = hookd_keyring_open(&base->app->keyring, op->ep.secret, op->id);
    bool same = cur && !strcmp(cur, op->secret);
    hookd_secret_free(cur);
    if (same) {
      snprintf(base->err, sizeof base->err,
               "secret is the endpoint's current secret: give a new one");
      return HOOKD_STORE_LIMIT;
    }
  }
  /* One previous secret at a time: rotating again inside the overlap would drop the secret the
   * first rotation promised until its expiry (a client retrying a rotation whose answer was
   * lost would cut its receivers off). Only an explicit cut-over (0) may end it early. */
  if (op->ep.previous_secret && op->ep.previous_expires_ms > now && op->expire_previous_s > 0) {
    char until[HOOKD_RFC3339_MAX];
    hookd_fmt_rfc3339_ms(op->ep.previous_expires_ms, until);
    snprintf(base->err, sizeof base->err,
             /* (under base->err's 256 bytes: a review found the end, the fix, cut off) */
             "the previous secret is valid until %s: a rotation now would end that overlap early"
             " (one sent again after a lost answer: its secret is at GET …/secret); rotate after"
             " it, or pass \"expire_previous_after_s\": 0 to end it now",
             until);
    return HOOKD_STORE_CONFLICT;
  }
  op->plain_secret = op->secret ? strdup(op->secret) : new_secret(ed, op->public_key);
  if (op->secret && ed) hookd_ed25519_public(op->secret, op->public_key);
  char *sealed = op->plain_secret
                     ? hookd_keyring_seal(&base->app->keyring, op->plain_secret, op->id)
                     : NULL;
  if (!sealed) return HOOKD_STORE_ERR;
  free(op->ep.previous_secret);
  op->ep.previous_secret = NULL;
  op->ep.previous_expires_ms = 0;
  if (op->expire_previous_s > 0) {
    op->ep.previous_secret = op->ep.secret; /* still sealed for this endpoint id */
    op->ep.previous_expires_ms = now + op->expire_previous_s * 1000;
  } else {
    free(op->ep.secret);
  }
  op->ep.secret = sealed;
  op->ep.updated_ms = now;
  if ((rc = be->endpoint_update(c, &op->ep)) != 0) return rc;
  char detail[64];
  snprintf(detail, sizeof detail, "expire_previous_after_s=%lld", (long long)op->expire_previous_s);
  return hookd_api_audit(base, c, be, "endpoint.secret.rotate", op->id, op->tenant, detail);
}

static void reply_rotate(hookd_api_op *base, int rc) {
  ep_op *op = (ep_op *)base;
  if (!ep_changed(base, rc)) return;
  HLOG(HOOKD_LOG_INFO, "endpoint.secret_rotated", KV_S("endpoint_id", op->id),
       KV_S("tenant_id", op->tenant), KV_I("expire_previous_after_s", op->expire_previous_s));
  /* (previous_secret_expires_at: the endpoint's own name for it, beside the older one) */
  json_t *v = json_pack("{s:s,s:s,s:o,s:o}", "id", op->id, "secret", op->plain_secret,
                        "previous_expires_at", hookd_json_time(op->ep.previous_expires_ms),
                        "previous_secret_expires_at",
                        hookd_json_time(op->ep.previous_expires_ms));
  if (op->public_key[0]) json_object_set_new(v, "public_key", json_string(op->public_key));
  /* once the dispatcher signs with the new secret: a receiver switching to it on this answer
   * must not get a request signed with the old one alone */
  hookd_api_reply_json_applied(base, 200, v);
}

void hookd_api_endpoint_rotate(hookd_req *r, hookd_app *app) {
  size_t len;
  hookd_req_body(r, &len);
  json_t *body = len ? hookd_api_body_object(r, app) : json_object();
  if (!body) return;
  ep_op *op = hookd_api_op_new(sizeof *op, r, app, run_rotate, reply_rotate);
  if (!op) {
    json_decref(body);
    return;
  }
  op->base.cleanup = ep_op_cleanup;
  snprintf(op->tenant, sizeof op->tenant, "%s", hookd_req_param(r, 0));
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 1));
  op->expire_previous_s = 24 * 3600;
  const char *k, *sec = NULL;
  json_t *v;
  bool ok = true;
  json_object_foreach(body, k, v) {
    if (strcmp(k, "expire_previous_after_s") && strcmp(k, "secret")) {
      hookd_api_unknown_field(r, NULL, k, NULL);
      ok = false;
      break;
    }
  }
  if (ok && !hookd_api_int_in(r, body, NULL, "expire_previous_after_s", 0, 30LL * 24 * 3600,
                     &op->expire_previous_s))
    ok = false;
  if (ok && (hookd_json_get_str(body, "secret", &sec) < 0 ||
             json_is_null(json_object_get(body, "secret")))) { /* null: not "a new one" */
    hookd_req_error(r, 422, "invalid_field",
                    "secret must be a string (leave it out for a new one)");
    ok = false;
  }
  if (ok && sec) op->secret = strdup(sec);
  json_decref(body);
  if (!ok) {
    ep_op_cleanup(&op->base);
    free(op);
    return;
  }
  hookd_api_submit(&op->base, true);
}

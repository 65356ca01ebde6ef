/* router.c — maps method + path to a handler, after authentication and the role check.
 *
 * Patterns are matched segment by segment; "{}" captures one segment into the request's
 * parameters (in order). A path that matches with another method answers 405 with Allow. */
#include <limits.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/sign.h"
#include "core/timefmt.h"
#include "core/utf8.h"
#include "daemon/api.h"
#include "daemon/inbound.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

typedef struct route {
  const char *method;
  const char *pattern;
  hookd_perm perm;
  int tenant_param; /* index of the {} holding a tenant id, -1 if none */
  void (*fn)(hookd_req *, hookd_app *);
  const char *query; /* the query parameters it reads, ",a,b,"; NULL none; "*" any */
} route;

static const route routes[] = {
    {"GET", "/healthz", HOOKD_PERM_PUBLIC, -1, hookd_api_healthz, "*"},
    {"GET", "/readyz", HOOKD_PERM_PUBLIC, -1, hookd_api_readyz, "*"},
    {"GET", "/metrics", HOOKD_PERM_SCRAPE, -1, hookd_api_metrics, "*"},
    /* the dashboard's files hold no data: its page calls the API with the operator's key */
    {"GET", "/dashboard", HOOKD_PERM_PUBLIC, -1, hookd_api_dashboard, "*"},
    {"GET", "/dashboard/", HOOKD_PERM_PUBLIC, -1, hookd_api_dashboard_home, "*"},
    {"GET", "/dashboard/{}", HOOKD_PERM_PUBLIC, -1, hookd_api_dashboard_file, "*"},
    /* provider-facing: the provider's signature is the authentication, the query is theirs */
    {"POST", "/in/{}", HOOKD_PERM_PUBLIC, -1, hookd_inbound_handle, "*"},
    {"GET", "/in/{}", HOOKD_PERM_PUBLIC, -1, hookd_inbound_handle, "*"},
    {"POST", "/v1/tenants", HOOKD_PERM_ADMIN, -1, hookd_api_tenant_create, NULL},
    {"GET", "/v1/tenants", HOOKD_PERM_READ, -1, hookd_api_tenant_list, ",limit,after,"},
    {"GET", "/v1/tenants/{}", HOOKD_PERM_READ, 0, hookd_api_tenant_get, NULL},
    {"PATCH", "/v1/tenants/{}", HOOKD_PERM_ADMIN, 0, hookd_api_tenant_patch, NULL},
    {"DELETE", "/v1/tenants/{}", HOOKD_PERM_ADMIN, 0, hookd_api_tenant_delete, NULL},
    {"POST", "/v1/tenants/{}/endpoints", HOOKD_PERM_MANAGE, 0, hookd_api_endpoint_create, NULL},
    {"GET", "/v1/tenants/{}/endpoints", HOOKD_PERM_READ, 0, hookd_api_endpoint_list,
     ",limit,after,kind,enabled,"},
    {"GET", "/v1/tenants/{}/endpoints/{}", HOOKD_PERM_READ, 0, hookd_api_endpoint_get, NULL},
    {"PATCH", "/v1/tenants/{}/endpoints/{}", HOOKD_PERM_OPERATE, 0, hookd_api_endpoint_patch,
     NULL},
    {"DELETE", "/v1/tenants/{}/endpoints/{}", HOOKD_PERM_MANAGE, 0, hookd_api_endpoint_delete,
     NULL},
    {"POST", "/v1/tenants/{}/endpoints/{}/test", HOOKD_PERM_OPERATE, 0, hookd_api_endpoint_test,
     NULL},
    {"GET", "/v1/tenants/{}/endpoints/{}/secret", HOOKD_PERM_MANAGE, 0,
     hookd_api_endpoint_secret, NULL},
    {"GET", "/v1/tenants/{}/endpoints/{}/headers", HOOKD_PERM_MANAGE, 0,
     hookd_api_endpoint_headers, NULL},
    {"POST", "/v1/tenants/{}/endpoints/{}/secret/rotate", HOOKD_PERM_MANAGE, 0,
     hookd_api_endpoint_rotate, NULL},
    {"GET", "/v1/tenants/{}/endpoints/{}/public-key", HOOKD_PERM_READ, 0,
     hookd_api_endpoint_public_key, NULL},
    {"GET", "/v1/tenants/{}/endpoints/{}/stats", HOOKD_PERM_READ, 0, hookd_api_endpoint_stats,
     ",since,until,"},
    {"GET", "/v1/audit", HOOKD_PERM_ADMIN, -1, hookd_api_audit_list, ",tenant,limit,before,"},
    {"GET", "/v1/nodes", HOOKD_PERM_READ, -1, hookd_api_nodes_list, NULL},
    {"POST", "/v1/event-types", HOOKD_PERM_ADMIN, -1, hookd_api_event_type_create, NULL},
    {"GET", "/v1/event-types", HOOKD_PERM_READ, -1, hookd_api_event_type_list,
     ",include_archived,with_content,limit,after,"},
    {"GET", "/v1/event-types/{}", HOOKD_PERM_READ, -1, hookd_api_event_type_get, NULL},
    {"PATCH", "/v1/event-types/{}", HOOKD_PERM_ADMIN, -1, hookd_api_event_type_patch, NULL},
    {"DELETE", "/v1/event-types/{}", HOOKD_PERM_ADMIN, -1, hookd_api_event_type_delete, NULL},
    {"POST", "/v1/keys", HOOKD_PERM_ADMIN, -1, hookd_api_key_create, NULL},
    {"POST", "/v1/tenants/{}/portal-access", HOOKD_PERM_ADMIN, 0, hookd_api_portal_access, NULL},
    {"GET", "/v1/keys", HOOKD_PERM_ADMIN, -1, hookd_api_key_list, ",limit,after,"},
    {"DELETE", "/v1/keys/{}", HOOKD_PERM_ADMIN, -1, hookd_api_key_revoke, NULL},
    {"POST", "/v1/sources", HOOKD_PERM_ADMIN, -1, hookd_api_source_create, NULL},
    {"GET", "/v1/sources", HOOKD_PERM_READ, -1, hookd_api_source_list,
     ",tenant,provider,limit,after,"},
    {"GET", "/v1/sources/{}", HOOKD_PERM_READ, -1, hookd_api_source_get, NULL},
    {"PATCH", "/v1/sources/{}", HOOKD_PERM_ADMIN, -1, hookd_api_source_patch, NULL},
    {"DELETE", "/v1/sources/{}", HOOKD_PERM_ADMIN, -1, hookd_api_source_delete, NULL},
    {"POST", "/v1/sources/{}/destinations", HOOKD_PERM_ADMIN, -1,
     hookd_api_source_add_destination, NULL},
    {"GET", "/v1/inbox", HOOKD_PERM_READ, -1, hookd_api_inbox_list,
     ",tenant,source,state,event_id,event_type,since,until,limit,before,"},
    /* (a literal pattern before the {} one it overlaps: hookd_api_gate) */
    {"POST", "/v1/inbox/resolve", HOOKD_PERM_OPERATE, -1, hookd_api_inbox_resolve_many, NULL},
    {"POST", "/v1/inbox/replay", HOOKD_PERM_OPERATE, -1, hookd_api_inbox_replay_many, NULL},
    {"GET", "/v1/inbox/{}", HOOKD_PERM_READ, -1, hookd_api_inbox_get, NULL},
    {"POST", "/v1/inbox/{}/resolve", HOOKD_PERM_OPERATE, -1, hookd_api_inbox_resolve, NULL},
    {"POST", "/v1/inbox/{}/replay", HOOKD_PERM_OPERATE, -1, hookd_api_inbox_replay, NULL},
    {"POST", "/v1/tenants/{}/events", HOOKD_PERM_PUBLISH, 0, hookd_api_event_publish, NULL},
    {"GET", "/v1/tenants/{}/events", HOOKD_PERM_READ, 0, hookd_api_event_list,
     ",event_type,kind,channel,since,until,limit,before,"},
    {"GET", "/v1/tenants/{}/events/{}", HOOKD_PERM_READ, 0, hookd_api_event_get, NULL},
    {"POST", "/v1/tenants/{}/events/{}/deliveries", HOOKD_PERM_OPERATE, 0,
     hookd_api_event_deliver, NULL},
    {"GET", "/v1/tenants/{}/events/{}/routing", HOOKD_PERM_READ, 0, hookd_api_event_routing,
     ",limit,after,endpoint,"},
    {"POST", "/v1/tenants/{}/events/{}/republish", HOOKD_PERM_OPERATE, 0,
     hookd_api_event_republish, NULL},
    {"DELETE", "/v1/tenants/{}/events/{}/payload", HOOKD_PERM_ADMIN, 0,
     hookd_api_event_payload_delete, NULL},
    {"GET", "/v1/events/{}", HOOKD_PERM_READ, -1, hookd_api_event_get, NULL},
    {"GET", "/v1/tenants/{}/deliveries", HOOKD_PERM_READ, 0, hookd_api_delivery_list,
     ",state,endpoint,event,event_type,since,until,after,limit,"},
    {"GET", "/v1/tenants/{}/deliveries/{}", HOOKD_PERM_READ, 0, hookd_api_delivery_get, NULL},
    {"POST", "/v1/tenants/{}/deliveries/{}/replay", HOOKD_PERM_OPERATE, 0,
     hookd_api_delivery_replay, NULL},
    {"GET", "/v1/deliveries/{}", HOOKD_PERM_READ, -1, hookd_api_delivery_get, NULL},
    {"POST", "/v1/deliveries/{}/replay", HOOKD_PERM_OPERATE, -1, hookd_api_delivery_replay, NULL},
    {"POST", "/v1/tenants/{}/replays", HOOKD_PERM_OPERATE, 0, hookd_api_replay_create, NULL},
    {"GET", "/v1/tenants/{}/replays", HOOKD_PERM_READ, 0, hookd_api_replay_list, ",limit,after,"},
    {"GET", "/v1/tenants/{}/replays/{}", HOOKD_PERM_READ, 0, hookd_api_replay_get, NULL},
    {"POST", "/v1/tenants/{}/replays/{}/confirm", HOOKD_PERM_OPERATE, 0, hookd_api_replay_confirm,
     NULL},
    {"POST", "/v1/tenants/{}/replays/{}/pause", HOOKD_PERM_OPERATE, 0, hookd_api_replay_pause,
     NULL},
    {"POST", "/v1/tenants/{}/replays/{}/resume", HOOKD_PERM_OPERATE, 0, hookd_api_replay_resume,
     NULL},
    {"POST", "/v1/tenants/{}/replays/{}/cancel", HOOKD_PERM_OPERATE, 0, hookd_api_replay_cancel,
     NULL},
};
#define NROUTES (sizeof routes / sizeof routes[0])

/* How many {} segments a pattern has. */
static int params(const char *pattern) {
  int n = 0;
  for (const char *p = strstr(pattern, "{}"); p; p = strstr(p + 2, "{}")) n++;
  return n;
}

/* Whether a route keeps its answer under an Idempotency-Key (docs/api.md "Idempotency-Key"). */
static bool reads_idempotency_key(void (*fn)(hookd_req *, hookd_app *)) {
  static void (*const readers[])(hookd_req *, hookd_app *) = {
      hookd_api_tenant_create,      hookd_api_endpoint_create,   hookd_api_endpoint_test,
      hookd_api_source_create,      hookd_api_source_add_destination,
      hookd_api_event_publish,      hookd_api_event_republish,   hookd_api_event_deliver,
      hookd_api_delivery_replay,    hookd_api_inbox_resolve,     hookd_api_inbox_resolve_many,
      hookd_api_inbox_replay,       hookd_api_inbox_replay_many,
  };
  for (size_t i = 0; i < sizeof readers / sizeof readers[0]; i++)
    if (readers[i] == fn) return true;
  return false;
}

/* Matches path against pattern; on success captures {} segments into r (false when one cannot
 * be held: out of memory). */
static bool match(const char *pattern, const char *path, hookd_req *r, bool capture) {
  const char *p = pattern, *s = path;
  int param = 0;
  while (*p && *s) {
    if (*p != '/' || *s != '/') return false;
    p++;
    s++;
    const char *pe = strchr(p, '/'), *se = strchr(s, '/');
    size_t pl = pe ? (size_t)(pe - p) : strlen(p), sl = se ? (size_t)(se - s) : strlen(s);
    if (pl == 2 && p[0] == '{' && p[1] == '}') {
      if (sl == 0) return false;
      if (capture && hookd_req_set_param(r, param, s, sl) != 0) return false;
      param++;
    } else if (pl != sl || memcmp(p, s, pl) != 0) {
      return false;
    }
    p += pl;
    s += sl;
  }
  return *p == '\0' && *s == '\0';
}

/* The token of "Authorization: Bearer <token>", without the blanks before it (those after a
 * value the server cut: scan_header): NULL when there is none, "" when it is too long to be one
 * (an invalid key, not a missing one). */
/* A query parameter's name as an error's `param` (out, 257 bytes): "" (none given) when it is
 * longer than 256 bytes or not UTF-8 (a JSON string could not hold it). */
static const char *param_name(const char *name, char out[257]) {
  size_t n = strlen(name);
  if (n > 256) return "";
  memcpy(out, name, n + 1);
  return hookd_utf8_scrub(out) ? "" : out;
}

static const char *bearer(hookd_req *r, char out[512]) {
  const char *h = hookd_req_header(r, "Authorization");
  if (!h || strncasecmp(h, "Bearer ", 7) != 0) return NULL;
  h += 7;
  while (*h == ' ' || *h == '\t') h++;
  size_t n = strlen(h);
  if (n >= 512) n = 0;
  memcpy(out, h, n);
  out[n] = '\0';
  return out;
}

/* --metrics-token: the scrape's bearer token (compared as SHA-256 digests, in constant time);
 * without one, anyone who reaches the port. */
static bool scrape_allowed(const char *token, const char *tok) {
  if (!token[0]) return true;
  unsigned char got[32], want[32];
  if (!tok || hookd_sha256(tok, strlen(tok), got) != 0 ||
      hookd_sha256(token, strlen(token), want) != 0)
    return false;
  return CRYPTO_memcmp(got, want, 32) == 0;
}

/* A request the server answered 413 (its body over --max-body-bytes): a provider's is counted
 * apart (inbound.c). */
void hookd_api_too_large(hookd_req *r, void *arg) {
  hookd_app *app = arg;
  const char *path = hookd_req_path(r);
  if (!strncmp(path, "/in/", 4) && atomic_load(&app->started)) /* a provider's event refused */
    hookd_inbound_too_large(app, path + 4, hookd_req_method(r));
}

/* Everything a request is judged on before its body: the route, the API key and its role and
 * tenants, the query's names, Hookd-Reason, the path's ids — and, for /in/{source}, that the
 * source exists. Runs on the head alone (server.h: the gate), so a request refused here never
 * has its body held. Returns false once it has answered. */
bool hookd_api_gate(hookd_req *r, void *arg) {
  hookd_app *app = arg;
  const char *method = hookd_req_method(r), *path = hookd_req_path(r);
  if (!atomic_load(&app->started)) { /* starting: the store is being opened (recovery,
                                      * migrations); alive, not ready */
    if (!strcmp(path, "/healthz") && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) {
      hookd_req_reply_json(r, 200, json_pack("{s:s}", "status", "starting"));
      return false;
    }
    hookd_req_add_header(r, "Retry-After", "1");
    hookd_req_error(r, 503, "not_ready", "hookd is starting (opening its store)");
    return false;
  }
  const route *rt = NULL;
  char allow[64] = "";
  /* HEAD is GET without the body (libmicrohttpd sends none): probes use it */
  const char *as = !strcmp(method, "HEAD") ? "GET" : method;
  /* a path is its most literal patterns' (/v1/inbox/resolve is POST's, not a record id for GET
   * /v1/inbox/{}): the table lists a literal pattern before the {} one it overlaps, and a match
   * with more {} than one seen before is passed over */
  int fewest = INT_MAX;
  for (size_t i = 0; i < NROUTES; i++) {
    if (!match(routes[i].pattern, path, r, false)) continue;
    int np = params(routes[i].pattern);
    if (np > fewest) continue;
    fewest = np;
    if (strcmp(routes[i].method, as) == 0 &&
        !(as != method && routes[i].fn == hookd_inbound_handle)) { /* a provider never HEADs */
      rt = &routes[i];
      break;
    }
    /* HEAD is allowed wherever GET is (not on the provider-facing routes) */
    bool head = !strcmp(routes[i].method, "GET") && routes[i].fn != hookd_inbound_handle;
    if (strlen(allow) + strlen(routes[i].method) + 9 < sizeof allow) {
      if (allow[0]) strcat(allow, ", ");
      strcat(allow, routes[i].method);
      if (head) strcat(allow, ", HEAD");
    }
  }
  if (!rt && !strncmp(path, "/in/", 4) && match("/in/{}", path, r, false)) {
    /* a method no provider sends: 404 for no such source, else the source's own methods */
    hookd_inbound_wrong_method(r, app, path + 4);
    return false;
  }
  if (!rt) {
    if (allow[0]) {
      hookd_req_add_header(r, "Allow", allow);
      hookd_req_error(r, 405, "method_not_allowed", "%s is not allowed on this path (allowed: %s)",
                      method, allow);
    } else {
      hookd_req_error(r, 404, "not_found", "no such route");
    }
    return false;
  }
  if (!match(rt->pattern, path, r, true)) { /* (it matched above: a capture found no memory) */
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }

  if (rt->perm == HOOKD_PERM_SCRAPE) {
    char tokbuf[512];
    if (!scrape_allowed(app->cfg->metrics_token, bearer(r, tokbuf))) {
      hookd_api_unauthorized(r, "%s needs the metrics token as a bearer token", path);
      return false;
    }
  } else if (rt->perm != HOOKD_PERM_PUBLIC) {
    hookd_principal *p = calloc(1, sizeof *p);
    char tokbuf[512];
    const char *tok = bearer(r, tokbuf);
    if (!p) {
      hookd_req_error(r, 503, "unavailable", "out of memory");
      return false;
    }
    if (!tok || !hookd_auth_check(app->auth, tok, p)) {
      free(p);
      /* a key sent without its scheme, or as Basic, is not read: said so (never echoed) */
      hookd_api_unauthorized(r, "%s",
                             tok ? "invalid API key"
                             : hookd_req_header(r, "Authorization")
                                 ? "the Authorization header is not a bearer token: send "
                                   "Authorization: Bearer <API key>"
                                 : "missing API key (Authorization: Bearer …)");
      return false;
    }
    hookd_req_set_app(r, p, free);
    if (hookd_principal_expired(p, hookd_now_ms())) {
      char at[HOOKD_RFC3339_MAX];
      hookd_fmt_rfc3339_ms(p->expires_ms, at);
      hookd_api_unauthorized(r, "this API key expired at %s", at);
      return false;
    }
    if (!hookd_role_allows(p->role, rt->perm)) {
      hookd_api_forbid(r, "the %s role may not do this",
                      hookd_role_name(p->role));
      return false;
    }
    if (rt->tenant_param >= 0 && !hookd_api_tenant_allowed(r, hookd_req_param(r, rt->tenant_param)))
      return false; /* counted as an auth failure there */
  }
  /* a parameter a route does not read is a mistake (?status=dead for ?state=dead would list
   * everything), not something to ignore */
  if (!rt->query || strcmp(rt->query, "*") != 0) {
    const char *names[32];
    size_t nq = hookd_req_query_names(r, names, 32);
    if (nq > 32) {
      hookd_req_error(r, 400, "invalid_parameter", "more than 32 query parameters");
      return false;
    }
    for (size_t i = 0; i < nq; i++) {
      char needle[72];
      int n = snprintf(needle, sizeof needle, ",%s,", names[i]);
      if (!rt->query || n < 0 || (size_t)n >= sizeof needle || strchr(names[i], ',') ||
          !strstr(rt->query, needle)) { /* ("limit,after" is no name the route reads) */
        int ql = rt->query ? (int)strlen(rt->query) - 2 : 0; /* without the outer commas */
        char pn[257];
        hookd_req_field_error(r, 400, "invalid_parameter", param_name(names[i], pn),
                              "unknown query parameter \"%.64s\" (this route reads %s%.*s)",
                              names[i], ql > 0 ? "" : "none", ql > 0 ? ql : 0,
                              ql > 0 ? rt->query + 1 : "");
        return false;
      }
      /* sent twice, a parameter would mean what each reader takes (hookd the first, a proxy
       * maybe the last): refused, like a header sent twice */
      for (size_t j = 0; j < i; j++) {
        if (strcmp(names[j], names[i]) == 0) {
          char pn[257];
          hookd_req_field_error(r, 400, "invalid_parameter", param_name(names[i], pn),
                                "query parameter \"%.64s\" given twice", names[i]);
          return false;
        }
      }
    }
  }
  /* an Idempotency-Key on a write that keeps no answer under it (an API key's or a replay job's
   * create, a PATCH, a DELETE) was ignored: sent again, the write was done again (a review: two
   * API keys). Refused, so that a client sending one on every write learns which are not kept.
   * (A provider's own headers on /in/ are the provider's.) */
  if (strcmp(as, "GET") && rt->perm != HOOKD_PERM_PUBLIC && !reads_idempotency_key(rt->fn) &&
      hookd_req_header(r, "Idempotency-Key")) {
    hookd_req_error(r, 400, "invalid_header",
                    "%s %s keeps no answer under an Idempotency-Key: send it without one (sent "
                    "again, it is done again; docs/api.md lists the routes that keep one)",
                    method, rt->pattern);
    return false;
  }
  const char *reason = hookd_req_header(r, "Hookd-Reason");
  if (reason) {
    json_t *utf8 = json_string(reason); /* NULL: not UTF-8 */
    json_decref(utf8);
    if (!utf8 || !hookd_api_reason_valid(reason)) {
      hookd_req_error(r, 400, "invalid_header",
                      "Hookd-Reason must be 1-255 bytes of printable UTF-8 text, not blank");
      return false;
    }
  }
  /* (an event type's name is as long as an event's type may be: 256) */
  size_t id_max = rt->fn == hookd_api_event_type_patch ||
                          rt->fn == hookd_api_event_type_delete ||
                          rt->fn == hookd_api_event_type_get
                      ? 256
                      : 128;
  for (int i = 0; i < HOOKD_REQ_MAX_PARAMS && hookd_req_param(r, i); i++) {
    if (!hookd_id_valid(hookd_req_param(r, i), id_max)) {
      hookd_req_error(r, 404, "not_found", "no such resource (malformed identifier)");
      return false;
    }
  }
  if (rt->fn == hookd_inbound_handle && !hookd_inbound_gate(r, app)) return false;
  /* every API write stamps the node's clock (an inbound event is refused past its signature
   * check: hookd_inbound_handle) */
  if (rt->fn != hookd_inbound_handle && strcmp(rt->method, "GET") != 0 &&
      hookd_api_clock_outvoted(r, app))
    return false;
  hookd_req_set_route(r, rt);
  return true;
}

void hookd_api_handle(hookd_req *r, void *arg) {
  const route *rt = hookd_req_route(r);
  if (!rt && !hookd_api_gate(r, arg)) return; /* (without a gate in the server) */
  rt = hookd_req_route(r);
  /* the key was checked at the headers; a body held back past its revocation (a minute at
   * most: --request-timeout-s) must not then act: checked again (docs/api.md "API keys") */
  const hookd_principal *p = hookd_api_principal(r);
  bool expired = p && hookd_principal_expired(p, hookd_now_ms());
  if (p && (expired || !hookd_auth_still_valid(((hookd_app *)arg)->auth, p))) {
    hookd_api_unauthorized(r, "the API key %s while the request was sent",
                           expired ? "expired" : "was revoked");
    return;
  }
  rt->fn(r, arg);
}

/* api_sources.c — inbound sources (docs/inbound.md):
 *   POST   /v1/sources             create, with its destinations (201: ingest URL, each
 *                                  destination's whsec_ secret)
 *   GET    /v1/sources?tenant=     list
 *   GET    /v1/sources/{id}        one, with its destinations
 *   PATCH  /v1/sources/{id}        secrets (rotation), tolerance, event types, rules
 *   DELETE /v1/sources/{id}        delete it and its destinations
 * Source secrets are sealed at rest (one sealed JSON array) and never returned. Destination URLs
 * pass the destination policy like endpoint URLs. */
#include <ctype.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/inbound.h"
#include "core/secretbox.h"
#include "core/shown_text.h"
#include "core/sign.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"

#define MAX_DESTS 8
#define MAX_SECRETS HOOKD_SOURCE_MAX_SECRETS

typedef struct src_op {
  hookd_api_op base;
  hookd_source src;               /* owned strings */
  hookd_endpoint dests[MAX_DESTS];
  char *dest_secrets[MAX_DESTS];  /* plaintext, returned once */
  size_t n_dests;
  size_t checking;                /* destination whose URL is being checked */
  /* create with an Idempotency-Key, a destination's URL refused (DNS failing now, a policy
   * changed): the kept answer is looked up first, else this refusal is the answer */
  bool url_refused;
  char refusal[400];
  hookd_dest_check check;
  unsigned patch;                 /* PATCH: fields present */
  bool force;                     /* PATCH: a second identity change within the first's window */
  int unfit[HOOKD_PROVIDER__COUNT]; /* PATCH: per provider, the first new secret that cannot
                                       verify its requests, or -1 (the provider is read with the
                                       source, in run_patch) */
  int refused;                    /* PATCH: that secret's index for the source's provider, or -1 */
  int cred_unfit[2];              /* the first secret a generic credential source refuses: as a
                                     token (under 16 bytes), as Basic (no "user:password") */
  bool cred_refused;              /* PATCH: refused for the stored generic mode (refused) */
  hookd_provider refused_for;     /* PATCH: the source's provider, when refused >= 0 */
  char id[HOOKD_ID_MAX + 64];
  hookd_principal who;
  bool scoped;
  /* results */
  hookd_source *list;
  size_t n_list;
  struct src_dests { /* the listed sources' destinations, as GET shows them */
    hookd_endpoint *v;
    size_t n;
  } *list_dests;
  hookd_endpoint *got_dests;
  size_t n_got;
  hookd_kept k; /* create, destination add: an Idempotency-Key's answer (the id it made) */
  bool loaded;
  bool adding;                    /* POST …/destinations: one destination, named so in errors */
  const char *body_refused;       /* PATCH: a JSON-body rule (its field) of a provider sending
                                     no JSON body (body_field) */
  const char *types_refused;      /* PATCH: the allowlist (its field) of a provider whose
                                     requests name no type */
  int limit;                      /* list: the page's size, after the id `after` */
  const char *provider_only;      /* list: that provider's sources only (its name), or NULL */
  char after[HOOKD_ID_MAX + 64];
  bool more;                      /* list: sources past the page */
  hookd_delete_counts deleted;    /* DELETE: the destinations' deliveries cancelled, held */
} src_op;

#define PROVIDERS_ARE                                                                    \
  "provider must be one of standard, stripe, github, shopify, slack, gitlab, twilio, paddle, " \
  "zoom, discord, vnpay, momo, generic"

enum { P_SECRETS = 1, P_TOLERANCE = 2, P_TYPES = 4, P_IDENTITY = 8, P_BKEY = 16, P_VERSION = 32 };

static void src_cleanup(hookd_api_op *base) {
  src_op *op = (src_op *)base;
  hookd_source_free(&op->src);
  for (size_t i = 0; i < op->n_dests; i++) {
    hookd_endpoint_free(&op->dests[i]);
    hookd_secret_free(op->dest_secrets[i]);
  }
  for (size_t i = 0; op->list_dests && i < op->n_list; i++)
    hookd_endpoints_free(op->list_dests[i].v, op->list_dests[i].n);
  free(op->list_dests);
  if (op->list) hookd_sources_free(op->list, op->n_list);
  if (op->got_dests) hookd_endpoints_free(op->got_dests, op->n_got);
  free(op->check.url);
  free(op->k.answer);
  op->k.answer = NULL;
}

static src_op *new_op(hookd_req *r, hookd_app *app,
                      int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                      void (*reply)(hookd_api_op *, int)) {
  src_op *op = hookd_api_op_new(sizeof *op, r, app, run, reply);
  if (!op) return NULL;
  op->base.cleanup = src_cleanup;
  const hookd_principal *p = hookd_api_principal(r);
  if (p) {
    op->who = *p;
    op->scoped = true;
  }
  return op;
}

static void fail_op(src_op *op) {
  src_cleanup(&op->base);
  free(op);
}

/* ---------- rendering ---------- */

static json_t *csv_array(const char *csv) {
  if (!csv) return json_null();
  json_t *a = json_array();
  for (const char *p = csv; *p;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    json_array_append_new(a, json_stringn(p, len));
    if (!c) break;
    p = c + 1;
  }
  return a;
}

/* A destination as a source shows it; its secret only when just made (returned once). */
static json_t *dest_json(hookd_app *app, const hookd_endpoint *e, const char *secret) {
  json_t *v = json_pack("{s:s,s:s,s:b,s:b,s:i,s:o}", "id", e->id, "url", e->url, "idempotent",
                        e->idempotent, "enabled", e->enabled, "timeout_ms",
                        hookd_api_timeout_shown(e->timeout_ms, app->cfg->max_timeout_ms),
                        "disabled_reason",
                        e->disabled_reason ? json_string(e->disabled_reason) : json_null());
  if (v) {
    json_object_set_new(v, "disabled_at", hookd_json_time(e->enabled ? 0 : e->disabled_ms));
    json_object_set_new(v, "max_in_flight", json_integer(e->max_in_flight));
    json_object_set_new(v, "rate_limit", hookd_json_rate(e->rate_limit));
    json_object_set_new(v, "retry", hookd_json_retry(&e->policy));
    json_object_set_new(v, "headers", hookd_api_header_names(app, e)); /* names, as endpoints */
  }
  if (v && secret) json_object_set_new(v, "secret", json_string(secret));
  return v;
}

/* The source's secrets as shown: never their values, each one's expiry (null: none; a past one:
 * no longer accepted) — what an operator checks after a rotation. null when they do not open. */
static json_t *secrets_shown(hookd_app *app, const hookd_source *s) {
  json_t *arr = s->secrets && *s->secrets
                    ? hookd_keyring_open_json(&app->keyring, s->secrets, s->id)
                    : NULL;
  if (!json_is_array(arr)) {
    json_decref(arr);
    return json_null();
  }
  json_t *shown = json_array();
  size_t i;
  json_t *x;
  json_array_foreach(arr, i, x) {
    json_int_t at = json_integer_value(json_object_get(x, "expires_at"));
    json_array_append_new(shown, json_pack("{s:o}", "expires_at",
                                           at > 0 ? hookd_json_time(at) : json_null()));
  }
  json_decref(arr);
  return shown;
}

static json_t *source_json(hookd_app *app, const hookd_source *s, const hookd_endpoint *dests,
                           size_t n, char *const *secrets) {
  char path[256];
  snprintf(path, sizeof path, "/in/%s", s->id);
  json_t *v = json_pack(
      "{s:s,s:s,s:s,s:s,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "id", s->id, "tenant_id", s->tenant_id,
      "provider", s->provider, "ingest_path", path, "tolerance_s", s->tolerance_s, "event_types",
      csv_array(s->event_types), "identity_paths", csv_array(s->identity_paths), "business_key",
      s->business_paths ? json_pack("{s:o,s:s,s:o}", "paths", csv_array(s->business_paths),
                                    "operation", s->business_operation ? s->business_operation : "",
                                    "event_types", csv_array(s->business_types))
                        : json_null(),
      "version",
      s->version_object_path
          ? json_pack("{s:s,s:o,s:o}", "object_path", s->version_object_path, "path",
                      s->version_path ? json_string(s->version_path) : json_null(), "header",
                      s->version_header ? json_string(s->version_header) : json_null())
          : json_null(),
      "created_at", hookd_json_time(s->created_ms), "updated_at", hookd_json_time(s->updated_ms));
  if (app->cfg->public_url[0]) {
    char url[1024];
    snprintf(url, sizeof url, "%s%s", app->cfg->public_url, path);
    json_object_set_new(v, "ingest_url", json_string(url));
  }
  if (s->generic) json_object_set_new(v, "generic", json_loads(s->generic, 0, NULL));
  json_object_set_new(v, "secrets", secrets_shown(app, s));
  /* the identity rule a change replaced, while it is still looked up (null: the provider's id) */
  json_object_set_new(v, "prior_identity",
                      s->prior_identity_until_ms > hookd_now_ms()
                          ? json_pack("{s:o,s:o}", "identity_paths",
                                      csv_array(s->prior_identity_paths), "until",
                                      hookd_json_time(s->prior_identity_until_ms))
                          : json_null());
  json_t *d = json_array();
  for (size_t i = 0; i < n; i++)
    json_array_append_new(d, dest_json(app, &dests[i], secrets ? secrets[i] : NULL));
  json_object_set_new(v, "destinations", d);
  json_t *rej = hookd_rejections_json(app->rejections, s->id); /* this node's, in memory */
  json_object_set_new(v, "rejected", rej ? rej : json_null());
  return v;
}

/* ---------- parsing ---------- */

/* An event-type pattern of a source's allowlist: a type as its provider names it, "*", or a
 * prefix ending in ".*" or '/' and '*' (hookd_api_type_pattern_valid), at most 128 bytes. */
static bool valid_type_pattern(const char *s) {
  return strlen(s) <= 128 && hookd_api_type_pattern_valid(s);
}

/* The generic HMAC settings that could never verify a request, or only by accident: a prefix
 * or template no header or request holds (control bytes, more than a header could), one header
 * serving two roles, or a signature in a header that frames the request. */
static const char *generic_sane(const hookd_generic_hmac *g) {
  static const char *const framing[] = {"host",      "content-length", "transfer-encoding",
                                        "connection", "content-type",  "content-encoding",
                                        "expect",     "upgrade",       "te",
                                        "trailer",    "keep-alive",    NULL};
  for (size_t i = 0; framing[i]; i++)
    if (!strcasecmp(g->header, framing[i]))
      return "generic.header may not be a header that frames the request (Host, Content-Length, "
             "Content-Type, …)";
  const char *p = g->prefix ? g->prefix : "";
  if (strlen(p) > 64) return "generic.prefix must be at most 64 bytes";
  for (const unsigned char *u = (const unsigned char *)p; *u; u++)
    if (*u < 0x20 || *u > 0x7e) return "generic.prefix must be printable ASCII";
  const char *t = g->template ? g->template : "";
  if (strlen(t) > 1024) return "generic.template must be at most 1024 bytes";
  for (const unsigned char *u = (const unsigned char *)t; *u; u++) /* bytes: UTF-8 passes */
    if ((*u < 0x20 && *u != '\n') || *u == 0x7f)
      return "generic.template may hold no control character but a line feed";
  const char *id = g->id_header && *g->id_header ? g->id_header : NULL;
  const char *ts = g->timestamp_header && *g->timestamp_header ? g->timestamp_header : NULL;
  if ((id && !strcasecmp(id, g->header)) || (ts && !strcasecmp(ts, g->header)) ||
      (id && ts && !strcasecmp(id, ts)))
    return "generic.header, generic.id_header and generic.timestamp_header must be three "
           "different headers";
  return NULL;
}

/* A JSON path as hookd_json_path reads it: member names or array indexes joined by '.', none
 * empty, from the body's root ("data.object.id"). "$.data.id", ".id", "a..b" or "a." could
 * never match, and a rule that never matches does nothing, silently. */
static bool valid_json_path(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 128 || s[0] == '.' || s[n - 1] == '.' || strstr(s, "..") ||
      (s[0] == '$' && (s[1] == '.' || s[1] == '[' || s[1] == '\0')))
    return false;
  for (const char *c = s; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          strchr("_-.$", *c)))
      return false;
  return true;
}

static char *join_strings(hookd_req *r, json_t *arr, const char *field, size_t max_items,
                          bool paths, bool *ok) {
  *ok = false;
  if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > max_items) {
    hookd_req_error(r, 422, "invalid_field", "%s must be an array of 1 to %zu strings", field,
                    max_items);
    return NULL;
  }
  hookd_buf b;
  hookd_buf_init(&b, 64 * 1024);
  size_t i;
  json_t *x;
  json_array_foreach(arr, i, x) {
    const char *s = json_string_value(x);
    if (!s || !(paths ? valid_json_path(s) : valid_type_pattern(s))) {
      hookd_buf_free(&b);
      hookd_req_error(r, 422, "invalid_field", "%s[%zu] is not a valid %s", field, i,
                      paths ? "JSON path: member names or indexes joined by '.', from the "
                              "body's root (data.object.id; no \"$.\"), at most 128 characters"
                            : "event type pattern: the type as the provider sends it (printable"
                              " ASCII, no ',', at most 128 characters), \"*\", or a prefix "
                              "ending in \".*\" or \"/*\"");
      return NULL;
    }
    if (i) hookd_buf_puts(&b, ",");
    hookd_buf_puts(&b, s);
  }
  *ok = true;
  return hookd_buf_steal(&b);
}

/* Provider-specific shape checks, where they are cheap: a secret failing one could never verify
 * a request (discord: an Ed25519 public key; momo: both halves of accessKey:secretKey; standard:
 * whsec_ and base64 that fits a key). */
static bool secret_fits(const char *provider, const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 512) return false;
  if (!strcmp(provider, "discord")) return n == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
  if (!strcmp(provider, "momo")) {
    const char *colon = strchr(s, ':');
    return colon && colon > s && colon[1];
  }
  if (!strcmp(provider, "standard")) {
    if (!strncmp(s, "whpk_", 5)) return hookd_ed25519_public_ok(s); /* v1a: Ed25519 */
    hookd_hmac_key k;
    bool ok = hookd_secret_parse(s, &k) == 0;
    OPENSSL_cleanse(&k, sizeof k);
    return ok;
  }
  return true;
}

static void secret_refused(hookd_req *r, size_t i, const char *provider) {
  hookd_req_error(r, 422, "invalid_field",
                  "secrets[%zu] is not a valid %s secret (discord: 64 hex chars of the public "
                  "key; momo: accessKey:secretKey; standard: whsec_… or whpk_…)",
                  i, provider);
}

/* secrets[i]: a string, or {"secret": "…", "expires_at": RFC 3339 in the future} — the previous
 * secret of a rotation, accepted until then (Stripe's "roll secret" keeps the old one up to 24 h;
 * forgotten in the list, it would be accepted for ever). *expires: 0 for a string. */
static bool secret_entry(hookd_req *r, const json_t *x, size_t i, int64_t now, int64_t *expires) {
  *expires = 0;
  if (!json_is_object(x)) return true; /* a string, or refused by the caller */
  static const char *const names[] = {"secret", "expires_at", NULL};
  const char *at = NULL;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "secrets[%zu]", i);
  if (!hookd_api_known_members(r, x, prefix, names)) return false;
  if (!json_is_string(json_object_get(x, "secret")) ||
      hookd_json_get_str(x, "expires_at", &at) != 0 || hookd_parse_rfc3339(at, expires) != 0 ||
      *expires <= now) {
    hookd_req_error(r, 422, "invalid_field",
                    "secrets[%zu] must be a string or {\"secret\": string, \"expires_at\": an "
                    "RFC 3339 time to come}",
                    i);
    return false;
  }
  return true;
}

/* Secrets: 1..16 strings (or secret_entry's objects) that fit provider ("" checks only what
 * every provider needs); sealed. unfit, when given, gets per provider the index of the first
 * secret that does not fit it. */
/* Whether a secret can serve a generic credential source: a token of 16 bytes at least (the
 * whole proof, sent in clear on every request: one of a few bytes is guessed), Basic's
 * "user:password" with both parts (else no request could ever match). */
static bool credential_fits(hookd_generic_mode mode, const char *s) {
  if (mode == HOOKD_GENERIC_TOKEN) return strlen(s) >= 16;
  const char *colon = strchr(s, ':');
  return mode != HOOKD_GENERIC_BASIC || (colon && colon > s && colon[1]);
}

static void credential_refused(hookd_req *r, int i, hookd_generic_mode mode) {
  char param[32]; /* the secret refused, as the message names it */
  snprintf(param, sizeof param, "secrets[%d]", i);
  hookd_req_field_error(r, 422, "invalid_field", param,
                        "secrets[%d] cannot serve algorithm %s: %s", i,
                        mode == HOOKD_GENERIC_TOKEN ? "token" : "basic",
                        mode == HOOKD_GENERIC_TOKEN
                            ? "a token is at least 16 bytes (it is the whole proof)"
                            : "each secret is \"user:password\", both parts given");
}

static char *parse_secrets(hookd_req *r, hookd_app *app, const char *provider, json_t *arr,
                           const char *owner_id, int unfit[HOOKD_PROVIDER__COUNT],
                           int cred_unfit[2]) {
  if (!json_is_array(arr) || json_array_size(arr) == 0 || json_array_size(arr) > MAX_SECRETS) {
    hookd_req_error(r, 422, "invalid_field",
                    "secrets must be an array of 1 to %d strings (or {\"secret\", \"expires_at\"})",
                    MAX_SECRETS);
    return NULL;
  }
  for (int p = 0; unfit && p < HOOKD_PROVIDER__COUNT; p++) unfit[p] = -1;
  cred_unfit[0] = cred_unfit[1] = -1;
  size_t i;
  json_t *x;
  json_t *stored = json_array(); /* a string, or {"secret", "expires_at": ms} */
  int64_t now = hookd_now_ms();
  json_array_foreach(arr, i, x) {
    int64_t expires = 0;
    if (!secret_entry(r, x, i, now, &expires)) {
      json_decref(stored);
      return NULL;
    }
    const char *s = json_string_value(json_is_object(x) ? json_object_get(x, "secret") : x);
    if (!s || !secret_fits(provider, s)) {
      json_decref(stored);
      secret_refused(r, i, provider);
      return NULL;
    }
    /* a pasting mistake, which would never verify a request */
    if (isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1])) {
      json_decref(stored);
      hookd_req_error(r, 422, "invalid_field", "secrets[%zu] begins or ends with a blank", i);
      return NULL;
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
      if (*p < 0x20 || *p == 0x7f) { /* no provider issues one: an encoding mistake (a review) */
        json_decref(stored);
        hookd_req_error(r, 422, "invalid_field", "secrets[%zu] holds a control character", i);
        return NULL;
      }
    for (size_t j = 0; j < i; j++) {
      json_t *pj = json_array_get(stored, j);
      const char *prev = json_string_value(json_is_object(pj) ? json_object_get(pj, "secret") : pj);
      if (prev && !strcmp(prev, s)) {
        json_decref(stored);
        hookd_req_error(r, 422, "invalid_field", "secrets[%zu] repeats secrets[%zu]", i, j);
        return NULL;
      }
    }
    json_array_append_new(stored, expires ? json_pack("{s:s,s:I}", "secret", s, "expires_at",
                                                      (json_int_t)expires)
                                          : json_string(s));
    for (int p = 0; unfit && p < HOOKD_PROVIDER__COUNT; p++)
      if (unfit[p] < 0 && !secret_fits(hookd_provider_name((hookd_provider)p), s))
        unfit[p] = (int)i;
    for (int m = 0; m < 2; m++)
      if (cred_unfit[m] < 0 && !credential_fits(m ? HOOKD_GENERIC_BASIC : HOOKD_GENERIC_TOKEN, s))
        cred_unfit[m] = (int)i;
  }
  char *plain = json_dumps(stored, JSON_COMPACT);
  json_decref(stored);
  char *sealed = plain ? hookd_keyring_seal(&app->keyring, plain, owner_id) : NULL;
  hookd_secret_free(plain);
  if (!sealed) hookd_req_error(r, 503, "unavailable", "cannot seal the secrets");
  return sealed;
}

static void types_refused(hookd_req *r, const char *provider, const char *field) {
  hookd_req_error(r, 422, "invalid_field",
                  "%s: %s requests name no event type, so an allowlist would %s every event "
                  "(leave it out, or null)",
                  field, provider, strcmp(field, "event_types") ? "leave out" : "filter");
}

/* The rule fields read from a JSON body, which a provider sending none (VNPay's IPN: a GET's
 * query) refuses — accepted, they were never read (a review: a business key on vnp_TxnRef let
 * two payments of one order through, each forwarded); or NULL. */
static const char *body_field(hookd_provider p, const hookd_source *s, unsigned patch) {
  if (p != HOOKD_PROVIDER_VNPAY) return NULL;
  if ((patch & P_IDENTITY) && s->identity_paths) return "identity_paths";
  if ((patch & P_BKEY) && s->business_paths) return "business_key";
  if ((patch & P_VERSION) && (s->version_path || s->version_header)) return "version";
  return NULL;
}

static void body_refused(hookd_req *r, const char *provider, const char *field) {
  hookd_req_field_error(r, 422, "invalid_field", field,
                        "%s: %s requests carry no JSON body for it to read (its identity is the "
                        "provider's: vnp_TxnRef and vnp_TransactionNo); leave it out, or null",
                        field, provider);
}

/* The allowlist field of the rules that a provider naming no type refuses, or NULL. */
static const char *typed_field(const hookd_source *s, unsigned patch) {
  if ((patch & P_TYPES) && s->event_types) return "event_types";
  if ((patch & P_BKEY) && s->business_types) return "business_key.event_types";
  return NULL;
}

/* Rule fields shared by create and PATCH. */
static bool parse_rules(hookd_req *r, json_t *body, src_op *op) {
  bool ok = true;
  json_t *v;
  if ((v = json_object_get(body, "tolerance_s"))) {
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 86400) {
      hookd_req_error(r, 422, "invalid_field", "tolerance_s must be an integer in [1, 86400]");
      return false;
    }
    op->src.tolerance_s = (int)json_integer_value(v);
    op->patch |= P_TOLERANCE;
  }
  if ((v = json_object_get(body, "event_types"))) {
    op->patch |= P_TYPES;
    free(op->src.event_types);
    op->src.event_types =
        json_is_null(v) ? NULL : join_strings(r, v, "event_types", 64, false, &ok);
    if (!json_is_null(v) && !ok) return false;
  }
  if ((v = json_object_get(body, "identity_paths"))) {
    op->patch |= P_IDENTITY;
    free(op->src.identity_paths);
    op->src.identity_paths =
        json_is_null(v) ? NULL : join_strings(r, v, "identity_paths", 8, true, &ok);
    if (!json_is_null(v) && !ok) return false;
  }
  if ((v = json_object_get(body, "business_key"))) {
    op->patch |= P_BKEY;
    free(op->src.business_paths);
    free(op->src.business_operation);
    free(op->src.business_types);
    op->src.business_paths = op->src.business_operation = op->src.business_types = NULL;
    static const char *const bkey_members[] = {"paths", "operation", "event_types", NULL};
    if (json_is_object(v) && !hookd_api_known_members(r, v, "business_key", bkey_members))
      return false;
    if (!json_is_null(v)) {
      const char *opn = "";
      if (!json_is_object(v) || hookd_json_get_str(v, "operation", &opn) < 0 || strlen(opn) > 64) {
        hookd_req_error(r, 422, "invalid_field",
                        "business_key must be {\"paths\": [...], \"operation\"?: \"name\"}");
        return false;
      }
      if (!hookd_shown_name_ok(opn)) { /* shown to operators, as every name (a review) */
        hookd_req_error(r, 422, "invalid_field", "business_key.operation must be text on one "
                        "line, without control or bidirectional characters");
        return false;
      }
      op->src.business_paths = join_strings(r, json_object_get(v, "paths"), "business_key.paths", 8,
                                            true, &ok);
      if (!ok) return false;
      op->src.business_operation = strdup(opn);
      /* the types the operation is (an invoice's payment_failed is no second mark_paid) */
      json_t *types = json_object_get(v, "event_types");
      if (types && !json_is_null(types)) {
        op->src.business_types = join_strings(r, types, "business_key.event_types", 64, false, &ok);
        if (!ok) return false;
      }
    }
  }
  if ((v = json_object_get(body, "version"))) {
    op->patch |= P_VERSION;
    free(op->src.version_object_path);
    free(op->src.version_path);
    free(op->src.version_header);
    op->src.version_object_path = op->src.version_path = op->src.version_header = NULL;
    static const char *const version_members[] = {"object_path", "path", "header", NULL};
    if (json_is_object(v) && !hookd_api_known_members(r, v, "version", version_members))
      return false;
    if (!json_is_null(v)) {
      const char *objp = NULL, *vp = NULL, *vh = NULL;
      if (!json_is_object(v) || hookd_json_get_str(v, "object_path", &objp) != 0 ||
          hookd_json_get_str(v, "path", &vp) < 0 || hookd_json_get_str(v, "header", &vh) < 0 ||
          (!vp == !vh) || !valid_json_path(objp) || (vp && !valid_json_path(vp)) ||
          (vh && !hookd_in_header_name_valid(vh))) {
        hookd_req_error(r, 422, "invalid_field",
                        "version must be {\"object_path\": p, \"path\": q} or {\"object_path\": p, "
                        "\"header\": h}, p and q JSON paths from the body's root "
                        "(data.object.id), h a header name");
        return false;
      }
      op->src.version_object_path = strdup(objp);
      op->src.version_path = vp ? strdup(vp) : NULL;
      op->src.version_header = vh ? strdup(vh) : NULL;
    }
  }
  return true;
}

/* ---------- create ---------- */

/* A create sent again with its Idempotency-Key: the source the first one made, as it is now
 * (its kept answer is its id: the destinations' secrets are not kept twice, in the clear). */
static int created_before(src_op *op, hookd_store_conn *c, const hookd_store_backend *be) {
  char made[HOOKD_ID_MAX + 64];
  if (!hookd_kept_id(&op->k, made, sizeof made)) return HOOKD_STORE_ERR;
  hookd_source_free(&op->src); /* the one this request would have made */
  if (op->got_dests) hookd_endpoints_free(op->got_dests, op->n_got);
  op->got_dests = NULL;
  op->n_got = 0;
  int rc = be->source_get(c, made, &op->src, &op->got_dests, &op->n_got);
  if (rc == HOOKD_STORE_NOTFOUND) {
    snprintf(op->base.err, sizeof op->base.err,
             "this Idempotency-Key's request created source %s, deleted since", made);
    return HOOKD_STORE_STATE;
  }
  /* the answer carries each destination's secret as it is now (destinations added since
   * too): each read audited, as an endpoint's secret read is */
  for (size_t i = 0; !rc && i < op->n_got && i < MAX_DESTS; i++)
    rc = hookd_api_audit(&op->base, c, be, "endpoint.secret.read", op->got_dests[i].id,
                         op->src.tenant_id, "idempotent replay of its source's create");
  return rc;
}

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  src_op *op = (src_op *)base;
  int rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc == 0) return created_before(op, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  if (op->url_refused) return HOOKD_STORE_STATE; /* never made: the URL's refusal answers */
  rc = be->source_create(c, &op->src, op->dests, op->n_dests,
                         op->base.app->cfg->max_endpoints_per_tenant);
  if (!rc)
    rc = hookd_api_audit(base, c, be, "source.create", op->src.id, op->src.tenant_id,
                         op->src.provider);
  return rc ? rc : hookd_kept_store(&op->k, c, be, 201, json_pack("{s:s}", "id", op->src.id));
}

/* The answer to a create sent again: the source and its destinations' secrets as they are. */
static void reply_created_before(src_op *op) {
  hookd_app *app = op->base.app;
  char *secrets[MAX_DESTS] = {0};
  size_t n = op->n_got < MAX_DESTS ? op->n_got : MAX_DESTS;
  bool ok = true;
  for (size_t i = 0; i < n; i++)
    ok &= (secrets[i] = hookd_keyring_open(&app->keyring, op->got_dests[i].secret,
                                           op->got_dests[i].id)) != NULL;
  if (ok) {
    hookd_req_add_header(op->base.req, "Idempotent-Replayed", "true");
    hookd_req_reply_json(op->base.req, 201,
                         source_json(app, &op->src, op->got_dests, n, secrets));
  } else {
    hookd_req_error(op->base.req, 500, "secret_unavailable",
                    "a stored secret cannot be opened with the configured master key");
  }
  for (size_t i = 0; i < n; i++) hookd_secret_free(secrets[i]);
}

static void reply_create(hookd_api_op *base, int rc) {
  src_op *op = (src_op *)base;
  if (rc == HOOKD_STORE_STATE && op->url_refused && !op->k.replayed) { /* (else: deleted since) */
    hookd_req_error(base->req, 422, "destination_refused", "%s", op->refusal);
    HLOG(HOOKD_LOG_INFO, "destination.refused", KV_S("tenant_id", op->src.tenant_id),
         KV_S("source_id", op->src.id));
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, rc == HOOKD_STORE_NOTFOUND ? "tenant" : "source");
    return;
  }
  if (op->k.replayed) {
    reply_created_before(op);
    return;
  }
  hookd_source_cache_put(base->app->sources, &op->src);
  for (size_t i = 0; i < op->n_dests; i++)
    hookd_dispatcher_endpoint_changed(base->app->disp, &op->dests[i]);
  HLOG(HOOKD_LOG_INFO, "source.created", KV_S("source_id", op->src.id),
       KV_S("tenant_id", op->src.tenant_id), KV_S("provider", op->src.provider));
  hookd_req_reply_json(base->req, 201,
                       source_json(base->app, &op->src, op->dests, op->n_dests, op->dest_secrets));
}

/* Destination URLs are checked one after the other, then the source is stored. */
static void check_next(src_op *op);

static void dest_checked(hookd_dest_check *c, void *arg) {
  src_op *op = arg;
  char field[48];
  if (op->adding) snprintf(field, sizeof field, "url");
  else snprintf(field, sizeof field, "destinations[%zu].url", op->checking);
  if (hookd_api_dest_retry(op->base.req, c, field)) {
    fail_op(op);
    return;
  }
  if (c->rc != 0 && op->k.idem[0]) { /* a create sent again: its kept answer first */
    op->url_refused = true;
    if (op->adding)
      snprintf(op->refusal, sizeof op->refusal, "url refused by rule %s: %s", c->err.rule,
               c->err.message);
    else
      snprintf(op->refusal, sizeof op->refusal, "destinations[%zu].url refused by rule %s: %s",
               op->checking, c->err.rule, c->err.message);
    hookd_storeq_submit(op->base.app->store->writer, &op->base.sop);
    return;
  }
  if (c->rc != 0) {
    if (op->adding)
      hookd_req_error(op->base.req, 422, "destination_refused", "url refused by rule %s: %s",
                      c->err.rule, c->err.message);
    else
      hookd_req_error(op->base.req, 422, "destination_refused",
                      "destinations[%zu].url refused by rule %s: %s", op->checking, c->err.rule,
                      c->err.message);
    HLOG(HOOKD_LOG_INFO, "destination.refused", KV_S("rule", c->err.rule),
         KV_S("tenant_id", op->src.tenant_id), KV_S("source_id", op->src.id));
    fail_op(op);
    return;
  }
  op->checking++;
  check_next(op);
}

static void check_next(src_op *op) {
  if (op->checking >= op->n_dests || op->url_refused) {
    hookd_storeq_submit(op->base.app->store->writer, &op->base.sop);
    return;
  }
  free(op->check.url);
  memset(&op->check, 0, sizeof op->check);
  op->check.url = strdup(op->dests[op->checking].url);
  op->check.done = dest_checked;
  op->check.arg = op;
  /* shared out by tenant; a destination added to a source (its tenant is read with it, after
   * the check), by the key's tenant when it has one, else by the key — not by the path's source
   * id, which a caller may vary at will */
  const hookd_principal *p = hookd_api_principal(op->base.req);
  const char *one = p ? hookd_scope_single(p->tenants) : NULL;
  if (op->src.tenant_id && op->src.tenant_id[0])
    snprintf(op->check.who, sizeof op->check.who, "%s", op->src.tenant_id);
  else if (one)
    snprintf(op->check.who, sizeof op->check.who, "%s", one);
  else
    snprintf(op->check.who, sizeof op->check.who, "key %s", p ? p->key_id : "");
  hookd_destinations_check_async(op->base.app->dest, &op->check);
}

/* After parsing: answered and freed when !ok; else the destinations' URLs are checked (one
 * after the other), then the op is stored. */
static void start_checks(src_op *op, bool ok) {
  if (!ok) {
    fail_op(op);
    return;
  }
  hookd_req_suspend(op->base.req);
  check_next(op);
}

/* One destination of the body (d) into op->dests[i]; errors name it `where` ("destinations[2]",
 * or "destination" for one added alone). */
static bool parse_destination(hookd_req *r, hookd_app *app, json_t *d, size_t i, src_op *op,
                              int64_t now, const char *where) {
  hookd_endpoint *e = &op->dests[i];
  const char *url = NULL;
  bool idem = true;
  int64_t timeout = app->cfg->default_timeout_ms, mif = app->cfg->default_max_in_flight;
  if (!json_is_object(d)) {
    hookd_req_error(r, 422, "invalid_field", "%s must be an object", where);
    return false;
  }
  static const char *const members[] = {"url",        "idempotent", "timeout_ms", "max_in_flight",
                                        "rate_limit", "retry",      "headers",    NULL};
  if (!hookd_api_known_members(r, d, op->adding ? NULL : where, members)) return false;
  /* each field named by its path in the body ("destinations[2].timeout_ms"; "timeout_ms" for a
   * destination added alone), and null refused: it would silently mean the default (an
   * "idempotent": null read as true), as the endpoint routes refuse it */
  const char *pre = op->adding ? "" : where, *dot = op->adding ? "" : ".";
  static const char *const scalars[] = {"url", "idempotent", "timeout_ms", "max_in_flight"};
  for (size_t k = 0; k < sizeof scalars / sizeof *scalars; k++)
    if (json_is_null(json_object_get(d, scalars[k]))) {
      hookd_req_error(r, 422, "invalid_field",
                      "%s%s%s must not be null (leave it out for the default)", pre, dot,
                      scalars[k]);
      return false;
    }
  /* absent is missing_field, present and wrong invalid_field, as everywhere */
  if (!json_object_get(d, "url")) {
    hookd_req_error(r, 422, "missing_field", "%s%surl is required: the handler's URL", pre, dot);
    return false;
  }
  char wrong[96] = "";
  if (hookd_json_get_str(d, "url", &url) != 0)
    snprintf(wrong, sizeof wrong, "url must be a string");
  else if (hookd_json_get_bool(d, "idempotent", &idem) < 0)
    snprintf(wrong, sizeof wrong, "idempotent must be a boolean");
  else if (hookd_json_get_int(d, "timeout_ms", &timeout) < 0 || timeout < 100 ||
           timeout > app->cfg->max_timeout_ms)
    snprintf(wrong, sizeof wrong, "timeout_ms must be an integer in [100, %d]",
             app->cfg->max_timeout_ms);
  else if (hookd_json_get_int(d, "max_in_flight", &mif) < 0 || mif < 1 || mif > 10000)
    snprintf(wrong, sizeof wrong, "max_in_flight must be an integer in [1, 10000]");
  if (wrong[0]) {
    hookd_req_error(r, 422, "invalid_field", "%s%s%s", pre, dot, wrong);
    return false;
  }
  /* how fast the handler takes forwards (a provider's burst is paced to it, none refused) */
  char rfield[48];
  snprintf(rfield, sizeof rfield, "%s%srate_limit", pre, dot);
  if (hookd_api_parse_rate(r, json_object_get(d, "rate_limit"), rfield, 1e6, &e->rate_limit))
    return false;
  hookd_url_info info;
  hookd_url_error uerr;
  if (hookd_destinations_check_shape(app->dest, url, &info, &uerr) != 0) {
    if (hookd_req_header(r, "Idempotency-Key")) {
      /* a create sent again with its key: its kept answer first (dest_checked) */
      if (!op->url_refused)
        snprintf(op->refusal, sizeof op->refusal, "%s%surl refused by rule %s: %s",
                 op->adding ? "" : where, op->adding ? "" : ".", uerr.rule, uerr.message);
      op->url_refused = true;
    } else {
      hookd_req_error(r, 422, "destination_refused", "%s%surl refused by rule %s: %s", pre, dot,
                      uerr.rule, uerr.message);
      return false;
    }
  }
  char id[HOOKD_ID_MAX], sec[HOOKD_SECRET_MAX];
  hookd_id_new("dst", now, id);
  if (hookd_secret_generate(sec) != 0) return false;
  e->id = strdup(id);
  e->tenant_id = strdup(op->src.tenant_id);
  e->source_id = strdup(op->src.id);
  e->url = strdup(url);
  e->description = strdup("inbound destination");
  e->enabled = true;
  e->idempotent = idem;
  e->timeout_ms = (int)timeout;
  e->max_in_flight = (int)mif;
  e->signing = strdup("hmac");
  e->policy = app->cfg->policy;
  e->policy.retry_4xx[0] = e->policy.retry_4xx[1] = 0; /* (--retry-statuses: endpoints') */
  /* a handler deduplicating on the Idempotency-Key answers 409 while a request of that key is
   * still being processed (draft-ietf-httpapi-idempotency-key-header) — often hookd's own retry
   * after a timeout — and 423/425 to come back later: retried, not dead-lettered, unless the
   * body's retry_statuses says otherwise */
  uint64_t busy[2];
  hookd_retry_statuses_parse("409,423,425", busy);
  e->policy.retry_4xx[0] |= busy[0];
  e->policy.retry_4xx[1] |= busy[1];
  e->created_ms = e->updated_ms = now;
  op->dest_secrets[i] = strdup(sec);
  e->secret = hookd_keyring_seal(&app->keyring, sec, id);
  OPENSSL_cleanse(sec, sizeof sec);
  /* custom headers for the handler's gateway, sealed as the secret is (endpoints' headers); a
   * destination added alone is the body itself */
  char hfield[48], *hdrs = NULL;
  snprintf(hfield, sizeof hfield, "%s%sheaders", op->adding ? "" : where, op->adding ? "" : ".");
  if (!hookd_api_parse_headers(r, json_object_get(d, "headers"), hfield, &hdrs)) return false;
  if (hdrs) e->headers = hookd_keyring_seal(&app->keyring, hdrs, id);
  bool hdrs_ok = !hdrs || e->headers;
  hookd_secret_free(hdrs);
  if (!hdrs_ok) { /* every false is answered */
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return false;
  }
  json_t *retry = json_object_get(d, "retry");
  if (retry) {
    char field[48];
    snprintf(field, sizeof field, "%s%sretry", pre, dot);
    hookd_api_retry given;
    if (hookd_api_parse_retry(r, retry, field, &given) != 0) return false;
    hookd_api_retry_apply(&given, &e->policy);
    const char *bad = hookd_retry_policy_check(&e->policy);
    if (bad) {
      hookd_req_error(r, 422, "invalid_field", "%s.%s is out of range", field, bad);
      return false;
    }
  }
  return e->id && e->url && e->secret && op->dest_secrets[i];
}

void hookd_api_source_create(hookd_req *r, hookd_app *app) {
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  src_op *op = new_op(r, app, run_create, reply_create);
  if (!op) {
    json_decref(body);
    return;
  }
  bool ok = true;
  static const char *const known[] = {"id",          "tenant",         "provider",     "secrets",
                                      "tolerance_s", "event_types",    "identity_paths",
                                      "business_key", "version",       "generic",
                                      "destinations", NULL};
  const char *tenant = NULL, *provider = NULL, *id = NULL;
  ok = hookd_api_known_members(r, body, NULL, known);
  hookd_provider prov;
  /* absent is missing_field, present and wrong invalid_field, as everywhere */
  static const char *const required[] = {"tenant", "provider", "secrets", "destinations", NULL};
  for (int i = 0; ok && required[i]; i++) {
    if (!json_object_get(body, required[i])) {
      hookd_req_error(r, 422, "missing_field", "%s is required", required[i]);
      ok = false;
    }
  }
  if (ok && (hookd_json_get_str(body, "tenant", &tenant) != 0 || !hookd_id_valid(tenant, 64))) {
    hookd_req_error(r, 422, "invalid_field", "tenant must be a tenant id");
    ok = false;
  }
  if (ok && !hookd_api_tenant_allowed(r, tenant)) ok = false;
  if (ok && (hookd_json_get_str(body, "provider", &provider) != 0 ||
             hookd_provider_parse(provider, &prov) != 0)) {
    hookd_req_error(r, 422, "invalid_field", PROVIDERS_ARE);
    ok = false;
  }
  if (ok && (hookd_json_get_str(body, "id", &id) < 0 || (id && !hookd_id_valid(id, 64)))) {
    hookd_req_error(r, 422, "invalid_field", "id must be 1-64 characters of [A-Za-z0-9_.:-]");
    ok = false;
  }
  int64_t now = hookd_now_ms();
  if (ok) {
    if (id) snprintf(op->id, sizeof op->id, "%s", id);
    else hookd_id_new("src", now, op->id);
    op->src.id = strdup(op->id);
    op->src.tenant_id = strdup(tenant);
    op->src.provider = strdup(hookd_provider_name(prov));
    op->src.tolerance_s = 300;
    op->src.created_ms = op->src.updated_ms = now;
    op->src.secrets = parse_secrets(r, app, op->src.provider, json_object_get(body, "secrets"),
                                    op->src.id, NULL, op->cred_unfit);
    ok = op->src.secrets != NULL;
  }
  if (ok) ok = parse_rules(r, body, op);
  const char *typed = typed_field(&op->src, P_TYPES | P_BKEY);
  if (ok && typed && !hookd_in_provider_has_type(prov)) {
    types_refused(r, op->src.provider, typed);
    ok = false;
  }
  /* prov is set only once the provider was read */
  const char *unread = ok ? body_field(prov, &op->src, P_IDENTITY | P_BKEY | P_VERSION) : NULL;
  if (unread) {
    body_refused(r, op->src.provider, unread);
    ok = false;
  }
  json_t *gen = json_object_get(body, "generic");
  if (ok && (prov == HOOKD_PROVIDER_GENERIC) != (gen != NULL)) {
    hookd_req_error(r, 422, "invalid_field",
                    "generic settings are required for provider generic, and only for it");
    ok = false;
  }
  static const char *const generic_members[] = {"header",    "prefix",  "algorithm",
                                                "encoding",  "template", "id_header",
                                                "timestamp_header", NULL};
  if (ok && json_is_object(gen) && !hookd_api_known_members(r, gen, "generic", generic_members))
    ok = false;
  if (ok && gen) {
    hookd_generic_hmac g;
    const char *bad = hookd_generic_parse(gen, &g);
    /* header names a request can carry (checked here, not when stored sources are loaded: one
     * made before this check keeps working as it did) */
    if (!bad && !hookd_in_header_name_valid(g.header))
      bad = "generic.header must be a header name (an HTTP token)";
    else if (!bad && g.id_header && *g.id_header && !hookd_in_header_name_valid(g.id_header))
      bad = "generic.id_header must be a header name (an HTTP token)";
    else if (!bad && g.timestamp_header && *g.timestamp_header &&
             !hookd_in_header_name_valid(g.timestamp_header))
      bad = "generic.timestamp_header must be a header name (an HTTP token)";
    if (!bad) bad = generic_sane(&g);
    int unfit = g.mode == HOOKD_GENERIC_HMAC ? -1 : op->cred_unfit[g.mode == HOOKD_GENERIC_BASIC];
    if (bad) {
      hookd_req_error(r, 422, "invalid_field", "%s", bad);
      ok = false;
    } else if (unfit >= 0) {
      credential_refused(r, unfit, g.mode);
      ok = false;
    } else {
      op->src.generic = json_dumps(gen, JSON_COMPACT);
    }
  }
  json_t *dests = json_object_get(body, "destinations");
  if (ok && (!json_is_array(dests) || json_array_size(dests) < 1 ||
             json_array_size(dests) > MAX_DESTS)) {
    hookd_req_error(r, 422, "invalid_field",
                    "destinations must be an array of 1 to %d {url, idempotent, timeout_ms, "
                    "max_in_flight, rate_limit, retry, headers}",
                    MAX_DESTS);
    ok = false;
  }
  for (size_t i = 0; ok && i < json_array_size(dests); i++) {
    char where[32];
    snprintf(where, sizeof where, "destinations[%zu]", i);
    op->n_dests = i + 1;
    ok = parse_destination(r, app, json_array_get(dests, i), i, op, now, where);
  }
  /* the same request, sent again with its key: the body (canonical JSON, keyed: it carries
   * secrets) */
  if (ok)
    ok = hookd_kept_prepare(r, app, &op->k, "source.create", NULL, NULL, body, true);
  json_decref(body);
  start_checks(op, ok);
}

/* ---------- read ---------- */

static int run_get(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  src_op *op = (src_op *)base;
  if (op->id[0]) {
    int rc = be->source_get(c, op->id, &op->src, &op->got_dests, &op->n_got);
    if (rc == 0 && op->scoped && !hookd_principal_has_tenant(&op->who, op->src.tenant_id)) {
      hookd_source_free(&op->src);
      hookd_endpoints_free(op->got_dests, op->n_got);
      op->got_dests = NULL;
      op->n_got = 0;
      rc = HOOKD_STORE_NOTFOUND;
    }
    return rc;
  }
  int rc = op->src.tenant_id ? hookd_api_tenant_known(base, c, be, op->src.tenant_id)
                             : HOOKD_STORE_OK; /* 404 "tenant" */
  /* the page: `limit` sources by id after `after`, one more telling whether there is a next
   * (read from the tenant's index: every source of the tenant, read for each page, before) */
  if (!rc) rc = hookd_api_after_known(base, c, be, HOOKD_MADE_SOURCE, op->src.tenant_id, op->after);
  if (!rc)
    rc = be->source_page(c, op->src.tenant_id, op->provider_only, op->after, op->limit + 1,
                         &op->list, &op->n_list);
  if (rc || !op->n_list) return rc;
  op->more = op->n_list > (size_t)op->limit;
  if (op->more) hookd_source_free(&op->list[--op->n_list]);
  /* each source with its destinations, as GET /v1/sources/{id} shows it (a tenant has few) */
  if (!(op->list_dests = calloc(op->n_list, sizeof *op->list_dests))) return HOOKD_STORE_ERR;
  for (size_t i = 0; i < op->n_list && !rc; i++) {
    hookd_source s;
    rc = be->source_get(c, op->list[i].id, &s, &op->list_dests[i].v, &op->list_dests[i].n);
    if (!rc) hookd_source_free(&s);
  }
  return rc;
}

static void reply_get(hookd_api_op *base, int rc) {
  src_op *op = (src_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, base->err[0] ? base->err : "source");
    return;
  }
  if (op->id[0]) {
    hookd_req_reply_json(base->req, 200,
                         source_json(base->app, &op->src, op->got_dests, op->n_got, NULL));
    return;
  }
  json_t *data = json_array();
  for (size_t i = 0; i < op->n_list; i++)
    json_array_append_new(data, source_json(base->app, &op->list[i], op->list_dests[i].v,
                                            op->list_dests[i].n, NULL));
  hookd_req_reply_json(base->req, 200,
                       hookd_api_page_body(data, op->more ? op->list[op->n_list - 1].id : NULL));
}

void hookd_api_source_get(hookd_req *r, hookd_app *app) {
  src_op *op = new_op(r, app, run_get, reply_get);
  if (!op) return;
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, false);
}

void hookd_api_source_list(hookd_req *r, hookd_app *app) {
  /* every tenant's without ?tenant= (a key of every tenant: "which source is /in/src_…?"), as
   * the inbox's list; a key scoped to tenants asks for one */
  const char *tenant = hookd_req_query(r, "tenant");
  const hookd_principal *p = hookd_api_principal(r);
  if (tenant && !hookd_id_valid(tenant, 64)) {
    hookd_req_field_error(r, 400, "invalid_parameter", "tenant", "tenant must be a tenant id");
    return;
  }
  if (p && p->tenants[0] && !tenant) {
    hookd_api_forbid(r, "a key scoped to tenants must ask for one (?tenant=)");
    return;
  }
  if (p && tenant && !hookd_api_tenant_allowed(r, tenant)) return;
  const char *provider = hookd_req_query(r, "provider");
  hookd_provider prov = HOOKD_PROVIDER_STANDARD;
  if (provider && hookd_provider_parse(provider, &prov) != 0) {
    hookd_req_field_error(r, 400, "invalid_parameter", "provider", PROVIDERS_ARE);
    return;
  }
  int limit;
  char after[HOOKD_ID_MAX + 64];
  if (hookd_api_page(r, NULL, &limit, after, sizeof after) != 0) return;
  src_op *op = new_op(r, app, run_get, reply_get);
  if (!op) return;
  op->limit = limit;
  op->provider_only = provider ? hookd_provider_name(prov) : NULL;
  snprintf(op->after, sizeof op->after, "%s", after);
  op->src.tenant_id = tenant ? strdup(tenant) : NULL;
  if (tenant && !op->src.tenant_id) {
    fail_op(op);
    hookd_req_error(r, 503, "unavailable", "out of memory");
    return;
  }
  hookd_api_submit(&op->base, false);
}

/* ---------- a destination added ---------- */

/* A source's destinations are its handlers: one more (a second application, one that is not
 * idempotent, the last one deleted and replaced) without a new provider-facing URL. */
/* Sent again with its Idempotency-Key: the destination the first one added, as it is now (its
 * secret read: audited). */
static int added_before(src_op *op, hookd_store_conn *c, const hookd_store_backend *be) {
  char made[HOOKD_ID_MAX + 64];
  if (!hookd_kept_id(&op->k, made, sizeof made)) return HOOKD_STORE_ERR;
  hookd_endpoint_free(&op->dests[0]); /* the one this request would have added */
  memset(&op->dests[0], 0, sizeof op->dests[0]);
  int rc = be->endpoint_get(c, made, &op->dests[0]);
  if (rc == HOOKD_STORE_NOTFOUND) {
    snprintf(op->base.err, sizeof op->base.err,
             "this Idempotency-Key's request added destination %s, deleted since", made);
    return HOOKD_STORE_STATE;
  }
  if (!rc)
    rc = hookd_api_audit(&op->base, c, be, "endpoint.secret.read", op->dests[0].id,
                         op->dests[0].tenant_id, "idempotent replay of its addition");
  return rc;
}

static int run_add_dest(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  src_op *op = (src_op *)base;
  int rc = hookd_kept_lookup(&op->k, base, c, be);
  if (rc == 0) return added_before(op, c, be);
  if (rc != HOOKD_STORE_NOTFOUND) return rc;
  if (op->url_refused) return HOOKD_STORE_STATE; /* never added: the URL's refusal answers */
  hookd_source cur;
  hookd_endpoint *have = NULL;
  size_t n_have = 0;
  rc = be->source_get(c, op->id, &cur, &have, &n_have);
  if (rc) return rc;
  hookd_endpoints_free(have, n_have);
  if (op->scoped && !hookd_principal_has_tenant(&op->who, cur.tenant_id)) {
    rc = HOOKD_STORE_NOTFOUND;
  } else if (n_have >= MAX_DESTS) {
    snprintf(base->err, sizeof base->err, "source %s has %d destinations, the most it may have",
             op->id, MAX_DESTS);
    rc = HOOKD_STORE_LIMIT;
  }
  hookd_endpoint *e = &op->dests[0];
  if (!rc) {
    free(e->tenant_id);
    free(op->src.tenant_id);
    e->tenant_id = strdup(cur.tenant_id);
    op->src.tenant_id = strdup(cur.tenant_id);
    rc = e->tenant_id && op->src.tenant_id
             ? be->endpoint_create(c, e, base->app->cfg->max_endpoints_per_tenant)
             : HOOKD_STORE_ERR;
  }
  hookd_source_free(&cur);
  if (!rc)
    rc = hookd_api_audit(base, c, be, "source.destination_add", op->id, op->src.tenant_id, e->id);
  return rc ? rc : hookd_kept_store(&op->k, c, be, 201, json_pack("{s:s}", "id", e->id));
}

static void reply_add_dest(hookd_api_op *base, int rc) {
  src_op *op = (src_op *)base;
  if (rc == HOOKD_STORE_STATE && op->url_refused && !op->k.replayed) {
    hookd_req_error(base->req, 422, "destination_refused", "%s", op->refusal);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, "source");
    return;
  }
  if (op->k.replayed) { /* the one added first, its secret as it is now */
    char *secret = hookd_keyring_open(&base->app->keyring, op->dests[0].secret, op->dests[0].id);
    if (!secret) {
      hookd_req_error(base->req, 500, "secret_unavailable",
                      "the stored secret cannot be opened with the configured master key");
      return;
    }
    hookd_req_add_header(base->req, "Idempotent-Replayed", "true");
    hookd_req_reply_json(base->req, 201, dest_json(base->app, &op->dests[0], secret));
    hookd_secret_free(secret);
    return;
  }
  hookd_dispatcher_endpoint_changed(base->app->disp, &op->dests[0]);
  HLOG(HOOKD_LOG_INFO, "source.destination_added", KV_S("source_id", op->id),
       KV_S("tenant_id", op->src.tenant_id), KV_S("endpoint_id", op->dests[0].id));
  hookd_req_reply_json(base->req, 201, dest_json(base->app, &op->dests[0], op->dest_secrets[0]));
}

/* The op of a request with a JSON body on /v1/sources/{id}…, its id taken from the path; NULL
 * once answered. */
static src_op *body_op(hookd_req *r, hookd_app *app, json_t **body,
                       int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                       void (*reply)(hookd_api_op *, int)) {
  if (!(*body = hookd_api_body_object(r, app))) return NULL;
  src_op *op = new_op(r, app, run, reply);
  if (!op) {
    json_decref(*body);
    return NULL;
  }
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  op->src.id = strdup(op->id);
  return op;
}

void hookd_api_source_add_destination(hookd_req *r, hookd_app *app) {
  json_t *body;
  src_op *op = body_op(r, app, &body, run_add_dest, reply_add_dest);
  if (!op) return;
  op->adding = true;
  op->n_dests = 1;
  op->src.tenant_id = strdup(""); /* the source's, read with it (run_add_dest) */
  bool ok = op->src.id && op->src.tenant_id;
  if (!ok) hookd_req_error(r, 503, "unavailable", "out of memory");
  else ok = parse_destination(r, app, body, 0, op, hookd_now_ms(), "destination");
  /* sent again with its key: the destination it added (keyed hash: the body may carry
   * credentials in its headers) */
  if (ok)
    ok = hookd_kept_prepare(r, app, &op->k, "source.destination_add", op->id, NULL, body, true);
  json_decref(body);
  start_checks(op, ok);
}

/* ---------- patch / delete ---------- */

static int run_patch(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  src_op *op = (src_op *)base;
  hookd_source cur;
  op->refused = -1;
  hookd_endpoints_free(op->got_dests, op->n_got); /* a second run (its batch redone) */
  op->got_dests = NULL;
  op->n_got = 0;
  /* its destinations too: the answer shows the source as GET does */
  int rc = be->source_get(c, op->id, &cur, &op->got_dests, &op->n_got);
  if (rc) return rc;
  if (op->scoped && !hookd_principal_has_tenant(&op->who, cur.tenant_id)) {
    hookd_source_free(&cur);
    return HOOKD_STORE_NOTFOUND;
  }
  /* new secrets must fit the stored provider, as on create: else every request fails */
  hookd_provider prov = HOOKD_PROVIDER_GENERIC; /* only a generic source has a credential rule */
  if ((op->patch & P_SECRETS) && hookd_provider_parse(cur.provider, &prov) == 0 &&
      op->unfit[prov] >= 0) {
    op->refused = op->unfit[prov];
    op->refused_for = prov;
    hookd_source_free(&cur);
    return HOOKD_STORE_STATE; /* nothing written */
  }
  if ((op->patch & P_SECRETS) && cur.generic) { /* and its generic credential's rule */
    json_t *gj = json_loads(cur.generic, 0, NULL);
    hookd_generic_hmac g;
    if (gj && !hookd_generic_parse(gj, &g) && g.mode != HOOKD_GENERIC_HMAC &&
        op->cred_unfit[g.mode == HOOKD_GENERIC_BASIC] >= 0) {
      op->refused = op->cred_unfit[g.mode == HOOKD_GENERIC_BASIC];
      op->cred_refused = true;
      op->refused_for = g.mode == HOOKD_GENERIC_BASIC ? HOOKD_PROVIDER__COUNT : prov;
    }
    json_decref(gj);
    if (op->cred_refused) {
      hookd_source_free(&cur);
      return HOOKD_STORE_STATE; /* nothing written */
    }
  }
  if (typed_field(&op->src, op->patch) && hookd_provider_parse(cur.provider, &prov) == 0 &&
      !hookd_in_provider_has_type(prov)) {
    op->types_refused = typed_field(&op->src, op->patch);
    op->refused_for = prov;
    hookd_source_free(&cur);
    return HOOKD_STORE_STATE; /* nothing written */
  }
  if (hookd_provider_parse(cur.provider, &prov) == 0 &&
      (op->body_refused = body_field(prov, &op->src, op->patch)) != NULL) {
    op->refused_for = prov;
    hookd_source_free(&cur);
    return HOOKD_STORE_STATE; /* nothing written */
  }
  /* keep what the PATCH does not name */
#define KEEP(bit, f)                                                                         \
  if (!(op->patch & (bit))) {                                                                 \
    free(op->src.f);                                                                          \
    op->src.f = cur.f;                                                                        \
    cur.f = NULL;                                                                             \
  }
  KEEP(P_SECRETS, secrets);
  KEEP(P_TYPES, event_types);
  KEEP(P_IDENTITY, identity_paths);
  KEEP(P_BKEY, business_paths);
  KEEP(P_BKEY, business_operation);
  KEEP(P_BKEY, business_types);
  KEEP(P_VERSION, version_object_path);
  KEEP(P_VERSION, version_path);
  KEEP(P_VERSION, version_header);
#undef KEEP
  /* a changed identity rule: the one it replaces is still looked up until the inbox's retention
   * has passed (docs/inbound.md "Changing the identity rule"); else a prior one goes on */
  int64_t now = hookd_now_ms();
  const char *was = cur.identity_paths, *is = op->src.identity_paths,
             *prior = cur.prior_identity_paths;
  bool changed = (op->patch & P_IDENTITY) && (!was != !is || (was && strcmp(was, is)));
  /* a second change while the first's prior rule is looked up would drop that one: the events
   * received under it, redelivered, taken as new and forwarded again under a new key (a review).
   * Refused, unless it goes back to that rule (both stay looked up) or says force */
  if (changed && cur.prior_identity_until_ms > now && !op->force &&
      (!prior != !is || (prior && strcmp(prior, is)))) {
    char until[HOOKD_RFC3339_MAX];
    hookd_fmt_rfc3339_ms(cur.prior_identity_until_ms, until);
    snprintf(base->err, sizeof base->err,
             "identity_paths was changed before: its prior rule is looked up until %s, and a "
             "second change would drop it (redeliveries of events received under it forwarded "
             "again): set prior_identity back, wait, or send \"force\": true",
             until);
    hookd_source_free(&cur);
    return HOOKD_STORE_CONFLICT; /* nothing written */
  }
  if (changed) {
    op->src.prior_identity_paths = cur.identity_paths;
    cur.identity_paths = NULL;
    op->src.prior_identity_until_ms = now + base->app->cfg->inbox_retention_s * 1000;
  } else if (cur.prior_identity_until_ms > now) {
    op->src.prior_identity_paths = cur.prior_identity_paths;
    cur.prior_identity_paths = NULL;
    op->src.prior_identity_until_ms = cur.prior_identity_until_ms;
  }
  if (!(op->patch & P_TOLERANCE)) op->src.tolerance_s = cur.tolerance_s;
  op->src.tenant_id = cur.tenant_id;
  op->src.provider = cur.provider;
  op->src.generic = cur.generic;
  op->src.created_ms = cur.created_ms;
  cur.tenant_id = cur.provider = cur.generic = NULL;
  /* past the one stored whatever this node's clock: every node's cache takes a source whose
   * updated_at differs from its copy's, and two changes through two nodes in one millisecond
   * (or a clock a little behind) left the second unseen — a node verifying with the secrets a
   * rotation removed (a review); writes are serialised, so this orders them */
  op->src.updated_ms = now > cur.updated_ms ? now : cur.updated_ms + 1;
  hookd_source_free(&cur);
  if ((rc = be->source_update(c, &op->src)) != 0) return rc;
  char detail[96];
  snprintf(detail, sizeof detail, "%s%s%s%s%s%s", op->patch & P_SECRETS ? "secrets " : "",
           op->patch & P_TOLERANCE ? "tolerance_s " : "", op->patch & P_TYPES ? "event_types " : "",
           op->patch & P_IDENTITY ? "identity_paths " : "",
           op->patch & P_BKEY ? "business_key " : "", op->patch & P_VERSION ? "version" : "");
  return hookd_api_audit(base, c, be, "source.update", op->id, op->src.tenant_id, detail);
}

static void reply_patch(hookd_api_op *base, int rc) {
  src_op *op = (src_op *)base;
  if (rc == HOOKD_STORE_STATE && op->cred_refused) {
    credential_refused(base->req, op->refused,
                       op->refused_for == HOOKD_PROVIDER__COUNT ? HOOKD_GENERIC_BASIC
                                                                : HOOKD_GENERIC_TOKEN);
    return;
  }
  if (rc == HOOKD_STORE_STATE && op->refused >= 0) {
    secret_refused(base->req, (size_t)op->refused, hookd_provider_name(op->refused_for));
    return;
  }
  if (rc == HOOKD_STORE_STATE && op->types_refused) {
    types_refused(base->req, hookd_provider_name(op->refused_for), op->types_refused);
    return;
  }
  if (rc == HOOKD_STORE_STATE && op->body_refused) {
    body_refused(base->req, hookd_provider_name(op->refused_for), op->body_refused);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, "source");
    return;
  }
  hookd_source_cache_put(base->app->sources, &op->src);
  hookd_req_reply_json(base->req, 200,
                       source_json(base->app, &op->src, op->got_dests, op->n_got, NULL));
}

void hookd_api_source_patch(hookd_req *r, hookd_app *app) {
  json_t *body;
  src_op *op = body_op(r, app, &body, run_patch, reply_patch);
  if (!op) return;
  bool ok = true;
  const char *k;
  json_t *v;
  json_object_foreach(body, k, v) {
    if (strcmp(k, "secrets") && strcmp(k, "tolerance_s") && strcmp(k, "event_types") &&
        strcmp(k, "identity_paths") && strcmp(k, "business_key") && strcmp(k, "version") &&
        strcmp(k, "force")) {
      /* a field of the create that a PATCH may not change: named as such, as an endpoint's */
      bool fixed = !strcmp(k, "id") || !strcmp(k, "tenant") || !strcmp(k, "provider") ||
                   !strcmp(k, "generic") || !strcmp(k, "destinations");
      if (fixed)
        hookd_req_error(r, 422, "immutable_field",
                        "%s cannot be changed%s", k,
                        !strcmp(k, "destinations")
                            ? ": add one with POST /v1/sources/{id}/destinations; a destination"
                              " is an endpoint: PATCH or DELETE it there"
                            : " (create another source)");
      else
        hookd_api_unknown_field(r, NULL, k, NULL);
      ok = false;
      break;
    }
  }
  op->refused = -1;
  if (ok && (v = json_object_get(body, "secrets"))) {
    /* the provider is read with the source: run_patch refuses secrets that do not fit it */
    op->src.secrets = parse_secrets(r, app, "", v, op->id, op->unfit, op->cred_unfit);
    ok = op->src.secrets != NULL;
    op->patch |= P_SECRETS;
  }
  if (ok) ok = parse_rules(r, body, op);
  json_t *force = json_object_get(body, "force");
  if (ok && force && !json_is_boolean(force)) {
    hookd_req_error(r, 422, "invalid_field", "force must be true or false");
    ok = false;
  }
  op->force = json_is_true(force);
  json_decref(body);
  if (!ok) {
    fail_op(op);
    return;
  }
  hookd_api_submit(&op->base, true);
}

static int run_delete(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  src_op *op = (src_op *)base;
  hookd_source_free(&op->src); /* a second run (its batch redone) starts afresh */
  hookd_endpoints_free(op->got_dests, op->n_got);
  op->got_dests = NULL;
  op->n_got = 0;
  int rc = be->source_get(c, op->id, &op->src, &op->got_dests, &op->n_got);
  if (rc) return rc;
  if (op->scoped && !hookd_principal_has_tenant(&op->who, op->src.tenant_id))
    return HOOKD_STORE_NOTFOUND;
  if ((rc = be->source_delete(c, op->id, hookd_now_ms(), &op->deleted)) != 0) return rc;
  char detail[96];
  snprintf(detail, sizeof detail, "cancelled_deliveries=%d held_deliveries=%d",
           op->deleted.cancelled, op->deleted.held);
  return hookd_api_audit(base, c, be, "source.delete", op->id, op->src.tenant_id, detail);
}

static void reply_delete(hookd_api_op *base, int rc) {
  src_op *op = (src_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "source");
    return;
  }
  hookd_source_cache_remove(base->app->sources, op->id);
  hookd_rejections_forget(base->app->rejections, op->id);
  for (size_t i = 0; i < op->n_got; i++) {
    op->got_dests[i].deleted_ms = hookd_now_ms();
    hookd_dispatcher_endpoint_changed(base->app->disp, &op->got_dests[i]);
  }
  /* as an endpoint's DELETE: what its destinations still had to send is cancelled */
  hookd_held_unknown(op->deleted.held, HOOKD_HELD_BY_DELETE);
  if (op->deleted.cancelled > 0) HOOKD_ADD(cancelled, (uint64_t)op->deleted.cancelled);
  hookd_api_reply_json_applied(base, 200,
                               json_pack("{s:s,s:b,s:i,s:i,s:b}", "id", op->id, "deleted", 1,
                                         "cancelled_deliveries", op->deleted.cancelled,
                                         "held_deliveries", op->deleted.held, "cancelling",
                                         op->deleted.more));
}

void hookd_api_source_delete(hookd_req *r, hookd_app *app) {
  char reason[256]; /* the body takes a reason for the audit (as a tenant's delete), nothing else */
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  src_op *op = new_op(r, app, run_delete, reply_delete);
  if (!op) return;
  if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
  snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
  hookd_api_submit(&op->base, true);
}

/* api_keys.c — API keys over the API (docs/api.md "API keys"), admin only:
 *   POST   /v1/keys {role, tenants?, name?, expires_in_s?}  → 201 with the token, shown once
 *   GET    /v1/keys                          → the keys, never a token
 *   DELETE /v1/keys/{id} {reason?}           → revoked
 *   POST   /v1/tenants/{t}/portal-access {role?, expires_in_s?, name?}
 *          → 201 a key of that tenant alone that expires, and the dashboard's link opening it
 * A key that expires makes no key (one it made would outlive it).
 * A key scoped to tenants manages only keys within its scope. A change is answered once this
 * node's key cache holds it: after the commit, the keys are read again on the store's reader
 * and the cache takes that read unless a later one is there already (hookd_auth_set_keys). */
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/shown_text.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"

typedef struct key_op {
  hookd_api_op base;
  hookd_principal who; /* copy: the scope checks run on the executor */
  bool scoped;
  hookd_api_key key;   /* create: the new key's row (its strings in the buffers below) */
  char id[HOOKD_ID_MAX + 64], role[16], tenants[HOOKD_SCOPE_MAX + 1], name[256];
  bool has_tenants;
  bool bad_tenant;     /* create: a tenant of its scope does not exist */
  char token[64];      /* create: the token, wiped once answered */
  bool portal;         /* create: answered as portal access (the dashboard's link) */
  int64_t revoked_ms;
  hookd_api_key *list; /* list, revoke */
  size_t n;
  int limit;           /* list: the page's size, after the key `after` ("": from the first) */
  char after[HOOKD_ID_MAX + 64];
} key_op;

static void key_cleanup(hookd_api_op *base) {
  key_op *op = (key_op *)base;
  OPENSSL_cleanse(op->token, sizeof op->token);
  if (op->list) hookd_api_keys_free(op->list, op->n);
  op->list = NULL;
}

static key_op *new_op(hookd_req *r, hookd_app *app,
                      int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                      void (*reply)(hookd_api_op *, int)) {
  key_op *op = hookd_api_op_new(sizeof *op, r, app, run, reply);
  if (!op) return NULL;
  op->base.cleanup = key_cleanup;
  const hookd_principal *p = hookd_api_principal(r);
  if (p) op->who = *p;
  op->scoped = p && p->tenants[0];
  return op;
}

/* Whether every tenant of `tenants` (NULL: every tenant) is in the caller's scope. */
static bool within(const key_op *op, const char *tenants) {
  if (!op->scoped) return true;
  if (!tenants || !*tenants) return false;
  const char *cur = tenants, *t;
  size_t len;
  while (hookd_scope_next(&cur, &t, &len)) {
    char id[HOOKD_SCOPE_MAX + 1];
    snprintf(id, sizeof id, "%.*s", (int)len, t);
    if (!hookd_principal_has_tenant(&op->who, id)) return false;
  }
  return true;
}

static json_t *key_json(const hookd_api_key *k) {
  /* a name or role that is not UTF-8 (written to the store by hand, or by a CLI before it
   * refused one) as a placeholder: a NULL here would drop the key from the list, hiding it */
  return json_pack("{s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:s,s:b}", "id", k->id, "role",
                   hookd_json_str_or_null(k->role ? k->role : ""),
                   "tenants", hookd_json_csv(k->tenants), "name",
                   hookd_json_str_or_null(k->name ? k->name : ""),
                   "created_at", hookd_json_time(k->created_ms), "expires_at",
                   hookd_json_time(k->expires_ms), "revoked_at", hookd_json_time(k->revoked_ms),
                   "state", hookd_auth_key_state(k, hookd_now_ms()), "configured", 0);
}

/* ---------- the reload after a change ---------- */

static int run_keys_reload(hookd_store_conn *c, const hookd_store_backend *be,
                           hookd_api_op *base) {
  if (base->keys) hookd_api_keys_free(base->keys, base->n_keys);
  base->keys = NULL;
  base->n_keys = 0;
  base->keys_gen = hookd_auth_begin_load(base->app->auth);
  atomic_fetch_add_explicit(&hookd_m.config_reads[0], 1, memory_order_relaxed);
  return be->api_key_list(c, hookd_now_ms() - HOOKD_AUTH_EXPIRED_KEPT_MS, &base->keys,
                          &base->n_keys);
}

/* (a reload that failed leaves the change to the periodic one, --reload-interval-ms: it is
 * committed) */
static void reply_keys_reload(hookd_api_op *base, int rc) {
  if (rc == 0) hookd_auth_set_keys(base->app->auth, base->keys, base->n_keys, base->keys_gen);
  else HLOG(HOOKD_LOG_WARN, "auth.reload_failed", KV_S("error", hookd_store_strerror(rc)));
  base->after_keys(base);
}

void hookd_api_keys_reload(hookd_api_op *base, void (*after)(hookd_api_op *)) {
  base->after_keys = after;
  hookd_api_chain(base, run_keys_reload, reply_keys_reload, HOOKD_API_READER);
}

/* A key's audit row: under its tenant for a key of one tenant (GET /v1/audit?tenant= finds the
 * keys made for it and revoked), under none for a key of several or every tenant (its detail
 * names them all: under one of them, that tenant's readers would learn of the others). */
static int audit_key(hookd_api_op *base, hookd_store_conn *c, const hookd_store_backend *be,
                     const char *action, const char *id, const char *tenants, const char *detail) {
  return hookd_api_audit(base, c, be, action, id, hookd_scope_single(tenants), detail);
}

/* ---------- create ---------- */

static int run_create(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  key_op *op = (key_op *)base;
  /* each tenant of its scope exists (a deleted one's is gone for good) */
  char missing[HOOKD_SCOPE_MAX + 1];
  int rc = hookd_scope_tenants_exist(c, be, op->has_tenants ? op->tenants : NULL, missing,
                                     sizeof missing);
  if (rc == HOOKD_STORE_NOTFOUND) {
    op->bad_tenant = true;
    snprintf(base->err, sizeof base->err, "tenants: no tenant %.64s", missing);
  }
  if (rc == 0) rc = be->api_key_create(c, &op->key);
  if (rc) return rc;
  char detail[HOOKD_KEY_DETAIL_MAX + 8];
  hookd_auth_key_detail(op->role, op->has_tenants ? op->tenants : NULL, op->key.expires_ms, detail,
                        sizeof detail);
  if (op->portal) strcat(detail, " portal"); /* (the 8 bytes above) */
  return audit_key(base, c, be, "key.create", op->id, op->has_tenants ? op->tenants : NULL, detail);
}

static void answer_create(hookd_api_op *base) {
  key_op *op = (key_op *)base;
  json_t *v = key_json(&op->key);
  json_object_set_new(v, "key", json_string(op->token));
  if (op->portal) { /* the dashboard's link: the key in its fragment, sent to no server */
    char path[256];
    snprintf(path, sizeof path, "/dashboard#key=%s&tenant=%s", op->token, op->tenants);
    json_t *url = json_null();
    if (base->app->cfg->public_url[0]) {
      char full[1024];
      snprintf(full, sizeof full, "%s%s", base->app->cfg->public_url, path);
      url = json_string(full);
    }
    json_object_set_new(v, "url", url);
    json_object_set_new(v, "path", json_string(path));
    json_object_set_new(v, "key_id", json_string(op->id));
    json_object_set_new(v, "tenant", json_string(op->tenants));
    OPENSSL_cleanse(path, sizeof path);
  }
  OPENSSL_cleanse(op->token, sizeof op->token);
  HLOG(HOOKD_LOG_INFO, "key.created", KV_S("key_id", op->id), KV_S("role", op->role),
       KV_S("actor", op->base.actor[0] ? op->base.actor : NULL));
  hookd_req_reply_json(op->base.req, 201, v);
}

static void reply_create(hookd_api_op *base, int rc) {
  if (rc && ((key_op *)base)->bad_tenant && ((key_op *)base)->portal) {
    hookd_req_error(base->req, 404, "not_found", "tenant not found");
    return;
  }
  if (rc && ((key_op *)base)->bad_tenant) {
    hookd_req_field_error(base->req, 422, "invalid_field", "tenants", "%s", base->err);
    return;
  }
  if (rc) {
    hookd_api_store_error(base, rc, "key");
    return;
  }
  hookd_api_keys_reload(base, answer_create);
}

/* body's tenants (an array of ids, or null/absent: every tenant) into op; false once answered */
static bool take_tenants(hookd_req *r, key_op *op, const json_t *v) {
  if (!v || json_is_null(v)) {
    if (op->scoped) {
      hookd_api_forbid(r, "a key scoped to tenants makes keys within its scope: name tenants");
      return false;
    }
    return true;
  }
  /* the scope's rules, as `hookd keys create --tenants` has them: a tenant named twice kept
   * once (a scope of one stays one) */
  hookd_scope_builder b = {0};
  size_t n = json_is_array(v) ? json_array_size(v) : 0;
  char why[160];
  bool ok = n >= 1;
  for (size_t i = 0; ok && i < n; i++) {
    const char *t = json_string_value(json_array_get(v, i));
    ok = t && hookd_scope_add(&b, t, strlen(t), why, sizeof why) == 0;
  }
  if (!ok || hookd_scope_check(b.csv, why, sizeof why) != 0) {
    hookd_req_error(r, 422, "invalid_field",
                    "tenants must be an array of 1 to %d tenant ids (at most %d bytes joined "
                    "with commas), or null for every tenant",
                    HOOKD_SCOPE_IDS_MAX, HOOKD_SCOPE_MAX);
    return false;
  }
  snprintf(op->tenants, sizeof op->tenants, "%s", b.csv);
  op->has_tenants = true;
  if (!within(op, op->tenants)) {
    hookd_api_forbid(r, "tenants must be within the scope of the key that makes it");
    return false;
  }
  return true;
}

/* A key that expires makes none: one it made would outlive it (a portal link's key would mint a
 * lasting one). False once answered. */
static bool may_make_keys(hookd_req *r) {
  const hookd_principal *p = hookd_api_principal(r);
  if (!p || !p->expires_ms) return true;
  hookd_api_forbid(r, "a key that expires cannot create keys (one it made would outlive it)");
  return false;
}

/* body's name (at most 200 bytes of shown text; absent: dflt) and expires_in_s (absent or null:
 * dflt_s — 0: the key never expires, which null then says; else in [60, max_s]); false once
 * answered */
static bool take_name_expiry(hookd_req *r, const json_t *body, const char *dflt,
                             int64_t dflt_s, int64_t max_s, const char **name, int64_t *secs) {
  *name = dflt;
  *secs = dflt_s;
  if (hookd_json_get_str(body, "name", name) < 0 || (*name && !hookd_shown_name_ok(*name))) {
    hookd_req_error(r, 422, "invalid_field",
                    "name must be a string of at most 200 bytes, without control characters or "
                    "bidirectional controls");
    return false;
  }
  if (!*name) *name = dflt;
  int rc = hookd_json_get_int(body, "expires_in_s", secs);
  if (rc == 1) *secs = dflt_s;
  if (rc < 0 || (rc == 0 && (*secs < 60 || *secs > max_s))) {
    hookd_req_field_error(r, 422, "invalid_field", "expires_in_s",
                          "expires_in_s must be an integer from 60 to %lld (seconds)%s",
                          (long long)max_s,
                          dflt_s ? "" : ", or null for a key that does not expire");
    return false;
  }
  return true;
}

/* The new key's token, id and row into op (its tenants taken already); false once answered. */
static bool make_key(hookd_req *r, key_op *op, hookd_role role, const char *name,
                     int64_t expires_in_s) {
  int64_t now = hookd_now_ms();
  if (hookd_auth_generate(op->token, op->key.hash) != 0 || hookd_id_new("key", now, op->id) != 0) {
    hookd_req_error(r, 503, "unavailable", "the random generator failed");
    return false;
  }
  snprintf(op->role, sizeof op->role, "%s", hookd_role_name(role));
  snprintf(op->name, sizeof op->name, "%s", name ? name : "");
  op->key.id = op->id;
  op->key.role = op->role;
  op->key.tenants = op->has_tenants ? op->tenants : NULL;
  op->key.name = op->name;
  op->key.created_ms = now;
  op->key.expires_ms = expires_in_s ? now + expires_in_s * 1000 : 0;
  return true;
}

/* make_key, then submitted — or op freed once answered */
static void submit_key(hookd_req *r, key_op *op, hookd_role role, const char *name,
                       int64_t expires_in_s) {
  if (make_key(r, op, role, name, expires_in_s)) {
    hookd_api_submit(&op->base, true);
    return;
  }
  key_cleanup(&op->base);
  free(op);
}

void hookd_api_key_create(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"role", "tenants", "name", "expires_in_s", NULL};
  if (!may_make_keys(r)) return;
  json_t *body = hookd_api_body_object(r, app);
  if (!body) return;
  key_op *op = NULL;
  const char *role = NULL, *name = NULL;
  int64_t secs;
  hookd_role parsed;
  if (!hookd_api_known_members(r, body, NULL, names)) goto done;
  if (!json_object_get(body, "role")) {
    hookd_req_error(r, 422, "missing_field",
                    "role is required: " HOOKD_ROLES_TEXT);
    goto done;
  }
  if (hookd_json_get_str(body, "role", &role) != 0 || hookd_role_parse(role, &parsed) != 0) {
    hookd_req_error(r, 422, "invalid_field", "role must be " HOOKD_ROLES_TEXT);
    goto done;
  }
  if (!take_name_expiry(r, body, NULL, 0, 365 * 86400LL, &name, &secs)) goto done;
  if (!(op = new_op(r, app, run_create, reply_create))) goto done;
  if (!take_tenants(r, op, json_object_get(body, "tenants"))) {
    key_cleanup(&op->base);
    free(op);
    goto done;
  }
  submit_key(r, op, parsed, name, secs);
done:
  json_decref(body);
}

void hookd_api_portal_access(hookd_req *r, hookd_app *app) {
  static const char *const names[] = {"role", "name", "expires_in_s", NULL};
  if (!may_make_keys(r)) return;
  json_t *body = NULL;
  size_t len;
  hookd_req_body(r, &len);
  if (len && !(body = hookd_api_body_object(r, app))) return; /* (no body: the defaults) */
  key_op *op = NULL;
  const char *role = NULL, *name = NULL;
  int64_t secs;
  hookd_role parsed;
  if (body && !hookd_api_known_members(r, body, NULL, names)) goto done;
  int rrc = body ? hookd_json_get_str(body, "role", &role) : 1;
  if (rrc == 1) role = "operator"; /* (absent or null: the default) */
  if (rrc < 0 || hookd_role_parse(role, &parsed) != 0 ||
      (parsed != HOOKD_ROLE_VIEWER && parsed != HOOKD_ROLE_OPERATOR &&
       parsed != HOOKD_ROLE_MANAGER)) {
    hookd_req_field_error(r, 422, "invalid_field", "role",
                          "role must be viewer, operator or manager (a portal's key reads, an "
                          "operator's replays, a manager's looks after the tenant's endpoints)");
    goto done;
  }
  json_t *none = body ? NULL : json_object(); /* (no body: every member absent) */
  if (!body && !none) {
    hookd_req_error(r, 503, "unavailable", "out of memory");
    goto done;
  }
  bool ok = take_name_expiry(r, body ? body : none, "portal", 3600, 7 * 86400LL, &name, &secs);
  json_decref(none);
  if (!ok) goto done;
  if (body && json_is_null(json_object_get(body, "expires_in_s"))) { /* (it always expires) */
    hookd_req_field_error(r, 422, "invalid_field", "expires_in_s",
                          "expires_in_s must be an integer from 60 to 604800 (seconds): a "
                          "portal's key expires");
    goto done;
  }
  if (!(op = new_op(r, app, run_create, reply_create))) goto done;
  snprintf(op->tenants, sizeof op->tenants, "%s", hookd_req_param(r, 0));
  op->has_tenants = true;
  op->portal = true;
  submit_key(r, op, parsed, name, secs);
done:
  json_decref(body);
}

/* ---------- list ---------- */

static int run_list(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  key_op *op = (key_op *)base;
  return be->api_key_list(c, 0, &op->list, &op->n);
}

static void reply_list(hookd_api_op *base, int rc) {
  key_op *op = (key_op *)base;
  if (rc) {
    hookd_api_store_error(base, rc, "keys");
    return;
  }
  json_t *data = json_array();
  int shown = 0;
  const char *last = NULL;
  bool more = false;
  /* the page goes on after the cursor's key: after its (created_at, id), the list's order, so a
   * key made meanwhile with an older time (another node's clock) is not taken for one shown —
   * and key_config (a node's --api-key, listed first) is before every stored key, whether this
   * node has one or not (the next page may be another node's) */
  const hookd_api_key *cursor = NULL;
  bool from_start = !op->after[0] || !strcmp(op->after, HOOKD_AUTH_CONFIG_ID);
  for (size_t i = 0; !from_start && !cursor && i < op->n; i++)
    if (within(op, op->list[i].tenants) && !strcmp(op->list[i].id, op->after))
      cursor = &op->list[i];
  if (!from_start && !cursor) { /* no such key in this list (or purged since: list again) */
    json_decref(data);
    hookd_req_field_error(base->req, 400, "invalid_parameter", "after",
                          "after must be a next_cursor of this list: the id of one of its keys");
    return;
  }
  /* the node's --api-key first (a key of every tenant's to see: it is one), as the store's are
   * shown — but for its token, which the configuration holds */
  const char *conf = hookd_auth_configured(base->app->auth);
  if (conf && !op->scoped && !op->after[0]) {
    json_array_append_new(data, json_pack("{s:s,s:s,s:n,s:s,s:n,s:n,s:n,s:s,s:b}", "id", conf,
                                          "role", "admin", "tenants", "name", "--api-key",
                                          "created_at", "expires_at", "revoked_at", "state",
                                          "active", "configured", 1));
    shown++;
    last = conf;
  }
  /* then the store's in their order (made, then id; portal links mint a key each, kept a week
   * past its expiry: before, one unbounded list) */
  for (size_t i = 0; i < op->n; i++) {
    const hookd_api_key *k = &op->list[i];
    if (!within(op, k->tenants)) continue;
    if (cursor && (k->created_ms < cursor->created_ms ||
                   (k->created_ms == cursor->created_ms && strcmp(k->id, cursor->id) <= 0)))
      continue;
    if (shown == op->limit) {
      more = true;
      break;
    }
    json_array_append_new(data, key_json(k));
    shown++;
    last = k->id;
  }
  hookd_req_reply_json(base->req, 200, hookd_api_page_body(data, more ? last : NULL));
}

void hookd_api_key_list(hookd_req *r, hookd_app *app) {
  int limit;
  char after[sizeof ((key_op *)0)->after];
  if (hookd_api_page(r, NULL, &limit, after, sizeof after) != 0) return;
  key_op *op = new_op(r, app, run_list, reply_list);
  if (!op) return;
  op->limit = limit;
  memcpy(op->after, after, sizeof after);
  hookd_api_submit(&op->base, false);
}

/* ---------- revoke ---------- */

static int run_revoke(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  key_op *op = (key_op *)base;
  int rc;
  const hookd_api_key *k = hookd_api_key_find_active(c, be, op->id, &op->list, &op->n, &rc);
  if (rc) return rc;
  /* not active, or outside the caller's scope: no such key, as far as the caller can tell */
  if (!k || !within(op, k->tenants)) return HOOKD_STORE_NOTFOUND;
  op->revoked_ms = hookd_now_ms();
  if ((rc = be->api_key_revoke(c, op->id, op->revoked_ms)) != 0) return rc;
  char detail[HOOKD_KEY_DETAIL_MAX];
  hookd_auth_key_detail(k->role, k->tenants, 0, detail, sizeof detail);
  return audit_key(base, c, be, "key.revoke", op->id, k->tenants, detail);
}

static void answer_revoke(hookd_api_op *base) {
  key_op *op = (key_op *)base;
  HLOG(HOOKD_LOG_INFO, "key.revoked", KV_S("key_id", op->id),
       KV_S("actor", op->base.actor[0] ? op->base.actor : NULL));
  hookd_req_reply_json(op->base.req, 200,
                       json_pack("{s:s,s:b,s:o}", "id", op->id, "revoked", 1, "revoked_at",
                                 hookd_json_time(op->revoked_ms)));
}

static void reply_revoke(hookd_api_op *base, int rc) {
  if (rc) {
    hookd_api_store_error(base, rc, "key");
    return;
  }
  hookd_api_keys_reload(base, answer_revoke);
}

void hookd_api_key_revoke(hookd_req *r, hookd_app *app) {
  char reason[256];
  if (!hookd_api_reason_only_body(r, app, reason)) return;
  const char *conf = hookd_auth_configured(app->auth);
  const hookd_principal *p = hookd_api_principal(r);
  if (conf && !strcmp(hookd_req_param(r, 0), conf) && !(p && p->tenants[0])) {
    hookd_req_error(r, 409, "conflict",
                    "%s is this node's --api-key (HOOKD_API_KEY), not a key of the store: "
                    "restart the node without it",
                    conf);
    return;
  }
  key_op *op = new_op(r, app, run_revoke, reply_revoke);
  if (op) {
    snprintf(op->id, sizeof op->id, "%s", hookd_req_param(r, 0));
    if (reason[0]) snprintf(op->base.reason, sizeof op->base.reason, "%s", reason);
    hookd_api_submit(&op->base, true);
  }
}

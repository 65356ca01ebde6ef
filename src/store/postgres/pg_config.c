/* pg_config.c — PostgreSQL backend: tenants, the event-type catalog, API keys, the audit log
 * and kept answers (the configuration tables, written rarely, read by the API). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_int.h"

/* ---------- tenants ---------- */

#define TENANT_COLS "id, name, created_at, updated_at, max_in_flight, rate_limit, weight, metadata"

static void read_tenant(const PGresult *r, int row, hookd_tenant *t) {
  memset(t, 0, sizeof *t);
  t->id = pg_str(r, row, 0);
  t->name = pg_str(r, row, 1);
  t->created_ms = pg_i64(r, row, 2);
  t->updated_ms = pg_i64(r, row, 3);
  t->max_in_flight = (int)pg_i64(r, row, 4);
  t->rate_limit = pg_f64(r, row, 5);
  t->weight = (int)pg_i64(r, row, 6);
  t->metadata = pg_str(r, row, 7);
}

static void bind_tenant(pg_params *p, const hookd_tenant *t) {
  pg_p_init(p);
  pg_p_text(p, t->id);
  pg_p_text(p, t->name ? t->name : "");
  pg_p_i64(p, t->created_ms);
  pg_p_i64(p, t->updated_ms ? t->updated_ms : t->created_ms);
  pg_p_i64(p, t->max_in_flight);
  pg_p_f64(p, t->rate_limit);
  pg_p_i64(p, t->weight > 0 ? t->weight : 1);
  pg_p_text(p, t->metadata);
}

int pg_tenant_update(hookd_store_conn *c, const hookd_tenant *t) {
  /* bind_tenant's values without created_at ($n are bound once each, in order) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, t->id);
  pg_p_text(&p, t->name ? t->name : "");
  pg_p_i64(&p, t->updated_ms ? t->updated_ms : t->created_ms);
  pg_p_i64(&p, t->max_in_flight);
  pg_p_f64(&p, t->rate_limit);
  pg_p_i64(&p, t->weight > 0 ? t->weight : 1);
  pg_p_text(&p, t->metadata);
  int64_t n = pg_x(c,
                   "UPDATE tenants SET name = $2, updated_at = $3, max_in_flight = $4,"
                   " rate_limit = $5, weight = $6, metadata = $7"
                   " WHERE id = $1 AND deleted_at IS NULL",
                   &p, "update tenant");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

static void rd_tenant(const PGresult *r, int row, void *rec) { read_tenant(r, row, rec); }

int pg_tenant_list(hookd_store_conn *c, hookd_tenant **out, size_t *n) {
  PGresult *r = pg_q(c,
                     "SELECT " TENANT_COLS " FROM tenants WHERE deleted_at IS NULL"
                     " ORDER BY id",
                     NULL, "list tenants");
  return pg_read_rows(c, r, sizeof **out, rd_tenant, (void **)out, n, "list tenants");
}

int pg_tenant_page(hookd_store_conn *c, const char *after_id, int limit, hookd_tenant **out,
                   size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, after_id ? after_id : "");
  pg_p_i64(&p, limit);
  PGresult *r = pg_q(c,
                     "SELECT " TENANT_COLS " FROM tenants WHERE id > $1"
                     " AND deleted_at IS NULL ORDER BY id LIMIT $2",
                     &p, "list tenants");
  return pg_read_rows(c, r, sizeof **out, rd_tenant, (void **)out, n, "list tenants");
}

int pg_tenant_create(hookd_store_conn *c, const hookd_tenant *t) {
  pg_params p;
  bind_tenant(&p, t);
  int64_t n = pg_x(c,
                   "INSERT INTO tenants(" TENANT_COLS ") VALUES ($1, $2, $3, $4, $5, $6,"
                   " $7, $8) ON CONFLICT(id) DO NOTHING",
                   &p, "insert tenant");
  if (n < 0) return HOOKD_STORE_ERR;
  if (n == 1) return HOOKD_STORE_OK;
  hookd_tenant had; /* taken: by a live tenant, or by one deleted (ids are never reused) */
  if (pg_tenant_get(c, t->id, &had) == HOOKD_STORE_OK) hookd_tenant_free(&had);
  else snprintf(c->err, sizeof c->err, "tenant %.64s was deleted: a tenant's id is never reused",
                t->id);
  return HOOKD_STORE_EXISTS;
}

int pg_tenant_get(hookd_store_conn *c, const char *id, hookd_tenant *out) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT " TENANT_COLS " FROM tenants WHERE id = $1 AND deleted_at IS NULL",
                     &p, "get tenant");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  read_tenant(r, 0, out);
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* HOOKD_STORE_NOTFOUND unless the tenant is there and not deleted (the foreign key only
 * says it was made once). */
int pg_tenant_live(hookd_store_conn *c, const char *id) {
  hookd_tenant t;
  int rc = pg_tenant_get(c, id, &t);
  if (rc == HOOKD_STORE_OK) hookd_tenant_free(&t);
  if (rc == HOOKD_STORE_NOTFOUND) snprintf(c->err, sizeof c->err, "tenant not found");
  return rc;
}

/* ids of the rows of r (column 0), and whether column 1 is set on each */
static int read_ids(hookd_store_conn *c, const PGresult *r, char ***ids, bool **flag,
                    size_t *n) {
  int rows = PQntuples(r);
  if (rows == 0) return HOOKD_STORE_OK;
  char **nv = realloc(*ids, (size_t)rows * sizeof *nv);
  if (nv) *ids = nv;
  bool *nf = nv ? realloc(*flag, (size_t)rows * sizeof *nf) : NULL;
  if (nf) *flag = nf;
  if (!nv || !nf) return pg_fail(c, "read ids");
  for (int i = 0; i < rows; i++) {
    (*flag)[*n] = pg_i64(r, i, 1) != 0;
    if (!((*ids)[*n] = pg_str(r, i, 0))) return pg_fail(c, "read ids");
    (*n)++;
  }
  return HOOKD_STORE_OK;
}

static void add_counts(hookd_delete_counts *to, const hookd_delete_counts *d) {
  to->cancelled += d->cancelled;
  to->held += d->held;
  to->more |= d->more;
}

int pg_tenant_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_tenant_delete_res *out) {
  hookd_tenant_delete_res_free(out); /* a redone batch runs the op again */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  int64_t changed = pg_x(c,
                         "UPDATE tenants SET deleted_at = $2, updated_at = $2, name = '',"
                         " metadata = NULL" /* (its id and times alone stay) */
                         " WHERE id = $1 AND deleted_at IS NULL",
                         &p, "delete tenant");
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed != 1) return HOOKD_STORE_NOTFOUND;
  /* every live endpoint (a source's destinations too: the dispatcher forgets each), then the
   * sources (their destinations with them), then the endpoints left */
  bool *outbound = NULL, *unused = NULL;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT id, (source_id IS NULL)::int FROM endpoints WHERE tenant_id = $1"
                     " AND deleted_at IS NULL ORDER BY id",
                     &p, "read ids");
  int rc = r ? read_ids(c, r, &out->endpoint_ids, &outbound, &out->n_endpoints)
             : HOOKD_STORE_ERR;
  PQclear(r);
  if (!rc) {
    pg_p_init(&p);
    pg_p_text(&p, id);
    r = pg_q(c,
             "SELECT id, 0 FROM sources WHERE tenant_id = $1"
             " AND deleted_at IS NULL ORDER BY id",
             &p, "read ids");
    rc = r ? read_ids(c, r, &out->source_ids, &unused, &out->n_sources) : HOOKD_STORE_ERR;
    PQclear(r);
  }
  /* one budget of cancels for them all: the rest is the delete walk's */
  hookd_delete_counts d;
  int budget = HOOKD_DELETE_STEP;
  for (size_t i = 0; !rc && i < out->n_sources; i++)
    if (!(rc = pg_source_delete_within(c, out->source_ids[i], now_ms, &budget, &d)))
      add_counts(&out->counts, &d);
  for (size_t i = 0; !rc && i < out->n_endpoints; i++) {
    if (!outbound[i]) continue;
    if (!(rc = pg_endpoint_delete_within(c, out->endpoint_ids[i], now_ms, &budget, &d))) {
      add_counts(&out->counts, &d);
      out->endpoints_deleted++;
    }
  }
  free(outbound);
  free(unused);
  if (rc) return rc;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  int64_t cancelled =
      pg_x(c,
           "UPDATE replay_jobs SET state = 'cancelled', updated_at = $2, finished_at = $2"
           " WHERE tenant_id = $1 AND state IN ('building', 'preview', 'running', 'paused')",
           &p, "cancel replay jobs");
  if (cancelled < 0) return HOOKD_STORE_ERR;
  out->replays_cancelled = (int)cancelled;
  /* the keys that reached it and no tenant left (a customer's own): they would open nothing but
   * history, and could mint more keys of it (keys are few: the whole list is read) */
  hookd_api_key *keys = NULL;
  size_t nk = 0;
  if ((rc = pg_api_key_list(c, 0, &keys, &nk)) != 0) return rc;
  size_t idlen = strlen(id);
  for (size_t i = 0; !rc && i < nk; i++) {
    const char *scope = keys[i].tenants;
    if (keys[i].revoked_ms || !scope) continue; /* (NULL: every tenant, still there) */
    bool named = false, live = false;
    for (const char *s = scope; !rc && *s && !live;) {
      size_t len = strcspn(s, ",");
      char one[72];
      snprintf(one, sizeof one, "%.*s", (int)(len < 71 ? len : 71), s);
      named |= len == idlen && !memcmp(s, id, idlen);
      int t = pg_tenant_live(c, one);
      live = t == HOOKD_STORE_OK;
      if (t != HOOKD_STORE_OK && t != HOOKD_STORE_NOTFOUND) rc = t;
      s += len + (s[len] == ',');
    }
    if (rc || !named || live) continue;
    rc = pg_api_key_revoke(c, keys[i].id, now_ms);
    if (!rc) out->keys_revoked++;
  }
  hookd_api_keys_free(keys, nk);
  return rc;
}

/* ---------- the event-type catalog ---------- */

static void rd_event_type(const PGresult *r, int row, void *rec) {
  hookd_event_type *t = rec;
  t->name = pg_str(r, row, 0);
  t->description = pg_str(r, row, 1);
  t->created_ms = pg_i64(r, row, 2);
  t->updated_ms = pg_i64(r, row, 3);
  t->archived_ms = pg_i64(r, row, 4);
  t->schemas = pg_str(r, row, 5);
}

int pg_event_type_create(hookd_store_conn *c, const hookd_event_type *t) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, t->name);
  pg_p_text(&p, t->description ? t->description : "");
  pg_p_i64(&p, t->created_ms);
  pg_p_text(&p, t->schemas && t->schemas[0] ? t->schemas : NULL);
  int64_t n = pg_x(c,
                   "INSERT INTO event_types(name, description, created_at, updated_at, schemas)"
                   " VALUES ($1, $2, $3, $3, $4) ON CONFLICT(name) DO NOTHING",
                   &p, "insert event type");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? HOOKD_STORE_OK : HOOKD_STORE_EXISTS;
}

int pg_event_type_list(hookd_store_conn *c, bool archived_too, bool with_schemas,
                       const char *after, int limit, hookd_event_type **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_bool(&p, archived_too);
  pg_p_bool(&p, with_schemas);
  pg_p_text(&p, after ? after : "");
  pg_p_i64(&p, limit);
  PGresult *r = pg_q(c,
                     "SELECT name, description, created_at, updated_at, archived_at,"
                     " CASE WHEN $2::bigint <> 0 THEN schemas END"
                     " FROM event_types WHERE name > $3 AND ($1::bigint <> 0 OR archived_at IS"
                     " NULL) ORDER BY name LIMIT CASE WHEN $4::bigint > 0 THEN $4::bigint END",
                     &p, "list event types");
  return pg_read_rows(c, r, sizeof **out, rd_event_type, (void **)out, n, "list event types");
}

int pg_event_type_get(hookd_store_conn *c, const char *name, hookd_event_type *out) {
  memset(out, 0, sizeof *out);
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, name);
  PGresult *r = pg_q(c,
                     "SELECT name, description, created_at, updated_at, archived_at, schemas"
                     " FROM event_types WHERE name = $1",
                     &p, "read event type");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) > 0) rd_event_type(r, 0, out);
  PQclear(r);
  return out->name ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int pg_event_type_update(hookd_store_conn *c, const char *name, const char *description,
                         const char *schemas, int archived, int64_t now_ms,
                         hookd_event_type *out, int *changed) {
  memset(out, 0, sizeof *out);
  *changed = 0;
  /* what it is now: a write that changes nothing is none (no new updated_at, no audit) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, name);
  PGresult *r = pg_q(c,
                     "SELECT description, (archived_at IS NOT NULL)::int,"
                     " COALESCE(schemas, '') FROM event_types WHERE name = $1",
                     &p, "read event type");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  char *desc = pg_str(r, 0, 0);
  bool was = pg_i64(r, 0, 1) != 0;
  char *had = pg_str(r, 0, 2);
  PQclear(r);
  bool new_desc = description && (!desc || strcmp(desc, description) != 0);
  bool new_schemas = schemas && (!had || strcmp(had, schemas) != 0);
  free(desc);
  free(had);
  bool flips = archived >= 0 && (archived == 1) != was;
  *changed = flips && archived == 1 ? 1 : (flips || new_desc || new_schemas) ? 2 : 0;
  pg_p_init(&p);
  pg_p_text(&p, name);
  pg_p_text(&p, description);
  pg_p_i64(&p, archived);
  pg_p_i64(&p, now_ms);
  pg_p_bool(&p, *changed != 0);
  pg_p_text(&p, schemas);
  r = pg_q(c,
           "UPDATE event_types SET description = COALESCE($2::text, description),"
           " archived_at = CASE $3::bigint WHEN 1 THEN COALESCE(archived_at, $4::bigint)"
           " WHEN 0 THEN NULL ELSE archived_at END,"
           " updated_at = CASE WHEN $5::bigint <> 0 THEN $4::bigint ELSE updated_at END,"
           " schemas = CASE WHEN $6::text IS NULL THEN schemas ELSE NULLIF($6::text, '') END"
           " WHERE name = $1"
           " RETURNING name, description, created_at, updated_at, archived_at, schemas",
           &p, "update event type");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) > 0) rd_event_type(r, 0, out);
  PQclear(r);
  return out->name ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int pg_event_types_check(hookd_store_conn *c, const char *patterns, int *bad) {
  *bad = -1;
  if (!patterns) return HOOKD_STORE_OK; /* every type: nothing to name */
  hookd_event_type *v = NULL;
  size_t n = 0;
  int rc = pg_event_type_list(c, false, false, NULL, 0, &v, &n);
  if (rc || n == 0) { /* (no catalog: any pattern) */
    hookd_event_types_free(v, n);
    return rc;
  }
  int i = 0;
  for (const char *p = patterns; *p && *bad < 0; i++) {
    const char *e = strchr(p, ',');
    char one[260];
    snprintf(one, sizeof one, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
    bool found = false;
    for (size_t k = 0; k < n && !found; k++) found = hookd_filter_match(one, v[k].name);
    if (!found) *bad = i;
    if (!e) break;
    p = e + 1;
  }
  hookd_event_types_free(v, n);
  return *bad < 0 ? HOOKD_STORE_OK : HOOKD_STORE_STATE;
}

/* ---------- API keys ---------- */

int pg_api_key_create(hookd_store_conn *c, const hookd_api_key *k) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, k->id);
  pg_p_blob(&p, k->hash, 32);
  pg_p_text(&p, k->role);
  pg_p_text(&p, k->tenants);
  pg_p_text(&p, k->name ? k->name : "");
  pg_p_i64(&p, k->created_ms);
  pg_p_i64(&p, k->expires_ms);
  /* an id or a hash taken is an answer, not a failure (which would abort the transaction):
   * no conflict target, so that either unique key's conflict inserts nothing */
  int64_t n = pg_x(c,
                   "INSERT INTO api_keys(id, hash, role, tenants, name, created_at, expires_at)"
                   " VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7::bigint, 0))"
                   " ON CONFLICT DO NOTHING",
                   &p, "insert api key");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? HOOKD_STORE_OK : HOOKD_STORE_EXISTS;
}

static void rd_api_key(const PGresult *r, int row, void *rec) {
  hookd_api_key *k = rec;
  k->id = pg_str(r, row, 0);
  size_t len = 0;
  unsigned char *hash = pg_blob(r, row, 1, &len);
  if (hash && len == 32) memcpy(k->hash, hash, 32);
  free(hash);
  k->role = pg_str(r, row, 2);
  k->tenants = pg_str(r, row, 3);
  k->name = pg_str(r, row, 4);
  k->created_ms = pg_i64(r, row, 5);
  k->revoked_ms = pg_i64(r, row, 6);
  k->expires_ms = pg_i64(r, row, 7);
}

int pg_api_key_list(hookd_store_conn *c, int64_t live_at_ms, hookd_api_key **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, live_at_ms);
  PGresult *r = pg_q(c,
                     "SELECT id, hash, role, tenants, name, created_at, revoked_at, expires_at"
                     " FROM api_keys WHERE $1::bigint = 0 OR (revoked_at IS NULL AND"
                     " (expires_at IS NULL OR expires_at > $1::bigint)) ORDER BY created_at, id",
                     &p, "list api keys");
  return pg_read_rows(c, r, sizeof **out, rd_api_key, (void **)out, n, "list api keys");
}

int pg_api_key_revoke(hookd_store_conn *c, const char *id, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  int64_t n = pg_x(c,
                   "UPDATE api_keys SET revoked_at = $2 WHERE id = $1"
                   " AND revoked_at IS NULL",
                   &p, "revoke api key");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

/* ---------- answers kept under an Idempotency-Key ---------- */

int pg_answer_get(hookd_store_conn *c, const char *scope, const char *key, char **hash,
                  int *status, char **answer) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, scope);
  pg_p_text(&p, key);
  PGresult *r = pg_q(c,
                     "SELECT request_hash, status, answer FROM api_answers"
                     " WHERE scope = $1 AND key = $2",
                     &p, "get kept answer");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  *hash = pg_str(r, 0, 0);
  *status = (int)pg_i64(r, 0, 1);
  *answer = pg_str(r, 0, 2);
  PQclear(r);
  if (!*hash || !*answer) {
    free(*hash);
    free(*answer);
    *hash = *answer = NULL;
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

/* A retention step's delete ($1 before, $2 limit): *purged rows, *more when it was full. */
static int purge_step(hookd_store_conn *c, const char *sql, int64_t before_ms, int limit,
                      int *purged, bool *more, const char *what) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_ms);
  pg_p_i64(&p, limit);
  long n = pg_x(c, sql, &p, what);
  if (n < 0) return HOOKD_STORE_ERR;
  *purged = (int)n;
  *more = n >= limit;
  return HOOKD_STORE_OK;
}

int pg_answer_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                    bool *more) {
  /* (on the index by age) */
  return purge_step(c,
                    "DELETE FROM api_answers WHERE (scope, key) IN (SELECT scope, key"
                    " FROM api_answers WHERE created_at < $1 ORDER BY created_at LIMIT $2)",
                    before_ms, limit, purged, more, "drop kept answers");
}

int pg_api_key_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                     bool *more) {
  /* (on the index of the keys that expire) */
  return purge_step(c,
                    "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys"
                    " WHERE expires_at < $1 ORDER BY expires_at LIMIT $2)",
                    before_ms, limit, purged, more, "delete expired keys");
}

int pg_answer_put(hookd_store_conn *c, const char *scope, const char *key, const char *hash,
                  int status, const char *answer, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, scope);
  pg_p_text(&p, key);
  pg_p_text(&p, hash);
  pg_p_i64(&p, status);
  pg_p_text(&p, answer);
  pg_p_i64(&p, now_ms);
  /* (SQLite's INSERT OR REPLACE: the row under the key is replaced whatever its age) */
  return pg_x(c,
              "INSERT INTO api_answers(scope, key, request_hash, status, answer,"
              " created_at) VALUES ($1, $2, $3, $4, $5, $6)"
              " ON CONFLICT (scope, key) DO UPDATE SET request_hash = EXCLUDED.request_hash,"
              " status = EXCLUDED.status, answer = EXCLUDED.answer,"
              " created_at = EXCLUDED.created_at",
              &p, "keep answer") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* ---------- audit log ---------- */

int pg_audit_append(hookd_store_conn *c, const hookd_audit *a) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, a->at_ms);
  pg_p_text(&p, a->actor ? a->actor : "system");
  pg_p_text(&p, a->action);
  pg_p_text(&p, a->target);
  pg_p_text(&p, a->tenant_id);
  pg_p_text(&p, a->reason);
  pg_p_text(&p, a->detail);
  /* (seq: the identity's default) */
  return pg_x(c,
              "INSERT INTO audit_log(at, actor, action, target, tenant_id, reason,"
              " detail) VALUES ($1, $2, $3, $4, $5, $6, $7)",
              &p, "append audit") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

static void rd_audit(const PGresult *r, int row, void *rec) {
  hookd_audit *a = rec;
  a->seq = pg_i64(r, row, 0);
  a->at_ms = pg_i64(r, row, 1);
  a->actor = pg_str(r, row, 2);
  a->action = pg_str(r, row, 3);
  a->target = pg_str(r, row, 4);
  a->tenant_id = pg_str(r, row, 5);
  a->reason = pg_str(r, row, 6);
  a->detail = pg_str(r, row, 7);
}

int pg_audit_list(hookd_store_conn *c, const char *tenant_id, int64_t before_seq, int limit,
                  hookd_audit **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_seq > 0 ? before_seq : INT64_MAX);
  pg_p_i64(&p, limit);
  if (tenant_id) pg_p_text(&p, tenant_id);
  /* one statement per shape, each a range of its index (a catch-all "$1 IS NULL OR …" is no
   * index condition once the plan is generic) */
#define AUDIT_LIST(where)                                                                     \
  "SELECT seq, at, actor, action, target, tenant_id, reason, detail FROM audit_log WHERE " where \
  " seq < $1::bigint ORDER BY seq DESC LIMIT $2::bigint"
  PGresult *r = pg_q(c, tenant_id ? AUDIT_LIST("tenant_id = $3::text AND") : AUDIT_LIST(""), &p,
                     "list audit");
#undef AUDIT_LIST
  return pg_read_rows(c, r, sizeof **out, rd_audit, (void **)out, n, "list audit");
}

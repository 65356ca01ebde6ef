/* sqlite_config.c — SQLite backend: tenants, endpoints, retry-policy versions and API keys
 * (the configuration tables, written rarely, read by the API and the dispatcher). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite_int.h"

/* ---------- tenants ---------- */

#define TENANT_COLS "id, name, created_at, updated_at, max_in_flight, rate_limit, weight, metadata"

static void read_tenant(sqlite3_stmt *st, hookd_tenant *t) {
  memset(t, 0, sizeof *t);
  t->id = sq_col_str(st, 0);
  t->name = sq_col_str(st, 1);
  t->created_ms = sq_col_i64(st, 2);
  t->updated_ms = sq_col_i64(st, 3);
  t->max_in_flight = (int)sq_col_i64(st, 4);
  t->rate_limit = sqlite3_column_double(st, 5);
  t->weight = (int)sq_col_i64(st, 6);
  t->metadata = sq_col_str(st, 7);
}

static void bind_tenant(sqlite3_stmt *st, const hookd_tenant *t) {
  sq_bind_text(st, 1, t->id);
  sq_bind_text(st, 2, t->name ? t->name : "");
  sq_bind_i64(st, 3, t->created_ms);
  sq_bind_i64(st, 4, t->updated_ms ? t->updated_ms : t->created_ms);
  sq_bind_i64(st, 5, t->max_in_flight);
  sqlite3_bind_double(st, 6, t->rate_limit);
  sq_bind_i64(st, 7, t->weight > 0 ? t->weight : 1);
  sq_bind_text(st, 8, t->metadata);
}

int sq_tenant_update(hookd_store_conn *c, const hookd_tenant *t) {
  sqlite3_stmt *st = sq_stmt(c, SQ_TENANT_UPDATE,
                             "UPDATE tenants SET name = ?2, updated_at = ?4, max_in_flight = ?5,"
                             " rate_limit = ?6, weight = ?7, metadata = ?8"
                             " WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  bind_tenant(st, t);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "update tenant");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

static void rd_tenant(sqlite3_stmt *st, void *rec) { read_tenant(st, rec); }
static void free_tenants(void *v, size_t n) { hookd_tenants_free(v, n); }

int sq_tenant_list(hookd_store_conn *c, hookd_tenant **out, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_TENANT_LIST,
                             "SELECT " TENANT_COLS " FROM tenants WHERE deleted_at IS NULL"
                             " ORDER BY id");
  if (!st) return HOOKD_STORE_ERR;
  return sq_read_rows(c, st, sizeof **out, rd_tenant, free_tenants, (void **)out, n,
                      "list tenants");
}

int sq_tenant_page(hookd_store_conn *c, const char *after_id, int limit, hookd_tenant **out,
                   size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_TENANT_PAGE,
                             "SELECT " TENANT_COLS " FROM tenants WHERE id > ?1"
                             " AND deleted_at IS NULL ORDER BY id LIMIT ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, after_id ? after_id : "");
  sq_bind_i64(st, 2, limit);
  return sq_read_rows(c, st, sizeof **out, rd_tenant, free_tenants, (void **)out, n,
                      "list tenants");
}

int sq_tenant_create(hookd_store_conn *c, const hookd_tenant *t) {
  sqlite3_stmt *st = sq_stmt(c, SQ_TENANT_INSERT,
                             "INSERT INTO tenants(" TENANT_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
                             " ?7, ?8) ON CONFLICT(id) DO NOTHING");
  if (!st) return HOOKD_STORE_ERR;
  bind_tenant(st, t);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert tenant");
  if (sqlite3_changes(c->db) == 1) return HOOKD_STORE_OK;
  hookd_tenant had; /* taken: by a live tenant, or by one deleted (ids are never reused) */
  if (sq_tenant_get(c, t->id, &had) == HOOKD_STORE_OK) hookd_tenant_free(&had);
  else snprintf(c->err, sizeof c->err, "tenant %.64s was deleted: a tenant's id is never reused",
                t->id);
  return HOOKD_STORE_EXISTS;
}

int sq_tenant_get(hookd_store_conn *c, const char *id, hookd_tenant *out) {
  sqlite3_stmt *st =
      sq_stmt(c, SQ_TENANT_GET,
              "SELECT " TENANT_COLS " FROM tenants WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get tenant");
  read_tenant(st, out);
  return HOOKD_STORE_OK;
}

/* ids of rows one statement reads (column 0), and whether column 1 is set on each */
static int read_ids(hookd_store_conn *c, sqlite3_stmt *st, char ***ids, bool **flag, size_t *n) {
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      cap = cap ? cap * 2 : 16;
      char **nv = realloc(*ids, cap * sizeof *nv);
      bool *nf = nv ? realloc(*flag, cap * sizeof *nf) : NULL;
      if (nv) *ids = nv;
      if (nf) *flag = nf;
      if (!nv || !nf) break;
    }
    (*flag)[*n] = sqlite3_column_int(st, 1) != 0;
    if (!((*ids)[*n] = sq_col_str(st, 0))) break;
    (*n)++;
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "read ids");
}

static void add_counts(hookd_delete_counts *to, const hookd_delete_counts *d) {
  to->cancelled += d->cancelled;
  to->held += d->held;
  to->more |= d->more;
}

int sq_tenant_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_tenant_delete_res *out) {
  hookd_tenant_delete_res_free(out); /* a redone batch runs the op again */
  sqlite3_stmt *st = sq_stmt(c, SQ_TENANT_DELETE,
                             "UPDATE tenants SET deleted_at = ?2, updated_at = ?2, name = '',"
                             " metadata = NULL" /* (its id and times alone stay) */
                             " WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "delete tenant");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_NOTFOUND;
  c->erased = true; /* its commit has the WAL file emptied (its name, its metadata) */
  /* every live endpoint (a source's destinations too: the dispatcher forgets each), then the
   * sources (their destinations with them), then the endpoints left */
  bool *outbound = NULL, *unused = NULL;
  st = sq_stmt(c, SQ_TENANT_ENDPOINTS,
               "SELECT id, source_id IS NULL FROM endpoints WHERE tenant_id = ?1"
               " AND deleted_at IS NULL ORDER BY id");
  int rc = st ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  if (!rc) {
    sq_bind_text(st, 1, id);
    rc = read_ids(c, st, &out->endpoint_ids, &outbound, &out->n_endpoints);
  }
  if (!rc && !(st = sq_stmt(c, SQ_TENANT_SOURCES,
                            "SELECT id, 0 FROM sources WHERE tenant_id = ?1"
                            " AND deleted_at IS NULL ORDER BY id")))
    rc = HOOKD_STORE_ERR;
  if (!rc) {
    sq_bind_text(st, 1, id);
    rc = read_ids(c, st, &out->source_ids, &unused, &out->n_sources);
  }
  /* one budget of cancels for them all: the rest is the delete walk's */
  hookd_delete_counts d;
  int budget = HOOKD_DELETE_STEP;
  for (size_t i = 0; !rc && i < out->n_sources; i++)
    if (!(rc = sq_source_delete_within(c, out->source_ids[i], now_ms, &budget, &d)))
      add_counts(&out->counts, &d);
  for (size_t i = 0; !rc && i < out->n_endpoints; i++) {
    if (!outbound[i]) continue;
    if (!(rc = sq_endpoint_delete_within(c, out->endpoint_ids[i], now_ms, &budget, &d))) {
      add_counts(&out->counts, &d);
      out->endpoints_deleted++;
    }
  }
  free(outbound);
  free(unused);
  if (rc) return rc;
  st = sq_stmt(c, SQ_TENANT_REPLAYS,
               "UPDATE replay_jobs SET state = 'cancelled', updated_at = ?2, finished_at = ?2"
               " WHERE tenant_id = ?1 AND state IN ('building', 'preview', 'running', 'paused')");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "cancel replay jobs");
  out->replays_cancelled = sqlite3_changes(c->db);
  /* the keys that reached it and no tenant left (a customer's own): they would open nothing but
   * history, and could mint more keys of it (keys are few: the whole list is read) */
  hookd_api_key *keys = NULL;
  size_t nk = 0;
  if ((rc = sq_api_key_list(c, 0, &keys, &nk)) != 0) return rc;
  size_t idlen = strlen(id);
  for (size_t i = 0; !rc && i < nk; i++) {
    const char *scope = keys[i].tenants;
    if (keys[i].revoked_ms || !scope) continue; /* (NULL: every tenant, still there) */
    bool named = false, live = false;
    for (const char *p = scope; !rc && *p && !live;) {
      size_t len = strcspn(p, ",");
      char one[72];
      snprintf(one, sizeof one, "%.*s", (int)(len < 71 ? len : 71), p);
      named |= len == idlen && !memcmp(p, id, idlen);
      int t = sq_tenant_live(c, one);
      live = t == HOOKD_STORE_OK;
      if (t != HOOKD_STORE_OK && t != HOOKD_STORE_NOTFOUND) rc = t;
      p += len + (p[len] == ',');
    }
    if (rc || !named || live) continue;
    rc = sq_api_key_revoke(c, keys[i].id, now_ms);
    if (!rc) out->keys_revoked++;
  }
  hookd_api_keys_free(keys, nk);
  return rc;
}

/* ---------- the event-type catalog ---------- */

static void rd_event_type(sqlite3_stmt *st, void *rec) {
  hookd_event_type *t = rec;
  t->name = sq_col_str(st, 0);
  t->description = sq_col_str(st, 1);
  t->created_ms = sq_col_i64(st, 2);
  t->updated_ms = sq_col_i64(st, 3);
  t->archived_ms = sq_col_i64(st, 4);
  t->schemas = sq_col_str(st, 5);
}
static void free_event_types(void *v, size_t n) { hookd_event_types_free(v, n); }

int sq_event_type_create(hookd_store_conn *c, const hookd_event_type *t) {
  sqlite3_stmt *st = sq_stmt(c, SQ_ET_INSERT,
                             "INSERT INTO event_types(name, description, created_at, updated_at,"
                             " schemas) VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT(name) DO NOTHING");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, t->name);
  sq_bind_text(st, 2, t->description ? t->description : "");
  sq_bind_i64(st, 3, t->created_ms);
  sq_bind_text(st, 4, t->schemas && t->schemas[0] ? t->schemas : NULL);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert event type");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_EXISTS;
}

int sq_event_type_list(hookd_store_conn *c, bool archived_too, bool with_schemas,
                       const char *after, int limit, hookd_event_type **out, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_ET_LIST,
                             "SELECT name, description, created_at, updated_at, archived_at,"
                             " CASE WHEN ?2 THEN schemas END FROM event_types"
                             " WHERE name > ?3 AND (?1 OR archived_at IS NULL) ORDER BY name"
                             " LIMIT ?4");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, archived_too);
  sq_bind_i64(st, 2, with_schemas);
  sq_bind_text(st, 3, after ? after : "");
  sq_bind_i64(st, 4, limit > 0 ? limit : -1); /* (SQLite: a negative LIMIT is none) */
  return sq_read_rows(c, st, sizeof **out, rd_event_type, free_event_types, (void **)out, n,
                      "list event types");
}

int sq_event_type_get(hookd_store_conn *c, const char *name, hookd_event_type *out) {
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = sq_stmt(c, SQ_ET_ONE,
                             "SELECT name, description, created_at, updated_at, archived_at,"
                             " schemas FROM event_types WHERE name = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, name);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) rd_event_type(st, out);
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  return rc == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "read event type");
}

int sq_event_type_update(hookd_store_conn *c, const char *name, const char *description,
                         const char *schemas, int archived, int64_t now_ms,
                         hookd_event_type *out, int *changed) {
  memset(out, 0, sizeof *out);
  *changed = 0;
  /* what it is now: a write that changes nothing is none (no new updated_at, no audit) */
  sqlite3_stmt *st = sq_stmt(c, SQ_ET_GET,
                             "SELECT description, archived_at IS NOT NULL, COALESCE(schemas, '')"
                             " FROM event_types WHERE name = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, name);
  int rc = sqlite3_step(st);
  char *desc = rc == SQLITE_ROW ? sq_col_str(st, 0) : NULL;
  bool was = rc == SQLITE_ROW && sqlite3_column_int(st, 1);
  char *had = rc == SQLITE_ROW ? sq_col_str(st, 2) : NULL;
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) {
    free(desc);
    free(had);
    return sq_fail(c, "read event type");
  }
  bool new_desc = description && (!desc || strcmp(desc, description) != 0);
  bool new_schemas = schemas && (!had || strcmp(had, schemas) != 0);
  free(desc);
  free(had);
  bool flips = archived >= 0 && (archived == 1) != was;
  *changed = flips && archived == 1 ? 1 : (flips || new_desc || new_schemas) ? 2 : 0;
  st = sq_stmt(c, SQ_ET_UPDATE,
               "UPDATE event_types SET description = COALESCE(?2, description),"
               " archived_at = CASE ?3 WHEN 1 THEN COALESCE(archived_at, ?4)"
               " WHEN 0 THEN NULL ELSE archived_at END,"
               " updated_at = CASE WHEN ?5 THEN ?4 ELSE updated_at END,"
               " schemas = CASE WHEN ?6 IS NULL THEN schemas ELSE NULLIF(?6, '') END"
               " WHERE name = ?1"
               " RETURNING name, description, created_at, updated_at, archived_at, schemas");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, name);
  sq_bind_text(st, 2, description);
  sq_bind_i64(st, 3, archived);
  sq_bind_i64(st, 4, now_ms);
  sq_bind_i64(st, 5, *changed != 0);
  sq_bind_text(st, 6, schemas);
  rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    rd_event_type(st, out);
    rc = sqlite3_step(st);
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return sq_fail(c, "update event type");
  return out->name ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int sq_event_types_check(hookd_store_conn *c, const char *patterns, int *bad) {
  *bad = -1;
  if (!patterns) return HOOKD_STORE_OK; /* every type: nothing to name */
  hookd_event_type *v = NULL;
  size_t n = 0;
  int rc = sq_event_type_list(c, false, false, NULL, 0, &v, &n);
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

/* ---------- retry policies ---------- */

void sq_read_policy(sqlite3_stmt *st, int i, hookd_retry_policy *p) {
  p->id = sq_col_i64(st, i);
  p->max_attempts = (int)sq_col_i64(st, i + 1);
  p->base_ms = sq_col_i64(st, i + 2);
  p->cap_ms = sq_col_i64(st, i + 3);
  p->max_age_ms = sq_col_i64(st, i + 4);
  p->retry_after_cap_ms = sq_col_i64(st, i + 5);
  p->retry_4xx[0] = p->retry_4xx[1] = 0;
}

/* The policy's retry_statuses column (read apart: it came with migration 12, after the columns
 * every query lists in a row). A value hookd did not write reads as none. */
void sq_read_policy_statuses(sqlite3_stmt *st, int i, hookd_retry_policy *p) {
  const char *s = (const char *)sqlite3_column_text(st, i);
  if (hookd_retry_statuses_parse(s, p->retry_4xx) != 0) p->retry_4xx[0] = p->retry_4xx[1] = 0;
}

static int policy_insert(hookd_store_conn *c, hookd_retry_policy *p, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_POLICY_INSERT,
                             "INSERT INTO retry_policies(max_attempts, base_ms, cap_ms, max_age_ms,"
                             " retry_after_cap_ms, created_at, retry_statuses)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULLIF(?7, ''))");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, p->max_attempts);
  sq_bind_i64(st, 2, p->base_ms);
  sq_bind_i64(st, 3, p->cap_ms);
  sq_bind_i64(st, 4, p->max_age_ms);
  sq_bind_i64(st, 5, p->retry_after_cap_ms);
  sq_bind_i64(st, 6, now_ms);
  char statuses[512];
  hookd_retry_statuses_format(p->retry_4xx, statuses, sizeof statuses);
  sqlite3_bind_text(st, 7, statuses, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert retry policy");
  p->id = sqlite3_last_insert_rowid(c->db);
  return HOOKD_STORE_OK;
}

static int same_policy(const hookd_retry_policy *a, const hookd_retry_policy *b) {
  return a->max_attempts == b->max_attempts && a->base_ms == b->base_ms &&
         a->cap_ms == b->cap_ms && a->max_age_ms == b->max_age_ms &&
         a->retry_after_cap_ms == b->retry_after_cap_ms && a->retry_4xx[0] == b->retry_4xx[0] &&
         a->retry_4xx[1] == b->retry_4xx[1];
}

/* ---------- endpoints ---------- */

void sq_read_endpoint(sqlite3_stmt *st, hookd_endpoint *e) {
  memset(e, 0, sizeof *e);
  e->id = sq_col_str(st, 0);
  e->tenant_id = sq_col_str(st, 1);
  e->url = sq_col_str(st, 2);
  e->description = sq_col_str(st, 3);
  e->event_types = sq_col_str(st, 4);
  e->enabled = sq_col_i64(st, 5) != 0;
  e->disabled_reason = sq_col_str(st, 6);
  e->max_in_flight = (int)sq_col_i64(st, 7);
  e->timeout_ms = (int)sq_col_i64(st, 8);
  e->secret = sq_col_str(st, 9);
  e->created_ms = sq_col_i64(st, 10);
  e->updated_ms = sq_col_i64(st, 11);
  e->deleted_ms = sq_col_i64(st, 12);
  sq_read_policy(st, 13, &e->policy);
  e->signing = sq_col_str(st, 19);
  e->previous_secret = sq_col_str(st, 20);
  e->previous_expires_ms = sq_col_i64(st, 21);
  e->source_id = sq_col_str(st, 22);
  e->idempotent = sq_col_i64(st, 23) != 0;
  e->rate_limit = sqlite3_column_double(st, 24);
  e->ordered = sq_col_i64(st, 25) != 0;
  e->lane_policy = sq_col_str(st, 26);
  e->failing_since_ms = sq_col_i64(st, 27);
  sq_read_policy_statuses(st, 28, &e->policy);
  e->paused_until_ms = sq_col_i64(st, 29);
  e->headers = sq_col_str(st, 30);
  e->channels = sq_col_str(st, 31);
  e->metadata = sq_col_str(st, 32);
  e->payload_filter = sq_col_str(st, 33);
  e->disabled_ms = sq_col_i64(st, 34);
  e->body_format = sq_col_str(st, 35);
}

static void rd_endpoint(sqlite3_stmt *st, void *rec) { sq_read_endpoint(st, rec); }
static void free_endpoints(void *v, size_t n) { hookd_endpoints_free(v, n); }

int sq_read_endpoints(hookd_store_conn *c, sqlite3_stmt *st, hookd_endpoint **out, size_t *n) {
  return sq_read_rows(c, st, sizeof **out, rd_endpoint, free_endpoints, (void **)out, n,
                      "list endpoints");
}

/* HOOKD_STORE_NOTFOUND unless the tenant is there and not deleted (the foreign key only
 * says it was made once). */
int sq_tenant_live(hookd_store_conn *c, const char *id) {
  hookd_tenant t;
  int rc = sq_tenant_get(c, id, &t);
  if (rc == HOOKD_STORE_OK) hookd_tenant_free(&t);
  if (rc == HOOKD_STORE_NOTFOUND) snprintf(c->err, sizeof c->err, "tenant not found");
  return rc;
}

int sq_endpoint_create(hookd_store_conn *c, hookd_endpoint *ep, int max_per_tenant) {
  int trc = sq_tenant_live(c, ep->tenant_id);
  if (trc) return trc;
  sqlite3_stmt *st;
  if (max_per_tenant > 0) {
    st = sq_stmt(c, SQ_EP_COUNT,
                 "SELECT COUNT(*) FROM endpoints WHERE tenant_id = ?1 AND deleted_at IS NULL");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, ep->tenant_id);
    if (sqlite3_step(st) != SQLITE_ROW) return sq_fail(c, "count endpoints");
    if (sq_col_i64(st, 0) >= max_per_tenant) {
      snprintf(c->err, sizeof c->err, "tenant already has %d endpoints (the limit)",
               max_per_tenant);
      return HOOKD_STORE_LIMIT;
    }
  }
  int rc = policy_insert(c, &ep->policy, ep->created_ms);
  if (rc) return rc;
  st = sq_stmt(c, SQ_EP_INSERT,
               "INSERT INTO endpoints(id, tenant_id, url, description, event_types, enabled,"
               " disabled_reason, max_in_flight, timeout_ms, policy_id, secret, created_at,"
               " updated_at, signing, source_id, idempotent, rate_limit, ordered, lane_policy,"
               " headers, channels, metadata, payload_filter, disabled_at, body_format) VALUES (?1,"
               " ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?12, ?13, ?14, ?15, ?16, ?17, ?18,"
               " ?19, ?20, ?21, ?22, CASE WHEN ?6 THEN NULL ELSE ?12 END, ?23)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, ep->id);
  sq_bind_text(st, 2, ep->tenant_id);
  sq_bind_text(st, 3, ep->url);
  sq_bind_text(st, 4, ep->description ? ep->description : "");
  sq_bind_text(st, 5, ep->event_types);
  sq_bind_i64(st, 6, ep->enabled);
  sq_bind_text(st, 7, ep->disabled_reason);
  sq_bind_i64(st, 8, ep->max_in_flight);
  sq_bind_i64(st, 9, ep->timeout_ms);
  sq_bind_i64(st, 10, ep->policy.id);
  sq_bind_text(st, 11, ep->secret);
  sq_bind_i64(st, 12, ep->created_ms);
  sq_bind_text(st, 13, ep->signing ? ep->signing : "hmac");
  sq_bind_text(st, 14, ep->source_id);
  sq_bind_i64(st, 15, ep->source_id ? ep->idempotent : 1);
  sqlite3_bind_double(st, 16, ep->rate_limit);
  sq_bind_i64(st, 17, ep->ordered);
  sq_bind_text(st, 18, ep->lane_policy ? ep->lane_policy : "skip");
  sq_bind_text(st, 19, ep->headers);
  sq_bind_text(st, 20, ep->channels);
  sq_bind_text(st, 21, ep->metadata);
  sq_bind_text(st, 22, ep->payload_filter);
  sq_bind_text(st, 23, ep->body_format ? ep->body_format : "envelope");
  rc = sqlite3_step(st);
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
    snprintf(c->err, sizeof c->err, "tenant not found");
    return HOOKD_STORE_NOTFOUND;
  }
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
    /* a deleted endpoint keeps its row (its deliveries and attempts name it): its id is taken
     * for good, which "already exists" alone would not explain. Ids are one namespace for all
     * tenants: of another tenant's endpoint nothing is said but that the id is taken (not
     * whether it was deleted) */
    sqlite3_stmt *del = sq_stmt(c, SQ_EP_DELETED, "SELECT deleted_at IS NOT NULL,"
                                                  " tenant_id = ?2 FROM endpoints WHERE id = ?1");
    bool deleted = false, own = false;
    if (del) {
      sq_bind_text(del, 1, ep->id);
      sq_bind_text(del, 2, ep->tenant_id);
      if (sqlite3_step(del) == SQLITE_ROW) {
        deleted = sqlite3_column_int(del, 0);
        own = sqlite3_column_int(del, 1);
      }
      sqlite3_reset(del);
    }
    snprintf(c->err, sizeof c->err,
             !own      ? "endpoint id %s is taken (ids are unique across tenants): choose another"
                         " id, or leave it out to have one generated"
             : deleted ? "endpoint %s was deleted, and an endpoint id is never used again (its "
                         "deliveries and attempts keep naming it): choose another id"
                       : "endpoint %s already exists",
             ep->id);
    return HOOKD_STORE_EXISTS;
  }
  if (rc != SQLITE_DONE) return sq_fail(c, "insert endpoint");
  ep->updated_ms = ep->created_ms;
  return HOOKD_STORE_OK;
}

int sq_endpoint_get(hookd_store_conn *c, const char *id, hookd_endpoint *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_GET, "SELECT " SQ_EP_COLS SQ_EP_FROM " WHERE e.id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get endpoint");
  sq_read_endpoint(st, out);
  if (out->deleted_ms) {
    hookd_endpoint_free(out);
    return HOOKD_STORE_NOTFOUND;
  }
  return HOOKD_STORE_OK;
}

int sq_ever_made(hookd_store_conn *c, int kind, const char *tenant_id, const char *id) {
  sqlite3_stmt *st =
      kind == HOOKD_MADE_ENDPOINT
          ? sq_stmt(c, SQ_EP_MADE,
                    "SELECT 1 FROM endpoints WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)")
      : kind == HOOKD_MADE_SOURCE
          ? sq_stmt(c, SQ_SRC_MADE,
                    "SELECT 1 FROM sources WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)")
      : kind == HOOKD_MADE_EVENT
          ? sq_stmt(c, SQ_EVENT_MADE,
                    "SELECT 1 FROM events WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)")
          : sq_stmt(c, SQ_TENANT_MADE, /* deleted ones too */
                    "SELECT 1 FROM tenants WHERE id = ?1 AND (?2 IS NULL OR id = ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, tenant_id);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW) return HOOKD_STORE_OK;
  return rc == SQLITE_DONE ? HOOKD_STORE_NOTFOUND : sq_fail(c, "look up an id");
}

int sq_endpoint_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                     int kind, int enabled, hookd_endpoint **out, size_t *n) {
  sqlite3_stmt *st =
      sq_stmt(c, SQ_EP_LIST,
              "SELECT " SQ_EP_COLS SQ_EP_FROM " WHERE e.tenant_id = ?1 AND e.deleted_at IS NULL"
              " AND e.id > ?2 AND (?4 = 0 OR (?4 = 1) = (e.source_id IS NULL))"
              " AND (?5 < 0 OR (e.enabled <> 0) = (?5 = 1)) ORDER BY e.id LIMIT ?3");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, tenant_id);
  sq_bind_text(st, 2, after_id ? after_id : "");
  sq_bind_i64(st, 3, limit);
  sq_bind_i64(st, 4, kind);
  sq_bind_i64(st, 5, enabled);
  return sq_read_endpoints(c, st, out, n);
}

int sq_endpoint_update(hookd_store_conn *c, hookd_endpoint *ep) {
  hookd_endpoint cur;
  int rc = sq_endpoint_get(c, ep->id, &cur);
  if (rc) return rc;
  if (same_policy(&cur.policy, &ep->policy)) {
    ep->policy.id = cur.policy.id;
  } else if ((rc = policy_insert(c, &ep->policy, ep->updated_ms)) != 0) {
    hookd_endpoint_free(&cur);
    return rc;
  }
  /* a destination made non-idempotent: a request in flight went out without a send mark */
  bool now_no_resend = cur.source_id && cur.idempotent && !ep->idempotent;
  /* its lanes no longer wait on a DEAD head: the ones that did are let in */
  bool unblocked = cur.ordered && ep->ordered && cur.lane_policy &&
                   !strcmp(cur.lane_policy, "block") &&
                   !(ep->lane_policy && !strcmp(ep->lane_policy, "block"));
  hookd_endpoint_free(&cur);
  sqlite3_stmt *st =
      sq_stmt(c, SQ_EP_UPDATE,
              "UPDATE endpoints SET url = ?2, description = ?3, event_types = ?4, enabled = ?5,"
              " disabled_reason = ?6, max_in_flight = ?7, timeout_ms = ?8, policy_id = ?9,"
              " secret = ?10, updated_at = ?11, previous_secret = ?12, previous_expires_at = ?13,"
              " rate_limit = ?14, ordered = ?15, lane_policy = ?16, headers = ?18, channels = ?19,"
              " metadata = ?20, payload_filter = ?21, body_format = ?22,"
              " idempotent = CASE WHEN source_id IS NULL THEN 1 ELSE ?17 END,"
              /* (the right-hand sides read the row as it was: `enabled` is the old value) */
              " disabled_at = CASE WHEN ?5 THEN NULL WHEN enabled THEN ?11 ELSE disabled_at END,"
              /* enabled again, or a new URL (another destination): its failures start over,
               * and the old receiver's Retry-After pause ends */
              " failing_since = CASE WHEN (?5 AND NOT enabled) OR url IS NOT ?2 THEN NULL"
              " ELSE failing_since END,"
              " paused_until = CASE WHEN (?5 AND NOT enabled) OR url IS NOT ?2 THEN NULL"
              " ELSE paused_until END,"
              " health_since = CASE WHEN (?5 AND NOT enabled) OR url IS NOT ?2 THEN ?11"
              " ELSE health_since END"
              " WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, ep->id);
  sq_bind_text(st, 2, ep->url);
  sq_bind_text(st, 3, ep->description ? ep->description : "");
  sq_bind_text(st, 4, ep->event_types);
  sq_bind_i64(st, 5, ep->enabled);
  sq_bind_text(st, 6, ep->enabled ? NULL : ep->disabled_reason);
  sq_bind_i64(st, 7, ep->max_in_flight);
  sq_bind_i64(st, 8, ep->timeout_ms);
  sq_bind_i64(st, 9, ep->policy.id);
  sq_bind_text(st, 10, ep->secret);
  sq_bind_i64(st, 11, ep->updated_ms);
  /* a previous secret whose overlap has ended goes with the next write (nothing signs with it) */
  bool prev = ep->previous_secret && ep->previous_expires_ms > ep->updated_ms;
  sq_bind_text(st, 12, prev ? ep->previous_secret : NULL);
  sq_bind_i64_or_null(st, 13, prev ? ep->previous_expires_ms : 0);
  sqlite3_bind_double(st, 14, ep->rate_limit);
  sq_bind_i64(st, 15, ep->ordered);
  sq_bind_text(st, 16, ep->lane_policy ? ep->lane_policy : "skip");
  sq_bind_i64(st, 17, ep->idempotent);
  sq_bind_text(st, 18, ep->headers);
  sq_bind_text(st, 19, ep->channels);
  sq_bind_text(st, 20, ep->metadata);
  sq_bind_text(st, 21, ep->payload_filter);
  sq_bind_text(st, 22, ep->body_format ? ep->body_format : "envelope");
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "update endpoint");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_NOTFOUND;
  if (now_no_resend) {
    /* every lease it holds now may be such a request: marked, as migration 23 marks them (a
     * crash then holds it unknown instead of sending it again under the new setting) */
    st = sq_stmt(c, SQ_EP_MARK_LEASED,
                 "UPDATE deliveries SET sent_token = lease_token WHERE endpoint_id = ?1"
                 " AND leased_until IS NOT NULL AND (state = 'pending' OR state = 'retrying')");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, ep->id);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "mark leased deliveries");
    /* a retry after an attempt that may have reached it is held when it is claimed (the
     * dispatcher, disp_record_hold): a scan of them here held the writer for seconds */
  }
  /* no lanes any more: nothing waits (a first bounded step here, the rest by the rescans) */
  if (!ep->ordered) return sq_lane_unorder(c, ep->id);
  return unblocked ? sq_lane_unblock(c, ep->id, ep->updated_ms) : HOOKD_STORE_OK;
}

/* Steps an UPDATE … RETURNING seq over an endpoint's deliveries (?1 the endpoint, ?2 now, ?3
 * their last_error): counts the rows into *rows (when given) and collects their seqs (keep). */
static int step_seqs(hookd_store_conn *c, sqlite3_stmt *st, const char *id, int64_t now_ms,
                     const char *why, bool keep, int64_t **seqs, size_t *n, size_t *cap,
                     int *rows, const char *what) {
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  sq_bind_text(st, 3, why);
  int step;
  while ((step = sqlite3_step(st)) == SQLITE_ROW) {
    if (rows) (*rows)++;
    if (keep && hookd_seq_push(seqs, n, cap, sq_col_i64(st, 0)) != 0) break;
  }
  if (step == SQLITE_ROW) { /* out of memory */
    sqlite3_reset(st);
    return HOOKD_STORE_ERR;
  }
  return step == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, what);
}

/* (a cancelled row waits for nothing: out of deliveries_lane_wait, which the walk goes through) */
#define CANCEL_SET                                                                              \
  "UPDATE deliveries SET state = 'cancelled', updated_at = ?2, next_attempt_at = NULL,"         \
  " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL, last_error = ?3,"   \
  " lane_wait = 0"
/* A deleted endpoint's active deliveries not in flight, in two passes, each on the partial index
 * that holds them and nothing else — the due ones, and those waiting in a lane — so that a step
 * visits what it cancels, whatever is left (an ordering key alone would plan the second on
 * deliveries_lane_open, which holds every open keyed row: a review measured steps of 0.4 s for
 * 500,000 keyed deliveries); also the test for any left (?1 the endpoint). */
#define CANCEL_DUE                                                                              \
  "SELECT seq FROM deliveries WHERE endpoint_id = ?1 AND state IN ('pending','retrying')"      \
  " AND lane_wait = 0"
#define CANCEL_LANES                                                                            \
  "SELECT seq FROM deliveries INDEXED BY deliveries_lane_wait WHERE endpoint_id = ?1"           \
  " AND lane_wait = 1 AND state IN ('pending','retrying')"

/* Cancels up to *budget of a deleted endpoint's active deliveries, spending the budget; their
 * seqs are kept when inbound (their inbox records follow). *left: some may remain (the budget
 * ran out and a probe found one). */
static int cancel_some(hookd_store_conn *c, const char *id, int64_t now_ms, bool inbound,
                       int *budget, int64_t **seqs, size_t *n, size_t *cap, int *cancelled,
                       bool *left) {
  static const char *const cancel[] = {
      CANCEL_SET " WHERE seq IN (" CANCEL_DUE " LIMIT ?4) RETURNING seq",
      CANCEL_SET " WHERE seq IN (" CANCEL_LANES " LIMIT ?4) RETURNING seq"};
  int rc = HOOKD_STORE_OK;
  *left = false;
  for (int i = 0; i < 2 && rc == HOOKD_STORE_OK && *budget > 0; i++) {
    sqlite3_stmt *st = sq_stmt(c, i ? SQ_EP_CANCEL_LANES : SQ_EP_CANCEL, cancel[i]);
    if (!st) return HOOKD_STORE_ERR;
    sqlite3_bind_int(st, 4, *budget);
    int before = *cancelled;
    /* why it is cancelled (the inbox record of an inbound one takes its delivery's error) */
    rc = step_seqs(c, st, id, now_ms, inbound ? "destination deleted" : "endpoint deleted",
                   inbound, seqs, n, cap, cancelled, "cancel deliveries");
    *budget -= *cancelled - before;
  }
  if (rc || *budget > 0) return rc;
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_CANCEL_LEFT,
                             /* (a CASE: the second probe only when the first finds none) */
                             "SELECT CASE WHEN EXISTS (" CANCEL_DUE ") THEN 1"
                             " ELSE EXISTS (" CANCEL_LANES ") END");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int step = sqlite3_step(st);
  *left = step == SQLITE_ROW && sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  return step == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "cancel deliveries");
}

/* Whether an endpoint still owes cancels to the delete walk. */
static int flag_cancels(hookd_store_conn *c, const char *id, bool pending) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_FLAG_CANCEL,
                             "UPDATE endpoints SET cancel_pending = ?2 WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sqlite3_bind_int(st, 2, pending);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "flag cancels");
}

static int follow_inbox(hookd_store_conn *c, int64_t *seqs, size_t n, int64_t now_ms, int rc) {
  for (size_t i = 0; i < n && rc == HOOKD_STORE_OK; i++)
    rc = sq_inbox_follow(c, seqs[i], now_ms, "destination deleted", NULL);
  free(seqs);
  return rc;
}

int sq_endpoint_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                              hookd_delete_counts *out) {
  *out = (hookd_delete_counts){0};
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_DELETE,
                             "UPDATE endpoints SET deleted_at = ?2, updated_at = ?2, enabled = 0,"
                             /* nothing is signed for it again (a request in flight has its
                              * key already): its secrets go, and its headers (credentials) */
                             " secret = '', previous_secret = NULL, previous_expires_at = NULL,"
                             " headers = NULL, description = '', metadata = NULL,"
                             /* its URL cut to its origin (its attempts' by the URL
                              * walk, marked below) */
                             " url = " SQ_URL_ORIGIN("url")
                             " WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "delete endpoint");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_NOTFOUND;
  c->erased = true; /* its commit has the WAL file emptied (its secrets, headers, URL's path) */
  /* its attempts' URLs are the URL walk's (docs/architecture.md "Deletes"): its tenant's walk
   * starts, or, under way, owes another pass — when it has a delivery (an endpoint never sent
   * to has no attempt: no walk of the tenant's deliveries for it) */
  st = sq_stmt(c, SQ_URLCUT_MARK,
               "INSERT INTO url_cuts(tenant_id, after, again, turn, cut) SELECT tenant_id, '', 0,"
               " (SELECT coalesce(max(turn), 0) + 1 FROM url_cuts), 0 FROM endpoints WHERE id = ?1"
               " AND EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = ?1)"
               /* a pass under way cuts its deliveries past the cursor; those before need
                * another pass */
               " ON CONFLICT (tenant_id) DO UPDATE SET again = (again OR after <> '')");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "mark the URL walk");
  /* an inbound destination's inbox records follow their cancelled deliveries (they would say
   * `received` for ever) */
  st = sq_stmt(c, SQ_EP_IS_DEST,
               "SELECT source_id IS NOT NULL, idempotent FROM endpoints WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  bool inbound = false, no_resend = false;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    inbound = sqlite3_column_int(st, 0);
    no_resend = inbound && !sqlite3_column_int(st, 1);
  }
  sqlite3_reset(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE) /* (SQLite may have ended the transaction) */
    return sq_fail(c, "read endpoint");
  int64_t *seqs = NULL;
  size_t n = 0, cap = 0;
  int rc = HOOKD_STORE_OK;
  /* What is in flight (leased: at most the in-flight caps, one probe of deliveries_leased)
   * first, whatever the budget. */
  if (no_resend) {
    /* A request to a destination that is not idempotent may be out: its send mark is on the
     * lease. Cancelled, it would read "destination deleted" (dead-lettered) while the handler
     * may still be doing the work, and a replay would forward it again. Held unknown instead,
     * the lease fenced like a cancel's: the request's outcome, landing late, settles it
     * (late_outcome: a success completes it, an ambiguous end keeps it held); a mark whose
     * request never started is given back and cancelled then (sq_release_lease). */
    st = sq_stmt(c, SQ_EP_DELETE_HOLD,
                 "UPDATE deliveries INDEXED BY deliveries_leased SET state = 'unknown',"
                 " updated_at = ?2, next_attempt_at = NULL,"
                 " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL,"
                 " last_error = ?3 WHERE leased_until IS NOT NULL AND endpoint_id = ?1"
                 " AND state IN ('pending','retrying') AND sent_token = lease_token"
                 " RETURNING seq");
    rc = st ? step_seqs(c, st, id, now_ms, sq_held_deleted, true, &seqs, &n, &cap, &out->held,
                        "hold deliveries")
            : HOOKD_STORE_ERR;
  }
  /* Active deliveries are cancelled; bumping the lease token fences any in-flight attempt. */
  st = rc ? NULL
          : sq_stmt(c, SQ_EP_CANCEL_LEASED,
                    "UPDATE deliveries INDEXED BY deliveries_leased SET state = 'cancelled',"
                    " updated_at = ?2, next_attempt_at = NULL, lease_token = lease_token + 1,"
                    " lease_owner = NULL, leased_until = NULL, last_error = ?3"
                    " WHERE leased_until IS NOT NULL AND endpoint_id = ?1"
                    " AND state IN ('pending','retrying') RETURNING seq");
  if (!rc)
    rc = st ? step_seqs(c, st, id, now_ms, inbound ? "destination deleted" : "endpoint deleted",
                        inbound, &seqs, &n, &cap, &out->cancelled, "cancel deliveries")
            : HOOKD_STORE_ERR;
  /* then the backlog, within the budget: the rest is the delete walk's */
  if (!rc)
    rc = cancel_some(c, id, now_ms, inbound, budget, &seqs, &n, &cap, &out->cancelled,
                     &out->more);
  if (!rc && out->more) rc = flag_cancels(c, id, true);
  return follow_inbox(c, seqs, n, now_ms, rc);
}

int sq_endpoint_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_delete_counts *out) {
  int budget = HOOKD_DELETE_STEP;
  return sq_endpoint_delete_within(c, id, now_ms, &budget, out);
}

/* What a step of the URL walk reads and cuts at most (docs/architecture.md "Deletes"): deliveries
 * of the tenant, attempts of its deleted endpoints. */
#define URLCUT_STEP 2000
#define URLCUT_ATTEMPTS 100

/* Cuts the URLs of up to `budget` attempts of one delivery; *cut: how many. */
static int url_cut_delivery(hookd_store_conn *c, int64_t seq, int budget, int *cut) {
  sqlite3_stmt *st = sq_stmt(c, SQ_URLCUT_ATTEMPTS,
                             "UPDATE attempts SET url = " SQ_URL_ORIGIN("url")
                             " WHERE delivery_seq = ?1 AND attempt_number IN (SELECT"
                             " attempt_number FROM attempts WHERE delivery_seq = ?1"
                             " AND url IS NOT NULL AND url IS NOT " SQ_URL_ORIGIN("url")
                             " ORDER BY attempt_number LIMIT ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sqlite3_bind_int64(st, 1, seq);
  sqlite3_bind_int(st, 2, budget);
  int k = sqlite3_step(st);
  *cut = k == SQLITE_DONE ? sqlite3_changes(c->db) : 0;
  sqlite3_reset(st);
  return k == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "cut attempts' URLs");
}

/* One step of the URL walk, for the tenant whose turn it is: the next URLCUT_STEP deliveries past
 * its cursor, the URLs of the attempts of those whose endpoint is deleted cut to their origin —
 * URLCUT_ATTEMPTS at most, the cursor then before the delivery not finished. */
static int url_cut_step(hookd_store_conn *c, hookd_delete_step *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_URLCUT_NEXT,
                             "SELECT tenant_id, after, again, cut FROM url_cuts"
                             " ORDER BY turn LIMIT 1");
  if (!st) return HOOKD_STORE_ERR;
  int step = sqlite3_step(st);
  char *after = NULL;
  bool again = false;
  int64_t total = 0;
  if (step == SQLITE_ROW) {
    snprintf(out->tenant_id, sizeof out->tenant_id, "%s", (const char *)sqlite3_column_text(st, 0));
    after = sq_col_str(st, 1);
    again = sqlite3_column_int(st, 2);
    total = sqlite3_column_int64(st, 3);
  }
  sqlite3_reset(st);
  if (step != SQLITE_ROW) return step == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "URL walk");
  if (!after) return sq_fail(c, "URL walk");
  out->found = out->urls = true;
  st = sq_stmt(c, SQ_URLCUT_SCAN,
               "SELECT d.seq, d.id, e.deleted_at IS NOT NULL FROM deliveries d"
               " INDEXED BY deliveries_tenant JOIN endpoints e ON e.id = d.endpoint_id"
               " WHERE d.tenant_id = ?1 AND d.id > ?2 ORDER BY d.id LIMIT ?3");
  if (!st) {
    free(after);
    return HOOKD_STORE_ERR;
  }
  sq_bind_text(st, 1, out->tenant_id);
  sq_bind_text(st, 2, after);
  sqlite3_bind_int(st, 3, URLCUT_STEP);
  int rows = 0, rc = HOOKD_STORE_OK;
  bool full = false; /* the attempts' budget spent: the cursor stays before this delivery */
  /* (the cuts between the reads: the scan's index is not the table written) */
  while (!full && (step = sqlite3_step(st)) == SQLITE_ROW) {
    rows++;
    if (sqlite3_column_int(st, 2)) {
      int cut = 0;
      rc = url_cut_delivery(c, sqlite3_column_int64(st, 0), URLCUT_ATTEMPTS - out->urls_cut,
                            &cut);
      if (rc) break;
      out->urls_cut += cut;
      full = out->urls_cut >= URLCUT_ATTEMPTS;
      if (full) break;
    }
    free(after);
    if (!(after = sq_col_str(st, 1))) break;
  }
  sqlite3_reset(st);
  /* (the scan ended, or stopped at the budget; else a failed step or copy) */
  if (!rc && (!after || (!full && step != SQLITE_DONE))) rc = sq_fail(c, "URL walk");
  if (rc) {
    free(after);
    return rc;
  }
  bool pass_done = !full && rows < URLCUT_STEP;
  out->finished = pass_done && !again;
  out->urls_total = total + out->urls_cut;
  /* the walk's last commit has the WAL file emptied (its frames hold the rows as cut; what held
   * the paths is in the database's pages, written over by the checkpoint — once, not a
   * checkpoint asked for after every step) */
  if (out->finished && out->urls_total > 0) c->erased = true;
  /* the tenant's row gone, or its next pass from the first delivery, or its cursor moved on; its
   * turn after every other tenant's */
  st = out->finished ? sq_stmt(c, SQ_URLCUT_DONE, "DELETE FROM url_cuts WHERE tenant_id = ?1")
                     : sq_stmt(c, SQ_URLCUT_MOVE,
                               "UPDATE url_cuts SET after = ?2, again = again AND NOT ?3,"
                               " cut = cut + ?4, turn = (SELECT max(turn) + 1 FROM url_cuts)"
                               " WHERE tenant_id = ?1");
  if (st) {
    sq_bind_text(st, 1, out->tenant_id);
    if (!out->finished) {
      sq_bind_text(st, 2, pass_done ? "" : after);
      sqlite3_bind_int(st, 3, pass_done);
      sqlite3_bind_int(st, 4, out->urls_cut);
    }
    if (sqlite3_step(st) != SQLITE_DONE) rc = sq_fail(c, "URL walk");
  } else {
    rc = HOOKD_STORE_ERR;
  }
  free(after);
  return rc;
}

int sq_delete_step(hookd_store_conn *c, int64_t now_ms, int limit, hookd_delete_step *out) {
  *out = (hookd_delete_step){0};
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_CANCEL_NEXT,
                             "SELECT id, source_id IS NOT NULL FROM endpoints"
                             " WHERE cancel_pending = 1 LIMIT 1");
  if (!st) return HOOKD_STORE_ERR;
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW) {
    snprintf(out->endpoint_id, sizeof out->endpoint_id, "%s",
             (const char *)sqlite3_column_text(st, 0));
    out->found = true;
  }
  bool inbound = step == SQLITE_ROW && sqlite3_column_int(st, 1);
  sqlite3_reset(st);
  /* the cancels first; then the URLs */
  if (step == SQLITE_DONE) return url_cut_step(c, out);
  if (step != SQLITE_ROW) return sq_fail(c, "delete walk");
  int64_t *seqs = NULL;
  size_t n = 0, cap = 0;
  int budget = limit;
  int rc = cancel_some(c, out->endpoint_id, now_ms, inbound, &budget, &seqs, &n, &cap,
                       &out->counts.cancelled, &out->counts.more);
  out->finished = !out->counts.more;
  if (!rc && out->finished) rc = flag_cancels(c, out->endpoint_id, false);
  return follow_inbox(c, seqs, n, now_ms, rc);
}

int sq_endpoint_reseal(hookd_store_conn *c, const char *id, const char *secret,
                       const char *previous_secret, const char *headers) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_RESEAL,
                             "UPDATE endpoints SET secret = ?2, previous_secret = ?3, headers = ?4,"
                             " previous_expires_at = CASE WHEN ?3 IS NULL THEN NULL"
                             " ELSE previous_expires_at END WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, secret);
  sq_bind_text(st, 3, previous_secret);
  sq_bind_text(st, 4, headers);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "reseal endpoint");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int sq_master_key_claim(hookd_store_conn *c, const char *key_id, bool take, int64_t now_ms,
                        char *held, size_t cap) {
  sqlite3_stmt *st =
      take ? sq_stmt(c, SQ_MK_TAKE,
                     "INSERT INTO master_key (one, key_id, recorded_at) VALUES (1, ?1, ?2)"
                     " ON CONFLICT (one) DO UPDATE SET key_id = excluded.key_id,"
                     " recorded_at = excluded.recorded_at")
           : sq_stmt(c, SQ_MK_PUT,
                     "INSERT INTO master_key (one, key_id, recorded_at) VALUES (1, ?1, ?2)"
                     " ON CONFLICT (one) DO NOTHING");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, key_id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "record the master key");
  st = sq_stmt(c, SQ_MK_GET, "SELECT key_id FROM master_key WHERE one = 1");
  if (!st) return HOOKD_STORE_ERR;
  int step = sqlite3_step(st);
  const unsigned char *id = step == SQLITE_ROW ? sqlite3_column_text(st, 0) : NULL;
  snprintf(held, cap, "%s", id ? (const char *)id : "");
  sqlite3_reset(st);
  return step == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "read the master key's record");
}

int sq_endpoints_since(hookd_store_conn *c, int64_t since_ms, hookd_endpoint **out, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_SINCE,
                             "SELECT " SQ_EP_COLS SQ_EP_FROM " WHERE e.updated_at >= ?1 ORDER BY e.id");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, since_ms);
  return sq_read_endpoints(c, st, out, n);
}

/* ---------- API keys ---------- */

int sq_api_key_create(hookd_store_conn *c, const hookd_api_key *k) {
  sqlite3_stmt *st = sq_stmt(c, SQ_KEY_INSERT,
                             "INSERT INTO api_keys(id, hash, role, tenants, name, created_at,"
                             " expires_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULLIF(?7, 0))");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, k->id);
  sqlite3_bind_blob(st, 2, k->hash, 32, SQLITE_STATIC);
  sq_bind_text(st, 3, k->role);
  sq_bind_text(st, 4, k->tenants);
  sq_bind_text(st, 5, k->name ? k->name : "");
  sq_bind_i64(st, 6, k->created_ms);
  sq_bind_i64(st, 7, k->expires_ms);
  int rc = sqlite3_step(st);
  if ((rc & 0xff) == SQLITE_CONSTRAINT) return HOOKD_STORE_EXISTS;
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "insert api key");
}

static void rd_api_key(sqlite3_stmt *st, void *rec) {
  hookd_api_key *k = rec;
  k->id = sq_col_str(st, 0);
  if (sqlite3_column_bytes(st, 1) == 32) memcpy(k->hash, sqlite3_column_blob(st, 1), 32);
  k->role = sq_col_str(st, 2);
  k->tenants = sq_col_str(st, 3);
  k->name = sq_col_str(st, 4);
  k->created_ms = sq_col_i64(st, 5);
  k->revoked_ms = sq_col_i64(st, 6);
  k->expires_ms = sq_col_i64(st, 7);
}
static void free_api_keys(void *v, size_t n) { hookd_api_keys_free(v, n); }

int sq_api_key_list(hookd_store_conn *c, int64_t live_at_ms, hookd_api_key **out, size_t *n) {
  sqlite3_stmt *st =
      sq_stmt(c, SQ_KEY_LIST,
              "SELECT id, hash, role, tenants, name, created_at, revoked_at, expires_at"
              " FROM api_keys WHERE ?1 = 0 OR (revoked_at IS NULL AND (expires_at IS NULL"
              " OR expires_at > ?1)) ORDER BY created_at, id");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, live_at_ms);
  return sq_read_rows(c, st, sizeof **out, rd_api_key, free_api_keys, (void **)out, n,
                      "list api keys");
}

int sq_api_key_revoke(hookd_store_conn *c, const char *id, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_KEY_REVOKE,
                             "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1"
                             " AND revoked_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "revoke api key");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

/* ---------- answers kept under an Idempotency-Key ---------- */

int sq_answer_get(hookd_store_conn *c, const char *scope, const char *key, char **hash,
                  int *status, char **answer) {
  sqlite3_stmt *st = sq_stmt(c, SQ_ANSWER_GET,
                             "SELECT request_hash, status, answer FROM api_answers"
                             " WHERE scope = ?1 AND key = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, scope);
  sq_bind_text(st, 2, key);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get kept answer");
  *hash = sq_col_str(st, 0);
  *status = (int)sq_col_i64(st, 1);
  *answer = sq_col_str(st, 2);
  sqlite3_reset(st);
  if (!*hash || !*answer) {
    free(*hash);
    free(*answer);
    *hash = *answer = NULL;
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

/* A retention step's delete (?1 before, ?2 limit): *purged rows, *more when it was full. */
static int purge_step(hookd_store_conn *c, enum sq_stmt_id id, const char *sql,
                      int64_t before_ms, int limit, int *purged, bool *more, const char *what) {
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, before_ms);
  sq_bind_i64(st, 2, limit);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, what);
  *purged = sqlite3_changes(c->db);
  *more = *purged >= limit;
  return HOOKD_STORE_OK;
}

int sq_answer_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                    bool *more) {
  /* (on the index by age) */
  return purge_step(c, SQ_ANSWER_DROP,
                    "DELETE FROM api_answers WHERE (scope, key) IN (SELECT scope, key"
                    " FROM api_answers WHERE created_at < ?1 ORDER BY created_at LIMIT ?2)",
                    before_ms, limit, purged, more, "drop kept answers");
}

int sq_api_key_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                     bool *more) {
  /* (on the index of the keys that expire) */
  return purge_step(c, SQ_KEY_PURGE,
                    "DELETE FROM api_keys WHERE id IN (SELECT id FROM api_keys"
                    " WHERE expires_at < ?1 ORDER BY expires_at LIMIT ?2)",
                    before_ms, limit, purged, more, "delete expired keys");
}

int sq_answer_put(hookd_store_conn *c, const char *scope, const char *key, const char *hash,
                  int status, const char *answer, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_ANSWER_PUT,
               "INSERT OR REPLACE INTO api_answers(scope, key, request_hash, status, answer,"
               " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, scope);
  sq_bind_text(st, 2, key);
  sq_bind_text(st, 3, hash);
  sq_bind_i64(st, 4, status);
  sq_bind_text(st, 5, answer);
  sq_bind_i64(st, 6, now_ms);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "keep answer");
}

/* ---------- audit log ---------- */

int sq_audit_append(hookd_store_conn *c, const hookd_audit *a) {
  sqlite3_stmt *st = sq_stmt(c, SQ_AUDIT_INSERT,
                             "INSERT INTO audit_log(at, actor, action, target, tenant_id, reason,"
                             " detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, a->at_ms);
  sq_bind_text(st, 2, a->actor ? a->actor : "system");
  sq_bind_text(st, 3, a->action);
  sq_bind_text(st, 4, a->target);
  sq_bind_text(st, 5, a->tenant_id);
  sq_bind_text(st, 6, a->reason);
  sq_bind_text(st, 7, a->detail);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "append audit");
}

static void rd_audit(sqlite3_stmt *st, void *rec) {
  hookd_audit *a = rec;
  a->seq = sq_col_i64(st, 0);
  a->at_ms = sq_col_i64(st, 1);
  a->actor = sq_col_str(st, 2);
  a->action = sq_col_str(st, 3);
  a->target = sq_col_str(st, 4);
  a->tenant_id = sq_col_str(st, 5);
  a->reason = sq_col_str(st, 6);
  a->detail = sq_col_str(st, 7);
}
static void free_audits(void *v, size_t n) { hookd_audits_free(v, n); }

int sq_audit_list(hookd_store_conn *c, const char *tenant_id, int64_t before_seq, int limit,
                  hookd_audit **out, size_t *n) {
  /* one statement per shape, each a range of its index (the rowid, or tenant and seq): a
   * catch-all "?1 IS NULL OR …" made every page a scan of the whole log */
#define AUDIT_LIST(where)                                                                     \
  "SELECT seq, at, actor, action, target, tenant_id, reason, detail FROM audit_log WHERE " where \
  " seq < ?2 ORDER BY seq DESC LIMIT ?3"
  sqlite3_stmt *st = tenant_id ? sq_stmt(c, SQ_AUDIT_LIST_TENANT, AUDIT_LIST("tenant_id = ?1 AND"))
                               : sq_stmt(c, SQ_AUDIT_LIST, AUDIT_LIST(""));
#undef AUDIT_LIST
  if (!st) return HOOKD_STORE_ERR;
  if (tenant_id) sq_bind_text(st, 1, tenant_id);
  sq_bind_i64(st, 2, before_seq > 0 ? before_seq : INT64_MAX);
  sq_bind_i64(st, 3, limit);
  return sq_read_rows(c, st, sizeof **out, rd_audit, free_audits, (void **)out, n, "list audit");
}

/* ---------- the change stamps of keys and sources ---------- */

int sq_config_stamps(hookd_store_conn *c, int64_t *keys, int64_t *sources) {
  *keys = *sources = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_STAMPS,
                             "SELECT (SELECT n FROM config_stamps WHERE what = 'api_keys'),"
                             " (SELECT n FROM config_stamps WHERE what = 'sources')");
  if (!st) return HOOKD_STORE_ERR;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    *keys = sqlite3_column_int64(st, 0);
    *sources = sqlite3_column_int64(st, 1);
  }
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "read the change stamps");
}

/* ---------- the heartbeat ---------- */

int sq_heartbeat(hookd_store_conn *c, int64_t now_ms, bool at_start, int64_t gap_ms,
                 int64_t *last_ms, int64_t *moved) {
  *last_ms = *moved = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_HB_GET, "SELECT at FROM heartbeat WHERE one = 1");
  if (!st) return HOOKD_STORE_ERR;
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *last_ms = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read the heartbeat");
  if (at_start) {
    /* on by the gap, never past now (a window opened after the last stamp, before a crash);
     * and at every start, none left ahead of now (a run whose clock read ahead stamped and
     * moved them so: a window cannot open in the future — it would hold the disable off).
     * (A deleted endpoint's health is read by nothing.) */
    int64_t gap = *last_ms > 0 && now_ms - *last_ms > gap_ms ? now_ms - *last_ms : 0;
    st = sq_stmt(c, SQ_HB_MOVE,
                 "UPDATE endpoints SET failing_since = MIN(failing_since + ?1, ?2)"
                 " WHERE failing_since IS NOT NULL AND deleted_at IS NULL"
                 " AND (?1 > 0 OR failing_since > ?2)");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, gap);
    sq_bind_i64(st, 2, now_ms);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "move the failing windows");
    *moved = gap ? sqlite3_changes(c->db) : 0;
  }
  st = sq_stmt(c, SQ_HB_SET,
               "INSERT INTO heartbeat(one, at) VALUES (1, ?1)"
               " ON CONFLICT(one) DO UPDATE SET at = excluded.at");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, now_ms);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "write the heartbeat");
}

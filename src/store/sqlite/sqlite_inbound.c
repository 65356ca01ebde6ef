/* sqlite_inbound.c — SQLite backend: inbound sources, the receive path's atomic step, the
 * inbox record that follows its deliveries, operator resolution and retention purge
 * (docs/inbound.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/version.h"
#include "store/sqlite/sqlite_int.h"

/* ---------- sources ---------- */

#define SRC_COLS                                                                              \
  "id, tenant_id, provider, secrets, tolerance_s, event_types, identity_paths,"               \
  " business_paths, business_operation, version_object_path, version_path, version_header,"   \
  " generic, created_at, updated_at, deleted_at, prior_identity_paths, prior_identity_until,"     \
  " business_types"

static void read_source(sqlite3_stmt *st, hookd_source *s) {
  memset(s, 0, sizeof *s);
  s->id = sq_col_str(st, 0);
  s->tenant_id = sq_col_str(st, 1);
  s->provider = sq_col_str(st, 2);
  s->secrets = sq_col_str(st, 3);
  s->tolerance_s = (int)sq_col_i64(st, 4);
  s->event_types = sq_col_str(st, 5);
  s->identity_paths = sq_col_str(st, 6);
  s->business_paths = sq_col_str(st, 7);
  s->business_operation = sq_col_str(st, 8);
  s->version_object_path = sq_col_str(st, 9);
  s->version_path = sq_col_str(st, 10);
  s->version_header = sq_col_str(st, 11);
  s->generic = sq_col_str(st, 12);
  s->created_ms = sq_col_i64(st, 13);
  s->updated_ms = sq_col_i64(st, 14);
  s->deleted_ms = sq_col_i64(st, 15);
  s->prior_identity_paths = sq_col_str(st, 16);
  s->prior_identity_until_ms = sq_col_i64(st, 17);
  s->business_types = sq_col_str(st, 18);
}

static void bind_source_fields(sqlite3_stmt *st, const hookd_source *s) {
  sq_bind_text(st, 1, s->id);
  sq_bind_text(st, 2, s->tenant_id);
  sq_bind_text(st, 3, s->provider);
  sq_bind_text(st, 4, s->secrets);
  sq_bind_i64(st, 5, s->tolerance_s);
  sq_bind_text(st, 6, s->event_types);
  sq_bind_text(st, 7, s->identity_paths);
  sq_bind_text(st, 8, s->business_paths);
  sq_bind_text(st, 9, s->business_operation);
  sq_bind_text(st, 10, s->version_object_path);
  sq_bind_text(st, 11, s->version_path);
  sq_bind_text(st, 12, s->version_header);
  sq_bind_text(st, 13, s->generic);
  sq_bind_i64(st, 14, s->created_ms);
  sq_bind_i64(st, 15, s->updated_ms);
  sq_bind_text(st, 17, s->prior_identity_paths);
  sq_bind_i64(st, 18, s->prior_identity_until_ms);
  sq_bind_text(st, 19, s->business_types);
}

int sq_source_create(hookd_store_conn *c, const hookd_source *s, hookd_endpoint *dests,
                     size_t n_dests, int max_eps) {
  int trc = sq_tenant_live(c, s->tenant_id);
  if (trc) return trc;
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_INSERT,
                             "INSERT INTO sources(" SRC_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6,"
                             " ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, NULL, ?17, ?18, ?19)");
  if (!st) return HOOKD_STORE_ERR;
  bind_source_fields(st, s);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) {
    snprintf(c->err, sizeof c->err, "tenant not found");
    return HOOKD_STORE_NOTFOUND;
  }
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) {
    /* a deleted source keeps its row (its inbox records name it): its id is taken for good,
     * which "already exists" alone would not explain — said only to the tenant that had it */
    sqlite3_stmt *del = sq_stmt(c, SQ_SRC_DELETED, "SELECT deleted_at IS NOT NULL, tenant_id = ?2"
                                                   " FROM sources WHERE id = ?1");
    bool deleted = false;
    if (del) {
      sq_bind_text(del, 1, s->id);
      sq_bind_text(del, 2, s->tenant_id);
      deleted = sqlite3_step(del) == SQLITE_ROW && sqlite3_column_int(del, 0) &&
                sqlite3_column_int(del, 1);
      sqlite3_reset(del);
    }
    snprintf(c->err, sizeof c->err,
             deleted ? "source %s was deleted, and a source id is never used again (its inbox "
                       "records keep naming it): choose another id, or add destinations to a "
                       "source that still exists (POST /v1/sources/{id}/destinations)"
                     : "source id %s is taken: choose another id, or leave it out to have one "
                       "generated",
             s->id);
    return HOOKD_STORE_EXISTS;
  }
  if (rc != SQLITE_DONE) return sq_fail(c, "insert source");
  for (size_t i = 0; i < n_dests; i++) {
    if ((rc = sq_endpoint_create(c, &dests[i], max_eps)) != 0) return rc;
  }
  return HOOKD_STORE_OK;
}

static int source_dests(hookd_store_conn *c, const char *id, hookd_endpoint **dests, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_DESTS,
                             "SELECT " SQ_EP_COLS SQ_EP_FROM " WHERE e.source_id = ?1"
                             " AND e.deleted_at IS NULL ORDER BY e.id");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  return sq_read_endpoints(c, st, dests, n);
}

int sq_source_get(hookd_store_conn *c, const char *id, hookd_source *out, hookd_endpoint **dests,
                  size_t *n_dests) {
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_GET,
                             "SELECT " SRC_COLS " FROM sources WHERE id = ?1"
                             " AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get source");
  read_source(st, out);
  if (!dests) return HOOKD_STORE_OK;
  if ((rc = source_dests(c, id, dests, n_dests)) != 0) hookd_source_free(out);
  return rc;
}

int sq_source_update(hookd_store_conn *c, const hookd_source *s) {
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_UPDATE,
                             "UPDATE sources SET secrets = ?4, tolerance_s = ?5, event_types = ?6,"
                             " identity_paths = ?7, business_paths = ?8, business_operation = ?9,"
                             " version_object_path = ?10, version_path = ?11,"
                             " version_header = ?12, generic = ?13, updated_at = ?15,"
                             " prior_identity_paths = ?17, prior_identity_until = ?18,"
                             " business_types = ?19"
                             " WHERE id = ?1 AND tenant_id = ?2 AND provider = ?3"
                             " AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  bind_source_fields(st, s);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "update source");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int sq_source_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                            hookd_delete_counts *out) {
  *out = (hookd_delete_counts){0};
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_DELETE,
                             "UPDATE sources SET deleted_at = ?2, updated_at = ?2, secrets = ''"
                             " WHERE id = ?1 AND deleted_at IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "delete source");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_NOTFOUND;
  c->erased = true; /* its commit has the WAL file emptied (its secrets) */
  hookd_endpoint *dests = NULL;
  size_t n = 0;
  int rc = source_dests(c, id, &dests, &n);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    hookd_delete_counts k;
    rc = sq_endpoint_delete_within(c, dests[i].id, now_ms, budget, &k);
    out->cancelled += k.cancelled;
    out->held += k.held;
    out->more |= k.more;
  }
  hookd_endpoints_free(dests, n);
  return rc;
}

int sq_source_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_delete_counts *out) {
  int budget = HOOKD_DELETE_STEP;
  return sq_source_delete_within(c, id, now_ms, &budget, out);
}

static void rd_source(sqlite3_stmt *st, void *rec) { read_source(st, rec); }
static void free_sources(void *v, size_t n) { hookd_sources_free(v, n); }

int sq_source_list(hookd_store_conn *c, hookd_source **out, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_SRC_LIST,
                             "SELECT " SRC_COLS " FROM sources WHERE deleted_at IS NULL"
                             " ORDER BY id");
  if (!st) return HOOKD_STORE_ERR;
  return sq_read_rows(c, st, sizeof **out, rd_source, free_sources, (void **)out, n,
                      "list sources");
}

int sq_source_page(hookd_store_conn *c, const char *tenant_id, const char *provider,
                   const char *after, int limit, hookd_source **out, size_t *n) {
  /* (no tenant: every tenant's, by id) */
  sqlite3_stmt *st =
      tenant_id ? sq_stmt(c, SQ_SRC_PAGE,
                          "SELECT " SRC_COLS " FROM sources WHERE tenant_id = ?1 AND id > ?2"
                          " AND deleted_at IS NULL AND (?3 IS NULL OR provider = ?3)"
                          " ORDER BY id LIMIT ?4")
                : sq_stmt(c, SQ_SRC_PAGE_ALL,
                          "SELECT " SRC_COLS " FROM sources WHERE ?1 IS NULL AND id > ?2"
                          " AND deleted_at IS NULL AND (?3 IS NULL OR provider = ?3)"
                          " ORDER BY id LIMIT ?4");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, tenant_id);
  sq_bind_text(st, 2, after);
  sq_bind_text(st, 3, provider);
  sq_bind_i64(st, 4, limit);
  return sq_read_rows(c, st, sizeof **out, rd_source, free_sources, (void **)out, n,
                      "list sources");
}

/* ---------- inbox rows ---------- */

#define INBOX_COLS                                                                            \
  "i.seq, i.id, i.source_id, i.tenant_id, i.provider, i.identity_key, i.identity_kind,"       \
  " i.provider_event_id, i.business_key, i.event_type, i.payload_hash, i.status,"             \
  " i.conflict_of, i.event_seq, i.attempt_count, i.received_at, i.completed_at,"              \
  " i.result_ref, i.last_error,"                                                               \
  " (SELECT MAX(d.leased_until) FROM deliveries d WHERE d.event_seq = i.event_seq)"

static void read_inbox(sqlite3_stmt *st, hookd_inbox *r) {
  memset(r, 0, sizeof *r);
  r->seq = sq_col_i64(st, 0);
  r->id = sq_col_str(st, 1);
  r->source_id = sq_col_str(st, 2);
  r->tenant_id = sq_col_str(st, 3);
  r->provider = sq_col_str(st, 4);
  r->identity_key = sq_col_str(st, 5);
  r->identity_kind = sq_col_str(st, 6);
  r->provider_event_id = sq_col_str(st, 7);
  r->business_key = sq_col_str(st, 8);
  r->event_type = sq_col_str(st, 9);
  r->payload_hash = sq_col_str(st, 10);
  r->status = sq_col_str(st, 11);
  r->conflict_of = sq_col_str(st, 12);
  r->event_seq = sq_col_i64(st, 13);
  r->attempt_count = (int)sq_col_i64(st, 14);
  r->received_ms = sq_col_i64(st, 15);
  r->completed_ms = sq_col_i64(st, 16);
  r->result_ref = sq_col_str(st, 17);
  r->last_error = sq_col_str(st, 18);
  r->lease_until_ms = sq_col_i64(st, 19);
}

static int inbox_by(hookd_store_conn *c, enum sq_stmt_id id, const char *sql, const char *a,
                    const char *b, hookd_inbox *out) {
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, a);
  if (b) sq_bind_text(st, 2, b);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "read inbox");
  read_inbox(st, out);
  return HOOKD_STORE_OK;
}

static int inbox_get_row(hookd_store_conn *c, const char *id, hookd_inbox *out) {
  return inbox_by(c, SQ_INBOX_GET, "SELECT " INBOX_COLS " FROM inbox i WHERE i.id = ?1", id, NULL,
                  out);
}

/* Inserts the record unless its identity is known. event_seq (0 = none) is the engine event it
 * will link to, so a new record is written once (see next_event_seq). */
static int inbox_insert(hookd_store_conn *c, const hookd_receive_req *req, const char *id,
                        const char *identity_key, const char *status, const char *conflict_of,
                        int64_t event_seq) {
  sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_INSERT,
                             "INSERT INTO inbox(id, source_id, tenant_id, provider, identity_key,"
                             " identity_kind, provider_event_id, event_type, payload_hash, status,"
                             " conflict_of, received_at, event_seq) VALUES (?1, ?2, ?3, ?4, ?5,"
                             " ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                             " ON CONFLICT(source_id, identity_key) DO NOTHING");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, req->source_id);
  sq_bind_text(st, 3, req->tenant_id);
  sq_bind_text(st, 4, req->provider);
  sq_bind_text(st, 5, identity_key);
  sq_bind_text(st, 6, req->identity_kind);
  sq_bind_text(st, 7, req->provider_event_id);
  sq_bind_text(st, 8, req->event_type);
  sq_bind_text(st, 9, req->payload_hash);
  sq_bind_text(st, 10, status);
  sq_bind_text(st, 11, conflict_of);
  sq_bind_i64(st, 12, req->now_ms);
  sq_bind_i64_or_null(st, 13, event_seq);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert inbox");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_EXISTS;
}

/* A record that will not be forwarded after all (semantic duplicate, stale): its status, no
 * link to an event (none is written), and no business key either, so a later event with that
 * key is not taken for a duplicate of one that was never forwarded. */
static int inbox_settle(hookd_store_conn *c, const char *id, const char *status,
                        const char *conflict_of) {
  sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_SET,
                             "UPDATE inbox SET status = ?2, conflict_of = ?3, event_seq = NULL,"
                             " business_key = NULL WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, status);
  sq_bind_text(st, 3, conflict_of);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "update inbox");
}

/* The seq the next engine event gets: what SQLite itself assigns to a rowid (the largest + 1).
 * Only the writer connection inserts events, one op at a time, so nothing takes it in between. */
static int next_event_seq(hookd_store_conn *c, int64_t *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_NEXT_SEQ, "SELECT COALESCE(MAX(seq), 0) + 1 FROM events");
  if (!st) return HOOKD_STORE_ERR;
  if (sqlite3_step(st) != SQLITE_ROW) return sq_fail(c, "next event seq");
  *out = sq_col_i64(st, 0);
  sqlite3_reset(st);
  return HOOKD_STORE_OK;
}

/* The answer for a new record, from what was just written (no re-read). */
static int new_record(const hookd_receive_req *req, int64_t seq, int64_t event_seq,
                      hookd_inbox *r) {
  memset(r, 0, sizeof *r);
  const char *src[] = {req->inbox_id,     req->source_id,         req->tenant_id,
                       req->provider,     req->identity_key,      req->identity_kind,
                       req->provider_event_id, req->business_key, req->event_type,
                       req->payload_hash, "received"};
  char **dst[] = {&r->id,           &r->source_id,         &r->tenant_id,
                  &r->provider,     &r->identity_key,      &r->identity_kind,
                  &r->provider_event_id, &r->business_key, &r->event_type,
                  &r->payload_hash, &r->status};
  for (size_t i = 0; i < sizeof src / sizeof src[0]; i++) {
    if (src[i] && !(*dst[i] = strdup(src[i]))) {
      hookd_inbox_free(r);
      return HOOKD_STORE_ERR;
    }
  }
  r->seq = seq;
  r->event_seq = event_seq;
  r->received_ms = req->now_ms;
  return HOOKD_STORE_OK;
}

/* Late events: 1 when `version` is older than the newest seen for the object, else records it
 * as the newest and returns 0. */
static int older_than_seen(hookd_store_conn *c, const hookd_receive_req *req) {
  sqlite3_stmt *st = sq_stmt(c, SQ_VERSION_GET,
                             "SELECT version, numeric FROM object_versions"
                             " WHERE source_id = ?1 AND object_key = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->source_id);
  sq_bind_text(st, 2, req->object_key);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) {
    const char *seen = (const char *)sqlite3_column_text(st, 0);
    int seen_kind = sq_col_i64(st, 1) ? HOOKD_VERSION_NUMBER : HOOKD_VERSION_TEXT;
    int kind = req->version_numeric ? HOOKD_VERSION_NUMBER : HOOKD_VERSION_TEXT;
    if (hookd_version_older(req->version, kind, seen, seen_kind)) return 1;
    /* a text version is never older, and never the newest either: it does not replace a
     * number (10, "n/a", 5 forwarded 5 — the high-water mark was gone) */
    if (seen_kind == HOOKD_VERSION_NUMBER && kind == HOOKD_VERSION_TEXT) {
      sqlite3_reset(st);
      return 0;
    }
  } else if (rc != SQLITE_DONE) {
    return sq_fail(c, "read object version");
  }
  st = sq_stmt(c, SQ_VERSION_SET,
               "INSERT INTO object_versions(source_id, object_key, version, numeric, seen_at)"
               " VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(source_id, object_key)"
               " DO UPDATE SET version = excluded.version, numeric = excluded.numeric,"
               " seen_at = excluded.seen_at");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->source_id);
  sq_bind_text(st, 2, req->object_key);
  sq_bind_text(st, 3, req->version);
  sq_bind_i64(st, 4, req->version_numeric);
  sq_bind_i64(st, 5, req->now_ms);
  return sqlite3_step(st) == SQLITE_DONE ? 0 : sq_fail(c, "record object version");
}

/* Nowhere to forward a new event (every destination of its source deleted): refused before
 * anything is written (the op runs without a savepoint: a failure after a write would make its
 * whole batch run again), so that the provider retries until one exists. A known identity is
 * still answered (a duplicate or a conflict, below). */
static int no_destination(hookd_store_conn *c, const hookd_receive_req *req) {
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_HAS_DEST,
                             "SELECT CASE WHEN EXISTS(SELECT 1 FROM endpoints"
                             " WHERE source_id = ?1 AND deleted_at IS NULL) THEN 1"
                             " ELSE EXISTS(SELECT 1 FROM inbox WHERE source_id = ?1"
                             " AND identity_key = ?2) END");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->source_id);
  sq_bind_text(st, 2, req->identity_key);
  if (sqlite3_step(st) != SQLITE_ROW) return sq_fail(c, "destinations");
  bool refused = !sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  return refused ? HOOKD_STORE_STATE : HOOKD_STORE_OK;
}

/* A record filtered by an allowlist that was widened since: the provider's redelivery of it
 * (the same payload) is taken as new, under the same record — its body was not kept, and a
 * mistaken allowlist would otherwise hold the event filtered for ever (the provider was told
 * 200). 1 when the record is `received` again, linked to event_seq (receive_new goes on).
 * HOOKD_STORE_STATE, before writing, when no destination is left to forward to: refused as a
 * new event is, so that the provider retries (a 200 `filtered` would end its retries, and the
 * event the allowlist now takes would never be forwarded — an audit). */
static int promote_filtered(hookd_store_conn *c, const hookd_inbox *orig,
                            const hookd_receive_req *req, int64_t event_seq) {
  /* the receive path's own check, without an identity: only the destinations count */
  int rc = no_destination(c, &(hookd_receive_req){.source_id = req->source_id});
  if (rc) return rc;
  sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_PROMOTE,
               "UPDATE inbox SET status = 'received', event_seq = ?2, event_type = ?3"
               " WHERE id = ?1 AND status = 'filtered'");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, orig->id);
  sq_bind_i64(st, 2, event_seq);
  sq_bind_text(st, 3, req->event_type);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "promote filtered");
  return sqlite3_changes(c->db) == 1 ? 1 : 0;
}

static int receive_new(hookd_store_conn *c, const hookd_receive_req *req, int64_t inbox_seq,
                       int64_t event_seq, hookd_receive_res *res);

#define INBOX_BY_KEY_SQL                                                                      \
  "SELECT " INBOX_COLS " FROM inbox i WHERE i.source_id = ?1 AND i.identity_key = ?2"

/* Whether the request carries orig's payload (its hash as hookd takes it now, or as an earlier
 * hookd did). */
static bool same_payload(const hookd_inbox *orig, const hookd_receive_req *req) {
  return !strcmp(orig->payload_hash, req->payload_hash) ||
         (req->alt_payload_hash && !strcmp(orig->payload_hash, req->alt_payload_hash));
}

/* The request's identity is known, as orig's (taken over; freed here): the same payload is a
 * duplicate, another one a conflict. event_seq is the seq a new event would get, 0 when none
 * was taken yet. */
static int known_identity(hookd_store_conn *c, const hookd_receive_req *req, hookd_inbox *orig,
                          int64_t event_seq, hookd_receive_res *res) {
  int rc;
  if (same_payload(orig, req)) {
    /* filtered before and allowed now (its source's allowlist was widened since): the
     * provider's redelivery is taken as new, under the same record */
    rc = 0;
    if (!req->filtered && !strcmp(orig->status, "filtered")) {
      rc = event_seq ? 0 : next_event_seq(c, &event_seq);
      if (!rc) rc = promote_filtered(c, orig, req, event_seq);
    }
    if (rc == 1) {
      hookd_receive_req again = *req;
      again.inbox_id = orig->id;
      rc = receive_new(c, &again, orig->seq, event_seq, res);
      hookd_inbox_free(orig);
      return rc;
    }
    if (rc) {
      hookd_inbox_free(orig);
      return rc;
    }
    res->outcome = HOOKD_RECV_DUPLICATE;
    res->record = *orig;
    return HOOKD_STORE_OK;
  }
  /* keyed by identity and payload: the same conflicting request again is its duplicate (before,
   * a review: a row and a conflict counted at each repeat) */
  char key[65];
  if (hookd_inbox_conflict_key(req->identity_key, req->payload_hash, key) != 0) {
    hookd_inbox_free(orig);
    return HOOKD_STORE_ERR;
  }
  rc = inbox_insert(c, req, req->inbox_id, key, "conflict", orig->id, 0);
  hookd_inbox_free(orig);
  if (rc == HOOKD_STORE_EXISTS) {
    rc = inbox_by(c, SQ_INBOX_BY_KEY, INBOX_BY_KEY_SQL, req->source_id, key, &res->record);
    if (!rc) res->outcome = HOOKD_RECV_DUPLICATE;
    return rc;
  }
  if (rc) return rc;
  res->outcome = HOOKD_RECV_CONFLICT;
  return inbox_get_row(c, req->inbox_id, &res->record);
}

int sq_receive(hookd_store_conn *c, const hookd_receive_req *req, hookd_receive_res *res) {
  memset(res, 0, sizeof *res);
  int64_t event_seq = 0;
  int rc;
  hookd_inbox orig;
  /* keyed as the source's rule was before its change, a record with the same payload is this
   * event's: a provider's retry of an event received before the change. Another payload under
   * that key is not a conflict: the new rule tells events apart that the old one did not (a
   * rule too coarse is what gets changed), so the new key decides. */
  if (req->prior_identity_key) {
    rc = inbox_by(c, SQ_INBOX_BY_KEY, INBOX_BY_KEY_SQL, req->source_id, req->prior_identity_key,
                  &orig);
    if (rc == HOOKD_STORE_OK && same_payload(&orig, req))
      return known_identity(c, req, &orig, 0, res);
    if (rc == HOOKD_STORE_OK) hookd_inbox_free(&orig);
    else if (rc != HOOKD_STORE_NOTFOUND) return rc;
  }
  if (!req->filtered && (rc = no_destination(c, req)) != 0) return rc;
  if (!req->filtered && (rc = next_event_seq(c, &event_seq)) != 0) return rc;
  rc = inbox_insert(c, req, req->inbox_id, req->identity_key,
                    req->filtered ? "filtered" : "received", NULL, event_seq);
  if (rc == HOOKD_STORE_EXISTS) {
    rc = inbox_by(c, SQ_INBOX_BY_KEY, INBOX_BY_KEY_SQL, req->source_id, req->identity_key, &orig);
    return rc ? rc : known_identity(c, req, &orig, event_seq, res);
  }
  if (rc) return rc;
  int64_t inbox_seq = sqlite3_last_insert_rowid(c->db);
  if (req->filtered) {
    res->outcome = HOOKD_RECV_FILTERED;
    return inbox_get_row(c, req->inbox_id, &res->record);
  }
  return receive_new(c, req, inbox_seq, event_seq, res);
}

/* A new record (req->inbox_id, at inbox_seq) that passed the allowlist: a semantic duplicate, a
 * stale version, or the event stored once at event_seq with one delivery per destination. */
/* A forward of the inbound event at event_seq to the destination in eps's row (id, policy_id):
 * a pending delivery, due now; *made is false when the destination has one already. */
static int insert_forward(hookd_store_conn *c, sqlite3_stmt *ins, sqlite3_stmt *eps,
                          int64_t event_seq, const char *tenant_id, int64_t now_ms, bool *made) {
  char did[HOOKD_ID_MAX];
  if (hookd_id_new("dlv", now_ms, did) != 0) return HOOKD_STORE_ERR;
  sqlite3_reset(ins);
  sq_bind_text(ins, 1, did);
  sq_bind_i64(ins, 2, event_seq);
  sqlite3_bind_text(ins, 3, (const char *)sqlite3_column_text(eps, 0), -1, SQLITE_TRANSIENT);
  sq_bind_text(ins, 4, tenant_id);
  sq_bind_i64(ins, 5, now_ms);
  sq_bind_i64(ins, 6, sq_col_i64(eps, 1));
  if (sqlite3_step(ins) != SQLITE_DONE) return sq_fail(c, "insert delivery");
  *made = sqlite3_changes(c->db) == 1;
  return HOOKD_STORE_OK;
}

static int receive_new(hookd_store_conn *c, const hookd_receive_req *req, int64_t inbox_seq,
                       int64_t event_seq, hookd_receive_res *res) {
  int rc;
  /* a business key already taken by another event: a semantic duplicate */
  if (req->business_key) {
    sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_BY_BKEY,
                               "UPDATE inbox SET business_key = ?2 WHERE id = ?1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, req->inbox_id);
    sq_bind_text(st, 2, req->business_key);
    int step = sqlite3_step(st);
    if (step == SQLITE_CONSTRAINT_UNIQUE) {
      hookd_inbox orig;
      sqlite3_reset(st);
      rc = inbox_by(c, SQ_INBOX_LEASE,
                    "SELECT " INBOX_COLS " FROM inbox i WHERE i.source_id = ?1"
                    " AND i.business_key = ?2",
                    req->source_id, req->business_key, &orig);
      if (rc) return rc;
      rc = inbox_settle(c, req->inbox_id, "duplicate", orig.id);
      hookd_inbox_free(&orig);
      if (rc) return rc;
      res->outcome = HOOKD_RECV_SEMANTIC_DUP;
      return inbox_get_row(c, req->inbox_id, &res->record);
    }
    if (step != SQLITE_DONE) return sq_fail(c, "set business key");
  }

  if (req->object_key && req->version) {
    rc = older_than_seen(c, req);
    if (rc < 0) return rc;
    if (rc == 1) {
      if ((rc = inbox_settle(c, req->inbox_id, "stale", NULL)) != 0) return rc;
      res->outcome = HOOKD_RECV_STALE;
      return inbox_get_row(c, req->inbox_id, &res->record);
    }
  }

  /* the raw body, stored once, as an inbound engine event, at the seq the record links to */
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_INSERT_IN,
                             "INSERT INTO events(seq, id, tenant_id, type, body, request_hash,"
                             " occurred_at, created_at, kind, content_type, meta)"
                             " VALUES (?9, ?1, ?2, ?3, ?4, ?5, ?6, ?6, 'inbound', ?7, ?8)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->inbox_id);
  sq_bind_text(st, 2, req->tenant_id);
  sq_bind_text(st, 3, req->event_type && *req->event_type ? req->event_type : "unknown");
  sqlite3_bind_blob(st, 4, req->body, (int)req->body_len, SQLITE_STATIC);
  sqlite3_bind_blob(st, 5, req->payload_hash, (int)strlen(req->payload_hash), SQLITE_STATIC);
  sq_bind_i64(st, 6, req->now_ms);
  sq_bind_text(st, 7, req->content_type);
  sq_bind_text(st, 8, req->meta);
  sq_bind_i64(st, 9, event_seq);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert inbound event");

  /* one delivery per destination, disabled ones included: acknowledged, the event must reach
   * the application, so a disabled destination's delivery waits until it is enabled again (one
   * skipped here was never forwarded, and the provider's redeliveries were duplicates) */
  sqlite3_stmt *eps = sq_stmt(c, SQ_DL_DEST,
                              "SELECT id, policy_id FROM endpoints WHERE source_id = ?1"
                              " AND deleted_at IS NULL");
  if (!eps) return HOOKD_STORE_ERR;
  sq_bind_text(eps, 1, req->source_id);
  sqlite3_stmt *ins = sq_stmt(c, SQ_DL_INSERT, SQ_DL_INSERT_SQL);
  if (!ins) return HOOKD_STORE_ERR;
  while ((rc = sqlite3_step(eps)) == SQLITE_ROW) {
    bool made;
    int irc = insert_forward(c, ins, eps, event_seq, req->tenant_id, req->now_ms, &made);
    if (irc) return irc;
    if (res->n_endpoints < HOOKD_FANOUT_MAX) res->endpoints[res->n_endpoints++] = sq_col_str(eps, 0);
  }
  if (rc != SQLITE_DONE) return sq_fail(c, "destinations");
  /* checked before the first write (no_destination); a destination deleted since, in this
   * transaction, cannot be (the writer is this thread) — kept as a backstop */
  if (res->n_endpoints == 0) return HOOKD_STORE_STATE;
  res->outcome = HOOKD_RECV_NEW;
  res->due_ms = req->now_ms;
  return new_record(req, inbox_seq, event_seq, &res->record);
}

/* ---------- the record follows its deliveries ---------- */

int sq_inbox_follow(hookd_store_conn *c, int64_t delivery_seq, int64_t now_ms,
                    const char *last_error, const char *result_ref) {
  sqlite3_stmt *st = sq_stmt(
      c, SQ_INBOX_AGG,
      "SELECT d.event_seq, SUM(x.state = 'unknown'),"
      /* a forward cut off by its destination's delete and replaced since (sq_inbox_reforward
       * marks it, only a forward of a deleted destination) no longer decides the record once
       * dead or cancelled; one not replaced counts as dead-lettered — the forwards made with
       * it, or by a reforward before its delete, replaced nothing */
      " SUM((x.state = 'dead' OR x.state = 'cancelled') AND NOT x.replaced),"
      /* (nor once replaced while the delete walk has not cancelled it yet: never sent) */
      " SUM(x.state = 'retrying' AND NOT x.replaced), SUM(x.state = 'pending' AND NOT x.replaced),"
      " SUM(x.state = 'delivered'),"
      " SUM(x.attempt_count) FROM deliveries d JOIN deliveries x ON x.event_seq = d.event_seq"
      " WHERE d.seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, delivery_seq);
  if (sqlite3_step(st) != SQLITE_ROW) return sq_fail(c, "aggregate deliveries");
  int64_t event_seq = sq_col_i64(st, 0);
  /* last_error follows the status: none once completed; else that of the latest delivery in
   * the state that decides it, s1 (an outcome of another delivery, or an error from before a
   * success, left the record naming an error it no longer has). Read apart, and only for
   * those statuses: a completed forward, the common outcome, runs the update alone. */
  const char *s1;
  const char *status = hookd_inbox_status_of(sq_col_i64(st, 1), sq_col_i64(st, 2),
                                             sq_col_i64(st, 3), sq_col_i64(st, 4),
                                             sq_col_i64(st, 5), &s1);
  int64_t attempts = sq_col_i64(st, 6);
  sqlite3_reset(st);
  bool replace = s1 || !strcmp(status, "completed");
  char deciding[256] = "";
  if (s1) {
    st = sq_stmt(c, SQ_INBOX_LAST_ERROR,
                 "SELECT last_error FROM deliveries WHERE event_seq = ?1"
                 " AND (state = ?2 OR state = ?3) AND (NOT replaced OR state = 'unknown')"
                 " ORDER BY updated_at DESC, seq DESC LIMIT 1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, event_seq);
    sq_bind_text(st, 2, s1);
    sq_bind_text(st, 3, !strcmp(s1, "dead") ? "cancelled" : s1);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW && sqlite3_column_text(st, 0))
      snprintf(deciding, sizeof deciding, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_reset(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE) return sq_fail(c, "read last error");
  }
  st = sq_stmt(c, SQ_INBOX_RESOLVE,
               "UPDATE inbox SET status = ?2, attempt_count = ?3,"
               " last_error = CASE WHEN ?7 THEN ?4 ELSE COALESCE(?4, last_error) END,"
               " result_ref = COALESCE(?5, result_ref),"
               " completed_at = CASE WHEN ?2 = 'completed' THEN COALESCE(completed_at, ?6)"
               " ELSE NULL END"
               /* OR, not IN: an IN list of more than two constants builds a temporary
                * b-tree on every execution (see the deliveries CHECK in sqlite_schema.c) */
               " WHERE event_seq = ?1 AND (status = 'received' OR status = 'retryable_failed'"
               " OR status = 'completed' OR status = 'dead_lettered' OR status = 'unknown')");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, event_seq);
  sq_bind_text(st, 2, status);
  sq_bind_i64(st, 3, attempts);
  sq_bind_text(st, 4, s1 ? (deciding[0] ? deciding : NULL) : replace ? NULL : last_error);
  sq_bind_text(st, 5, result_ref);
  sq_bind_i64(st, 6, now_ms);
  sq_bind_i64(st, 7, replace);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "follow inbox");
}

/* ---------- reads ---------- */

int sq_inbox_get(hookd_store_conn *c, const char *id, hookd_inbox *out, hookd_delivery **dl,
                 size_t *n) {
  int rc = inbox_get_row(c, id, out);
  if (rc || !dl) return rc;
  *dl = NULL;
  *n = 0;
  if (!out->event_seq) return HOOKD_STORE_OK;
  sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_DL,
                             "SELECT " SQ_DELIVERY_COLS
                             " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                             " WHERE d.event_seq = ?1 ORDER BY d.id");
  if (!st) {
    hookd_inbox_free(out);
    return HOOKD_STORE_ERR;
  }
  sq_bind_i64(st, 1, out->event_seq);
  if ((rc = sq_read_deliveries(c, st, dl, n)) != 0) hookd_inbox_free(out);
  return rc;
}

static void rd_inbox(sqlite3_stmt *st, void *rec) { read_inbox(st, rec); }
static void free_inboxes(void *v, size_t n) { hookd_inboxes_free(v, n); }

int sq_inbox_list(hookd_store_conn *c, const hookd_inbox_filter *f, hookd_inbox **out, size_t *n) {
  /* the status as GET shows it: "processing" is a received or retryable_failed record under a
   * live lease (stored statuses ?3 and ?7, the lease wanted by ?8: 2 live, 1 not, 0 either).
   * One statement per shape, each read from an index's ranges newest first, so that a page
   * costs the page plus the records its other filters reject: a provider's event id
   * (inbox_provider_event), else a source's records (inbox_source_status), else a tenant's
   * (inbox_tenant_status). A range without a status is one arm per status, each its newest
   * matches, merged by seq (a walk of the table newest first for a tenant's records read every
   * tenant's when it had fewer than a page). Without any of them: the table newest first.
   * A catch-all "?1 IS NULL OR …" made every list a scan of every tenant's records. */
/* a record without a type reads "unknown", as the event its request made (which needs one) */
#define SQ_INBOX_TYPE "COALESCE(NULLIF(i.event_type, ''), 'unknown')"
#define INBOX_FILTERS                                                                           \
  " AND (?1 IS NULL OR +i.tenant_id = ?1) AND (?2 IS NULL OR +i.source_id = ?2)"                \
  " AND (?8 = 0 OR (COALESCE((SELECT MAX(d.leased_until) FROM"                                  \
  " deliveries d WHERE d.event_seq = i.event_seq), 0) > ?6) = (?8 = 2))"                        \
  " AND (?9 IS NULL OR +i.provider_event_id = ?9)"                                              \
  " AND (?10 IS NULL OR " SQ_INBOX_TYPE " = ?10)"                                               \
  " AND (?11 IS NULL OR length(" SQ_INBOX_TYPE ") > length(?11)"                                \
  " AND substr(" SQ_INBOX_TYPE ", 1, length(?11)) = ?11)"                                       \
  " AND (?12 = 0 OR i.received_at >= ?12)"                                                      \
  " AND (?13 = 0 OR i.received_at < ?13)"                                                       \
  " AND i.seq < ?4"
#define INBOX_LIST(range)                                                                       \
  "SELECT " INBOX_COLS " FROM inbox i WHERE " range INBOX_FILTERS " ORDER BY i.seq DESC LIMIT ?5"
  /* one stored status's newest matches in a range */
#define ARM(range, status)                                                                      \
  "SELECT seq FROM (SELECT i.seq FROM inbox i WHERE " range " AND i.status = '" status "'"      \
  INBOX_FILTERS " ORDER BY i.seq DESC LIMIT ?5)"
#define ARMS_LEASABLE(range) ARM(range, "received") " UNION ALL " ARM(range, "retryable_failed")
#define ARMS_ALL(range)                                                                         \
  ARMS_LEASABLE(range) " UNION ALL " ARM(range, "completed") " UNION ALL "                      \
  ARM(range, "dead_lettered") " UNION ALL " ARM(range, "unknown") " UNION ALL "                 \
  ARM(range, "filtered") " UNION ALL " ARM(range, "stale") " UNION ALL "                        \
  ARM(range, "conflict") " UNION ALL " ARM(range, "duplicate")
#define MERGED(arms)                                                                            \
  "SELECT " INBOX_COLS " FROM inbox i WHERE i.seq IN (" arms ") ORDER BY i.seq DESC LIMIT ?5"
#define ANY_STATUS "(?3 IS NULL OR i.status = ?3 OR i.status = ?7)"
#define ONE_STATUS " AND i.status = ?3 AND ?7 IS NULL"
#define SRC "i.source_id = ?2"
#define TNT "i.tenant_id = ?1"
  const char *st = f->status;
  bool processing = st && !strcmp(st, "processing");
  bool leasable = st && (!strcmp(st, "received") || !strcmp(st, "retryable_failed"));
  sqlite3_stmt *q =
      f->event_id ? sq_stmt(c, SQ_INBOX_LIST_EV,
                            INBOX_LIST("i.provider_event_id = ?9 AND " ANY_STATUS))
      : f->source_id
          ? (!st         ? sq_stmt(c, SQ_INBOX_LIST_S, MERGED(ARMS_ALL(SRC)))
             : processing ? sq_stmt(c, SQ_INBOX_LIST_SP, MERGED(ARMS_LEASABLE(SRC)))
                          : sq_stmt(c, SQ_INBOX_LIST_SS, INBOX_LIST(SRC ONE_STATUS)))
      : f->tenant_id
          ? (!st         ? sq_stmt(c, SQ_INBOX_LIST_T, MERGED(ARMS_ALL(TNT)))
             : processing ? sq_stmt(c, SQ_INBOX_LIST_TP, MERGED(ARMS_LEASABLE(TNT)))
                          : sq_stmt(c, SQ_INBOX_LIST_TS, INBOX_LIST(TNT ONE_STATUS)))
          : sq_stmt(c, SQ_INBOX_LIST, INBOX_LIST(ANY_STATUS));
#undef TNT
#undef SRC
#undef ONE_STATUS
#undef ANY_STATUS
#undef MERGED
#undef ARMS_ALL
#undef ARMS_LEASABLE
#undef ARM
#undef INBOX_LIST
#undef INBOX_FILTERS
#undef SQ_INBOX_TYPE
  if (!q) return HOOKD_STORE_ERR;
  sq_bind_text(q, 1, f->tenant_id);
  sq_bind_text(q, 2, f->source_id);
  sq_bind_text(q, 3, processing ? "received" : st);
  sq_bind_i64(q, 4, f->before_seq > 0 ? f->before_seq : INT64_MAX);
  sq_bind_i64(q, 5, f->limit);
  sq_bind_i64(q, 6, f->now_ms);
  sq_bind_text(q, 7, processing ? "retryable_failed" : NULL);
  sq_bind_i64(q, 8, processing ? 2 : leasable ? 1 : 0);
  sq_bind_text(q, 9, f->event_id);
  sq_bind_type_filter(q, 10, 11, f->event_type);
  sq_bind_i64(q, 12, f->since_ms);
  sq_bind_i64(q, 13, f->until_ms);
  return sq_read_rows(c, q, sizeof **out, rd_inbox, free_inboxes, (void **)out, n, "list inbox");
}

/* ---------- operator resolution ---------- */

int sq_inbox_reforward(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       size_t *n_made, hookd_due_hint **hints, size_t *n_hints) {
  *n_made = 0;
  *hints = NULL;
  *n_hints = 0;
  hookd_inbox rec;
  int rc = inbox_get_row(c, id, &rec);
  if (rc) return rc;
  if (!rec.event_seq) { /* a record kept without a forward (filtered, stale, conflict, …) */
    hookd_inbox_free(&rec);
    return HOOKD_STORE_OK;
  }
  sqlite3_stmt *eps = sq_stmt(
      c, SQ_INBOX_REFORWARD,
      "SELECT e.id, e.policy_id FROM endpoints e WHERE e.source_id = ?1 AND e.deleted_at IS NULL"
      " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = ?2"
      " AND d.endpoint_id = e.id)"
      /* cut off: dead or cancelled; or not cancelled yet by the delete walk — pending, never
       * sent again (no claim takes a deleted destination's: docs/architecture.md "Deletes") */
      " AND EXISTS (SELECT 1 FROM deliveries d JOIN endpoints g ON g.id = d.endpoint_id"
      " WHERE d.event_seq = ?2 AND (d.state = 'dead' OR d.state = 'cancelled'"
      " OR (d.state IN ('pending', 'retrying') AND d.leased_until IS NULL))"
      /* (one replaced already by a forward made since: a destination added later is no
       * replacement of it — an old event fanned out to it) */
      /* (in a sweep, nor one an operator gave up, its destination not idempotent: its
       * handler may have applied it — api_inbox.c's replay_record) */
      " AND NOT (?3 AND d.state = 'dead' AND d.dead_reason IS 'operator' AND g.idempotent = 0)"
      " AND NOT d.replaced AND g.deleted_at IS NOT NULL)");
  sqlite3_stmt *ins = eps ? sq_stmt(c, SQ_DL_INSERT, SQ_DL_INSERT_SQL) : NULL;
  if (!ins) {
    hookd_inbox_free(&rec);
    return HOOKD_STORE_ERR;
  }
  sq_bind_text(eps, 1, rec.source_id);
  sq_bind_i64(eps, 2, rec.event_seq);
  sqlite3_bind_int(eps, 3, swept);
  size_t cap = 0;
  int64_t first = 0;
  int fail = 0; /* a write or an allocation failed */
  while ((rc = sqlite3_step(eps)) == SQLITE_ROW) {
    bool made;
    if ((fail = insert_forward(c, ins, eps, rec.event_seq, rec.tenant_id, now_ms, &made)) != 0)
      break;
    if (!made) continue;
    if (!first) first = sqlite3_last_insert_rowid(c->db);
    (*n_made)++;
    if (hookd_hint_push(hints, n_hints, &cap, (const char *)sqlite3_column_text(eps, 0), now_ms)) {
      fail = HOOKD_STORE_ERR;
      break;
    }
  }
  int64_t rec_event_seq = rec.event_seq;
  hookd_inbox_free(&rec);
  if (!fail && rc != SQLITE_DONE) fail = sq_fail(c, "reforward");
  if (fail) {
    sqlite3_reset(eps);
    hookd_due_hints_free(*hints, *n_hints);
    *hints = NULL;
    *n_hints = 0;
    return fail;
  }
  rc = HOOKD_STORE_OK;
  if (first) {
    /* the forwards cut off until now are replaced: they decide the record no more — one held
     * unknown too, once an operator or its late end settles it (while held it holds the
     * record unknown, replaced or not) */
    sqlite3_stmt *mark = sq_stmt(
        c, SQ_INBOX_REPLACED,
        "UPDATE deliveries SET replaced = 1 WHERE event_seq = ?1 AND seq < ?2 AND NOT replaced"
        " AND EXISTS (SELECT 1 FROM endpoints g WHERE g.id = deliveries.endpoint_id"
        " AND g.deleted_at IS NOT NULL)");
    if (!mark) rc = HOOKD_STORE_ERR;
    else {
      sq_bind_i64(mark, 1, rec_event_seq);
      sq_bind_i64(mark, 2, first);
      rc = sqlite3_step(mark) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "mark replaced");
    }
  }
  if (!rc && first) rc = sq_inbox_follow(c, first, now_ms, NULL, NULL);
  if (rc) {
    hookd_due_hints_free(*hints, *n_hints);
    *hints = NULL;
    *n_hints = 0;
  }
  return rc;
}

int sq_inbox_resolve(hookd_store_conn *c, const char *id, hookd_dstate to, int64_t now_ms,
                     size_t *n_resolved, hookd_due_hint **hints, size_t *n_hints) {
  *n_resolved = 0;
  *hints = NULL;
  *n_hints = 0;
  hookd_inbox r;
  hookd_delivery *dl = NULL;
  size_t n = 0;
  int rc = sq_inbox_get(c, id, &r, &dl, &n);
  if (rc) return rc;
  size_t cap = 0, held = 0;
  int64_t any_seq = 0;
  char gone_id[128] = ""; /* a held forward whose destination was deleted: not sent again */
  for (size_t i = 0; rc == 0 && i < n; i++) {
    if (dl[i].state != HOOKD_DS_UNKNOWN) continue;
    hookd_dtrigger trig = to == HOOKD_DS_DELIVERED ? HOOKD_DT_RESOLVE
                          : to == HOOKD_DS_PENDING ? HOOKD_DT_REPLAY
                                                   : HOOKD_DT_DEAD;
    hookd_dstate next;
    if (hookd_dstate_next(HOOKD_DS_UNKNOWN, trig, &next) != 0) {
      rc = HOOKD_STORE_STATE;
      break;
    }
    if (next == HOOKD_DS_PENDING) { /* sent again: not to a destination that is gone */
      sqlite3_stmt *ep = sq_stmt(c, SQ_DL_RESOLVE_EP,
                                 "SELECT deleted_at IS NOT NULL FROM endpoints WHERE id = ?1");
      if (!ep) {
        rc = HOOKD_STORE_ERR;
        break;
      }
      sq_bind_text(ep, 1, dl[i].endpoint_id);
      int step = sqlite3_step(ep);
      bool gone = step != SQLITE_ROW || sqlite3_column_int(ep, 0);
      sqlite3_reset(ep);
      if (step != SQLITE_ROW && step != SQLITE_DONE) { /* a failed read is no "gone" */
        rc = sq_fail(c, "read endpoint");
        break;
      }
      if (gone) { /* stays held: another resolve settles it (completed or dead_lettered) */
        snprintf(gone_id, sizeof gone_id, "%s", dl[i].endpoint_id);
        continue;
      }
    }
    sqlite3_stmt *st = sq_stmt(
        c, SQ_DL_RESOLVE,
        "UPDATE deliveries SET state = ?2, updated_at = ?3,"
        " next_attempt_at = CASE WHEN ?2 = 'pending' THEN ?3 ELSE NULL END,"
        " delivered_at = CASE WHEN ?2 = 'delivered' THEN ?3 ELSE delivered_at END,"
        " dead_at = CASE WHEN ?2 = 'dead' THEN ?3 ELSE dead_at END,"
        " dead_reason = CASE WHEN ?2 = 'dead' THEN 'operator' ELSE dead_reason END,"
        " cycle_base = CASE WHEN ?2 = 'pending' THEN attempt_count ELSE cycle_base END,"
        " cycle_kind = CASE WHEN ?2 = 'pending' THEN 'replay' ELSE cycle_kind END,"
        " cycle_started_at = CASE WHEN ?2 = 'pending' THEN ?3 ELSE cycle_started_at END,"
        /* a retry is a new cycle, as a replay's: under the destination's policy of now, and no
         * older attempt's outcome lands on it */
        " policy_id = CASE WHEN ?2 = 'pending'"
        " THEN (SELECT policy_id FROM endpoints WHERE id = endpoint_id) ELSE policy_id END,"
        " lease_token = lease_token + (?2 = 'pending')"
        " WHERE seq = ?1 AND state = 'unknown'");
    if (!st) {
      rc = HOOKD_STORE_ERR;
      break;
    }
    sq_bind_i64(st, 1, dl[i].seq);
    sq_bind_text(st, 2, hookd_dstate_name(next));
    sq_bind_i64(st, 3, now_ms);
    if (sqlite3_step(st) != SQLITE_DONE) {
      rc = sq_fail(c, "resolve delivery");
      break;
    }
    held++;
    any_seq = dl[i].seq;
    if (next == HOOKD_DS_PENDING &&
        hookd_hint_push(hints, n_hints, &cap, dl[i].endpoint_id, now_ms) != 0)
      rc = HOOKD_STORE_ERR;
  }
  hookd_deliveries_free(dl, n);
  hookd_inbox_free(&r);
  if (rc == 0 && held == 0) {
    if (gone_id[0])
      snprintf(c->err, sizeof c->err,
               "destination %.64s was deleted: resolve as completed or dead_lettered, not retry",
               gone_id);
    else
      snprintf(c->err, sizeof c->err, "the record has no delivery held in the unknown state");
    rc = HOOKD_STORE_STATE;
  }
  if (rc == 0) rc = sq_inbox_follow(c, any_seq, now_ms, NULL, NULL);
  if (rc == 0) *n_resolved = held;
  if (rc) {
    hookd_due_hints_free(*hints, *n_hints);
    *hints = NULL;
    *n_hints = 0;
  }
  return rc;
}

/* The objects' newest versions not raised for the window, oldest first by their index: a
 * late event of an object forgotten so is taken as its first version (docs/inbound.md). */
int sq_object_versions_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                             bool *more) {
  sqlite3_stmt *st = sq_stmt(c, SQ_VERSION_PURGE,
                             "DELETE FROM object_versions WHERE (source_id, object_key) IN"
                             " (SELECT source_id, object_key FROM object_versions"
                             " INDEXED BY object_versions_seen WHERE seen_at < ?1"
                             " ORDER BY seen_at LIMIT ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, before_ms);
  sq_bind_i64(st, 2, limit);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return sq_fail(c, "purge object versions");
  *purged = sqlite3_changes(c->db);
  *more = *purged >= limit;
  return HOOKD_STORE_OK;
}

/* Retention walks the rows in seq order from *after_seq and stops at the first one inside the
 * window: seq grows with received_at, so no index on received_at is written on every receive.
 * A record whose forward is not finished (a delivery pending, retrying, or held as unknown for an
 * operator) is kept whatever its age: its resolve needs it, and so does the deduplication of a
 * late redelivery, which would otherwise be forwarded under a new Idempotency-Key. A purged
 * record takes its event with it (body, forwards, attempts: RETAINED_DELIVERY keeps those touched
 * inside the window), except the store's newest event, whose seq must not be handed out again. */
int sq_inbox_purge(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                   int *purged) {
  *purged = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_INBOX_PURGE,
                             "SELECT i.seq, i.received_at, i.event_seq IS NULL"
                             " OR (i.event_seq < (SELECT MAX(seq) FROM events)"
                             "  AND NOT EXISTS (" RETAINED_DELIVERY("i.event_seq") "))"
                             " FROM inbox i WHERE i.seq > ?2 ORDER BY i.seq LIMIT ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 3, before_ms);
  sq_bind_i64(st, 4, hookd_now_ms()); /* (RETAINED_DELIVERY's now) */
  int64_t *del;
  int n, rc = sq_retention_walk(c, st, before_ms, limit, after_seq, &del, &n);
  if (!rc) /* what an op frees within its budget: bodies, forwards, attempts (as sq_event_expire) */
    rc = sq_retention_trim(c, SQ_INBOX_WEIGH,
                           "WITH e(s, b) AS (SELECT i.event_seq, length(v.body) FROM inbox i"
                           " LEFT JOIN events v ON v.seq = i.event_seq WHERE i.seq = ?1)"
                           SQ_WEIGH_EVENT,
                           HOOKD_PURGE_BYTES, del, &n, after_seq);
  if (rc) {
    free(del);
    return rc;
  }
  if (n > 0) rc = sq_retention_mark(c, "inbound", before_ms);
  st = rc ? NULL
          : sq_stmt(c, SQ_INBOX_PURGE_DEL, "DELETE FROM inbox WHERE seq = ?1 RETURNING event_seq");
  for (int i = 0; st && i < n; i++) {
    sq_bind_i64(st, 1, del[i]);
    int step = sqlite3_step(st);
    int64_t ev = step == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
    sqlite3_reset(st);
    if (step != SQLITE_ROW && step != SQLITE_DONE) {
      free(del);
      return sq_fail(c, "purge inbox");
    }
    if (ev && (rc = sq_event_delete(c, ev, false)) != 0) break;
    (*purged)++;
  }
  free(del);
  return rc ? rc : st ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
}

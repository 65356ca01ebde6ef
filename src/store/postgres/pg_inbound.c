/* pg_inbound.c — PostgreSQL backend: inbound sources, the receive path's atomic step, the
 * inbox record that follows its deliveries, operator resolution and retention purge
 * (docs/inbound.md), ported from the SQLite backend's sqlite_inbound.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/version.h"
#include "store/postgres/pg_int.h"

/* What an inbound destination's delete writes on a delivery it holds (pg_endpoint_delete): the
 * destination is not idempotent and its request may be out (the send mark of the lease). */
const char pg_held_deleted[] = "destination deleted while a request to it may have been in flight";

/* ---------- sources ---------- */

#define SRC_COLS                                                                              \
  "id, tenant_id, provider, secrets, tolerance_s, event_types, identity_paths,"               \
  " business_paths, business_operation, version_object_path, version_path, version_header,"   \
  " generic, created_at, updated_at, deleted_at, prior_identity_paths, prior_identity_until," \
  " business_types"

static void read_source(const PGresult *r, int row, hookd_source *s) {
  memset(s, 0, sizeof *s);
  s->id = pg_str(r, row, 0);
  s->tenant_id = pg_str(r, row, 1);
  s->provider = pg_str(r, row, 2);
  s->secrets = pg_str(r, row, 3);
  s->tolerance_s = (int)pg_i64(r, row, 4);
  s->event_types = pg_str(r, row, 5);
  s->identity_paths = pg_str(r, row, 6);
  s->business_paths = pg_str(r, row, 7);
  s->business_operation = pg_str(r, row, 8);
  s->version_object_path = pg_str(r, row, 9);
  s->version_path = pg_str(r, row, 10);
  s->version_header = pg_str(r, row, 11);
  s->generic = pg_str(r, row, 12);
  s->created_ms = pg_i64(r, row, 13);
  s->updated_ms = pg_i64(r, row, 14);
  s->deleted_ms = pg_i64(r, row, 15);
  s->prior_identity_paths = pg_str(r, row, 16);
  s->prior_identity_until_ms = pg_i64(r, row, 17);
  s->business_types = pg_str(r, row, 18);
}

static void rd_source(const PGresult *r, int row, void *rec) { read_source(r, row, rec); }

/* The source's fields as parameters: $1 id … $13 generic, then (create only) created_at, then
 * updated_at, prior_identity_paths, prior_identity_until, business_types — $14…$18 for an
 * insert, $14…$17 for an update (deleted_at is never bound: NULL at creation). */
static void bind_source_fields(pg_params *p, const hookd_source *s, bool create) {
  pg_p_init(p);
  pg_p_text(p, s->id);
  pg_p_text(p, s->tenant_id);
  pg_p_text(p, s->provider);
  pg_p_text(p, s->secrets);
  pg_p_i64(p, s->tolerance_s);
  pg_p_text(p, s->event_types);
  pg_p_text(p, s->identity_paths);
  pg_p_text(p, s->business_paths);
  pg_p_text(p, s->business_operation);
  pg_p_text(p, s->version_object_path);
  pg_p_text(p, s->version_path);
  pg_p_text(p, s->version_header);
  pg_p_text(p, s->generic);
  if (create) pg_p_i64(p, s->created_ms);
  pg_p_i64(p, s->updated_ms);
  pg_p_text(p, s->prior_identity_paths);
  pg_p_i64(p, s->prior_identity_until_ms);
  pg_p_text(p, s->business_types);
}

int pg_source_create(hookd_store_conn *c, const hookd_source *s, hookd_endpoint *dests,
                     size_t n_dests, int max_eps) {
  int trc = pg_tenant_live(c, s->tenant_id);
  if (trc) return trc;
  pg_params p;
  bind_source_fields(&p, s, true);
  /* a taken id is an expected answer, not a failing statement (which would abort the
   * transaction): nothing inserted, then the row that holds it says why */
  int64_t made = pg_x(c,
                      "INSERT INTO sources(" SRC_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7,"
                      " $8, $9, $10, $11, $12, $13, $14, $15, NULL, $16, $17, $18)"
                      " ON CONFLICT (id) DO NOTHING",
                      &p, "insert source");
  if (made < 0) return pg_insert_failed(c);
  if (made == 0) {
    /* a deleted source keeps its row (its inbox records name it): its id is taken for good,
     * which "already exists" alone would not explain — said only to the tenant that had it (a
     * lookup that failed says it is taken) */
    bool deleted, own;
    (void)pg_id_holder(c,
                       "SELECT (deleted_at IS NOT NULL)::int, (tenant_id = $2::text)::int"
                       " FROM sources WHERE id = $1",
                       s->id, s->tenant_id, "look up source", &deleted, &own);
    deleted = deleted && own;
    snprintf(c->err, sizeof c->err,
             deleted ? "source %s was deleted, and a source id is never used again (its inbox "
                       "records keep naming it): choose another id, or add destinations to a "
                       "source that still exists (POST /v1/sources/{id}/destinations)"
                     : "source id %s is taken: choose another id, or leave it out to have one "
                       "generated",
             s->id);
    return HOOKD_STORE_EXISTS;
  }
  for (size_t i = 0; i < n_dests; i++) {
    int rc = pg_endpoint_create(c, &dests[i], max_eps);
    if (rc != 0) return rc;
  }
  return HOOKD_STORE_OK;
}

static int source_dests(hookd_store_conn *c, const char *id, hookd_endpoint **dests, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT " PG_EP_COLS PG_EP_FROM " WHERE e.source_id = $1"
                     " AND e.deleted_at IS NULL ORDER BY e.id",
                     &p, "list destinations");
  return pg_read_endpoints(c, r, dests, n);
}

int pg_source_get(hookd_store_conn *c, const char *id, hookd_source *out, hookd_endpoint **dests,
                  size_t *n_dests) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT " SRC_COLS " FROM sources WHERE id = $1"
                     " AND deleted_at IS NULL",
                     &p, "get source");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  read_source(r, 0, out);
  PQclear(r);
  if (!dests) return HOOKD_STORE_OK;
  int rc = source_dests(c, id, dests, n_dests);
  if (rc != 0) hookd_source_free(out);
  return rc;
}

int pg_source_update(hookd_store_conn *c, const hookd_source *s) {
  pg_params p;
  bind_source_fields(&p, s, false);
  int64_t n = pg_x(c,
                   "UPDATE sources SET secrets = $4, tolerance_s = $5, event_types = $6,"
                   " identity_paths = $7, business_paths = $8, business_operation = $9,"
                   " version_object_path = $10, version_path = $11,"
                   " version_header = $12, generic = $13, updated_at = $14,"
                   " prior_identity_paths = $15, prior_identity_until = $16,"
                   " business_types = $17"
                   " WHERE id = $1 AND tenant_id = $2 AND provider = $3"
                   " AND deleted_at IS NULL",
                   &p, "update source");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int pg_source_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                            hookd_delete_counts *out) {
  *out = (hookd_delete_counts){0};
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  int64_t n = pg_x(c,
                   "UPDATE sources SET deleted_at = $2, updated_at = $2, secrets = ''"
                   " WHERE id = $1 AND deleted_at IS NULL",
                   &p, "delete source");
  if (n < 0) return HOOKD_STORE_ERR;
  if (n != 1) return HOOKD_STORE_NOTFOUND;
  hookd_endpoint *dests = NULL;
  size_t nd = 0;
  int rc = source_dests(c, id, &dests, &nd);
  for (size_t i = 0; rc == 0 && i < nd; i++) {
    hookd_delete_counts k;
    rc = pg_endpoint_delete_within(c, dests[i].id, now_ms, budget, &k);
    out->cancelled += k.cancelled;
    out->held += k.held;
    out->more |= k.more;
  }
  hookd_endpoints_free(dests, nd);
  return rc;
}

int pg_source_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_delete_counts *out) {
  int budget = HOOKD_DELETE_STEP;
  return pg_source_delete_within(c, id, now_ms, &budget, out);
}

int pg_source_list(hookd_store_conn *c, hookd_source **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  PGresult *r = pg_q(c, "SELECT " SRC_COLS " FROM sources WHERE deleted_at IS NULL ORDER BY id",
                     &p, "list sources");
  return pg_read_rows(c, r, sizeof **out, rd_source, (void **)out, n,
                      "list sources: out of memory");
}

int pg_source_page(hookd_store_conn *c, const char *tenant_id, const char *provider,
                   const char *after, int limit, hookd_source **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, tenant_id);
  pg_p_text(&p, after);
  pg_p_text(&p, provider);
  pg_p_i64(&p, limit);
  /* (no tenant: every tenant's, by id) */
  PGresult *r = tenant_id ? pg_q(c,
                                 "SELECT " SRC_COLS " FROM sources WHERE tenant_id = $1"
                                 " AND id > $2 AND deleted_at IS NULL"
                                 " AND ($3::text IS NULL OR provider = $3)"
                                 " ORDER BY id LIMIT $4::bigint",
                                 &p, "list sources")
                          : pg_q(c,
                                 "SELECT " SRC_COLS " FROM sources WHERE $1::text IS NULL"
                                 " AND id > $2 AND deleted_at IS NULL"
                                 " AND ($3::text IS NULL OR provider = $3)"
                                 " ORDER BY id LIMIT $4::bigint",
                                 &p, "list sources");
  return pg_read_rows(c, r, sizeof **out, rd_source, (void **)out, n,
                      "list sources: out of memory");
}

/* ---------- inbox rows ---------- */

#define INBOX_COLS                                                                            \
  "i.seq, i.id, i.source_id, i.tenant_id, i.provider, i.identity_key, i.identity_kind,"       \
  " i.provider_event_id, i.business_key, i.event_type, i.payload_hash, i.status,"             \
  " i.conflict_of, i.event_seq, i.attempt_count, i.received_at, i.completed_at,"              \
  " i.result_ref, i.last_error,"                                                               \
  " (SELECT MAX(d.leased_until) FROM deliveries d WHERE d.event_seq = i.event_seq)"

static void read_inbox(const PGresult *r, int row, hookd_inbox *x) {
  memset(x, 0, sizeof *x);
  x->seq = pg_i64(r, row, 0);
  x->id = pg_str(r, row, 1);
  x->source_id = pg_str(r, row, 2);
  x->tenant_id = pg_str(r, row, 3);
  x->provider = pg_str(r, row, 4);
  x->identity_key = pg_str(r, row, 5);
  x->identity_kind = pg_str(r, row, 6);
  x->provider_event_id = pg_str(r, row, 7);
  x->business_key = pg_str(r, row, 8);
  x->event_type = pg_str(r, row, 9);
  x->payload_hash = pg_str(r, row, 10);
  x->status = pg_str(r, row, 11);
  x->conflict_of = pg_str(r, row, 12);
  x->event_seq = pg_i64(r, row, 13);
  x->attempt_count = (int)pg_i64(r, row, 14);
  x->received_ms = pg_i64(r, row, 15);
  x->completed_ms = pg_i64(r, row, 16);
  x->result_ref = pg_str(r, row, 17);
  x->last_error = pg_str(r, row, 18);
  x->lease_until_ms = pg_i64(r, row, 19);
}

/* One inbox row by sql (a string literal: $1 = a, and $2 = b unless b is NULL). */
static int inbox_by(hookd_store_conn *c, const char *sql, const char *a, const char *b,
                    hookd_inbox *out) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, a);
  if (b) pg_p_text(&p, b);
  PGresult *r = pg_q(c, sql, &p, "read inbox");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  read_inbox(r, 0, out);
  PQclear(r);
  return HOOKD_STORE_OK;
}

static const char inbox_get_sql[] = "SELECT " INBOX_COLS " FROM inbox i WHERE i.id = $1";

static int inbox_get_row(hookd_store_conn *c, const char *id, hookd_inbox *out) {
  return inbox_by(c, inbox_get_sql, id, NULL, out);
}

/* Inserts the record unless its identity is known (HOOKD_STORE_EXISTS then: the arbiter's
 * ON CONFLICT, never a failing statement); *seq (when not NULL) gets its seq. A new record is
 * written without a link to an event: receive_new links it once the event is inserted (an
 * event's seq comes from its identity, never computed ahead). */
static int inbox_insert(hookd_store_conn *c, const hookd_receive_req *req, const char *id,
                        const char *identity_key, const char *status, const char *conflict_of,
                        int64_t *seq) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, req->source_id);
  pg_p_text(&p, req->tenant_id);
  pg_p_text(&p, req->provider);
  pg_p_text(&p, identity_key);
  pg_p_text(&p, req->identity_kind);
  pg_p_text(&p, req->provider_event_id);
  pg_p_text(&p, req->event_type);
  pg_p_text(&p, req->payload_hash);
  pg_p_text(&p, status);
  pg_p_text(&p, conflict_of);
  pg_p_i64(&p, req->now_ms);
  PGresult *r = pg_q(c,
                     "INSERT INTO inbox(id, source_id, tenant_id, provider, identity_key,"
                     " identity_kind, provider_event_id, event_type, payload_hash, status,"
                     " conflict_of, received_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
                     " $10, $11, $12) ON CONFLICT (source_id, identity_key) DO NOTHING"
                     " RETURNING seq",
                     &p, "insert inbox");
  if (!r) return HOOKD_STORE_ERR;
  int rows = PQntuples(r);
  if (rows == 1 && seq) *seq = pg_i64(r, 0, 0);
  PQclear(r);
  return rows == 1 ? HOOKD_STORE_OK : HOOKD_STORE_EXISTS;
}

/* A record that will not be forwarded after all (semantic duplicate, stale): its status, no
 * link to an event (none is written), and no business key either, so a later event with that
 * key is not taken for a duplicate of one that was never forwarded. */
static int inbox_settle(hookd_store_conn *c, const char *id, const char *status,
                        const char *conflict_of) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, status);
  pg_p_text(&p, conflict_of);
  return pg_x(c,
              "UPDATE inbox SET status = $2, conflict_of = $3, event_seq = NULL,"
              " business_key = NULL WHERE id = $1",
              &p, "update inbox") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
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
 * as the newest and returns 0 (HOOKD_STORE_ERR on failure). */
static int older_than_seen(hookd_store_conn *c, const hookd_receive_req *req) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->source_id);
  pg_p_text(&p, req->object_key);
  PGresult *r = pg_q(c,
                     "SELECT version, numeric FROM object_versions"
                     " WHERE source_id = $1 AND object_key = $2",
                     &p, "read object version");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 1) {
    const char *seen = pg_val(r, 0, 0);
    int seen_kind = pg_i64(r, 0, 1) ? HOOKD_VERSION_NUMBER : HOOKD_VERSION_TEXT;
    int kind = req->version_numeric ? HOOKD_VERSION_NUMBER : HOOKD_VERSION_TEXT;
    bool older = hookd_version_older(req->version, kind, seen, seen_kind);
    PQclear(r);
    if (older) return 1;
    /* a text version is never older, and never the newest either: it does not replace a
     * number (10, "n/a", 5 forwarded 5 — the high-water mark was gone) */
    if (seen_kind == HOOKD_VERSION_NUMBER && kind == HOOKD_VERSION_TEXT) return 0;
  } else {
    PQclear(r);
  }
  pg_p_init(&p);
  pg_p_text(&p, req->source_id);
  pg_p_text(&p, req->object_key);
  pg_p_text(&p, req->version);
  pg_p_i64(&p, req->version_numeric);
  pg_p_i64(&p, req->now_ms);
  return pg_x(c,
              "INSERT INTO object_versions(source_id, object_key, version, numeric, seen_at)"
              " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (source_id, object_key)"
              " DO UPDATE SET version = EXCLUDED.version, numeric = EXCLUDED.numeric,"
              " seen_at = EXCLUDED.seen_at",
              &p, "record object version") < 0
             ? HOOKD_STORE_ERR
             : 0;
}

/* Nowhere to forward a new event (every destination of its source deleted): refused before
 * anything is written (the op runs without a savepoint: a failure after a write would make its
 * whole batch run again), so that the provider retries until one exists. A known identity is
 * still answered (a duplicate or a conflict, below). */
static int no_destination(hookd_store_conn *c, const hookd_receive_req *req) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->source_id);
  pg_p_text(&p, req->identity_key);
  PGresult *r = pg_q(c,
                     "SELECT CASE WHEN EXISTS(SELECT 1 FROM endpoints"
                     " WHERE source_id = $1 AND deleted_at IS NULL) THEN 1"
                     " ELSE (EXISTS(SELECT 1 FROM inbox WHERE source_id = $1"
                     " AND identity_key = $2::text))::int END",
                     &p, "destinations");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return pg_fail(c, "destinations");
  }
  bool refused = !pg_i64(r, 0, 0);
  PQclear(r);
  return refused ? HOOKD_STORE_STATE : HOOKD_STORE_OK;
}

/* A record filtered by an allowlist that was widened since: the provider's redelivery of it
 * (the same payload) is taken as new, under the same record — its body was not kept, and a
 * mistaken allowlist would otherwise hold the event filtered for ever (the provider was told
 * 200). 1 when the record is `received` again (receive_new goes on, and links it to the event
 * it inserts). HOOKD_STORE_STATE, before writing, when no destination is left to forward to:
 * refused as a new event is, so that the provider retries (a 200 `filtered` would end its
 * retries, and the event the allowlist now takes would never be forwarded — an audit). */
static int promote_filtered(hookd_store_conn *c, const hookd_inbox *orig,
                            const hookd_receive_req *req) {
  /* the receive path's own check, without an identity: only the destinations count */
  int rc = no_destination(c, &(hookd_receive_req){.source_id = req->source_id});
  if (rc) return rc;
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, orig->id);
  pg_p_text(&p, req->event_type);
  int64_t n = pg_x(c,
                   "UPDATE inbox SET status = 'received', event_type = $2"
                   " WHERE id = $1 AND status = 'filtered'",
                   &p, "promote filtered");
  if (n < 0) return HOOKD_STORE_ERR;
  return n == 1 ? 1 : 0;
}

static int receive_new(hookd_store_conn *c, const hookd_receive_req *req, int64_t inbox_seq,
                       hookd_receive_res *res);

static const char inbox_by_key_sql[] =
    "SELECT " INBOX_COLS " FROM inbox i WHERE i.source_id = $1 AND i.identity_key = $2";

/* Whether the request carries orig's payload (its hash as hookd takes it now, or as an earlier
 * hookd did). */
static bool same_payload(const hookd_inbox *orig, const hookd_receive_req *req) {
  return !strcmp(orig->payload_hash, req->payload_hash) ||
         (req->alt_payload_hash && !strcmp(orig->payload_hash, req->alt_payload_hash));
}

/* The request's identity is known, as orig's (taken over; freed here): the same payload is a
 * duplicate, another one a conflict. */
static int known_identity(hookd_store_conn *c, const hookd_receive_req *req, hookd_inbox *orig,
                          hookd_receive_res *res) {
  int rc;
  if (same_payload(orig, req)) {
    /* filtered before and allowed now (its source's allowlist was widened since): the
     * provider's redelivery is taken as new, under the same record */
    rc = 0;
    if (!req->filtered && !strcmp(orig->status, "filtered")) rc = promote_filtered(c, orig, req);
    if (rc == 1) {
      hookd_receive_req again = *req;
      again.inbox_id = orig->id;
      rc = receive_new(c, &again, orig->seq, res);
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
  rc = inbox_insert(c, req, req->inbox_id, key, "conflict", orig->id, NULL);
  hookd_inbox_free(orig);
  if (rc == HOOKD_STORE_EXISTS) {
    rc = inbox_by(c, inbox_by_key_sql, req->source_id, key, &res->record);
    if (!rc) res->outcome = HOOKD_RECV_DUPLICATE;
    return rc;
  }
  if (rc) return rc;
  res->outcome = HOOKD_RECV_CONFLICT;
  return inbox_get_row(c, req->inbox_id, &res->record);
}

/* Runs without a savepoint (docs/architecture.md "Storage interface"): every expected outcome
 * (a known identity, a semantic duplicate, a stale version, no destination) is found by a
 * lookup or an ON CONFLICT, never by a failing statement, which in PostgreSQL would abort the
 * whole transaction; its refusals come before its first write. Run twice (its batch redone in
 * a new transaction), it starts over from res cleared. */
int pg_receive(hookd_store_conn *c, const hookd_receive_req *req, hookd_receive_res *res) {
  memset(res, 0, sizeof *res);
  int rc;
  hookd_inbox orig;
  /* keyed as the source's rule was before its change, a record with the same payload is this
   * event's: a provider's retry of an event received before the change. Another payload under
   * that key is not a conflict: the new rule tells events apart that the old one did not (a
   * rule too coarse is what gets changed), so the new key decides. */
  if (req->prior_identity_key) {
    rc = inbox_by(c, inbox_by_key_sql, req->source_id, req->prior_identity_key, &orig);
    if (rc == HOOKD_STORE_OK && same_payload(&orig, req)) return known_identity(c, req, &orig, res);
    if (rc == HOOKD_STORE_OK) hookd_inbox_free(&orig);
    else if (rc != HOOKD_STORE_NOTFOUND) return rc;
  }
  if (!req->filtered && (rc = no_destination(c, req)) != 0) return rc;
  int64_t inbox_seq = 0;
  rc = inbox_insert(c, req, req->inbox_id, req->identity_key,
                    req->filtered ? "filtered" : "received", NULL, &inbox_seq);
  if (rc == HOOKD_STORE_EXISTS) {
    rc = inbox_by(c, inbox_by_key_sql, req->source_id, req->identity_key, &orig);
    return rc ? rc : known_identity(c, req, &orig, res);
  }
  if (rc) return rc;
  if (req->filtered) {
    res->outcome = HOOKD_RECV_FILTERED;
    return inbox_get_row(c, req->inbox_id, &res->record);
  }
  return receive_new(c, req, inbox_seq, res);
}

/* The delivery insert of an inbound forward (the fan-out's, without an ordering key: the
 * destinations of a source are not ordered); RETURNING seq gives a row only when inserted. */
static const char dl_insert_sql[] =
    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"
    " next_attempt_at, policy_id, created_at, updated_at)"
    " VALUES ($1, $2, $3, $4, 'pending', $5, $5, $6, $5, $5)"
    " ON CONFLICT (event_seq, endpoint_id) DO NOTHING RETURNING seq";

/* A forward of the inbound event at event_seq to the destination in eps's row (id, policy_id):
 * a pending delivery, due now; *made is its seq, 0 when the destination has one already (a
 * re-forward's; a new event's go in one statement, receive_new). */
static int insert_forward(hookd_store_conn *c, const PGresult *eps, int row, int64_t event_seq,
                          const char *tenant_id, int64_t now_ms, int64_t *made) {
  *made = 0;
  char did[HOOKD_ID_MAX];
  if (hookd_id_new("dlv", now_ms, did) != 0) return pg_fail(c, "new delivery id");
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, did);
  pg_p_i64(&p, event_seq);
  pg_p_text(&p, pg_val(eps, row, 0));
  pg_p_text(&p, tenant_id);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, pg_i64(eps, row, 1));
  PGresult *r = pg_q(c, dl_insert_sql, &p, "insert delivery");
  if (!r) return HOOKD_STORE_ERR;
  *made = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* A new record (req->inbox_id, at inbox_seq) that passed the allowlist: a semantic duplicate, a
 * stale version, or the event stored once with one delivery per destination. */
static int receive_new(hookd_store_conn *c, const hookd_receive_req *req, int64_t inbox_seq,
                       hookd_receive_res *res) {
  int rc;
  pg_params p;
  PGresult *r;
  /* a business key already taken by another event: a semantic duplicate (looked up: the
   * unique index would fail the statement, and with it the transaction). The key is written
   * with the record's link to its event, below. */
  if (req->business_key) {
    pg_p_init(&p);
    pg_p_text(&p, req->source_id);
    pg_p_text(&p, req->business_key);
    pg_p_text(&p, req->inbox_id);
    r = pg_q(c,
             "SELECT id FROM inbox WHERE source_id = $1 AND business_key = $2"
             " AND id <> $3",
             &p, "look up business key");
    if (!r) return HOOKD_STORE_ERR;
    if (PQntuples(r) > 0) {
      char *orig_id = pg_str(r, 0, 0);
      PQclear(r);
      if (!orig_id) return pg_fail(c, "look up business key: out of memory");
      rc = inbox_settle(c, req->inbox_id, "duplicate", orig_id);
      free(orig_id);
      if (rc) return rc;
      res->outcome = HOOKD_RECV_SEMANTIC_DUP;
      return inbox_get_row(c, req->inbox_id, &res->record);
    }
    PQclear(r);
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

  /* the raw body, stored once, as an inbound engine event (its seq from the identity), the
   * record linked to it with its business key (checked free above), and the source's
   * destinations: one round trip. One delivery per destination, disabled ones included:
   * acknowledged, the event must reach the application, so a disabled destination's delivery
   * waits until it is enabled again (one skipped here was never forwarded, and the provider's
   * redeliveries were duplicates). */
  pg_p_init(&p);
  pg_p_text(&p, req->inbox_id);
  pg_p_text(&p, req->tenant_id);
  pg_p_text(&p, req->event_type && *req->event_type ? req->event_type : "unknown");
  pg_p_blob(&p, req->body, req->body_len);
  pg_p_blob(&p, req->payload_hash, strlen(req->payload_hash));
  pg_p_i64(&p, req->now_ms);
  pg_p_text(&p, req->content_type);
  pg_p_text(&p, req->meta);
  pg_p_text(&p, req->business_key);
  pg_p_text(&p, req->source_id);
  r = pg_q(c,
           "WITH ev AS (INSERT INTO events(id, tenant_id, type, body, request_hash,"
           " occurred_at, created_at, kind, content_type, meta)"
           " VALUES ($1, $2, $3, $4, $5, $6, $6, 'inbound', $7, $8) RETURNING seq),"
           " up AS (UPDATE inbox SET event_seq = ev.seq, business_key = $9 FROM ev"
           " WHERE inbox.id = $1 RETURNING ev.seq)"
           " SELECT (SELECT seq FROM up), d.id, d.policy_id FROM (SELECT 1) one"
           " LEFT JOIN endpoints d ON d.source_id = $10::text AND d.deleted_at IS NULL",
           &p, "insert inbound event");
  if (!r) return HOOKD_STORE_ERR;
  pg_wrote(c, 2); /* (the event at least, even without a record to link: the op wrote) */
  if (PQntuples(r) < 1 || pg_null(r, 0, 0)) {
    PQclear(r);
    return pg_fail(c, "insert inbound event: no record to link");
  }
  int64_t event_seq = pg_i64(r, 0, 0);
  pg_arr ids, dests, policies;
  pg_arr_init(&ids);
  pg_arr_init(&dests);
  pg_arr_init(&policies);
  rc = HOOKD_STORE_OK;
  for (int i = 0; i < PQntuples(r) && !pg_null(r, i, 1); i++) {
    char did[HOOKD_ID_MAX];
    if (hookd_id_new("dlv", req->now_ms, did) != 0) {
      rc = pg_fail(c, "new delivery id");
      break;
    }
    pg_arr_text(&ids, did);
    pg_arr_text(&dests, pg_val(r, i, 1));
    pg_arr_i64(&policies, pg_i64(r, i, 2));
    if (res->n_endpoints < HOOKD_FANOUT_MAX) res->endpoints[res->n_endpoints++] = pg_str(r, i, 1);
  }
  PQclear(r);
  if (rc == HOOKD_STORE_OK && res->n_endpoints > 0) {
    PGresult *made = pg_insert_deliveries(c, event_seq, req->tenant_id, req->now_ms, NULL, &ids,
                                          &dests, &policies);
    if (!made) rc = HOOKD_STORE_ERR;
    PQclear(made);
  }
  pg_arr_free(&ids);
  pg_arr_free(&dests);
  pg_arr_free(&policies);
  if (rc) return rc;
  /* checked before the first write (no_destination); a destination deleted since, in this
   * transaction, cannot be (the writer lock is held) — kept as a backstop */
  if (res->n_endpoints == 0) return HOOKD_STORE_STATE;
  res->outcome = HOOKD_RECV_NEW;
  res->due_ms = req->now_ms;
  return new_record(req, inbox_seq, event_seq, &res->record);
}

/* ---------- the record follows its deliveries ---------- */

int pg_inbox_follow(hookd_store_conn *c, int64_t delivery_seq, int64_t now_ms,
                    const char *last_error, const char *result_ref) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, delivery_seq);
  PGresult *r = pg_q(
      c,
      "SELECT MAX(d.event_seq), SUM((x.state = 'unknown')::int),"
      /* a forward cut off by its destination's delete and replaced since (pg_inbox_reforward
       * marks it, only a forward of a deleted destination) no longer decides the record once
       * dead or cancelled; one not replaced counts as dead-lettered — the forwards made with
       * it, or by a reforward before its delete, replaced nothing */
      " SUM(((x.state = 'dead' OR x.state = 'cancelled') AND x.replaced = 0)::int),"
      /* (nor once replaced while the delete walk has not cancelled it yet: never sent) */
      " SUM((x.state = 'retrying' AND x.replaced = 0)::int),"
      " SUM((x.state = 'pending' AND x.replaced = 0)::int),"
      " SUM((x.state = 'delivered')::int),"
      " SUM(x.attempt_count)::bigint FROM deliveries d JOIN deliveries x"
      " ON x.event_seq = d.event_seq WHERE d.seq = $1",
      &p, "aggregate deliveries");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return pg_fail(c, "aggregate deliveries");
  }
  int64_t event_seq = pg_i64(r, 0, 0);
  /* last_error follows the status (sq_inbox_follow) */
  const char *s1;
  const char *status = hookd_inbox_status_of(pg_i64(r, 0, 1), pg_i64(r, 0, 2), pg_i64(r, 0, 3),
                                             pg_i64(r, 0, 4), pg_i64(r, 0, 5), &s1);
  int64_t attempts = pg_i64(r, 0, 6);
  PQclear(r);
  bool replace = s1 || !strcmp(status, "completed");
  char deciding[256] = "";
  if (s1) {
    pg_p_init(&p);
    pg_p_i64(&p, event_seq);
    pg_p_text(&p, s1);
    pg_p_text(&p, !strcmp(s1, "dead") ? "cancelled" : s1);
    r = pg_q(c,
             "SELECT last_error FROM deliveries WHERE event_seq = $1"
             " AND (state = $2 OR state = $3) AND (replaced = 0 OR state = 'unknown')"
             " ORDER BY updated_at DESC, seq DESC LIMIT 1",
             &p, "read last error");
    if (!r) return HOOKD_STORE_ERR;
    if (PQntuples(r) == 1 && !pg_null(r, 0, 0)) pg_copy(r, 0, 0, deciding, sizeof deciding);
    PQclear(r);
  }
  pg_p_init(&p);
  pg_p_i64(&p, event_seq);
  pg_p_text(&p, status);
  pg_p_i64(&p, attempts);
  pg_p_text(&p, s1 ? (deciding[0] ? deciding : NULL) : replace ? NULL : last_error);
  pg_p_text(&p, result_ref);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, replace);
  return pg_x(c,
              "UPDATE inbox SET status = $2::text, attempt_count = $3,"
              " last_error = CASE WHEN $7::bigint <> 0 THEN $4::text"
              " ELSE COALESCE($4::text, last_error) END,"
              " result_ref = COALESCE($5::text, result_ref),"
              " completed_at = CASE WHEN $2::text = 'completed'"
              " THEN COALESCE(completed_at, $6::bigint) ELSE NULL END"
              " WHERE event_seq = $1 AND status IN ('received', 'retryable_failed',"
              " 'completed', 'dead_lettered', 'unknown')",
              &p, "follow inbox") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* ---------- reads ---------- */

int pg_inbox_get(hookd_store_conn *c, const char *id, hookd_inbox *out, hookd_delivery **dl,
                 size_t *n) {
  int rc = inbox_get_row(c, id, out);
  if (rc || !dl) return rc;
  *dl = NULL;
  *n = 0;
  if (!out->event_seq) return HOOKD_STORE_OK;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, out->event_seq);
  PGresult *r = pg_q(c,
                     "SELECT " PG_DELIVERY_COLS
                     " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                     " WHERE d.event_seq = $1 ORDER BY d.id",
                     &p, "inbox deliveries");
  rc = pg_read_deliveries(c, r, dl, n);
  if (rc != 0) hookd_inbox_free(out);
  return rc;
}

static void rd_inbox(const PGresult *r, int row, void *rec) { read_inbox(r, row, rec); }

int pg_inbox_list(hookd_store_conn *c, const hookd_inbox_filter *f, hookd_inbox **out, size_t *n) {
  const char *st = f->status;
  bool processing = st && !strcmp(st, "processing");
  bool leasable = st && (!strcmp(st, "received") || !strcmp(st, "retryable_failed"));
  pg_params p;
  char *prefix;
  pg_p_init(&p);
  pg_p_text(&p, f->tenant_id);
  pg_p_text(&p, f->source_id);
  pg_p_text(&p, processing ? "received" : st);
  pg_p_i64(&p, f->before_seq > 0 ? f->before_seq : INT64_MAX);
  pg_p_i64(&p, f->limit);
  pg_p_i64(&p, f->now_ms);
  pg_p_text(&p, processing ? "retryable_failed" : NULL);
  pg_p_i64(&p, processing ? 2 : leasable ? 1 : 0);
  pg_p_text(&p, f->event_id);
  if (pg_bind_type_filter(&p, f->event_type, &prefix) != 0)
    return pg_fail(c, "list inbox: out of memory");
  pg_p_i64(&p, f->since_ms);
  pg_p_i64(&p, f->until_ms);
  /* the status as GET shows it: "processing" is a received or retryable_failed record under a
   * live lease (stored statuses $3 and $7, the lease wanted by $8: 2 live, 1 not, 0 either).
   * One statement per shape, each read from an index's ranges (sqlite_inbound.c's
   * sq_inbox_list): a provider's event id, else a source's records, else a tenant's; a range
   * without a status is one per status, each its newest matches, merged by seq. A catch-all
   * "$1 IS NULL OR …" is no index's condition once the plan is generic. */
/* a record without a type reads "unknown", as the event its request made (which needs one) */
#define PG_INBOX_TYPE "COALESCE(NULLIF(i.event_type, ''), 'unknown')"
#define INBOX_FILTERS                                                                           \
  " AND ($1::text IS NULL OR i.tenant_id = $1) AND ($2::text IS NULL OR i.source_id = $2)"      \
  " AND ($8::bigint = 0 OR (COALESCE((SELECT MAX(d.leased_until) FROM"                          \
  " deliveries d WHERE d.event_seq = i.event_seq), 0) > $6::bigint) = ($8 = 2))"                \
  " AND ($9::text IS NULL OR i.provider_event_id = $9)"                                         \
  " AND ($10::text IS NULL OR " PG_INBOX_TYPE " = $10)"                                        \
  " AND ($11::text IS NULL OR length(" PG_INBOX_TYPE ") > length($11::text)"                   \
  " AND substr(" PG_INBOX_TYPE ", 1, length($11::text)) = $11)"                                \
  " AND ($12::bigint = 0 OR i.received_at >= $12)"                                              \
  " AND ($13::bigint = 0 OR i.received_at < $13)"                                               \
  " AND i.seq < $4::bigint"
#define INBOX_LIST(range)                                                                       \
  "SELECT " INBOX_COLS " FROM inbox i WHERE " range INBOX_FILTERS " ORDER BY i.seq DESC LIMIT $5"
  /* each stored status's newest matches in a range, merged */
#define MERGED(range, statuses)                                                                 \
  "SELECT " INBOX_COLS " FROM inbox i WHERE i.seq IN (SELECT x.seq FROM unnest(ARRAY["         \
  statuses "]::text[]) s(status) CROSS JOIN LATERAL (SELECT i.seq FROM inbox i WHERE " range   \
  " AND i.status = s.status" INBOX_FILTERS " ORDER BY i.seq DESC LIMIT $5) x)"                  \
  " AND " ANY_STATUS " ORDER BY i.seq DESC LIMIT $5"
#define LEASABLE "'received','retryable_failed'"
#define ALL                                                                                     \
  LEASABLE ",'completed','dead_lettered','unknown','filtered','stale','conflict','duplicate'"
#define ANY_STATUS "($3::text IS NULL OR i.status = $3 OR i.status = $7::text)"
#define ONE_STATUS " AND i.status = $3 AND $7::text IS NULL"
#define SRC "i.source_id = $2"
#define TNT "i.tenant_id = $1"
  PGresult *r = pg_q(
      c,
      f->event_id   ? INBOX_LIST("i.provider_event_id = $9 AND " ANY_STATUS)
      : f->source_id ? (!st         ? MERGED(SRC, ALL)
                        : processing ? MERGED(SRC, LEASABLE)
                                     : INBOX_LIST(SRC ONE_STATUS))
      : f->tenant_id ? (!st         ? MERGED(TNT, ALL)
                        : processing ? MERGED(TNT, LEASABLE)
                                     : INBOX_LIST(TNT ONE_STATUS))
                     : INBOX_LIST(ANY_STATUS),
      &p, "list inbox");
#undef TNT
#undef SRC
#undef ONE_STATUS
#undef ALL
#undef LEASABLE
#undef MERGED
#undef INBOX_FILTERS
#undef PG_INBOX_TYPE
#undef ANY_STATUS
#undef INBOX_LIST
  free(prefix);
  return pg_read_rows(c, r, sizeof **out, rd_inbox, (void **)out, n,
                      "list inbox: out of memory");
}

/* ---------- operator resolution ---------- */

int pg_inbox_reforward(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
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
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, rec.source_id);
  pg_p_i64(&p, rec.event_seq);
  pg_p_i64(&p, swept ? 1 : 0);
  PGresult *eps = pg_q(
      c,
      "SELECT e.id, e.policy_id FROM endpoints e WHERE e.source_id = $1 AND e.deleted_at IS NULL"
      " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = $2"
      " AND d.endpoint_id = e.id)"
      /* cut off: dead or cancelled; or not cancelled yet by the delete walk — pending, never
       * sent again (no claim takes a deleted destination's: docs/architecture.md "Deletes") */
      " AND EXISTS (SELECT 1 FROM deliveries d JOIN endpoints g ON g.id = d.endpoint_id"
      " WHERE d.event_seq = $2 AND (d.state = 'dead' OR d.state = 'cancelled'"
      " OR (d.state IN ('pending', 'retrying') AND d.leased_until IS NULL))"
      /* (one replaced already by a forward made since: a destination added later is no
       * replacement of it — an old event fanned out to it) */
      /* (in a sweep, nor one an operator gave up, its destination not idempotent: its
       * handler may have applied it — api_inbox.c's replay_record) */
      " AND NOT ($3::bigint = 1 AND d.state = 'dead'"
      " AND COALESCE(d.dead_reason, '') = 'operator' AND g.idempotent = 0)"
      " AND d.replaced = 0 AND g.deleted_at IS NOT NULL)",
      &p, "reforward");
  if (!eps) {
    hookd_inbox_free(&rec);
    return HOOKD_STORE_ERR;
  }
  size_t cap = 0;
  int64_t first = 0;
  int fail = 0; /* a write or an allocation failed */
  int rows = PQntuples(eps);
  for (int i = 0; i < rows; i++) {
    int64_t made;
    if ((fail = insert_forward(c, eps, i, rec.event_seq, rec.tenant_id, now_ms, &made)) != 0)
      break;
    if (!made) continue;
    if (!first) first = made;
    (*n_made)++;
    if (hookd_hint_push(hints, n_hints, &cap, pg_val(eps, i, 0), now_ms)) {
      fail = pg_fail(c, "reforward: out of memory");
      break;
    }
  }
  PQclear(eps);
  int64_t rec_event_seq = rec.event_seq;
  hookd_inbox_free(&rec);
  if (fail) {
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
    pg_p_init(&p);
    pg_p_i64(&p, rec_event_seq);
    pg_p_i64(&p, first);
    if (pg_x(c,
             "UPDATE deliveries SET replaced = 1 WHERE event_seq = $1 AND seq < $2"
             " AND replaced = 0 AND EXISTS (SELECT 1 FROM endpoints g"
             " WHERE g.id = deliveries.endpoint_id AND g.deleted_at IS NOT NULL)",
             &p, "mark replaced") < 0)
      rc = HOOKD_STORE_ERR;
  }
  if (!rc && first) rc = pg_inbox_follow(c, first, now_ms, NULL, NULL);
  if (rc) {
    hookd_due_hints_free(*hints, *n_hints);
    *hints = NULL;
    *n_hints = 0;
  }
  return rc;
}

int pg_inbox_resolve(hookd_store_conn *c, const char *id, hookd_dstate to, int64_t now_ms,
                     size_t *n_resolved, hookd_due_hint **hints, size_t *n_hints) {
  *n_resolved = 0;
  *hints = NULL;
  *n_hints = 0;
  hookd_inbox r;
  hookd_delivery *dl = NULL;
  size_t n = 0;
  int rc = pg_inbox_get(c, id, &r, &dl, &n);
  if (rc) return rc;
  size_t cap = 0, held = 0;
  int64_t any_seq = 0;
  char gone_id[128] = ""; /* a held forward whose destination was deleted: not sent again */
  pg_params p;
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
      pg_p_init(&p);
      pg_p_text(&p, dl[i].endpoint_id);
      PGresult *ep = pg_q(c, "SELECT (deleted_at IS NOT NULL)::int FROM endpoints WHERE id = $1",
                          &p, "resolve: destination");
      if (!ep) {
        rc = HOOKD_STORE_ERR;
        break;
      }
      bool gone = PQntuples(ep) != 1 || pg_i64(ep, 0, 0);
      PQclear(ep);
      if (gone) { /* stays held: another resolve settles it (completed or dead_lettered) */
        snprintf(gone_id, sizeof gone_id, "%s", dl[i].endpoint_id);
        continue;
      }
    }
    pg_p_init(&p);
    pg_p_i64(&p, dl[i].seq);
    pg_p_text(&p, hookd_dstate_name(next));
    pg_p_i64(&p, now_ms);
    if (pg_x(c,
             "UPDATE deliveries SET state = $2::text, updated_at = $3,"
             " next_attempt_at = CASE WHEN $2::text = 'pending' THEN $3::bigint ELSE NULL END,"
             " delivered_at = CASE WHEN $2::text = 'delivered' THEN $3::bigint"
             " ELSE delivered_at END,"
             " dead_at = CASE WHEN $2::text = 'dead' THEN $3::bigint ELSE dead_at END,"
             " dead_reason = CASE WHEN $2::text = 'dead' THEN 'operator' ELSE dead_reason END,"
             " cycle_base = CASE WHEN $2::text = 'pending' THEN attempt_count"
             " ELSE cycle_base END,"
             " cycle_kind = CASE WHEN $2::text = 'pending' THEN 'replay' ELSE cycle_kind END,"
             " cycle_started_at = CASE WHEN $2::text = 'pending' THEN $3::bigint"
             " ELSE cycle_started_at END,"
             /* a retry is a new cycle, as a replay's (sqlite_inbound.c) */
             " policy_id = CASE WHEN $2::text = 'pending'"
             " THEN (SELECT e.policy_id FROM endpoints e WHERE e.id = deliveries.endpoint_id)"
             " ELSE policy_id END,"
             " lease_token = lease_token + CASE WHEN $2::text = 'pending' THEN 1 ELSE 0 END"
             " WHERE seq = $1 AND state = 'unknown'",
             &p, "resolve delivery") < 0) {
      rc = HOOKD_STORE_ERR;
      break;
    }
    held++;
    any_seq = dl[i].seq;
    if (next == HOOKD_DS_PENDING &&
        hookd_hint_push(hints, n_hints, &cap, dl[i].endpoint_id, now_ms) != 0)
      rc = pg_fail(c, "resolve: out of memory");
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
  if (rc == 0) rc = pg_inbox_follow(c, any_seq, now_ms, NULL, NULL);
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
int pg_object_versions_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                             bool *more) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_ms);
  pg_p_i64(&p, limit);
  int64_t n = pg_x(c,
                   "DELETE FROM object_versions WHERE (source_id, object_key) IN"
                   " (SELECT source_id, object_key FROM object_versions"
                   " WHERE seen_at < $1 ORDER BY seen_at LIMIT $2)",
                   &p, "purge object versions");
  if (n < 0) return HOOKD_STORE_ERR;
  *purged = (int)n;
  *more = *purged >= limit;
  return HOOKD_STORE_OK;
}

/* ---------- retention ---------- */

/* Retention walks the rows in seq order from *after_seq and stops at the first one inside the
 * window: seq grows with received_at, so no index on received_at is written on every receive.
 * A record whose forward is not finished (a delivery pending, retrying, or held as unknown for an
 * operator) is kept whatever its age: its resolve needs it, and so does the deduplication of a
 * late redelivery, which would otherwise be forwarded under a new Idempotency-Key. A purged
 * record takes its event with it (body, forwards, attempts: PG_RETAINED_DELIVERY keeps those
 * touched inside the window), except the store's newest event (kept as the SQLite store keeps
 * it). */
int pg_inbox_purge(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                   int *purged) {
  *purged = 0;
  int64_t *del;
  int n;
  /* a row inside the window ends the walk: its eligibility is not computed */
  int rc = pg_retention_walk(c,
                             "SELECT i.seq, i.received_at, CASE WHEN i.received_at >= $3 THEN 0"
                             " WHEN i.event_seq IS NULL THEN 1"
                             " WHEN i.event_seq < (SELECT MAX(seq) FROM events)"
                             "  AND NOT EXISTS (" PG_RETAINED_DELIVERY("i.event_seq") ") THEN 1"
                             " ELSE 0 END"
                             " FROM inbox i WHERE i.seq > $2 ORDER BY i.seq LIMIT $1",
                             true, before_ms, hookd_now_ms(), limit, after_seq, &del, &n);
  if (!rc) /* what an op frees within its budget: bodies, forwards, attempts (as sq_inbox_purge) */
    rc = pg_retention_trim(c,
                           PG_WEIGH(PG_WEIGH_EVENT(
                               "(SELECT i.event_seq FROM inbox i WHERE i.seq = x.s)",
                               "(SELECT octet_length(v.body) FROM inbox i"
                               " JOIN events v ON v.seq = i.event_seq WHERE i.seq = x.s)")),
                           HOOKD_PURGE_BYTES, del, &n, after_seq);
  if (rc) {
    free(del);
    return rc;
  }
  if (n > 0) rc = pg_retention_mark(c, "inbound", before_ms);
  /* the batch in a statement per table (round trips under the store-wide writer lock) */
  pg_arr recs, evs;
  pg_arr_init(&recs);
  pg_arr_init(&evs);
  for (int i = 0; i < n; i++) pg_arr_i64(&recs, del[i]);
  const char *lit = pg_arr_done(&recs);
  if (!rc && n > 0 && !lit) {
    snprintf(c->err, sizeof c->err, "purge inbox: out of memory");
    rc = HOOKD_STORE_ERR;
  }
  if (!rc && n > 0) {
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, lit);
    PGresult *r = pg_q(c, "DELETE FROM inbox WHERE seq = ANY($1::bigint[]) RETURNING event_seq",
                       &p, "purge inbox");
    if (!r) rc = HOOKD_STORE_ERR;
    int rows = r ? PQntuples(r) : 0, events = 0;
    for (int i = 0; i < rows; i++)
      if (!pg_null(r, i, 0)) {
        pg_arr_i64(&evs, pg_i64(r, i, 0));
        events++;
      }
    PQclear(r);
    const char *ev = pg_arr_done(&evs);
    if (!rc && events && !ev) {
      snprintf(c->err, sizeof c->err, "purge inbox: out of memory");
      rc = HOOKD_STORE_ERR;
    }
    if (!rc && events) rc = pg_events_delete(c, ev, false);
    if (!rc) *purged = rows;
  }
  pg_arr_free(&recs);
  pg_arr_free(&evs);
  free(del);
  return rc;
}

/* sqlite_delivery.c — SQLite backend: the delivery engine's tables.
 *   publish (event + idempotency + fan-out), event and delivery reads, replay,
 *   claim with lease, the fenced outcome write, lease reclaim, due hints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/ids.h"
#include "core/payload_filter.h"
#include "store/sqlite/sqlite_int.h"

/* ---------- row readers ---------- */

void sq_read_delivery(sqlite3_stmt *st, int i, hookd_delivery *d) {
  memset(d, 0, sizeof *d);
  d->seq = sq_col_i64(st, i + 0);
  d->id = sq_col_str(st, i + 1);
  d->event_seq = sq_col_i64(st, i + 2);
  d->event_id = sq_col_str(st, i + 3);
  d->event_type = sq_col_str(st, i + 4);
  d->endpoint_id = sq_col_str(st, i + 5);
  d->tenant_id = sq_col_str(st, i + 6);
  const char *state = (const char *)sqlite3_column_text(st, i + 7);
  hookd_dstate s = HOOKD_DS_PENDING;
  if (state) hookd_dstate_parse(state, &s);
  d->state = s;
  d->attempt_count = (int)sq_col_i64(st, i + 8);
  d->cycle_base = (int)sq_col_i64(st, i + 9);
  d->cycle_started_ms = sq_col_i64(st, i + 10);
  d->next_attempt_ms = sq_col_i64(st, i + 11);
  d->lease_owner = sq_col_str(st, i + 12);
  d->lease_token = sq_col_i64(st, i + 13);
  d->leased_until_ms = sq_col_i64(st, i + 14);
  d->last_error = sq_col_str(st, i + 15);
  d->last_status = (int)sq_col_i64(st, i + 16);
  d->policy_id = sq_col_i64(st, i + 17);
  d->created_ms = sq_col_i64(st, i + 18);
  d->updated_ms = sq_col_i64(st, i + 19);
  d->delivered_ms = sq_col_i64(st, i + 20);
  d->dead_ms = sq_col_i64(st, i + 21);
  d->dead_reason = sq_col_str(st, i + 22);
  const char *kind = (const char *)sqlite3_column_text(st, i + 23);
  d->replay_cycle = kind && strcmp(kind, "replay") == 0;
  d->ordering_key = sq_col_str(st, i + 24);
  d->result_ref = sq_col_str(st, i + 25);
}

static void rd_delivery(sqlite3_stmt *st, void *rec) { sq_read_delivery(st, 0, rec); }
static void free_deliveries(void *v, size_t n) { hookd_deliveries_free(v, n); }

int sq_read_deliveries(hookd_store_conn *c, sqlite3_stmt *st, hookd_delivery **out, size_t *n) {
  return sq_read_rows(c, st, sizeof **out, rd_delivery, free_deliveries, (void **)out, n,
                      "read deliveries");
}

/* ---------- publish ---------- */

/* A repeated publish's answer, as the first one's: its deliveries, and of those the ones
 * created DEAD "superseded" (only creation gives that reason). */
static int count_deliveries(hookd_store_conn *c, int64_t event_seq, hookd_publish_res *res) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_COUNT_DL,
                             "SELECT COUNT(*), COALESCE(SUM(dead_reason = 'superseded'), 0)"
                             " FROM deliveries WHERE event_seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, event_seq);
  if (sqlite3_step(st) != SQLITE_ROW) return sq_fail(c, "count deliveries");
  res->n_deliveries = (int)sq_col_i64(st, 0);
  res->n_superseded = (int)sq_col_i64(st, 1);
  return HOOKD_STORE_OK;
}

static int event_by_key(hookd_store_conn *c, const char *tenant_id, const char *id,
                        int64_t *seq, unsigned char hash[32]) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_BY_KEY,
                             "SELECT seq, request_hash FROM events WHERE id = ?1 AND tenant_id = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, tenant_id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "find event");
  *seq = sq_col_i64(st, 0);
  memset(hash, 0, 32);
  if (sqlite3_column_bytes(st, 1) == 32) memcpy(hash, sqlite3_column_blob(st, 1), 32);
  return HOOKD_STORE_OK;
}

/* Records a new Idempotency-Key for the event it created or found. A plain INSERT on the
 * unique key: the lookup before it ran in the same write transaction (one writer), so it fails
 * only on I/O errors — or loudly, never with a second row, if a key were taken meanwhile. */
static int idem_insert(hookd_store_conn *c, const hookd_publish_req *req, int64_t seq) {
  sqlite3_stmt *st = sq_stmt(c, SQ_IDEM_INSERT,
                             "INSERT INTO idempotency_keys(tenant_id, key, request_hash,"
                             " created_at, event_seq) VALUES (?1, ?2, ?3, ?4, ?5)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->tenant_id);
  sq_bind_text(st, 2, req->idempotency_key);
  sqlite3_bind_blob(st, 3, req->request_hash, 32, SQLITE_STATIC);
  sq_bind_i64(st, 4, req->now_ms);
  sq_bind_i64(st, 5, seq);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "insert idempotency key");
}

/* Versions in order on an ordered endpoint's lane: *superseded when a higher version than v was
 * given to the lane before (the receiver has it, or will, and must not go back to v); otherwise v
 * is recorded as the lane's highest (*raised: a DEAD head of a lower version may hold the lane no
 * more). Equal versions go through. */
static int lane_version(hookd_store_conn *c, const char *endpoint_id, const char *key, int64_t v,
                        int64_t now_ms, bool *superseded, bool *raised) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_VERSION_GET,
                             "SELECT version FROM lane_versions WHERE endpoint_id = ?1"
                             " AND ordering_key = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_text(st, 2, key);
  int rc = sqlite3_step(st);
  int64_t seen = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  bool known = rc == SQLITE_ROW;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read lane version");
  *superseded = known && v < seen;
  *raised = false;
  if (*superseded || (known && v == seen)) return HOOKD_STORE_OK;
  *raised = true;
  st = sq_stmt(c, SQ_LANE_VERSION_SET,
               "INSERT INTO lane_versions(endpoint_id, ordering_key, version, seen_at)"
               " VALUES (?1, ?2, ?3, ?4) ON CONFLICT(endpoint_id, ordering_key)"
               " DO UPDATE SET version = excluded.version, seen_at = excluded.seen_at");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_text(st, 2, key);
  sq_bind_i64(st, 3, v);
  sq_bind_i64(st, 4, now_ms);
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "record lane version");
}

/* A lane's open deliveries (pending, retrying, held unknown) of endpoint ?1: the terms of the
 * deliveries_lane_open index, so every lane lookup below is a probe of it. */
#define LANE_OPEN_ROWS                                                                          \
  " FROM deliveries WHERE endpoint_id = ?1 AND ordering_key IS NOT NULL"                        \
  " AND state IN ('pending','retrying','unknown')"

/* *wait = 1 when a new delivery of lane `key` of the endpoint waits: the lane has an open
 * delivery, or (a block endpoint) a DEAD one holds it at now_ms. The DEAD rows are probed only
 * when no open one is there. */
static int lane_hint(hookd_store_conn *c, const char *endpoint_id, const char *key,
                     int64_t now_ms, int64_t *wait) {
  sqlite3_stmt *st =
      sq_stmt(c, SQ_LANE_OPEN,
              "SELECT CASE WHEN EXISTS (SELECT 1" LANE_OPEN_ROWS " AND ordering_key = ?2) THEN 1"
              " WHEN NOT " LANE_BLOCKS("?1") " THEN 0"
              " ELSE EXISTS (" LANE_DEAD_HOLDS("?1", "?2", SQ_SEQ_MAX, "?3") ") END");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_text(st, 2, key);
  sq_bind_i64(st, 3, now_ms);
  int rc = sqlite3_step(st);
  *wait = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "read lane");
}

/* The hint a lane's first open delivery (alias d) is to have at `now`: 1 when it could be
 * claimed but a DEAD head holds its lane, else 0 (docs/isolation.md "Ordering lanes"). */
#define LANE_HELD(now)                                                                          \
  "(d.state IN ('pending','retrying') AND d.leased_until IS NULL"                               \
  " AND " LANE_BLOCKS("d.endpoint_id") " AND EXISTS ("                                          \
  LANE_DEAD_HOLDS("d.endpoint_id", "d.ordering_key", "d.seq", now) "))"
/* Sets the hints of deliveries `first` (an SQL expression, for IN: lanes' first open deliveries)
 * to what they are to be; writes none that already is. */
#define LANE_SETTLE_SQL(first, now)                                                             \
  "UPDATE deliveries AS d SET lane_wait = 1 - d.lane_wait WHERE d.seq IN " first                \
  " AND d.lane_wait = CASE WHEN " LANE_HELD(now) " THEN 0 ELSE 1 END"

/* Runs a LANE_SETTLE_SQL statement whose parameters are bound. */
static int settle_run(hookd_store_conn *c, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "settle lane");
}

int sq_lane_advance(hookd_store_conn *c, int64_t seq, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_ADVANCE,
                             LANE_SETTLE_SQL("(SELECT n.seq FROM deliveries me, deliveries n"
                                             " WHERE me.seq = ?1 AND me.ordering_key IS NOT NULL"
                                             " AND n.endpoint_id = me.endpoint_id"
                                             " AND n.ordering_key = me.ordering_key"
                                             " AND n.ordering_key IS NOT NULL"
                                             " AND n.state IN ('pending','retrying','unknown')"
                                             " ORDER BY n.seq LIMIT 1)",
                                             "?2"));
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  sq_bind_i64(st, 2, now_ms);
  return settle_run(c, st);
}

/* The same for lane `key` of an endpoint: after its version was raised, a DEAD head of a lower
 * one holds it no more. */
static int lane_settle(hookd_store_conn *c, const char *endpoint_id, const char *key,
                       int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_SETTLE,
                             LANE_SETTLE_SQL("(SELECT seq" LANE_OPEN_ROWS " AND ordering_key = ?2"
                                             " ORDER BY seq LIMIT 1)",
                                             "?3"));
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_text(st, 2, key);
  sq_bind_i64(st, 3, now_ms);
  return settle_run(c, st);
}

/* The same for the lanes of the DEAD deliveries of event event_seq, whose payload is gone
 * (deleted, or purged by retention): they hold their lanes no more. */
static int lanes_of_purged(hookd_store_conn *c, int64_t event_seq, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_SETTLE_PURGED,
                             LANE_SETTLE_SQL("(SELECT (SELECT n.seq FROM deliveries n"
                                             " WHERE n.endpoint_id = me.endpoint_id"
                                             " AND n.ordering_key = me.ordering_key"
                                             " AND n.ordering_key IS NOT NULL"
                                             " AND n.state IN ('pending','retrying','unknown')"
                                             " ORDER BY n.seq LIMIT 1) FROM deliveries me"
                                             " WHERE me.event_seq = ?1"
                                             " AND me.ordering_key IS NOT NULL"
                                             " AND me.state = 'dead')",
                                             "?2"));
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, event_seq);
  sq_bind_i64(st, 2, now_ms);
  return settle_run(c, st);
}

/* One endpoint's delivery of a new event (eps: the fan-out's row; ins, superseded_ins: the
 * inserts of a delivery and of a superseded one). */
static int fan_out_one(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res,
                       sqlite3_stmt *eps, int64_t seq, sqlite3_stmt *ins,
                       sqlite3_stmt *superseded_ins) {
  int rc;
  char did[HOOKD_ID_MAX];
  if (hookd_id_new("dlv", req->now_ms, did) != 0) return HOOKD_STORE_ERR;
  const char *ep_id = (const char *)sqlite3_column_text(eps, 0);
  bool superseded = false, raised = false;
  if (req->ordering_key && req->has_ordering_version && sq_col_i64(eps, 3) &&
      (rc = lane_version(c, ep_id, req->ordering_key, req->ordering_version, req->now_ms,
                         &superseded, &raised)) != 0)
    return rc;
  int64_t wait = 0; /* behind an open delivery of its lane, or a DEAD one that holds it: left
                     * out of the due index */
  if (!superseded && req->ordering_key && sq_col_i64(eps, 3) &&
      (rc = lane_hint(c, ep_id, req->ordering_key, req->now_ms, &wait)) != 0)
    return rc;
  if (raised && wait && (rc = lane_settle(c, ep_id, req->ordering_key, req->now_ms)) != 0)
    return rc;
  sqlite3_stmt *to = ins;
  if (superseded && !(to = superseded_ins)) return HOOKD_STORE_ERR;
  sqlite3_reset(to);
  sq_bind_text(to, 1, did);
  sq_bind_i64(to, 2, seq);
  sqlite3_bind_text(to, 3, ep_id, -1, SQLITE_TRANSIENT);
  sq_bind_text(to, 4, req->tenant_id);
  sq_bind_i64(to, 5, req->now_ms);
  sq_bind_i64(to, 6, sq_col_i64(eps, 2));
  sq_bind_text(to, 7, req->ordering_key);
  if (!superseded) sq_bind_i64(to, 8, wait);
  if (sqlite3_step(to) != SQLITE_DONE) return sq_fail(c, "insert delivery");
  if (sqlite3_changes(c->db) == 0) return HOOKD_STORE_OK;
  res->n_deliveries++;
  if (superseded) {
    res->n_superseded++;
    return HOOKD_STORE_OK; /* nothing for the dispatcher */
  }
  if (res->n_endpoints < HOOKD_FANOUT_MAX)
    res->endpoints[res->n_endpoints++] = sq_col_str(eps, 0);
  else
    res->endpoints_truncated = true;
  return HOOKD_STORE_OK;
}

/* A publish that ran out of memory for its answer fails before its commit: nothing is kept, and
 * its client is told so (503) instead of being answered 500 for an event it then sends again. */
static int publish_oom(hookd_store_conn *c) {
  snprintf(c->err, sizeof c->err, "publish: out of memory");
  return HOOKD_STORE_ERR;
}

/* An event id already taken (or, for req->existing_only, looked up once no Idempotency-Key
 * matched): the event of the same request hash is a duplicate (its new key recorded), another
 * one a conflict; none at all is HOOKD_STORE_NOTFOUND. Writes nothing but that key. */
static int existing_event(hookd_store_conn *c, const hookd_publish_req *req,
                          hookd_publish_res *res) {
  int64_t seq = 0;
  unsigned char hash[32];
  int rc = event_by_key(c, req->tenant_id, req->event_id, &seq, hash);
  if (rc) return rc;
  if (!hookd_publish_same_request(req, hash, sizeof hash)) {
    snprintf(c->err, sizeof c->err, "event id already used with a different request body");
    return HOOKD_STORE_CONFLICT;
  }
  if (req->idempotency_key && (rc = idem_insert(c, req, seq)) != 0) return rc;
  if (!(res->event_id = strdup(req->event_id))) return publish_oom(c);
  res->duplicate = true;
  return count_deliveries(c, seq, res);
}

int sq_publish(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res) {
  memset(res, 0, sizeof *res);
  hookd_tenant t;
  int rc = sq_tenant_get(c, req->tenant_id, &t);
  if (rc) return rc;
  hookd_tenant_free(&t);

  /* Every refusal (unknown tenant, a key or an event id used with another body) comes before
   * the first write: publish runs without a savepoint of its own (storeq.h). */
  if (req->idempotency_key) {
    sqlite3_stmt *st = sq_stmt(c, SQ_IDEM_GET,
                               "SELECT i.request_hash, i.event_seq, e.id FROM idempotency_keys i"
                               " LEFT JOIN events e ON e.seq = i.event_seq"
                               " WHERE i.tenant_id = ?1 AND i.key = ?2");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, req->tenant_id);
    sq_bind_text(st, 2, req->idempotency_key);
    int step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
      if (!hookd_publish_same_request(req, sqlite3_column_blob(st, 0),
                                      (size_t)sqlite3_column_bytes(st, 0))) {
        snprintf(c->err, sizeof c->err,
                 "Idempotency-Key was already used with a different request body");
        res->key_conflict = true;
        return HOOKD_STORE_CONFLICT;
      }
      if (sqlite3_column_type(st, 2) == SQLITE_NULL) return sq_fail(c, "read idempotency key");
      int64_t seq = sq_col_i64(st, 1);
      res->event_id = sq_col_str(st, 2);
      res->duplicate = true;
      return count_deliveries(c, seq, res);
    }
    if (step != SQLITE_DONE) return sq_fail(c, "read idempotency key");
  }
  /* a test event: its one endpoint must take it — checked after its Idempotency-Key, so that
   * a test sent again gets its first answer when the endpoint was disabled or deleted since */
  if (req->only_endpoint) {
    hookd_endpoint ep;
    rc = sq_endpoint_get(c, req->only_endpoint, &ep);
    if (rc == HOOKD_STORE_OK) {
      bool mine = !strcmp(ep.tenant_id, req->tenant_id), dest = ep.source_id != NULL;
      bool on = ep.enabled;
      hookd_endpoint_free(&ep);
      if (!mine) rc = HOOKD_STORE_NOTFOUND;
      else if (dest || !on) {
        snprintf(c->err, sizeof c->err, "%s",
                 dest ? "an inbound source's destination gets its source's events"
                      : "the endpoint is disabled: enable it first");
        return HOOKD_STORE_STATE;
      }
    }
    if (rc == HOOKD_STORE_NOTFOUND) {
      snprintf(c->err, sizeof c->err, "endpoint");
      return HOOKD_STORE_STATE; /* (the caller names it: 404) */
    }
    if (rc) return rc;
  }
  if (req->existing_only) { /* none: HOOKD_STORE_STATE (NOTFOUND is the tenant's) */
    rc = existing_event(c, req, res);
    return rc == HOOKD_STORE_NOTFOUND ? HOOKD_STORE_STATE : rc;
  }

  sqlite3_stmt *st = sq_stmt(c, SQ_EV_INSERT,
                             "INSERT INTO events(id, tenant_id, type, body, request_hash,"
                             " occurred_at, created_at, expires_at, ordering_key, ordering_version,"
                             " schema_version, channels, test_endpoint)"
                             " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
                             " ON CONFLICT(id, tenant_id) DO NOTHING");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->event_id);
  sq_bind_text(st, 2, req->tenant_id);
  sq_bind_text(st, 3, req->type);
  sqlite3_bind_blob(st, 4, req->body, (int)req->body_len, SQLITE_STATIC);
  sqlite3_bind_blob(st, 5, req->request_hash, 32, SQLITE_STATIC);
  sq_bind_i64(st, 6, req->occurred_ms);
  sq_bind_i64(st, 7, req->now_ms);
  sq_bind_i64_or_null(st, 8, req->expires_ms);
  sq_bind_text(st, 9, req->ordering_key);
  /* (a version of 0 is a version: read back as one, by GET and by a delivery made later) */
  if (req->has_ordering_version) sq_bind_i64(st, 10, req->ordering_version);
  else sqlite3_bind_null(st, 10);
  sq_bind_text(st, 11, req->schema_version);
  sq_bind_text(st, 12, req->channels);
  sq_bind_text(st, 13, req->only_endpoint);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert event");

  if (sqlite3_changes(c->db) == 0) return existing_event(c, req, res);
  int64_t seq = sqlite3_last_insert_rowid(c->db);
  if (req->idempotency_key && (rc = idem_insert(c, req, seq)) != 0) return rc;
  if (!(res->event_id = strdup(req->event_id))) return publish_oom(c);
  res->due_ms = req->now_ms;

  /* Fan-out: one delivery per live, enabled endpoint whose filter matches. */
  sqlite3_stmt *eps = sq_stmt(c, SQ_EP_FANOUT,
                              "SELECT id, event_types, policy_id, ordered, channels, payload_filter"
                              " FROM endpoints"
                              " WHERE tenant_id = ?1 AND deleted_at IS NULL AND enabled = 1"
                              " AND source_id IS NULL");
  if (!eps) return HOOKD_STORE_ERR;
  sq_bind_text(eps, 1, req->tenant_id);
  sqlite3_stmt *ins = sq_stmt(c, SQ_DL_INSERT, SQ_DL_INSERT_SQL);
  if (!ins) return HOOKD_STORE_ERR;
  sqlite3_stmt *superseded_ins =
      req->has_ordering_version && req->ordering_key
          ? sq_stmt(c, SQ_DL_INSERT_SUPERSEDED,
                    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state,"
                    " cycle_started_at, next_attempt_at, policy_id, created_at, updated_at,"
                    " ordering_key, dead_at, dead_reason)"
                    " VALUES (?1, ?2, ?3, ?4, 'dead', ?5, ?5, ?6, ?5, ?5, ?7, ?5, 'superseded')"
                    " ON CONFLICT(event_seq, endpoint_id) DO NOTHING")
          : NULL;
  json_t *parsed = NULL; /* the envelope, parsed for the first filter (no req->payload) */
  long filter_steps = HOOKD_PFILTER_EVENT_BUDGET; /* for all the payload filters together */
  while ((rc = sqlite3_step(eps)) == SQLITE_ROW) {
    const char *filter = (const char *)sqlite3_column_text(eps, 1);
    const char *pfilter = (const char *)sqlite3_column_text(eps, 5);
    if (req->only_endpoint ? strcmp((const char *)sqlite3_column_text(eps, 0),
                                    req->only_endpoint) != 0
                           : !hookd_filter_match(filter, req->type) ||
                                 !hookd_channels_match((const char *)sqlite3_column_text(eps, 4),
                                                       req->channels))
      continue;
    if (!req->only_endpoint && pfilter) {
      int takes = hookd_publish_pfilter(&c->pf, pfilter, req, &parsed, &filter_steps);
      if (takes == HOOKD_PFILTER_OVER) res->filters_over++;
      if (takes != HOOKD_PFILTER_YES) continue;
    }
    int one = fan_out_one(c, req, res, eps, seq, ins, superseded_ins);
    if (one != HOOKD_STORE_OK) {
      sqlite3_reset(eps);
      json_decref(parsed);
      return one;
    }
  }
  json_decref(parsed);
  if (rc != SQLITE_DONE) return sq_fail(c, "fan-out");
  return HOOKD_STORE_OK;
}

/* ---------- reads ---------- */

int sq_event_get(hookd_store_conn *c, const char *tenant_id, const char *id, hookd_event *ev,
                 hookd_delivery **dl, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_GET,
                             "SELECT seq, id, tenant_id, type, body, occurred_at, created_at,"
                             " expires_at, kind, content_type, meta, purged_at, schema_version,"
                             " ordering_key, ordering_version, channels, test_endpoint FROM events"
                             " WHERE id = ?1"
                             " AND (?2 IS NULL OR tenant_id = ?2) LIMIT 2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, tenant_id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get event");
  memset(ev, 0, sizeof *ev);
  ev->seq = sq_col_i64(st, 0);
  ev->id = sq_col_str(st, 1);
  ev->tenant_id = sq_col_str(st, 2);
  ev->type = sq_col_str(st, 3);
  ev->body_len = (size_t)sqlite3_column_bytes(st, 4);
  ev->body = malloc(ev->body_len + 1);
  if (ev->body) {
    if (ev->body_len) /* the blob is NULL when empty */
      memcpy(ev->body, sqlite3_column_blob(st, 4), ev->body_len);
    ev->body[ev->body_len] = '\0';
  }
  ev->occurred_ms = sq_col_i64(st, 5);
  ev->created_ms = sq_col_i64(st, 6);
  ev->expires_ms = sq_col_i64(st, 7);
  const char *kind = (const char *)sqlite3_column_text(st, 8);
  ev->inbound = kind && !strcmp(kind, "inbound");
  ev->content_type = sq_col_str(st, 9);
  ev->meta = sq_col_str(st, 10);
  ev->purged_ms = sq_col_i64(st, 11);
  sq_read_event_extras(st, 12, ev);
  int next = sqlite3_step(st); /* (a failed step is no answer, not "one tenant's") */
  if (next == SQLITE_ROW) {
    hookd_event_free(ev);
    snprintf(c->err, sizeof c->err, "event id is used by several tenants");
    return HOOKD_STORE_CONFLICT;
  }
  if (next != SQLITE_DONE) {
    hookd_event_free(ev);
    return sq_fail(c, "read event");
  }
  if (!ev->body) {
    hookd_event_free(ev);
    return HOOKD_STORE_ERR;
  }
  if (!dl) return HOOKD_STORE_OK;
  st = sq_stmt(c, SQ_DL_BY_EVENT,
               "SELECT " SQ_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
               " WHERE d.event_seq = ?1 ORDER BY d.id");
  if (!st) {
    hookd_event_free(ev);
    return HOOKD_STORE_ERR;
  }
  sq_bind_i64(st, 1, ev->seq);
  if ((rc = sq_read_deliveries(c, st, dl, n)) != 0) hookd_event_free(ev);
  return rc;
}

static void rd_attempt(sqlite3_stmt *st, void *rec) {
  hookd_attempt *a = rec;
  a->number = (int)sq_col_i64(st, 0);
  a->started_ms = sq_col_i64(st, 1);
  a->finished_ms = sq_col_i64(st, 2);
  a->outcome = sq_col_str(st, 3);
  a->http_status = (int)sq_col_i64(st, 4);
  a->latency_ms = sq_col_i64(st, 5);
  a->error = sq_col_str(st, 6);
  a->response_len = (size_t)sqlite3_column_bytes(st, 7);
  if (a->response_len && (a->response = malloc(a->response_len + 1))) {
    memcpy(a->response, sqlite3_column_blob(st, 7), a->response_len);
    a->response[a->response_len] = '\0';
  } else {
    a->response_len = 0;
  }
  a->lease_token = sq_col_i64(st, 8);
  a->trigger = sq_col_str(st, 9);
  a->url = sq_col_str(st, 10);
}
static void free_attempts(void *v, size_t n) { hookd_attempts_free(v, n); }

int sq_delivery_get(hookd_store_conn *c, const char *id, hookd_delivery *d, hookd_attempt **att,
                    size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_GET,
                             "SELECT " SQ_DELIVERY_COLS
                             " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                             " WHERE d.id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "get delivery");
  sq_read_delivery(st, 0, d);
  if (!att) return HOOKD_STORE_OK;

  st = sq_stmt(c, SQ_DL_ATTEMPTS,
               "SELECT attempt_number, started_at, finished_at, outcome, http_status, latency_ms,"
               " error, response, lease_token, kind,"
               /* its endpoint deleted: the URL cut to its origin, as the URL walk cuts the row
                * (docs/architecture.md "Deletes") — from the delete's answer on */
               " CASE WHEN (SELECT deleted_at FROM endpoints WHERE id = ?2) IS NULL THEN url"
               " ELSE " SQ_URL_ORIGIN("url") " END FROM attempts WHERE delivery_seq = ?1"
               " ORDER BY attempt_number");
  if (!st) goto fail;
  sq_bind_i64(st, 1, d->seq);
  sq_bind_text(st, 2, d->endpoint_id);
  if (sq_read_rows(c, st, sizeof **att, rd_attempt, free_attempts, (void **)att, n,
                   "read attempts") != 0)
    goto fail;
  return HOOKD_STORE_OK;
fail:
  hookd_delivery_free(d);
  return HOOKD_STORE_ERR;
}

int sq_delivery_list(hookd_store_conn *c, const hookd_delivery_filter *f, hookd_delivery **out,
                     size_t *n) {
  /* One statement per filter shape, so each is prepared once and uses the tenant index. */
  static const char *tenant_base = "SELECT " SQ_DELIVERY_COLS
                                   " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                                   " WHERE d.tenant_id = ?1 AND d.id < ?2"; /* ("~": no cursor) */
  const char *base = tenant_base;
  char sql[4096];
  enum sq_stmt_id id;
  const char *extra;
  /* the states as ",a,b," (each one's name between commas) */
#define IN_STATES "instr(?5, ',' || d.state || ',') > 0"
  /* By state or endpoint: one arm per state (?11..?16, each a state asked for or NULL), each
   * its newest deliveries read from (tenant_id, state, id) or (endpoint_id, state, id), merged
   * by id — a page costs the page, not a walk of the tenant's deliveries for the few in a state
   * (instr() is no index's condition). An endpoint alone: every state. */
#define ARM(range, k)                                                                           \
  "SELECT seq FROM (SELECT d.seq FROM deliveries d WHERE " range " AND d.state = ?" k            \
  " AND d.id < ?2 ORDER BY d.id DESC LIMIT ?3)"
#define ARMS(range)                                                                             \
  ARM(range, "11") " UNION ALL " ARM(range, "12") " UNION ALL " ARM(range, "13")                \
  " UNION ALL " ARM(range, "14") " UNION ALL " ARM(range, "15") " UNION ALL " ARM(range, "16")
#define MERGED(range)                                                                           \
  "SELECT " SQ_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"          \
  " WHERE d.seq IN (" ARMS(range) ")"
  bool by_arms = false;
  if (f->endpoint_id) {
    id = SQ_DL_LIST_EP_STATES;
    base = MERGED("d.endpoint_id = ?4 AND +d.tenant_id = ?1");
    extra = "";
    by_arms = true;
  } else if (f->states) {
    id = SQ_DL_LIST_STATES;
    base = MERGED("d.tenant_id = ?1");
    extra = "";
    by_arms = true;
  } else {
    id = SQ_DL_LIST;
    extra = "";
  }
#undef MERGED
#undef ARMS
#undef ARM
  if (f->event_id) {
    /* deliveries of one event are few: found by the event's seq (the (event_seq, endpoint_id)
     * index; the unary + keeps the planner off the tenant's, which walks its deliveries) */
    id = SQ_DL_LIST_EVENT;
    by_arms = false;
    base = "SELECT " SQ_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
           " WHERE +d.tenant_id = ?1 AND +d.id < ?2 AND d.event_seq = (SELECT ev.seq FROM events"
           " ev WHERE ev.tenant_id = ?1 AND ev.id = ?6)";
    extra = " AND (?4 IS NULL OR d.endpoint_id = ?4) AND (?5 IS NULL OR " IN_STATES ")";
  }
  bool wide = f->event_type || f->since_ms > 0 || f->until_ms > 0;
  if (wide) {
    /* by type or time: one statement with every condition (the API runs it on the scan
     * executor: it may walk much of the tenant's deliveries) */
    id = SQ_DL_LIST_WIDE;
    by_arms = false;
    base = tenant_base;
    extra = " AND (?6 IS NULL OR e.id = ?6) AND (?4 IS NULL OR d.endpoint_id = ?4)"
            " AND (?5 IS NULL OR " IN_STATES ") AND (?7 IS NULL OR e.type = ?7)"
            " AND (?8 IS NULL OR length(e.type) > length(?8)"
            " AND substr(e.type, 1, length(?8)) = ?8)"
            " AND d.created_at >= ?9 AND d.created_at < ?10";
  }
  _Static_assert(HOOKD_DS__COUNT == 6, "one arm per state: ?11..?16");
  if (snprintf(sql, sizeof sql, "%s%s ORDER BY d.id DESC LIMIT ?3", base, extra) >= (int)sizeof sql)
    return sq_fail(c, "list deliveries: statement too long");
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, f->tenant_id);
  sq_bind_text(st, 2, f->after_id ? f->after_id : HOOKD_ID_AFTER_ALL);
  sq_bind_i64(st, 3, f->limit);
  sq_bind_text(st, 4, f->endpoint_id);
  char states[128] = ",";
  for (int s = 0; s < HOOKD_DS__COUNT; s++)
    if (f->states & (1u << s)) {
      strcat(states, hookd_dstate_name((hookd_dstate)s));
      strcat(states, ",");
    }
  sq_bind_text(st, 5, f->states ? states : NULL);
#undef IN_STATES
  if (f->event_id) sq_bind_text(st, 6, f->event_id);
  for (int s = 0, k = 11; by_arms && s < HOOKD_DS__COUNT; s++)
    if (!f->states || f->states & (1u << s))
      sq_bind_text(st, k++, hookd_dstate_name((hookd_dstate)s));
  if (wide) {
    sq_bind_type_filter(st, 7, 8, f->event_type);
    sq_bind_i64(st, 9, f->since_ms > 0 ? f->since_ms : INT64_MIN);
    sq_bind_i64(st, 10, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  }
  return sq_read_deliveries(c, st, out, n);
}

int sq_endpoint_stats(hookd_store_conn *c, const char *endpoint_id, const char *from_id,
                      const char *to_id, int64_t cap, int64_t counts[HOOKD_DS__COUNT],
                      int64_t *dead_unsent) {
  /* one range of the (endpoint_id, state, id) index a state, cut at cap; then the DEAD ones
   * never attempted among at most cap DEAD rows */
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_STATS,
                             "SELECT count(*) FROM (SELECT 1 FROM deliveries"
                             " INDEXED BY deliveries_endpoint_state WHERE endpoint_id = ?1"
                             " AND state = ?2 AND id >= ?3 AND id < ?4"
                             " AND (?6 = 0 OR attempt_count = 0) LIMIT ?5)");
  if (!st) return HOOKD_STORE_ERR;
  for (int s = 0; s <= HOOKD_DS__COUNT; s++) {
    bool unsent = s == HOOKD_DS__COUNT;
    sq_bind_text(st, 1, endpoint_id);
    sq_bind_text(st, 2, hookd_dstate_name(unsent ? HOOKD_DS_DEAD : (hookd_dstate)s));
    sq_bind_text(st, 3, from_id);
    sq_bind_text(st, 4, to_id);
    sq_bind_i64(st, 5, cap);
    sq_bind_i64(st, 6, unsent);
    int rc = sqlite3_step(st);
    int64_t n = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
    sqlite3_reset(st);
    if (rc != SQLITE_ROW) return sq_fail(c, "endpoint stats");
    if (unsent) *dead_unsent = n;
    else counts[s] = n;
  }
  return HOOKD_STORE_OK;
}

int sq_replay_one(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why,
                  hookd_replay_memo *memo) {
  static const char *unused;
  if (!why) why = &unused;
  *why = NULL;
  /* one read for every check: the delivery's state, endpoint and lane, its event's expiry,
   * purge and ordering version, and the version its lane has reached */
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_REPLAY_READ,
                             "SELECT d.state, d.endpoint_id, d.dead_reason,"
                             " d.ordering_key IS NOT NULL, e.expires_at, e.purged_at,"
                             " e.ordering_version, (SELECT version FROM lane_versions l"
                             " WHERE l.endpoint_id = d.endpoint_id AND l.ordering_key ="
                             " d.ordering_key), e.kind,"
                             /* a DEAD "expired" head that its lane went on past — a later one
                              * delivered, claimed or attempted; one DEAD unsent (superseded,
                              * expired at its claim) passed nothing (read only for one: CASE
                              * evaluates no more than it must). LANE_MOVED_PAST is the claim's
                              * own, kept past retention; this reads the lane as it is */
                             " CASE WHEN d.dead_reason = 'expired' AND d.ordering_key IS NOT"
                             " NULL THEN EXISTS (SELECT 1 FROM deliveries x WHERE x.endpoint_id"
                             " = d.endpoint_id AND x.ordering_key = d.ordering_key AND x.seq >"
                             " d.seq AND (x.state = 'delivered' OR x.leased_until IS NOT NULL"
                             " OR x.attempt_count > 0)) ELSE 0 END"
                             " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                             " WHERE d.seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? HOOKD_STORE_NOTFOUND : sq_fail(c, "read delivery");
  }
  hookd_replay_facts f = {.state = HOOKD_DS_PENDING};
  const char *sname = (const char *)sqlite3_column_text(st, 0);
  if (sname) hookd_dstate_parse(sname, &f.state);
  char *endpoint_id = sq_col_str(st, 1);
  char *reason = sq_col_str(st, 2);
  bool reason_lost = !reason && sqlite3_column_type(st, 2) != SQLITE_NULL; /* out of memory */
  f.dead_reason = reason;
  f.laned = sq_col_i64(st, 3) != 0;
  f.expires_at = sq_col_i64(st, 4);
  f.purged = sq_col_i64(st, 5) != 0;
  f.versioned = sqlite3_column_type(st, 6) != SQLITE_NULL &&
                sqlite3_column_type(st, 7) != SQLITE_NULL;
  f.version = f.versioned ? sq_col_i64(st, 6) : 0;
  f.lane_version = f.versioned ? sq_col_i64(st, 7) : 0;
  const char *kind = (const char *)sqlite3_column_text(st, 8);
  bool inbound = kind && !strcmp(kind, "inbound");
  f.passed = sqlite3_column_int(st, 9) != 0;
  sqlite3_reset(st);
  if (!endpoint_id || reason_lost) { /* (a refusal must not go unread: "superseded") */
    free(endpoint_id);
    free(reason);
    return sq_fail(c, "read delivery");
  }
  hookd_replay_memo own = {0};
  if (!memo) memo = &own;
  rc = hookd_replay_state_check(f.state, c->err, sizeof c->err, why);
  if (!rc) hookd_replay_memo_fill(memo, c, endpoint_id, sq_endpoint_get);
  if (!rc) rc = hookd_replay_check(&f, memo, now_ms, c->err, sizeof c->err, why);
  free(endpoint_id);
  free(reason);
  if (rc) return rc;

  st = sq_stmt(c, SQ_DL_REPLAY,
               "UPDATE deliveries SET state = 'pending', cycle_base = attempt_count,"
               " lane_wait = 0, lease_token = lease_token + 1," /* no older attempt's outcome
                                                                * lands on the new cycle */
               /* a new cycle runs under the endpoint's policy of now: an operator who changed
                * it, then replays, means the new one */
               " policy_id = (SELECT policy_id FROM endpoints WHERE id = endpoint_id),"
               " cycle_kind = 'replay', cycle_started_at = ?2, next_attempt_at = ?2,"
               " dead_at = NULL, dead_reason = NULL, delivered_at = NULL, lane_passed_by = NULL,"
               " updated_at = ?2"
               " WHERE seq = ?1 AND state IN ('delivered','dead')");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "replay");
  if (sqlite3_changes(c->db) != 1) {
    *why = "state_changed";
    return HOOKD_STORE_STATE;
  }
  /* an inbound event's record follows (dead_lettered or completed no longer: it is sent again);
   * an outbound event has none */
  return inbound ? sq_inbox_follow(c, seq, now_ms, NULL, NULL) : HOOKD_STORE_OK;
}

/* A delivery still scheduled (pending or retrying, its next attempt later): "send it now" brings
 * that attempt forward — its cycle and retry budget unchanged — what an operator needs once the
 * receiver is fixed, instead of waiting hours for the next retry (an endpoint's Retry-After pause
 * still holds it). HOOKD_STORE_NOTFOUND when the delivery is not scheduled (the replay's rules
 * decide then); HOOKD_STORE_STATE when its attempt is being made (claimed) or its endpoint is
 * disabled or deleted (*why, when given: a replay item's result saying which); for a replay
 * item, HOOKD_STORE_STATE "already_due" too when its attempt was due already (hookd_retry_due_
 * already: nothing brought forward, not counted replayed). */
int sq_retry_now(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why) {
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_RETRY_NOW_READ,
                             "SELECT d.state IN ('pending','retrying'), d.leased_until > ?2,"
                             " p.enabled AND p.deleted_at IS NULL, p.deleted_at IS NOT NULL,"
                             " (SELECT kind FROM events WHERE seq = d.event_seq) = 'inbound',"
                             " (SELECT expires_at <= ?2 FROM events WHERE seq = d.event_seq)"
                             " FROM deliveries d JOIN endpoints p ON p.id = d.endpoint_id"
                             " WHERE d.seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  sq_bind_i64(st, 2, now_ms);
  int rc = sqlite3_step(st);
  bool scheduled = false, claimed = false, live = false, deleted = false, inbound = false;
  bool expired = false;
  if (rc == SQLITE_ROW) {
    scheduled = sqlite3_column_int(st, 0);
    claimed = sqlite3_column_int(st, 1);
    live = sqlite3_column_int(st, 2);
    deleted = sqlite3_column_int(st, 3);
    inbound = sqlite3_column_int(st, 4);
    expired = sqlite3_column_int(st, 5);
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read delivery");
  if (!scheduled) return HOOKD_STORE_NOTFOUND;
  if (expired) { /* its claim would make it DEAD "expired" unsent: 409, not a 202 for nothing */
    if (why) *why = "expired";
    snprintf(c->err, sizeof c->err, "its event expired (expires_at passed): it would not be sent");
    return HOOKD_STORE_STATE;
  }
  if (claimed || !live) {
    if (why) *why = claimed ? "state_changed" : deleted ? "endpoint_deleted" : "endpoint_disabled";
    snprintf(c->err, sizeof c->err, "%s",
             claimed  ? "its attempt is being made now (claimed): its outcome decides what follows"
             : deleted ? "its endpoint was deleted"
                       : "its endpoint is disabled: enable it, and its deliveries go");
    return HOOKD_STORE_STATE;
  }
  st = sq_stmt(c, SQ_DL_RETRY_NOW,
               "UPDATE deliveries SET next_attempt_at = ?2, updated_at = ?2"
               " WHERE seq = ?1 AND state IN ('pending','retrying') AND next_attempt_at > ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "retry now");
  bool changed = sqlite3_changes(c->db) > 0;
  if (!why) { /* an operator's replay: the delivery is theirs now, no replay job's to take back:
               * the jobs' moves of it dropped (a take-back went by the token alone, and a claim
               * given back unsent since made it the job's again: a review), and a job
               * snapshotted before reads it changed. Not a lease lapsed and not swept yet: its
               * token is the sweep's to move (the unknown hold reads it; a review). */
    st = sq_stmt(c, SQ_DL_RETRY_NOW_OWN,
                 "UPDATE deliveries SET lease_token = lease_token + 1 WHERE seq = ?1"
                 " AND state IN ('pending','retrying') AND leased_until IS NULL");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, seq);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "retry now");
    st = sq_stmt(c, SQ_DL_RETRY_NOW_MOVES, "DELETE FROM replay_moves WHERE delivery_seq = ?1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, seq);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "retry now");
  }
  if (!changed) return hookd_retry_due_already(c->err, sizeof c->err, why);
  /* an inbound event's record shows its next attempt */
  return inbound ? sq_inbox_follow(c, seq, now_ms, NULL, NULL) : HOOKD_STORE_OK;
}

int sq_delivery_replay(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       hookd_delivery *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_SEQ_BY_ID, "SELECT seq FROM deliveries WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  int rc = sqlite3_step(st);
  int64_t seq = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "find delivery");
  rc = sq_retry_now(c, seq, now_ms, NULL);
  hookd_replay_memo memo = {.swept = swept};
  if (rc == HOOKD_STORE_NOTFOUND) rc = sq_replay_one(c, seq, now_ms, NULL, &memo);
  if (rc) return rc;
  return out ? sq_delivery_get(c, id, out, NULL, NULL) : HOOKD_STORE_OK;
}

/* Whether the endpoint's payload filter takes event `seq` (*takes, HOOKD_PFILTER_*): its body
 * read (no copy) and parsed only when there is a filter; *bytes += what was read. */
static int deliver_pfilter(hookd_store_conn *c, int64_t seq, const hookd_endpoint *ep,
                           int64_t *bytes, int *takes) {
  *takes = HOOKD_PFILTER_YES;
  if (!ep->payload_filter) return HOOKD_STORE_OK;
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_DELIVER_BODY, "SELECT body FROM events WHERE seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, seq);
  int step = sqlite3_step(st);
  if (step != SQLITE_ROW) {
    sqlite3_reset(st);
    return sq_fail(c, "read event body"); /* (read in this transaction a moment ago) */
  }
  size_t len = (size_t)sqlite3_column_bytes(st, 0);
  *bytes += (int64_t)len;
  json_t *parsed = NULL;
  *takes = hookd_pfilter_match_envelope(&c->pf, ep->payload_filter,
                                        len ? sqlite3_column_blob(st, 0) : NULL, len, &parsed,
                                        NULL);
  sqlite3_reset(st);
  json_decref(parsed);
  return HOOKD_STORE_OK;
}

/* An event's delivery to one endpoint, made by an operator (store.h event_deliver). */
static int deliver_checks(hookd_store_conn *c, const char *type, const char *channels,
                          int64_t seq, const hookd_endpoint *ep, const char *tenant_id,
                          int64_t *bytes) {
  if (strcmp(ep->tenant_id, tenant_id) != 0) {
    snprintf(c->err, sizeof c->err, "endpoint");
    return HOOKD_STORE_NOTFOUND;
  }
  if (ep->source_id) {
    snprintf(c->err, sizeof c->err,
             "a source's destination gets the events its source receives, not published ones");
    return HOOKD_STORE_STATE;
  }
  if (!ep->enabled) {
    snprintf(c->err, sizeof c->err, "the endpoint is disabled: enable it first");
    return HOOKD_STORE_STATE;
  }
  if (!hookd_filter_match(ep->event_types, type)) {
    snprintf(c->err, sizeof c->err, "the endpoint's event_types do not take %.64s", type);
    return HOOKD_STORE_STATE;
  }
  if (!hookd_channels_match(ep->channels, channels)) {
    snprintf(c->err, sizeof c->err, "the endpoint's channels do not take the event's");
    return HOOKD_STORE_STATE;
  }
  int takes, rc = deliver_pfilter(c, seq, ep, bytes, &takes);
  if (rc) return rc;
  if (takes != HOOKD_PFILTER_YES) {
    snprintf(c->err, sizeof c->err, "the endpoint's payload_filter does not take the event's "
                                    "payload%s", takes == HOOKD_PFILTER_OVER
                                                     ? " (it gave up: more than 10,000 steps)"
                                                     : "");
    return HOOKD_STORE_STATE;
  }
  return HOOKD_STORE_OK;
}

/* The pair's delivery, if it has one: HOOKD_STORE_EXISTS with out->id (replayed, not made
 * twice), else OK. */
static int pair_delivery(hookd_store_conn *c, int64_t event_seq, const char *endpoint_id,
                         hookd_delivery *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_DL_OF_PAIR,
                             "SELECT id, dead_reason IS 'superseded' FROM deliveries"
                             " WHERE event_seq = ?1 AND endpoint_id = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, event_seq);
  sq_bind_text(st, 2, endpoint_id);
  int step = sqlite3_step(st), rc = HOOKD_STORE_OK;
  if (step == SQLITE_ROW) {
    out->id = sq_col_str(st, 0);
    snprintf(c->err, sizeof c->err, "the event has a delivery to this endpoint (%.48s)%s",
             out->id ? out->id : "",
             sq_col_i64(st, 1) ? ", superseded by a higher ordering_version of its lane: never "
                                 "sent"
                               : ": replay it");
    rc = HOOKD_STORE_EXISTS;
  } else if (step != SQLITE_DONE) {
    rc = sq_fail(c, "read delivery");
  }
  sqlite3_reset(st);
  return rc;
}

/* Whether an ordered lane takes an operator's delivery of event `seq`, and whether it waits
 * (*wait). A lane never goes back. With versions, they decide (a version at or above the lane's
 * highest is sent, after what the lane has); without, the lane goes in publish order: an event
 * older than its lane's latest is refused (a lane is sent in delivery order, so it would go out
 * after the newer one). The latest is one probe of the lane index: the lane's last delivery,
 * whose event is its newest while deliveries are made in publish order (an operator's versioned
 * one may be older: then the probe misses a newer event of a lane that mixes versioned and
 * unversioned events). A delivery behind an open one of its lane waits. */
static int deliver_lane(hookd_store_conn *c, const char *endpoint_id, const char *key,
                        int64_t seq, bool versioned, int64_t version, int64_t now_ms,
                        int64_t *wait) {
  bool behind = false, raised = false;
  int rc;
  if (versioned) {
    rc = lane_version(c, endpoint_id, key, version, now_ms, &behind, &raised);
  } else {
    sqlite3_stmt *st = sq_stmt(c, SQ_LANE_NEWER,
                               "SELECT event_seq FROM deliveries WHERE endpoint_id = ?1"
                               " AND ordering_key = ?2 ORDER BY seq DESC LIMIT 1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, endpoint_id);
    sq_bind_text(st, 2, key);
    int step = sqlite3_step(st);
    behind = step == SQLITE_ROW && sq_col_i64(st, 0) > seq;
    sqlite3_reset(st);
    rc = step == SQLITE_ROW || step == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "read lane");
  }
  if (rc) return rc;
  if (behind) {
    snprintf(c->err, sizeof c->err, "the endpoint's lane %s: an ordered lane never goes back",
             versioned ? "has moved past this event's ordering_version"
                       : "has a later event already");
    return HOOKD_STORE_STATE;
  }
  if ((rc = lane_hint(c, endpoint_id, key, now_ms, wait)) != 0) return rc;
  return raised && *wait ? lane_settle(c, endpoint_id, key, now_ms) : HOOKD_STORE_OK;
}

int sq_event_deliver(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                     const char *endpoint_id, int64_t now_ms, hookd_delivery *out) {
  return sq_event_deliver_why(c, tenant_id, event_id, 0, endpoint_id, now_ms, out, NULL, NULL);
}

int sq_event_deliver_why(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                         int64_t event_seq, const char *endpoint_id, int64_t now_ms,
                         hookd_delivery *out, const char **why, int64_t *body_bytes) {
  static const char *unused;
  int64_t bytes_unused = 0;
  if (!why) why = &unused;
  if (!body_bytes) body_bytes = &bytes_unused;
  *why = "state_changed";
  memset(out, 0, sizeof *out);
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_DELIVER_READ,
                             "SELECT seq, type, kind, expires_at, purged_at, ordering_key,"
                             " ordering_version, created_at, channels, test_endpoint"
                             " FROM events WHERE id = ?1 AND tenant_id = ?2"
                             " AND (?3 = 0 OR seq = ?3)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, event_id);
  sq_bind_text(st, 2, tenant_id);
  sq_bind_i64(st, 3, event_seq);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return sq_fail(c, "read event");
    snprintf(c->err, sizeof c->err, "event");
    *why = "gone";
    return HOOKD_STORE_NOTFOUND;
  }
  int64_t seq = sq_col_i64(st, 0), expires = sq_col_i64(st, 3);
  char *type = sq_col_str(st, 1), *key = sq_col_str(st, 5);
  const char *kind = (const char *)sqlite3_column_text(st, 2);
  bool inbound = kind && !strcmp(kind, "inbound"), purged = sq_col_i64(st, 4) != 0;
  bool versioned = sqlite3_column_type(st, 6) != SQLITE_NULL;
  int64_t version = sq_col_i64(st, 6), published = sq_col_i64(st, 7);
  char *channels = sq_col_str(st, 8), *test_for = sq_col_str(st, 9);
  sqlite3_reset(st);
  hookd_endpoint ep;
  bool have_ep = false;
  if (!type) {
    rc = sq_fail(c, "read event");
  } else if (inbound) {
    snprintf(c->err, sizeof c->err, "an inbound event goes to its source's destinations "
                                    "(POST /v1/inbox/{id}/replay)");
    rc = HOOKD_STORE_STATE;
  } else if (test_for && strcmp(test_for, endpoint_id) != 0) {
    snprintf(c->err, sizeof c->err, "a test event goes to its own endpoint alone");
    rc = HOOKD_STORE_STATE;
  } else if (purged) {
    snprintf(c->err, sizeof c->err,
             "the event's payload was deleted (DELETE …/payload) or purged"
             " (--payload-retention-s): nothing left to send");
    rc = HOOKD_STORE_STATE;
    *why = "payload_purged";
  } else if (expires && expires <= now_ms) {
    snprintf(c->err, sizeof c->err, "the event expired (expires_at passed)");
    rc = HOOKD_STORE_STATE;
    *why = "expired";
  } else if ((rc = sq_endpoint_get(c, endpoint_id, &ep)) == HOOKD_STORE_NOTFOUND) {
    snprintf(c->err, sizeof c->err, "endpoint");
    *why = "endpoint_deleted";
  } else if (rc == HOOKD_STORE_OK) {
    have_ep = true;
    rc = deliver_checks(c, type, channels, seq, &ep, tenant_id, body_bytes);
    if (rc && !ep.enabled) *why = "endpoint_disabled";
  }
  if (rc == HOOKD_STORE_OK) rc = pair_delivery(c, seq, endpoint_id, out);
  int64_t wait = 0;
  if (rc == HOOKD_STORE_OK && key && ep.ordered &&
      (rc = deliver_lane(c, endpoint_id, key, seq, versioned, version, now_ms, &wait)) ==
          HOOKD_STORE_STATE)
    *why = "lane_moved_on";
  char did[HOOKD_ID_MAX];
  if (rc == HOOKD_STORE_OK && hookd_id_new("dlv", now_ms, did) != 0) rc = HOOKD_STORE_ERR;
  /* pending now as a replay cycle (scheduled with replays, attempts read "replay"), created
   * at its event's publish as every delivery is (the lists' since/until and replay jobs' time
   * filters read a delivery's creation as its event's) */
  if (rc == HOOKD_STORE_OK) {
    sqlite3_stmt *ins =
        sq_stmt(c, SQ_DL_INSERT_MADE,
                "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state,"
                " cycle_kind, cycle_started_at, next_attempt_at, policy_id, created_at,"
                " updated_at, ordering_key, lane_wait)"
                " VALUES (?1, ?2, ?3, ?4, 'pending', 'replay', ?5, ?5, ?6, ?9, ?5, ?7, ?8)");
    if (!ins) {
      rc = HOOKD_STORE_ERR;
    } else {
      sq_bind_text(ins, 1, did);
      sq_bind_i64(ins, 2, seq);
      sq_bind_text(ins, 3, endpoint_id);
      sq_bind_text(ins, 4, tenant_id);
      sq_bind_i64(ins, 5, now_ms);
      sq_bind_i64(ins, 6, ep.policy.id);
      sq_bind_text(ins, 7, key);
      sq_bind_i64(ins, 8, wait);
      sq_bind_i64(ins, 9, published);
      if (sqlite3_step(ins) != SQLITE_DONE) rc = sq_fail(c, "insert delivery");
      sqlite3_reset(ins);
    }
  }
  free(type);
  free(key);
  free(channels);
  free(test_for);
  if (have_ep) hookd_endpoint_free(&ep);
  if (rc != HOOKD_STORE_OK) return rc;
  return sq_delivery_get(c, did, out, NULL, NULL);
}

/* ---------- dispatcher ---------- */

/* The claimable set, shared by claims and next-due lookups: due (or any time, for next due),
 * unleased, active, of one cycle kind; for ordered endpoints only the head of each lane (no
 * earlier delivery of its lane still pending, retrying, held unknown — or DEAD when the lane
 * policy blocks, unless it was superseded, expired or its payload purged: it can never be sent,
 * nor replayed, so it blocks nothing; nor when the lane has moved past it since it went DEAD, a
 * later delivery of it — this one included — attempted or gone DEAD after it: skipped while the
 * policy was skip, a lane made to block later waits on its last DEAD head, not on a gap it left
 * behind, and that head replayed is the lane's head again; a replayed head that goes DEAD still
 * holds the later deliveries replayed after it) and only while no other delivery of its lane is
 * in flight (a replayed one is earlier than the lane's later ones, and one of those may be in
 * flight). */
/* A lease that ran out is taken over by a claim — except on an inbound destination that is not
 * idempotent: the request may have gone out, so only the sweep takes it back, and holds it as
 * unknown (a claim first would send it again). */
#define CLAIMABLE(kind)                                                                         \
  " FROM deliveries d WHERE d.endpoint_id = ?1 AND d.cycle_kind = '" kind "'"                  \
  " AND d.state IN ('pending','retrying') AND d.lane_wait = 0"                                  \
  " AND (d.leased_until IS NULL OR (d.leased_until <= ?3 AND NOT (SELECT e.idempotent = 0"     \
  " AND e.source_id IS NOT NULL FROM endpoints e WHERE e.id = d.endpoint_id)))"
/* lane_wait = 0 is a hint (rows known to wait are not even visited); this check is the rule,
 * each part one probe of a partial index (deliveries_lane_open, deliveries_lane_dead,
 * deliveries_lane_leased). */
#define LANE_HEAD                                                                               \
  " AND (d.ordering_key IS NULL OR (NOT EXISTS (SELECT 1 FROM deliveries p"                     \
  " WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key AND p.seq < d.seq"  \
  " AND p.ordering_key IS NOT NULL AND p.state IN ('pending','retrying','unknown'))"           \
  " AND NOT (?6 AND EXISTS ("                                                                  \
  LANE_DEAD_HOLDS("d.endpoint_id", "d.ordering_key", "d.seq", "?3") "))"                        \
  " AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = d.endpoint_id"             \
  " AND p.ordering_key = d.ordering_key AND p.ordering_key IS NOT NULL"                         \
  " AND p.leased_until IS NOT NULL AND p.leased_until > ?3)))"
#define CLAIM_SQL(kind, lanes)                                                                  \
  "UPDATE deliveries SET lease_owner = ?2, lease_token = lease_token + 1, leased_until = ?4"    \
  " WHERE seq IN (SELECT d.seq" CLAIMABLE(kind) " AND d.next_attempt_at <= ?3" lanes          \
  " ORDER BY d.next_attempt_at, d.seq LIMIT ?5)"                                                 \
  " RETURNING seq, id, event_seq, endpoint_id, tenant_id, state, attempt_count, cycle_base,"    \
  " cycle_started_at, next_attempt_at, lease_token, leased_until, policy_id, created_at,"      \
  " cycle_kind, ordering_key, last_ambiguous"
#define NEXT_DUE_SQL(kind, lanes)                                                               \
  "SELECT d.next_attempt_at" CLAIMABLE(kind) lanes " ORDER BY d.next_attempt_at LIMIT 1"

static int next_due_kind(hookd_store_conn *c, const hookd_claim_req *req, bool replay,
                         int64_t *due) {
  enum sq_stmt_id id = replay ? (req->ordered ? SQ_NEXT_DUE_REPLAY_LANES : SQ_NEXT_DUE_REPLAY)
                              : (req->ordered ? SQ_NEXT_DUE_LANES : SQ_NEXT_DUE);
  const char *sql = replay ? (req->ordered ? NEXT_DUE_SQL("replay", LANE_HEAD)
                                           : NEXT_DUE_SQL("replay", ""))
                           : (req->ordered ? NEXT_DUE_SQL("live", LANE_HEAD)
                                           : NEXT_DUE_SQL("live", ""));
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->endpoint_id);
  sq_bind_i64(st, 3, req->now_ms);
  if (req->ordered) sq_bind_i64(st, 6, req->lane_block);
  int rc = sqlite3_step(st);
  *due = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "next due");
  return HOOKD_STORE_OK;
}

static int next_due(hookd_store_conn *c, const hookd_claim_req *req, int64_t *due) {
  int64_t live = 0, replay = 0;
  int rc = next_due_kind(c, req, false, &live);
  if (!rc) rc = next_due_kind(c, req, true, &replay);
  *due = !live ? replay : !replay ? live : live < replay ? live : replay;
  return rc;
}

static int cmp_claimed(const void *a, const void *b) {
  const hookd_claimed *x = a, *y = b;
  if (x->d.next_attempt_ms != y->d.next_attempt_ms)
    return x->d.next_attempt_ms < y->d.next_attempt_ms ? -1 : 1;
  return x->d.seq < y->d.seq ? -1 : x->d.seq > y->d.seq;
}

/* Runs one claim statement, appending the claimed rows to v. */
static int claim_kind(hookd_store_conn *c, const hookd_claim_req *req, bool replay, int limit,
                      hookd_claimed *v, size_t *len) {
  if (limit <= 0) return HOOKD_STORE_OK;
  enum sq_stmt_id id = replay ? (req->ordered ? SQ_CLAIM_REPLAY_LANES : SQ_CLAIM_REPLAY)
                              : (req->ordered ? SQ_CLAIM_LIVE_LANES : SQ_CLAIM);
  const char *sql = replay ? (req->ordered ? CLAIM_SQL("replay", LANE_HEAD) : CLAIM_SQL("replay", ""))
                           : (req->ordered ? CLAIM_SQL("live", LANE_HEAD) : CLAIM_SQL("live", ""));
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, req->endpoint_id);
  sq_bind_text(st, 2, req->owner);
  sq_bind_i64(st, 3, req->now_ms);
  sq_bind_i64(st, 4, req->now_ms + req->lease_ms);
  sq_bind_i64(st, 5, limit);
  if (req->ordered) sq_bind_i64(st, 6, req->lane_block);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    hookd_delivery *d = &v[(*len)++].d;
    d->seq = sq_col_i64(st, 0);
    d->id = sq_col_str(st, 1);
    d->event_seq = sq_col_i64(st, 2);
    d->endpoint_id = sq_col_str(st, 3);
    d->tenant_id = sq_col_str(st, 4);
    const char *state = (const char *)sqlite3_column_text(st, 5);
    hookd_dstate s = HOOKD_DS_PENDING;
    if (state) hookd_dstate_parse(state, &s);
    d->state = s;
    d->attempt_count = (int)sq_col_i64(st, 6);
    d->cycle_base = (int)sq_col_i64(st, 7);
    d->cycle_started_ms = sq_col_i64(st, 8);
    d->next_attempt_ms = sq_col_i64(st, 9);
    d->lease_token = sq_col_i64(st, 10);
    d->leased_until_ms = sq_col_i64(st, 11);
    d->policy_id = sq_col_i64(st, 12);
    d->created_ms = sq_col_i64(st, 13);
    const char *kind = (const char *)sqlite3_column_text(st, 14);
    d->replay_cycle = kind && strcmp(kind, "replay") == 0;
    d->ordering_key = sq_col_str(st, 15);
    d->last_ambiguous = sqlite3_column_int(st, 16) != 0;
  }
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "claim");
}

int sq_claim(hookd_store_conn *c, const hookd_claim_req *asked, hookd_claimed **out, size_t *n,
             int64_t *next_due_ms) {
  *out = NULL;
  *n = 0;
  *next_due_ms = 0;
  /* A deleted endpoint's deliveries not cancelled yet (the delete walk's: docs/architecture.md
   * "Deletes") are never claimed, though the dispatcher may not have heard of the delete yet;
   * nor are its lanes claimed by a mode the dispatcher has not heard of yet (made ordered, or
   * to block, by a change committed before this claim): the stored row says */
  sqlite3_stmt *live = sq_stmt(c, SQ_CLAIM_LIVE_EP,
                               "SELECT deleted_at IS NULL, ordered = 1, lane_policy = 'block'"
                               " FROM endpoints WHERE id = ?1");
  if (!live) return HOOKD_STORE_ERR;
  sq_bind_text(live, 1, asked->endpoint_id);
  int step = sqlite3_step(live);
  bool deleted = step == SQLITE_ROW && !sqlite3_column_int(live, 0);
  hookd_claim_req r = *asked;
  if (step == SQLITE_ROW) hookd_claim_mode(&r, sqlite3_column_int(live, 1) != 0,
                                           sqlite3_column_int(live, 2) != 0);
  const hookd_claim_req *req = &r;
  sqlite3_reset(live);
  if (step != SQLITE_ROW && step != SQLITE_DONE) return sq_fail(c, "claim");
  if (deleted) return HOOKD_STORE_OK;
  hookd_claimed *v = calloc((size_t)(req->limit > 0 ? req->limit : 1), sizeof *v);
  if (!v) return HOOKD_STORE_ERR;
  size_t len = 0;
  int rc = hookd_claim_passes(c, req, claim_kind, v, &len);
  if (rc) {
    for (size_t i = 0; i < len; i++) hookd_claimed_free(&v[i]);
    free(v);
    return rc;
  }

  sqlite3_stmt *det = sq_stmt(c, SQ_CLAIM_DETAIL,
                              "SELECT e.id, e.type, e.body, e.expires_at, p.id, p.max_attempts,"
                              " p.base_ms, p.cap_ms, p.max_age_ms, p.retry_after_cap_ms, e.kind,"
                              " e.content_type, e.meta, p.retry_statuses"
                              " FROM events e, retry_policies p WHERE e.seq = ?1 AND p.id = ?2");
  for (size_t i = 0; det && i < len; i++) {
    sqlite3_reset(det);
    sq_bind_i64(det, 1, v[i].d.event_seq);
    sq_bind_i64(det, 2, v[i].d.policy_id);
    if (sqlite3_step(det) != SQLITE_ROW) {
      det = NULL;
      break;
    }
    v[i].d.event_id = sq_col_str(det, 0);
    v[i].d.event_type = sq_col_str(det, 1);
    v[i].body_len = (size_t)sqlite3_column_bytes(det, 2);
    v[i].body = malloc(v[i].body_len + 1);
    if (!v[i].body) {
      det = NULL;
      break;
    }
    if (v[i].body_len) /* the blob is NULL when empty */
      memcpy(v[i].body, sqlite3_column_blob(det, 2), v[i].body_len);
    v[i].body[v[i].body_len] = '\0';
    v[i].expires_ms = sq_col_i64(det, 3);
    sq_read_policy(det, 4, &v[i].policy);
    sq_read_policy_statuses(det, 13, &v[i].policy);
    const char *kind = (const char *)sqlite3_column_text(det, 10);
    v[i].inbound = kind && strcmp(kind, "inbound") == 0;
    v[i].content_type = sq_col_str(det, 11);
    v[i].meta = sq_col_str(det, 12);
  }
  if (!det || (rc = next_due(c, req, next_due_ms)) != 0) {
    for (size_t i = 0; i < len; i++) hookd_claimed_free(&v[i]);
    free(v);
    return sq_fail(c, "claim details");
  }
  qsort(v, len, sizeof *v, cmp_claimed);
  *out = v;
  *n = len;
  return HOOKD_STORE_OK;
}

/* What the sweep writes on a delivery it holds (reclaim_hold); the late outcome and release of
 * the node that held the lease recognise it. */
static const char lease_lost[] = "lease lost: hookd stopped while the request may have been sent";
/* What an inbound destination's delete writes on a delivery it holds (sq_endpoint_delete): the
 * destination is not idempotent and its request may be out (the send mark of the lease). */
const char sq_held_deleted[] = "destination deleted while a request to it may have been in flight";
/* The delivery's endpoint was deleted: a never-sent delivery given back is cancelled then, as the
 * delete would have done (pending, it would wait for ever). */
#define RELEASE_GONE                                                                            \
  "EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id"                       \
  " AND e.deleted_at IS NOT NULL)"

/* The outcome's new state, shared by the fenced update and the one on a held delivery (the
 * larger attempt count: an attempt appended late during this lease, late_outcome, took the
 * number after this one's). */
#define OUTCOME_SET                                                                             \
  "UPDATE deliveries SET state = ?4,"                                                           \
  " attempt_count = CASE WHEN ?5 > 0 THEN MAX(attempt_count, ?5) ELSE attempt_count END,"       \
  " next_attempt_at = ?6, last_error = ?7,"                                                     \
  " last_status = CASE WHEN ?5 > 0 THEN ?8 ELSE last_status END,"                               \
  " lease_owner = NULL, leased_until = NULL, updated_at = ?9,"                                  \
  " delivered_at = CASE WHEN ?4 = 'delivered' THEN ?9 ELSE delivered_at END,"                   \
  " dead_at = CASE WHEN ?4 = 'dead' THEN ?9 ELSE dead_at END,"                                  \
  " dead_reason = CASE WHEN ?4 = 'dead' THEN ?10 ELSE dead_reason END,"                         \
  " result_ref = COALESCE(?11, result_ref),"                                                    \
  " last_ambiguous = CASE WHEN ?5 > 0 THEN ?14 ELSE last_ambiguous END"

static sqlite3_stmt *bind_outcome(sqlite3_stmt *st, const hookd_outcome *o) {
  sq_bind_i64(st, 1, o->delivery_seq);
  sq_bind_i64(st, 2, o->lease_token);
  sq_bind_text(st, 3, hookd_dstate_name(o->from));
  sq_bind_text(st, 4, hookd_dstate_name(o->to));
  sq_bind_i64(st, 5, o->attempt_number);
  if (!hookd_dstate_active(o->to))
    sqlite3_bind_null(st, 6);
  else
    sq_bind_i64(st, 6, o->next_attempt_ms);
  sq_bind_text(st, 7, o->last_error);
  sq_bind_i64_or_null(st, 8, o->attempt.http_status);
  sq_bind_i64(st, 9, o->now_ms);
  sq_bind_text(st, 10, o->dead_reason);
  sq_bind_text(st, 11, o->result_ref);
  sqlite3_bind_int(st, 14, o->ambiguous); /* (12 and 13: the late outcome's own) */
  return st;
}

/* The fenced update missed. The outcome still lands where the token was bumped exactly once
 * since its claim, by something that leaves a lease-free delivery no one else may send:
 *  - its endpoint's delete, which cancelled it while the request was in flight;
 *  - the sweep, which held it as unknown (a destination that is not idempotent) when its lease
 *    ran out before this outcome could be written (store locked or failing).
 *  - the delete of an inbound destination that is not idempotent, which held it as unknown
 *    (sq_held_deleted) because the request may have been out.
 *  - the sweep's reclaim of its lapsed lease alone (the state as claimed, no claim since): the
 *    outcome settles it as it would have within its lease.
 * The request went out, so its attempt is history all the same (the caller appends it). The
 * outcome decides the state — but with the endpoint deleted, only a success (what the receiver
 * got) or a hold (an ambiguous end at a destination that is not idempotent: the receiver may
 * have done the work; an operator decides) stands; anything else cancels it, as the delete
 * does: retrying, it would wait for ever. Anything else since (a resolve, a replay, another
 * claim) changed the state or the token: STALE — but with keep_attempt (every request that
 * went out: its outcome is written until it lands, and the delivery may have been claimed and
 * sent again, or resolved by an operator, meanwhile): the delivery and its record stay as they
 * are, and the attempt is appended all the same (docs/architecture.md "Failure windows"), under
 * the next free number (o->superseded) — its own may be a new cycle's first attempt's — past every
 * attempt recorded and past a live lease's (numbered attempt_count + 1 at its claim;
 * OUTCOME_SET keeps the larger count). The running cycle's budget leaves it out (cycle_base
 * moves with it). STALE still when this lease's attempt is recorded (a write that committed
 * after all). */
static int late_outcome(hookd_store_conn *c, hookd_outcome *o) {
  sqlite3_stmt *st = sq_stmt(c, SQ_OUTCOME_GONE,
                             "SELECT e.deleted_at IS NOT NULL, d.state = 'unknown',"
                             " (SELECT v.purged_at IS NOT NULL FROM events v"
                             " WHERE v.seq = d.event_seq), EXISTS (SELECT 1 FROM attempts a"
                             " WHERE a.delivery_seq = d.seq AND a.lease_token = ?2),"
                             " MAX(d.attempt_count + (d.leased_until IS NOT NULL),"
                             " COALESCE((SELECT MAX(a.attempt_number) FROM attempts a"
                             " WHERE a.delivery_seq = d.seq), 0)) + 1 FROM deliveries"
                             " d JOIN endpoints e ON e.id = d.endpoint_id WHERE d.seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, o->delivery_seq);
  sq_bind_i64(st, 2, o->lease_token);
  int step = sqlite3_step(st);
  bool gone = step == SQLITE_ROW && sqlite3_column_int(st, 0);
  bool held = step == SQLITE_ROW && sqlite3_column_int(st, 1);
  /* its event's payload deleted while the request was out (DELETE …/payload cancelled it): as
   * for a deleted endpoint, only a success stands — nothing is left to send again */
  bool purged = step == SQLITE_ROW && sqlite3_column_int(st, 2);
  o->endpoint_gone = gone; /* its attempt's URL recorded cut (docs/architecture.md "Deletes") */
  bool keep = step == SQLITE_ROW && !sqlite3_column_int(st, 3) && o->keep_attempt &&
              o->attempt_number > 0;
  int64_t next = step == SQLITE_ROW ? sqlite3_column_int64(st, 4) : 0;
  sqlite3_reset(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE) return sq_fail(c, "record outcome");
  hookd_outcome late = *o;
  bool cut = gone || purged;
  if (cut && late.to != HOOKD_DS_DELIVERED && late.to != HOOKD_DS_UNKNOWN) {
    late.to = HOOKD_DS_CANCELLED;
    /* the delete's reason stands (as the delete wrote it); the attempt's own failure is in
     * its attempt row */
    late.last_error = !gone ? "payload deleted"
                      : o->inbound ? "destination deleted"
                                   : "endpoint deleted";
  } else if (gone && late.to == HOOKD_DS_UNKNOWN) {
    late.last_error = sq_held_deleted; /* held still: the operator reads why (the attempt, how) */
  }
  /* (the state as claimed: the sweep's reclaim alone, no claim since — the outcome settles it as
   * it would have within its lease; appended only, a 410 was dropped and the delivery sent again
   * to a receiver that had said Gone: a review. Never once an attempt under this lease or a later
   * one is recorded: a claim that took the lapsed lease over and wrote its outcome, an operator's
   * resolve or replay of this one's, bump the token once too and may leave the state this outcome
   * was claimed from — it was overwritten, and the attempt's number failed the write at each try,
   * for hours: two reviews) */
  st = sq_stmt(c, SQ_OUTCOME_LATE,
               OUTCOME_SET " WHERE seq = ?1 AND lease_token = ?2 + 1 AND lease_owner IS NULL"
               " AND (state = 'cancelled' OR (state = 'unknown'"
               " AND (last_error = ?12 OR last_error = ?13)) OR state = ?3)"
               " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_seq = ?1"
               " AND a.lease_token >= ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(bind_outcome(st, &late), 12, lease_lost);
  sq_bind_text(st, 13, sq_held_deleted);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "record outcome");
  if (sqlite3_changes(c->db) != 1 && keep) {
    st = sq_stmt(c, SQ_SUPERSEDED_COUNT,
                 "UPDATE deliveries SET attempt_count = ?2, cycle_base = cycle_base + 1"
                 " WHERE seq = ?1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, o->delivery_seq);
    sq_bind_i64(st, 2, next);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "record outcome");
    o->superseded = (int)next;
    return HOOKD_STORE_OK;
  }
  if (sqlite3_changes(c->db) != 1) {
    snprintf(c->err, sizeof c->err, "lease token %lld is no longer current",
             (long long)o->lease_token);
    return HOOKD_STORE_STALE;
  }
  o->cancelled = cut && late.to != HOOKD_DS_UNKNOWN; /* "cut off" (held: not) */
  o->was_held = held && late.to == HOOKD_DS_UNKNOWN;
  o->last_error = late.last_error; /* the inbox record follows it (sq_record_outcome) */
  return HOOKD_STORE_OK;
}

/* An answer's word on its endpoint counts while the endpoint is as the request found it: the URL
 * it went to (?u: NULL = not checked), and not moved nor enabled again by an operator since it
 * was sent (?s: 0 = not checked; health_since, set by the endpoint's update). */
#define HEALTH_CURRENT(u, s)                                                                    \
  " AND (" u " IS NULL OR url = " u ") AND (" s " = 0 OR health_since IS NULL"                  \
  " OR health_since <= " s ")"

/* The dispatcher judged the answer by its copy of the endpoint; a PATCH that moved it may have
 * committed before that copy was updated. A DEAD for the old URL's own word (410, another 4xx)
 * is then a retry at the new one, due now, as the dispatcher would have decided. */
static int moved_since_sent(hookd_store_conn *c, hookd_outcome *o) {
  if (!o->sent_url || !o->endpoint_id || o->to != HOOKD_DS_DEAD || !o->dead_reason ||
      (strcmp(o->dead_reason, "gone") && strcmp(o->dead_reason, "permanent")))
    return HOOKD_STORE_OK;
  sqlite3_stmt *st = sq_stmt(c, SQ_EP_MOVED, "SELECT url IS NOT ?2 FROM endpoints WHERE id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, o->endpoint_id);
  sq_bind_text(st, 2, o->sent_url);
  int step = sqlite3_step(st);
  bool moved = step == SQLITE_ROW && sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  if (step != SQLITE_ROW && step != SQLITE_DONE) return sq_fail(c, "read endpoint");
  if (moved) {
    o->to = HOOKD_DS_RETRYING;
    o->next_attempt_ms = o->now_ms;
    o->dead_reason = NULL; /* a disable asked for is declined below (not this URL): the
                            * dispatcher then undoes its own */
  }
  return HOOKD_STORE_OK;
}

int sq_record_outcome(hookd_store_conn *c, hookd_outcome *o) {
  hookd_outcome_run(o);
  int mrc = moved_since_sent(c, o);
  if (mrc) return mrc;
  /* the fenced update, under the lease the attempt was made with */
  sqlite3_stmt *st = sq_stmt(c, SQ_OUTCOME,
                             OUTCOME_SET " WHERE seq = ?1 AND lease_token = ?2 AND state = ?3");
  if (!st) return HOOKD_STORE_ERR;
  if (sqlite3_step(bind_outcome(st, o)) != SQLITE_DONE) return sq_fail(c, "record outcome");
  o->cancelled = false;
  o->disable_declined = o->disabled_now = o->failing_run_ended = false;
  o->disabled_updated_ms = 0;
  o->was_held = o->endpoint_gone = false;
  o->superseded = 0;
  if (sqlite3_changes(c->db) != 1) {
    int rc = late_outcome(c, o);
    if (rc) return rc;
  }

  if (o->attempt_number > 0) {
    const hookd_attempt *a = &o->attempt;
    st = sq_stmt(c, SQ_ATTEMPT_INSERT,
                 "INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at,"
                 " outcome, http_status, latency_ms, error, response, lease_token, kind, url)"
                 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
                 " CASE WHEN ?13 THEN " SQ_URL_ORIGIN("?12") " ELSE ?12 END)");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, o->delivery_seq);
    sq_bind_i64(st, 2, o->superseded ? o->superseded : o->attempt_number);
    sq_bind_i64(st, 3, a->started_ms);
    sq_bind_i64(st, 4, a->finished_ms);
    sq_bind_text(st, 5, a->outcome);
    sq_bind_i64_or_null(st, 6, a->http_status);
    sq_bind_i64(st, 7, a->latency_ms);
    sq_bind_text(st, 8, a->error);
    if (a->response_len)
      sqlite3_bind_blob(st, 9, a->response,
                        (int)(a->response_len > HOOKD_EXCERPT_MAX ? HOOKD_EXCERPT_MAX
                                                                  : a->response_len),
                        SQLITE_STATIC);
    sq_bind_i64(st, 10, o->lease_token);
    sq_bind_text(st, 11, a->trigger ? a->trigger : "live");
    sq_bind_text(st, 12, a->url);
    sqlite3_bind_int(st, 13, o->endpoint_gone);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert attempt");
  }
  if (o->inbound) { /* (superseded: its attempt count alone, the status and error as they are) */
    int rc = sq_inbox_follow(c, o->delivery_seq, o->now_ms, o->superseded ? NULL : o->last_error,
                             o->superseded ? NULL : o->result_ref);
    if (rc) return rc;
  }
  /* its endpoint is gone, or the delivery moved on: nothing more to follow */
  if (o->cancelled || o->superseded) return HOOKD_STORE_OK;
  if (o->lane && !hookd_dstate_active(o->to)) {
    int rc = sq_lane_advance(c, o->delivery_seq, o->now_ms);
    if (rc) return rc;
  }
  if (o->lane && o->attempt_number > 0) {
    /* the lane was attempted past the DEAD deliveries before this one that went DEAD before
     * the attempt (skipped): they hold it no more for this one and those after it
     * (LANE_MOVED_PAST), whatever retention deletes later — one probe of the lanes' DEAD rows
     * (deliveries_lane_dead) */
    st = sq_stmt(c, SQ_LANE_PASSED,
                 "UPDATE deliveries SET lane_passed_by = ?1 WHERE seq IN (SELECT p.seq"
                 " FROM deliveries d JOIN deliveries p ON p.endpoint_id = d.endpoint_id"
                 " AND p.ordering_key = d.ordering_key AND p.seq < d.seq"
                 " WHERE d.seq = ?1 AND p.ordering_key IS NOT NULL AND p.state = 'dead'"
                 " AND p.dead_reason NOT IN ('superseded','expired')"
                 " AND (p.lane_passed_by IS NULL OR p.lane_passed_by > ?1) AND p.dead_at <= ?2)");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, o->delivery_seq);
    /* attempted after they went DEAD, or going DEAD itself after them (LANE_MOVED_PAST's two
     * ways; a DEAD that is superseded or expired counts only by its attempt) */
    bool dead_counts = o->to == HOOKD_DS_DEAD && o->dead_reason &&
                       strcmp(o->dead_reason, "superseded") && strcmp(o->dead_reason, "expired");
    sq_bind_i64(st, 2, dead_counts ? o->now_ms : o->attempt.started_ms);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "lane passed");
  }
  if (o->failing && o->endpoint_id) {
    st = sq_stmt(c, SQ_EP_FAILING,
                 "UPDATE endpoints SET failing_since = CASE WHEN ?2 > 0"
                 " THEN COALESCE(failing_since, ?3) ELSE NULL END WHERE id = ?1"
                 HEALTH_CURRENT("?4", "?5"));
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, o->endpoint_id);
    sq_bind_i64(st, 2, o->failing);
    sq_bind_i64(st, 3, o->now_ms);
    sq_bind_text(st, 4, o->sent_url);
    sq_bind_i64(st, 5, o->sent_ms);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "endpoint health");
  }
  if (o->pause_until_ms && o->endpoint_id) { /* kept for a restart: the dispatcher holds it */
    st = sq_stmt(c, SQ_EP_PAUSE,
                 "UPDATE endpoints SET paused_until = MAX(COALESCE(paused_until, 0), ?2)"
                 " WHERE id = ?1 AND deleted_at IS NULL" HEALTH_CURRENT("?3", "?4"));
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, o->endpoint_id);
    sq_bind_i64(st, 2, o->pause_until_ms);
    sq_bind_text(st, 3, o->sent_url);
    sq_bind_i64(st, 4, o->sent_ms);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "pause endpoint");
  }
  if (o->disable_endpoint && o->endpoint_id) {
    st = sq_stmt(c, SQ_EP_DISABLE,
                 "UPDATE endpoints SET enabled = 0, disabled_reason = ?2, disabled_at = ?3,"
                 /* its time is the answer's, maybe older; moved on in any case (as PostgreSQL's,
                  * where other nodes see a change by it) */
                 " updated_at = MAX(updated_at + 1, ?3)"
                 " WHERE id = ?1 AND deleted_at IS NULL AND enabled = 1"
                 " AND (?4 = 0 OR updated_at <= ?4)" HEALTH_CURRENT("?5", "?6")
                 " AND (?7 = 0 OR failing_since <= ?7) RETURNING updated_at");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, o->endpoint_id);
    sq_bind_text(st, 2, o->disable_reason ? o->disable_reason : "disabled");
    sq_bind_i64(st, 3, o->now_ms);
    sq_bind_i64(st, 4, o->failed_write_ms);
    sq_bind_text(st, 5, o->sent_url);
    sq_bind_i64(st, 6, o->sent_ms);
    sq_bind_i64(st, 7, o->failing_since_ms);
    int step = sqlite3_step(st);
    o->disabled_now = step == SQLITE_ROW;
    if (o->disabled_now) {
      o->disabled_updated_ms = sqlite3_column_int64(st, 0);
      step = sqlite3_step(st);
    }
    if (step != SQLITE_DONE) return sq_fail(c, "disable endpoint");
    if (o->disabled_now) { /* audited like an operator's disable (actor system) */
      st = sq_stmt(c, SQ_EP_DISABLE_AUDIT,
                   "INSERT INTO audit_log(at, actor, action, target, tenant_id, reason, detail)"
                   " SELECT ?3, 'system', 'endpoint.disable', id, tenant_id, ?2, 'automatic'"
                   " FROM endpoints WHERE id = ?1");
      if (!st) return HOOKD_STORE_ERR;
      sq_bind_text(st, 1, o->endpoint_id);
      sq_bind_text(st, 2, o->disable_reason ? o->disable_reason : "disabled");
      sq_bind_i64(st, 3, o->now_ms);
      if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "audit endpoint disable");
    } else { /* still enabled: a PATCH landed since, or the endpoint moved to another URL */
      st = sq_stmt(c, SQ_EP_DISABLE_DECLINED,
                   "SELECT ?2 > 0 AND (failing_since IS NULL OR failing_since > ?2)"
                   " FROM endpoints WHERE id = ?1 AND deleted_at IS NULL AND enabled = 1");
      if (!st) return HOOKD_STORE_ERR;
      sq_bind_text(st, 1, o->endpoint_id);
      sq_bind_i64(st, 2, o->failing_since_ms);
      step = sqlite3_step(st);
      if (step != SQLITE_ROW && step != SQLITE_DONE) return sq_fail(c, "read endpoint");
      o->disable_declined = step == SQLITE_ROW;
      o->failing_run_ended = step == SQLITE_ROW && sqlite3_column_int(st, 0);
      sqlite3_reset(st);
    }
  }
  return HOOKD_STORE_OK;
}

int sq_release_lease(hookd_store_conn *c, const hookd_release *r) {
  /* a late outcome appended while it was claimed numbered its attempt past this claim's and
   * moved the cycle's base by one attempt only (late_outcome): given back unsent, this claim's
   * number is a gap, and the cycle's count is set right (else the delivery went DEAD one try
   * early) */
  sqlite3_stmt *st = sq_stmt(c, SQ_RELEASE,
                             "UPDATE deliveries SET lease_owner = NULL, leased_until = NULL,"
                             /* the release's mark: given back unsent (replay take-back) */
                             " released_token = CASE WHEN ?4 THEN released_token"
                             "   ELSE lease_token END,"
                             " cycle_base = cycle_base + (?3 > 0 AND ?3 <= attempt_count"
                             " AND NOT EXISTS (SELECT 1 FROM attempts a WHERE"
                             " a.delivery_seq = deliveries.seq AND a.attempt_number = ?3))"
                             " WHERE seq = ?1 AND lease_token = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, r->delivery_seq);
  sq_bind_i64(st, 2, r->lease_token);
  sq_bind_i64(st, 3, r->attempt_number);
  sq_bind_i64(st, 4, r->maybe_sent);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "release lease");
  if (sqlite3_changes(c->db) == 1) return HOOKD_STORE_OK;
  /* The sweep took it back (token + 1) and, the destination not idempotent, held it as
   * unknown: this release, which says it was never sent, could not be written in time (the
   * store was locked or failing past the lease). Or the destination's delete held it, its send
   * mark committed but the request not started. Back as it was claimed (cancelled, its
   * destination deleted) — unless anything else happened to it since (a resolve, another
   * claim). */
  st = sq_stmt(c, SQ_RELEASE_HELD,
               "UPDATE deliveries SET state = CASE WHEN " RELEASE_GONE " THEN 'cancelled' ELSE ?3"
               " END, next_attempt_at = CASE WHEN " RELEASE_GONE " THEN NULL ELSE ?4 END,"
               " last_error = CASE WHEN " RELEASE_GONE " THEN 'destination deleted' ELSE ?5 END,"
               " updated_at = ?6"
               " WHERE seq = ?1 AND lease_token = ?2 + 1 AND state = 'unknown'"
               " AND lease_owner IS NULL AND (last_error = ?7 OR last_error = ?8)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, r->delivery_seq);
  sq_bind_i64(st, 2, r->lease_token);
  sq_bind_text(st, 3, hookd_dstate_name(r->state));
  sq_bind_i64(st, 4, r->next_attempt_ms ? r->next_attempt_ms : r->now_ms);
  sq_bind_text(st, 5, r->last_error);
  sq_bind_i64(st, 6, r->now_ms);
  sq_bind_text(st, 7, lease_lost);
  sq_bind_text(st, 8, sq_held_deleted);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) return sq_fail(c, "release lease");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_STALE;
  return r->inbound ? sq_inbox_follow(c, r->delivery_seq, r->now_ms, r->last_error, NULL)
                    : HOOKD_STORE_OK;
}

int sq_mark_sent(hookd_store_conn *c, int64_t delivery_seq, int64_t lease_token) {
  sqlite3_stmt *st = sq_stmt(c, SQ_MARK_SENT,
                             "UPDATE deliveries SET sent_token = ?2"
                             " WHERE seq = ?1 AND lease_token = ?2 AND leased_until IS NOT NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, delivery_seq);
  sq_bind_i64(st, 2, lease_token);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "mark sent");
  return sqlite3_changes(c->db) == 1 ? HOOKD_STORE_OK : HOOKD_STORE_STALE;
}

/* A reclaimed delivery to an inbound destination marked idempotent: false, whose request may
 * have been sent by the node that held it: the send mark of the lease reclaimed is there
 * (written before the request, sq_mark_sent; the RETURNING clause sees the token already
 * bumped). Without it the request never started: sent again like any other. */
#define RECLAIM_NO_RESEND                                                                      \
  "(deliveries.sent_token = deliveries.lease_token - 1 AND"                                     \
  " (SELECT e.idempotent = 0 AND e.source_id IS NOT NULL FROM endpoints e"                      \
  " WHERE e.id = deliveries.endpoint_id))"

/* Such a delivery is not sent again: held as unknown for an operator, like a timeout after the
 * request went out, and its inbox record follows. */
static int reclaim_hold(hookd_store_conn *c, const int64_t *seqs, size_t n, int64_t now_ms,
                        int *held) {
  const char *why = lease_lost;
  *held = 0;
  for (size_t i = 0; i < n; i++) {
    sqlite3_stmt *st = sq_stmt(c, SQ_RECLAIM_HOLD,
                               "UPDATE deliveries SET state = 'unknown', next_attempt_at = NULL,"
                               " last_error = ?3, updated_at = ?2"
                               " WHERE seq = ?1 AND (state = 'pending' OR state = 'retrying')");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, seqs[i]);
    sq_bind_i64(st, 2, now_ms);
    sq_bind_text(st, 3, why);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "hold reclaimed delivery");
    *held += sqlite3_changes(c->db);
    int rc = sq_inbox_follow(c, seqs[i], now_ms, why, NULL);
    if (rc) return rc;
  }
  return HOOKD_STORE_OK;
}

int sq_lease_shift(hookd_store_conn *c, const char *owner, int64_t delta_ms, int *shifted) {
  /* (on the partial index of leased rows: the leases held, not the deliveries) */
  sqlite3_stmt *st = sq_stmt(c, SQ_LEASE_SHIFT,
                             "UPDATE deliveries SET leased_until = leased_until + ?2"
                             " WHERE leased_until IS NOT NULL AND lease_owner = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, owner);
  sq_bind_i64(st, 2, delta_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "move leases");
  *shifted = sqlite3_changes(c->db);
  return HOOKD_STORE_OK;
}

int sq_reclaim_leases(hookd_store_conn *c, const char *owner, int64_t now_ms, int limit,
                      hookd_due_hint **hints, size_t *n, int *reclaimed, int *held) {
  sqlite3_stmt *st;
  if (owner) {
    st = sq_stmt(c, SQ_RECLAIM_OWNER,
                 "UPDATE deliveries SET lease_owner = NULL, leased_until = NULL,"
                 " lease_token = lease_token + 1 WHERE seq IN (SELECT seq FROM deliveries"
                 " WHERE leased_until IS NOT NULL AND lease_owner = ?1 LIMIT ?3)"
                 " RETURNING endpoint_id, next_attempt_at, state, seq, " RECLAIM_NO_RESEND);
  } else {
    st = sq_stmt(c, SQ_RECLAIM_EXPIRED,
                 "UPDATE deliveries SET lease_owner = NULL, leased_until = NULL,"
                 " lease_token = lease_token + 1 WHERE seq IN (SELECT seq FROM deliveries"
                 " WHERE leased_until IS NOT NULL AND leased_until <= ?2 LIMIT ?3)"
                 " RETURNING endpoint_id, next_attempt_at, state, seq, " RECLAIM_NO_RESEND);
  }
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, owner);
  sq_bind_i64(st, 2, now_ms);
  sq_bind_i64(st, 3, limit);
  hookd_due_hint *v = NULL;
  size_t len = 0, cap = 0, n_hold = 0, cap_hold = 0;
  int64_t *hold = NULL;
  int rc, rows = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    rows++;
    const char *state = (const char *)sqlite3_column_text(st, 2);
    if (!state || (strcmp(state, "pending") != 0 && strcmp(state, "retrying") != 0)) continue;
    if (sqlite3_column_int(st, 4)) { /* not sent again: held (below) */
      if (hookd_seq_push(&hold, &n_hold, &cap_hold, sq_col_i64(st, 3)) != 0) break;
      continue;
    }
    if (hookd_hint_add(&v, &len, &cap, (const char *)sqlite3_column_text(st, 0),
                       sq_col_i64(st, 1)) != 0)
      break;
  }
  if (rc == SQLITE_ROW) { /* out of memory */
    sqlite3_reset(st);
    hookd_due_hints_free(v, len);
    free(hold);
    return HOOKD_STORE_ERR;
  }
  if (rc != SQLITE_DONE) {
    hookd_due_hints_free(v, len);
    free(hold);
    return sq_fail(c, "reclaim leases");
  }
  rc = reclaim_hold(c, hold, n_hold, now_ms, held);
  free(hold);
  if (rc) {
    hookd_due_hints_free(v, len);
    return rc;
  }
  *hints = v;
  *n = len;
  *reclaimed = rows;
  return HOOKD_STORE_OK;
}

/* The lanes of ordered endpoint ?1 after key ?2 (in key order), ?3 at most: each lane's key and
 * first open delivery, with its hint and the hint it is to have at ?4 (LANE_HELD). The keys are
 * walked one index probe each (a skip-scan), so the cost follows the number of lanes, not their
 * backlog. */
#define LANES_WALK_SQL                                                                          \
  "WITH RECURSIVE l(k, n) AS (SELECT (SELECT MIN(ordering_key)" LANE_OPEN_ROWS                  \
  " AND ordering_key > ?2), 1"                                                                  \
  " UNION ALL SELECT (SELECT MIN(ordering_key)" LANE_OPEN_ROWS " AND ordering_key > l.k), n + 1" \
  " FROM l WHERE l.k IS NOT NULL AND n < ?3),"                                                  \
  " h(k, s) AS (SELECT k, (SELECT seq" LANE_OPEN_ROWS " AND ordering_key = l.k ORDER BY seq"     \
  " LIMIT 1) FROM l WHERE l.k IS NOT NULL)"                                                     \
  " SELECT h.k, h.s, d.lane_wait, CASE WHEN " LANE_HELD("?4") " THEN 1 ELSE 0 END"            \
  " FROM h JOIN deliveries d ON d.seq = h.s ORDER BY h.k"

/* Lanes one rescan's repair walks at most (about 12 ms: ~3 µs a lane, ~4.5 µs one a DEAD head
 * holds), going on from where the last one stopped (docs/isolation.md "Ordering lanes"). */
#define LANE_REPAIR_STEP 4096
/* A cursor past every ordering key (1-256 of [A-Za-z0-9_.:-], all below DEL): the endpoint done */
#define LANE_KEY_END "\x7f"

/* How many waiting rows of endpoints that are no longer ordered one rescan lets in; and how
 * many lanes of an endpoint that no longer blocks its PATCH walks. */
#define UNORDER_STEP 50000

/* One endpoint's lanes after key cursor `key` (sizeof c->lane_key), `budget` at most: each
 * head's hint is set to what it is to be at now_ms — let in, or hinted out behind a DEAD head
 * that holds its lane. The cursor moves to the last lane seen, or past every key when the
 * endpoint is done (LANE_KEY_END). *walked: the lanes seen. */
static int lanes_walk(hookd_store_conn *c, const char *endpoint_id, char *key, int budget,
                      int64_t now_ms, int *walked) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_REPAIR, LANES_WALK_SQL);
  sqlite3_stmt *up = st ? sq_stmt(c, SQ_LANE_LET_IN,
                                  "UPDATE deliveries SET lane_wait = ?2 WHERE seq = ?1") : NULL;
  int64_t *heads = up ? malloc((size_t)budget * sizeof *heads) : NULL;
  if (!heads) return up ? sq_fail(c, "walk lanes: out of memory") : HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_text(st, 2, key);
  sq_bind_i64(st, 3, budget);
  sq_bind_i64(st, 4, now_ms);
  int n = 0, nh = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    n++;
    snprintf(key, sizeof c->lane_key, "%s", (const char *)sqlite3_column_text(st, 0));
    if (sqlite3_column_int(st, 2) != sqlite3_column_int(st, 3) && nh < budget) /* the hint */
      heads[nh++] = sqlite3_column_int64(st, 1) * 2 + sqlite3_column_int(st, 3);
  }
  sqlite3_reset(st);
  for (int i = 0; rc == SQLITE_DONE && i < nh; i++) { /* (after the walk: it reads what this
                                                         * writes) */
    sq_bind_i64(up, 1, heads[i] / 2);
    sq_bind_i64(up, 2, heads[i] % 2);
    rc = sqlite3_step(up);
    sqlite3_reset(up);
  }
  free(heads);
  if (rc != SQLITE_DONE) return sq_fail(c, "repair lanes");
  if (n < budget) snprintf(key, sizeof c->lane_key, "%s", LANE_KEY_END);
  *walked = n;
  return HOOKD_STORE_OK;
}

/* The safety net under the lane hints, run by each rescan: every lane's first open delivery is
 * let in, even if some path that finished a head forgot to say so, unless a DEAD head holds its
 * lane (then it is hinted out: one that went DEAD before this rule, or under a lane policy
 * patched to block, a head whose event has expired since) — LANE_REPAIR_STEP lanes a
 * rescan, on from where the last stopped (endpoints in id order, then from the first again;
 * a step whose batch failed moves the cursor all the same: its lanes wait for the next round);
 * and the hints of endpoints that are no longer ordered are cleared in bounded steps (the PATCH
 * clears the first step itself). */
static int lanes_repair(hookd_store_conn *c, int64_t now_ms) {
  sqlite3_stmt *eps = sq_stmt(c, SQ_LANE_ORDERED_EPS,
                              "SELECT id FROM endpoints WHERE ordered = 1 AND deleted_at IS NULL"
                              " AND id >= ?1 ORDER BY id");
  if (!eps) return HOOKD_STORE_ERR;
  sq_bind_text(eps, 1, c->lane_ep);
  int budget = LANE_REPAIR_STEP, rc = SQLITE_ROW;
  while (budget > 0 && (rc = sqlite3_step(eps)) == SQLITE_ROW) {
    const char *id = (const char *)sqlite3_column_text(eps, 0);
    if (strcmp(id, c->lane_ep) != 0) { /* the next endpoint (or the cursor's was deleted) */
      snprintf(c->lane_ep, sizeof c->lane_ep, "%s", id);
      c->lane_key[0] = '\0';
    }
    int walked = 0;
    if (lanes_walk(c, id, c->lane_key, budget, now_ms, &walked) != 0) {
      sqlite3_reset(eps);
      return HOOKD_STORE_ERR;
    }
    budget -= walked > 0 ? walked : 1;
  }
  sqlite3_reset(eps);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "list ordered endpoints");
  if (rc == SQLITE_DONE) c->lane_ep[0] = c->lane_key[0] = '\0'; /* past the last: the first */
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_UNORDER_STEP,
               "UPDATE deliveries SET lane_wait = 0 WHERE seq IN (SELECT seq FROM deliveries"
               " WHERE lane_wait = 1 AND endpoint_id IN (SELECT id FROM endpoints WHERE ordered = 0)"
               " LIMIT ?1)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, UNORDER_STEP);
  rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "unorder lanes");
}

int sq_lane_unorder(hookd_store_conn *c, const char *endpoint_id) {
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_UNORDER,
                             "UPDATE deliveries SET lane_wait = 0 WHERE seq IN (SELECT seq FROM"
                             " deliveries WHERE endpoint_id = ?1 AND lane_wait = 1 LIMIT ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_i64(st, 2, UNORDER_STEP);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "unorder lanes");
}

int sq_lane_unblock(hookd_store_conn *c, const char *endpoint_id, int64_t now_ms) {
  char key[sizeof c->lane_key] = "";
  int walked = 0;
  return lanes_walk(c, endpoint_id, key, UNORDER_STEP, now_ms, &walked);
}

int sq_due_hints(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n) {
  int rc = lanes_repair(c, now_ms);
  if (rc) return rc;
  sqlite3_stmt *st = sq_stmt(
      c, SQ_DUE_HINTS,
      "SELECT e.id, MIN(COALESCE((SELECT d.next_attempt_at FROM deliveries d"
      " WHERE d.endpoint_id = e.id AND d.cycle_kind = 'live' AND d.state IN ('pending','retrying')"
      " AND d.lane_wait = 0"
      " AND (d.leased_until IS NULL OR d.leased_until <= ?1) ORDER BY d.next_attempt_at LIMIT 1),"
      " 9e18), COALESCE((SELECT d.next_attempt_at FROM deliveries d"
      " WHERE d.endpoint_id = e.id AND d.cycle_kind = 'replay' AND d.lane_wait = 0"
      " AND d.state IN ('pending','retrying') AND (d.leased_until IS NULL OR d.leased_until <= ?1)"
      " ORDER BY d.next_attempt_at LIMIT 1), 9e18)) FROM endpoints e"
      " WHERE e.deleted_at IS NULL AND e.enabled = 1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, now_ms);
  hookd_due_hint *v = NULL;
  size_t len = 0, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (sqlite3_column_double(st, 1) >= 9e18) continue; /* nothing due */
    if (hookd_hint_push(&v, &len, &cap, (const char *)sqlite3_column_text(st, 0),
                        sq_col_i64(st, 1)) != 0) {
      hookd_due_hints_free(v, len);
      return HOOKD_STORE_ERR;
    }
  }
  if (rc != SQLITE_DONE) {
    hookd_due_hints_free(v, len);
    return sq_fail(c, "due hints");
  }
  *out = v;
  *n = len;
  return HOOKD_STORE_OK;
}

/* ---------- retention walks ---------- */

int sq_retention_walk(hookd_store_conn *c, sqlite3_stmt *st, int64_t before_ms, int limit,
                      int64_t *after_seq, int64_t **ids, int *n) {
  *n = 0;
  sq_bind_i64(st, 1, limit);
  sq_bind_i64(st, 2, *after_seq);
  if (!(*ids = malloc((size_t)limit * sizeof **ids))) {
    sqlite3_reset(st);
    return HOOKD_STORE_ERR;
  }
  hookd_walk_batch w;
  hookd_walk_begin(&w, before_ms, *after_seq, *ids);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW &&
         hookd_walk_row(&w, sq_col_i64(st, 0), sq_col_i64(st, 1), sq_col_i64(st, 2) != 0)) {
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    free(*ids);
    *ids = NULL;
    return sq_fail(c, "retention walk");
  }
  *n = w.n;
  *after_seq = hookd_walk_next(&w, limit);
  return HOOKD_STORE_OK;
}

int sq_retention_trim(hookd_store_conn *c, enum sq_stmt_id id, const char *cost_sql,
                      int64_t budget, const int64_t *ids, int *n, int64_t *after_seq) {
  if (*n < 2) return HOOKD_STORE_OK;
  int64_t *cost = malloc((size_t)*n * sizeof *cost);
  if (!cost) return sq_fail(c, "retention: out of memory");
  sqlite3_stmt *st = sq_stmt(c, id, cost_sql);
  int rc = st ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  int cols = st ? sqlite3_column_count(st) : 0, m = 0;
  if (st && sqlite3_bind_parameter_count(st) >= 2) sq_bind_i64(st, 2, HOOKD_WEIGH_ROWS);
  /* (those after the first past the budget cannot be taken: not weighed) */
  for (int64_t sum = 0; !rc && m < *n && sum <= budget; m++) {
    sq_bind_i64(st, 1, ids[m]);
    if (sqlite3_step(st) != SQLITE_ROW) rc = sq_fail(c, "retention: weigh a batch");
    int64_t deliveries = !rc && cols > 1 ? sq_col_i64(st, 1) : 0;
    int64_t attempts = !rc && cols > 2 ? sq_col_i64(st, 2) : 0;
    if (!rc) sum += cost[m] = hookd_retention_weight(sq_col_i64(st, 0), deliveries, attempts);
    sqlite3_reset(st);
  }
  if (!rc) {
    int k = hookd_take_within(cost, m, budget);
    if (k < *n) *after_seq = ids[k - 1]; /* on after the last taken */
    *n = k;
  }
  free(cost);
  return rc;
}

/* Records the cut-off under which a retention job may delete the attempts of one kind of event
 * ("outbound", "inbound"): the trigger of migration 13 refuses to delete any attempt that
 * finished at or after its event kind's cut-off. */
int sq_retention_mark(hookd_store_conn *c, const char *kind, int64_t before_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RET_MARK,
                             "INSERT INTO retention_marks(name, before_ms) VALUES (?2, ?1)"
                             " ON CONFLICT(name) DO UPDATE SET before_ms = excluded.before_ms");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, before_ms);
  sq_bind_text(st, 2, kind);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "record retention cut-off");
}

/* Deletes event seq with its deliveries, their attempts and, when keys, the Idempotency-Keys
 * that named it (outbound events; their index is made by sq_event_expire). The caller checked
 * that the event may go (RETAINED_DELIVERY) and recorded the cut-off. */
int sq_event_delete(hookd_store_conn *c, int64_t seq, bool keys) {
  static const struct {
    enum sq_stmt_id id;
    const char *sql;
  } del[] = {
      {SQ_EV_DEL_ATTEMPTS, "DELETE FROM attempts WHERE delivery_seq IN"
                           " (SELECT seq FROM deliveries WHERE event_seq = ?1)"},
      {SQ_EV_DEL_DELIVERIES, "DELETE FROM deliveries WHERE event_seq = ?1"},
      {SQ_EV_DEL_KEYS, "DELETE FROM idempotency_keys WHERE event_seq = ?1"},
      {SQ_EV_DEL, "DELETE FROM events WHERE seq = ?1"},
  };
  for (size_t i = 0; i < sizeof del / sizeof del[0]; i++) {
    if (del[i].id == SQ_EV_DEL_KEYS && !keys) continue;
    sqlite3_stmt *st = sq_stmt(c, del[i].id, del[i].sql);
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, seq);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return sq_fail(c, "delete expired event");
  }
  return HOOKD_STORE_OK;
}

/* Part of event seq's history, when one op should not take it whole: HOOKD_SHED_ATTEMPTS of its
 * attempts or, none left, HOOKD_EXPIRE_DELIVERIES of its deliveries; *whole once fewer were
 * left (then deleted: sq_event_delete takes the rest, the keys and the event, at once). */
static int event_shed(hookd_store_conn *c, int64_t seq, bool *whole) {
  static const struct {
    enum sq_stmt_id id;
    const char *sql;
    int limit;
  } part[] = {
      {SQ_EV_SHED_ATTEMPTS,
       "DELETE FROM attempts WHERE (delivery_seq, attempt_number) IN (SELECT a.delivery_seq,"
       " a.attempt_number FROM deliveries d JOIN attempts a ON a.delivery_seq = d.seq"
       " WHERE d.event_seq = ?1 LIMIT ?2)",
       HOOKD_SHED_ATTEMPTS},
      {SQ_EV_SHED_DELIVERIES,
       "DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries WHERE event_seq = ?1"
       " LIMIT ?2)",
       HOOKD_EXPIRE_DELIVERIES},
  };
  *whole = false;
  for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
    sqlite3_stmt *st = sq_stmt(c, part[i].id, part[i].sql);
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, seq);
    sq_bind_i64(st, 2, part[i].limit);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) return sq_fail(c, "delete part of an expired event");
    if (sqlite3_changes(c->db) >= part[i].limit) return HOOKD_STORE_OK; /* more: the next op */
  }
  *whole = true;
  return HOOKD_STORE_OK;
}

/* Event retention (outbound; inbound events go with their dedup record, sq_inbox_purge): the
 * walk goes through a partial index of the outbound events, made by the first run, so that it
 * never reads inbound rows or bodies; the newest event of the store stays (its seq must not be
 * handed out again: the receive path links a record to MAX(seq) + 1). */
int sq_event_expire(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                    int *expired) {
  *expired = 0;
  if (sq_exec(c, "CREATE INDEX IF NOT EXISTS events_outbound ON events(seq, created_at)"
                 " WHERE kind = 'outbound';"
                 "CREATE INDEX IF NOT EXISTS idempotency_keys_event"
                 " ON idempotency_keys(event_seq)") != 0)
    return HOOKD_STORE_ERR;
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_EXPIRE,
                             "SELECT e.seq, e.created_at, e.seq < (SELECT MAX(seq) FROM events)"
                             " AND NOT EXISTS (" RETAINED_DELIVERY("e.seq") ")"
                             " AND NOT EXISTS (" RETAINED_KEY("e.seq", "?3") ")"
                             " FROM events e INDEXED BY events_outbound"
                             " WHERE e.kind = 'outbound' AND e.seq > ?2 ORDER BY e.seq LIMIT ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 3, before_ms);
  sq_bind_i64(st, 4, hookd_now_ms()); /* (an expired event's DEAD head holds no lane) */
  int64_t *ids;
  int n, rc = sq_retention_walk(c, st, before_ms, limit, after_seq, &ids, &n);
  if (rc) return rc;
  /* whole events while what goes with them (payloads, deliveries, attempts and their excerpts:
   * freed pages zeroed and synced) fits the op's budget; the walk goes on after the last */
  rc = sq_retention_trim(c, SQ_EV_WEIGH,
                         "WITH e(s, b) AS (SELECT seq, length(body) FROM events WHERE seq = ?1)"
                         SQ_WEIGH_EVENT,
                         HOOKD_PURGE_BYTES, ids, &n, after_seq);
  if (!rc && n > 0) rc = sq_retention_mark(c, "outbound", before_ms);
  if (!rc && n == 1) { /* (alone: perhaps past the budget, in parts then) */
    bool whole = false;
    if (!(rc = event_shed(c, ids[0], &whole)) && !whole) {
      *after_seq = hookd_walk_again(ids[0]);
      n = 0;
    }
  }
  for (int i = 0; !rc && i < n; i++)
    if (!(rc = sq_event_delete(c, ids[i], true))) (*expired)++;
  free(ids);
  return rc;
}

int sq_owed_expired(hookd_store_conn *c, int64_t before_ms, int limit, int64_t **seqs, int *n) {
  *n = 0;
  *seqs = NULL;
  /* from the disabled endpoints (a few, often none), each one's open deliveries by an index of
   * them (the due index, and the lane-waiting one: the two halves of the open set) */
  sqlite3_stmt *st = sq_stmt(
      c, SQ_OWED_OLD,
      "SELECT d.seq FROM endpoints e JOIN deliveries d ON d.endpoint_id = e.id"
      " AND d.state IN ('pending','retrying') AND d.lane_wait = 0"
      " JOIN events v ON v.seq = d.event_seq AND v.expires_at <= ?1"
      " WHERE e.enabled = 0 AND e.deleted_at IS NULL AND d.leased_until IS NULL"
      " UNION ALL SELECT d.seq FROM endpoints e JOIN deliveries d ON d.endpoint_id = e.id"
      " AND d.lane_wait = 1 AND d.state IN ('pending','retrying')"
      " JOIN events v ON v.seq = d.event_seq AND v.expires_at <= ?1"
      " WHERE e.enabled = 0 AND e.deleted_at IS NULL AND d.leased_until IS NULL LIMIT ?2");
  if (!st) return HOOKD_STORE_ERR;
  if (!(*seqs = malloc((size_t)limit * sizeof **seqs))) return sq_fail(c, "out of memory");
  sq_bind_i64(st, 1, before_ms);
  sq_bind_i64(st, 2, limit);
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW && *n < limit) (*seqs)[(*n)++] = sq_col_i64(st, 0);
  sqlite3_reset(st);
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) return HOOKD_STORE_OK;
  free(*seqs);
  *seqs = NULL;
  *n = 0;
  return sq_fail(c, "read owed deliveries");
}

int sq_expire_owed(hookd_store_conn *c, const int64_t *seqs, int n, int64_t before_ms,
                   int64_t now_ms, int *expired) {
  *expired = 0;
  /* each one checked again: read on another connection, it may have been claimed, its endpoint
   * enabled or its event replayed since */
  sqlite3_stmt *st = sq_stmt(
      c, SQ_OWED_EXPIRE,
      "UPDATE deliveries SET state = 'dead', dead_reason = 'expired', dead_at = ?2,"
      " next_attempt_at = NULL, lane_wait = 0, updated_at = ?2, lease_token = lease_token + 1"
      " WHERE seq = ?1 AND (state = 'pending' OR state = 'retrying') AND leased_until IS NULL"
      " AND (SELECT enabled = 0 AND deleted_at IS NULL FROM endpoints e"
      " WHERE e.id = deliveries.endpoint_id)"
      " AND (SELECT expires_at <= ?3 FROM events v WHERE v.seq = deliveries.event_seq)");
  if (!st) return HOOKD_STORE_ERR;
  int rc = HOOKD_STORE_OK;
  for (int i = 0; !rc && i < n; i++) {
    sq_bind_i64(st, 1, seqs[i]);
    sq_bind_i64(st, 2, now_ms);
    sq_bind_i64(st, 3, before_ms);
    int step = sqlite3_step(st);
    sqlite3_reset(st);
    if (step != SQLITE_DONE) rc = sq_fail(c, "expire owed delivery");
    else if (sqlite3_changes(c->db) == 1) {
      (*expired)++;
      rc = sq_lane_advance(c, seqs[i], now_ms); /* its lane's next, if it waited on it */
    }
  }
  return rc;
}

/* Ordered lanes' highest versions with event retention: a lane not raised for the window whose
 * deliveries are all gone (expired with their events) is forgotten; one with a delivery left
 * (a pending one may still be superseded by it at its claim) counts as raised now, so that each
 * walk reads at most `limit` lanes, never the same kept ones (docs/isolation.md). The index is
 * made by the first purge, as events_outbound. */
int sq_lane_versions_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                           int *purged, bool *more) {
  *purged = 0;
  *more = false;
  /* a kept lane never counts as raised before the window: with a wall clock stepped back since
   * the walk took its window, the next op read the same kept lanes again (a review) */
  if (now_ms < before_ms) now_ms = before_ms;
  if (sq_exec(c, "CREATE INDEX IF NOT EXISTS lane_versions_seen ON lane_versions(seen_at)") != 0)
    return HOOKD_STORE_ERR;
  sqlite3_stmt *st = sq_stmt(c, SQ_LANE_VERSION_OLD,
                             "SELECT l.endpoint_id, l.ordering_key, EXISTS(SELECT 1"
                             " FROM deliveries d WHERE d.endpoint_id = l.endpoint_id"
                             " AND d.ordering_key = l.ordering_key)"
                             " FROM lane_versions l INDEXED BY lane_versions_seen"
                             " WHERE l.seen_at < ?1 ORDER BY l.seen_at LIMIT ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, before_ms);
  sq_bind_i64(st, 2, limit);
  typedef struct lane {
    char *ep, *key;
    bool used;
  } lane;
  lane *lanes = calloc((size_t)(limit > 0 ? limit : 1), sizeof *lanes);
  int n = 0, step = SQLITE_DONE;
  bool oom = !lanes;
  while (!oom && n < limit && (step = sqlite3_step(st)) == SQLITE_ROW) {
    lane *l = &lanes[n++];
    l->ep = strdup((const char *)sqlite3_column_text(st, 0));
    l->key = strdup((const char *)sqlite3_column_text(st, 1));
    l->used = sq_col_i64(st, 2) != 0;
    oom = !l->ep || !l->key;
  }
  sqlite3_reset(st);
  int rc = HOOKD_STORE_OK;
  if (oom) {
    snprintf(c->err, sizeof c->err, "read old lanes: out of memory");
    rc = HOOKD_STORE_ERR;
  } else if (step != SQLITE_DONE && step != SQLITE_ROW) {
    rc = sq_fail(c, "read old lanes");
  }
  for (int i = 0; !rc && i < n; i++) {
    st = lanes[i].used ? sq_stmt(c, SQ_LANE_VERSION_KEEP,
                                 "UPDATE lane_versions SET seen_at = ?3"
                                 " WHERE endpoint_id = ?1 AND ordering_key = ?2")
                       : sq_stmt(c, SQ_LANE_VERSION_DROP,
                                 "DELETE FROM lane_versions"
                                 " WHERE endpoint_id = ?1 AND ordering_key = ?2");
    if (!st) {
      rc = HOOKD_STORE_ERR;
      break;
    }
    sq_bind_text(st, 1, lanes[i].ep);
    sq_bind_text(st, 2, lanes[i].key);
    if (lanes[i].used) sq_bind_i64(st, 3, now_ms);
    int done = sqlite3_step(st);
    sqlite3_reset(st);
    if (done != SQLITE_DONE) rc = sq_fail(c, "purge lane version");
    else if (!lanes[i].used) (*purged)++;
  }
  for (int i = 0; i < n; i++) {
    free(lanes[i].ep);
    free(lanes[i].key);
  }
  free(lanes);
  if (!rc) *more = n >= limit;
  return rc;
}

int sq_event_payload_delete(hookd_store_conn *c, const char *tenant_id, const char *id,
                            int64_t now_ms, int64_t *seq, int64_t *purged_ms, int *cancelled) {
  *cancelled = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_PAYLOAD_READ,
                             "SELECT seq, kind, purged_at FROM events"
                             " WHERE id = ?1 AND tenant_id = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, tenant_id);
  int rc = sqlite3_step(st);
  *seq = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  const char *kind = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(st, 1) : NULL;
  bool inbound = kind && !strcmp(kind, "inbound");
  *purged_ms = rc == SQLITE_ROW ? sq_col_i64(st, 2) : 0;
  sqlite3_reset(st);
  if (rc == SQLITE_DONE) return HOOKD_STORE_NOTFOUND;
  if (rc != SQLITE_ROW) return sq_fail(c, "read event");
  if (inbound) {
    snprintf(c->err, sizeof c->err,
             "an inbound event's body is the provider's request: it goes with its inbox "
             "record's retention (--inbox-retention-s)");
    return HOOKD_STORE_STATE;
  }
  if (*purged_ms) return HOOKD_STORE_OK; /* emptied already: the same answer */
  /* what it still had to send is cancelled; the bumped token fences an attempt in flight. (One
   * of an ordered lane in flight holds its lane no more: a review found the lease kept for that
   * lost by a restart's reclaim and a clock step's lease move, docs/api.md says so.) */
  st = sq_stmt(c, SQ_EV_PAYLOAD_CANCEL,
               "UPDATE deliveries SET state = 'cancelled', updated_at = ?2, next_attempt_at = NULL,"
               " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL,"
               " last_error = 'payload deleted', lane_wait = 0" /* (waits for nothing now) */
               " WHERE event_seq = ?1 AND state IN ('pending', 'retrying')"
               " RETURNING seq, ordering_key IS NOT NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, *seq);
  sq_bind_i64(st, 2, now_ms);
  int64_t *laned = NULL; /* the cancelled ones that held a place in a lane */
  size_t n = 0, cap = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    (*cancelled)++;
    if (sqlite3_column_int(st, 1) && hookd_seq_push(&laned, &n, &cap, sq_col_i64(st, 0)) != 0)
      break;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    free(laned);
    return rc == SQLITE_ROW ? HOOKD_STORE_ERR : sq_fail(c, "cancel deliveries");
  }
  /* the next of each lane goes on: a cancelled one holds no place */
  rc = HOOKD_STORE_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = sq_lane_advance(c, laned[i], now_ms);
  free(laned);
  if (rc) return rc;
  st = sq_stmt(c, SQ_EV_PURGE_SET,
               "UPDATE events SET body = x'', purged_at = ?2 WHERE seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, *seq);
  sq_bind_i64(st, 2, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "delete event payload");
  /* its attempts' response excerpts too: a receiver may have echoed the payload (a validation
   * error quoting a field) — the one change attempts allow (migration 54) */
  st = sq_stmt(c, SQ_EV_ERASE_EXCERPTS,
               "UPDATE attempts SET response = NULL WHERE response IS NOT NULL AND delivery_seq"
               " IN (SELECT seq FROM deliveries WHERE event_seq = ?1)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, *seq);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "erase response excerpts");
  *purged_ms = now_ms;
  c->erased = true; /* its commit has the WAL file emptied */
  /* a DEAD head of the event, no longer replayable, holds its lane no more */
  return lanes_of_purged(c, *seq, now_ms);
}

/* Payload retention: outbound events only (inbound ones follow the inbox's retention), and only
 * once every delivery of the event is settled — a DEAD delivery that may hold its lane
 * (DEAD_LANE_HEAD) is not: replaying it (the remedy) needs its payload. Purged
 * rows stay (ids and history), so the walk goes through a partial index of the rows not purged
 * yet — made by the first purge, so that a store on which retention was never enabled does not
 * maintain it at every publish; each walk then visits the unsettled old events and stops at the
 * window, instead of every purged event every minute. */
int sq_event_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                   int64_t *after_seq, int *purged) {
  *purged = 0;
  if (sq_exec(c, "CREATE INDEX IF NOT EXISTS events_unpurged ON events(seq)"
                 " WHERE purged_at IS NULL AND kind = 'outbound'") != 0)
    return HOOKD_STORE_ERR;
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_PURGE,
                             "SELECT e.seq, e.created_at, NOT EXISTS (SELECT 1 FROM deliveries d"
                             "  WHERE d.event_seq = e.seq"
                             "  AND (d.state IN ('pending', 'retrying', 'unknown')"
                             "  OR " DEAD_LANE_HEAD("d", "?3") "))"
                             " FROM events e INDEXED BY events_unpurged"
                             " WHERE e.purged_at IS NULL AND e.kind = 'outbound' AND e.seq > ?2"
                             " ORDER BY e.seq LIMIT ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 3, now_ms);
  int64_t *ids;
  int n, rc = sq_retention_walk(c, st, before_ms, limit, after_seq, &ids, &n);
  if (!rc) /* the bodies an op frees within its budget (zeroed into the WAL: secure_delete) */
    rc = sq_retention_trim(c, SQ_EV_PURGE_SIZE, "SELECT length(body) FROM events WHERE seq = ?1",
                           HOOKD_PURGE_BYTES, ids, &n, after_seq);
  if (rc) {
    free(ids);
    return rc;
  }
  st = sq_stmt(c, SQ_EV_PURGE_SET,
               "UPDATE events SET body = x'', purged_at = ?2 WHERE seq = ?1");
  for (int i = 0; st && i < n; i++) {
    sq_bind_i64(st, 1, ids[i]);
    sq_bind_i64(st, 2, now_ms);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc != SQLITE_DONE) {
      free(ids);
      return sq_fail(c, "purge event payload");
    }
    /* DEAD_LANE_HEAD reads a lane moved past up to its last delivery, the claim up to the one
     * waiting: a DEAD head purged here may still have held that one, which now goes */
    if ((rc = lanes_of_purged(c, ids[i], now_ms)) != 0) {
      free(ids);
      return rc;
    }
    (*purged)++;
  }
  free(ids);
  return st ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
}

int sq_backlog_count(hookd_store_conn *c, int64_t cap, int64_t *n) {
  *n = 0;
  /* each from its partial index (INDEXED BY: a plan that would read the table is an error, not
   * a slow count): the open rows not waiting behind a lane's head, then those waiting */
  sqlite3_stmt *st = sq_stmt(c, SQ_BACKLOG,
                             "SELECT (SELECT count(*) FROM (SELECT 1 FROM deliveries"
                             " INDEXED BY deliveries_due WHERE state IN ('pending','retrying')"
                             " AND lane_wait = 0 LIMIT ?1)) + (SELECT count(*) FROM (SELECT 1"
                             " FROM deliveries INDEXED BY deliveries_lane_wait WHERE lane_wait = 1"
                             " AND state IN ('pending','retrying') LIMIT ?1))");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, cap);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW) *n = sqlite3_column_int64(st, 0);
  sqlite3_reset(st);
  if (*n > cap) *n = cap;
  return rc == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "count the backlog");
}

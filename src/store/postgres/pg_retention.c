/* pg_retention.c — PostgreSQL backend: retention (the walks that expire events, purge payloads
 * and forget old lanes) and an event's payload deleted on demand, from sqlite_delivery.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/postgres/pg_int.h"

/* Marks an outbound event's payload purged (shared by the walk and the delete on demand). */
static const char purge_set_sql[] =
    "UPDATE events SET body = ''::bytea, purged_at = $2 WHERE seq = $1";

/* A walk's indexes are made the first time it needs them, as on the SQLite store (a store on
 * which retention never runs does not maintain them at every publish), but not in its
 * transaction: CREATE INDEX there held a SHARE lock on the table, and the writer lock, for the
 * whole build — every node's publishes stopped for minutes on a large store (a review). The walk
 * asks for them (pg_rix_ready) and does nothing, its walk over for this round, until they are
 * valid: pg_indexes.c builds them concurrently, off the writer. */

/* ---------- retention walks ---------- */

/* Records the cut-off under which a retention job may delete the attempts of one kind of event
 * ("outbound", "inbound"): the trigger on attempts (pg_schema.c) refuses to delete any attempt
 * that finished at or after its event kind's cut-off. */
int pg_retention_mark(hookd_store_conn *c, const char *kind, int64_t before_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, kind);
  pg_p_i64(&p, before_ms);
  return pg_x(c,
              "INSERT INTO retention_marks(name, before_ms) VALUES ($1, $2)"
              " ON CONFLICT(name) DO UPDATE SET before_ms = excluded.before_ms",
              &p, "record retention cut-off") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* Deletes the events of seqs with their deliveries, their attempts and, when keys, the
 * Idempotency-Keys that named them (outbound events; their index is asked for by pg_event_expire).
 * The caller checked that each event may go (RETAINED_DELIVERY) and recorded the cut-off. The
 * attempts go first: their trigger finds their event's kind through the delivery and the event.
 * One statement per table for the whole batch: each statement is a round trip under the writer
 * lock every node's writes wait for (a review: row by row, a batch held it ~1,000 trips). */
int pg_events_delete(hookd_store_conn *c, const char *seqs, bool keys) {
  static const struct {
    bool is_keys;
    const char *sql;
  } del[] = {
      {false, "DELETE FROM attempts WHERE delivery_seq IN"
              " (SELECT seq FROM deliveries WHERE event_seq = ANY($1::bigint[]))"},
      {false, "DELETE FROM deliveries WHERE event_seq = ANY($1::bigint[])"},
      {true, "DELETE FROM idempotency_keys WHERE event_seq = ANY($1::bigint[])"},
      {false, "DELETE FROM events WHERE seq = ANY($1::bigint[])"},
  };
  for (size_t i = 0; i < sizeof del / sizeof del[0]; i++) {
    if (del[i].is_keys && !keys) continue;
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, seqs);
    if (pg_x(c, del[i].sql, &p, "delete expired events") < 0) return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

/* Part of event seq's history, when one op should not take it whole (sqlite_delivery.c's
 * event_shed): HOOKD_SHED_ATTEMPTS of its attempts or, none left, HOOKD_EXPIRE_DELIVERIES of
 * its deliveries; *whole once fewer were left. */
static int event_shed(hookd_store_conn *c, int64_t seq, bool *whole) {
  static const struct {
    const char *sql;
    int limit;
  } part[] = {
      {"DELETE FROM attempts WHERE (delivery_seq, attempt_number) IN (SELECT a.delivery_seq,"
       " a.attempt_number FROM deliveries d JOIN attempts a ON a.delivery_seq = d.seq"
       " WHERE d.event_seq = $1 LIMIT $2)",
       HOOKD_SHED_ATTEMPTS},
      {"DELETE FROM deliveries WHERE seq IN (SELECT seq FROM deliveries WHERE event_seq = $1"
       " LIMIT $2)",
       HOOKD_EXPIRE_DELIVERIES},
  };
  *whole = false;
  for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
    pg_params p;
    pg_p_init(&p);
    pg_p_i64(&p, seq);
    pg_p_i64(&p, part[i].limit);
    int64_t n = pg_x(c, part[i].sql, &p, "delete part of an expired event");
    if (n < 0) return HOOKD_STORE_ERR;
    if (n >= part[i].limit) return HOOKD_STORE_OK; /* more: the next op */
  }
  *whole = true;
  return HOOKD_STORE_OK;
}

/* ids[0..n) as a bigint[] literal into a (NULL: out of memory, c->err set). */
static const char *seq_array(hookd_store_conn *c, pg_arr *a, const int64_t *ids, int n) {
  pg_arr_init(a);
  for (int i = 0; i < n; i++) pg_arr_i64(a, ids[i]);
  const char *lit = pg_arr_done(a);
  if (!lit) snprintf(c->err, sizeof c->err, "retention: out of memory");
  return lit;
}

/* Settles the lanes of the DEAD deliveries of the events seqs (a bigint[] literal), whose
 * payloads are gone (deleted, or purged by retention): they hold their lanes no more. */
static int lanes_of_purged(hookd_store_conn *c, const char *seqs, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, seqs);
  pg_p_i64(&p, now_ms);
  return pg_x(c,
              PG_LANE_SETTLE_SQL(
                  "(SELECT (SELECT n.seq FROM deliveries n WHERE n.endpoint_id = me.endpoint_id"
                  " AND n.ordering_key = me.ordering_key AND n.ordering_key IS NOT NULL"
                  " AND n.state IN ('pending','retrying','unknown') ORDER BY n.seq LIMIT 1)"
                  " FROM deliveries me WHERE me.event_seq = ANY($1::bigint[])"
                  " AND me.ordering_key IS NOT NULL AND me.state = 'dead')",
                  "$2::bigint"),
              &p, "settle lanes") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

int pg_owed_expired(hookd_store_conn *c, int64_t before_ms, int limit, int64_t **seqs, int *n) {
  *n = 0;
  *seqs = NULL;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_ms);
  pg_p_i64(&p, limit);
  /* (sqlite_delivery.c: the open set's two halves, each by its index) */
  PGresult *r = pg_q(c,
                     "SELECT d.seq FROM endpoints e JOIN deliveries d ON d.endpoint_id = e.id"
                     " AND d.state IN ('pending','retrying') AND d.lane_wait = 0"
                     " JOIN events v ON v.seq = d.event_seq AND v.expires_at <= $1"
                     " WHERE e.enabled = 0 AND e.deleted_at IS NULL AND d.leased_until IS NULL"
                     " UNION ALL SELECT d.seq FROM endpoints e"
                     " JOIN deliveries d ON d.endpoint_id = e.id AND d.lane_wait = 1"
                     " AND d.state IN ('pending','retrying')"
                     " JOIN events v ON v.seq = d.event_seq AND v.expires_at <= $1"
                     " WHERE e.enabled = 0 AND e.deleted_at IS NULL AND d.leased_until IS NULL"
                     " LIMIT $2",
                     &p, "read owed deliveries");
  if (!r) return HOOKD_STORE_ERR;
  int rows = PQntuples(r);
  *seqs = rows ? malloc((size_t)rows * sizeof **seqs) : NULL;
  for (int i = 0; *seqs && i < rows; i++) (*seqs)[i] = pg_i64(r, i, 0);
  PQclear(r);
  if (rows && !*seqs) return pg_fail(c, "read owed deliveries: out of memory");
  *n = rows;
  return HOOKD_STORE_OK;
}

int pg_expire_owed(hookd_store_conn *c, const int64_t *seqs, int n, int64_t before_ms,
                   int64_t now_ms, int *expired) {
  *expired = 0;
  if (!n) return HOOKD_STORE_OK;
  pg_arr a;
  const char *lit = seq_array(c, &a, seqs, n);
  if (!lit) {
    pg_arr_free(&a);
    return HOOKD_STORE_ERR;
  }
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, lit);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, before_ms);
  /* each one checked again (read on another session) */
  int64_t k = pg_x(c,
                   "UPDATE deliveries d SET state = 'dead', dead_reason = 'expired', dead_at = $2,"
                   " next_attempt_at = NULL, lane_wait = 0, updated_at = $2,"
                   " lease_token = d.lease_token + 1 FROM endpoints e, events v"
                   " WHERE d.seq = ANY($1::bigint[]) AND d.state IN ('pending','retrying')"
                   " AND d.leased_until IS NULL AND e.id = d.endpoint_id AND e.enabled = 0"
                   " AND e.deleted_at IS NULL AND v.seq = d.event_seq AND v.expires_at <= $3",
                   &p, "expire owed deliveries");
  /* then their lanes move on, in one statement (each row's own was a round trip under the
   * writer lock): each lane's first open delivery left waiting is let go, unless a DEAD head
   * holds its lane (pg_lane_advance) */
  if (k > 0) {
    *expired = (int)k;
    pg_p_init(&p);
    pg_p_text(&p, lit);
    pg_p_i64(&p, now_ms);
    k = pg_x(c,
             PG_LANE_SETTLE_SQL(
                 "(SELECT (SELECT n.seq FROM deliveries n WHERE n.endpoint_id = l.endpoint_id"
                 " AND n.ordering_key = l.ordering_key"
                 " AND n.state IN ('pending','retrying','unknown') ORDER BY n.seq LIMIT 1)"
                 " FROM (SELECT DISTINCT me.endpoint_id, me.ordering_key FROM deliveries me"
                 " WHERE me.seq = ANY($1::bigint[]) AND me.ordering_key IS NOT NULL"
                 " AND me.state = 'dead' AND me.dead_reason = 'expired') l)",
                 "$2::bigint"),
             &p, "advance lanes");
  }
  pg_arr_free(&a);
  return k < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
}

int pg_retention_trim(hookd_store_conn *c, const char *weigh_sql, int64_t budget,
                      const int64_t *ids, int *n, int64_t *after_seq) {
  if (*n < 2) return HOOKD_STORE_OK;
  pg_arr a;
  const char *seqs = seq_array(c, &a, ids, *n);
  if (!seqs) {
    pg_arr_free(&a);
    return HOOKD_STORE_ERR;
  }
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, seqs);
  pg_p_i64(&p, budget);
  pg_p_i64(&p, HOOKD_DELIVERY_WEIGHT);
  pg_p_i64(&p, HOOKD_ATTEMPT_WEIGHT);
  pg_p_i64(&p, HOOKD_WEIGH_ROWS);
  PGresult *r = pg_q(c, weigh_sql, &p, "retention: weigh a batch");
  pg_arr_free(&a);
  if (!r) return HOOKD_STORE_ERR;
  /* the ids up to the first past the budget (those after it cannot be taken: not weighed) */
  int m = PQntuples(r);
  int64_t *cost = m > 0 && m <= *n ? malloc((size_t)m * sizeof *cost) : NULL;
  for (int i = 0; cost && i < m; i++)
    cost[i] = hookd_retention_weight(pg_i64(r, i, 0), pg_i64(r, i, 1), pg_i64(r, i, 2));
  PQclear(r);
  if (!cost) return pg_fail(c, "retention: weigh a batch");
  int k = hookd_take_within(cost, m, budget);
  free(cost);
  if (k < *n) *after_seq = ids[k - 1]; /* on after the last taken */
  *n = k;
  return HOOKD_STORE_OK;
}

/* Event retention (outbound; inbound events go with their dedup record, pg_inbox_purge): the
 * walk goes through a partial index of the outbound events, asked for by the first run, so
 * that it never reads inbound rows or bodies (PostgreSQL has no INDEXED BY: the planner picks
 * it). The newest event of the store stays, as on SQLite (there its seq could be handed out
 * again and the receive path links a record to MAX(seq) + 1; an identity column never reuses
 * one, but keeping it costs one event and gives the same answers). */
int pg_event_expire(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                    int *expired) {
  *expired = 0;
  int ready = pg_rix_ready(c, PG_RIX_EVENTS_OUTBOUND | PG_RIX_KEYS_EVENT, after_seq);
  if (ready <= 0) return ready < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
  int64_t *ids;
  int n;
  int rc = pg_retention_walk(c,
                             "SELECT e.seq, e.created_at,"
                             " (e.seq < (SELECT MAX(seq) FROM events)"
                             " AND NOT EXISTS (" PG_RETAINED_DELIVERY("e.seq") ")"
                             " AND NOT EXISTS (" PG_RETAINED_KEY("e.seq", "$3") "))::int"
                             " FROM events e"
                             " WHERE e.kind = 'outbound' AND e.seq > $2 ORDER BY e.seq LIMIT $1",
                             true, before_ms, hookd_now_ms(), limit, after_seq, &ids, &n);
  if (rc) return rc;
  /* whole events while what goes with them (payloads, deliveries, attempts and their excerpts)
   * fits the op's budget (sq_event_expire); the walk goes on after the last */
  rc = pg_retention_trim(c,
                         PG_WEIGH(PG_WEIGH_EVENT("x.s", "(SELECT octet_length(v.body)"
                                                        " FROM events v WHERE v.seq = x.s)")),
                         HOOKD_PURGE_BYTES, ids, &n, after_seq);
  if (!rc && n > 0) rc = pg_retention_mark(c, "outbound", before_ms);
  if (!rc && n == 1) { /* (alone: perhaps past the budget, in parts then) */
    bool whole = false;
    if (!(rc = event_shed(c, ids[0], &whole)) && !whole) {
      *after_seq = hookd_walk_again(ids[0]);
      n = 0;
    }
  }
  if (!rc && n > 0) {
    pg_arr a;
    const char *seqs = seq_array(c, &a, ids, n);
    rc = seqs ? pg_events_delete(c, seqs, true) : HOOKD_STORE_ERR;
    if (!rc) *expired = n;
    pg_arr_free(&a);
  }
  free(ids);
  return rc;
}

/* Ordered lanes' highest versions with event retention: a lane not raised for the window whose
 * deliveries are all gone (expired with their events) is forgotten; one with a delivery left
 * (a pending one may still be superseded by it at its claim) counts as raised now, so that each
 * walk reads at most `limit` lanes, never the same kept ones (docs/isolation.md). The index is
 * asked for by the first purge, as events_outbound. */
int pg_lane_versions_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                           int *purged, bool *more) {
  *purged = 0;
  *more = false;
  /* a kept lane never counts as raised before the window: with a wall clock stepped back since
   * the walk took its window, the next op read the same kept lanes again (a review) */
  if (now_ms < before_ms) now_ms = before_ms;
  int ready = pg_rix_ready(c, PG_RIX_LANES_SEEN, NULL);
  if (ready <= 0) return ready < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_ms);
  pg_p_i64(&p, limit > 0 ? limit : 0); /* a negative LIMIT is an error in PostgreSQL */
  PGresult *r = pg_q(c,
                     "SELECT l.endpoint_id, l.ordering_key, (EXISTS (SELECT 1"
                     " FROM deliveries d WHERE d.endpoint_id = l.endpoint_id"
                     " AND d.ordering_key = l.ordering_key))::int"
                     " FROM lane_versions l"
                     " WHERE l.seen_at < $1 ORDER BY l.seen_at LIMIT $2",
                     &p, "read old lanes");
  if (!r) return HOOKD_STORE_ERR;
  typedef struct lane {
    char *ep, *key;
    bool used;
  } lane;
  lane *lanes = calloc((size_t)(limit > 0 ? limit : 1), sizeof *lanes);
  int n = 0, rows = PQntuples(r);
  bool oom = !lanes;
  for (int i = 0; !oom && n < limit && i < rows; i++) {
    lane *l = &lanes[n++];
    l->ep = pg_str(r, i, 0);
    l->key = pg_str(r, i, 1);
    l->used = pg_i64(r, i, 2) != 0;
    oom = !l->ep || !l->key;
  }
  PQclear(r);
  int rc = HOOKD_STORE_OK;
  if (oom) {
    snprintf(c->err, sizeof c->err, "read old lanes: out of memory");
    rc = HOOKD_STORE_ERR;
  }
  /* the kept lanes raised, the others deleted: a statement each, whatever their number */
  for (int used = 0; !rc && used < 2; used++) {
    pg_arr eps, keys;
    pg_arr_init(&eps);
    pg_arr_init(&keys);
    int m = 0;
    for (int i = 0; i < n; i++)
      if (lanes[i].used == (used == 1)) {
        pg_arr_text(&eps, lanes[i].ep);
        pg_arr_text(&keys, lanes[i].key);
        m++;
      }
    const char *e = pg_arr_done(&eps), *k = pg_arr_done(&keys);
    if (m && (!e || !k)) {
      snprintf(c->err, sizeof c->err, "purge lane versions: out of memory");
      rc = HOOKD_STORE_ERR;
    } else if (m) {
      pg_p_init(&p);
      pg_p_text(&p, e);
      pg_p_text(&p, k);
      if (used) pg_p_i64(&p, now_ms);
      int64_t done = used ? pg_x(c,
                                 "UPDATE lane_versions SET seen_at = $3"
                                 " WHERE (endpoint_id, ordering_key) IN"
                                 " (SELECT * FROM unnest($1::text[], $2::text[]))",
                                 &p, "purge lane versions")
                          : pg_x(c,
                                 "DELETE FROM lane_versions"
                                 " WHERE (endpoint_id, ordering_key) IN"
                                 " (SELECT * FROM unnest($1::text[], $2::text[]))",
                                 &p, "purge lane versions");
      if (done < 0) rc = HOOKD_STORE_ERR;
      else if (!used) *purged = (int)done;
    }
    pg_arr_free(&eps);
    pg_arr_free(&keys);
  }
  for (int i = 0; lanes && i < n; i++) {
    free(lanes[i].ep);
    free(lanes[i].key);
  }
  free(lanes);
  if (!rc) *more = n >= limit;
  return rc;
}

int pg_event_payload_delete(hookd_store_conn *c, const char *tenant_id, const char *id,
                            int64_t now_ms, int64_t *seq, int64_t *purged_ms, int *cancelled) {
  *cancelled = 0;
  *seq = 0;
  *purged_ms = 0;
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c,
                     "SELECT seq, kind, purged_at FROM events"
                     " WHERE id = $1 AND tenant_id = $2",
                     &p, "read event");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  *seq = pg_i64(r, 0, 0);
  bool inbound = !pg_null(r, 0, 1) && !strcmp(PQgetvalue(r, 0, 1), "inbound");
  *purged_ms = pg_i64(r, 0, 2);
  PQclear(r);
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
  pg_p_init(&p);
  pg_p_i64(&p, *seq);
  pg_p_i64(&p, now_ms);
  r = pg_q(c,
           "UPDATE deliveries SET state = 'cancelled', updated_at = $2, next_attempt_at = NULL,"
           " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL,"
           " last_error = 'payload deleted', lane_wait = 0" /* (waits for nothing now) */
           " WHERE event_seq = $1 AND state IN ('pending', 'retrying')"
           " RETURNING seq, (ordering_key IS NOT NULL)::int",
           &p, "cancel deliveries");
  if (!r) return HOOKD_STORE_ERR;
  int64_t *laned = NULL; /* the cancelled ones that held a place in a lane */
  size_t n = 0, cap = 0;
  int rows = PQntuples(r);
  for (int i = 0; i < rows; i++) {
    (*cancelled)++;
    if (pg_i64(r, i, 1) && hookd_seq_push(&laned, &n, &cap, pg_i64(r, i, 0)) != 0) {
      PQclear(r);
      free(laned);
      return pg_fail(c, "cancel deliveries: out of memory");
    }
  }
  PQclear(r);
  /* the next of each lane goes on: a cancelled one holds no place */
  int rc = HOOKD_STORE_OK;
  for (size_t i = 0; i < n && !rc; i++) rc = pg_lane_advance(c, laned[i], now_ms);
  free(laned);
  if (rc) return rc;
  pg_p_init(&p);
  pg_p_i64(&p, *seq);
  pg_p_i64(&p, now_ms);
  if (pg_x(c, purge_set_sql, &p, "delete event payload") < 0) return HOOKD_STORE_ERR;
  /* its attempts' response excerpts too: a receiver may have echoed the payload (a validation
   * error quoting a field) — the one change attempts allow (migration 20) */
  pg_p_init(&p);
  pg_p_i64(&p, *seq);
  if (pg_x(c,
           "UPDATE attempts SET response = NULL WHERE response IS NOT NULL AND delivery_seq IN"
           " (SELECT seq FROM deliveries WHERE event_seq = $1)",
           &p, "erase response excerpts") < 0)
    return HOOKD_STORE_ERR;
  /* a DEAD head of the event, no longer replayable, holds its lane no more */
  char lit[32];
  snprintf(lit, sizeof lit, "{%lld}", (long long)*seq);
  if (lanes_of_purged(c, lit, now_ms) != 0) return HOOKD_STORE_ERR;
  /* every node's feed hears of it at the commit: a delivery another node claimed and has not
   * sent is given back there, not sent with the payload just deleted */
  pg_p_init(&p);
  pg_p_i64(&p, *seq);
  r = pg_q(c, "SELECT pg_notify('hookd_config', '" PG_PURGED_NOTE "' || $1::bigint)", &p,
           "notify payload delete");
  if (!r) return HOOKD_STORE_ERR;
  PQclear(r);
  *purged_ms = now_ms;
  return HOOKD_STORE_OK;
}

/* Payload retention: outbound events only (inbound ones follow the inbox's retention), and only
 * once every delivery of the event is settled — a DEAD delivery that may hold its lane
 * (DEAD_LANE_HEAD) is not: replaying it (the remedy) needs its payload. Purged
 * rows stay (ids and history), so the walk goes through a partial index of the rows not purged
 * yet — asked for by the first purge, so that a store on which retention was never enabled
 * does not maintain it at every publish; each walk then visits the unsettled old events and
 * stops at the window, instead of every purged event every minute. */
int pg_event_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                   int64_t *after_seq, int *purged) {
  *purged = 0;
  int ready = pg_rix_ready(c, PG_RIX_EVENTS_UNPURGED, after_seq);
  if (ready <= 0) return ready < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
  int64_t *ids;
  int n;
  int rc = pg_retention_walk(c,
                             "SELECT e.seq, e.created_at, (NOT EXISTS (SELECT 1 FROM deliveries d"
                             "  WHERE d.event_seq = e.seq"
                             "  AND (d.state IN ('pending', 'retrying', 'unknown')"
                             "  OR " PG_DEAD_LANE_HEAD("d", "$3::bigint") ")))::int"
                             " FROM events e"
                             " WHERE e.purged_at IS NULL AND e.kind = 'outbound' AND e.seq > $2"
                             " ORDER BY e.seq LIMIT $1",
                             false, before_ms, now_ms, limit, after_seq, &ids, &n);
  if (!rc) /* the bodies an op frees within its budget (sq_event_purge) */
    rc = pg_retention_trim(c,
                           PG_WEIGH("SELECT coalesce((SELECT octet_length(v.body) FROM events v"
                                    " WHERE v.seq = x.s), 0)::bigint AS b, 0::bigint AS d,"
                                    " 0::bigint AS a"),
                           HOOKD_PURGE_BYTES, ids, &n, after_seq);
  if (rc) {
    free(ids);
    return rc;
  }
  if (n > 0) { /* one statement for the batch (see pg_events_delete) */
    pg_arr a;
    const char *seqs = seq_array(c, &a, ids, n);
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, seqs);
    pg_p_i64(&p, now_ms);
    if (!seqs || pg_x(c,
                      "UPDATE events SET body = ''::bytea, purged_at = $2"
                      " WHERE seq = ANY($1::bigint[])",
                      &p, "purge event payloads") < 0)
      rc = HOOKD_STORE_ERR;
    /* DEAD_LANE_HEAD reads a lane moved past up to its last delivery, the claim up to the one
     * waiting: a DEAD head purged here may still have held that one, which now goes */
    else if ((rc = lanes_of_purged(c, seqs, now_ms)) == HOOKD_STORE_OK)
      *purged = n;
    pg_arr_free(&a);
  }
  free(ids);
  return rc;
}

/* pg_endpoints.c — PostgreSQL backend: endpoints and their retry-policy versions (create, read,
 * update, delete and the delete walk), ported from the SQLite backend's sqlite_config.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_int.h"

/* ---------- retry policies ---------- */

void pg_read_policy(const PGresult *r, int row, int i, hookd_retry_policy *p) {
  p->id = pg_i64(r, row, i);
  p->max_attempts = (int)pg_i64(r, row, i + 1);
  p->base_ms = pg_i64(r, row, i + 2);
  p->cap_ms = pg_i64(r, row, i + 3);
  p->max_age_ms = pg_i64(r, row, i + 4);
  p->retry_after_cap_ms = pg_i64(r, row, i + 5);
  p->retry_4xx[0] = p->retry_4xx[1] = 0;
}

/* The policy's retry_statuses column (read apart: it came with migration 12, after the columns
 * every query lists in a row). A value hookd did not write reads as none. */
void pg_read_policy_statuses(const PGresult *r, int row, int i, hookd_retry_policy *p) {
  const char *s = pg_val(r, row, i);
  if (hookd_retry_statuses_parse(s, p->retry_4xx) != 0) p->retry_4xx[0] = p->retry_4xx[1] = 0;
}

static int policy_insert(hookd_store_conn *c, hookd_retry_policy *p, int64_t now_ms) {
  char statuses[512];
  hookd_retry_statuses_format(p->retry_4xx, statuses, sizeof statuses);
  pg_params pp;
  pg_p_init(&pp);
  pg_p_i64(&pp, p->max_attempts);
  pg_p_i64(&pp, p->base_ms);
  pg_p_i64(&pp, p->cap_ms);
  pg_p_i64(&pp, p->max_age_ms);
  pg_p_i64(&pp, p->retry_after_cap_ms);
  pg_p_i64(&pp, now_ms);
  pg_p_text(&pp, statuses);
  PGresult *r = pg_q(c,
                     "INSERT INTO retry_policies(max_attempts, base_ms, cap_ms, max_age_ms,"
                     " retry_after_cap_ms, created_at, retry_statuses)"
                     " VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7::text, '')) RETURNING id",
                     &pp, "insert retry policy");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return pg_fail(c, "insert retry policy: no id returned");
  }
  p->id = pg_i64(r, 0, 0);
  PQclear(r);
  return HOOKD_STORE_OK;
}

static int same_policy(const hookd_retry_policy *a, const hookd_retry_policy *b) {
  return a->max_attempts == b->max_attempts && a->base_ms == b->base_ms &&
         a->cap_ms == b->cap_ms && a->max_age_ms == b->max_age_ms &&
         a->retry_after_cap_ms == b->retry_after_cap_ms && a->retry_4xx[0] == b->retry_4xx[0] &&
         a->retry_4xx[1] == b->retry_4xx[1];
}

/* ---------- endpoints ---------- */

void pg_read_endpoint(const PGresult *r, int row, hookd_endpoint *e) {
  memset(e, 0, sizeof *e);
  e->id = pg_str(r, row, 0);
  e->tenant_id = pg_str(r, row, 1);
  e->url = pg_str(r, row, 2);
  e->description = pg_str(r, row, 3);
  e->event_types = pg_str(r, row, 4);
  e->enabled = pg_i64(r, row, 5) != 0;
  e->disabled_reason = pg_str(r, row, 6);
  e->max_in_flight = (int)pg_i64(r, row, 7);
  e->timeout_ms = (int)pg_i64(r, row, 8);
  e->secret = pg_str(r, row, 9);
  e->created_ms = pg_i64(r, row, 10);
  e->updated_ms = pg_i64(r, row, 11);
  e->deleted_ms = pg_i64(r, row, 12);
  pg_read_policy(r, row, 13, &e->policy);
  e->signing = pg_str(r, row, 19);
  e->previous_secret = pg_str(r, row, 20);
  e->previous_expires_ms = pg_i64(r, row, 21);
  e->source_id = pg_str(r, row, 22);
  e->idempotent = pg_i64(r, row, 23) != 0;
  e->rate_limit = pg_f64(r, row, 24);
  e->ordered = pg_i64(r, row, 25) != 0;
  e->lane_policy = pg_str(r, row, 26);
  e->failing_since_ms = pg_i64(r, row, 27);
  pg_read_policy_statuses(r, row, 28, &e->policy);
  e->paused_until_ms = pg_i64(r, row, 29);
  e->headers = pg_str(r, row, 30);
  e->channels = pg_str(r, row, 31);
  e->metadata = pg_str(r, row, 32);
  e->payload_filter = pg_str(r, row, 33);
  e->disabled_ms = pg_i64(r, row, 34);
  e->body_format = pg_str(r, row, 35);
}

static void rd_endpoint(const PGresult *r, int row, void *rec) { pg_read_endpoint(r, row, rec); }

int pg_read_endpoints(hookd_store_conn *c, PGresult *r, hookd_endpoint **out, size_t *n) {
  return pg_read_rows(c, r, sizeof **out, rd_endpoint, (void **)out, n,
                      "list endpoints: out of memory");
}

/* Runs a SELECT of endpoints with p's parameters and reads every row. */
static int query_endpoints(hookd_store_conn *c, const char *sql, const pg_params *p,
                           hookd_endpoint **out, size_t *n) {
  return pg_read_endpoints(c, pg_q(c, sql, p, "list endpoints"), out, n);
}

int pg_endpoint_create(hookd_store_conn *c, hookd_endpoint *ep, int max_per_tenant) {
  int trc = pg_tenant_live(c, ep->tenant_id);
  if (trc) return trc;
  pg_params p;
  PGresult *r;
  if (max_per_tenant > 0) {
    pg_p_init(&p);
    pg_p_text(&p, ep->tenant_id);
    r = pg_q(c, "SELECT COUNT(*) FROM endpoints WHERE tenant_id = $1 AND deleted_at IS NULL",
             &p, "count endpoints");
    if (!r) return HOOKD_STORE_ERR;
    int64_t live = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
    PQclear(r);
    if (live >= max_per_tenant) {
      snprintf(c->err, sizeof c->err, "tenant already has %d endpoints (the limit)",
               max_per_tenant);
      return HOOKD_STORE_LIMIT;
    }
  }
  int rc = policy_insert(c, &ep->policy, ep->created_ms);
  if (rc) return rc;
  pg_p_init(&p);
  pg_p_text(&p, ep->id);
  pg_p_text(&p, ep->tenant_id);
  pg_p_text(&p, ep->url);
  pg_p_text(&p, ep->description ? ep->description : "");
  pg_p_text(&p, ep->event_types);
  pg_p_bool(&p, ep->enabled);
  pg_p_text(&p, ep->disabled_reason);
  pg_p_i64(&p, ep->max_in_flight);
  pg_p_i64(&p, ep->timeout_ms);
  pg_p_i64(&p, ep->policy.id);
  pg_p_text(&p, ep->secret);
  pg_p_i64(&p, ep->created_ms);
  pg_p_text(&p, ep->signing ? ep->signing : "hmac");
  pg_p_text(&p, ep->source_id);
  pg_p_i64(&p, ep->source_id ? ep->idempotent : 1);
  pg_p_f64(&p, ep->rate_limit);
  pg_p_bool(&p, ep->ordered);
  pg_p_text(&p, ep->lane_policy ? ep->lane_policy : "skip");
  pg_p_text(&p, ep->headers);
  pg_p_text(&p, ep->channels);
  pg_p_text(&p, ep->metadata);
  pg_p_text(&p, ep->payload_filter);
  pg_p_text(&p, ep->body_format ? ep->body_format : "envelope");
  /* a taken id is an expected answer, not a failing statement (which would abort the
   * transaction): nothing inserted, then the row that holds it says why */
  int64_t made =
      pg_x(c,
           "INSERT INTO endpoints(id, tenant_id, url, description, event_types, enabled,"
           " disabled_reason, max_in_flight, timeout_ms, policy_id, secret, created_at,"
           " updated_at, signing, source_id, idempotent, rate_limit, ordered, lane_policy,"
           " headers, channels, metadata, payload_filter, disabled_at, body_format) VALUES ($1, $2,"
           " $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12, $13, $14, $15, $16, $17, $18, $19,"
           " $20, $21, $22, CASE WHEN $6::bigint = 1 THEN NULL ELSE $12::bigint END, $23)"
           " ON CONFLICT (id) DO NOTHING",
           &p, "insert endpoint");
  if (made < 0) return pg_insert_failed(c);
  if (made == 0) {
    /* a deleted endpoint keeps its row (its deliveries and attempts name it): its id is taken
     * for good, which "already exists" alone would not explain. Ids are one namespace for all
     * tenants: of another tenant's endpoint nothing is said but that the id is taken (not
     * whether it was deleted) */
    bool deleted, own;
    if (pg_id_holder(c,
                     "SELECT (deleted_at IS NOT NULL)::int, (tenant_id = $2)::int FROM endpoints"
                     " WHERE id = $1",
                     ep->id, ep->tenant_id, "look up endpoint", &deleted, &own) != 0)
      return HOOKD_STORE_ERR;
    snprintf(c->err, sizeof c->err,
             !own      ? "endpoint id %s is taken (ids are unique across tenants): choose another"
                         " id, or leave it out to have one generated"
             : deleted ? "endpoint %s was deleted, and an endpoint id is never used again (its "
                         "deliveries and attempts keep naming it): choose another id"
                       : "endpoint %s already exists",
             ep->id);
    return HOOKD_STORE_EXISTS;
  }
  ep->updated_ms = ep->created_ms;
  return HOOKD_STORE_OK;
}

int pg_endpoint_get(hookd_store_conn *c, const char *id, hookd_endpoint *out) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c, "SELECT " PG_EP_COLS PG_EP_FROM " WHERE e.id = $1", &p, "get endpoint");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  pg_read_endpoint(r, 0, out);
  PQclear(r);
  if (out->deleted_ms) {
    hookd_endpoint_free(out);
    return HOOKD_STORE_NOTFOUND;
  }
  return HOOKD_STORE_OK;
}

#define PG_STATE_COUNT(st, extra)                                                          \
  "(SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE endpoint_id = $1 AND state = '" st  \
  "' AND id >= $2 AND id < $3" extra " LIMIT $4) x)"

int pg_endpoint_stats(hookd_store_conn *c, const char *endpoint_id, const char *from_id,
                      const char *to_id, int64_t cap, int64_t counts[HOOKD_DS__COUNT],
                      int64_t *dead_unsent) {
  /* one range of the (endpoint_id, state, id) index a state, cut at cap, in hookd_dstate's
   * order; then the DEAD ones never attempted among at most cap DEAD rows */
  _Static_assert(HOOKD_DS_PENDING == 0 && HOOKD_DS_RETRYING == 1 && HOOKD_DS_DELIVERED == 2 &&
                     HOOKD_DS_DEAD == 3 && HOOKD_DS_CANCELLED == 4 && HOOKD_DS_UNKNOWN == 5 &&
                     HOOKD_DS__COUNT == 6,
                 "the columns below follow hookd_dstate");
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, from_id);
  pg_p_text(&p, to_id);
  pg_p_i64(&p, cap);
  PGresult *r = pg_q(c,
                     "SELECT " PG_STATE_COUNT("pending", "") ", " PG_STATE_COUNT("retrying", "")
                     ", " PG_STATE_COUNT("delivered", "") ", " PG_STATE_COUNT("dead", "") ", "
                     PG_STATE_COUNT("cancelled", "") ", " PG_STATE_COUNT("unknown", "") ", "
                     PG_STATE_COUNT("dead", " AND attempt_count = 0"),
                     &p, "endpoint stats");
  if (!r) return HOOKD_STORE_ERR;
  for (int s = 0; s < HOOKD_DS__COUNT; s++) counts[s] = pg_i64(r, 0, s);
  *dead_unsent = pg_i64(r, 0, HOOKD_DS__COUNT);
  PQclear(r);
  return HOOKD_STORE_OK;
}
#undef PG_STATE_COUNT

int pg_ever_made(hookd_store_conn *c, int kind, const char *tenant_id, const char *id) {
  const char *sql =
      kind == HOOKD_MADE_ENDPOINT
          ? "SELECT 1 FROM endpoints WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)"
      : kind == HOOKD_MADE_SOURCE
          ? "SELECT 1 FROM sources WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)"
      : kind == HOOKD_MADE_EVENT
          ? "SELECT 1 FROM events WHERE id = $1 AND ($2::text IS NULL OR tenant_id = $2)"
          : /* deleted ones too */
          "SELECT 1 FROM tenants WHERE id = $1 AND ($2::text IS NULL OR id = $2)";
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c, sql, &p, "look up an id");
  if (!r) return HOOKD_STORE_ERR;
  int rows = PQntuples(r);
  PQclear(r);
  return rows > 0 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int pg_endpoint_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                     int kind, int enabled, hookd_endpoint **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, tenant_id);
  pg_p_text(&p, after_id ? after_id : "");
  pg_p_i64(&p, limit);
  pg_p_i64(&p, kind);
  pg_p_i64(&p, enabled);
  return query_endpoints(c,
                         "SELECT " PG_EP_COLS PG_EP_FROM " WHERE e.tenant_id = $1"
                         " AND e.deleted_at IS NULL AND e.id > $2 AND ($4::bigint = 0 OR"
                         " ($4::bigint = 1) = (e.source_id IS NULL)) AND ($5::bigint < 0 OR"
                         " (e.enabled <> 0) = ($5::bigint = 1)) ORDER BY e.id LIMIT $3",
                         &p, out, n);
}

int pg_endpoint_update(hookd_store_conn *c, hookd_endpoint *ep) {
  hookd_endpoint cur;
  int rc = pg_endpoint_get(c, ep->id, &cur);
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
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, ep->id);
  pg_p_text(&p, ep->url);
  pg_p_text(&p, ep->description ? ep->description : "");
  pg_p_text(&p, ep->event_types);
  pg_p_bool(&p, ep->enabled);
  pg_p_text(&p, ep->enabled ? NULL : ep->disabled_reason);
  pg_p_i64(&p, ep->max_in_flight);
  pg_p_i64(&p, ep->timeout_ms);
  pg_p_i64(&p, ep->policy.id);
  pg_p_text(&p, ep->secret);
  pg_p_i64(&p, ep->updated_ms);
  /* a previous secret whose overlap has ended goes with the next write (nothing signs with it) */
  bool prev = ep->previous_secret && ep->previous_expires_ms > ep->updated_ms;
  pg_p_text(&p, prev ? ep->previous_secret : NULL);
  pg_p_i64n(&p, prev ? ep->previous_expires_ms : 0);
  pg_p_f64(&p, ep->rate_limit);
  pg_p_bool(&p, ep->ordered);
  pg_p_text(&p, ep->lane_policy ? ep->lane_policy : "skip");
  pg_p_bool(&p, ep->idempotent);
  pg_p_text(&p, ep->headers);
  pg_p_text(&p, ep->channels);
  pg_p_text(&p, ep->metadata);
  pg_p_text(&p, ep->payload_filter);
  pg_p_text(&p, ep->body_format ? ep->body_format : "envelope");
  /* updated_at moves on whatever the clocks: another node's rescan takes a row whose
   * updated_at differs from the one it holds, and two writes in one millisecond (a PATCH and a
   * rotation through two nodes) left the second unseen there — its old secret still signing */
  PGresult *ur =
      pg_q(c,
           "UPDATE endpoints SET url = $2, description = $3, event_types = $4,"
           " enabled = $5::bigint, disabled_reason = $6, max_in_flight = $7, timeout_ms = $8,"
           " policy_id = $9, secret = $10, updated_at = GREATEST(updated_at + 1, $11::bigint),"
           " previous_secret = $12,"
           " previous_expires_at = $13, rate_limit = $14, ordered = $15, lane_policy = $16,"
           " headers = $18, channels = $19, metadata = $20, payload_filter = $21,"
           " body_format = $22,"
           " idempotent = CASE WHEN source_id IS NULL THEN 1 ELSE $17::bigint END,"
           /* (the right-hand sides read the row as it was: `enabled` is the old value) */
           " disabled_at = CASE WHEN $5::bigint = 1 THEN NULL WHEN enabled = 1 THEN"
           " GREATEST(updated_at + 1, $11::bigint) ELSE disabled_at END,"
           /* enabled again, or a new URL (another destination): its failures start over,
            * and the old receiver's Retry-After pause ends */
           " failing_since = CASE WHEN ($5::bigint = 1 AND enabled = 0)"
           " OR url IS DISTINCT FROM $2::text THEN NULL ELSE failing_since END,"
           " paused_until = CASE WHEN ($5::bigint = 1 AND enabled = 0)"
           " OR url IS DISTINCT FROM $2::text THEN NULL ELSE paused_until END,"
           " health_since = CASE WHEN ($5::bigint = 1 AND enabled = 0)"
           " OR url IS DISTINCT FROM $2::text THEN $11::bigint ELSE health_since END"
           " WHERE id = $1 AND deleted_at IS NULL RETURNING updated_at",
           &p, "update endpoint");
  if (!ur) return HOOKD_STORE_ERR;
  int updated = PQntuples(ur);
  if (updated == 1) ep->updated_ms = pg_i64(ur, 0, 0); /* as stored: this node's mirror too */
  PQclear(ur);
  if (updated != 1) return HOOKD_STORE_NOTFOUND;
  if (now_no_resend) {
    /* every lease it holds now may be such a request: marked, as migration 23 marks them (a
     * crash then holds it unknown instead of sending it again under the new setting) */
    pg_p_init(&p);
    pg_p_text(&p, ep->id);
    if (pg_x(c,
             "UPDATE deliveries SET sent_token = lease_token WHERE endpoint_id = $1"
             " AND leased_until IS NOT NULL AND (state = 'pending' OR state = 'retrying')",
             &p, "mark leased deliveries") < 0)
      return HOOKD_STORE_ERR;
    /* a retry after an attempt that may have reached it is held when it is claimed (the
     * dispatcher, disp_record_hold): a scan of them here held the writer for seconds */
  }
  /* no lanes any more: nothing waits (a first bounded step here, the rest by the rescans) */
  if (!ep->ordered) return pg_lane_unorder(c, ep->id);
  return unblocked ? pg_lane_unblock(c, ep->id, ep->updated_ms) : HOOKD_STORE_OK;
}

/* Runs an UPDATE … RETURNING seq over an endpoint's deliveries ($1 the endpoint, $2 now, $3
 * their last_error, then `limit` as $4 when >= 0): counts the rows into *rows (when given) and
 * collects their seqs (keep). */
static int step_seqs(hookd_store_conn *c, const char *sql, const char *id, int64_t now_ms,
                     const char *why, int limit, bool keep, int64_t **seqs, size_t *n,
                     size_t *cap, int *rows, const char *what) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  pg_p_text(&p, why);
  if (limit >= 0) pg_p_i64(&p, limit);
  PGresult *r = pg_q(c, sql, &p, what);
  if (!r) return HOOKD_STORE_ERR;
  int k = PQntuples(r);
  if (rows) *rows += k;
  for (int i = 0; keep && i < k; i++) {
    if (hookd_seq_push(seqs, n, cap, pg_i64(r, i, 0)) != 0) {
      PQclear(r);
      return pg_fail(c, "cancel deliveries: out of memory");
    }
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* (a cancelled row waits for nothing: out of deliveries_lane_wait, which the walk goes through) */
#define CANCEL_SET                                                                              \
  "UPDATE deliveries SET state = 'cancelled', updated_at = $2, next_attempt_at = NULL,"         \
  " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL, last_error = $3,"   \
  " lane_wait = 0"
/* A deleted endpoint's active deliveries not in flight, in two passes, each on the partial index
 * that holds them and nothing else — the due ones, and those waiting in a lane — so that a step
 * visits what it cancels, whatever is left (an ordering key alone would plan the second on
 * deliveries_lane_open, which holds every open keyed row: a review measured steps of 0.4 s for
 * 500,000 keyed deliveries); also the test for any left ($1 the endpoint). (PostgreSQL has no
 * INDEXED BY: lane_wait = 1 matches deliveries_lane_wait's predicate, which the planner uses.) */
#define CANCEL_DUE                                                                              \
  "SELECT seq FROM deliveries WHERE endpoint_id = $1 AND state IN ('pending','retrying')"      \
  " AND lane_wait = 0"
#define CANCEL_LANES                                                                            \
  "SELECT seq FROM deliveries WHERE endpoint_id = $1"                                           \
  " AND lane_wait = 1 AND state IN ('pending','retrying')"

/* Cancels up to *budget of a deleted endpoint's active deliveries, spending the budget; their
 * seqs are kept when inbound (their inbox records follow). *left: some may remain (the budget
 * ran out and a probe found one). */
static int cancel_some(hookd_store_conn *c, const char *id, int64_t now_ms, bool inbound,
                       int *budget, int64_t **seqs, size_t *n, size_t *cap, int *cancelled,
                       bool *left) {
  static const char *const cancel[] = {
      CANCEL_SET " WHERE seq IN (" CANCEL_DUE " LIMIT $4) RETURNING seq",
      CANCEL_SET " WHERE seq IN (" CANCEL_LANES " LIMIT $4) RETURNING seq"};
  int rc = HOOKD_STORE_OK;
  *left = false;
  for (int i = 0; i < 2 && rc == HOOKD_STORE_OK && *budget > 0; i++) {
    int before = *cancelled;
    /* why it is cancelled (the inbox record of an inbound one takes its delivery's error) */
    rc = step_seqs(c, cancel[i], id, now_ms, inbound ? "destination deleted" : "endpoint deleted",
                   *budget, inbound, seqs, n, cap, cancelled, "cancel deliveries");
    *budget -= *cancelled - before;
  }
  if (rc || *budget > 0) return rc;
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     /* (a CASE: the second probe only when the first finds none) */
                     "SELECT CASE WHEN EXISTS (" CANCEL_DUE ") THEN 1"
                     " WHEN EXISTS (" CANCEL_LANES ") THEN 1 ELSE 0 END",
                     &p, "cancel deliveries");
  if (!r) return HOOKD_STORE_ERR;
  *left = PQntuples(r) == 1 && pg_i64(r, 0, 0) != 0;
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* Whether an endpoint still owes cancels to the delete walk. */
static int flag_cancels(hookd_store_conn *c, const char *id, bool pending) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_bool(&p, pending);
  return pg_x(c, "UPDATE endpoints SET cancel_pending = $2 WHERE id = $1", &p, "flag cancels") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

static int follow_inbox(hookd_store_conn *c, int64_t *seqs, size_t n, int64_t now_ms, int rc) {
  for (size_t i = 0; i < n && rc == HOOKD_STORE_OK; i++)
    rc = pg_inbox_follow(c, seqs[i], now_ms, "destination deleted", NULL);
  free(seqs);
  return rc;
}

int pg_endpoint_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                              hookd_delete_counts *out) {
  *out = (hookd_delete_counts){0};
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_i64(&p, now_ms);
  int64_t k = pg_x(c,
                   "UPDATE endpoints SET deleted_at = $2, updated_at = $2, enabled = 0,"
                   /* nothing is signed for it again (a request in flight has its key
                    * already): its secrets go, and its headers (credentials) */
                   " secret = '', previous_secret = NULL, previous_expires_at = NULL,"
                   " headers = NULL, description = '', metadata = NULL,"
                   /* its URL cut to its origin: a path or query may hold a credential (a
                    * Slack hook's); its attempts' by the URL walk, marked below */
                   " url = " PG_URL_ORIGIN("url")
                   " WHERE id = $1 AND deleted_at IS NULL",
                   &p, "delete endpoint");
  if (k < 0) return HOOKD_STORE_ERR;
  if (k != 1) return HOOKD_STORE_NOTFOUND;
  /* its attempts' URLs are the URL walk's (docs/architecture.md "Deletes"): its tenant's walk
   * starts, or, under way, owes another pass — when it has a delivery (an endpoint never sent
   * to has no attempt) */
  pg_p_init(&p);
  pg_p_text(&p, id);
  if (pg_x(c,
           "INSERT INTO url_cuts(tenant_id, after, again, turn, cut) SELECT tenant_id, '', 0,"
           " (SELECT coalesce(max(turn), 0) + 1 FROM url_cuts), 0 FROM endpoints WHERE id = $1"
           " AND EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = $1)"
           /* a pass under way cuts its deliveries past the cursor; those before need
            * another pass */
           " ON CONFLICT (tenant_id) DO UPDATE SET again = CASE WHEN url_cuts.again = 1"
           " OR url_cuts.after <> '' THEN 1 ELSE 0 END",
           &p, "mark the URL walk") < 0)
    return HOOKD_STORE_ERR;
  /* an inbound destination's inbox records follow their cancelled deliveries (they would say
   * `received` for ever) */
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT (source_id IS NOT NULL)::int, idempotent FROM endpoints"
                     " WHERE id = $1",
                     &p, "delete endpoint");
  if (!r) return HOOKD_STORE_ERR;
  bool inbound = false, no_resend = false;
  if (PQntuples(r) == 1) {
    inbound = pg_i64(r, 0, 0) != 0;
    no_resend = inbound && !pg_i64(r, 0, 1);
  }
  PQclear(r);
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
     * request never started is given back and cancelled then (pg_release_lease). (PostgreSQL
     * has no INDEXED BY: leased_until IS NOT NULL matches deliveries_leased's predicate.) */
    rc = step_seqs(c,
                   "UPDATE deliveries SET state = 'unknown',"
                   " updated_at = $2, next_attempt_at = NULL,"
                   " lease_token = lease_token + 1, lease_owner = NULL, leased_until = NULL,"
                   " last_error = $3 WHERE leased_until IS NOT NULL AND endpoint_id = $1"
                   " AND state IN ('pending','retrying') AND sent_token = lease_token"
                   " RETURNING seq",
                   id, now_ms, pg_held_deleted, -1, true, &seqs, &n, &cap, &out->held,
                   "hold deliveries");
  }
  /* Active deliveries are cancelled; bumping the lease token fences any in-flight attempt. */
  if (!rc)
    rc = step_seqs(c,
                   "UPDATE deliveries SET state = 'cancelled',"
                   " updated_at = $2, next_attempt_at = NULL, lease_token = lease_token + 1,"
                   " lease_owner = NULL, leased_until = NULL, last_error = $3"
                   " WHERE leased_until IS NOT NULL AND endpoint_id = $1"
                   " AND state IN ('pending','retrying') RETURNING seq",
                   id, now_ms, inbound ? "destination deleted" : "endpoint deleted", -1, inbound,
                   &seqs, &n, &cap, &out->cancelled, "cancel deliveries");
  /* then the backlog, within the budget: the rest is the delete walk's */
  if (!rc)
    rc = cancel_some(c, id, now_ms, inbound, budget, &seqs, &n, &cap, &out->cancelled,
                     &out->more);
  if (!rc && out->more) rc = flag_cancels(c, id, true);
  return follow_inbox(c, seqs, n, now_ms, rc);
}

int pg_endpoint_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_delete_counts *out) {
  int budget = HOOKD_DELETE_STEP;
  return pg_endpoint_delete_within(c, id, now_ms, &budget, out);
}

/* What a step of the URL walk reads and cuts at most (docs/architecture.md "Deletes"): deliveries
 * of the tenant, attempts of its deleted endpoints. */
#define URLCUT_STEP 2000
#define URLCUT_ATTEMPTS 100

/* One step of the URL walk, for the tenant whose turn it is: the next URLCUT_STEP deliveries past
 * its cursor, the URLs of the attempts of those whose endpoint is deleted cut to their origin —
 * URLCUT_ATTEMPTS at most, in delivery id order, the cursor then before the delivery not
 * finished (the writers' transactions of every node are one at a time: PG_WRITER_BEGIN's
 * lock). */
static int url_cut_step(hookd_store_conn *c, hookd_delete_step *out) {
  PGresult *cur = pg_q(c,
                       "SELECT tenant_id, after, again, cut FROM url_cuts ORDER BY turn LIMIT 1",
                       NULL, "URL walk");
  if (!cur) return HOOKD_STORE_ERR;
  if (PQntuples(cur) == 0) {
    PQclear(cur);
    return HOOKD_STORE_OK;
  }
  pg_params p;
  pg_p_init(&p);
  pg_copy(cur, 0, 0, out->tenant_id, sizeof out->tenant_id);
  pg_p_text(&p, out->tenant_id);
  pg_p_text(&p, PQgetvalue(cur, 0, 1)); /* (cur is cleared at the end) */
  pg_p_i64(&p, URLCUT_STEP);
  pg_p_i64(&p, URLCUT_ATTEMPTS);
  bool again = pg_i64(cur, 0, 2) != 0;
  int64_t total = pg_i64(cur, 0, 3);
  out->found = out->urls = true;
  /* its cut, the deliveries read, the last one's id, the attempts cut, the id of the last
   * delivery read before the one whose attempt was cut last */
  PGresult *r = pg_q(c,
           "WITH s AS (SELECT d.seq, d.id, e.deleted_at IS NOT NULL AS gone FROM deliveries d"
           " JOIN endpoints e ON e.id = d.endpoint_id WHERE d.tenant_id = $1"
           " AND d.id > $2::text ORDER BY d.id LIMIT $3),"
           " t AS (SELECT a.delivery_seq, a.attempt_number, s.id FROM s JOIN attempts a"
           " ON a.delivery_seq = s.seq WHERE s.gone AND a.url IS DISTINCT FROM "
           PG_URL_ORIGIN("a.url") " ORDER BY s.id, a.attempt_number LIMIT $4),"
           " a AS (UPDATE attempts x SET url = " PG_URL_ORIGIN("x.url") " FROM t"
           " WHERE x.delivery_seq = t.delivery_seq AND x.attempt_number = t.attempt_number"
           " RETURNING 1)"
           " SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM s), (SELECT max(id) FROM s),"
           " (SELECT max(id) FROM s WHERE id < (SELECT max(id) FROM t))",
           &p, "URL walk");
  if (!r) {
    PQclear(cur);
    return HOOKD_STORE_ERR;
  }
  out->urls_cut = (int)pg_i64(r, 0, 0);
  bool full = out->urls_cut >= URLCUT_ATTEMPTS;
  bool pass_done = !full && pg_i64(r, 0, 1) < URLCUT_STEP;
  out->finished = pass_done && !again;
  out->urls_total = total + out->urls_cut;
  /* the cursor: the last delivery read, or, the budget spent, the one before the delivery not
   * finished (none read before it: where it was) */
  const char *next = pass_done ? ""
                     : !full   ? PQgetvalue(r, 0, 2)
                     : PQgetisnull(r, 0, 3) ? PQgetvalue(cur, 0, 1)
                                            : PQgetvalue(r, 0, 3);
  /* the tenant's row gone, or its next pass from the first delivery, or its cursor moved on; its
   * turn after every other tenant's */
  pg_p_init(&p);
  pg_p_text(&p, out->tenant_id);
  int64_t k;
  if (out->finished) {
    k = pg_x(c, "DELETE FROM url_cuts WHERE tenant_id = $1", &p, "URL walk");
  } else {
    pg_p_text(&p, next);
    pg_p_i64(&p, pass_done);
    pg_p_i64(&p, out->urls_cut);
    k = pg_x(c,
             "UPDATE url_cuts SET after = $2, again = CASE WHEN $3::bigint = 1 THEN 0"
             " ELSE again END, cut = cut + $4::bigint,"
             " turn = (SELECT max(turn) + 1 FROM url_cuts) WHERE tenant_id = $1",
             &p, "URL walk");
  }
  PQclear(r);
  PQclear(cur);
  return k < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
}

int pg_delete_step(hookd_store_conn *c, int64_t now_ms, int limit, hookd_delete_step *out) {
  *out = (hookd_delete_step){0};
  PGresult *r = pg_q(c,
                     "SELECT id, (source_id IS NOT NULL)::int FROM endpoints"
                     " WHERE cancel_pending = 1 LIMIT 1",
                     NULL, "delete walk");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) { /* the cancels first; then the URLs */
    PQclear(r);
    return url_cut_step(c, out);
  }
  pg_copy(r, 0, 0, out->endpoint_id, sizeof out->endpoint_id);
  out->found = true;
  bool inbound = pg_i64(r, 0, 1) != 0;
  PQclear(r);
  int64_t *seqs = NULL;
  size_t n = 0, cap = 0;
  int budget = limit;
  int rc = cancel_some(c, out->endpoint_id, now_ms, inbound, &budget, &seqs, &n, &cap,
                       &out->counts.cancelled, &out->counts.more);
  out->finished = !out->counts.more;
  if (!rc && out->finished) rc = flag_cancels(c, out->endpoint_id, false);
  return follow_inbox(c, seqs, n, now_ms, rc);
}

int pg_endpoint_reseal(hookd_store_conn *c, const char *id, const char *secret,
                       const char *previous_secret, const char *headers) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, secret);
  pg_p_text(&p, previous_secret);
  pg_p_text(&p, headers);
  int64_t k = pg_x(c,
                   "UPDATE endpoints SET secret = $2, previous_secret = $3, headers = $4,"
                   " previous_expires_at = CASE WHEN $3::text IS NULL THEN NULL"
                   " ELSE previous_expires_at END WHERE id = $1",
                   &p, "reseal endpoint");
  if (k < 0) return HOOKD_STORE_ERR;
  return k == 1 ? HOOKD_STORE_OK : HOOKD_STORE_NOTFOUND;
}

int pg_master_key_claim(hookd_store_conn *c, const char *key_id, bool take, int64_t now_ms,
                        char *held, size_t cap) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, key_id);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c,
                     take ? "INSERT INTO master_key (one, key_id, recorded_at)"
                            " VALUES (true, $1, $2) ON CONFLICT (one) DO UPDATE"
                            " SET key_id = excluded.key_id, recorded_at = excluded.recorded_at"
                            " RETURNING key_id"
                          /* (the row there already is read back: a no-op update returns it) */
                          : "INSERT INTO master_key (one, key_id, recorded_at)"
                            " VALUES (true, $1, $2) ON CONFLICT (one) DO UPDATE"
                            " SET key_id = master_key.key_id RETURNING key_id",
                     &p, "record the master key");
  if (!r) return HOOKD_STORE_ERR;
  bool one = PQntuples(r) == 1;
  if (one) snprintf(held, cap, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
  return one ? HOOKD_STORE_OK : pg_fail(c, "record the master key");
}

int pg_endpoints_since(hookd_store_conn *c, int64_t since_ms, hookd_endpoint **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, since_ms);
  return query_endpoints(c,
                         "SELECT " PG_EP_COLS PG_EP_FROM " WHERE e.updated_at >= $1"
                         " ORDER BY e.id",
                         &p, out, n);
}

/* pg_dispatch.c — PostgreSQL backend: the dispatcher's ops — claims (leases with fencing
 * tokens), outcomes, releases, send marks, the lease sweep and due hints with the lanes' repair. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/postgres/pg_int.h"

/* What the sweep writes on a delivery it holds (reclaim_hold); the late outcome and release of
 * the node that held the lease recognise it. */
static const char lease_lost[] = "lease lost: hookd stopped while the request may have been sent";

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
/* (now: the placeholder of the claim's time; $1 is always the endpoint) */
#define CLAIMABLE(kind, now)                                                                    \
  " FROM deliveries d WHERE d.endpoint_id = $1 AND d.cycle_kind = '" kind "'"                  \
  " AND d.state IN ('pending','retrying') AND d.lane_wait = 0"                                  \
  " AND (d.leased_until IS NULL OR (d.leased_until <= " now " AND NOT (SELECT"                 \
  " (e.idempotent = 0 AND e.source_id IS NOT NULL) FROM endpoints e"                            \
  " WHERE e.id = d.endpoint_id)))"
/* lane_wait = 0 is a hint (rows known to wait are not even visited); this check is the rule,
 * each part one probe of a partial index (deliveries_lane_open, deliveries_lane_dead,
 * deliveries_lane_leased). (block: the placeholder of the lane policy, 0/1) */
#define LANE_HEAD(now, block)                                                                   \
  " AND (d.ordering_key IS NULL OR (NOT EXISTS (SELECT 1 FROM deliveries p"                     \
  " WHERE p.endpoint_id = d.endpoint_id AND p.ordering_key = d.ordering_key AND p.seq < d.seq"  \
  " AND p.ordering_key IS NOT NULL AND p.state IN ('pending','retrying','unknown'))"           \
  " AND NOT (" block " <> 0 AND EXISTS ("                                                      \
  PG_LANE_DEAD_HOLDS("d.endpoint_id", "d.ordering_key", "d.seq", now) "))"                      \
  " AND NOT EXISTS (SELECT 1 FROM deliveries p WHERE p.endpoint_id = d.endpoint_id"             \
  " AND p.ordering_key = d.ordering_key AND p.ordering_key IS NOT NULL"                         \
  " AND p.leased_until IS NOT NULL AND p.leased_until > " now ")))"
/* $1 endpoint, $2 owner, $3 now, $4 leased_until, $5 limit[, $6 lane block]. The rows leased
 * are locked FOR UPDATE SKIP LOCKED: several nodes share the database, and a row another
 * transaction holds is left to it (docs/postgres.md). They are chosen in a CTE, run once: as an
 * `IN (subquery … LIMIT … SKIP LOCKED)` the planner may run the subquery again, and lease more
 * rows than the limit (the claim reads only `limit` of them: the others wait out their lease). */
#define CLAIM_SQL(kind, lanes)                                                                  \
  "WITH c AS (SELECT d.seq" CLAIMABLE(kind, "$3::bigint") " AND d.next_attempt_at <= $3"       \
  lanes " ORDER BY d.next_attempt_at, d.seq LIMIT $5 FOR UPDATE OF d SKIP LOCKED)"             \
  " UPDATE deliveries SET lease_owner = $2, lease_token = lease_token + 1, leased_until = $4"   \
  " FROM c WHERE deliveries.seq = c.seq"                                                        \
  " RETURNING deliveries.seq, id, event_seq, endpoint_id, tenant_id, state, attempt_count,"     \
  " cycle_base,"                                                                                \
  " cycle_started_at, next_attempt_at, lease_token, leased_until, policy_id, created_at,"      \
  " cycle_kind, ordering_key, last_ambiguous"
/* $1 endpoint, $2 now[, $3 lane block]. Active deliveries always have a next_attempt_at (the
 * ORDER BY's NULLs, last here and first in SQLite, never occur). */
#define NEXT_DUE_SQL(kind, lanes)                                                               \
  "SELECT d.next_attempt_at" CLAIMABLE(kind, "$2::bigint") lanes                               \
  " ORDER BY d.next_attempt_at LIMIT 1"

/* The next due time of live and of replay deliveries, both in one statement. */
#define NEXT_DUE_BOTH_SQL(lanes)                                                                \
  "SELECT (" NEXT_DUE_SQL("live", lanes) "), (" NEXT_DUE_SQL("replay", lanes) ")"

static int next_due(hookd_store_conn *c, const hookd_claim_req *req, int64_t *due) {
  const char *sql = req->ordered ? NEXT_DUE_BOTH_SQL(LANE_HEAD("$2::bigint", "$3::bigint"))
                                 : NEXT_DUE_BOTH_SQL("");
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->endpoint_id);
  pg_p_i64(&p, req->now_ms);
  if (req->ordered) pg_p_bool(&p, req->lane_block);
  PGresult *r = pg_q(c, sql, &p, "next due");
  *due = 0;
  if (!r) return HOOKD_STORE_ERR;
  int64_t live = PQntuples(r) > 0 ? pg_i64(r, 0, 0) : 0;
  int64_t replay = PQntuples(r) > 0 ? pg_i64(r, 0, 1) : 0;
  PQclear(r);
  *due = !live ? replay : !replay ? live : live < replay ? live : replay;
  return HOOKD_STORE_OK;
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
  const char *sql =
      replay ? (req->ordered ? CLAIM_SQL("replay", LANE_HEAD("$3::bigint", "$6::bigint"))
                             : CLAIM_SQL("replay", ""))
             : (req->ordered ? CLAIM_SQL("live", LANE_HEAD("$3::bigint", "$6::bigint"))
                             : CLAIM_SQL("live", ""));
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->endpoint_id);
  pg_p_text(&p, req->owner);
  pg_p_i64(&p, req->now_ms);
  pg_p_i64(&p, req->now_ms + req->lease_ms);
  pg_p_i64(&p, limit);
  if (req->ordered) pg_p_bool(&p, req->lane_block);
  PGresult *r = pg_q(c, sql, &p, "claim");
  if (!r) return HOOKD_STORE_ERR;
  int rows = PQntuples(r);
  for (int i = 0; i < rows && i < limit; i++) {
    hookd_delivery *d = &v[(*len)++].d;
    d->seq = pg_i64(r, i, 0);
    d->id = pg_str(r, i, 1);
    d->event_seq = pg_i64(r, i, 2);
    d->endpoint_id = pg_str(r, i, 3);
    d->tenant_id = pg_str(r, i, 4);
    hookd_dstate s = HOOKD_DS_PENDING;
    if (!PQgetisnull(r, i, 5)) hookd_dstate_parse(PQgetvalue(r, i, 5), &s);
    d->state = s;
    d->attempt_count = (int)pg_i64(r, i, 6);
    d->cycle_base = (int)pg_i64(r, i, 7);
    d->cycle_started_ms = pg_i64(r, i, 8);
    d->next_attempt_ms = pg_i64(r, i, 9);
    d->lease_token = pg_i64(r, i, 10);
    d->leased_until_ms = pg_i64(r, i, 11);
    d->policy_id = pg_i64(r, i, 12);
    d->created_ms = pg_i64(r, i, 13);
    d->replay_cycle = !PQgetisnull(r, i, 14) && strcmp(PQgetvalue(r, i, 14), "replay") == 0;
    d->ordering_key = pg_str(r, i, 15);
    d->last_ambiguous = pg_i64(r, i, 16) != 0;
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* The bodies one claim_details statement brings at most (the first always comes): past them,
 * each body is read on its own, so a claim of large events never holds them all in one result
 * (text format: twice their size). */
#define CLAIM_DETAILS_BODY_BUDGET "8388608"

/* A body claim_details left out, read on its own. */
static int claim_body(hookd_store_conn *c, hookd_claimed *w) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, w->d.event_seq);
  PGresult *r = pg_q(c, "SELECT body FROM events WHERE seq = $1", &p, "claim details");
  if (!r) return HOOKD_STORE_ERR;
  w->body = PQntuples(r) == 1 ? (char *)pg_blob(r, 0, 0, &w->body_len) : NULL;
  PQclear(r);
  return w->body ? HOOKD_STORE_OK : pg_fail(c, "claim details: event body not read");
}

/* Fills the event and policy of the n claimed deliveries v, all read in one statement (docs/
 * postgres.md "Round trips") — but for the bodies past CLAIM_DETAILS_BODY_BUDGET, read one by
 * one after it; HOOKD_STORE_ERR with c->err set. */
static int claim_details(hookd_store_conn *c, hookd_claimed *v, size_t n) {
  if (n == 0) return HOOKD_STORE_OK;
  pg_arr events, policies;
  pg_arr_init(&events);
  pg_arr_init(&policies);
  for (size_t i = 0; i < n; i++) {
    pg_arr_i64(&events, v[i].d.event_seq);
    pg_arr_i64(&policies, v[i].d.policy_id);
  }
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, pg_arr_done(&events));
  pg_p_text(&p, pg_arr_done(&policies));
  PGresult *r = NULL;
  if (p.v[0] && p.v[1])
    r = pg_q(c,
             "SELECT e.id, e.type,"
             " CASE WHEN x.i = 1 OR sum(octet_length(e.body)) OVER (ORDER BY x.i)"
             " <= " CLAIM_DETAILS_BODY_BUDGET " THEN e.body END,"
             " e.expires_at, p.id, p.max_attempts,"
             " p.base_ms, p.cap_ms, p.max_age_ms, p.retry_after_cap_ms, e.kind,"
             " e.content_type, e.meta, p.retry_statuses, x.i"
             " FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS x(es, pid, i)"
             " JOIN events e ON e.seq = x.es JOIN retry_policies p ON p.id = x.pid"
             " ORDER BY x.i",
             &p, "claim details");
  else
    pg_fail(c, "claim details: out of memory");
  pg_arr_free(&events);
  pg_arr_free(&policies);
  if (!r) return HOOKD_STORE_ERR;
  /* one row per claimed delivery, in its order: a missing one is an event or policy gone */
  bool whole = PQntuples(r) == (int)n;
  for (int i = 0; whole && i < (int)n; i++) whole = pg_i64(r, i, 14) == i + 1;
  if (!whole) {
    PQclear(r);
    return pg_fail(c, "claim details: event or policy not found");
  }
  for (int i = 0; i < (int)n; i++) {
    hookd_claimed *w = &v[i];
    w->d.event_id = pg_str(r, i, 0);
    w->d.event_type = pg_str(r, i, 1);
    bool later = pg_null(r, i, 2); /* (the column is NOT NULL: past the budget) */
    w->body = later ? NULL : (char *)pg_blob(r, i, 2, &w->body_len);
    if (!later && !w->body) {
      PQclear(r);
      return pg_fail(c, "claim details: out of memory");
    }
    w->expires_ms = pg_i64(r, i, 3);
    pg_read_policy(r, i, 4, &w->policy);
    pg_read_policy_statuses(r, i, 13, &w->policy);
    w->inbound = !PQgetisnull(r, i, 10) && strcmp(PQgetvalue(r, i, 10), "inbound") == 0;
    w->content_type = pg_str(r, i, 11);
    w->meta = pg_str(r, i, 12);
  }
  PQclear(r);
  for (size_t i = 0; i < n; i++) {
    int rc = v[i].body ? HOOKD_STORE_OK : claim_body(c, &v[i]);
    if (rc) return rc;
  }
  return HOOKD_STORE_OK;
}

int pg_claim(hookd_store_conn *c, const hookd_claim_req *asked, hookd_claimed **out, size_t *n,
             int64_t *next_due_ms) {
  *out = NULL;
  *n = 0;
  *next_due_ms = 0;
  /* A deleted endpoint's deliveries not cancelled yet (the delete walk's: docs/architecture.md
   * "Deletes") are never claimed, though the dispatcher may not have heard of the delete yet;
   * nor are its lanes claimed by a mode it has not heard of yet (sq_claim) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, asked->endpoint_id);
  PGresult *live = pg_q(c, "SELECT (deleted_at IS NULL)::int, (ordered = 1)::int,"
                           " (lane_policy = 'block')::int FROM endpoints WHERE id = $1",
                        &p, "claim");
  if (!live) return HOOKD_STORE_ERR;
  bool deleted = PQntuples(live) > 0 && !pg_i64(live, 0, 0);
  hookd_claim_req r = *asked;
  if (PQntuples(live) > 0) hookd_claim_mode(&r, pg_i64(live, 0, 1) != 0, pg_i64(live, 0, 2) != 0);
  const hookd_claim_req *req = &r;
  PQclear(live);
  if (deleted) return HOOKD_STORE_OK;
  hookd_claimed *v = calloc((size_t)(req->limit > 0 ? req->limit : 1), sizeof *v);
  if (!v) return pg_fail(c, "claim: out of memory");
  size_t len = 0;
  int rc = hookd_claim_passes(c, req, claim_kind, v, &len);
  if (!rc) rc = claim_details(c, v, len);
  if (!rc && next_due(c, req, next_due_ms) != 0) rc = pg_fail(c, "claim details");
  if (rc) {
    for (size_t i = 0; i < len; i++) hookd_claimed_free(&v[i]);
    free(v);
    return rc;
  }
  qsort(v, len, sizeof *v, cmp_claimed);
  *out = v;
  *n = len;
  return HOOKD_STORE_OK;
}

/* The delivery's endpoint was deleted: a never-sent delivery given back is cancelled then, as the
 * delete would have done (pending, it would wait for ever). */
#define RELEASE_GONE                                                                            \
  "EXISTS (SELECT 1 FROM endpoints e WHERE e.id = deliveries.endpoint_id"                       \
  " AND e.deleted_at IS NOT NULL)"

/* The outcome's new state, shared by the fenced update and the one on a held delivery:
 * $1 to, $2 attempt number, $3 next_attempt_at, $4 last_error, $5 status, $6 now,
 * $7 dead_reason, $8 result_ref, $9 ambiguous, $10 seq, $11 lease token (bind_outcome); the
 * WHERE clauses append theirs from $12. The larger attempt count: an attempt appended late
 * during this lease (late_outcome) took the number after this one's. */
#define OUTCOME_SET                                                                             \
  "UPDATE deliveries SET state = $1::text,"                                                     \
  " attempt_count = CASE WHEN $2::bigint > 0 THEN GREATEST(attempt_count, $2::bigint)"        \
  " ELSE attempt_count END,"                                                                    \
  " next_attempt_at = $3::bigint, last_error = $4::text,"                                       \
  " last_status = CASE WHEN $2::bigint > 0 THEN $5::bigint ELSE last_status END,"               \
  " lease_owner = NULL, leased_until = NULL, updated_at = $6::bigint,"                          \
  " delivered_at = CASE WHEN $1::text = 'delivered' THEN $6::bigint ELSE delivered_at END,"     \
  " dead_at = CASE WHEN $1::text = 'dead' THEN $6::bigint ELSE dead_at END,"                    \
  " dead_reason = CASE WHEN $1::text = 'dead' THEN $7::text ELSE dead_reason END,"              \
  " result_ref = COALESCE($8::text, result_ref),"                                               \
  " last_ambiguous = CASE WHEN $2::bigint > 0 THEN $9::bigint ELSE last_ambiguous END"

static void bind_outcome(pg_params *p, const hookd_outcome *o) {
  pg_p_init(p);
  pg_p_text(p, hookd_dstate_name(o->to));
  pg_p_i64(p, o->attempt_number);
  if (!hookd_dstate_active(o->to))
    pg_p_text(p, NULL);
  else
    pg_p_i64(p, o->next_attempt_ms);
  pg_p_text(p, o->last_error);
  pg_p_i64n(p, o->attempt.http_status);
  pg_p_i64(p, o->now_ms);
  pg_p_text(p, o->dead_reason);
  pg_p_text(p, o->result_ref);
  pg_p_bool(p, o->ambiguous);
  pg_p_i64(p, o->delivery_seq);
  pg_p_i64(p, o->lease_token);
}

/* The fenced update missed. The outcome still lands where the token was bumped exactly once
 * since its claim, by something that leaves a lease-free delivery no one else may send:
 *  - its endpoint's delete, which cancelled it while the request was in flight;
 *  - the sweep, which held it as unknown (a destination that is not idempotent) when its lease
 *    ran out before this outcome could be written (store locked or failing).
 *  - the delete of an inbound destination that is not idempotent, which held it as unknown
 *    (pg_held_deleted) because the request may have been out.
 *  - the sweep's reclaim of its lapsed lease alone (the state as claimed, no claim since): the
 *    outcome settles it as it would have within its lease.
 * The request went out, so its attempt is history all the same (the caller appends it). The
 * outcome decides the state — but with the endpoint deleted, only a success (what the receiver
 * got) or a hold (an ambiguous end at a destination that is not idempotent: the receiver may
 * have done the work; an operator decides) stands; anything else cancels it, as the delete
 * does: retrying, it would wait for ever. Anything else since (a resolve, a replay, another
 * claim) changed the state or the token: STALE (a row count, not a failing statement) — but
 * with keep_attempt (every request that went out: its outcome is written until it lands, and
 * the delivery may have been claimed and sent again, or resolved by an operator, meanwhile):
 * the delivery and its record stay as they are, and the attempt is appended all the same
 * (docs/architecture.md "Failure windows"), under the next free number (o->superseded) — its own may be a new cycle's
 * first attempt's — past every attempt recorded and past a live lease's (numbered
 * attempt_count + 1 at its claim; OUTCOME_SET keeps the larger count). The running cycle's
 * budget leaves it out (cycle_base moves with it). STALE still when this lease's attempt is
 * recorded (a write that committed after all). */
static int late_outcome(hookd_store_conn *c, hookd_outcome *o) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, o->delivery_seq);
  PGresult *r = pg_q(c,
                     "SELECT (e.deleted_at IS NOT NULL)::int, (d.state = 'unknown')::int,"
                     " (SELECT (v.purged_at IS NOT NULL)::int FROM events v"
                     " WHERE v.seq = d.event_seq) FROM deliveries"
                     " d JOIN endpoints e ON e.id = d.endpoint_id WHERE d.seq = $1",
                     &p, "record outcome");
  if (!r) return HOOKD_STORE_ERR;
  bool found = PQntuples(r) > 0;
  bool gone = found && pg_i64(r, 0, 0);
  o->endpoint_gone = gone; /* its attempt's URL recorded cut (docs/architecture.md "Deletes") */
  bool held = found && pg_i64(r, 0, 1);
  /* its event's payload deleted while the request was out (DELETE …/payload cancelled it): as
   * for a deleted endpoint, only a success stands — nothing is left to send again */
  bool purged = found && pg_i64(r, 0, 2);
  PQclear(r);
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
    late.last_error = pg_held_deleted; /* held still: the operator reads why (the attempt, how) */
  }
  bind_outcome(&p, &late);
  pg_p_text(&p, lease_lost);
  pg_p_text(&p, pg_held_deleted);
  pg_p_text(&p, hookd_dstate_name(o->from));
  /* (the state as claimed: the sweep's reclaim alone, no claim since — the outcome settles it as
   * it would have within its lease; appended only, a 410 was dropped and the delivery sent again
   * to a receiver that had said Gone: a review. Never once an attempt under this lease or a later
   * one is recorded: a claim that took the lapsed lease over and wrote its outcome, an operator's
   * resolve or replay of this one's, bump the token once too and may leave the state this outcome
   * was claimed from — it was overwritten (the attempt's insert does nothing on a conflict): two
   * reviews) */
  int64_t changed = pg_x(c,
                         OUTCOME_SET " WHERE seq = $10 AND lease_token = $11::bigint + 1"
                         " AND lease_owner IS NULL AND (state = 'cancelled' OR (state = 'unknown'"
                         " AND (last_error = $12::text OR last_error = $13::text))"
                         " OR state = $14::text) AND NOT EXISTS (SELECT 1 FROM attempts a"
                         " WHERE a.delivery_seq = $10 AND a.lease_token >= $11::bigint)",
                         &p, "record outcome");
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed != 1 && o->keep_attempt && o->attempt_number > 0) {
    pg_p_init(&p);
    pg_p_i64(&p, o->delivery_seq);
    pg_p_i64(&p, o->lease_token);
    r = pg_q(c,
             "UPDATE deliveries d SET attempt_count = GREATEST(d.attempt_count"
             " + (d.leased_until IS NOT NULL)::int, COALESCE((SELECT max(a.attempt_number)"
             " FROM attempts a WHERE a.delivery_seq = d.seq), 0)) + 1,"
             " cycle_base = d.cycle_base + 1 WHERE d.seq = $1 AND NOT EXISTS (SELECT 1"
             " FROM attempts a WHERE a.delivery_seq = d.seq AND a.lease_token = $2::bigint)"
             " RETURNING d.attempt_count",
             &p, "record outcome");
    if (!r) return HOOKD_STORE_ERR;
    o->superseded = PQntuples(r) > 0 ? (int)pg_i64(r, 0, 0) : 0;
    PQclear(r);
    if (o->superseded) return HOOKD_STORE_OK;
  }
  if (changed != 1) {
    snprintf(c->err, sizeof c->err, "lease token %lld is no longer current",
             (long long)o->lease_token);
    return HOOKD_STORE_STALE;
  }
  o->cancelled = cut && late.to != HOOKD_DS_UNKNOWN; /* "cut off" (held: not) */
  o->was_held = held && late.to == HOOKD_DS_UNKNOWN;
  o->last_error = late.last_error; /* the inbox record follows it (pg_record_outcome) */
  return HOOKD_STORE_OK;
}

/* An answer's word on its endpoint counts while the endpoint is as the request found it: the URL
 * it went to (u: NULL = not checked), and not moved nor enabled again by an operator since it
 * was sent (s: 0 = not checked; health_since, set by the endpoint's update). */
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
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, o->endpoint_id);
  pg_p_text(&p, o->sent_url);
  PGresult *r = pg_q(c,
                     "SELECT (url IS DISTINCT FROM $2::text)::int FROM endpoints WHERE id = $1",
                     &p, "read endpoint");
  if (!r) return HOOKD_STORE_ERR;
  bool moved = PQntuples(r) > 0 && pg_i64(r, 0, 0);
  PQclear(r);
  if (moved) {
    o->to = HOOKD_DS_RETRYING;
    o->next_attempt_ms = o->now_ms;
    o->dead_reason = NULL; /* a disable asked for is declined below (not this URL): the
                            * dispatcher then undoes its own */
  }
  return HOOKD_STORE_OK;
}

/* The attempt row of an outcome (in outcome_attempt_sql: $2 attempt number, $11 lease token, the
 * rest from $13, bind_attempt). */
#define ATTEMPT_COLS                                                                            \
  "INSERT INTO attempts(delivery_seq, attempt_number, started_at, finished_at, outcome,"        \
  " http_status, latency_ms, error, response, lease_token, kind, url)"
#define ATTEMPT_VALUES                                                                          \
  " $2::bigint, $13::bigint, $14::bigint, $15::text, $16::bigint, $17::bigint, $18::text,"     \
  " $19::bytea, $11::bigint, $20::text, $21::text"

/* Appends the attempt's own parameters: $13 on in outcome_attempt_sql, $4 on in attempt_sql. */
static void bind_attempt(pg_params *p, const hookd_outcome *o) {
  const hookd_attempt *a = &o->attempt;
  pg_p_i64(p, a->started_ms);
  pg_p_i64(p, a->finished_ms);
  pg_p_text(p, a->outcome);
  pg_p_i64n(p, a->http_status);
  pg_p_i64(p, a->latency_ms);
  pg_p_text(p, a->error);
  if (a->response_len)
    pg_p_blob(p, a->response,
              a->response_len > HOOKD_EXCERPT_MAX ? HOOKD_EXCERPT_MAX : a->response_len);
  else
    pg_p_text(p, NULL);
  pg_p_text(p, a->trigger ? a->trigger : "live");
  pg_p_text(p, a->url);
}

/* The fenced update, under the lease the attempt was made with ($12 the state it was claimed
 * in), and its attempt's row in the same statement — inserted only when the update found the
 * lease (docs/postgres.md "Round trips"). Its rows: updated, attempts inserted. A second row of
 * the same number is refused by the row count, not by a failing statement (which would abort
 * the batch's whole transaction): the op then fails as SQLite's does. */
static const char outcome_attempt_sql[] =
    "WITH u AS (" OUTCOME_SET " WHERE seq = $10 AND lease_token = $11::bigint"
    " AND state = $12::text RETURNING seq),"
    " a AS (" ATTEMPT_COLS " SELECT u.seq," ATTEMPT_VALUES " FROM u"
    " ON CONFLICT (delivery_seq, attempt_number) DO NOTHING RETURNING 1)"
    " SELECT (SELECT count(*) FROM u), (SELECT count(*) FROM a)";

/* The attempt's row alone, after an outcome that landed late (late_outcome): $1 delivery seq,
 * $2 attempt number, $3 lease token, then bind_attempt's from $4. */
static const char attempt_sql[] =
    ATTEMPT_COLS " VALUES ($1, $2, $4, $5, $6, $7, $8, $9, $10, $3, $11,"
    /* $13: its endpoint deleted while the request was out — its URL cut to its origin
     * (docs/architecture.md "Deletes") */
    " CASE WHEN $13::int = 1 THEN " PG_URL_ORIGIN("$12::text") " ELSE $12::text END)"
    " ON CONFLICT (delivery_seq, attempt_number) DO NOTHING";

int pg_record_outcome(hookd_store_conn *c, hookd_outcome *o) {
  hookd_outcome_run(o);
  int mrc = moved_since_sent(c, o);
  if (mrc) return mrc;
  pg_params p;
  bind_outcome(&p, o);
  pg_p_text(&p, hookd_dstate_name(o->from));
  int64_t changed, inserted = 0;
  if (o->attempt_number > 0) {
    bind_attempt(&p, o);
    PGresult *r = pg_q(c, outcome_attempt_sql, &p, "record outcome");
    if (!r) return HOOKD_STORE_ERR;
    changed = pg_i64(r, 0, 0);
    inserted = pg_i64(r, 0, 1);
    PQclear(r);
    pg_wrote(c, changed + inserted);
  } else {
    changed = pg_x(c, OUTCOME_SET " WHERE seq = $10 AND lease_token = $11::bigint"
                      " AND state = $12::text", &p, "record outcome");
    if (changed < 0) return HOOKD_STORE_ERR;
  }
  o->cancelled = false;
  o->disable_declined = o->disabled_now = o->failing_run_ended = false;
  o->disabled_updated_ms = 0;
  o->was_held = o->endpoint_gone = false;
  o->superseded = 0;
  if (changed != 1) {
    int rc = late_outcome(c, o);
    if (rc) return rc;
  }
  if (o->attempt_number > 0 && changed != 1) { /* the late outcome's attempt */
    pg_params q;
    pg_p_init(&q);
    pg_p_i64(&q, o->delivery_seq);
    pg_p_i64(&q, o->superseded ? o->superseded : o->attempt_number);
    pg_p_i64(&q, o->lease_token);
    bind_attempt(&q, o);
    pg_p_i64(&q, o->endpoint_gone);
    inserted = pg_x(c, attempt_sql, &q, "insert attempt");
    if (inserted < 0) return HOOKD_STORE_ERR;
  }
  if (o->attempt_number > 0 && inserted != 1)
    return pg_fail(c, "insert attempt: that attempt number is recorded already");
  if (o->inbound) { /* (superseded: its attempt count alone, the status and error as they are) */
    int rc = pg_inbox_follow(c, o->delivery_seq, o->now_ms, o->superseded ? NULL : o->last_error,
                             o->superseded ? NULL : o->result_ref);
    if (rc) return rc;
  }
  /* its endpoint is gone, or the delivery moved on: nothing more to follow */
  if (o->cancelled || o->superseded) return HOOKD_STORE_OK;
  if (o->lane && !hookd_dstate_active(o->to)) {
    int rc = pg_lane_advance(c, o->delivery_seq, o->now_ms);
    if (rc) return rc;
  }
  if (o->lane && o->attempt_number > 0) {
    /* the lane was attempted past the DEAD deliveries before this one that went DEAD before
     * the attempt (skipped): they hold it no more for this one and those after it
     * (LANE_MOVED_PAST), whatever retention deletes later — one probe of the lanes' DEAD rows
     * (deliveries_lane_dead) */
    pg_p_init(&p);
    pg_p_i64(&p, o->delivery_seq);
    /* attempted after they went DEAD, or going DEAD itself after them (LANE_MOVED_PAST's two
     * ways; a DEAD that is superseded or expired counts only by its attempt) */
    bool dead_counts = o->to == HOOKD_DS_DEAD && o->dead_reason &&
                       strcmp(o->dead_reason, "superseded") && strcmp(o->dead_reason, "expired");
    pg_p_i64(&p, dead_counts ? o->now_ms : o->attempt.started_ms);
    if (pg_x(c,
             "UPDATE deliveries SET lane_passed_by = $1::bigint WHERE seq IN (SELECT p.seq"
             " FROM deliveries d JOIN deliveries p ON p.endpoint_id = d.endpoint_id"
             " AND p.ordering_key = d.ordering_key AND p.seq < d.seq"
             " WHERE d.seq = $1::bigint AND p.ordering_key IS NOT NULL AND p.state = 'dead'"
             " AND p.dead_reason NOT IN ('superseded','expired')"
             " AND (p.lane_passed_by IS NULL OR p.lane_passed_by > $1::bigint)"
             " AND p.dead_at <= $2::bigint)",
             &p, "lane passed") < 0)
      return HOOKD_STORE_ERR;
  }
  if (o->failing && o->endpoint_id) {
    pg_p_init(&p);
    pg_p_text(&p, o->endpoint_id);
    pg_p_i64(&p, o->failing);
    pg_p_i64(&p, o->now_ms);
    pg_p_text(&p, o->sent_url);
    pg_p_i64(&p, o->sent_ms);
    if (pg_x(c,
             "UPDATE endpoints SET failing_since = CASE WHEN $2::bigint > 0"
             " THEN COALESCE(failing_since, $3::bigint) ELSE NULL END WHERE id = $1"
             HEALTH_CURRENT("$4::text", "$5::bigint"),
             &p, "endpoint health") < 0)
      return HOOKD_STORE_ERR;
  }
  if (o->pause_until_ms && o->endpoint_id) { /* kept for a restart: the dispatcher holds it */
    pg_p_init(&p);
    pg_p_text(&p, o->endpoint_id);
    pg_p_i64(&p, o->pause_until_ms);
    pg_p_text(&p, o->sent_url);
    pg_p_i64(&p, o->sent_ms);
    if (pg_x(c,
             "UPDATE endpoints SET paused_until = GREATEST(COALESCE(paused_until, 0), $2::bigint)"
             " WHERE id = $1 AND deleted_at IS NULL" HEALTH_CURRENT("$3::text", "$4::bigint"),
             &p, "pause endpoint") < 0)
      return HOOKD_STORE_ERR;
  }
  if (o->disable_endpoint && o->endpoint_id) {
    const char *reason = o->disable_reason ? o->disable_reason : "disabled";
    pg_p_init(&p);
    pg_p_text(&p, o->endpoint_id);
    pg_p_text(&p, reason);
    pg_p_i64(&p, o->now_ms);
    pg_p_i64(&p, o->failed_write_ms);
    pg_p_text(&p, o->sent_url);
    pg_p_i64(&p, o->sent_ms);
    pg_p_i64(&p, o->failing_since_ms);
    /* updated_at: its time is the answer's, maybe older — and moved on in any case: unchanged
     * (a PATCH's later time already there), the other nodes were neither notified (the trigger
     * fires on a changed updated_at) nor took the row at their rescan (the same as theirs) */
    PGresult *dr =
        pg_q(c,
             "UPDATE endpoints SET enabled = 0, disabled_reason = $2::text,"
             " disabled_at = $3::bigint,"
             " updated_at = GREATEST(updated_at + 1, $3::bigint)"
             " WHERE id = $1 AND deleted_at IS NULL AND enabled = 1"
             " AND ($4::bigint = 0 OR updated_at <= $4::bigint)"
             HEALTH_CURRENT("$5::text", "$6::bigint")
             /* a failing run's disable: only while the store's run is that old (another node's
              * success since ended it there) */
             " AND ($7::bigint = 0 OR failing_since <= $7::bigint) RETURNING updated_at",
             &p, "disable endpoint");
    if (!dr) return HOOKD_STORE_ERR;
    o->disabled_now = PQntuples(dr) == 1;
    if (o->disabled_now) o->disabled_updated_ms = pg_i64(dr, 0, 0);
    PQclear(dr);
    if (o->disabled_now) { /* audited like an operator's disable (actor system) */
      pg_p_init(&p);
      pg_p_text(&p, o->endpoint_id);
      pg_p_text(&p, reason);
      pg_p_i64(&p, o->now_ms);
      if (pg_x(c,
               "INSERT INTO audit_log(at, actor, action, target, tenant_id, reason, detail)"
               " SELECT $3::bigint, 'system', 'endpoint.disable', id, tenant_id, $2::text,"
               " 'automatic' FROM endpoints WHERE id = $1",
               &p, "audit endpoint disable") < 0)
        return HOOKD_STORE_ERR;
    } else { /* still enabled: a PATCH landed since, or the endpoint moved to another URL */
      pg_p_init(&p);
      pg_p_text(&p, o->endpoint_id);
      pg_p_i64(&p, o->failing_since_ms);
      PGresult *r = pg_q(c,
                         "SELECT CASE WHEN $2::bigint > 0 AND (failing_since IS NULL"
                         " OR failing_since > $2::bigint) THEN 1 ELSE 0 END FROM endpoints"
                         " WHERE id = $1 AND deleted_at IS NULL AND enabled = 1",
                         &p, "read endpoint");
      if (!r) return HOOKD_STORE_ERR;
      o->disable_declined = PQntuples(r) > 0;
      o->failing_run_ended = o->disable_declined && pg_i64(r, 0, 0) != 0;
      PQclear(r);
    }
  }
  return HOOKD_STORE_OK;
}

int pg_release_lease(hookd_store_conn *c, const hookd_release *r) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, r->delivery_seq);
  pg_p_i64(&p, r->lease_token);
  pg_p_i64(&p, r->attempt_number);
  pg_p_bool(&p, r->maybe_sent);
  /* (a late outcome's appended attempt past this claim's number: sqlite_delivery.c) */
  int64_t changed = pg_x(c,
                         "UPDATE deliveries d SET lease_owner = NULL, leased_until = NULL,"
                         /* the release's mark: given back unsent (replay take-back) */
                         " released_token = CASE WHEN $4::bigint = 1 THEN d.released_token"
                         "   ELSE d.lease_token END,"
                         " cycle_base = d.cycle_base + CASE WHEN $3::bigint > 0"
                         " AND $3::bigint <= d.attempt_count AND NOT EXISTS (SELECT 1"
                         " FROM attempts a WHERE a.delivery_seq = d.seq"
                         " AND a.attempt_number = $3::bigint) THEN 1 ELSE 0 END"
                         " WHERE d.seq = $1 AND d.lease_token = $2",
                         &p, "release lease");
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed == 1) return HOOKD_STORE_OK;
  /* The sweep took it back (token + 1) and, the destination not idempotent, held it as
   * unknown: this release, which says it was never sent, could not be written in time (the
   * store was locked or failing past the lease). Or the destination's delete held it, its send
   * mark committed but the request not started. Back as it was claimed (cancelled, its
   * destination deleted) — unless anything else happened to it since (a resolve, another
   * claim). */
  pg_p_init(&p);
  pg_p_i64(&p, r->delivery_seq);
  pg_p_i64(&p, r->lease_token);
  pg_p_text(&p, hookd_dstate_name(r->state));
  pg_p_i64(&p, r->next_attempt_ms ? r->next_attempt_ms : r->now_ms);
  pg_p_text(&p, r->last_error);
  pg_p_i64(&p, r->now_ms);
  pg_p_text(&p, lease_lost);
  pg_p_text(&p, pg_held_deleted);
  changed = pg_x(c,
                 "UPDATE deliveries SET state = CASE WHEN " RELEASE_GONE " THEN 'cancelled'"
                 " ELSE $3::text END, next_attempt_at = CASE WHEN " RELEASE_GONE " THEN NULL"
                 " ELSE $4::bigint END, last_error = CASE WHEN " RELEASE_GONE
                 " THEN 'destination deleted' ELSE $5::text END, updated_at = $6::bigint"
                 " WHERE seq = $1 AND lease_token = $2::bigint + 1 AND state = 'unknown'"
                 " AND lease_owner IS NULL AND (last_error = $7::text OR last_error = $8::text)",
                 &p, "release lease");
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed != 1) return HOOKD_STORE_STALE;
  return r->inbound ? pg_inbox_follow(c, r->delivery_seq, r->now_ms, r->last_error, NULL)
                    : HOOKD_STORE_OK;
}

int pg_mark_sent(hookd_store_conn *c, int64_t delivery_seq, int64_t lease_token) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, delivery_seq);
  pg_p_i64(&p, lease_token);
  int64_t changed = pg_x(c,
                         "UPDATE deliveries SET sent_token = $2::bigint"
                         " WHERE seq = $1 AND lease_token = $2::bigint"
                         " AND leased_until IS NOT NULL",
                         &p, "mark sent");
  if (changed < 0) return HOOKD_STORE_ERR;
  return changed == 1 ? HOOKD_STORE_OK : HOOKD_STORE_STALE;
}

/* A reclaimed delivery to an inbound destination marked idempotent: false, whose request may
 * have been sent by the node that held it: the send mark of the lease reclaimed is there
 * (written before the request, pg_mark_sent; the RETURNING clause sees the token already
 * bumped). Without it the request never started: sent again like any other. (NULL, without a
 * send mark, reads as 0.) */
#define RECLAIM_NO_RESEND                                                                      \
  "(deliveries.sent_token = deliveries.lease_token - 1 AND"                                     \
  " (SELECT (e.idempotent = 0 AND e.source_id IS NOT NULL) FROM endpoints e"                    \
  " WHERE e.id = deliveries.endpoint_id))::int"

/* Such a delivery is not sent again: held as unknown for an operator, like a timeout after the
 * request went out, and its inbox record follows. */
static int reclaim_hold(hookd_store_conn *c, const int64_t *seqs, size_t n, int64_t now_ms,
                        int *held) {
  const char *why = lease_lost;
  *held = 0;
  for (size_t i = 0; i < n; i++) {
    pg_params p;
    pg_p_init(&p);
    pg_p_i64(&p, seqs[i]);
    pg_p_i64(&p, now_ms);
    pg_p_text(&p, why);
    int64_t changed = pg_x(c,
                           "UPDATE deliveries SET state = 'unknown', next_attempt_at = NULL,"
                           " last_error = $3::text, updated_at = $2::bigint"
                           " WHERE seq = $1 AND (state = 'pending' OR state = 'retrying')",
                           &p, "hold reclaimed delivery");
    if (changed < 0) return HOOKD_STORE_ERR;
    *held += (int)changed;
    int rc = pg_inbox_follow(c, seqs[i], now_ms, why, NULL);
    if (rc) return rc;
  }
  return HOOKD_STORE_OK;
}

int pg_lease_shift(hookd_store_conn *c, const char *owner, int64_t delta_ms, int *shifted) {
  /* (on the partial index of leased rows: the leases held, not the deliveries) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, owner);
  pg_p_i64(&p, delta_ms);
  int64_t changed = pg_x(c,
                         "UPDATE deliveries SET leased_until = leased_until + $2::bigint"
                         " WHERE leased_until IS NOT NULL AND lease_owner = $1",
                         &p, "move leases");
  if (changed < 0) return HOOKD_STORE_ERR;
  *shifted = (int)changed;
  return HOOKD_STORE_OK;
}

int pg_reclaim_leases(hookd_store_conn *c, const char *owner, int64_t now_ms, int limit,
                      hookd_due_hint **hints, size_t *n, int *reclaimed, int *held) {
  pg_params p;
  pg_p_init(&p);
  PGresult *r;
  if (owner) {
    pg_p_text(&p, owner);
    pg_p_i64(&p, limit);
    r = pg_q(c,
             "UPDATE deliveries SET lease_owner = NULL, leased_until = NULL,"
             " lease_token = lease_token + 1 WHERE seq IN (SELECT seq FROM deliveries"
             " WHERE leased_until IS NOT NULL AND lease_owner = $1 LIMIT $2)"
             " RETURNING endpoint_id, next_attempt_at, state, seq, " RECLAIM_NO_RESEND,
             &p, "reclaim leases");
  } else {
    pg_p_i64(&p, now_ms);
    pg_p_i64(&p, limit);
    r = pg_q(c,
             "UPDATE deliveries SET lease_owner = NULL, leased_until = NULL,"
             " lease_token = lease_token + 1 WHERE seq IN (SELECT seq FROM deliveries"
             " WHERE leased_until IS NOT NULL AND leased_until <= $1 LIMIT $2)"
             " RETURNING endpoint_id, next_attempt_at, state, seq, " RECLAIM_NO_RESEND,
             &p, "reclaim leases");
  }
  if (!r) return HOOKD_STORE_ERR;
  hookd_due_hint *v = NULL;
  size_t len = 0, cap = 0, n_hold = 0, cap_hold = 0;
  int64_t *hold = NULL;
  int rows = PQntuples(r), i;
  for (i = 0; i < rows; i++) {
    const char *state = pg_val(r, i, 2);
    if (!state || (strcmp(state, "pending") != 0 && strcmp(state, "retrying") != 0)) continue;
    if (pg_i64(r, i, 4)) { /* not sent again: held (below) */
      if (hookd_seq_push(&hold, &n_hold, &cap_hold, pg_i64(r, i, 3)) != 0) break;
      continue;
    }
    if (hookd_hint_add(&v, &len, &cap, PQgetvalue(r, i, 0), pg_i64(r, i, 1)) != 0) break;
  }
  PQclear(r);
  if (i < rows) { /* out of memory */
    hookd_due_hints_free(v, len);
    free(hold);
    return pg_fail(c, "reclaim leases: out of memory");
  }
  int rc = reclaim_hold(c, hold, n_hold, now_ms, held);
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

/* A lane's open deliveries (pending, retrying, held unknown) of endpoint $1: the terms of the
 * deliveries_lane_open index, so every lane lookup below is a probe of it. */
#define LANE_OPEN_ROWS                                                                          \
  " FROM deliveries WHERE endpoint_id = $1 AND ordering_key IS NOT NULL"                        \
  " AND state IN ('pending','retrying','unknown')"

/* The lanes of ordered endpoint $1 after key $2 (in key order), $3 at most: each lane's key and
 * first open delivery, with its hint and the hint it is to have at $4 (PG_LANE_HELD). The keys
 * are walked one index probe each (a skip-scan), so the cost follows the number of lanes, not
 * their backlog. */
#define LANES_WALK_SQL                                                                          \
  "WITH RECURSIVE l(k, n) AS (SELECT (SELECT MIN(ordering_key)" LANE_OPEN_ROWS                  \
  " AND ordering_key > $2::text), 1"                                                            \
  " UNION ALL SELECT (SELECT MIN(ordering_key)" LANE_OPEN_ROWS " AND ordering_key > l.k), n + 1" \
  " FROM l WHERE l.k IS NOT NULL AND n < $3::int),"                                             \
  " h(k, s) AS (SELECT k, (SELECT seq" LANE_OPEN_ROWS " AND ordering_key = l.k ORDER BY seq"     \
  " LIMIT 1) FROM l WHERE l.k IS NOT NULL)"                                                     \
  " SELECT h.k, h.s, d.lane_wait, CASE WHEN " PG_LANE_HELD("$4::bigint") " THEN 1 ELSE 0 END"   \
  " FROM h JOIN deliveries d ON d.seq = h.s ORDER BY h.k"

/* Lanes one rescan's repair walks at most, going on from where the last one stopped
 * (docs/isolation.md "Ordering lanes"); LANE_KEY_END: a cursor past every ordering key (1-256 of
 * [A-Za-z0-9_.:-], all below DEL): the endpoint done. */
#define LANE_REPAIR_STEP 4096
#define LANE_KEY_END "\x7f"

/* How many waiting rows of endpoints that are no longer ordered one rescan lets in; and how
 * many lanes of an endpoint that no longer blocks its PATCH walks. */
#define UNORDER_STEP 50000

/* One endpoint's lanes after key cursor `key` (sizeof c->lane_key), `budget` at most: each
 * head's hint is set to what it is to be at now_ms — let in, or hinted out behind a DEAD head
 * that holds its lane. The cursor moves to the last lane seen, or past every key when the
 * endpoint is done. *walked: the lanes seen. */
static int lanes_walk(hookd_store_conn *c, const char *endpoint_id, char *key, int budget,
                      int64_t now_ms, int *walked) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, key);
  pg_p_i64(&p, budget);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c, LANES_WALK_SQL, &p, "walk lanes");
  if (!r) return HOOKD_STORE_ERR;
  int n = PQntuples(r), flips[2] = {0, 0};
  pg_arr to[2]; /* the heads to let in, to hint out: one statement each */
  pg_arr_init(&to[0]);
  pg_arr_init(&to[1]);
  for (int i = 0; i < n; i++) {
    int64_t want = pg_i64(r, i, 3) ? 1 : 0;
    if (pg_i64(r, i, 2) == want) continue;
    pg_arr_i64(&to[want], pg_i64(r, i, 1));
    flips[want]++;
  }
  if (n) pg_copy(r, n - 1, 0, key, sizeof c->lane_key);
  if (n < budget) snprintf(key, sizeof c->lane_key, "%s", LANE_KEY_END);
  PQclear(r);
  int rc = HOOKD_STORE_OK;
  for (int want = 0; want < 2 && !rc; want++) {
    if (!flips[want]) continue;
    const char *lit = pg_arr_done(&to[want]);
    if (!lit) {
      rc = pg_fail(c, "walk lanes: out of memory");
      break;
    }
    pg_p_init(&p);
    pg_p_text(&p, lit);
    pg_p_i64(&p, want);
    if (pg_x(c, "UPDATE deliveries SET lane_wait = $2 WHERE seq = ANY($1::bigint[])", &p,
             "repair lanes") < 0)
      rc = HOOKD_STORE_ERR;
  }
  pg_arr_free(&to[0]);
  pg_arr_free(&to[1]);
  *walked = n;
  return rc;
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
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, c->lane_ep);
  PGresult *eps = pg_q(c,
                       "SELECT id FROM endpoints WHERE ordered = 1 AND deleted_at IS NULL"
                       " AND id >= $1::text ORDER BY id",
                       &p, "list ordered endpoints");
  if (!eps) return HOOKD_STORE_ERR;
  int budget = LANE_REPAIR_STEP, i = 0, rows = PQntuples(eps);
  for (; budget > 0 && i < rows; i++) {
    const char *id = PQgetvalue(eps, i, 0);
    if (strcmp(id, c->lane_ep) != 0) { /* the next endpoint (or the cursor's was deleted) */
      snprintf(c->lane_ep, sizeof c->lane_ep, "%s", id);
      c->lane_key[0] = '\0';
    }
    int walked = 0;
    if (lanes_walk(c, id, c->lane_key, budget, now_ms, &walked) != 0) {
      PQclear(eps);
      return HOOKD_STORE_ERR;
    }
    budget -= walked > 0 ? walked : 1;
  }
  if (i == rows && budget > 0) c->lane_ep[0] = c->lane_key[0] = '\0'; /* past the last: the first */
  PQclear(eps);
  pg_p_init(&p);
  pg_p_i64(&p, UNORDER_STEP);
  return pg_x(c,
              "UPDATE deliveries SET lane_wait = 0 WHERE seq IN (SELECT seq FROM deliveries"
              " WHERE lane_wait = 1 AND endpoint_id IN (SELECT id FROM endpoints"
              " WHERE ordered = 0) LIMIT $1)",
              &p, "unorder lanes") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

int pg_lane_unblock(hookd_store_conn *c, const char *endpoint_id, int64_t now_ms) {
  char key[sizeof c->lane_key] = "";
  int walked = 0;
  return lanes_walk(c, endpoint_id, key, UNORDER_STEP, now_ms, &walked);
}

int pg_lane_unorder(hookd_store_conn *c, const char *endpoint_id) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_i64(&p, UNORDER_STEP);
  return pg_x(c,
              "UPDATE deliveries SET lane_wait = 0 WHERE seq IN (SELECT seq FROM"
              " deliveries WHERE endpoint_id = $1 AND lane_wait = 1 LIMIT $2)",
              &p, "unorder lanes") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* "nothing due" in due_hints (SQLite's 9e18, as a bigint here) */
#define NONE_DUE 9000000000000000000LL

/* The rows of r (endpoint id, time) as hints, but those of NONE_DUE (takes r; NULL, a failed
 * statement, is HOOKD_STORE_ERR with c->err as pg_q left it). */
static int read_hints(hookd_store_conn *c, PGresult *r, hookd_due_hint **out, size_t *n,
                      const char *what) {
  *out = NULL;
  *n = 0;
  if (!r) return HOOKD_STORE_ERR;
  size_t cap = 0;
  for (int i = 0; i < PQntuples(r); i++) {
    int64_t at = pg_i64(r, i, 1);
    if (at >= NONE_DUE) continue; /* nothing due */
    if (hookd_hint_push(out, n, &cap, PQgetvalue(r, i, 0), at) != 0) {
      PQclear(r);
      hookd_due_hints_free(*out, *n);
      *out = NULL;
      *n = 0;
      return pg_fail(c, what);
    }
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

int pg_endpoint_pauses(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c,
                     "SELECT id, paused_until FROM endpoints WHERE paused_until > $1::bigint"
                     " AND deleted_at IS NULL",
                     &p, "endpoint pauses");
  return read_hints(c, r, out, n, "endpoint pauses: out of memory");
}

int pg_due_hints(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n) {
  int rc = lanes_repair(c, now_ms);
  if (rc) return rc;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(
      c,
      "SELECT e.id, LEAST(COALESCE((SELECT d.next_attempt_at FROM deliveries d"
      " WHERE d.endpoint_id = e.id AND d.cycle_kind = 'live' AND d.state IN ('pending','retrying')"
      " AND d.lane_wait = 0"
      " AND (d.leased_until IS NULL OR d.leased_until <= $1::bigint)"
      " ORDER BY d.next_attempt_at LIMIT 1), 9000000000000000000::bigint),"
      " COALESCE((SELECT d.next_attempt_at FROM deliveries d"
      " WHERE d.endpoint_id = e.id AND d.cycle_kind = 'replay' AND d.lane_wait = 0"
      " AND d.state IN ('pending','retrying')"
      " AND (d.leased_until IS NULL OR d.leased_until <= $1::bigint)"
      " ORDER BY d.next_attempt_at LIMIT 1), 9000000000000000000::bigint)) FROM endpoints e"
      " WHERE e.deleted_at IS NULL AND e.enabled = 1",
      &p, "due hints");
  return read_hints(c, r, out, n, "due hints: out of memory");
}

int pg_config_stamps(hookd_store_conn *c, int64_t *keys, int64_t *sources) {
  *keys = *sources = 0;
  PGresult *r = pg_q(c,
                     "SELECT (SELECT n FROM config_stamps WHERE what = 'api_keys'),"
                     " (SELECT n FROM config_stamps WHERE what = 'sources')",
                     NULL, "read the change stamps");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 1) {
    *keys = pg_i64(r, 0, 0);
    *sources = pg_i64(r, 0, 1);
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

int pg_backlog_count(hookd_store_conn *c, int64_t cap, int64_t *n) {
  *n = 0;
  /* each from its partial index: the open rows not waiting behind a lane's head, then those
   * waiting */
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, cap);
  PGresult *r = pg_q(c,
                     "SELECT (SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE state IN"
                     " ('pending','retrying') AND lane_wait = 0 LIMIT $1::bigint) a) + (SELECT"
                     " count(*) FROM (SELECT 1 FROM deliveries WHERE lane_wait = 1 AND state IN"
                     " ('pending','retrying') LIMIT $1::bigint) b)",
                     &p, "count the backlog");
  if (!r) return HOOKD_STORE_ERR;
  *n = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  if (*n > cap) *n = cap;
  return HOOKD_STORE_OK;
}

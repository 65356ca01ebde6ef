/* pg_replay.c — PostgreSQL backend: replay jobs (O12, docs/replay.md).
 *
 * The snapshot of a filter's deliveries (read on the scan executor's connection: a long scan
 * holds up neither the writer nor the API's reads), the job row and its items (writer), the
 * job's state machine, the retention of ended jobs' items, and the
 * step the replayer runs: each running job's due items, at its rate, go back to pending through
 * the single replay's own checks and write (pg_replay_one). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/payload_filter.h"
#include "store/postgres/pg_int.h"

#define JOB_COLS                                                                                \
  "seq, id, tenant_id, state, filter, actor, reason, rate_per_s, total, replayed, skipped,"     \
  " created_at, confirmed_at, updated_at, finished_at, next_item_at, items_purged_at,"         \
  " held_endpoint, held_since"

/* A preview older than its time to live reads as expired (the row is not rewritten). */
static bool preview_expired(const char *state, int64_t created_ms, int64_t now_ms) {
  return state && !strcmp(state, "preview") && created_ms + HOOKD_REPLAY_PREVIEW_TTL_MS <= now_ms;
}

/* A job building no chunk for HOOKD_REPLAY_BUILD_STALE_MS reads as failed: the daemon storing
 * it died (one whose request failed is marked failed by replay_abandon). */
static bool build_abandoned(const char *state, int64_t updated_ms, int64_t now_ms) {
  return state && !strcmp(state, "building") && updated_ms + HOOKD_REPLAY_BUILD_STALE_MS <= now_ms;
}

static void rd_job(const PGresult *r, int row, void *rec) {
  hookd_replay_job *j = rec;
  memset(j, 0, sizeof *j);
  j->seq = pg_i64(r, row, 0);
  j->id = pg_str(r, row, 1);
  j->tenant_id = pg_str(r, row, 2);
  j->state = pg_str(r, row, 3);
  j->filter = pg_str(r, row, 4);
  j->actor = pg_str(r, row, 5);
  j->reason = pg_str(r, row, 6);
  j->rate_per_s = pg_f64(r, row, 7);
  j->total = pg_i64(r, row, 8);
  j->replayed = pg_i64(r, row, 9);
  j->skipped = pg_i64(r, row, 10);
  j->created_ms = pg_i64(r, row, 11);
  j->confirmed_ms = pg_i64(r, row, 12);
  j->updated_ms = pg_i64(r, row, 13);
  j->finished_ms = pg_i64(r, row, 14);
  j->next_item_ms = pg_i64(r, row, 15);
  j->items_purged_ms = pg_i64(r, row, 16);
  j->held_endpoint = pg_str(r, row, 17);
  j->held_since_ms = pg_i64(r, row, 18);
  int64_t now = hookd_now_ms();
  if (preview_expired(j->state, j->created_ms, now) ||
      build_abandoned(j->state, j->updated_ms, now)) {
    bool expired = !strcmp(j->state, "preview");
    free(j->state);
    j->state = strdup(expired ? "expired" : "failed");
  }
}

static int read_job(hookd_store_conn *c, const char *tenant_id, const char *id,
                    hookd_replay_job *out) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c, "SELECT " JOB_COLS " FROM replay_jobs WHERE id = $1 AND tenant_id = $2",
                     &p, "read replay job");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  rd_job(r, 0, out);
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* ---------- the snapshot ---------- */

/* One statement for every filter: each optional part is a NULL test, so it is prepared once;
 * the time range is always bound (an open end as the widest value) so that it stays a range
 * the index can seek. The DEAD queue has its own index (deliveries_dead, in creation order: the
 * snapshot stops at its limit without sorting); other states walk the tenant's deliveries —
 * on the scan connection, never the writer's or the API reader's (store.h). */
#define SELECT_WHERE                                                                            \
  " FROM deliveries d JOIN events e ON e.seq = d.event_seq"                                     \
  " WHERE d.tenant_id = $1 AND d.state = $2"                                                    \
  " AND ($3::text IS NULL OR d.endpoint_id = $3)"                                               \
  " AND ($4::text IS NULL OR e.type = $4)"                                                      \
  " AND ($5::text IS NULL OR length(e.type) > length($5::text)"                                 \
  " AND substr(e.type, 1, length($5::text)) = $5)"                                              \
  " AND d.created_at >= $6::bigint AND d.created_at < $7::bigint"

/* $1 … $7 of SELECT_WHERE; -1 out of memory. */
static int bind_filter(pg_params *p, const char *tenant_id, const hookd_replay_filter *f,
                       char **own) {
  pg_p_init(p);
  pg_p_text(p, tenant_id);
  pg_p_text(p, hookd_dstate_name(f->state));
  pg_p_text(p, f->endpoint_id);
  if (pg_bind_type_filter(p, f->event_type, own) != 0) return -1;
  pg_p_i64(p, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  pg_p_i64(p, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  return 0;
}

/* Appends seq to the snapshot; -1 out of memory (said in c's error). */
static int snap_push(hookd_store_conn *c, hookd_replay_snapshot *out, size_t *cap, int64_t seq) {
  if (hookd_seq_push(&out->seqs, &out->n, cap, seq) == 0) return 0;
  snprintf(c->err, sizeof c->err, "out of memory");
  return -1;
}

/* The rows of select_missing are read through a cursor, MISSING_FETCH at a time: the scan may
 * walk many events (with their bodies, for an endpoint with a payload filter), which a single
 * result would hold in memory at once (SQLite steps through them). The read transaction
 * (REPEATABLE READ) holds the cursor; it is closed on every path that leaves the transaction
 * usable, so that another op of the same batch may declare it again. */
#define MISSING_FETCH 1000
#define MISSING_FETCH_SQL "FETCH 1000 FROM hookd_replay_missing" /* (MISSING_FETCH rows) */

/* filter.state "missing": the tenant's outbound events in the filter that the endpoint takes
 * (its event_types) and has no delivery of, oldest first — each still sendable (payload kept,
 * not expired). */
static int select_missing(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                          const hookd_endpoint *ep, int64_t max_items,
                          hookd_replay_snapshot *out) {
  pg_params p;
  char *prefix;
  pg_p_init(&p);
  pg_p_text(&p, tenant_id);
  pg_p_text(&p, f->endpoint_id);
  if (pg_bind_type_filter(&p, f->event_type, &prefix) != 0)
    return pg_fail(c, "select events: out of memory");
  pg_p_i64(&p, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  pg_p_i64(&p, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  pg_p_i64(&p, hookd_now_ms());
  pg_p_bool(&p, ep->payload_filter != NULL);
  PGresult *r = pg_q(c,
                     "DECLARE hookd_replay_missing NO SCROLL CURSOR FOR"
                     /* the envelope only for an endpoint with a payload filter */
                     " SELECT e.seq, e.type, e.channels, CASE WHEN $8::bigint = 1 THEN e.body END"
                     " FROM events e"
                     " WHERE e.tenant_id = $1 AND e.kind = 'outbound'"
                     " AND e.purged_at IS NULL AND e.test_endpoint IS NULL"
                     " AND (e.expires_at IS NULL"
                     " OR e.expires_at > $7::bigint)"
                     " AND ($3::text IS NULL OR e.type = $3)"
                     " AND ($4::text IS NULL OR length(e.type) > length($4::text)"
                     " AND substr(e.type, 1, length($4::text)) = $4)"
                     " AND e.created_at >= $5::bigint AND e.created_at < $6::bigint"
                     " AND NOT EXISTS (SELECT 1 FROM deliveries d"
                     " WHERE d.event_seq = e.seq AND d.endpoint_id = $2)"
                     " ORDER BY e.seq",
                     &p, "select events");
  free(prefix);
  if (!r) return HOOKD_STORE_ERR;
  PQclear(r);
  size_t cap = 0;
  int rc = HOOKD_STORE_OK;
  for (;;) {
    r = pg_q(c, MISSING_FETCH_SQL, NULL, "select events");
    if (!r) return HOOKD_STORE_ERR; /* the transaction is lost: the cursor with it */
    int rows = PQntuples(r);
    for (int i = 0; i < rows && rc == HOOKD_STORE_OK; i++) {
      const char *type = pg_val(r, i, 1);
      if (!type || !hookd_filter_match(ep->event_types, type) || /* not the endpoint's */
          !hookd_channels_match(ep->channels, pg_val(r, i, 2)))
        continue;
      if (ep->payload_filter) {
        size_t len = 0;
        unsigned char *body = pg_blob(r, i, 3, &len);
        if (!body && !pg_null(r, i, 3)) {
          snprintf(c->err, sizeof c->err, "select events: out of memory");
          rc = HOOKD_STORE_ERR;
          break;
        }
        json_t *parsed = NULL;
        int takes = hookd_pfilter_match_envelope(&c->pf, ep->payload_filter, (const char *)body,
                                                 len, &parsed, NULL);
        json_decref(parsed);
        free(body);
        if (takes == HOOKD_PFILTER_OVER) out->filters_over++;
        if (takes != HOOKD_PFILTER_YES) continue;
      }
      out->count++;
      if (out->n <= (size_t)max_items && snap_push(c, out, &cap, pg_i64(r, i, 0)) != 0)
        rc = HOOKD_STORE_ERR;
      if (out->count > HOOKD_REPLAY_COUNT_UPTO(max_items)) break; /* counted far enough */
    }
    PQclear(r);
    if (rc || rows < MISSING_FETCH || out->count > HOOKD_REPLAY_COUNT_UPTO(max_items)) break;
  }
  if (pg_exec(c, "CLOSE hookd_replay_missing", "select events") != 0) return HOOKD_STORE_ERR;
  if (rc) return rc;
  if (out->count <= max_items) return HOOKD_STORE_OK;
  return hookd_replay_over(c->err, sizeof c->err, out->count, max_items, "events",
                           "time range, event type");
}

int pg_replay_select(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                     int64_t max_items, hookd_replay_snapshot *out) {
  memset(out, 0, sizeof *out);
  if (f->missing) {
    hookd_endpoint ep;
    int rc = f->endpoint_id ? pg_endpoint_get(c, f->endpoint_id, &ep) : HOOKD_STORE_NOTFOUND;
    if (rc == HOOKD_STORE_OK && strcmp(ep.tenant_id, tenant_id) != 0) {
      hookd_endpoint_free(&ep);
      rc = HOOKD_STORE_NOTFOUND;
    }
    if (rc == HOOKD_STORE_NOTFOUND)
      snprintf(c->err, sizeof c->err, "filter.endpoint: no endpoint %.128s in this tenant",
               f->endpoint_id ? f->endpoint_id : "");
    if (rc) return rc;
    if (ep.source_id) {
      hookd_endpoint_free(&ep);
      snprintf(c->err, sizeof c->err, "filter.endpoint: a source's destination gets its "
                                      "source's events (POST /v1/inbox/{id}/replay)");
      return HOOKD_STORE_NOTFOUND; /* (422, as another tenant's endpoint) */
    }
    out->filter_state = strdup("missing");
    out->endpoint_id = strdup(f->endpoint_id);
    rc = out->filter_state && out->endpoint_id
             ? select_missing(c, tenant_id, f, &ep, max_items, out)
             : HOOKD_STORE_ERR;
    hookd_endpoint_free(&ep);
    if (rc) {
      int64_t count = out->count;
      hookd_replay_snapshot_free(out);
      out->count = count;
    }
    return rc;
  }
  if (f->endpoint_id) {
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, f->endpoint_id);
    pg_p_text(&p, tenant_id);
    PGresult *r = pg_q(c,
                       "SELECT 1 FROM endpoints WHERE id = $1 AND tenant_id = $2"
                       " AND deleted_at IS NULL",
                       &p, "check endpoint");
    if (!r) return HOOKD_STORE_ERR;
    int rows = PQntuples(r);
    PQclear(r);
    if (rows == 0) {
      snprintf(c->err, sizeof c->err, "filter.endpoint: no endpoint %.128s in this tenant",
               f->endpoint_id);
      return HOOKD_STORE_NOTFOUND;
    }
  }
  out->filter_state = strdup(hookd_dstate_name(f->state));
  if (!out->filter_state) return HOOKD_STORE_ERR;
  pg_params p;
  char *prefix;
  if (bind_filter(&p, tenant_id, f, &prefix) != 0) {
    hookd_replay_snapshot_free(out);
    return pg_fail(c, "select deliveries: out of memory");
  }
  pg_p_i64(&p, max_items + 1);
  PGresult *r = pg_q(c, "SELECT d.seq" SELECT_WHERE " ORDER BY d.created_at, d.seq LIMIT $8",
                     &p, "select deliveries");
  free(prefix);
  if (!r) {
    hookd_replay_snapshot_free(out);
    return HOOKD_STORE_ERR;
  }
  int rows = PQntuples(r);
  if (rows > 0 && !(out->seqs = malloc((size_t)rows * sizeof *out->seqs))) {
    PQclear(r);
    hookd_replay_snapshot_free(out);
    snprintf(c->err, sizeof c->err, "out of memory");
    return HOOKD_STORE_ERR;
  }
  for (int i = 0; i < rows; i++) out->seqs[out->n++] = pg_i64(r, i, 0);
  PQclear(r);
  out->count = (int64_t)out->n;
  if (out->count <= max_items) return HOOKD_STORE_OK;
  /* over the limit: say how many (up to a bound), so the operator knows how far to narrow */
  if (bind_filter(&p, tenant_id, f, &prefix) != 0)
    return pg_fail(c, "count deliveries: out of memory");
  pg_p_i64(&p, HOOKD_REPLAY_COUNT_UPTO(max_items) + 1);
  r = pg_q(c, "SELECT COUNT(*) FROM (SELECT 1" SELECT_WHERE " LIMIT $8) x", &p,
           "count deliveries");
  free(prefix);
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 1) out->count = pg_i64(r, 0, 0);
  PQclear(r);
  return hookd_replay_over(c->err, sizeof c->err, out->count, max_items, "deliveries",
                           "time range, endpoint, event type");
}

/* The job row, state `building`, once the tenant's cap allows it. */
static int create_job_row(hookd_store_conn *c, hookd_replay_job *job,
                          const hookd_replay_snapshot *snap, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, job->tenant_id);
  pg_p_i64(&p, now_ms - HOOKD_REPLAY_PREVIEW_TTL_MS);
  pg_p_i64(&p, now_ms - HOOKD_REPLAY_BUILD_STALE_MS);
  PGresult *r = pg_q(c,
                     "SELECT COUNT(*) FROM replay_jobs WHERE tenant_id = $1 AND"
                     " (state = 'running' OR state = 'paused' OR"
                     " (state = 'preview' AND created_at > $2::bigint) OR"
                     " (state = 'building' AND updated_at > $3::bigint))",
                     &p, "count active replay jobs");
  if (!r) return HOOKD_STORE_ERR;
  int64_t active = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  if (active >= HOOKD_REPLAY_ACTIVE_MAX) {
    snprintf(c->err, sizeof c->err,
             "the tenant has %d replay jobs building, in preview, running or paused: cancel or "
             "finish one first",
             HOOKD_REPLAY_ACTIVE_MAX);
    return HOOKD_STORE_CONFLICT;
  }
  /* a taken id is an answer, not a failing statement (it would abort the transaction) */
  pg_p_init(&p);
  pg_p_text(&p, job->id);
  pg_p_text(&p, job->tenant_id);
  pg_p_text(&p, job->filter);
  pg_p_text(&p, snap->filter_state);
  pg_p_text(&p, job->actor);
  pg_p_text(&p, job->reason);
  pg_p_f64(&p, job->rate_per_s);
  pg_p_i64(&p, now_ms);
  pg_p_text(&p, snap->endpoint_id);
  r = pg_q(c,
           "INSERT INTO replay_jobs(id, tenant_id, state, filter, filter_state, actor, reason,"
           " rate_per_s, total, created_at, updated_at, filter_endpoint)"
           " VALUES ($1, $2, 'building', $3, $4, $5, $6, $7::double precision, 0, $8::bigint,"
           " $8::bigint, $9) ON CONFLICT DO NOTHING RETURNING seq",
           &p, "insert replay job");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return HOOKD_STORE_EXISTS;
  }
  job->seq = pg_i64(r, 0, 0);
  PQclear(r);
  job->total = 0;
  job->created_ms = job->updated_ms = now_ms;
  return HOOKD_STORE_OK;
}

int pg_replay_create(hookd_store_conn *c, hookd_replay_job *job, const hookd_replay_snapshot *snap,
                     size_t *from, size_t chunk, int64_t now_ms) {
  int rc;
  pg_params p;
  if (*from == 0 && (rc = create_job_row(c, job, snap, now_ms)) != 0) return rc;
  if (*from > 0) { /* still being built, by this request: nothing else moves a building job */
    pg_p_init(&p);
    pg_p_i64(&p, job->seq);
    pg_p_i64(&p, now_ms - HOOKD_REPLAY_BUILD_STALE_MS);
    int64_t found = pg_x(c,
                         "SELECT 1 FROM replay_jobs WHERE seq = $1 AND state = 'building'"
                         " AND updated_at > $2::bigint",
                         &p, "read replay job");
    if (found < 0) return HOOKD_STORE_ERR;
    if (found == 0) {
      snprintf(c->err, sizeof c->err, "the replay job is no longer being built");
      return HOOKD_STORE_STATE;
    }
  }
  /* each with its id, attempt count and lease token as of now, if it is still in the filter's
   * state (the snapshot was read a moment ago on another connection). One statement per chunk:
   * the chunk's seqs as an array, numbered in the snapshot's order among those still in it
   * (row_number over the array's ordinality, after the filter), as the SQLite backend's insert
   * per seq numbers them one by one. */
  bool missing = snap->endpoint_id != NULL; /* items name events the endpoint still lacks */
  int64_t n = job->total;
  size_t end = snap->n - *from > chunk ? *from + chunk : snap->n;
  if (end > *from) {
    pg_arr seqs;
    pg_arr_init(&seqs);
    for (size_t i = *from; i < end; i++) pg_arr_i64(&seqs, snap->seqs[i]);
    const char *arr = pg_arr_done(&seqs);
    if (!arr) {
      pg_arr_free(&seqs);
      return pg_fail(c, "insert replay item: out of memory");
    }
    pg_p_init(&p);
    pg_p_i64(&p, job->seq);
    pg_p_i64(&p, n);
    pg_p_text(&p, arr);
    pg_p_text(&p, job->tenant_id);
    pg_p_text(&p, snap->filter_state);
    if (missing) pg_p_text(&p, snap->endpoint_id);
    int64_t made =
        missing ? pg_x(c,
                       "INSERT INTO replay_items(job_seq, n, delivery_seq, delivery_id,"
                       " attempts, lease_token)"
                       " SELECT $1::bigint, $2::bigint + row_number() OVER (ORDER BY s.ord),"
                       " e.seq, e.id, 0, 0"
                       " FROM unnest($3::bigint[]) WITH ORDINALITY AS s(seq, ord)"
                       " JOIN events e ON e.seq = s.seq"
                       " WHERE e.tenant_id = $4 AND $5::text = 'missing'"
                       " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq"
                       " AND d.endpoint_id = $6)",
                       &p, "insert replay item")
                : pg_x(c,
                       "INSERT INTO replay_items(job_seq, n, delivery_seq, delivery_id,"
                       " attempts, lease_token)"
                       " SELECT $1::bigint, $2::bigint + row_number() OVER (ORDER BY s.ord),"
                       " d.seq, d.id, d.attempt_count, d.lease_token"
                       " FROM unnest($3::bigint[]) WITH ORDINALITY AS s(seq, ord)"
                       " JOIN deliveries d ON d.seq = s.seq"
                       " WHERE d.tenant_id = $4 AND d.state = $5",
                       &p, "insert replay item");
    pg_arr_free(&seqs);
    if (made < 0) return HOOKD_STORE_ERR;
    n += made;
  }
  /* the last chunk makes it a preview, which can be confirmed; before, a confirmation finds
   * it `building` and is refused */
  bool last = end == snap->n;
  pg_p_init(&p);
  pg_p_i64(&p, job->seq);
  pg_p_i64(&p, n);
  pg_p_bool(&p, last);
  pg_p_i64(&p, now_ms);
  int64_t changed = pg_x(c,
                         "UPDATE replay_jobs SET total = $2::bigint,"
                         " state = CASE WHEN $3::bigint = 1 THEN 'preview' ELSE state END,"
                         " updated_at = $4::bigint WHERE seq = $1 AND state = 'building'",
                         &p, "count replay items");
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed != 1) { /* cancelled while it was built: its tenant deleted */
    snprintf(c->err, sizeof c->err, "the job was cancelled while it was built");
    return HOOKD_STORE_STATE;
  }
  job->total = n;
  *from = end;
  return HOOKD_STORE_OK;
}

int pg_replay_abandon(hookd_store_conn *c, int64_t job_seq, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, now_ms);
  return pg_x(c,
              "UPDATE replay_jobs SET state = 'failed', updated_at = $2::bigint,"
              " finished_at = $2::bigint WHERE seq = $1 AND state = 'building'",
              &p, "end a replay job's build") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* ---------- reads ---------- */

/* The rows of r (key, count[, remaining]) appended to *out. */
static int read_counts(hookd_store_conn *c, const PGresult *r, hookd_replay_count **out,
                       size_t *n, bool with_remaining) {
  int rows = PQntuples(r);
  if (rows == 0) return HOOKD_STORE_OK;
  hookd_replay_count *v = calloc((size_t)rows, sizeof *v);
  if (!v) {
    snprintf(c->err, sizeof c->err, "read replay counts");
    return HOOKD_STORE_ERR;
  }
  *out = v;
  for (int i = 0; i < rows; i++) {
    hookd_replay_count *e = &v[*n];
    e->key = pg_str(r, i, 0);
    e->n = pg_i64(r, i, 1);
    e->remaining = with_remaining ? pg_i64(r, i, 2) : 0;
    if (!e->key) {
      snprintf(c->err, sizeof c->err, "read replay counts");
      return HOOKD_STORE_ERR;
    }
    (*n)++;
  }
  return HOOKD_STORE_OK;
}

int pg_replay_get(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_job *out, hookd_replay_detail *detail) {
  int rc = read_job(c, tenant_id, id, out);
  if (rc || !detail) return rc;
  memset(detail, 0, sizeof *detail);
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, out->seq);
  /* (a `missing` job's items name events until their deliveries are made: its endpoint is the
   * filter's, all its items — a preview listed no endpoint, nor its state and health); one
   * endpoint more than HOOKD_REPLAY_ENDPOINTS_SHOWN (101) says there are more */
  PGresult *r = pg_q(c,
                     "SELECT d.endpoint_id, COUNT(*),"
                     " SUM(CASE WHEN i.result IS NULL THEN 1 ELSE 0 END)"
                     " FROM replay_items i JOIN deliveries d ON d.seq = i.delivery_seq"
                     " AND d.id = i.delivery_id"
                     " WHERE i.job_seq = $1 AND NOT EXISTS (SELECT 1 FROM replay_jobs j"
                     " WHERE j.seq = $1 AND j.filter_state = 'missing')"
                     " GROUP BY d.endpoint_id"
                     " UNION ALL SELECT j.filter_endpoint, (SELECT COUNT(*) FROM"
                     " replay_items i WHERE i.job_seq = j.seq), (SELECT COUNT(*) FROM"
                     " replay_items i WHERE i.job_seq = j.seq AND i.result IS NULL)"
                     " FROM replay_jobs j WHERE j.seq = $1 AND j.filter_state = 'missing'"
                     " AND j.filter_endpoint IS NOT NULL"
                     " ORDER BY 2 DESC, 1 LIMIT 101",
                     &p, "replay job's endpoints");
  if (!r) goto fail;
  rc = read_counts(c, r, &detail->endpoints, &detail->n_endpoints, true);
  PQclear(r);
  if (rc) goto fail;
  r = pg_q(c,
           "SELECT result, COUNT(*) FROM replay_items WHERE job_seq = $1 AND result IS NOT"
           " NULL AND result <> 'replayed' GROUP BY result ORDER BY 1",
           &p, "replay job's skips");
  if (!r) goto fail;
  rc = read_counts(c, r, &detail->skipped, &detail->n_skipped, false);
  PQclear(r);
  if (rc) goto fail;
  r = pg_q(c,
           "SELECT d.state, COUNT(*) FROM replay_items i JOIN deliveries d"
           " ON d.seq = i.delivery_seq AND d.id = i.delivery_id"
           " WHERE i.job_seq = $1 AND i.result = 'replayed'"
           " GROUP BY d.state ORDER BY 1",
           &p, "replay job's states");
  if (!r) goto fail;
  rc = read_counts(c, r, &detail->states, &detail->n_states, false);
  PQclear(r);
  if (rc) goto fail;
  return HOOKD_STORE_OK;
fail:
  hookd_replay_detail_free(detail);
  hookd_replay_job_free(out);
  return HOOKD_STORE_ERR;
}

int pg_replay_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                   hookd_replay_job **out, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, tenant_id);
  pg_p_text(&p, after_id ? after_id : "");
  pg_p_i64(&p, limit);
  PGresult *r = pg_q(c,
                     "SELECT " JOB_COLS " FROM replay_jobs WHERE tenant_id = $1"
                     " AND ($2::text = '' OR id < $2::text) ORDER BY id DESC LIMIT $3",
                     &p, "list replay jobs");
  return pg_read_rows(c, r, sizeof **out, rd_job, (void **)out, n,
                      "list replay jobs: out of memory");
}

/* ---------- the state machine ---------- */

/* ---------- taking back what was not sent (docs/replay.md "Taking back") ---------- */

static int move_x(hookd_store_conn *c, const char *sql, pg_params *p) {
  return pg_x(c, sql, p, "keep replay move") < 0 ? HOOKD_STORE_ERR : HOOKD_STORE_OK;
}

/* A delivery of an ordered lane (its key, its endpoint ordered) is not taken back: the lane's
 * later deliveries wait on it, their order settled with it at the lane's head. */
#define NOT_LANED(d)                                                                            \
  " (" d ".ordering_key IS NULL OR NOT EXISTS (SELECT 1 FROM endpoints p"                       \
  " WHERE p.id = " d ".endpoint_id AND p.ordered <> 0))"

/* Before item n's move of delivery seq: what the move changes, as it is, and the token the move
 * gives it (bump: 1 for a replay, 0 for a retry brought forward). Not for an ordered lane's. */
static int move_keep(hookd_store_conn *c, int64_t job_seq, int64_t n, int64_t seq, int bump) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, n);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, bump);
  return move_x(c,
                "INSERT INTO replay_moves(job_seq, n, delivery_seq, delivery_id, token, attempts,"
                " made, state, cycle_base, cycle_kind, cycle_started_at, policy_id,"
                " next_attempt_at, dead_at, dead_reason, delivered_at)"
                " SELECT $1::bigint, $2::bigint, d.seq, d.id, d.lease_token + $4::bigint,"
                " d.attempt_count, 0, d.state, d.cycle_base, d.cycle_kind, d.cycle_started_at,"
                " d.policy_id, d.next_attempt_at, d.dead_at, d.dead_reason, d.delivered_at"
                " FROM deliveries d WHERE d.seq = $3 AND" NOT_LANED("d")
                " ON CONFLICT (job_seq, n) DO UPDATE SET delivery_seq = EXCLUDED.delivery_seq,"
                " delivery_id = EXCLUDED.delivery_id, token = EXCLUDED.token,"
                " attempts = EXCLUDED.attempts, made = 0, event_seq = NULL, event_id = NULL,"
                " state = EXCLUDED.state, cycle_base = EXCLUDED.cycle_base,"
                " cycle_kind = EXCLUDED.cycle_kind, cycle_started_at = EXCLUDED.cycle_started_at,"
                " policy_id = EXCLUDED.policy_id, next_attempt_at = EXCLUDED.next_attempt_at,"
                " dead_at = EXCLUDED.dead_at, dead_reason = EXCLUDED.dead_reason,"
                " delivered_at = EXCLUDED.delivered_at",
                &p);
}

/* A `missing` job's item n made delivery seq for the event (event_seq, event_id). */
static int move_made(hookd_store_conn *c, int64_t job_seq, int64_t n, int64_t seq,
                     int64_t event_seq, const char *event_id) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, n);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, event_seq);
  pg_p_text(&p, event_id);
  return move_x(c,
                "INSERT INTO replay_moves(job_seq, n, delivery_seq, delivery_id, token, attempts,"
                " made, event_seq, event_id)"
                " SELECT $1::bigint, $2::bigint, d.seq, d.id, d.lease_token, d.attempt_count, 1,"
                " $4::bigint, $5::text FROM deliveries d WHERE d.seq = $3 AND" NOT_LANED("d")
                " ON CONFLICT (job_seq, n) DO UPDATE SET delivery_seq = EXCLUDED.delivery_seq,"
                " delivery_id = EXCLUDED.delivery_id, token = EXCLUDED.token,"
                " attempts = EXCLUDED.attempts, made = 1, event_seq = EXCLUDED.event_seq,"
                " event_id = EXCLUDED.event_id, state = NULL, cycle_base = NULL,"
                " cycle_kind = NULL, cycle_started_at = NULL, policy_id = NULL,"
                " next_attempt_at = NULL, dead_at = NULL, dead_reason = NULL,"
                " delivered_at = NULL",
                &p);
}

static int64_t run_back(hookd_store_conn *c, const char *sql, int64_t job_seq, int64_t now_ms,
                        bool with_now) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  if (with_now) pg_p_i64(&p, now_ms);
  return pg_x(c, sql, &p, "take back replay moves");
}

/* The inbox records of the inbound forwards a take-back restored follow them, as they followed
 * the replay (dead_lettered again, say). */
static int follow_inbound(hookd_store_conn *c, int64_t job_seq, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  PGresult *r = pg_q(c,
                     "SELECT m.delivery_seq FROM replay_moves m JOIN replay_items i"
                     " ON i.job_seq = m.job_seq AND i.n = m.n"
                     " JOIN deliveries d ON d.seq = m.delivery_seq"
                     " JOIN events e ON e.seq = d.event_seq"
                     " WHERE m.job_seq = $1 AND i.result = 'recalling' AND m.made = 0"
                     " AND e.kind = 'inbound'",
                     &p, "take back replay moves");
  if (!r) return HOOKD_STORE_ERR;
  int rc = HOOKD_STORE_OK;
  for (int i = 0; i < PQntuples(r) && !rc; i++)
    rc = pg_inbox_follow(c, pg_i64(r, i, 0), now_ms, NULL, NULL);
  PQclear(r);
  return rc;
}

/* Takes back the moves of job job_seq whose deliveries are still as the moves left them (as
 * sqlite_replay.c's take_back: never sent since — the move's token, or the release's mark —, no
 * attempt since, no lease, in the state the move gave, not of an ordered lane). The writer lock
 * makes it serial with every node's claims and steps. *count: how many. */
static int take_back(hookd_store_conn *c, int64_t job_seq, bool requeue, int64_t from,
                     int64_t to, int64_t now_ms, int64_t *count) {
  *count = 0;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, from);
  pg_p_i64(&p, to);
  int64_t taken = pg_x(c,
                       "UPDATE replay_items SET result = 'recalling' WHERE job_seq = $1"
                       " AND n > $2::bigint AND n <= $3::bigint"
                       " AND result = 'replayed' AND n IN (SELECT m.n FROM replay_moves m"
                       " JOIN deliveries d ON d.seq = m.delivery_seq"
                       " AND d.id = m.delivery_id"
                       " WHERE m.job_seq = $1 AND m.n > $2::bigint AND m.n <= $3::bigint"
                       " AND (d.lease_token = m.token"
                       " OR (d.lease_token > m.token AND d.released_token = d.lease_token))"
                       " AND d.attempt_count = m.attempts AND d.leased_until IS NULL"
                       " AND d.state = CASE WHEN m.state = 'retrying' THEN 'retrying'"
                       " ELSE 'pending' END AND" NOT_LANED("d") ")",
                       &p, "take back replay moves");
  if (taken < 0) return HOOKD_STORE_ERR;
  if (!taken) return HOOKD_STORE_OK;
  int64_t first = 0; /* a pause: where the job's queue starts again */
  if (requeue) {
    pg_p_init(&p);
    pg_p_i64(&p, job_seq);
    PGresult *r = pg_q(c,
                       "SELECT MIN(n) FROM replay_items WHERE job_seq = $1"
                       " AND result = 'recalling'",
                       &p, "take back replay moves");
    if (!r) return HOOKD_STORE_ERR;
    first = pg_i64(r, 0, 0);
    PQclear(r);
  }
  /* each delivery as it was before its move, its token bumped */
  if (run_back(c,
               "UPDATE deliveries d SET state = m.state, cycle_base = m.cycle_base,"
               " cycle_kind = m.cycle_kind, cycle_started_at = m.cycle_started_at,"
               " policy_id = m.policy_id, next_attempt_at = m.next_attempt_at,"
               " dead_at = m.dead_at, dead_reason = m.dead_reason,"
               " delivered_at = m.delivered_at, lease_token = d.lease_token + 1,"
               " updated_at = $2::bigint"
               " FROM replay_moves m JOIN replay_items i ON i.job_seq = m.job_seq AND i.n = m.n"
               " WHERE m.job_seq = $1 AND i.result = 'recalling' AND m.made = 0"
               " AND d.seq = m.delivery_seq",
               job_seq, now_ms, true) < 0)
    return HOOKD_STORE_ERR;
  int rc = follow_inbound(c, job_seq, now_ms);
  if (rc) return rc;
  /* a made one never was: no attempt, nothing names it */
  if (run_back(c,
               "DELETE FROM deliveries d USING replay_moves m JOIN replay_items i"
               " ON i.job_seq = m.job_seq AND i.n = m.n"
               " WHERE m.job_seq = $1 AND i.result = 'recalling' AND m.made = 1"
               " AND d.seq = m.delivery_seq",
               job_seq, now_ms, false) < 0)
    return HOOKD_STORE_ERR;
  /* a pause: the items queued again, each checked against its delivery as it is now (its
   * token, or for a made one its event) when the resumed job reaches it */
  if (requeue && run_back(c,
                          "UPDATE replay_items i SET result = NULL,"
                          " lease_token = CASE WHEN m.made = 1 THEN i.lease_token"
                          "   ELSE (SELECT d.lease_token FROM deliveries d"
                          "   WHERE d.seq = m.delivery_seq) END,"
                          " delivery_seq = CASE WHEN m.made = 1 THEN m.event_seq"
                          "   ELSE i.delivery_seq END,"
                          " delivery_id = CASE WHEN m.made = 1 THEN m.event_id"
                          "   ELSE i.delivery_id END"
                          " FROM replay_moves m WHERE i.job_seq = $1 AND i.result = 'recalling'"
                          " AND m.job_seq = i.job_seq AND m.n = i.n",
                          job_seq, now_ms, false) < 0)
    return HOOKD_STORE_ERR;
  if (!requeue && run_back(c,
                           "UPDATE replay_items SET result = 'recalled' WHERE job_seq = $1"
                           " AND result = 'recalling'",
                           job_seq, now_ms, false) < 0)
    return HOOKD_STORE_ERR;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, taken);
  pg_p_bool(&p, requeue);
  pg_p_i64(&p, first);
  if (pg_x(c,
           "UPDATE replay_jobs SET replayed = replayed - $2::bigint,"
           " skipped = skipped + CASE WHEN $3::bigint = 1 THEN 0 ELSE $2::bigint END,"
           " next_item = CASE WHEN $3::bigint = 1 THEN LEAST(next_item, $4::bigint)"
           "   ELSE next_item END,"
           " scan_item = CASE WHEN $3::bigint = 1 THEN LEAST(scan_item, $4::bigint)"
           "   ELSE scan_item END"
           " WHERE seq = $1",
           &p, "take back replay moves") < 0)
    return HOOKD_STORE_ERR;
  *count = taken;
  return HOOKD_STORE_OK;
}

/* One chunk of a pause's or a cancel's take-back, items (from, from + CHUNK]: the job's mark
 * moved on, or cleared at its last item (docs/replay.md "Taking back", "In chunks"). */
static int back_chunk(hookd_store_conn *c, int64_t job_seq, bool requeue, int64_t from,
                      int64_t now_ms, int64_t *count) {
  int64_t to = from + HOOKD_REPLAY_BACK_CHUNK;
  int rc = take_back(c, job_seq, requeue, from, to, now_ms, count);
  if (rc) return rc;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, to);
  return pg_x(c,
              "UPDATE replay_jobs SET back_from = CASE WHEN $2::bigint >= total THEN NULL"
              " ELSE $2::bigint END WHERE seq = $1",
              &p, "take back replay moves") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* The replayer's share: the next chunk of up to 4 jobs' take-backs. *more: some remain. */
static int back_step(hookd_store_conn *c, int64_t now_ms, bool *more, int *recalled) {
  *more = false;
  PGresult *r = pg_q(c,
                     "SELECT seq, (state = 'paused')::int, back_from, total FROM replay_jobs"
                     " WHERE back_from IS NOT NULL ORDER BY seq LIMIT 4",
                     NULL, "due take-backs");
  if (!r) return HOOKD_STORE_ERR;
  int64_t jobs[4][4];
  int nj = PQntuples(r) < 4 ? PQntuples(r) : 4;
  for (int i = 0; i < nj; i++)
    for (int k = 0; k < 4; k++) jobs[i][k] = pg_i64(r, i, k);
  PQclear(r);
  for (int i = 0; i < nj; i++) {
    int64_t n = 0;
    /* (a job resumed clears its mark: only a paused or a cancelled job has one) */
    int rc = back_chunk(c, jobs[i][0], jobs[i][1] != 0, jobs[i][2], now_ms, &n);
    if (rc) return rc;
    *recalled += (int)n;
    if (jobs[i][2] + HOOKD_REPLAY_BACK_CHUNK < jobs[i][3]) *more = true;
  }
  /* four taken: a fifth job's walk may wait, whether or not these four are done — the next step
   * looks (before, four ending together left it waiting for a wake-up: its deliveries sent
   * after its cancel, a review) */
  if (nj == 4) *more = true;
  return HOOKD_STORE_OK;
}

int pg_replay_act(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_action action, int64_t now_ms, hookd_replay_job *out) {
  hookd_replay_job j;
  int rc = read_job(c, tenant_id, id, &j);
  if (rc) return rc;
  static const char *const verbs[] = {"confirmed", "paused", "resumed", "cancelled"};
  const char *from = j.state, *to = NULL;
  bool start = false, finish = false;
  switch (action) {
  case HOOKD_REPLAY_CONFIRM:
    if (!strcmp(from, "preview")) to = "running", start = true;
    break;
  case HOOKD_REPLAY_PAUSE:
    if (!strcmp(from, "running")) to = "paused";
    break;
  case HOOKD_REPLAY_RESUME:
    if (!strcmp(from, "paused")) to = "running", start = true;
    break;
  case HOOKD_REPLAY_CANCEL:
    /* (a completed job moved every item; some may still wait at their endpoint) */
    if (!strcmp(from, "preview") || !strcmp(from, "running") || !strcmp(from, "paused") ||
        (!strcmp(from, "completed") && !j.items_purged_ms && /* (its purge not begun) */
         j.finished_ms > now_ms - HOOKD_REPLAY_ITEMS_KEEP_MS + HOOKD_REPLAY_CANCEL_MARGIN_MS))
      to = "cancelled", finish = true;
    break;
  }
  pg_params p;
  if (!to && !strcmp(from, "expired")) {
    /* the refusal is written: a preview once refused as expired stays so, whatever the clock
     * does next (a step back made it read young again, and confirmable) */
    pg_p_init(&p);
    pg_p_i64(&p, j.seq);
    pg_p_i64(&p, now_ms);
    pg_p_i64(&p, HOOKD_REPLAY_PREVIEW_TTL_MS);
    if (pg_x(c,
             "UPDATE replay_jobs SET state = 'expired', updated_at = $2::bigint,"
             " finished_at = created_at + $3::bigint"
             " WHERE seq = $1 AND state = 'preview'",
             &p, "expire replay preview") < 0) {
      hookd_replay_job_free(&j);
      return HOOKD_STORE_ERR;
    }
  }
  if (!to) {
    if (!strcmp(from, "expired") && action == HOOKD_REPLAY_CANCEL)
      snprintf(c->err, sizeof c->err, "the preview expired (older than %d minutes): nothing to "
               "cancel, it sends nothing", HOOKD_REPLAY_PREVIEW_TTL_MS / 60000);
    else if (!strcmp(from, "expired"))
      snprintf(c->err, sizeof c->err,
               "the preview expired (older than %d minutes): create the job again, the "
               "deliveries may have changed",
               HOOKD_REPLAY_PREVIEW_TTL_MS / 60000);
    else
      snprintf(c->err, sizeof c->err, "a %s replay job cannot be %s", from, verbs[action]);
    bool expired = !strcmp(from, "expired");
    if (expired) *out = j; /* refused, but the expiry is written: kept (HOOKD_STORE_OK) */
    else hookd_replay_job_free(&j);
    return expired ? HOOKD_STORE_OK : HOOKD_STORE_STATE;
  }
  /* the bucket starts at confirm; at resume, not before the next item was due anyway (pausing
   * and resuming does not skip the rate's wait), and a paused job does not save up its rate */
  pg_p_init(&p);
  pg_p_i64(&p, j.seq);
  pg_p_text(&p, to);
  pg_p_i64(&p, now_ms);
  pg_p_bool(&p, start);
  pg_p_bool(&p, finish);
  pg_p_text(&p, from);
  int64_t changed = pg_x(c,
                         /* (a resume ends a pause's take-back where it is) */
                         "UPDATE replay_jobs SET state = $2::text, updated_at = $3::bigint,"
                         " held_endpoint = NULL, held_since = NULL," /* (the step's word) */
                         " back_from = CASE WHEN $4::bigint = 1 THEN NULL ELSE back_from END,"
                         " scan_item = CASE WHEN $4::bigint = 1 THEN next_item ELSE scan_item END,"
                         " confirmed_at = CASE WHEN $4::bigint = 1 AND confirmed_at IS NULL"
                         "   THEN $3::bigint ELSE confirmed_at END,"
                         " next_item_at = CASE WHEN $4::bigint = 1"
                         "   THEN GREATEST(next_item_at, " PG_DB_NOW_MS ") ELSE next_item_at END,"
                         /* (a completed job cancelled: it finished then) */
                         " finished_at = CASE WHEN $5::bigint = 1"
                         "   THEN COALESCE(finished_at, $3::bigint) ELSE finished_at END"
                         " WHERE seq = $1 AND state = $6::text",
                         &p, "update replay job");
  int64_t seq = j.seq;
  hookd_replay_job_free(&j);
  if (changed < 0) return HOOKD_STORE_ERR;
  if (changed != 1) return HOOKD_STORE_STATE;
  int64_t back = 0;
  if (action == HOOKD_REPLAY_PAUSE || action == HOOKD_REPLAY_CANCEL) {
    /* the first chunk now, the rest by the replayers (a cancel after a pause: from the start) */
    rc = back_chunk(c, seq, action == HOOKD_REPLAY_PAUSE, 0, now_ms, &back);
    if (rc) return rc;
  }
  rc = read_job(c, tenant_id, id, out);
  if (!rc) out->recalled = back;
  return rc;
}

/* ---------- the step ---------- */

typedef hookd_replay_due step_job; /* (store.h) */

/* The endpoint a job's items wait for after a turn: the turn's ($8), else, while items it passed
 * wait between its first open item ($2) and its frontier ($9), the first one's (a turn the rate
 * ended before it reached them: the last turn's word may name an endpoint caught up since). */
#define PG_HELD_NOW                                                                             \
  "(CASE WHEN $8::text IS NOT NULL THEN $8::text WHEN $2::bigint < $9::bigint"                \
  " THEN (SELECT d.endpoint_id FROM replay_items i JOIN deliveries d ON d.seq = i.delivery_seq" \
  " AND d.id = i.delivery_id WHERE i.job_seq = $1 AND i.n = $2::bigint) END)"

/* The open items (not decided) of job_seq from item `from` on, in order, by the open items'
 * index: up to max into out, *n of them. */
static int open_from(hookd_store_conn *c, int64_t job_seq, int64_t from, int64_t *out,
                     size_t max, size_t *n) {
  *n = 0;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, from);
  pg_p_i64(&p, (int64_t)max);
  PGresult *r = pg_q(c,
                     "SELECT n FROM replay_items WHERE job_seq = $1 AND n >= $2::bigint"
                     " AND result IS NULL ORDER BY n LIMIT $3::bigint",
                     &p, "read replay items");
  if (!r) return HOOKD_STORE_ERR;
  for (int i = 0; i < PQntuples(r) && *n < max; i++) out[(*n)++] = pg_i64(r, i, 0);
  PQclear(r);
  return HOOKD_STORE_OK;
}

static int item_result(hookd_store_conn *c, int64_t job_seq, int64_t n, const char *result) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, job_seq);
  pg_p_i64(&p, n);
  pg_p_text(&p, result);
  return pg_x(c,
              "UPDATE replay_items SET result = $3::text WHERE job_seq = $1 AND n = $2"
              " AND result IS NULL",
              &p, "mark replay item") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* ---------- held behind an endpoint (docs/replay.md) ---------- */

/* An endpoint's deliveries due and not claimed, of the cycles `kinds`: deliveries_due in due
 * order, past the leased ones (the endpoint's in flight), and but those of an ordered endpoint's
 * lanes (they wait on their lane's head, not on the endpoint). e: the endpoint's row. */
#define WAITING(kinds)                                                                          \
  " FROM deliveries d WHERE d.endpoint_id = $1 AND d.cycle_kind IN (" kinds ")"                \
  " AND d.state IN ('pending','retrying') AND d.lane_wait = 0 AND d.next_attempt_at <= $2"     \
  " AND (d.leased_until IS NULL OR d.leased_until <= $2)"                                       \
  " AND (d.ordering_key IS NULL OR e.ordered = 0)"

/* What waits at endpoint_id: probed, then kept by the writer connection for
 * HOOKD_REPLAY_HOLD_POLL_MS with the steps' moves added (hookd_hold_moved; store.h). */
static int hold_seen(hookd_store_conn *c, hookd_hold_memo *m, const char *endpoint_id,
                     int64_t now_ms, hookd_hold_seen **out) {
  if ((*out = hookd_hold_find(m, endpoint_id)) || m->rows_left <= 0)
    return HOOKD_STORE_OK; /* (NULL: the step's probes are spent) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_i64(&p, now_ms);
  pg_p_i64(&p, HOOKD_REPLAY_HOLD_COUNT);
  PGresult *r = pg_q(c,
                     "SELECT (e.enabled = 1 AND e.deleted_at IS NULL)::int,"
                     " LEAST((SELECT d.next_attempt_at" WAITING("'live'")
                     " ORDER BY d.next_attempt_at LIMIT 1),"
                     " (SELECT d.next_attempt_at" WAITING("'replay'")
                     " ORDER BY d.next_attempt_at LIMIT 1)),"
                     " (SELECT COUNT(*) FROM (SELECT 1" WAITING("'live','replay'")
                     " LIMIT $3) w)"
                     " FROM endpoints e WHERE e.id = $1",
                     &p, "read an endpoint's backlog");
  if (!r) return HOOKD_STORE_ERR;
  bool row = PQntuples(r) == 1;
  bool enabled = row && pg_i64(r, 0, 0) == 1;
  int64_t oldest = row && !pg_null(r, 0, 1) ? pg_i64(r, 0, 1) : 0;
  int64_t waiting = row ? pg_i64(r, 0, 2) : 0;
  PQclear(r);
  m->rows_left -= waiting + 1;
  *out = hookd_hold_add(m, endpoint_id, enabled, waiting, oldest, now_ms);
  return *out ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
}

/* One item of a "missing" job: the event given a delivery to the job's endpoint — the item
 * then names that delivery, for the job's breakdowns — or why not ("held": not moved, the job
 * stops at it). */
static int step_missing(hookd_store_conn *c, const step_job *j, int64_t n, int64_t now_ms,
                        hookd_hold_memo *hm, const char **result, char **endpoint,
                        int64_t *bytes) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, j->seq);
  pg_p_i64(&p, n);
  PGresult *r = pg_q(c,
                     "SELECT result, delivery_id, delivery_seq FROM replay_items"
                     " WHERE job_seq = $1 AND n = $2",
                     &p, "read replay item");
  if (!r) return HOOKD_STORE_ERR;
  bool row = PQntuples(r) == 1;
  bool done = row && !pg_null(r, 0, 0);
  char *event_id = row ? pg_str(r, 0, 1) : NULL;
  int64_t event_seq = row ? pg_i64(r, 0, 2) : 0; /* (the snapshot's event) */
  PQclear(r);
  if (done || !event_id || !j->endpoint_id) { /* another node's step took it */
    free(event_id);
    /* (an open item is decided by the walk, or the step fails: one left open without a result
     * would hold the job's first item for ever — out of memory reading its event's id) */
    return done ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  }
  hookd_hold_seen *hold;
  int rc = hold_seen(c, hm, j->endpoint_id, now_ms, &hold);
  if (rc || !hold || hookd_hold_behind(hold, now_ms)) {
    free(event_id);
    if (rc) return rc;
    *result = hold ? "held" : "spent";
    *endpoint = strdup(j->endpoint_id);
    return *endpoint ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  }
  hookd_delivery dl;
  const char *why = NULL;
  rc = pg_event_deliver_why(c, j->tenant_id, event_id, event_seq, j->endpoint_id, now_ms,
                                &dl, &why, bytes);
  if (rc == HOOKD_STORE_OK) {
    rc = move_made(c, j->seq, n, dl.seq, event_seq, event_id);
    pg_p_init(&p);
    pg_p_i64(&p, j->seq);
    pg_p_i64(&p, n);
    pg_p_i64(&p, dl.seq);
    pg_p_text(&p, dl.id);
    if (!rc && pg_x(c,
                    "UPDATE replay_items SET delivery_seq = $3::bigint, delivery_id = $4::text"
                    " WHERE job_seq = $1 AND n = $2",
                    &p, "mark replay item") < 0)
      rc = HOOKD_STORE_ERR;
    free(event_id);
    hookd_delivery_free(&dl);
    if (rc) return rc;
    hookd_hold_moved(hold, now_ms);
    *result = "replayed";
    *endpoint = strdup(j->endpoint_id);
  } else if (rc == HOOKD_STORE_STATE || rc == HOOKD_STORE_NOTFOUND || rc == HOOKD_STORE_EXISTS) {
    free(event_id);
    hookd_delivery_free(&dl); /* (EXISTS: the pair's delivery, made since the preview) */
    *result = why ? why : "state_changed";
  } else {
    free(event_id);
    return rc;
  }
  return item_result(c, j->seq, n, *result);
}

/* One item: replayed, or why not, or "held" (not moved: its endpoint is behind), or "spent" (not
 * moved: the step's probes are spent). Sets *endpoint (owned) for a replayed, held or spent one. */
static int step_item(hookd_store_conn *c, const step_job *j, int64_t n, int64_t now_ms,
                     hookd_replay_memo *memo, hookd_hold_memo *hm, const char **result,
                     char **endpoint, int64_t *bytes) {
  *endpoint = NULL;
  *result = NULL;
  if (!strcmp(j->filter_state, "missing")) {
    int rc = step_missing(c, j, n, now_ms, hm, result, endpoint, bytes);
    if (rc) {
      free(*endpoint);
      *endpoint = NULL;
    }
    return rc;
  }
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, j->seq);
  pg_p_i64(&p, n);
  PGresult *r = pg_q(c,
                     "SELECT i.result, i.delivery_seq, d.state, d.endpoint_id,"
                     " (d.attempt_count = i.attempts AND d.lease_token"
                     " = COALESCE(i.lease_token, d.lease_token))::int"
                     " FROM replay_items i LEFT JOIN deliveries d ON d.seq = i.delivery_seq"
                     " AND d.id = i.delivery_id"
                     " WHERE i.job_seq = $1 AND i.n = $2",
                     &p, "read replay item");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) { /* cannot happen: items 1..total exist */
    PQclear(r);
    *result = "gone";
    return HOOKD_STORE_OK;
  }
  bool done = !pg_null(r, 0, 0); /* another node's step took it */
  int64_t seq = pg_i64(r, 0, 1);
  bool gone = pg_null(r, 0, 2);
  const char *state = gone ? NULL : PQgetvalue(r, 0, 2);
  /* still in the filter's state, and neither attempted nor claimed since the snapshot: a
   * delivery replayed by hand meanwhile — delivered again, dead again, or held and resolved
   * without an attempt counted — is not the job's to send once more */
  bool same_state = state && !strcmp(state, j->filter_state) && pg_i64(r, 0, 4) == 1;
  *endpoint = pg_str(r, 0, 3);
  PQclear(r);
  int rc = HOOKD_STORE_OK;
  if (done) {
    *result = NULL;
  } else if (gone) {
    *result = "gone"; /* removed by event retention since the snapshot (its seq may be reused) */
  } else if (!same_state) {
    *result = "state_changed"; /* replayed by hand, say: the job never sends it twice */
  } else if (!*endpoint) {
    return HOOKD_STORE_ERR; /* (out of memory: the delivery's row has its endpoint) */
  } else {
    hookd_hold_seen *hold;
    if ((rc = hold_seen(c, hm, *endpoint, now_ms, &hold)) != 0) goto out;
    if (!hold || hookd_hold_behind(hold, now_ms)) {
      *result = hold ? "held" : "spent"; /* not marked: the job stops at it */
      return HOOKD_STORE_OK;
    }
    const char *why = NULL;
    /* what the move changes, kept for a pause or a cancel to put back */
    bool retry = !strcmp(j->filter_state, "retrying");
    rc = move_keep(c, j->seq, n, seq, retry ? 0 : 1);
    /* a job over retrying deliveries brings each one's next attempt forward (the single
     * replay's "retry now"), in its own retry budget */
    if (!rc)
      rc = retry ? pg_retry_now(c, seq, now_ms, &why) : pg_replay_one(c, seq, now_ms, &why, memo);
    if (rc == HOOKD_STORE_OK) {
      *result = "replayed";
      hookd_hold_moved(hold, now_ms);
    } else if (rc == HOOKD_STORE_STATE) {
      *result = why ? why : "state_changed";
      rc = HOOKD_STORE_OK;
    } else if (rc == HOOKD_STORE_NOTFOUND) { /* its event is gone: nothing one item may stall */
      *result = strcmp(j->filter_state, "retrying") ? "gone" : "state_changed"; /* (or settled) */
      rc = HOOKD_STORE_OK;
    }
  }
  if (!rc && *result) rc = item_result(c, j->seq, n, *result);
out:
  if (rc || !*result || strcmp(*result, "replayed") != 0) {
    free(*endpoint);
    *endpoint = NULL;
  }
  return rc;
}

/* Steps job j: its bucket on the database's clock, pace_ms (every node steps the same rows:
 * docs/replay.md "Rate"); what it writes stamped with the node's, now_ms. */
static int step_job_run(hookd_store_conn *c, step_job *j, int64_t now_ms, int64_t pace_ms,
                        hookd_replay_step_res *res, size_t *hcap, hookd_replay_budget *left) {
  hookd_replay_walk w = {.job = j, .limit = (double)pace_ms, .now_ms = now_ms, .hm = &c->hold,
                         .open_from = open_from, .item = step_item};
  int rc = hookd_replay_walk_run(c, &w, res, hcap, left);
  char *held = w.held; /* the endpoint an item waits for (docs/replay.md "Held behind…") */
  if (rc || !w.write) {
    free(held);
    return rc;
  }
  int64_t replayed = w.replayed, skipped = w.skipped;
  bool complete = w.complete;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, j->seq);
  pg_p_i64(&p, w.next);
  pg_p_i64(&p, (int64_t)ceil(w.at)); /* whole ms, up: never over the rate (replay.md) */
  pg_p_i64(&p, replayed);
  pg_p_i64(&p, skipped);
  pg_p_i64(&p, now_ms);
  pg_p_bool(&p, complete);
  pg_p_text(&p, held);
  pg_p_i64(&p, w.frontier);
  rc = pg_x(c,
            "UPDATE replay_jobs SET next_item = $2::bigint, next_item_at = $3::bigint,"
            " replayed = replayed + $4::bigint, skipped = skipped + $5::bigint,"
            " updated_at = $6::bigint,"
            " state = CASE WHEN $7::bigint = 1 THEN 'completed' ELSE state END,"
            " finished_at = CASE WHEN $7::bigint = 1 THEN $6::bigint ELSE finished_at END,"
            /* held: the turn's word, else the last one's while items it passed wait (a turn
             * that did not reach them); since: kept while the same endpoint holds the same
             * first item */
            " held_since = CASE WHEN x.h IS NULL THEN NULL"
            " WHEN held_endpoint = x.h AND (next_item = $2::bigint"
            " OR $8::text IS NULL) THEN held_since ELSE $6::bigint END,"
            " held_endpoint = x.h, scan_item = $9::bigint"
            /* (read once: written out at each use, it ran up to three times) */
            " FROM (SELECT " PG_HELD_NOW " AS h) AS x"
            " WHERE seq = $1 AND state = 'running'",
            &p, "advance replay job") < 0
           ? HOOKD_STORE_ERR
           : HOOKD_STORE_OK;
  free(held);
  if (rc) return rc;
  res->replayed += (int)replayed;
  res->skipped += (int)skipped;
  if (complete) {
    char detail[128];
    snprintf(detail, sizeof detail, "replayed %lld, skipped %lld",
             (long long)(j->replayed + replayed), (long long)(j->skipped + skipped));
    hookd_audit a = {.at_ms = now_ms, .actor = "system", .action = "replay.complete",
                     .target = j->id, .tenant_id = j->tenant_id, .detail = detail};
    if ((rc = pg_audit_append(c, &a)) != 0) return rc;
    char **nv = realloc(res->completed, (res->n_completed + 1) * sizeof *nv);
    if (!nv) return HOOKD_STORE_ERR;
    res->completed = nv;
    if (!(nv[res->n_completed] = strdup(j->id))) return HOOKD_STORE_ERR;
    res->n_completed++;
  }
  return HOOKD_STORE_OK;
}

int pg_replay_step(hookd_store_conn *c, int64_t now_ms, hookd_replay_step_res *res) {
  hookd_replay_step_res_free(res); /* a redone batch runs the op again */
  hookd_hold_sweep(&c->hold, now_ms);
  bool backs = false;
  int brc = back_step(c, now_ms, &backs, &res->recalled);
  if (brc) return brc;
  /* the buckets on the database's clock, read once (a volatile CTE is not inlined) */
  PGresult *r = pg_q(c,
                     "WITH t AS (SELECT " PG_DB_NOW_MS " AS now)"
                     " SELECT seq, id, tenant_id, filter_state, rate_per_s, total,"
                     " next_item, next_item_at, replayed, skipped, filter_endpoint, t.now,"
                     " held_since, scan_item"
                     " FROM replay_jobs, t"
                     " WHERE state = 'running' AND (next_item_at <= t.now"
                     " OR next_item_at > t.now + 1000 + 1000.0 / rate_per_s)"
                     " ORDER BY next_item_at LIMIT 16",
                     NULL, "due replay jobs");
  if (!r) return HOOKD_STORE_ERR;
  step_job jobs[16];
  size_t nj = 0;
  int out = HOOKD_STORE_OK;
  int rows = PQntuples(r);
  for (int i = 0; i < rows && nj < 16; i++) {
    step_job *j = &jobs[nj];
    j->seq = pg_i64(r, i, 0);
    j->id = pg_str(r, i, 1);
    j->tenant_id = pg_str(r, i, 2);
    j->filter_state = pg_str(r, i, 3);
    j->rate = pg_f64(r, i, 4);
    j->total = pg_i64(r, i, 5);
    j->next_item = pg_i64(r, i, 6);
    j->next_at = pg_i64(r, i, 7);
    j->replayed = pg_i64(r, i, 8);
    j->skipped = pg_i64(r, i, 9);
    j->endpoint_id = pg_str(r, i, 10);
    j->held_since = pg_null(r, i, 12) ? 0 : pg_i64(r, i, 12);
    j->scan_item = pg_i64(r, i, 13);
    nj++;
    if (!j->id || !j->tenant_id || !j->filter_state || !(j->rate > 0)) {
      out = pg_fail(c, "due replay jobs");
      break;
    }
  }
  int64_t pace_ms = rows ? pg_i64(r, 0, 11) : 0;
  PQclear(r);
  size_t hcap = 0;
  hookd_replay_budget left = {.bytes = HOOKD_REPLAY_STEP_BYTES, .items = HOOKD_REPLAY_STEP_ITEMS};
  for (size_t i = 0; i < nj && !out; i++)
    out = step_job_run(c, &jobs[i], now_ms, pace_ms, res, &hcap, &left);
  for (size_t i = 0; i < nj; i++) {
    free(jobs[i].id);
    free(jobs[i].tenant_id);
    free(jobs[i].filter_state);
    free(jobs[i].endpoint_id);
  }
  if (out) return out;
  /* when, on the node's clock, the earliest bucket is due on the database's */
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, now_ms);
  r = pg_q(c,
           "SELECT MIN(next_item_at) - " PG_DB_NOW_MS " + $1::bigint FROM replay_jobs"
           " WHERE state = 'running'",
           &p, "next replay step");
  if (!r) return HOOKD_STORE_ERR;
  bool any = PQntuples(r) == 1 && !pg_null(r, 0, 0);
  res->next_ms = any ? pg_i64(r, 0, 0) : 0;
  if (any && res->next_ms <= 0) res->next_ms = 1;
  if (backs && (!res->next_ms || res->next_ms > now_ms)) res->next_ms = now_ms; /* (50 ms) */
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* ---------- retention of ended jobs' items ---------- */

int pg_replay_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                    int *purged, bool *more) {
  *purged = 0;
  *more = false;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, before_ms);
  pg_p_i64(&p, before_ms - HOOKD_REPLAY_PREVIEW_TTL_MS);
  PGresult *r = pg_q(c,
                     /* (a take-back still to walk needs its moves) */
                     "SELECT seq FROM replay_jobs WHERE items_purged_at IS NULL AND"
                     " back_from IS NULL AND (finished_at < $1::bigint"
                     " OR (state = 'preview' AND created_at < $2::bigint)"
                     " OR (state = 'building' AND updated_at < $1::bigint))"
                     " ORDER BY seq LIMIT 1",
                     &p, "find ended replay jobs");
  if (!r) return HOOKD_STORE_ERR;
  int64_t job = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  if (!job) return HOOKD_STORE_OK;
  pg_p_init(&p);
  pg_p_i64(&p, job);
  pg_p_i64(&p, limit);
  if (pg_x(c,
           "DELETE FROM replay_moves WHERE job_seq = $1 AND n IN"
           " (SELECT n FROM replay_items WHERE job_seq = $1 ORDER BY n LIMIT $2)",
           &p, "purge replay moves") < 0)
    return HOOKD_STORE_ERR;
  int64_t gone = pg_x(c,
                      "DELETE FROM replay_items WHERE job_seq = $1 AND n IN"
                      " (SELECT n FROM replay_items WHERE job_seq = $1 ORDER BY n LIMIT $2)",
                      &p, "purge replay items");
  if (gone < 0) return HOOKD_STORE_ERR;
  *purged = (int)gone;
  *more = true; /* this job may hold more, or another may wait */
  if (*purged < limit) {
    pg_p_init(&p);
    pg_p_i64(&p, job);
    pg_p_i64(&p, now_ms);
    if (pg_x(c, "UPDATE replay_jobs SET items_purged_at = $2::bigint WHERE seq = $1", &p,
             "mark replay job purged") < 0)
      return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

/* sqlite_replay.c — SQLite backend: replay jobs (O12, docs/replay.md).
 *
 * The snapshot of a filter's deliveries (read on the scan executor's connection: a long scan
 * holds up neither the writer nor the API's reads), the job row and its items (writer), the
 * job's state machine, the retention of ended jobs' items, and the
 * step the replayer runs: each running job's due items, at its rate, go back to pending through
 * the single replay's own checks and write (sq_replay_one). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/payload_filter.h"
#include "store/sqlite/sqlite_int.h"

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

static void rd_job(sqlite3_stmt *st, void *rec) {
  hookd_replay_job *j = rec;
  memset(j, 0, sizeof *j);
  j->seq = sq_col_i64(st, 0);
  j->id = sq_col_str(st, 1);
  j->tenant_id = sq_col_str(st, 2);
  j->state = sq_col_str(st, 3);
  j->filter = sq_col_str(st, 4);
  j->actor = sq_col_str(st, 5);
  j->reason = sq_col_str(st, 6);
  j->rate_per_s = sqlite3_column_double(st, 7);
  j->total = sq_col_i64(st, 8);
  j->replayed = sq_col_i64(st, 9);
  j->skipped = sq_col_i64(st, 10);
  j->created_ms = sq_col_i64(st, 11);
  j->confirmed_ms = sq_col_i64(st, 12);
  j->updated_ms = sq_col_i64(st, 13);
  j->finished_ms = sq_col_i64(st, 14);
  j->next_item_ms = sq_col_i64(st, 15);
  j->items_purged_ms = sq_col_i64(st, 16);
  j->held_endpoint = sq_col_str(st, 17);
  j->held_since_ms = sq_col_i64(st, 18);
  int64_t now = hookd_now_ms();
  if (preview_expired(j->state, j->created_ms, now) ||
      build_abandoned(j->state, j->updated_ms, now)) {
    bool expired = !strcmp(j->state, "preview");
    free(j->state);
    j->state = strdup(expired ? "expired" : "failed");
  }
}

static void free_jobs(void *v, size_t n) { hookd_replay_jobs_free(v, n); }

static int read_job(hookd_store_conn *c, const char *tenant_id, const char *id,
                    hookd_replay_job *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_GET,
                             "SELECT " JOB_COLS " FROM replay_jobs WHERE id = ?1 AND tenant_id = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, id);
  sq_bind_text(st, 2, tenant_id);
  hookd_replay_job *v = NULL;
  size_t n = 0;
  int rc = sq_read_rows(c, st, sizeof *v, rd_job, free_jobs, (void **)&v, &n, "read replay job");
  if (rc) return rc;
  if (n == 0) {
    free(v);
    return HOOKD_STORE_NOTFOUND;
  }
  *out = v[0];
  free(v);
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
  " WHERE d.tenant_id = ?1 AND d.state = ?2"                                                    \
  " AND (?3 IS NULL OR d.endpoint_id = ?3)"                                                     \
  " AND (?4 IS NULL OR e.type = ?4)"                                                            \
  " AND (?5 IS NULL OR length(e.type) > length(?5)"                                             \
  " AND substr(e.type, 1, length(?5)) = ?5)"                                                    \
  " AND d.created_at >= ?6 AND d.created_at < ?7"

static void bind_filter(sqlite3_stmt *st, const char *tenant_id, const hookd_replay_filter *f) {
  sq_bind_text(st, 1, tenant_id);
  sq_bind_text(st, 2, hookd_dstate_name(f->state));
  sq_bind_text(st, 3, f->endpoint_id);
  sq_bind_type_filter(st, 4, 5, f->event_type);
  sq_bind_i64(st, 6, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  sq_bind_i64(st, 7, f->until_ms > 0 ? f->until_ms : INT64_MAX);
}

/* Appends seq to the snapshot; -1 out of memory (said in c's error). */
static int snap_push(hookd_store_conn *c, hookd_replay_snapshot *out, size_t *cap, int64_t seq) {
  if (out->n == *cap) {
    size_t nc = *cap ? *cap * 2 : 256;
    int64_t *nv = realloc(out->seqs, nc * sizeof *nv);
    if (!nv) {
      snprintf(c->err, sizeof c->err, "out of memory");
      return -1;
    }
    out->seqs = nv;
    *cap = nc;
  }
  out->seqs[out->n++] = seq;
  return 0;
}

/* filter.state "missing": the tenant's outbound events in the filter that the endpoint takes
 * (its event_types) and has no delivery of, oldest first — each still sendable (payload kept,
 * not expired). */
static int select_missing(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                          const hookd_endpoint *ep, int64_t max_items,
                          hookd_replay_snapshot *out) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_SELECT_MISSING,
                             /* the envelope only for an endpoint with a payload filter */
                             "SELECT e.seq, e.type, e.channels, CASE WHEN ?9 THEN e.body END"
                             " FROM events e"
                             " WHERE e.tenant_id = ?1 AND e.kind = 'outbound'"
                             " AND e.purged_at IS NULL AND e.test_endpoint IS NULL"
                             " AND (e.expires_at IS NULL"
                             " OR e.expires_at > ?8)"
                             " AND (?4 IS NULL OR e.type = ?4)"
                             " AND (?5 IS NULL OR length(e.type) > length(?5)"
                             " AND substr(e.type, 1, length(?5)) = ?5)"
                             " AND e.created_at >= ?6 AND e.created_at < ?7"
                             " AND NOT EXISTS (SELECT 1 FROM deliveries d"
                             " WHERE d.event_seq = e.seq AND d.endpoint_id = ?3)"
                             " ORDER BY e.seq");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, tenant_id);
  sq_bind_text(st, 3, f->endpoint_id);
  sq_bind_type_filter(st, 4, 5, f->event_type);
  sq_bind_i64(st, 6, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  sq_bind_i64(st, 7, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  sq_bind_i64(st, 8, hookd_now_ms());
  sqlite3_bind_int(st, 9, ep->payload_filter != NULL);
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const char *type = (const char *)sqlite3_column_text(st, 1);
    if (!type || !hookd_filter_match(ep->event_types, type) || /* not the endpoint's */
        !hookd_channels_match(ep->channels, (const char *)sqlite3_column_text(st, 2)))
      continue;
    if (ep->payload_filter) {
      json_t *parsed = NULL;
      int takes = hookd_pfilter_match_envelope(
          &c->pf, ep->payload_filter, (const char *)sqlite3_column_blob(st, 3),
          (size_t)sqlite3_column_bytes(st, 3), &parsed, NULL);
      json_decref(parsed);
      if (takes == HOOKD_PFILTER_OVER) out->filters_over++;
      if (takes != HOOKD_PFILTER_YES) continue;
    }
    out->count++;
    if (out->n <= (size_t)max_items && snap_push(c, out, &cap, sq_col_i64(st, 0)) != 0) {
      sqlite3_reset(st);
      return HOOKD_STORE_ERR;
    }
    if (out->count > HOOKD_REPLAY_COUNT_UPTO(max_items)) break; /* counted far enough */
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return sq_fail(c, "select events");
  if (out->count <= max_items) return HOOKD_STORE_OK;
  return hookd_replay_over(c->err, sizeof c->err, out->count, max_items, "events",
                           "time range, event type");
}

int sq_replay_select(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                     int64_t max_items, hookd_replay_snapshot *out) {
  memset(out, 0, sizeof *out);
  if (f->missing) {
    hookd_endpoint ep;
    int rc = f->endpoint_id ? sq_endpoint_get(c, f->endpoint_id, &ep) : HOOKD_STORE_NOTFOUND;
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
    sqlite3_stmt *st = sq_stmt(c, SQ_RPL_EP_CHECK,
                               "SELECT 1 FROM endpoints WHERE id = ?1 AND tenant_id = ?2"
                               " AND deleted_at IS NULL");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_text(st, 1, f->endpoint_id);
    sq_bind_text(st, 2, tenant_id);
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE) {
      snprintf(c->err, sizeof c->err, "filter.endpoint: no endpoint %.128s in this tenant",
               f->endpoint_id);
      return HOOKD_STORE_NOTFOUND;
    }
    if (rc != SQLITE_ROW) return sq_fail(c, "check endpoint");
  }
  out->filter_state = strdup(hookd_dstate_name(f->state));
  if (!out->filter_state) return HOOKD_STORE_ERR;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_SELECT,
                             "SELECT d.seq" SELECT_WHERE
                             " ORDER BY d.created_at, d.seq LIMIT ?8");
  if (!st) return HOOKD_STORE_ERR;
  bind_filter(st, tenant_id, f);
  sq_bind_i64(st, 8, max_items + 1);
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (out->n == cap) {
      size_t nc = cap ? cap * 2 : 256;
      int64_t *nv = realloc(out->seqs, nc * sizeof *nv);
      if (!nv) {
        sqlite3_reset(st);
        hookd_replay_snapshot_free(out);
        snprintf(c->err, sizeof c->err, "out of memory");
        return HOOKD_STORE_ERR;
      }
      out->seqs = nv;
      cap = nc;
    }
    out->seqs[out->n++] = sq_col_i64(st, 0);
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    hookd_replay_snapshot_free(out);
    return sq_fail(c, "select deliveries");
  }
  out->count = (int64_t)out->n;
  if (out->count <= max_items) return HOOKD_STORE_OK;
  /* over the limit: say how many (up to a bound), so the operator knows how far to narrow */
  st = sq_stmt(c, SQ_RPL_COUNT, "SELECT COUNT(*) FROM (SELECT 1" SELECT_WHERE " LIMIT ?8)");
  if (!st) return HOOKD_STORE_ERR;
  bind_filter(st, tenant_id, f);
  sq_bind_i64(st, 8, HOOKD_REPLAY_COUNT_UPTO(max_items) + 1);
  rc = sqlite3_step(st);
  out->count = rc == SQLITE_ROW ? sq_col_i64(st, 0) : out->count;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW) return sq_fail(c, "count deliveries");
  return hookd_replay_over(c->err, sizeof c->err, out->count, max_items, "deliveries",
                           "time range, endpoint, event type");
}

/* The job row, state `building`, once the tenant's cap allows it. */
static int create_job_row(hookd_store_conn *c, hookd_replay_job *job,
                          const hookd_replay_snapshot *snap, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ACTIVE,
                             "SELECT COUNT(*) FROM replay_jobs WHERE tenant_id = ?1 AND"
                             " (state = 'running' OR state = 'paused' OR"
                             " (state = 'preview' AND created_at > ?2) OR"
                             " (state = 'building' AND updated_at > ?3))");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, job->tenant_id);
  sq_bind_i64(st, 2, now_ms - HOOKD_REPLAY_PREVIEW_TTL_MS);
  sq_bind_i64(st, 3, now_ms - HOOKD_REPLAY_BUILD_STALE_MS);
  int rc = sqlite3_step(st);
  int64_t active = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW) return sq_fail(c, "count active replay jobs");
  if (active >= HOOKD_REPLAY_ACTIVE_MAX) {
    snprintf(c->err, sizeof c->err,
             "the tenant has %d replay jobs building, in preview, running or paused: cancel or "
             "finish one first",
             HOOKD_REPLAY_ACTIVE_MAX);
    return HOOKD_STORE_CONFLICT;
  }
  st = sq_stmt(c, SQ_RPL_INSERT,
               "INSERT INTO replay_jobs(id, tenant_id, state, filter, filter_state, actor, reason,"
               " rate_per_s, total, created_at, updated_at, filter_endpoint)"
               " VALUES (?1, ?2, 'building', ?3, ?4, ?5, ?6, ?7, 0, ?8, ?8, ?9)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, job->id);
  sq_bind_text(st, 2, job->tenant_id);
  sq_bind_text(st, 3, job->filter);
  sq_bind_text(st, 4, snap->filter_state);
  sq_bind_text(st, 5, job->actor);
  sq_bind_text(st, 6, job->reason);
  sqlite3_bind_double(st, 7, job->rate_per_s);
  sq_bind_i64(st, 8, now_ms);
  sq_bind_text(st, 9, snap->endpoint_id);
  rc = sqlite3_step(st);
  if (rc == SQLITE_CONSTRAINT) return HOOKD_STORE_EXISTS;
  if (rc != SQLITE_DONE) return sq_fail(c, "insert replay job");
  job->seq = sqlite3_last_insert_rowid(c->db);
  job->total = 0;
  job->created_ms = job->updated_ms = now_ms;
  return HOOKD_STORE_OK;
}

int sq_replay_create(hookd_store_conn *c, hookd_replay_job *job, const hookd_replay_snapshot *snap,
                     size_t *from, size_t chunk, int64_t now_ms) {
  int rc;
  if (*from == 0 && (rc = create_job_row(c, job, snap, now_ms)) != 0) return rc;
  if (*from > 0) { /* still being built, by this request: nothing else moves a building job */
    sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BUILDING,
                               "SELECT 1 FROM replay_jobs WHERE seq = ?1 AND state = 'building'"
                               " AND updated_at > ?2");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, job->seq);
    sq_bind_i64(st, 2, now_ms - HOOKD_REPLAY_BUILD_STALE_MS);
    rc = sqlite3_step(st);
    sqlite3_reset(st);
    if (rc == SQLITE_DONE) {
      snprintf(c->err, sizeof c->err, "the replay job is no longer being built");
      return HOOKD_STORE_STATE;
    }
    if (rc != SQLITE_ROW) return sq_fail(c, "read replay job");
  }
  /* each with its id, attempt count and lease token as of now, if it is still in the filter's
   * state (the snapshot was read a moment ago on another connection) */
  bool missing = snap->endpoint_id != NULL; /* items name events the endpoint still lacks */
  sqlite3_stmt *st =
      missing ? sq_stmt(c, SQ_RPL_ITEM_INSERT_MISSING,
                        "INSERT INTO replay_items(job_seq, n, delivery_seq, delivery_id,"
                        " attempts, lease_token) SELECT ?1, ?2, seq, id, 0, 0 FROM events e"
                        " WHERE seq = ?3 AND tenant_id = ?4 AND ?5 = 'missing'"
                        " AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_seq = e.seq"
                        " AND d.endpoint_id = ?6)")
              : sq_stmt(c, SQ_RPL_ITEM_INSERT,
                        "INSERT INTO replay_items(job_seq, n, delivery_seq, delivery_id,"
                        " attempts, lease_token) SELECT ?1, ?2, seq, id, attempt_count,"
                        " lease_token FROM deliveries"
                        " WHERE seq = ?3 AND tenant_id = ?4 AND state = ?5");
  if (!st) return HOOKD_STORE_ERR;
  int64_t n = job->total;
  size_t end = snap->n - *from > chunk ? *from + chunk : snap->n;
  for (size_t i = *from; i < end; i++) {
    sqlite3_reset(st);
    sq_bind_i64(st, 1, job->seq);
    sq_bind_i64(st, 2, n + 1);
    sq_bind_i64(st, 3, snap->seqs[i]);
    sq_bind_text(st, 4, job->tenant_id);
    sq_bind_text(st, 5, snap->filter_state);
    if (missing) sq_bind_text(st, 6, snap->endpoint_id);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "insert replay item");
    n += sqlite3_changes(c->db);
  }
  sqlite3_reset(st);
  /* the last chunk makes it a preview, which can be confirmed; before, a confirmation finds
   * it `building` and is refused */
  bool last = end == snap->n;
  st = sq_stmt(c, SQ_RPL_TOTAL,
               "UPDATE replay_jobs SET total = ?2, state = CASE WHEN ?3 THEN 'preview'"
               " ELSE state END, updated_at = ?4 WHERE seq = ?1 AND state = 'building'");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job->seq);
  sq_bind_i64(st, 2, n);
  sq_bind_i64(st, 3, last);
  sq_bind_i64(st, 4, now_ms);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "count replay items");
  sqlite3_reset(st);
  if (sqlite3_changes(c->db) != 1) { /* cancelled while it was built: its tenant deleted */
    snprintf(c->err, sizeof c->err, "the job was cancelled while it was built");
    return HOOKD_STORE_STATE;
  }
  job->total = n;
  *from = end;
  return HOOKD_STORE_OK;
}

int sq_replay_abandon(hookd_store_conn *c, int64_t job_seq, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ABANDON,
                             "UPDATE replay_jobs SET state = 'failed', updated_at = ?2,"
                             " finished_at = ?2 WHERE seq = ?1 AND state = 'building'");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, now_ms);
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "end a replay job's build");
}

/* ---------- reads ---------- */

static int read_counts(hookd_store_conn *c, sqlite3_stmt *st, hookd_replay_count **out,
                       size_t *n, bool with_remaining) {
  size_t cap = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (*n == cap) {
      size_t nc = cap ? cap * 2 : 8;
      hookd_replay_count *nv = realloc(*out, nc * sizeof *nv);
      if (!nv) break;
      *out = nv;
      cap = nc;
    }
    hookd_replay_count *r = &(*out)[*n];
    r->key = sq_col_str(st, 0);
    r->n = sq_col_i64(st, 1);
    r->remaining = with_remaining ? sq_col_i64(st, 2) : 0;
    if (!r->key) break;
    (*n)++;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_DONE) {
    snprintf(c->err, sizeof c->err, "read replay counts");
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

int sq_replay_get(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_job *out, hookd_replay_detail *detail) {
  int rc = read_job(c, tenant_id, id, out);
  if (rc || !detail) return rc;
  memset(detail, 0, sizeof *detail);
  /* (a `missing` job's items name events until their deliveries are made: its endpoint is the
   * filter's, all its items — a preview listed no endpoint, nor its state and health); one
   * endpoint more than HOOKD_REPLAY_ENDPOINTS_SHOWN (101) says there are more */
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BY_EP,
                             "SELECT d.endpoint_id, COUNT(*), SUM(i.result IS NULL)"
                             " FROM replay_items i JOIN deliveries d ON d.seq = i.delivery_seq"
                             " AND d.id = i.delivery_id"
                             " WHERE i.job_seq = ?1 AND NOT EXISTS (SELECT 1 FROM replay_jobs j"
                             " WHERE j.seq = ?1 AND j.filter_state = 'missing')"
                             " GROUP BY d.endpoint_id"
                             " UNION ALL SELECT j.filter_endpoint, (SELECT COUNT(*) FROM"
                             " replay_items i WHERE i.job_seq = j.seq), (SELECT COUNT(*) FROM"
                             " replay_items i WHERE i.job_seq = j.seq AND i.result IS NULL)"
                             " FROM replay_jobs j WHERE j.seq = ?1 AND j.filter_state = 'missing'"
                             " AND j.filter_endpoint IS NOT NULL"
                             " ORDER BY 2 DESC, 1 LIMIT 101");
  if (!st) goto fail;
  sq_bind_i64(st, 1, out->seq);
  if ((rc = read_counts(c, st, &detail->endpoints, &detail->n_endpoints, true)) != 0) goto fail;
  st = sq_stmt(c, SQ_RPL_SKIPPED,
               "SELECT result, COUNT(*) FROM replay_items WHERE job_seq = ?1 AND result IS NOT"
               " NULL AND result <> 'replayed' GROUP BY result ORDER BY 1");
  if (!st) goto fail;
  sq_bind_i64(st, 1, out->seq);
  if ((rc = read_counts(c, st, &detail->skipped, &detail->n_skipped, false)) != 0) goto fail;
  st = sq_stmt(c, SQ_RPL_STATES,
               "SELECT d.state, COUNT(*) FROM replay_items i JOIN deliveries d"
               " ON d.seq = i.delivery_seq AND d.id = i.delivery_id"
               " WHERE i.job_seq = ?1 AND i.result = 'replayed'"
               " GROUP BY d.state ORDER BY 1");
  if (!st) goto fail;
  sq_bind_i64(st, 1, out->seq);
  if ((rc = read_counts(c, st, &detail->states, &detail->n_states, false)) != 0) goto fail;
  return HOOKD_STORE_OK;
fail:
  hookd_replay_detail_free(detail);
  hookd_replay_job_free(out);
  return HOOKD_STORE_ERR;
}

int sq_replay_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                   hookd_replay_job **out, size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_LIST,
                             "SELECT " JOB_COLS " FROM replay_jobs WHERE tenant_id = ?1"
                             " AND (?2 = '' OR id < ?2) ORDER BY id DESC LIMIT ?3");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, tenant_id);
  sq_bind_text(st, 2, after_id ? after_id : "");
  sq_bind_i64(st, 3, limit);
  return sq_read_rows(c, st, sizeof **out, rd_job, free_jobs, (void **)out, n,
                      "list replay jobs");
}

/* ---------- taking back what was not sent (docs/replay.md "Taking back") ---------- */

/* A delivery of an ordered lane (its key, its endpoint ordered) is not taken back: the lane's
 * later deliveries wait on it, their order settled with it at the lane's head. */
#define NOT_LANED(d)                                                                            \
  " (" d ".ordering_key IS NULL OR NOT (SELECT p.ordered FROM endpoints p"                      \
  " WHERE p.id = " d ".endpoint_id))"

/* Before item n's move of delivery seq: what the move changes, as it is, and the token the move
 * gives it (bump: 1 for a replay, 0 for a retry brought forward). Not for an ordered lane's. */
static int move_keep(hookd_store_conn *c, int64_t job_seq, int64_t n, int64_t seq, int bump) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_MOVE_KEEP,
                             "INSERT OR REPLACE INTO replay_moves(job_seq, n, delivery_seq,"
                             " delivery_id, token, attempts, made, state, cycle_base,"
                             " cycle_kind, cycle_started_at, policy_id, next_attempt_at, dead_at,"
                             " dead_reason, delivered_at)"
                             " SELECT ?1, ?2, d.seq, d.id, d.lease_token + ?4, d.attempt_count, 0,"
                             " d.state, d.cycle_base, d.cycle_kind, d.cycle_started_at,"
                             " d.policy_id, d.next_attempt_at, d.dead_at, d.dead_reason,"
                             " d.delivered_at FROM deliveries d WHERE d.seq = ?3 AND"
                             NOT_LANED("d"));
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, n);
  sq_bind_i64(st, 3, seq);
  sq_bind_i64(st, 4, bump);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "keep replay move");
}

/* A `missing` job's item n made delivery seq for the event (event_seq, event_id). */
static int move_made(hookd_store_conn *c, int64_t job_seq, int64_t n, int64_t seq,
                     int64_t event_seq, const char *event_id) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_MOVE_MADE,
                             "INSERT OR REPLACE INTO replay_moves(job_seq, n, delivery_seq,"
                             " delivery_id, token, attempts, made, event_seq, event_id)"
                             " SELECT ?1, ?2, d.seq, d.id, d.lease_token, d.attempt_count, 1,"
                             " ?4, ?5 FROM deliveries d WHERE d.seq = ?3 AND" NOT_LANED("d"));
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, n);
  sq_bind_i64(st, 3, seq);
  sq_bind_i64(st, 4, event_seq);
  sq_bind_text(st, 5, event_id);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "keep replay move");
}

static int run_back(hookd_store_conn *c, int id, const char *sql, int64_t job_seq, int64_t now_ms,
                    const char *what) {
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  if (sqlite3_bind_parameter_count(st) >= 2) sq_bind_i64(st, 2, now_ms);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, what);
}

/* The inbox records of the inbound forwards a take-back restored follow them, as they followed
 * the replay (dead_lettered again, say). */
static int follow_inbound(hookd_store_conn *c, int64_t job_seq, int64_t now_ms) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BACK_INBOUND,
                             "SELECT m.delivery_seq FROM replay_moves m JOIN replay_items i"
                             " ON i.job_seq = m.job_seq AND i.n = m.n"
                             " JOIN deliveries d ON d.seq = m.delivery_seq"
                             " JOIN events e ON e.seq = d.event_seq"
                             " WHERE m.job_seq = ?1 AND i.result = 'recalling' AND m.made = 0"
                             " AND e.kind = 'inbound'");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  int64_t *seqs = NULL;
  size_t n = 0, cap = 0;
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 16;
      int64_t *nv = realloc(seqs, nc * sizeof *nv);
      if (!nv) break;
      seqs = nv;
      cap = nc;
    }
    seqs[n++] = sq_col_i64(st, 0);
  }
  sqlite3_reset(st);
  int out = rc == SQLITE_DONE ? HOOKD_STORE_OK : rc == SQLITE_ROW ? HOOKD_STORE_ERR
                                                                  : sq_fail(c, "take back");
  for (size_t i = 0; i < n && !out; i++) out = sq_inbox_follow(c, seqs[i], now_ms, NULL, NULL);
  free(seqs);
  return out;
}

/* Takes back the moves of job job_seq whose deliveries are still as the moves left them: never
 * sent since — not claimed (the move's token), or claimed and given back unsent (the release's
 * mark: released_token; a lease reclaimed, which may have been sent, has none) —, no attempt
 * since, no lease, in the state the move gave, not of an ordered lane. Each delivery is
 * restored (a made one deleted); its item goes back to the queue (requeue: a pause) or reads
 * `recalled` (a cancel). *count: how many. */
static int take_back(hookd_store_conn *c, int64_t job_seq, bool requeue, int64_t from,
                     int64_t to, int64_t now_ms, int64_t *count) {
  *count = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BACK_MARK,
                             "UPDATE replay_items SET result = 'recalling' WHERE job_seq = ?1"
                             " AND n > ?2 AND n <= ?3 AND result = 'replayed' AND n IN"
                             " (SELECT m.n FROM replay_moves m JOIN deliveries d"
                             " ON d.seq = m.delivery_seq AND d.id = m.delivery_id"
                             " WHERE m.job_seq = ?1 AND m.n > ?2 AND m.n <= ?3"
                             " AND (d.lease_token = m.token OR (d.lease_token > m.token"
                             " AND d.released_token = d.lease_token))"
                             " AND d.attempt_count = m.attempts AND d.leased_until IS NULL"
                             " AND d.state = CASE WHEN m.state = 'retrying' THEN 'retrying'"
                             " ELSE 'pending' END AND" NOT_LANED("d") ")");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, from);
  sq_bind_i64(st, 3, to);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "take back replay moves");
  int64_t taken = sqlite3_changes(c->db);
  if (!taken) return HOOKD_STORE_OK;
  int64_t first = 0; /* a pause: where the job's queue starts again */
  if (requeue) {
    st = sq_stmt(c, SQ_RPL_BACK_FIRST,
                 "SELECT MIN(n) FROM replay_items WHERE job_seq = ?1 AND result = 'recalling'");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, job_seq);
    int src = sqlite3_step(st);
    first = src == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
    sqlite3_reset(st);
    if (src != SQLITE_ROW) return sq_fail(c, "take back replay moves");
  }
  /* each delivery as it was before its move, its token bumped */
  int rc = run_back(c, SQ_RPL_BACK_RESTORE,
                    "UPDATE deliveries SET state = m.state, cycle_base = m.cycle_base,"
                    " cycle_kind = m.cycle_kind, cycle_started_at = m.cycle_started_at,"
                    " policy_id = m.policy_id, next_attempt_at = m.next_attempt_at,"
                    " dead_at = m.dead_at, dead_reason = m.dead_reason,"
                    " delivered_at = m.delivered_at, lease_token = deliveries.lease_token + 1,"
                    " updated_at = ?2 FROM replay_moves m JOIN replay_items i"
                    " ON i.job_seq = m.job_seq AND i.n = m.n"
                    " WHERE m.job_seq = ?1 AND i.result = 'recalling' AND m.made = 0"
                    " AND deliveries.seq = m.delivery_seq",
                    job_seq, now_ms, "take back replay moves");
  if (!rc) rc = follow_inbound(c, job_seq, now_ms);
  /* a made one never was: no attempt, nothing names it */
  if (!rc)
    rc = run_back(c, SQ_RPL_BACK_DELETE,
                  "DELETE FROM deliveries WHERE seq IN (SELECT m.delivery_seq FROM replay_moves m"
                  " JOIN replay_items i ON i.job_seq = m.job_seq AND i.n = m.n"
                  " WHERE m.job_seq = ?1 AND i.result = 'recalling' AND m.made = 1)",
                  job_seq, now_ms, "take back replay moves");
  /* a pause: the items queued again, each checked against its delivery as it is now (its
   * token, or for a made one its event) when the resumed job reaches it */
  if (!rc && requeue)
    rc = run_back(c, SQ_RPL_BACK_REQUEUE,
                  "UPDATE replay_items SET result = NULL,"
                  " lease_token = CASE WHEN m.made THEN replay_items.lease_token"
                  "   ELSE (SELECT d.lease_token FROM deliveries d"
                  "   WHERE d.seq = m.delivery_seq) END,"
                  " delivery_seq = CASE WHEN m.made THEN m.event_seq"
                  "   ELSE replay_items.delivery_seq END,"
                  " delivery_id = CASE WHEN m.made THEN m.event_id"
                  "   ELSE replay_items.delivery_id END"
                  " FROM replay_moves m WHERE replay_items.job_seq = ?1"
                  " AND replay_items.result = 'recalling' AND m.job_seq = replay_items.job_seq"
                  " AND m.n = replay_items.n",
                  job_seq, now_ms, "take back replay moves");
  if (!rc && !requeue)
    rc = run_back(c, SQ_RPL_BACK_END,
                  "UPDATE replay_items SET result = 'recalled' WHERE job_seq = ?1"
                  " AND result = 'recalling'",
                  job_seq, now_ms, "take back replay moves");
  if (rc) return rc;
  st = sq_stmt(c, SQ_RPL_BACK_JOB,
               "UPDATE replay_jobs SET replayed = replayed - ?2,"
               " skipped = skipped + CASE WHEN ?3 THEN 0 ELSE ?2 END,"
               " next_item = CASE WHEN ?3 THEN MIN(next_item, ?4) ELSE next_item END,"
               " scan_item = CASE WHEN ?3 THEN MIN(scan_item, ?4) ELSE scan_item END"
               " WHERE seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, taken);
  sq_bind_i64(st, 3, requeue);
  sq_bind_i64(st, 4, first);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "take back replay moves");
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
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BACK_MARKED,
                             "UPDATE replay_jobs SET back_from = CASE WHEN ?2 >= total THEN NULL"
                             " ELSE ?2 END WHERE seq = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, to);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "take back replay moves");
}

/* The replayer's share: the next chunk of up to 4 jobs' take-backs. *more: some remain. */
static int back_step(hookd_store_conn *c, int64_t now_ms, bool *more, int *recalled) {
  *more = false;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_BACK_DUE,
                             "SELECT seq, state = 'paused', back_from, total FROM replay_jobs"
                             " WHERE back_from IS NOT NULL ORDER BY seq LIMIT 4");
  if (!st) return HOOKD_STORE_ERR;
  int64_t jobs[4][4];
  int nj = 0, rc;
  while (nj < 4 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    for (int k = 0; k < 4; k++) jobs[nj][k] = sq_col_i64(st, k);
    nj++;
  }
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "due take-backs");
  for (int i = 0; i < nj; i++) {
    int64_t n = 0;
    /* (a job resumed clears its mark: only a paused or a cancelled job has one) */
    rc = back_chunk(c, jobs[i][0], jobs[i][1] != 0, jobs[i][2], now_ms, &n);
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

/* ---------- the state machine ---------- */

int sq_replay_act(hookd_store_conn *c, const char *tenant_id, const char *id,
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
  if (!to && !strcmp(from, "expired")) {
    /* the refusal is written: a preview once refused as expired stays so, whatever the clock
     * does next (a step back made it read young again, and confirmable) */
    sqlite3_stmt *st = sq_stmt(c, SQ_RPL_EXPIRE,
                               "UPDATE replay_jobs SET state = 'expired', updated_at = ?2,"
                               " finished_at = created_at + ?3"
                               " WHERE seq = ?1 AND state = 'preview'");
    if (!st) {
      hookd_replay_job_free(&j);
      return HOOKD_STORE_ERR;
    }
    sq_bind_i64(st, 1, j.seq);
    sq_bind_i64(st, 2, now_ms);
    sq_bind_i64(st, 3, HOOKD_REPLAY_PREVIEW_TTL_MS);
    if (sqlite3_step(st) != SQLITE_DONE) {
      hookd_replay_job_free(&j);
      return sq_fail(c, "expire replay preview");
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
  /* (a resume ends a pause's take-back where it is: docs/replay.md "In chunks") */
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_SET,
                             "UPDATE replay_jobs SET state = ?2, updated_at = ?3,"
                             " held_endpoint = NULL, held_since = NULL," /* (the step's word) */
                             " back_from = CASE WHEN ?4 THEN NULL ELSE back_from END,"
                             " scan_item = CASE WHEN ?4 THEN next_item ELSE scan_item END,"
                             " confirmed_at = CASE WHEN ?4 AND confirmed_at IS NULL THEN ?3"
                             "   ELSE confirmed_at END,"
                             " next_item_at = CASE WHEN ?4 THEN MAX(next_item_at, ?3)"
                             "   ELSE next_item_at END,"
                             /* (a completed job cancelled: it finished then) */
                             " finished_at = CASE WHEN ?5 THEN COALESCE(finished_at, ?3)"
                             "   ELSE finished_at END"
                             " WHERE seq = ?1 AND state = ?6");
  if (!st) {
    hookd_replay_job_free(&j);
    return HOOKD_STORE_ERR;
  }
  sq_bind_i64(st, 1, j.seq);
  sq_bind_text(st, 2, to);
  sq_bind_i64(st, 3, now_ms);
  sq_bind_i64(st, 4, start);
  sq_bind_i64(st, 5, finish);
  sq_bind_text(st, 6, from);
  rc = sqlite3_step(st);
  int64_t seq = j.seq;
  hookd_replay_job_free(&j);
  if (rc != SQLITE_DONE) return sq_fail(c, "update replay job");
  if (sqlite3_changes(c->db) != 1) return HOOKD_STORE_STATE;
  int64_t back = 0;
  if (action == HOOKD_REPLAY_PAUSE || action == HOOKD_REPLAY_CANCEL) {
    /* the first chunk now, the rest by the replayer (a cancel after a pause: from the start) */
    rc = back_chunk(c, seq, action == HOOKD_REPLAY_PAUSE, 0, now_ms, &back);
    if (rc) return rc;
  }
  rc = read_job(c, tenant_id, id, out);
  if (!rc) out->recalled = back;
  return rc;
}

/* ---------- the step ---------- */

typedef hookd_replay_due step_job; /* (store.h) */

/* The endpoint a job's items wait for after a turn: the turn's (?8), else, while items it passed
 * wait between its first open item (?2) and its frontier (?9), the first one's (a turn the rate
 * ended before it reached them: the last turn's word may name an endpoint caught up since). */
#define SQ_HELD_NOW                                                                             \
  "(CASE WHEN ?8 IS NOT NULL THEN ?8 WHEN ?2 < ?9 THEN (SELECT d.endpoint_id FROM replay_items i" \
  " JOIN deliveries d ON d.seq = i.delivery_seq AND d.id = i.delivery_id"                     \
  " WHERE i.job_seq = ?1 AND i.n = ?2) END)"

/* The open items (not decided) of job_seq from item `from` on, in order, by the open items'
 * index: up to max into out, *n of them. */
static int open_from(hookd_store_conn *c, int64_t job_seq, int64_t from, int64_t *out,
                     size_t max, size_t *n) {
  *n = 0;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_OPEN_FROM,
                             "SELECT n FROM replay_items INDEXED BY replay_items_open"
                             " WHERE job_seq = ?1 AND n >= ?2 AND result IS NULL"
                             " ORDER BY n LIMIT ?3");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, from);
  sq_bind_i64(st, 3, (int64_t)max);
  int rc = SQLITE_DONE;
  while (*n < max && (rc = sqlite3_step(st)) == SQLITE_ROW) out[(*n)++] = sq_col_i64(st, 0);
  if (*n == max) rc = SQLITE_DONE;
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "read replay items");
}

static int item_result(hookd_store_conn *c, int64_t job_seq, int64_t n, const char *result) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ITEM_SET,
                             "UPDATE replay_items SET result = ?3 WHERE job_seq = ?1 AND n = ?2"
                             " AND result IS NULL");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job_seq);
  sq_bind_i64(st, 2, n);
  sq_bind_text(st, 3, result);
  return sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "mark replay item");
}

/* ---------- held behind an endpoint (docs/replay.md) ---------- */

/* An endpoint's deliveries due and not claimed, of the cycles `kinds`: deliveries_due in due
 * order, past the leased ones (the endpoint's in flight), and but those of an ordered endpoint's
 * lanes (they wait on their lane's head, not on the endpoint). e: the endpoint's row. */
#define WAITING(kinds)                                                                          \
  " FROM deliveries d WHERE d.endpoint_id = ?1 AND d.cycle_kind IN (" kinds ")"                \
  " AND d.state IN ('pending','retrying') AND d.lane_wait = 0 AND d.next_attempt_at <= ?2"     \
  " AND (d.leased_until IS NULL OR d.leased_until <= ?2)"                                       \
  " AND (d.ordering_key IS NULL OR e.ordered = 0)"

/* What waits at endpoint_id: probed, then kept by the writer connection for
 * HOOKD_REPLAY_HOLD_POLL_MS with the steps' moves added (hookd_hold_moved; store.h). */
static int hold_seen(hookd_store_conn *c, hookd_hold_memo *m, const char *endpoint_id,
                     int64_t now_ms, hookd_hold_seen **out) {
  if ((*out = hookd_hold_find(m, endpoint_id)) || m->rows_left <= 0)
    return HOOKD_STORE_OK; /* (NULL: the step's probes are spent) */
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_HOLD,
                             "SELECT e.enabled = 1 AND e.deleted_at IS NULL,"
                             " MIN(COALESCE((SELECT d.next_attempt_at" WAITING("'live'")
                             " ORDER BY d.next_attempt_at LIMIT 1), 9e18),"
                             " COALESCE((SELECT d.next_attempt_at" WAITING("'replay'")
                             " ORDER BY d.next_attempt_at LIMIT 1), 9e18)),"
                             " (SELECT COUNT(*) FROM (SELECT 1" WAITING("'live','replay'")
                             " LIMIT ?3))"
                             " FROM endpoints e WHERE e.id = ?1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, endpoint_id);
  sq_bind_i64(st, 2, now_ms);
  sq_bind_i64(st, 3, HOOKD_REPLAY_HOLD_COUNT);
  int rc = sqlite3_step(st);
  bool row = rc == SQLITE_ROW;
  bool enabled = row && sq_col_i64(st, 0) == 1;
  double oldest = row ? sqlite3_column_double(st, 1) : 9e18;
  int64_t waiting = row ? sq_col_i64(st, 2) : 0;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read an endpoint's backlog");
  m->rows_left -= waiting + 1;
  *out = hookd_hold_add(m, endpoint_id, enabled, waiting, oldest >= 9e18 ? 0 : (int64_t)oldest,
                        now_ms);
  return *out ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
}

/* One item of a "missing" job: the event given a delivery to the job's endpoint — the item
 * then names that delivery, for the job's breakdowns — or why not ("held": not moved, the job
 * stops at it). */
static int step_missing(hookd_store_conn *c, const step_job *j, int64_t n, int64_t now_ms,
                        hookd_hold_memo *hm, const char **result, char **endpoint,
                        int64_t *bytes) {
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ITEM_EVENT,
                             "SELECT result, delivery_id, delivery_seq FROM replay_items"
                             " WHERE job_seq = ?1 AND n = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, j->seq);
  sq_bind_i64(st, 2, n);
  int rc = sqlite3_step(st);
  bool done = rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
  char *event_id = rc == SQLITE_ROW ? sq_col_str(st, 1) : NULL;
  int64_t event_seq = rc == SQLITE_ROW ? sq_col_i64(st, 2) : 0; /* (the snapshot's event) */
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "read replay item");
  if (done || !event_id || !j->endpoint_id) { /* another node's step took it */
    free(event_id);
    /* (an open item is decided by the walk, or the step fails: one left open without a result
     * would hold the job's first item for ever — out of memory reading its event's id) */
    return done ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  }
  hookd_hold_seen *hold;
  if ((rc = hold_seen(c, hm, j->endpoint_id, now_ms, &hold)) != 0 || !hold ||
      hookd_hold_behind(hold, now_ms)) {
    free(event_id);
    if (rc) return rc;
    *result = hold ? "held" : "spent";
    *endpoint = strdup(j->endpoint_id);
    return *endpoint ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
  }
  hookd_delivery dl;
  const char *why = NULL;
  rc = sq_event_deliver_why(c, j->tenant_id, event_id, event_seq, j->endpoint_id, now_ms, &dl,
                            &why, bytes);
  if (rc == HOOKD_STORE_OK) {
    rc = move_made(c, j->seq, n, dl.seq, event_seq, event_id);
    st = rc ? NULL
            : sq_stmt(c, SQ_RPL_ITEM_MADE,
                      "UPDATE replay_items SET delivery_seq = ?3, delivery_id = ?4"
                      " WHERE job_seq = ?1 AND n = ?2");
    if (!st && !rc) rc = HOOKD_STORE_ERR;
    if (st) {
      sq_bind_i64(st, 1, j->seq);
      sq_bind_i64(st, 2, n);
      sq_bind_i64(st, 3, dl.seq);
      sq_bind_text(st, 4, dl.id);
      if (sqlite3_step(st) != SQLITE_DONE) rc = sq_fail(c, "mark replay item");
      sqlite3_reset(st);
    }
    hookd_delivery_free(&dl);
    free(event_id);
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
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ITEM_GET,
                             "SELECT i.result, i.delivery_seq, d.state, d.endpoint_id,"
                             " d.attempt_count = i.attempts AND d.lease_token"
                             " = COALESCE(i.lease_token, d.lease_token)"
                             " FROM replay_items i LEFT JOIN deliveries d ON d.seq = i.delivery_seq"
                             " AND d.id = i.delivery_id"
                             " WHERE i.job_seq = ?1 AND i.n = ?2");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, j->seq);
  sq_bind_i64(st, 2, n);
  int rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    sqlite3_reset(st);
    if (rc == SQLITE_DONE) { /* cannot happen: items 1..total exist */
      *result = "gone";
      return HOOKD_STORE_OK;
    }
    return sq_fail(c, "read replay item");
  }
  bool done = sqlite3_column_type(st, 0) != SQLITE_NULL; /* another node's step took it */
  int64_t seq = sq_col_i64(st, 1);
  bool gone = sqlite3_column_type(st, 2) == SQLITE_NULL;
  const char *state = (const char *)sqlite3_column_text(st, 2);
  /* still in the filter's state, and neither attempted nor claimed since the snapshot: a
   * delivery replayed by hand meanwhile — delivered again, dead again, or held and resolved
   * without an attempt counted — is not the job's to send once more */
  bool same_state = state && !strcmp(state, j->filter_state) && sq_col_i64(st, 4) == 1;
  *endpoint = sq_col_str(st, 3);
  sqlite3_reset(st);
  rc = HOOKD_STORE_OK;
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
      rc = retry ? sq_retry_now(c, seq, now_ms, &why) : sq_replay_one(c, seq, now_ms, &why, memo);
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

static int step_job_run(hookd_store_conn *c, step_job *j, int64_t now_ms, hookd_replay_step_res *res,
                        size_t *hcap, hookd_replay_budget *left) {
  hookd_replay_walk w = {.job = j, .limit = (double)now_ms, .now_ms = now_ms, .hm = &c->hold,
                         .open_from = open_from, .item = step_item};
  int rc = hookd_replay_walk_run(c, &w, res, hcap, left);
  char *held = w.held; /* the endpoint an item waits for (docs/replay.md "Held behind…") */
  if (rc || !w.write) {
    free(held);
    return rc;
  }
  int64_t replayed = w.replayed, skipped = w.skipped;
  bool complete = w.complete;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_ADVANCE,
                             "UPDATE replay_jobs SET next_item = ?2, next_item_at = ?3,"
                             " replayed = replayed + ?4, skipped = skipped + ?5, updated_at = ?6,"
                             " state = CASE WHEN ?7 THEN 'completed' ELSE state END,"
                             " finished_at = CASE WHEN ?7 THEN ?6 ELSE finished_at END,"
                             /* held: the turn's word, else the last one's while items it
                              * passed wait (a turn that did not reach them); since: kept while
                              * the same endpoint holds the same first item */
                             " held_since = CASE WHEN x.h IS NULL THEN NULL"
                             " WHEN held_endpoint IS x.h AND (next_item = ?2"
                             " OR ?8 IS NULL) THEN held_since ELSE ?6 END,"
                             " held_endpoint = x.h, scan_item = ?9"
                             /* (read once: written out at each use, it ran up to three times) */
                             " FROM (SELECT " SQ_HELD_NOW " AS h) AS x"
                             " WHERE seq = ?1 AND state = 'running'");
  if (!st) {
    free(held);
    return HOOKD_STORE_ERR;
  }
  sq_bind_i64(st, 1, j->seq);
  sq_bind_i64(st, 2, w.next);
  sq_bind_i64(st, 3, (int64_t)ceil(w.at)); /* whole ms, up: never over the rate (replay.md) */
  sq_bind_i64(st, 4, replayed);
  sq_bind_i64(st, 5, skipped);
  sq_bind_i64(st, 6, now_ms);
  sq_bind_i64(st, 7, complete);
  sq_bind_text(st, 8, held);
  sq_bind_i64(st, 9, w.frontier);
  rc = sqlite3_step(st) == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, "advance replay job");
  sqlite3_clear_bindings(st); /* (held is freed next) */
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
    if ((rc = sq_audit_append(c, &a)) != 0) return rc;
    char **nv = realloc(res->completed, (res->n_completed + 1) * sizeof *nv);
    if (!nv) return HOOKD_STORE_ERR;
    res->completed = nv;
    if (!(nv[res->n_completed] = strdup(j->id))) return HOOKD_STORE_ERR;
    res->n_completed++;
  }
  return HOOKD_STORE_OK;
}

int sq_replay_step(hookd_store_conn *c, int64_t now_ms, hookd_replay_step_res *res) {
  hookd_replay_step_res_free(res); /* a redone batch runs the op again */
  hookd_hold_sweep(&c->hold, now_ms);
  bool backs = false;
  int brc = back_step(c, now_ms, &backs, &res->recalled);
  if (brc) return brc;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_DUE,
                             "SELECT seq, id, tenant_id, filter_state, rate_per_s, total,"
                             " next_item, next_item_at, replayed, skipped, filter_endpoint,"
                             " held_since, scan_item"
                             " FROM replay_jobs"
                             " WHERE state = 'running' AND (next_item_at <= ?1"
                             " OR next_item_at > ?1 + 1000 + 1000.0 / rate_per_s)"
                             " ORDER BY next_item_at LIMIT 16");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, now_ms);
  step_job jobs[16];
  size_t nj = 0;
  int rc;
  while (nj < 16 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    step_job *j = &jobs[nj];
    j->seq = sq_col_i64(st, 0);
    j->id = sq_col_str(st, 1);
    j->tenant_id = sq_col_str(st, 2);
    j->filter_state = sq_col_str(st, 3);
    j->rate = sqlite3_column_double(st, 4);
    j->total = sq_col_i64(st, 5);
    j->next_item = sq_col_i64(st, 6);
    j->next_at = sq_col_i64(st, 7);
    j->replayed = sq_col_i64(st, 8);
    j->skipped = sq_col_i64(st, 9);
    j->endpoint_id = sq_col_str(st, 10);
    j->held_since = sq_col_i64(st, 11);
    j->scan_item = sq_col_i64(st, 12);
    nj++;
    if (!j->id || !j->tenant_id || !j->filter_state || !(j->rate > 0)) {
      rc = SQLITE_NOMEM;
      break;
    }
  }
  sqlite3_reset(st);
  int out = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? HOOKD_STORE_OK : sq_fail(c, "due replay jobs");
  size_t hcap = 0;
  hookd_replay_budget left = {.bytes = HOOKD_REPLAY_STEP_BYTES, .items = HOOKD_REPLAY_STEP_ITEMS};
  for (size_t i = 0; i < nj && !out; i++)
    out = step_job_run(c, &jobs[i], now_ms, res, &hcap, &left);
  for (size_t i = 0; i < nj; i++) {
    free(jobs[i].id);
    free(jobs[i].tenant_id);
    free(jobs[i].filter_state);
    free(jobs[i].endpoint_id);
  }
  if (out) return out;
  st = sq_stmt(c, SQ_RPL_NEXT,
               "SELECT MIN(next_item_at) FROM replay_jobs WHERE state = 'running'");
  if (!st) return HOOKD_STORE_ERR;
  rc = sqlite3_step(st);
  bool any = rc == SQLITE_ROW && sqlite3_column_type(st, 0) != SQLITE_NULL;
  res->next_ms = any ? sq_col_i64(st, 0) : 0;
  if (any && res->next_ms <= 0) res->next_ms = 1;
  if (backs && (!res->next_ms || res->next_ms > now_ms)) res->next_ms = now_ms; /* (50 ms) */
  sqlite3_reset(st);
  return rc == SQLITE_ROW ? HOOKD_STORE_OK : sq_fail(c, "next replay step");
}

/* ---------- retention of ended jobs' items ---------- */

int sq_replay_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                    int *purged, bool *more) {
  *purged = 0;
  *more = false;
  sqlite3_stmt *st = sq_stmt(c, SQ_RPL_PURGE_JOB,
                             /* (a take-back still to walk needs its moves) */
                             "SELECT seq FROM replay_jobs WHERE items_purged_at IS NULL AND"
                             " back_from IS NULL AND (finished_at < ?1"
                             " OR (state = 'preview' AND created_at < ?2)"
                             " OR (state = 'building' AND updated_at < ?1))"
                             " ORDER BY seq LIMIT 1");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, before_ms);
  sq_bind_i64(st, 2, before_ms - HOOKD_REPLAY_PREVIEW_TTL_MS);
  int rc = sqlite3_step(st);
  int64_t job = rc == SQLITE_ROW ? sq_col_i64(st, 0) : 0;
  sqlite3_reset(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return sq_fail(c, "find ended replay jobs");
  if (!job) return HOOKD_STORE_OK;
  st = sq_stmt(c, SQ_RPL_PURGE_MOVES,
               "DELETE FROM replay_moves WHERE job_seq = ?1 AND n IN"
               " (SELECT n FROM replay_items WHERE job_seq = ?1 ORDER BY n LIMIT ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job);
  sq_bind_i64(st, 2, limit);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "purge replay moves");
  st = sq_stmt(c, SQ_RPL_PURGE_ITEMS,
               "DELETE FROM replay_items WHERE job_seq = ?1 AND n IN"
               " (SELECT n FROM replay_items WHERE job_seq = ?1 ORDER BY n LIMIT ?2)");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_i64(st, 1, job);
  sq_bind_i64(st, 2, limit);
  if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "purge replay items");
  *purged = sqlite3_changes(c->db);
  *more = true; /* this job may hold more, or another may wait */
  if (*purged < limit) {
    st = sq_stmt(c, SQ_RPL_PURGE_MARK,
                 "UPDATE replay_jobs SET items_purged_at = ?2 WHERE seq = ?1");
    if (!st) return HOOKD_STORE_ERR;
    sq_bind_i64(st, 1, job);
    sq_bind_i64(st, 2, now_ms);
    if (sqlite3_step(st) != SQLITE_DONE) return sq_fail(c, "mark replay job purged");
  }
  return HOOKD_STORE_OK;
}

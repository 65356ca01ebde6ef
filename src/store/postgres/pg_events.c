/* pg_events.c — PostgreSQL backend: publish (event + idempotency + fan-out), event and delivery
 * reads and lists, replay, and an operator's delivery of an event to one endpoint. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ids.h"
#include "core/payload_filter.h"
#include "store/postgres/pg_int.h"

/* ---------- row readers ---------- */

void pg_read_delivery(const PGresult *r, int row, int i, hookd_delivery *d) {
  memset(d, 0, sizeof *d);
  d->seq = pg_i64(r, row, i + 0);
  d->id = pg_str(r, row, i + 1);
  d->event_seq = pg_i64(r, row, i + 2);
  d->event_id = pg_str(r, row, i + 3);
  d->event_type = pg_str(r, row, i + 4);
  d->endpoint_id = pg_str(r, row, i + 5);
  d->tenant_id = pg_str(r, row, i + 6);
  const char *state = pg_val(r, row, i + 7);
  hookd_dstate s = HOOKD_DS_PENDING;
  if (state) hookd_dstate_parse(state, &s);
  d->state = s;
  d->attempt_count = (int)pg_i64(r, row, i + 8);
  d->cycle_base = (int)pg_i64(r, row, i + 9);
  d->cycle_started_ms = pg_i64(r, row, i + 10);
  d->next_attempt_ms = pg_i64(r, row, i + 11);
  d->lease_owner = pg_str(r, row, i + 12);
  d->lease_token = pg_i64(r, row, i + 13);
  d->leased_until_ms = pg_i64(r, row, i + 14);
  d->last_error = pg_str(r, row, i + 15);
  d->last_status = (int)pg_i64(r, row, i + 16);
  d->policy_id = pg_i64(r, row, i + 17);
  d->created_ms = pg_i64(r, row, i + 18);
  d->updated_ms = pg_i64(r, row, i + 19);
  d->delivered_ms = pg_i64(r, row, i + 20);
  d->dead_ms = pg_i64(r, row, i + 21);
  d->dead_reason = pg_str(r, row, i + 22);
  const char *kind = pg_val(r, row, i + 23);
  d->replay_cycle = kind && strcmp(kind, "replay") == 0;
  d->ordering_key = pg_str(r, row, i + 24);
  d->result_ref = pg_str(r, row, i + 25);
}

static void rd_delivery(const PGresult *r, int row, void *rec) {
  pg_read_delivery(r, row, 0, rec);
}

int pg_read_deliveries(hookd_store_conn *c, PGresult *r, hookd_delivery **out, size_t *n) {
  return pg_read_rows(c, r, sizeof **out, rd_delivery, (void **)out, n,
                      "read deliveries: out of memory");
}

/* ---------- publish ---------- */

/* A repeated publish's answer, as the first one's: its deliveries, and of those the ones
 * created DEAD "superseded" (only creation gives that reason). */
static int count_deliveries(hookd_store_conn *c, int64_t event_seq, hookd_publish_res *res) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, event_seq);
  PGresult *r = pg_q(c,
                     "SELECT COUNT(*),"
                     " COALESCE(SUM(CASE WHEN dead_reason = 'superseded' THEN 1 ELSE 0 END), 0)"
                     " FROM deliveries WHERE event_seq = $1",
                     &p, "count deliveries");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return pg_fail(c, "count deliveries");
  }
  res->n_deliveries = (int)pg_i64(r, 0, 0);
  res->n_superseded = (int)pg_i64(r, 0, 1);
  PQclear(r);
  return HOOKD_STORE_OK;
}

static int event_by_key(hookd_store_conn *c, const char *tenant_id, const char *id,
                        int64_t *seq, unsigned char hash[32]) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c, "SELECT seq, request_hash FROM events WHERE id = $1 AND tenant_id = $2",
                     &p, "find event");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  *seq = pg_i64(r, 0, 0);
  memset(hash, 0, 32);
  size_t len = 0;
  unsigned char *h = pg_blob(r, 0, 1, &len);
  PQclear(r);
  if (h && len == 32) memcpy(hash, h, 32);
  free(h);
  return HOOKD_STORE_OK;
}

/* Records a new Idempotency-Key for the event it created or found. The lookup before it ran in
 * the same write transaction (one writer), so the key is free; were it taken meanwhile, the
 * insert writes nothing (never a second row, and no failing statement: that would abort the
 * transaction) and the publish fails loudly. */
static int idem_insert(hookd_store_conn *c, const hookd_publish_req *req, int64_t seq) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->tenant_id);
  pg_p_text(&p, req->idempotency_key);
  pg_p_blob(&p, req->request_hash, 32);
  pg_p_i64(&p, req->now_ms);
  pg_p_i64(&p, seq);
  int64_t n = pg_x(c,
                   "INSERT INTO idempotency_keys(tenant_id, key, request_hash, created_at,"
                   " event_seq) VALUES ($1, $2, $3, $4, $5)"
                   " ON CONFLICT (tenant_id, key) DO NOTHING",
                   &p, "insert idempotency key");
  if (n < 0) return HOOKD_STORE_ERR;
  if (n == 0) return pg_fail(c, "insert idempotency key: the key is taken");
  return HOOKD_STORE_OK;
}

/* Versions in order on an ordered endpoint's lane: *superseded when a higher version than v was
 * given to the lane before (the receiver has it, or will, and must not go back to v); otherwise v
 * is recorded as the lane's highest (*raised: a DEAD head of a lower version may hold the lane no
 * more). Equal versions go through. */
static int lane_version(hookd_store_conn *c, const char *endpoint_id, const char *key, int64_t v,
                        int64_t now_ms, bool *superseded, bool *raised) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, key);
  PGresult *r = pg_q(c,
                     "SELECT version FROM lane_versions WHERE endpoint_id = $1"
                     " AND ordering_key = $2",
                     &p, "read lane version");
  if (!r) return HOOKD_STORE_ERR;
  bool known = PQntuples(r) > 0;
  int64_t seen = known ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  *superseded = known && v < seen;
  *raised = false;
  if (*superseded || (known && v == seen)) return HOOKD_STORE_OK;
  *raised = true;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, key);
  pg_p_i64(&p, v);
  pg_p_i64(&p, now_ms);
  return pg_x(c,
              "INSERT INTO lane_versions(endpoint_id, ordering_key, version, seen_at)"
              " VALUES ($1, $2, $3, $4) ON CONFLICT (endpoint_id, ordering_key)"
              " DO UPDATE SET version = EXCLUDED.version, seen_at = EXCLUDED.seen_at",
              &p, "record lane version") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* A lane's open deliveries (pending, retrying, held unknown) of endpoint $1: the terms of the
 * deliveries_lane_open index, so every lane lookup below is a probe of it. */
#define LANE_OPEN_ROWS                                                                          \
  " FROM deliveries WHERE endpoint_id = $1 AND ordering_key IS NOT NULL"                        \
  " AND state IN ('pending','retrying','unknown')"

/* *wait = 1 when a new delivery of lane `key` of the endpoint waits: the lane has an open
 * delivery, or (a block endpoint) a DEAD one holds it at now_ms. The DEAD rows are probed only
 * when no open one is there. */
static int lane_hint(hookd_store_conn *c, const char *endpoint_id, const char *key,
                     int64_t now_ms, int64_t *wait) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, key);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c,
                     "SELECT CASE WHEN EXISTS (SELECT 1" LANE_OPEN_ROWS " AND ordering_key = $2)"
                     " THEN 1 WHEN NOT EXISTS (SELECT 1 FROM endpoints ep WHERE ep.id = $1"
                     " AND ep.ordered = 1 AND ep.lane_policy = 'block' AND ep.deleted_at IS NULL)"
                     " THEN 0 WHEN EXISTS ("
                     PG_LANE_DEAD_HOLDS("$1::text", "$2::text", PG_SEQ_MAX, "$3::bigint")
                     ") THEN 1 ELSE 0 END",
                     &p, "read lane");
  *wait = 0;
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) != 1) {
    PQclear(r);
    return pg_fail(c, "read lane");
  }
  *wait = pg_i64(r, 0, 0);
  PQclear(r);
  return HOOKD_STORE_OK;
}

int pg_lane_advance(hookd_store_conn *c, int64_t seq, int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, now_ms);
  return pg_x(c,
              PG_LANE_SETTLE_SQL("(SELECT n.seq FROM deliveries me, deliveries n"
                                 " WHERE me.seq = $1 AND me.ordering_key IS NOT NULL"
                                 " AND n.endpoint_id = me.endpoint_id"
                                 " AND n.ordering_key = me.ordering_key"
                                 " AND n.ordering_key IS NOT NULL"
                                 " AND n.state IN ('pending','retrying','unknown')"
                                 " ORDER BY n.seq LIMIT 1)",
                                 "$2::bigint"),
              &p, "advance lane") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* The same for lane `key` of an endpoint: after its version was raised, a DEAD head of a lower
 * one holds it no more. */
static int lane_settle(hookd_store_conn *c, const char *endpoint_id, const char *key,
                       int64_t now_ms) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, endpoint_id);
  pg_p_text(&p, key);
  pg_p_i64(&p, now_ms);
  return pg_x(c,
              PG_LANE_SETTLE_SQL("(SELECT seq" LANE_OPEN_ROWS " AND ordering_key = $2"
                                 " ORDER BY seq LIMIT 1)",
                                 "$3::bigint"),
              &p, "settle lane") < 0
             ? HOOKD_STORE_ERR
             : HOOKD_STORE_OK;
}

/* The delivery insert of the fan-out (SQLite's SQ_DL_INSERT_SQL): seq by the identity. */
static const char dl_insert_sql[] =
    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"
    " next_attempt_at, policy_id, created_at, updated_at, ordering_key, lane_wait)"
    " VALUES ($1, $2, $3, $4, 'pending', $5, $5, $6, $5, $5, $7, COALESCE($8::bigint, 0))"
    " ON CONFLICT (event_seq, endpoint_id) DO NOTHING";

/* A delivery created DEAD "superseded": a lower ordering_version than its lane has seen. */
static const char dl_insert_superseded_sql[] =
    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state,"
    " cycle_started_at, next_attempt_at, policy_id, created_at, updated_at,"
    " ordering_key, dead_at, dead_reason)"
    " VALUES ($1, $2, $3, $4, 'dead', $5, $5, $6, $5, $5, $7, $5, 'superseded')"
    " ON CONFLICT (event_seq, endpoint_id) DO NOTHING";

/* The columns of the publish statement's rows (publish_sql): the tenant found (0/1), the new
 * event's seq (NULL: the id was taken), then one of the tenant's endpoints per row (all NULL
 * on the one row of a tenant without any). */
enum { PUB_TENANT, PUB_SEQ, PUB_EP_ID, PUB_EP_TYPES, PUB_EP_POLICY, PUB_EP_ORDERED,
       PUB_EP_CHANNELS, PUB_EP_PFILTER };

/* Records a delivery made by the fan-out in res (its endpoint, for the dispatcher). */
static void fanned_out(hookd_publish_res *res, const char *ep_id) {
  res->n_deliveries++;
  if (res->n_endpoints < HOOKD_FANOUT_MAX)
    res->endpoints[res->n_endpoints++] = strdup(ep_id);
  else
    res->endpoints_truncated = true;
}

/* One ordered endpoint's delivery of a new event with an ordering key (eps, row: the publish
 * statement's row): its lane is read first. */
static int fan_out_lane(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res,
                        const PGresult *eps, int row, int64_t seq) {
  int rc;
  char did[HOOKD_ID_MAX];
  if (hookd_id_new("dlv", req->now_ms, did) != 0) return pg_fail(c, "new delivery id");
  const char *ep_id = PQgetvalue(eps, row, PUB_EP_ID);
  bool superseded = false, raised = false;
  if (req->has_ordering_version &&
      (rc = lane_version(c, ep_id, req->ordering_key, req->ordering_version, req->now_ms,
                         &superseded, &raised)) != 0)
    return rc;
  int64_t wait = 0; /* behind an open delivery of its lane, or a DEAD one that holds it: left
                     * out of the due index */
  if (!superseded &&
      (rc = lane_hint(c, ep_id, req->ordering_key, req->now_ms, &wait)) != 0)
    return rc;
  if (raised && wait && (rc = lane_settle(c, ep_id, req->ordering_key, req->now_ms)) != 0)
    return rc;
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, did);
  pg_p_i64(&p, seq);
  pg_p_text(&p, ep_id);
  pg_p_text(&p, req->tenant_id);
  pg_p_i64(&p, req->now_ms);
  pg_p_i64(&p, pg_i64(eps, row, PUB_EP_POLICY));
  pg_p_text(&p, req->ordering_key);
  if (!superseded) pg_p_i64(&p, wait);
  int64_t n = pg_x(c, superseded ? dl_insert_superseded_sql : dl_insert_sql, &p,
                   "insert delivery");
  if (n < 0) return HOOKD_STORE_ERR;
  if (n == 0) return HOOKD_STORE_OK;
  if (superseded) {
    res->n_deliveries++;
    res->n_superseded++;
    return HOOKD_STORE_OK; /* nothing for the dispatcher */
  }
  fanned_out(res, ep_id);
  return HOOKD_STORE_OK;
}

/* pg_insert_deliveries' statement (docs/postgres.md "Round trips"): $1 event seq, $2 tenant,
 * $3 now, $4 ordering key, then arrays of the delivery ids, endpoint ids and policy ids. Its
 * rows: the endpoints that got one. */
static const char dl_insert_many_sql[] =
    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"
    " next_attempt_at, policy_id, created_at, updated_at, ordering_key, lane_wait)"
    " SELECT x.id, $1::bigint, x.ep, $2::text, 'pending', $3::bigint, $3::bigint, x.pid,"
    " $3::bigint, $3::bigint, $4::text, 0"
    " FROM unnest($5::text[], $6::text[], $7::bigint[]) AS x(id, ep, pid)"
    " ON CONFLICT (event_seq, endpoint_id) DO NOTHING RETURNING endpoint_id";

PGresult *pg_insert_deliveries(hookd_store_conn *c, int64_t event_seq, const char *tenant_id,
                               int64_t now_ms, const char *ordering_key, pg_arr *ids,
                               pg_arr *endpoints, pg_arr *policies) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, event_seq);
  pg_p_text(&p, tenant_id);
  pg_p_i64(&p, now_ms);
  pg_p_text(&p, ordering_key);
  pg_p_text(&p, pg_arr_done(ids));
  pg_p_text(&p, pg_arr_done(endpoints));
  pg_p_text(&p, pg_arr_done(policies));
  if (!p.v[4] || !p.v[5] || !p.v[6]) {
    pg_fail(c, "insert deliveries: out of memory");
    return NULL;
  }
  return pg_q(c, dl_insert_many_sql, &p, "insert delivery");
}

/* A publish that ran out of memory for its answer fails before its commit: nothing is kept, and
 * its client is told so (503) instead of being answered 500 for an event it then sends again. */
static int publish_oom(hookd_store_conn *c) { return pg_fail(c, "publish: out of memory"); }

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

/* The fan-out: one delivery per live, enabled endpoint whose filter matches (eps: the publish
 * statement's rows). The filters run here; the deliveries of the endpoints without a lane to
 * read go in one statement. */
static int fan_out(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res,
                   const PGresult *eps, int64_t seq) {
  json_t *parsed = NULL; /* the envelope, parsed for the first filter (no req->payload) */
  long filter_steps = HOOKD_PFILTER_EVENT_BUDGET; /* for all the payload filters together */
  pg_arr ids, many, policies;
  pg_arr_init(&ids);
  pg_arr_init(&many);
  pg_arr_init(&policies);
  int rc = HOOKD_STORE_OK, rows = PQntuples(eps), n_many = 0;
  for (int i = 0; i < rows && rc == HOOKD_STORE_OK; i++) {
    const char *ep_id = pg_val(eps, i, PUB_EP_ID);
    if (!ep_id) continue; /* the tenant has no endpoint */
    const char *filter = pg_val(eps, i, PUB_EP_TYPES);
    const char *pfilter = pg_val(eps, i, PUB_EP_PFILTER);
    if (req->only_endpoint ? strcmp(ep_id, req->only_endpoint) != 0
                           : !hookd_filter_match(filter, req->type) ||
                                 !hookd_channels_match(pg_val(eps, i, PUB_EP_CHANNELS),
                                                       req->channels))
      continue;
    if (!req->only_endpoint && pfilter) {
      int takes = hookd_publish_pfilter(&c->pf, pfilter, req, &parsed, &filter_steps);
      if (takes == HOOKD_PFILTER_OVER) res->filters_over++;
      if (takes != HOOKD_PFILTER_YES) continue;
    }
    if (req->ordering_key && pg_i64(eps, i, PUB_EP_ORDERED)) {
      rc = fan_out_lane(c, req, res, eps, i, seq);
      continue;
    }
    char did[HOOKD_ID_MAX];
    if (hookd_id_new("dlv", req->now_ms, did) != 0) {
      rc = pg_fail(c, "new delivery id");
      break;
    }
    pg_arr_text(&ids, did);
    pg_arr_text(&many, ep_id);
    pg_arr_i64(&policies, pg_i64(eps, i, PUB_EP_POLICY));
    n_many++;
  }
  if (rc == HOOKD_STORE_OK && n_many) {
    PGresult *r = pg_insert_deliveries(c, seq, req->tenant_id, req->now_ms, req->ordering_key,
                                       &ids, &many, &policies);
    if (!r) rc = HOOKD_STORE_ERR;
    for (int i = 0; r && i < PQntuples(r); i++) fanned_out(res, PQgetvalue(r, i, 0));
    PQclear(r);
  }
  pg_arr_free(&ids);
  pg_arr_free(&many);
  pg_arr_free(&policies);
  json_decref(parsed);
  return rc;
}

/* The event's insert under its tenant's check, and the tenant's endpoints for the fan-out, in
 * one statement (docs/postgres.md "Round trips"; its columns: PUB_*). A tenant not found inserts
 * nothing (no failing statement: the foreign key is never tried); a taken event id neither,
 * and returns no seq: the lookup then tells a duplicate from a conflict. */
static const char publish_sql[] =
    "WITH t AS (SELECT 1 FROM tenants WHERE id = $2 AND deleted_at IS NULL),"
    " ins AS (INSERT INTO events(id, tenant_id, type, body, request_hash,"
    " occurred_at, created_at, expires_at, ordering_key, ordering_version,"
    " schema_version, channels, test_endpoint)"
    " SELECT $1::text, $2::text, $3::text, $4::bytea, $5::bytea, $6::bigint, $7::bigint,"
    " $8::bigint, $9::text, $10::bigint, $11::text, $12::text, $13::text FROM t"
    " ON CONFLICT (id, tenant_id) DO NOTHING RETURNING seq)"
    " SELECT (SELECT count(*) FROM t), (SELECT seq FROM ins), ep.id, ep.event_types,"
    " ep.policy_id, ep.ordered, ep.channels, ep.payload_filter"
    " FROM (SELECT 1) one LEFT JOIN endpoints ep ON ep.tenant_id = $2::text"
    " AND ep.deleted_at IS NULL AND ep.enabled = 1 AND ep.source_id IS NULL";

int pg_publish(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res) {
  memset(res, 0, sizeof *res); /* (a second run of a redone batch: the caller freed the first's) */
  int rc;
  /* the reads below answer only for a live tenant: it is checked first; otherwise the publish
   * statement checks it */
  if (req->only_endpoint || req->idempotency_key || req->existing_only) {
    hookd_tenant t;
    if ((rc = pg_tenant_get(c, req->tenant_id, &t)) != 0) return rc;
    hookd_tenant_free(&t);
  }

  /* Every refusal (unknown tenant, a key or an event id used with another body) comes before
   * the first write: publish runs without a savepoint of its own (storeq.h). None is a failing
   * statement either: on PostgreSQL that would abort the whole batch's transaction. */
  if (req->idempotency_key) {
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, req->tenant_id);
    pg_p_text(&p, req->idempotency_key);
    PGresult *r = pg_q(c,
                       "SELECT i.request_hash, i.event_seq, e.id FROM idempotency_keys i"
                       " LEFT JOIN events e ON e.seq = i.event_seq"
                       " WHERE i.tenant_id = $1 AND i.key = $2",
                       &p, "read idempotency key");
    if (!r) return HOOKD_STORE_ERR;
    if (PQntuples(r) > 0) {
      size_t len = 0;
      unsigned char *h = pg_blob(r, 0, 0, &len);
      bool same = hookd_publish_same_request(req, h, len);
      free(h);
      if (!same) {
        PQclear(r);
        snprintf(c->err, sizeof c->err,
                 "Idempotency-Key was already used with a different request body");
        res->key_conflict = true;
        return HOOKD_STORE_CONFLICT;
      }
      if (pg_null(r, 0, 2)) {
        PQclear(r);
        return pg_fail(c, "read idempotency key");
      }
      int64_t seq = pg_i64(r, 0, 1);
      res->event_id = pg_str(r, 0, 2);
      res->duplicate = true;
      PQclear(r);
      return count_deliveries(c, seq, res);
    }
    PQclear(r);
  }
  /* a test event: its one endpoint must take it — checked after its Idempotency-Key, so that
   * a test sent again gets its first answer when the endpoint was disabled or deleted since */
  if (req->only_endpoint) {
    hookd_endpoint ep;
    rc = pg_endpoint_get(c, req->only_endpoint, &ep);
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

  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, req->event_id);
  pg_p_text(&p, req->tenant_id);
  pg_p_text(&p, req->type);
  pg_p_blob(&p, req->body, req->body_len);
  pg_p_blob(&p, req->request_hash, 32);
  pg_p_i64(&p, req->occurred_ms);
  pg_p_i64(&p, req->now_ms);
  pg_p_i64n(&p, req->expires_ms);
  pg_p_text(&p, req->ordering_key);
  /* (a version of 0 is a version: read back as one, by GET and by a delivery made later) */
  if (req->has_ordering_version) pg_p_i64(&p, req->ordering_version);
  else pg_p_text(&p, NULL);
  pg_p_text(&p, req->schema_version);
  pg_p_text(&p, req->channels);
  pg_p_text(&p, req->only_endpoint);
  PGresult *r = pg_q(c, publish_sql, &p, "insert event");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) < 1 || !pg_i64(r, 0, PUB_TENANT)) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND; /* (as pg_tenant_get answers) */
  }
  if (pg_null(r, 0, PUB_SEQ)) {
    PQclear(r);
    return existing_event(c, req, res);
  }
  int64_t seq = pg_i64(r, 0, PUB_SEQ);
  pg_wrote(c, 1);
  if (req->idempotency_key && (rc = idem_insert(c, req, seq)) != 0) {
    PQclear(r);
    return rc;
  }
  if (!(res->event_id = strdup(req->event_id))) {
    PQclear(r);
    return publish_oom(c);
  }
  res->due_ms = req->now_ms;
  rc = fan_out(c, req, res, r, seq);
  PQclear(r);
  return rc;
}

/* ---------- reads ---------- */

/* An event's schema_version, ordering_key, ordering_version, channels and test_endpoint, from
 * column i on. */
static void read_event_extras(const PGresult *r, int row, int i, hookd_event *e) {
  e->schema_version = pg_str(r, row, i);
  e->ordering_key = pg_str(r, row, i + 1);
  e->has_ordering_version = !pg_null(r, row, i + 2);
  e->ordering_version = pg_i64(r, row, i + 2);
  e->channels = pg_str(r, row, i + 3);
  e->test_endpoint = pg_str(r, row, i + 4);
}

int pg_event_get(hookd_store_conn *c, const char *tenant_id, const char *id, hookd_event *ev,
                 hookd_delivery **dl, size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c,
                     "SELECT seq, id, tenant_id, type, body, occurred_at, created_at,"
                     " expires_at, kind, content_type, meta, purged_at, schema_version,"
                     " ordering_key, ordering_version, channels, test_endpoint FROM events"
                     " WHERE id = $1"
                     " AND ($2::text IS NULL OR tenant_id = $2) LIMIT 2",
                     &p, "get event");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  if (PQntuples(r) > 1) {
    PQclear(r);
    snprintf(c->err, sizeof c->err, "event id is used by several tenants");
    return HOOKD_STORE_CONFLICT;
  }
  memset(ev, 0, sizeof *ev);
  ev->seq = pg_i64(r, 0, 0);
  ev->id = pg_str(r, 0, 1);
  ev->tenant_id = pg_str(r, 0, 2);
  ev->type = pg_str(r, 0, 3);
  ev->body = (char *)pg_blob(r, 0, 4, &ev->body_len); /* NUL-terminated */
  ev->occurred_ms = pg_i64(r, 0, 5);
  ev->created_ms = pg_i64(r, 0, 6);
  ev->expires_ms = pg_i64(r, 0, 7);
  const char *kind = pg_val(r, 0, 8);
  ev->inbound = kind && !strcmp(kind, "inbound");
  ev->content_type = pg_str(r, 0, 9);
  ev->meta = pg_str(r, 0, 10);
  ev->purged_ms = pg_i64(r, 0, 11);
  read_event_extras(r, 0, 12, ev);
  PQclear(r);
  if (!ev->body) {
    hookd_event_free(ev);
    return pg_fail(c, "get event: out of memory");
  }
  if (!dl) return HOOKD_STORE_OK;
  pg_p_init(&p);
  pg_p_i64(&p, ev->seq);
  r = pg_q(c,
           "SELECT " PG_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
           " WHERE d.event_seq = $1 ORDER BY d.id",
           &p, "read deliveries");
  int rc = pg_read_deliveries(c, r, dl, n);
  if (rc) hookd_event_free(ev);
  return rc;
}

/* a tenant's events as a list (sqlite_events.c): newest first by seq on the events_tenant index,
 * filtered by type (or prefix), kind and publish time, paged by seq. The bodies stay in the
 * table: a list shows what each event is, one event its payload. */
static void rd_event(const PGresult *r, int row, void *rec) {
  hookd_event *e = rec;
  memset(e, 0, sizeof *e);
  e->seq = pg_i64(r, row, 0);
  e->id = pg_str(r, row, 1);
  e->tenant_id = pg_str(r, row, 2);
  e->type = pg_str(r, row, 3);
  e->occurred_ms = pg_i64(r, row, 4);
  e->created_ms = pg_i64(r, row, 5);
  e->expires_ms = pg_i64(r, row, 6);
  const char *kind = pg_val(r, row, 7);
  e->inbound = kind && !strcmp(kind, "inbound");
  e->purged_ms = pg_i64(r, row, 8);
  read_event_extras(r, row, 9, e);
}

int pg_event_list(hookd_store_conn *c, const hookd_event_filter *f, hookd_event **out,
                  size_t *n) {
  pg_params p;
  char *prefix;
  pg_p_init(&p);
  pg_p_text(&p, f->tenant_id);
  pg_p_i64(&p, f->before_seq > 0 ? f->before_seq : INT64_MAX);
  if (pg_bind_type_filter(&p, f->event_type, &prefix) != 0)
    return pg_fail(c, "list events: out of memory");
  pg_p_text(&p, f->kind == 1 ? "outbound" : f->kind == 2 ? "inbound" : NULL);
  pg_p_i64(&p, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  pg_p_i64(&p, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  pg_p_i64(&p, f->limit);
  pg_p_text(&p, f->channel);
  PGresult *r = pg_q(c,
                     "SELECT seq, id, tenant_id, type, occurred_at, created_at, expires_at,"
                     " kind, purged_at, schema_version, ordering_key, ordering_version,"
                     " channels, test_endpoint FROM events WHERE tenant_id = $1"
                     " AND seq < $2"
                     " AND ($3::text IS NULL OR type = $3)"
                     " AND ($4::text IS NULL OR length(type) > length($4::text)"
                     " AND substr(type, 1, length($4::text)) = $4)"
                     " AND ($5::text IS NULL OR kind = $5)"
                     " AND created_at >= $6 AND created_at < $7"
                     /* one of its channels (comma-separated; a name holds no comma) */
                     " AND ($9::text IS NULL OR strpos(',' || channels || ',', ',' || $9 || ',')"
                     " > 0) ORDER BY seq DESC LIMIT $8",
                     &p, "list events");
  free(prefix);
  return pg_read_rows(c, r, sizeof **out, rd_event, (void **)out, n,
                      "list events: out of memory");
}

static void rd_attempt(const PGresult *r, int row, void *rec) {
  hookd_attempt *a = rec;
  memset(a, 0, sizeof *a);
  a->number = (int)pg_i64(r, row, 0);
  a->started_ms = pg_i64(r, row, 1);
  a->finished_ms = pg_i64(r, row, 2);
  a->outcome = pg_str(r, row, 3);
  a->http_status = (int)pg_i64(r, row, 4);
  a->latency_ms = pg_i64(r, row, 5);
  a->error = pg_str(r, row, 6);
  a->response = (char *)pg_blob(r, row, 7, &a->response_len);
  if (!a->response_len) { /* none (or empty): NULL, as the SQLite store gives */
    free(a->response);
    a->response = NULL;
  }
  a->lease_token = pg_i64(r, row, 8);
  a->trigger = pg_str(r, row, 9);
  a->url = pg_str(r, row, 10);
}

int pg_delivery_get(hookd_store_conn *c, const char *id, hookd_delivery *d, hookd_attempt **att,
                    size_t *n) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c,
                     "SELECT " PG_DELIVERY_COLS
                     " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                     " WHERE d.id = $1",
                     &p, "get delivery");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  pg_read_delivery(r, 0, 0, d);
  PQclear(r);
  if (!att) return HOOKD_STORE_OK;

  pg_p_init(&p);
  pg_p_i64(&p, d->seq);
  pg_p_text(&p, d->endpoint_id);
  r = pg_q(c,
           "SELECT attempt_number, started_at, finished_at, outcome, http_status, latency_ms,"
           " error, response, lease_token, kind,"
           /* its endpoint deleted: the URL cut to its origin, as the URL walk cuts the row
            * (docs/architecture.md "Deletes") — from the delete's answer on */
           " CASE WHEN (SELECT deleted_at FROM endpoints WHERE id = $2) IS NULL THEN url"
           " ELSE " PG_URL_ORIGIN("url") " END FROM attempts WHERE delivery_seq = $1"
           " ORDER BY attempt_number",
           &p, "read attempts");
  if (pg_read_rows(c, r, sizeof **att, rd_attempt, (void **)att, n,
                   "read attempts: out of memory") != 0) {
    hookd_delivery_free(d);
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

/* One statement per filter shape, so each is prepared once and uses the tenant index; each
 * numbers its parameters 1..N (PostgreSQL infers every parameter's type, so none may be left
 * out). The states as ",a,b," (each one's name between commas). */
#define DL_LIST_BASE                                                                            \
  "SELECT " PG_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"          \
  " WHERE d.tenant_id = $1 AND d.id < $2" /* (no cursor: "~", after every id) */
#define DL_LIST_END " ORDER BY d.id DESC LIMIT $3"
#define IN_STATES(n) "strpos(" n "::text, ',' || d.state || ',') > 0"
static const char dl_list_sql[] = DL_LIST_BASE DL_LIST_END;
/* By state or endpoint: each state's newest deliveries ($4, an array: the states asked for, or
 * every one), read from (tenant_id, state, id) or (endpoint_id, state, id), merged by id — not
 * a walk of the tenant's deliveries for the few in a state (strpos() is no index's condition).
 * An endpoint's arms leave its tenant to the outer query: an endpoint is one tenant's. */
#define DL_MERGED(range)                                                                        \
  "SELECT " PG_DELIVERY_COLS " FROM deliveries d JOIN events e ON e.seq = d.event_seq"          \
  " WHERE d.tenant_id = $1 AND d.seq IN (SELECT x.seq FROM unnest($4::text[]) s(state)"         \
  " CROSS JOIN LATERAL (SELECT d.seq FROM deliveries d WHERE " range " AND d.state = s.state"   \
  " AND d.id < $2 ORDER BY d.id DESC LIMIT $3) x)" DL_LIST_END
static const char dl_list_states_sql[] = DL_MERGED("d.tenant_id = $1");
static const char dl_list_ep_states_sql[] = DL_MERGED("d.endpoint_id = $5");
#undef DL_MERGED
/* deliveries of one event are few: found by the event's seq (the (event_seq, endpoint_id)
 * index), not by walking the tenant's deliveries for its id */
static const char dl_list_event_sql[] =
    DL_LIST_BASE " AND d.event_seq = (SELECT ev.seq FROM events ev WHERE ev.tenant_id = $1"
                 " AND ev.id = $4) AND ($5::text IS NULL OR d.endpoint_id = $5)"
                 " AND ($6::text IS NULL OR " IN_STATES("$6") ")" DL_LIST_END;
/* by type or time: one statement with every condition (the API runs it on the scan executor:
 * it may walk much of the tenant's deliveries) */
static const char dl_list_wide_sql[] =
    DL_LIST_BASE " AND ($4::text IS NULL OR e.id = $4)"
                 " AND ($5::text IS NULL OR d.endpoint_id = $5)"
                 " AND ($6::text IS NULL OR " IN_STATES("$6") ")"
                 " AND ($7::text IS NULL OR e.type = $7)"
                 " AND ($8::text IS NULL OR length(e.type) > length($8::text)"
                 " AND substr(e.type, 1, length($8::text)) = $8)"
                 " AND d.created_at >= $9 AND d.created_at < $10" DL_LIST_END;
#undef IN_STATES

int pg_delivery_list(hookd_store_conn *c, const hookd_delivery_filter *f, hookd_delivery **out,
                     size_t *n) {
  char states[128] = ",";
  for (int s = 0; s < HOOKD_DS__COUNT; s++)
    if (f->states & (1u << s)) {
      strcat(states, hookd_dstate_name((hookd_dstate)s));
      strcat(states, ",");
    }
  bool wide = f->event_type || f->since_ms > 0 || f->until_ms > 0;
  const char *sql;
  char *prefix = NULL;
  char arr[128] = "{"; /* (bound below: it lives as long as the query's parameters) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, f->tenant_id);
  pg_p_text(&p, f->after_id ? f->after_id : HOOKD_ID_AFTER_ALL);
  pg_p_i64(&p, f->limit);
  if (wide) {
    sql = dl_list_wide_sql;
    pg_p_text(&p, f->event_id);
    pg_p_text(&p, f->endpoint_id);
    pg_p_text(&p, f->states ? states : NULL);
    if (pg_bind_type_filter(&p, f->event_type, &prefix) != 0)
      return pg_fail(c, "list deliveries: out of memory");
    pg_p_i64(&p, f->since_ms > 0 ? f->since_ms : INT64_MIN);
    pg_p_i64(&p, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  } else if (f->event_id) {
    sql = dl_list_event_sql;
    pg_p_text(&p, f->event_id);
    pg_p_text(&p, f->endpoint_id);
    pg_p_text(&p, f->states ? states : NULL);
  } else if (f->endpoint_id || f->states) {
    /* the states as an array literal, {a,b}: every one for an endpoint alone */
    for (int s = 0; s < HOOKD_DS__COUNT; s++)
      if (!f->states || f->states & (1u << s)) {
        if (arr[1]) strcat(arr, ",");
        strcat(arr, hookd_dstate_name((hookd_dstate)s));
      }
    strcat(arr, "}");
    sql = f->endpoint_id ? dl_list_ep_states_sql : dl_list_states_sql;
    pg_p_text(&p, arr);
    if (f->endpoint_id) pg_p_text(&p, f->endpoint_id);
  } else {
    sql = dl_list_sql;
  }
  PGresult *r = pg_q(c, sql, &p, "list deliveries");
  free(prefix);
  return pg_read_deliveries(c, r, out, n);
}

/* ---------- replay ---------- */

/* delivery_replay's checks and write, without reading the delivery back; on HOOKD_STORE_STATE
 * *why (may be NULL) names the refusal: state_changed, endpoint_deleted, endpoint_disabled,
 * superseded, lane_moved_on, expired, payload_purged. */
int pg_replay_one(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why,
                  hookd_replay_memo *memo) {
  static const char *unused;
  if (!why) why = &unused;
  *why = NULL;
  /* one read for every check: the delivery's state, endpoint and lane, its event's expiry,
   * purge and ordering version, and the version its lane has reached */
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, seq);
  PGresult *r = pg_q(c,
                     "SELECT d.state, d.endpoint_id, d.dead_reason,"
                     " CASE WHEN d.ordering_key IS NOT NULL THEN 1 ELSE 0 END, e.expires_at,"
                     " e.purged_at, e.ordering_version, (SELECT l.version FROM lane_versions l"
                     " WHERE l.endpoint_id = d.endpoint_id AND l.ordering_key ="
                     " d.ordering_key), e.kind,"
                     /* a DEAD "expired" head that its lane went on past — a later one
                      * delivered, claimed or attempted, not one DEAD unsent (sq_replay_one) */
                     " CASE WHEN d.dead_reason = 'expired' AND d.ordering_key IS NOT NULL"
                     " THEN (EXISTS (SELECT 1 FROM deliveries x WHERE x.endpoint_id ="
                     " d.endpoint_id AND x.ordering_key = d.ordering_key AND x.seq > d.seq"
                     " AND (x.state = 'delivered' OR x.leased_until IS NOT NULL"
                     " OR x.attempt_count > 0)))::int ELSE 0 END"
                     " FROM deliveries d JOIN events e ON e.seq = d.event_seq"
                     " WHERE d.seq = $1",
                     &p, "read delivery");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  hookd_replay_facts f = {.state = HOOKD_DS_PENDING};
  const char *sname = pg_val(r, 0, 0);
  if (sname) hookd_dstate_parse(sname, &f.state);
  char *endpoint_id = pg_str(r, 0, 1);
  f.dead_reason = pg_val(r, 0, 2); /* read before r is cleared */
  f.laned = pg_i64(r, 0, 3) != 0;
  f.expires_at = pg_i64(r, 0, 4);
  f.purged = pg_i64(r, 0, 5) != 0;
  f.versioned = !pg_null(r, 0, 6) && !pg_null(r, 0, 7);
  f.version = f.versioned ? pg_i64(r, 0, 6) : 0;
  f.lane_version = f.versioned ? pg_i64(r, 0, 7) : 0;
  const char *kind = pg_val(r, 0, 8);
  bool inbound = kind && !strcmp(kind, "inbound");
  f.passed = pg_i64(r, 0, 9) != 0;
  if (!endpoint_id) {
    PQclear(r);
    return pg_fail(c, "read delivery");
  }
  hookd_replay_memo own = {0};
  if (!memo) memo = &own;
  int rc = hookd_replay_state_check(f.state, c->err, sizeof c->err, why);
  if (!rc) hookd_replay_memo_fill(memo, c, endpoint_id, pg_endpoint_get);
  if (!rc) rc = hookd_replay_check(&f, memo, now_ms, c->err, sizeof c->err, why);
  PQclear(r);
  free(endpoint_id);
  if (rc) return rc;

  pg_p_init(&p);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, now_ms);
  int64_t n = pg_x(c,
                   "UPDATE deliveries SET state = 'pending', cycle_base = attempt_count,"
                   " lane_wait = 0, lease_token = lease_token + 1," /* no older attempt's outcome
                                                                    * lands on the new cycle */
                   /* a new cycle runs under the endpoint's policy of now: an operator who
                    * changed it, then replays, means the new one */
                   " policy_id = (SELECT ep.policy_id FROM endpoints ep"
                   " WHERE ep.id = deliveries.endpoint_id),"
                   " cycle_kind = 'replay', cycle_started_at = $2, next_attempt_at = $2,"
                   " dead_at = NULL, dead_reason = NULL, delivered_at = NULL,"
                   " lane_passed_by = NULL, updated_at = $2"
                   " WHERE seq = $1 AND state IN ('delivered','dead')",
                   &p, "replay");
  if (n < 0) return HOOKD_STORE_ERR;
  if (n != 1) {
    *why = "state_changed";
    return HOOKD_STORE_STATE;
  }
  /* an inbound event's record follows (dead_lettered or completed no longer: it is sent again);
   * an outbound event has none */
  return inbound ? pg_inbox_follow(c, seq, now_ms, NULL, NULL) : HOOKD_STORE_OK;
}

/* A delivery still scheduled (pending or retrying, its next attempt later): "send it now" brings
 * that attempt forward — its cycle and retry budget unchanged — what an operator needs once the
 * receiver is fixed, instead of waiting hours for the next retry (an endpoint's Retry-After pause
 * still holds it). HOOKD_STORE_NOTFOUND when the delivery is not scheduled (the replay's rules
 * decide then); HOOKD_STORE_STATE when its attempt is being made (claimed) or its endpoint is
 * disabled or deleted (*why, when given: a replay item's result saying which); for a replay
 * item, HOOKD_STORE_STATE "already_due" too when its attempt was due already (hookd_retry_due_
 * already: nothing brought forward, not counted replayed). */
int pg_retry_now(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why) {
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c,
                     "SELECT CASE WHEN d.state IN ('pending','retrying') THEN 1 ELSE 0 END,"
                     " CASE WHEN d.leased_until > $2 THEN 1 ELSE 0 END,"
                     " CASE WHEN p.enabled = 1 AND p.deleted_at IS NULL THEN 1 ELSE 0 END,"
                     " CASE WHEN p.deleted_at IS NOT NULL THEN 1 ELSE 0 END,"
                     " CASE WHEN (SELECT ev.kind FROM events ev WHERE ev.seq = d.event_seq)"
                     " = 'inbound' THEN 1 ELSE 0 END,"
                     " CASE WHEN (SELECT ev.expires_at FROM events ev WHERE ev.seq = d.event_seq)"
                     " <= $2 THEN 1 ELSE 0 END"
                     " FROM deliveries d JOIN endpoints p ON p.id = d.endpoint_id"
                     " WHERE d.seq = $1",
                     &p, "read delivery");
  if (!r) return HOOKD_STORE_ERR;
  bool scheduled = false, claimed = false, live = false, deleted = false, inbound = false;
  bool expired = false;
  if (PQntuples(r) > 0) {
    scheduled = pg_i64(r, 0, 0) != 0;
    claimed = pg_i64(r, 0, 1) != 0;
    live = pg_i64(r, 0, 2) != 0;
    deleted = pg_i64(r, 0, 3) != 0;
    inbound = pg_i64(r, 0, 4) != 0;
    expired = pg_i64(r, 0, 5) != 0;
  }
  PQclear(r);
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
  pg_p_init(&p);
  pg_p_i64(&p, seq);
  pg_p_i64(&p, now_ms);
  int64_t n = pg_x(c,
                   "UPDATE deliveries SET next_attempt_at = $2, updated_at = $2"
                   " WHERE seq = $1 AND state IN ('pending','retrying') AND next_attempt_at > $2",
                   &p, "retry now");
  if (n < 0) return HOOKD_STORE_ERR;
  if (!why) { /* an operator's replay: the delivery is theirs now (sq_retry_now says why) */
    pg_p_init(&p);
    pg_p_i64(&p, seq);
    if (pg_x(c,
             "UPDATE deliveries SET lease_token = lease_token + 1 WHERE seq = $1"
             " AND state IN ('pending','retrying') AND leased_until IS NULL",
             &p, "retry now") < 0)
      return HOOKD_STORE_ERR;
    pg_p_init(&p);
    pg_p_i64(&p, seq);
    if (pg_x(c, "DELETE FROM replay_moves WHERE delivery_seq = $1", &p, "retry now") < 0)
      return HOOKD_STORE_ERR;
  }
  if (!n) return hookd_retry_due_already(c->err, sizeof c->err, why);
  /* an inbound event's record shows its next attempt */
  return inbound ? pg_inbox_follow(c, seq, now_ms, NULL, NULL) : HOOKD_STORE_OK;
}

int pg_delivery_replay(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       hookd_delivery *out) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  PGresult *r = pg_q(c, "SELECT seq FROM deliveries WHERE id = $1", &p, "find delivery");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    return HOOKD_STORE_NOTFOUND;
  }
  int64_t seq = pg_i64(r, 0, 0);
  PQclear(r);
  int rc = pg_retry_now(c, seq, now_ms, NULL);
  hookd_replay_memo memo = {.swept = swept};
  if (rc == HOOKD_STORE_NOTFOUND) rc = pg_replay_one(c, seq, now_ms, NULL, &memo);
  if (rc) return rc;
  return out ? pg_delivery_get(c, id, out, NULL, NULL) : HOOKD_STORE_OK;
}

/* ---------- an operator's delivery of an event ---------- */

/* Whether the endpoint's payload filter takes event `seq` (*takes, HOOKD_PFILTER_*): its body
 * fetched and parsed only when there is a filter; *bytes += what was read. */
static int deliver_pfilter(hookd_store_conn *c, int64_t seq, const hookd_endpoint *ep,
                           int64_t *bytes, int *takes) {
  *takes = HOOKD_PFILTER_YES;
  if (!ep->payload_filter) return HOOKD_STORE_OK;
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, seq);
  PGresult *r = pg_q(c, "SELECT body FROM events WHERE seq = $1", &p, "read event body");
  if (!r) return HOOKD_STORE_ERR;
  size_t len = 0;
  char *body = PQntuples(r) ? (char *)pg_blob(r, 0, 0, &len) : NULL;
  PQclear(r);
  *bytes += (int64_t)len;
  json_t *parsed = NULL;
  *takes = hookd_pfilter_match_envelope(&c->pf, ep->payload_filter, len ? body : NULL, len,
                                        &parsed, NULL);
  json_decref(parsed);
  free(body);
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
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, event_seq);
  pg_p_text(&p, endpoint_id);
  PGresult *r = pg_q(c,
                     "SELECT id, CASE WHEN dead_reason = 'superseded' THEN 1 ELSE 0 END"
                     " FROM deliveries WHERE event_seq = $1 AND endpoint_id = $2",
                     &p, "read delivery");
  if (!r) return HOOKD_STORE_ERR;
  int rc = HOOKD_STORE_OK;
  if (PQntuples(r) > 0) {
    out->id = pg_str(r, 0, 0);
    snprintf(c->err, sizeof c->err, "the event has a delivery to this endpoint (%.48s)%s",
             out->id ? out->id : "",
             pg_i64(r, 0, 1) ? ", superseded by a higher ordering_version of its lane: never "
                               "sent"
                             : ": replay it");
    rc = HOOKD_STORE_EXISTS;
  }
  PQclear(r);
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
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, endpoint_id);
    pg_p_text(&p, key);
    PGresult *r = pg_q(c,
                       "SELECT event_seq FROM deliveries WHERE endpoint_id = $1"
                       " AND ordering_key = $2 ORDER BY seq DESC LIMIT 1",
                       &p, "read lane");
    rc = r ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
    behind = r && PQntuples(r) > 0 && pg_i64(r, 0, 0) > seq;
    PQclear(r);
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

/* event_deliver, with why it refused (a replay item's result: gone, payload_purged, expired,
 * endpoint_deleted, endpoint_disabled, lane_moved_on, state_changed). */
int pg_event_deliver_why(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                         int64_t event_seq, const char *endpoint_id, int64_t now_ms,
                         hookd_delivery *out, const char **why, int64_t *body_bytes) {
  static const char *unused;
  int64_t bytes_unused = 0;
  if (!why) why = &unused;
  if (!body_bytes) body_bytes = &bytes_unused;
  *why = "state_changed";
  memset(out, 0, sizeof *out);
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, event_id);
  pg_p_text(&p, tenant_id);
  pg_p_i64(&p, event_seq);
  PGresult *r = pg_q(c,
                     "SELECT seq, type, kind, expires_at, purged_at, ordering_key,"
                     " ordering_version, created_at, channels, test_endpoint"
                     " FROM events WHERE id = $1 AND tenant_id = $2"
                     " AND ($3::bigint = 0 OR seq = $3::bigint)",
                     &p, "read event");
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 0) {
    PQclear(r);
    snprintf(c->err, sizeof c->err, "event");
    *why = "gone";
    return HOOKD_STORE_NOTFOUND;
  }
  int64_t seq = pg_i64(r, 0, 0), expires = pg_i64(r, 0, 3);
  char *type = pg_str(r, 0, 1), *key = pg_str(r, 0, 5);
  const char *kind = pg_val(r, 0, 2);
  bool inbound = kind && !strcmp(kind, "inbound"), purged = pg_i64(r, 0, 4) != 0;
  bool versioned = !pg_null(r, 0, 6);
  int64_t version = pg_i64(r, 0, 6), published = pg_i64(r, 0, 7);
  char *channels = pg_str(r, 0, 8), *test_for = pg_str(r, 0, 9);
  PQclear(r);
  hookd_endpoint ep;
  memset(&ep, 0, sizeof ep);
  bool have_ep = false;
  int rc;
  if (!type) {
    rc = pg_fail(c, "read event");
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
  } else if ((rc = pg_endpoint_get(c, endpoint_id, &ep)) == HOOKD_STORE_NOTFOUND) {
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
  if (rc == HOOKD_STORE_OK && hookd_id_new("dlv", now_ms, did) != 0)
    rc = pg_fail(c, "new delivery id");
  /* pending now as a replay cycle (scheduled with replays, attempts read "replay"), created
   * at its event's publish as every delivery is (the lists' since/until and replay jobs' time
   * filters read a delivery's creation as its event's) */
  if (rc == HOOKD_STORE_OK) {
    pg_p_init(&p);
    pg_p_text(&p, did);
    pg_p_i64(&p, seq);
    pg_p_text(&p, endpoint_id);
    pg_p_text(&p, tenant_id);
    pg_p_i64(&p, now_ms);
    pg_p_i64(&p, ep.policy.id);
    pg_p_text(&p, key);
    pg_p_i64(&p, wait);
    pg_p_i64(&p, published);
    if (pg_x(c,
             "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state,"
             " cycle_kind, cycle_started_at, next_attempt_at, policy_id, created_at,"
             " updated_at, ordering_key, lane_wait)"
             " VALUES ($1, $2, $3, $4, 'pending', 'replay', $5, $5, $6, $9, $5, $7, $8)",
             &p, "insert delivery") < 0)
      rc = HOOKD_STORE_ERR;
  }
  free(type);
  free(key);
  free(channels);
  free(test_for);
  if (have_ep) hookd_endpoint_free(&ep);
  if (rc != HOOKD_STORE_OK) return rc;
  return pg_delivery_get(c, did, out, NULL, NULL);
}

int pg_event_deliver(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                     const char *endpoint_id, int64_t now_ms, hookd_delivery *out) {
  return pg_event_deliver_why(c, tenant_id, event_id, 0, endpoint_id, now_ms, out, NULL, NULL);
}

/* sqlite_int.h — internals shared by the SQLite backend's files: the connection struct, the
 * prepared-statement cache and small bind/column helpers. Nothing outside src/store/sqlite/
 * includes this. */
#ifndef HOOKD_STORE_SQLITE_INT_H
#define HOOKD_STORE_SQLITE_INT_H

#include <sqlite3.h>
#include <stdbool.h>

#include "core/payload_filter.h"
#include "store/store.h"

/* A URL (an http or https one the API checked: no userinfo) cut to its origin — up to the first
 * '/', '?' or '#' after "://": a path or query may hold a credential (a Slack hook's). `u` is
 * an SQL expression, read several times. */
#define SQ_URL_ORIGIN(u)                                                                        \
  "(SELECT CASE WHEN k < 100000 THEN substr(" u ", 1, s + k - 2) ELSE " u " END FROM (SELECT"  \
  " s, min(coalesce(nullif(instr(r, '/'), 0), 100000), coalesce(nullif(instr(r, '?'), 0),"     \
  " 100000), coalesce(nullif(instr(r, '#'), 0), 100000)) AS k FROM (SELECT instr(" u ", '://')" \
  " + 3 AS s, substr(" u ", instr(" u ", '://') + 3) AS r)))"

/* Every cached statement has an id; its SQL is written where it is used (sq_stmt). */
enum sq_stmt_id {
  SQ_TENANT_INSERT, SQ_TENANT_GET, SQ_TENANT_DELETE, SQ_TENANT_ENDPOINTS, SQ_TENANT_SOURCES,
  SQ_TENANT_REPLAYS,
  SQ_POLICY_INSERT, SQ_POLICY_GET,
  SQ_EP_INSERT, SQ_EP_GET, SQ_EP_MADE, SQ_SRC_MADE, SQ_EP_LIST, SQ_EP_UPDATE, SQ_EP_DELETE, SQ_EP_CANCEL, SQ_EP_SINCE,
  SQ_EP_COUNT, SQ_EP_FANOUT, SQ_EP_DISABLE, SQ_EP_RESEAL,
  SQ_IDEM_INSERT, SQ_IDEM_GET,
  SQ_EV_INSERT, SQ_EV_BY_KEY, SQ_EV_GET, SQ_EV_COUNT_DL,
  SQ_DL_INSERT, SQ_DL_INSERT_SUPERSEDED, SQ_LANE_OPEN, SQ_LANE_ADVANCE, SQ_LANE_REPAIR,
  SQ_LANE_UNORDER, SQ_EP_CANCEL_LANES, SQ_EP_CANCEL_LEASED, SQ_EP_CANCEL_LEFT, SQ_EP_FLAG_CANCEL,
  SQ_EP_CANCEL_NEXT, SQ_CLAIM_LIVE_EP, SQ_EP_IS_DEST, SQ_EP_DELETE_HOLD, SQ_EP_DELETED, SQ_SRC_DELETED, SQ_LANE_ORDERED_EPS, SQ_LANE_LET_IN, SQ_LANE_UNORDER_STEP, SQ_LANE_VERSION_GET, SQ_LANE_VERSION_SET, SQ_LANE_SETTLE, SQ_LANE_SETTLE_PURGED, SQ_DL_BY_EVENT, SQ_DL_GET, SQ_DL_ATTEMPTS, SQ_DL_REPLAY, SQ_DL_REPLAY_READ, SQ_INBOX_PROMOTE, SQ_DL_RETRY_NOW_READ, SQ_DL_RETRY_NOW, SQ_DL_RETRY_NOW_OWN, SQ_DL_RETRY_NOW_MOVES, SQ_DL_SEQ_BY_ID, SQ_EV_DELIVER_READ, SQ_DL_OF_PAIR, SQ_DL_INSERT_MADE, SQ_LANE_NEWER,
  SQ_EV_DELIVER_BODY,
  SQ_DL_LIST, SQ_DL_LIST_EP, SQ_DL_LIST_STATE, SQ_DL_LIST_EP_STATE, SQ_DL_LIST_EVENT,
  SQ_DL_LIST_WIDE, SQ_DL_LIST_STATES, SQ_DL_LIST_EP_STATES, SQ_EP_STATS,
  SQ_CLAIM, SQ_CLAIM_DETAIL, SQ_NEXT_DUE, SQ_OUTCOME, SQ_OUTCOME_LATE, SQ_OUTCOME_GONE, SQ_ATTEMPT_INSERT, SQ_RELEASE,
  SQ_SUPERSEDED_COUNT,
  SQ_RECLAIM_EXPIRED, SQ_RECLAIM_OWNER, SQ_LEASE_SHIFT, SQ_RECLAIM_HOLD, SQ_RELEASE_HELD,
  SQ_MARK_SENT,
  SQ_INBOX_REFORWARD, SQ_EP_MARK_LEASED, SQ_DUE_HINTS,
  SQ_KEY_INSERT, SQ_KEY_LIST, SQ_KEY_REVOKE,
  SQ_AUDIT_INSERT, SQ_AUDIT_LIST, SQ_AUDIT_LIST_TENANT,
  SQ_ANSWER_GET, SQ_ANSWER_PUT, SQ_ANSWER_DROP, SQ_MK_PUT, SQ_MK_TAKE, SQ_MK_GET,
  SQ_SRC_INSERT, SQ_SRC_GET, SQ_SRC_UPDATE, SQ_SRC_DELETE, SQ_SRC_LIST, SQ_SRC_PAGE, SQ_SRC_DESTS,
  SQ_INBOX_INSERT, SQ_INBOX_BY_KEY, SQ_INBOX_BY_BKEY, SQ_INBOX_GET, SQ_INBOX_AGG, SQ_INBOX_SET,
  SQ_INBOX_LEASE, SQ_INBOX_PURGE, SQ_INBOX_PURGE_DEL, SQ_INBOX_RESOLVE, SQ_INBOX_LAST_ERROR,
  SQ_INBOX_REPLACED,
  SQ_VERSION_GET, SQ_URLCUT_MARK, SQ_URLCUT_NEXT, SQ_URLCUT_SCAN, SQ_URLCUT_ATTEMPTS,
  SQ_URLCUT_MOVE, SQ_URLCUT_DONE,
  SQ_VERSION_PURGE, SQ_LANE_VERSION_OLD, SQ_LANE_VERSION_DROP, SQ_LANE_VERSION_KEEP,
  SQ_VERSION_SET, SQ_DL_DEST, SQ_DL_HAS_DEST, SQ_EV_PURGE, SQ_EV_PURGE_SET, SQ_EV_INSERT_IN, SQ_EV_NEXT_SEQ, SQ_INBOX_DL, SQ_INBOX_LIST, SQ_INBOX_LIST_T, SQ_INBOX_LIST_TS,
  SQ_INBOX_LIST_TP, SQ_INBOX_LIST_EV, SQ_INBOX_LIST_S, SQ_INBOX_LIST_SP, SQ_INBOX_LIST_SS,
  SQ_EV_EXPIRE, SQ_EV_WEIGH, SQ_EV_PURGE_SIZE, SQ_INBOX_WEIGH, SQ_OWED_OLD, SQ_OWED_EXPIRE,
  SQ_RET_MARK, SQ_EV_DEL_ATTEMPTS, SQ_EV_DEL_DELIVERIES, SQ_EV_DEL_KEYS, SQ_EV_DEL, SQ_EP_DISABLE_AUDIT,
  SQ_EP_DISABLE_DECLINED,
  SQ_DL_RESOLVE, SQ_DL_RESOLVE_EP,
  SQ_TENANT_UPDATE, SQ_TENANT_LIST, SQ_TENANT_PAGE, SQ_CLAIM_LIVE_LANES, SQ_CLAIM_REPLAY, SQ_CLAIM_REPLAY_LANES,
  SQ_NEXT_DUE_REPLAY, SQ_EP_FAILING, SQ_EP_PAUSE, SQ_EP_MOVED, SQ_LANE_PASSED, SQ_NEXT_DUE_LANES,
  SQ_NEXT_DUE_REPLAY_LANES,
  SQ_RPL_GET, SQ_RPL_EP_CHECK, SQ_RPL_SELECT, SQ_RPL_COUNT, SQ_RPL_ACTIVE, SQ_RPL_INSERT,
  SQ_RPL_ITEM_INSERT, SQ_RPL_BY_EP, SQ_RPL_SKIPPED, SQ_RPL_STATES, SQ_RPL_LIST, SQ_RPL_SET,
  SQ_RPL_ITEM_SET, SQ_RPL_ITEM_GET, SQ_RPL_ADVANCE, SQ_RPL_HOLD, SQ_RPL_DUE, SQ_RPL_NEXT,
  SQ_RPL_OPEN_FROM, SQ_SRC_PAGE_ALL,
  SQ_RPL_TOTAL, SQ_EV_SHED_ATTEMPTS, SQ_EV_SHED_DELIVERIES,
  SQ_RPL_BUILDING, SQ_EV_LIST, SQ_RPL_ABANDON, SQ_RPL_EXPIRE, SQ_RPL_SELECT_MISSING,
  SQ_RPL_ITEM_INSERT_MISSING, SQ_RPL_ITEM_EVENT, SQ_RPL_ITEM_MADE, SQ_EV_PAYLOAD_READ,
  SQ_EV_PAYLOAD_CANCEL, SQ_TENANT_MADE, SQ_EVENT_MADE, SQ_ET_INSERT,
  SQ_ET_LIST, SQ_ET_UPDATE, SQ_ET_GET, SQ_ET_ONE, SQ_BACKLOG, SQ_HB_GET, SQ_HB_SET, SQ_HB_MOVE, SQ_KEY_PURGE,
  SQ_STAMPS, SQ_EV_ERASE_EXCERPTS,
  SQ_RPL_PURGE_JOB, SQ_RPL_PURGE_ITEMS, SQ_RPL_PURGE_MARK, SQ_RPL_PURGE_MOVES,
  SQ_RPL_MOVE_KEEP, SQ_RPL_MOVE_MADE, SQ_RPL_BACK_MARK, SQ_RPL_BACK_FIRST,
  SQ_RPL_BACK_RESTORE, SQ_RPL_BACK_DELETE, SQ_RPL_BACK_REQUEUE, SQ_RPL_BACK_END,
  SQ_RPL_BACK_JOB, SQ_RPL_BACK_INBOUND, SQ_RPL_BACK_MARKED, SQ_RPL_BACK_DUE,
  SQ_TX_BEGIN_W, SQ_TX_BEGIN_R, SQ_TX_COMMIT, SQ_TX_ROLLBACK, SQ_TX_SAVEPOINT, SQ_TX_RELEASE,
  SQ_TX_ROLLBACK_TO,
  SQ__COUNT
};

typedef struct sq_shared sq_shared; /* path and checkpointer, sqlite_conn.c */

struct hookd_store_conn {
  sqlite3 *db;
  int writer;
  int psow; /* powersafe overwrite (SQLite's default): a commit whose write failed did not commit */
  /* between sq_begin and its end: a commit now is only sq_commit's (commit_guard) */
  bool guarded, committing;
  bool erased; /* this transaction erased data on demand (sq_erased): its commit has the WAL
                * file emptied (sqlite_conn.c ckpt_erase) */
  sq_shared *sh;
  char err[256];
  sqlite3_stmt *stmts[SQ__COUNT];
  hookd_pfilter_cache pf; /* endpoints' payload filters, parsed (the fan-out's) */
  /* the lane repair's walk (writer): where the last rescan's step stopped ("": the start) */
  char lane_ep[HOOKD_ID_MAX + 64], lane_key[260];
  hookd_hold_memo hold; /* the replayer's view of endpoints' backlogs (writer; store.h) */
};

/* Returns the cached statement (reset, bindings cleared), preparing it on first use; NULL on
 * error with c->err set. */
sqlite3_stmt *sq_stmt(hookd_store_conn *c, enum sq_stmt_id id, const char *sql);
/* Records sqlite's error message in c->err and returns HOOKD_STORE_ERR. */
int sq_fail(hookd_store_conn *c, const char *what);
/* Executes one statement without results. */
int sq_exec(hookd_store_conn *c, const char *sql);

void sq_bind_text(sqlite3_stmt *st, int i, const char *s); /* NULL binds NULL */
void sq_bind_i64(sqlite3_stmt *st, int i, int64_t v);
void sq_bind_i64_or_null(sqlite3_stmt *st, int i, int64_t v); /* 0 binds NULL */
/* An event-type filter (the API's "a.type", "*", or a prefix "a.*" or "a/" and '*'): binds an
 * exact type to parameter `exact`, or a prefix ("a.", "a/") to `prefix`, for "(?e IS NULL OR
 * e.type = ?e) AND (?p IS NULL OR length(e.type) > length(?p) AND substr(e.type, 1,
 * length(?p)) = ?p)" (longer than the prefix: as an endpoint's "a.*", not "a." itself); NULL
 * and "*" bind neither. */
void sq_bind_type_filter(sqlite3_stmt *st, int exact, int prefix, const char *type);
char *sq_col_str(sqlite3_stmt *st, int i);                   /* strdup, NULL for NULL */
/* An event's schema_version, ordering_key, ordering_version, channels and test_endpoint, from
 * column i on. */
void sq_read_event_extras(sqlite3_stmt *st, int i, hookd_event *e);
/* A scheduled delivery's next attempt brought forward to now (sqlite_delivery.c). */
int sq_retry_now(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why);
int sq_event_payload_delete(hookd_store_conn *c, const char *tenant_id, const char *id,
                            int64_t now_ms, int64_t *seq, int64_t *purged_ms, int *cancelled);
/* event_deliver, with why it refused (a replay item's result: gone, payload_purged, expired,
 * endpoint_deleted, endpoint_disabled, lane_moved_on, state_changed), and the bytes of the
 * event's body it read (*body_bytes, when given: only for an endpoint's payload filter, the one
 * use of the body here; a replay step's budget, HOOKD_REPLAY_STEP_BYTES). event_seq: the event's
 * seq as a replay job snapshotted it, or 0 — another event given the id since (it was deleted
 * by retention and the id published again) is `gone`, not that one. */
int sq_event_deliver_why(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                         int64_t event_seq, const char *endpoint_id, int64_t now_ms,
                         hookd_delivery *out, const char **why, int64_t *body_bytes);
int64_t sq_col_i64(sqlite3_stmt *st, int i);                 /* 0 for NULL */

/* Steps st to the end, reading each row into a growing array of elem-sized records with read();
 * on failure frees what was read with free_all() and returns HOOKD_STORE_ERR (c->err says
 * what). */
int sq_read_rows(hookd_store_conn *c, sqlite3_stmt *st, size_t elem,
                 void (*read)(sqlite3_stmt *st, void *rec), void (*free_all)(void *v, size_t n),
                 void **out, size_t *n, const char *what);

/* Migrations, sqlite_schema.c. */
int sq_recover(hookd_store_conn *c);
int sq_first_sealed(hookd_store_conn *c, char id[17]); /* (sqlite_schema.c) */
int sq_migrate(hookd_store_conn *c, bool apply, bool (*stop)(void),
               void (*migrating)(int64_t from, int64_t to), int64_t *from, int64_t *to);
/* How long a statement waits for another process's lock (SQLite's busy handler). */
#define SQ_BUSY_TIMEOUT_MS 5000

/* One statement for every delivery insert (publish fan-out and inbound), prepared once. */
#define SQ_DL_INSERT_SQL                                                                        \
  "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"      \
  " next_attempt_at, policy_id, created_at, updated_at, ordering_key, lane_wait)"               \
  " VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?5, ?6, ?5, ?5, ?7, COALESCE(?8, 0))"                \
  " ON CONFLICT(event_seq, endpoint_id) DO NOTHING"

/* Settles the hint of the first open delivery of the lane of delivery seq (which just left the
 * open states, or was cancelled): let in, unless a DEAD head holds the lane at now_ms, when it is
 * hinted out (docs/isolation.md "Ordering lanes"); nothing for a delivery without an ordering
 * key. sqlite_delivery.c. */
int sq_lane_advance(hookd_store_conn *c, int64_t seq, int64_t now_ms);
/* Keeps the first *n of a retention walk's ids whose costs fit budget, the first always
 * (hookd_take_within); the walk goes on after the last kept. cost_sql: one row for ?1 of up to
 * three integers, the bytes, deliveries and attempts its deletion frees (hookd_retention_weight),
 * with ?2, when it has one, the rows of a kind it needs to count at most (HOOKD_WEIGH_ROWS). The
 * ids are weighed in order, and no further than the first past the budget. */
int sq_retention_trim(hookd_store_conn *c, enum sq_stmt_id id, const char *cost_sql,
                      int64_t budget, const int64_t *ids, int *n, int64_t *after_seq);
/* The tail of a cost_sql for sq_retention_trim that weighs the deletion of event e.s with its
 * deliveries and attempts (e.b: bytes freed besides, its body), after "WITH e(s, b) AS (…)": each
 * count stops at ?2 rows (a row weighs HOOKD_ATTEMPT_WEIGHT at least: past ?2, over the budget
 * alone), and length() reads no excerpt (SQLite takes a blob's size from its record header). */
#define SQ_WEIGH_EVENT                                                                          \
  " SELECT COALESCE((SELECT b FROM e), 0) + COALESCE(SUM(n), 0),"                               \
  " (SELECT COUNT(*) FROM (SELECT 1 FROM e, deliveries d WHERE d.event_seq = e.s LIMIT ?2)),"   \
  " COUNT(*) FROM (SELECT length(a.response) AS n FROM e, deliveries d, attempts a"             \
  " WHERE d.event_seq = e.s AND a.delivery_seq = d.seq LIMIT ?2)"
int sq_owed_expired(hookd_store_conn *c, int64_t before_ms, int limit, int64_t **seqs, int *n);
int sq_expire_owed(hookd_store_conn *c, const int64_t *seqs, int n, int64_t before_ms,
                   int64_t now_ms, int *expired);
/* An endpoint no longer ordered: lets its waiting deliveries in — a bounded step; each rescan
 * takes the next (sqlite_delivery.c). */
int sq_lane_unorder(hookd_store_conn *c, const char *endpoint_id);
/* An ordered endpoint whose lanes no longer block on a DEAD head: lets in the first open
 * delivery of each of its lanes that one held — a bounded walk; the rescans' walk takes the
 * rest (sqlite_delivery.c). */
int sq_lane_unblock(hookd_store_conn *c, const char *endpoint_id, int64_t now_ms);

/* Row readers shared between files. */
#define SQ_EP_COLS                                                                              \
  "e.id, e.tenant_id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason,"    \
  " e.max_in_flight, e.timeout_ms, e.secret, e.created_at, e.updated_at, e.deleted_at,"      \
  " p.id, p.max_attempts, p.base_ms, p.cap_ms, p.max_age_ms, p.retry_after_cap_ms,"          \
  " e.signing, e.previous_secret, e.previous_expires_at, e.source_id, e.idempotent,"        \
  " e.rate_limit, e.ordered, e.lane_policy, e.failing_since, p.retry_statuses, e.paused_until," \
  " e.headers, e.channels, e.metadata, e.payload_filter, e.disabled_at, e.body_format"
#define SQ_EP_FROM " FROM endpoints e JOIN retry_policies p ON p.id = e.policy_id"

void sq_read_endpoint(sqlite3_stmt *st, hookd_endpoint *e);
int sq_read_endpoints(hookd_store_conn *c, sqlite3_stmt *st, hookd_endpoint **out, size_t *n);
void sq_read_policy(sqlite3_stmt *st, int first_col, hookd_retry_policy *p);
void sq_read_policy_statuses(sqlite3_stmt *st, int col, hookd_retry_policy *p);
/* The delivery column list every delivery query selects (with table alias d and events e). */
#define SQ_DELIVERY_COLS                                                                        \
  "d.seq, d.id, d.event_seq, e.id, e.type, d.endpoint_id, d.tenant_id, d.state, "               \
  "d.attempt_count, d.cycle_base, d.cycle_started_at, d.next_attempt_at, d.lease_owner, "       \
  "d.lease_token, d.leased_until, d.last_error, d.last_status, d.policy_id, d.created_at, "     \
  "d.updated_at, d.delivered_at, d.dead_at, d.dead_reason, d.cycle_kind, d.ordering_key, "     \
  "d.result_ref"
#define SQ_DELIVERY_NCOLS 26
void sq_read_delivery(sqlite3_stmt *st, int first_col, hookd_delivery *d);
int sq_read_deliveries(hookd_store_conn *c, sqlite3_stmt *st, hookd_delivery **out, size_t *n);

/* The ops implemented in each file, assembled into the table in sqlite_conn.c. */
int sq_tenant_create(hookd_store_conn *c, const hookd_tenant *t);
int sq_tenant_get(hookd_store_conn *c, const char *id, hookd_tenant *out);
int sq_tenant_update(hookd_store_conn *c, const hookd_tenant *t);
int sq_tenant_live(hookd_store_conn *c, const char *id);
int sq_event_type_create(hookd_store_conn *c, const hookd_event_type *t);
int sq_event_type_list(hookd_store_conn *c, bool archived_too, bool with_schemas,
                       const char *after, int limit, hookd_event_type **out, size_t *n);
int sq_event_type_get(hookd_store_conn *c, const char *name, hookd_event_type *out);
int sq_event_type_update(hookd_store_conn *c, const char *name, const char *description,
                         const char *schemas, int archived, int64_t now_ms,
                         hookd_event_type *out, int *changed);
int sq_backlog_count(hookd_store_conn *c, int64_t cap, int64_t *n);
int sq_config_stamps(hookd_store_conn *c, int64_t *keys, int64_t *sources);
int sq_api_key_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                     bool *more);
int sq_heartbeat(hookd_store_conn *c, int64_t now_ms, bool at_start, int64_t gap_ms,
                 int64_t *last_ms, int64_t *moved);
int sq_event_types_check(hookd_store_conn *c, const char *patterns, int *bad);
int sq_tenant_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_tenant_delete_res *out);
int sq_tenant_list(hookd_store_conn *c, hookd_tenant **out, size_t *n);
int sq_tenant_page(hookd_store_conn *c, const char *after_id, int limit, hookd_tenant **out,
                   size_t *n);
int sq_endpoint_create(hookd_store_conn *c, hookd_endpoint *ep, int max_per_tenant);
int sq_endpoint_get(hookd_store_conn *c, const char *id, hookd_endpoint *out);
int sq_endpoint_stats(hookd_store_conn *c, const char *endpoint_id, const char *from_id,
                      const char *to_id, int64_t cap, int64_t counts[HOOKD_DS__COUNT],
                      int64_t *dead_unsent);
int sq_ever_made(hookd_store_conn *c, int kind, const char *tenant_id, const char *id);
int sq_endpoint_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                     int kind, int enabled, hookd_endpoint **out, size_t *n);
int sq_endpoint_update(hookd_store_conn *c, hookd_endpoint *ep);
/* An endpoint's (a source's) delete within a budget of cancels shared by a tenant's delete. */
int sq_endpoint_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                              hookd_delete_counts *out);
int sq_delete_step(hookd_store_conn *c, int64_t now_ms, int limit, hookd_delete_step *out);
int sq_endpoint_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_delete_counts *out);
int sq_master_key_claim(hookd_store_conn *c, const char *key_id, bool take, int64_t now_ms,
                        char *held, size_t cap);
int sq_endpoint_reseal(hookd_store_conn *c, const char *id, const char *secret,
                       const char *previous_secret, const char *headers);
int sq_endpoints_since(hookd_store_conn *c, int64_t since_ms, hookd_endpoint **out, size_t *n);
int sq_publish(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res);
int sq_event_list(hookd_store_conn *c, const hookd_event_filter *f, hookd_event **out,
                  size_t *n);
int sq_event_get(hookd_store_conn *c, const char *tenant_id, const char *id, hookd_event *ev,
                 hookd_delivery **dl, size_t *n);
int sq_delivery_get(hookd_store_conn *c, const char *id, hookd_delivery *d, hookd_attempt **att,
                    size_t *n);
int sq_delivery_list(hookd_store_conn *c, const hookd_delivery_filter *f, hookd_delivery **out,
                     size_t *n);
int sq_delivery_replay(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       hookd_delivery *out);
int sq_event_deliver(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                     const char *endpoint_id, int64_t now_ms, hookd_delivery *out);
/* delivery_replay's checks and write, without reading the delivery back; on HOOKD_STORE_STATE
 * *why (may be NULL) names the refusal: state_changed, endpoint_deleted, endpoint_disabled,
 * superseded, lane_moved_on, expired, payload_purged. memo (may be NULL) keeps the last
 * endpoint's lookup across the calls of one transaction (a replay job's step: its items mostly
 * share their endpoints, which cannot change under the writer's own transaction). */
int sq_replay_one(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why,
                  hookd_replay_memo *memo);
int sq_replay_select(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                     int64_t max_items, hookd_replay_snapshot *out);
int sq_replay_create(hookd_store_conn *c, hookd_replay_job *job, const hookd_replay_snapshot *snap,
                     size_t *from, size_t chunk, int64_t now_ms);
int sq_replay_get(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_job *out, hookd_replay_detail *detail);
int sq_replay_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                   hookd_replay_job **out, size_t *n);
int sq_replay_abandon(hookd_store_conn *c, int64_t job_seq, int64_t now_ms);
int sq_replay_act(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_action action, int64_t now_ms, hookd_replay_job *out);
int sq_replay_step(hookd_store_conn *c, int64_t now_ms, hookd_replay_step_res *res);
int sq_replay_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                    int *purged, bool *more);
int sq_claim(hookd_store_conn *c, const hookd_claim_req *req, hookd_claimed **out, size_t *n,
             int64_t *next_due_ms);
int sq_record_outcome(hookd_store_conn *c, hookd_outcome *o);
int sq_release_lease(hookd_store_conn *c, const hookd_release *r);
int sq_mark_sent(hookd_store_conn *c, int64_t delivery_seq, int64_t lease_token);
int sq_inbox_reforward(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       size_t *n_made, hookd_due_hint **hints, size_t *n_hints);
int sq_lease_shift(hookd_store_conn *c, const char *owner, int64_t delta_ms, int *shifted);
int sq_reclaim_leases(hookd_store_conn *c, const char *owner, int64_t now_ms, int limit,
                      hookd_due_hint **hints, size_t *n, int *reclaimed, int *held);
int sq_due_hints(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n);
int sq_api_key_create(hookd_store_conn *c, const hookd_api_key *k);
int sq_api_key_list(hookd_store_conn *c, int64_t live_at_ms, hookd_api_key **out,
                    size_t *n);
int sq_api_key_revoke(hookd_store_conn *c, const char *id, int64_t now_ms);
int sq_audit_append(hookd_store_conn *c, const hookd_audit *a);
int sq_answer_get(hookd_store_conn *c, const char *scope, const char *key, char **hash,
                  int *status, char **answer);
int sq_answer_put(hookd_store_conn *c, const char *scope, const char *key, const char *hash,
                  int status, const char *answer, int64_t now_ms);
int sq_answer_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                    bool *more);
int sq_audit_list(hookd_store_conn *c, const char *tenant_id, int64_t before_seq, int limit,
                  hookd_audit **out, size_t *n);

/* Inbound, sqlite_inbound.c. */
int sq_source_create(hookd_store_conn *c, const hookd_source *s, hookd_endpoint *dests,
                     size_t n_dests, int max_eps);
int sq_source_get(hookd_store_conn *c, const char *id, hookd_source *out, hookd_endpoint **dests,
                  size_t *n_dests);
int sq_source_update(hookd_store_conn *c, const hookd_source *s);
int sq_source_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_delete_counts *out);
int sq_source_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                            hookd_delete_counts *out);
int sq_source_list(hookd_store_conn *c, hookd_source **out, size_t *n);
int sq_source_page(hookd_store_conn *c, const char *tenant_id, const char *provider,
                   const char *after, int limit, hookd_source **out, size_t *n);
int sq_receive(hookd_store_conn *c, const hookd_receive_req *req, hookd_receive_res *res);
int sq_inbox_get(hookd_store_conn *c, const char *id, hookd_inbox *out, hookd_delivery **dl,
                 size_t *n);
int sq_inbox_list(hookd_store_conn *c, const hookd_inbox_filter *f, hookd_inbox **out, size_t *n);
int sq_inbox_resolve(hookd_store_conn *c, const char *id, hookd_dstate to, int64_t now_ms,
                     size_t *n_resolved,
                     hookd_due_hint **hints, size_t *n_hints);
int sq_inbox_purge(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                   int *purged);
int sq_object_versions_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                             bool *more);
int sq_lane_versions_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                           int *purged, bool *more);
/* Recomputes the inbox record of a delivery's event from its deliveries (outcome writes). */
/* A retention walk (inbox, payloads): steps st — bound here ?1 = limit, ?2 = after seq; its
 * columns seq, time, eligible — and stops at the first row at or after before_ms (passing over
 * one stamped HOOKD_RETENTION_AHEAD_MS past the wall clock). The eligible
 * rows' seqs in *ids (malloc'd, n of them); *after_seq where the next batch goes on, 0 when the
 * walk is done. */
int sq_retention_walk(hookd_store_conn *c, sqlite3_stmt *st, int64_t before_ms, int limit,
                      int64_t *after_seq, int64_t **ids, int *n);
int sq_event_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                   int64_t *after_seq, int *purged);
int sq_event_expire(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                    int *expired);
/* The lane of DEAD delivery p has moved past it since it went DEAD: a later delivery of the lane,
 * up to seq `upto` (an SQL expression; SQ_SEQ_MAX for any), was attempted, or went DEAD, after
 * it — skipped while the lane's policy was skip. Such a delivery holds its lane no more, for
 * those after it. The attempt's outcome also stores the first such seq on p (lane_passed_by,
 * sq_record_outcome; migration 22 wrote it for the rows before), so that retention, deleting
 * the later deliveries, does not take the proof with them. */
#define SQ_SEQ_MAX "9223372036854775807"
#define LANE_MOVED_PAST(p, upto)                                                                \
  "(IFNULL(" p ".lane_passed_by <= " upto ", 0) OR EXISTS (SELECT 1 FROM deliveries q"         \
  " WHERE q.endpoint_id = " p ".endpoint_id"                                                    \
  " AND q.ordering_key = " p ".ordering_key AND q.seq > " p ".seq AND q.seq <= " upto           \
  " AND ((q.state = 'dead' AND q.dead_reason NOT IN ('superseded','expired')"                   \
  " AND q.dead_at >= " p ".dead_at) OR EXISTS (SELECT 1 FROM attempts a"                        \
  " WHERE a.delivery_seq = q.seq AND a.started_at >= " p ".dead_at))))"
/* A DEAD delivery (alias p) whose event's ordering_version is below its lane's highest: it can
 * never be replayed (lane_moved_on), so it holds its lane no more than a superseded one does —
 * held by it, a block lane waited for a replay that is always refused (a review). */
#define LANE_OUTRANKED(p)                                                                       \
  "IFNULL((SELECT ev.ordering_version < lv.version FROM events ev JOIN lane_versions lv"        \
  " ON lv.endpoint_id = " p ".endpoint_id AND lv.ordering_key = " p ".ordering_key"            \
  " WHERE ev.seq = " p ".event_seq), 0)"
/* The lane rule's DEAD part, for EXISTS ( … ): a DEAD delivery p of lane (ep, key) before seq
 * `before` that holds it when its endpoint's lane_policy is block — neither superseded nor
 * expired, its event neither purged nor expired at `now`, not moved past up to `before`, not
 * outranked. (ep, key, before, now: SQL expressions.) The claim's LANE_HEAD and the lane hints
 * (docs/isolation.md "Ordering lanes") share it. */
#define LANE_DEAD_HOLDS(ep, key, before, now)                                                   \
  "SELECT 1 FROM deliveries p"                                                                  \
  " WHERE p.endpoint_id = " ep " AND p.ordering_key = " key " AND p.seq < " before              \
  " AND p.ordering_key IS NOT NULL AND p.state = 'dead'"                                        \
  " AND p.dead_reason NOT IN ('superseded','expired')"                                          \
  " AND IFNULL((SELECT ev.purged_at IS NULL AND IFNULL(ev.expires_at > " now ", 1) FROM events ev" \
  " WHERE ev.seq = p.event_seq), 1)"                                                            \
  " AND NOT " LANE_MOVED_PAST("p", before) " AND NOT " LANE_OUTRANKED("p")
/* Endpoint `ep` (an SQL expression) is ordered, live, and its lanes block on a DEAD head. */
#define LANE_BLOCKS(ep)                                                                         \
  "EXISTS (SELECT 1 FROM endpoints ep WHERE ep.id = " ep " AND ep.ordered = 1"                  \
  " AND ep.lane_policy = 'block' AND ep.deleted_at IS NULL)"
/* A DEAD delivery (alias d) that may be what holds its lane: the head of a lane of a live
 * ordered endpoint whose lane_policy is block, neither superseded nor expired, its event not
 * expired at `now` (an SQL expression), and not one the lane has moved past. Replaying it is
 * the remedy, so retention keeps its payload and its event (and the lane's later deliveries that
 * show it was moved past are as old or newer: they go no sooner); any other DEAD delivery (an
 * endpoint that is not ordered, skips, or was deleted) holds nothing, and goes as the others do
 * — and once its payload is purged it can no longer hold a lane either (LANE_HEAD). Its event
 * expired, it holds nothing either (LANE_DEAD_HOLDS) and cannot be replayed: kept for that
 * before, a review — for ever, on a lane nothing more was published to. */
#define DEAD_LANE_HEAD(d, now)                                                                  \
  "(" d ".ordering_key IS NOT NULL AND " d ".state = 'dead'"                                    \
  " AND IFNULL(" d ".dead_reason, '') NOT IN ('superseded','expired')"                          \
  " AND IFNULL((SELECT IFNULL(ev.expires_at > " now ", 1) FROM events ev"                        \
  " WHERE ev.seq = " d ".event_seq), 1)"                                                        \
  " AND EXISTS (SELECT 1 FROM endpoints ep WHERE ep.id = " d ".endpoint_id AND ep.ordered = 1"  \
  " AND ep.lane_policy = 'block' AND ep.deleted_at IS NULL)"                                    \
  " AND NOT " LANE_MOVED_PAST(d, SQ_SEQ_MAX) " AND NOT " LANE_OUTRANKED(d) ")"
/* A delivery of event `ev` that keeps the event (and its dedup record) whatever its age: still
 * open (pending, retrying, held), touched or attempted at or after the cut-off ?3, a DEAD
 * delivery that may hold its lane at ?4 (now: DEAD_LANE_HEAD), or the store's newest delivery
 * (deliveries.seq is a rowid: deleting the largest hands it out again, and a late outcome of
 * the deleted one, fenced by seq and lease token, could land on the new one). For
 * NOT EXISTS ( … ). */
#define RETAINED_DELIVERY(ev)                                                                   \
  "SELECT 1 FROM deliveries d WHERE d.event_seq = " ev                                          \
  " AND (d.state IN ('pending','retrying','unknown') OR d.updated_at >= ?3"                     \
  " OR " DEAD_LANE_HEAD("d", "?4") " OR d.seq = (SELECT MAX(seq) FROM deliveries)"                 \
  " OR EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_seq = d.seq AND a.finished_at >= ?3))"
/* An Idempotency-Key given to the event within the window: a publish that repeats an event's id
 * under a new key links that key to the old event, and the key must answer its retries for the
 * window from its own first use, not from the event's (before, a review: deleted with the event
 * seconds after its first use, and its retry published the event again, sent twice). The key
 * goes with its event (sq_event_delete), so the event stays while the key must. (PostgreSQL:
 * pg_int.h's namesake.) */
#define RETAINED_KEY(ev, before)                                                                \
  "SELECT 1 FROM idempotency_keys k WHERE k.event_seq = " ev " AND k.created_at >= " before
int sq_retention_mark(hookd_store_conn *c, const char *kind, int64_t before_ms);
int sq_event_delete(hookd_store_conn *c, int64_t seq, bool keys);
/* last_error of a delivery held unknown by its destination's delete (sqlite_delivery.c) */
extern const char sq_held_deleted[];
int sq_inbox_follow(hookd_store_conn *c, int64_t delivery_seq, int64_t now_ms,
                    const char *last_error, const char *result_ref);

/* Opens the backend's shared state for a "sqlite:PATH" url. */
int hookd_sqlite_shared_open(const char *path, void **shared, char *err, size_t errlen);
void hookd_sqlite_shared_free(void *shared);
/* Stops the checkpointer (after a last checkpoint when final; every other connection must be
 * closed by then), and reports on its checkpoints (store.h). */
void hookd_sqlite_shared_stop(void *shared, bool final);
void hookd_sqlite_shared_health(void *shared, hookd_store_health *out);
/* Checkpoint thresholds in WAL pages: the checkpointer wakes when ckpt_pages frames are not yet
 * copied (0: only when told to stop — for tests), the writer checkpoints itself past limit_pages.
 * Defaults 1,000 and 32,000. */
void hookd_sqlite_set_wal_pages(void *shared, int ckpt_pages, int limit_pages);
/* The checkpointer's passes that copied frames since the store opened, or (tries) every
 * checkpoint it ran, copying or not (tests). */
uint64_t hookd_sqlite_checkpoint_count(void *shared, bool tries);
/* The most frames one of the writer's own checkpoints has copied (tests). */
int hookd_sqlite_writer_copied_max(void *shared);
/* Process-wide SQLite set-up (sqlite_pcache.c), made once before the first connection: the
 * page-cache wrapper and no global memory statistics. Returns 1 if the wrapper is installed
 * (0: SQLite was already in use in this process, so its defaults stay). */
int sq_process_setup(void);
/* Pages the wrapper has parked under key 0 since the process started (tests). */
uint64_t hookd_sqlite_pcache_parks(void);
/* The wrapper's methods, to test them directly (NULL when SQLite's own cache is in use). */
const sqlite3_pcache_methods2 *hookd_sqlite_pcache_methods(void);
extern const hookd_store_backend hookd_sqlite_backend;

#endif

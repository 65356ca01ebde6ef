/* pg_int.h — internals shared by the PostgreSQL backend's files (docs/postgres.md): the
 * connection struct, the statement runner (each statement prepared once per connection) and
 * small parameter/column helpers. Nothing outside src/store/postgres/ includes this. */
#ifndef HOOKD_STORE_PG_INT_H
#define HOOKD_STORE_PG_INT_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/payload_filter.h"
#include "store/postgres/pg_store.h"
#include "store/store.h"

/* A URL (an http or https one the API checked) cut to its origin: a path or query may hold a
 * credential (a Slack hook's). `u` is an SQL expression of type text. */
#define PG_URL_ORIGIN(u)                                                                        \
  "COALESCE(substring(" u " from '^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*'), " u ")"

typedef struct pg_shared pg_shared; /* the connection string, pg_conn.c */
const char *pg_shared_url(const pg_shared *sh);
const char *pg_shared_node_id(const pg_shared *sh); /* NULL: the CLI's */

/* A prepared statement: its SQL's address (a string literal) and its name on the server. */
typedef struct pg_prep {
  const char *sql;
  int n; /* the statement is named "h<n>" */
} pg_prep;

struct hookd_store_conn {
  PGconn *pg;
  PGcancel *cancel; /* for interrupt(), from another thread */
  int writer;
  pg_shared *sh;
  char err[512];
  int64_t changes;   /* rows written by this connection's commands (monotonic) */
  int in_savepoint;  /* the executor's op savepoint is open */
  int setup_failed;  /* the session after a reconnect could not be set up: not used */
  int stale;         /* the server no longer takes its writes (25006) or goes down (57P…): the
                      * next transaction begins on a new session */
  int settled;       /* a lost COMMIT's outcome, asked of the server (commit_settled) */
  char sqlstate[6];  /* of the last failed statement */
  char timeline[9];  /* writer: the server's WAL timeline at the session's start ("": unknown) —
                      * a lost COMMIT's outcome is asked of a server on the same one only */
  char token[24];    /* writer: the batch's commit_marks token, decimal ("": none written) */
  pg_prep *preps;    /* open addressing by sql address; cap a power of two */
  size_t n_preps, cap_preps;
  hookd_pfilter_cache pf; /* endpoints' payload filters, parsed (the fan-out's) */
  /* the lane repair's walk (writer): where the last rescan's step stopped ("": the start) */
  char lane_ep[HOOKD_ID_MAX + 64], lane_key[260];
  hookd_hold_memo hold; /* the replayer's view of endpoints' backlogs (writer; store.h) */
};

/* The session advisory lock that serialises migrations (two keys of hookd's own: these read
 * "hookd" and "migrate" in ASCII, far from what an application picks); the writer lock (pg_conn.c)
 * and each node's lock (its id's hash) share the first key. */
#define PG_MIGRATE_TRY_LOCK "SELECT pg_try_advisory_lock(1752133476, 1835624289)"
#define PG_MIGRATE_UNLOCK "SELECT pg_advisory_unlock(1752133476, 1835624289)"
/* Retention's indexes (pg_indexes.c, docs/postgres.md "Retention's indexes"), as bits. */
enum { PG_RIX_EVENTS_OUTBOUND = 1, PG_RIX_KEYS_EVENT = 2, PG_RIX_LANES_SEEN = 4,
       PG_RIX_EVENTS_UNPURGED = 8 };
typedef struct pg_rix pg_rix; /* what the walks asked for, and its builder */
pg_rix *pg_rix_new(void);     /* (NULL: out of memory) */
void pg_rix_free(pg_rix *x);  /* a build under way is cancelled: the next one starts over */
pg_rix *pg_shared_rix(const pg_shared *sh);
/* The start's wait (--store-wait-s), for the migrations' wait for the other nodes to stop. */
int pg_shared_migrate_wait_s(const pg_shared *sh);
/* In a walk's transaction: 1 when every index of `need` is there and valid; else 0, the
 * missing ones asked for (hookd_pg_indexes_step builds them) and the walk to do nothing, over
 * for this round (*after_seq, when given, 0); -1 on a failed read (c->err). */
int pg_rix_ready(hookd_store_conn *c, unsigned need, int64_t *after_seq);
/* The change feed's note of an event whose payload the API deleted: this, then its seq. */
#define PG_PURGED_NOTE "event_purged:"
/* The database's clock, in ms (a common ruler for the nodes: docs/postgres.md "Several nodes"). */
#define PG_DB_NOW_MS "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
/* The node locks held on this database, as a condition on pg_locks: each node holds its own for
 * its life (hookd's first key, its id's hashtext as the second: objsubid 2); the writer and
 * migration locks share the first key and are left out. */
#define PG_NODE_LOCKS                                                                           \
  "locktype = 'advisory' AND classid = 1752133476 AND objsubid = 2 AND granted"                 \
  " AND objid NOT IN (2003986804, 1835624289, 1768842360) AND database ="                       \
  " (SELECT oid FROM pg_database WHERE datname = current_database())"

/* The first key of the lock each node holds (shared) on the schema its hookd runs on, the
 * second being that schema's version: not hookd's first key, so that no older node counts it as
 * a node's lock. */
#define PG_SCHEMA_LOCK_KEY "1752133477"
/* The latest schema version this hookd knows (pg_schema.c). */
int64_t pg_schema_latest(void);

/* Every connection of a node to its store (the executors', the change feed's): libpq's
 * settings, then the URL's own (they win), then the application name (it does not). A link gone
 * silent fails what waits on it within PG_LINK_TIMEOUT_MS (TCP keepalives and an
 * unacknowledged-data timeout), instead of blocking its thread for ever. */
#define PG_CONNECT_TIMEOUT_S "10"
#define PG_LINK_TIMEOUT_MS "30000"
#define PG_LINK_KEYS                                                                            \
  {"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",                   \
   "keepalives_count", "tcp_user_timeout", "target_session_attrs", "dbname",                    \
   "application_name", NULL}
/* (read-write: of a multi-host URL the primary, not a standby after a failover) */
#define PG_LINK_VALS(url, app)                                                                  \
  {PG_CONNECT_TIMEOUT_S, "1", "10", "5", "3", PG_LINK_TIMEOUT_MS, "read-write", (url), (app), NULL}
/* Whether the server of pg reported itself read-only (default_transaction_read_only: a fence)
 * or a standby since the session began (PostgreSQL 14 reports both, at the end of a statement):
 * a session there no longer reaches the server that takes the writes. */
bool pg_reports_read_only(const PGconn *pg);
/* A notice processor that drops them: NOTICEs (an IF NOT EXISTS that found it) are no errors. */
void pg_no_notices(void *arg, const char *message);

/* Parameters of one statement, all sent as text except blobs (binary bytea). */
#define PG_MAX_PARAMS 24
typedef struct pg_params {
  int n;
  const char *v[PG_MAX_PARAMS];
  int len[PG_MAX_PARAMS];
  int fmt[PG_MAX_PARAMS];
  char num[PG_MAX_PARAMS][32];
} pg_params;

void pg_p_init(pg_params *p);
void pg_p_text(pg_params *p, const char *s);               /* NULL sends NULL */
void pg_p_i64(pg_params *p, int64_t v);
void pg_p_i64n(pg_params *p, int64_t v);                   /* 0 sends NULL */
void pg_p_f64(pg_params *p, double v);
void pg_p_bool(pg_params *p, bool v);                      /* as 0/1: flags are bigint columns */
void pg_p_blob(pg_params *p, const void *b, size_t n);     /* bytea; b must outlive the call */
/* An event-type filter (the API's "a.type", "*", or a prefix "a.*" or "a/" and '*'): appends two
 * parameters, the exact type and the prefix ("a.", "a/": malloc'd in *own, freed by the caller
 * after the statement), for "($e::text IS NULL OR e.type = $e) AND ($p::text IS NULL OR
 * length(e.type) > length($p::text) AND substr(e.type, 1, length($p::text)) = $p)"; NULL and
 * "*" send both NULL (as sq_bind_type_filter binds). -1 when out of memory. */
int pg_bind_type_filter(pg_params *p, const char *type, char **own);

/* Runs sql — a string literal: it is prepared once per connection, found again by its address —
 * with p's parameters ($1, $2 … in order; p may be NULL for none). Returns the result (free it
 * with PQclear), or NULL with c->err set ("what: <server message>"). Commands' row counts are
 * added to c->changes. */
PGresult *pg_q(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what);
/* The same for a statement whose rows are not read: the number of rows it wrote or returned
 * (>= 0), or -1 with c->err set. */
int64_t pg_x(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what);
/* pg_q for SQL built at run time (not a literal): sent unprepared. */
PGresult *pg_q_dyn(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what);
/* Counts n rows written by a statement whose tag does not (a SELECT over data-modifying CTEs):
 * c->changes tells the executor whether a failed op wrote. */
void pg_wrote(hookd_store_conn *c, int64_t n);
/* Runs sql unprepared, without parameters (DDL, session settings, transaction control). */
int pg_exec(hookd_store_conn *c, const char *sql, const char *what);

/* Records a failure of ours in c->err (unless the last statement failed: its message is kept)
 * and returns HOOKD_STORE_ERR. */
int pg_fail(hookd_store_conn *c, const char *what);
/* The SQLSTATE of the last failed statement ("" when none): pg_q keeps it. */
const char *pg_sqlstate(hookd_store_conn *c);

/* Column readers. */
bool pg_null(const PGresult *r, int row, int col);
char *pg_str(const PGresult *r, int row, int col);         /* strdup; NULL for NULL */
/* A text column as a C string, NULL for NULL (PQgetvalue gives "" for NULL); valid while r is. */
const char *pg_val(const PGresult *r, int row, int col);
int64_t pg_i64(const PGresult *r, int row, int col);       /* 0 for NULL */
double pg_f64(const PGresult *r, int row, int col);        /* 0 for NULL */
/* A bytea column, decoded (malloc'd, NUL-terminated for convenience; NULL for NULL). */
unsigned char *pg_blob(const PGresult *r, int row, int col, size_t *len);
/* Copies a text column into a fixed buffer (truncated, NUL-terminated; "" for NULL). */
void pg_copy(const PGresult *r, int row, int col, char *dst, size_t cap);


/* Row helpers (pg_rows.c). */
/* Reads every row of r into a new array of elem-sized records with read() (sq_read_rows). Takes
 * r (cleared here; NULL, a failed statement, is HOOKD_STORE_ERR with c->err as pg_q left it);
 * out of memory is pg_fail(c, what). */
typedef void (*pg_row_reader)(const PGresult *r, int row, void *rec);
int pg_read_rows(hookd_store_conn *c, PGresult *r, size_t elem, pg_row_reader read, void **out,
                 size_t *n, const char *what);
/* A retention walk (sqlite_delivery.c's sq_retention_walk): runs sql — its rows (seq, time, may
 * go as 0/1) in seq order, with $1 the limit, $2 *after_seq, when with_before $3 before_ms, and
 * then now_ms ($4, or $3: what PG_DEAD_LANE_HEAD compares an event's expiry with) — and stops
 * at the first row whose time is at or after before_ms (passing over one stamped
 * HOOKD_RETENTION_AHEAD_MS past the wall clock). The seqs of the rows before it that may go in
 * *ids (malloc'd, n of them); *after_seq where the next batch goes on, 0 when the walk is done. */
int pg_retention_walk(hookd_store_conn *c, const char *sql, bool with_before, int64_t before_ms,
                      int64_t now_ms, int limit, int64_t *after_seq, int64_t **ids, int *n);
/* The failure of an INSERT of a tenant's row (pg_x gave -1): one whose tenant is gone (its
 * foreign key, 23503) is HOOKD_STORE_NOTFOUND, "tenant not found"; any other HOOKD_STORE_ERR. */
int pg_insert_failed(hookd_store_conn *c);
/* The row that holds an id an INSERT … ON CONFLICT (id) DO NOTHING found taken: sql (a string
 * literal; $1 the id, $2 the tenant) gives its (deleted_at IS NOT NULL)::int and
 * (tenant_id = $2)::int. *deleted and *own are false when no row holds it, or when the
 * statement failed (HOOKD_STORE_ERR, c->err set). */
int pg_id_holder(hookd_store_conn *c, const char *sql, const char *id, const char *tenant_id,
                 const char *what, bool *deleted, bool *own);


/* An array literal ('{…}', pg_rows.c) sent as one text parameter and cast in the statement
 * ($n::bigint[], $n::text[]): a statement over many rows is one round trip (docs/postgres.md
 * "Round trips"). Every element is quoted, so any text goes. */
typedef struct pg_arr {
  char *s;
  size_t len, cap;
  bool oom; /* an append ran out of memory: pg_arr_done gives NULL */
} pg_arr;
void pg_arr_init(pg_arr *a);
void pg_arr_i64(pg_arr *a, int64_t v);
void pg_arr_text(pg_arr *a, const char *s); /* NULL appends a NULL element */
/* Closes the literal: the text to bind (valid until pg_arr_free), NULL when out of memory. */
const char *pg_arr_done(pg_arr *a);
void pg_arr_free(pg_arr *a);


/* Migrations (pg_schema.c). */
int pg_migrate(hookd_store_conn *c, bool apply, bool (*stop)(void),
               void (*migrating)(int64_t from, int64_t to), int64_t *from, int64_t *to);
int pg_first_sealed(hookd_store_conn *c, char id[17]); /* (pg_schema.c) */

/* Row readers shared between files: the same column lists as the SQLite backend's. */
#define PG_EP_COLS                                                                              \
  "e.id, e.tenant_id, e.url, e.description, e.event_types, e.enabled, e.disabled_reason,"    \
  " e.max_in_flight, e.timeout_ms, e.secret, e.created_at, e.updated_at, e.deleted_at,"      \
  " p.id, p.max_attempts, p.base_ms, p.cap_ms, p.max_age_ms, p.retry_after_cap_ms,"          \
  " e.signing, e.previous_secret, e.previous_expires_at, e.source_id, e.idempotent,"        \
  " e.rate_limit, e.ordered, e.lane_policy, e.failing_since, p.retry_statuses, e.paused_until," \
  " e.headers, e.channels, e.metadata, e.payload_filter, e.disabled_at, e.body_format"
#define PG_EP_FROM " FROM endpoints e JOIN retry_policies p ON p.id = e.policy_id"
void pg_read_endpoint(const PGresult *r, int row, hookd_endpoint *e);
/* Every row of r as endpoints (malloc'd array; pg_read_rows: takes r, NULL is a failure);
 * HOOKD_STORE_ERR when out of memory. */
int pg_read_endpoints(hookd_store_conn *c, PGresult *r, hookd_endpoint **out, size_t *n);
void pg_read_policy(const PGresult *r, int row, int first_col, hookd_retry_policy *p);
/* The policy's retry_statuses column at col (read apart: it came with migration 12, after the
 * columns every query lists in a row). A value hookd did not write reads as none. */
void pg_read_policy_statuses(const PGresult *r, int row, int col, hookd_retry_policy *p);

#define PG_DELIVERY_COLS                                                                        \
  "d.seq, d.id, d.event_seq, e.id, e.type, d.endpoint_id, d.tenant_id, d.state, "               \
  "d.attempt_count, d.cycle_base, d.cycle_started_at, d.next_attempt_at, d.lease_owner, "       \
  "d.lease_token, d.leased_until, d.last_error, d.last_status, d.policy_id, d.created_at, "     \
  "d.updated_at, d.delivered_at, d.dead_at, d.dead_reason, d.cycle_kind, d.ordering_key, "     \
  "d.result_ref"
#define PG_DELIVERY_NCOLS 26
void pg_read_delivery(const PGresult *r, int row, int first_col, hookd_delivery *d);
/* Every row of r as deliveries (from column 0), as pg_read_endpoints. */
int pg_read_deliveries(hookd_store_conn *c, PGresult *r, hookd_delivery **out, size_t *n);

/* The SQLite store's LANE_MOVED_PAST, DEAD_LANE_HEAD and RETAINED_DELIVERY (sqlite_int.h), in
 * PostgreSQL's SQL: shared by the claims (pg_dispatch.c), retention (pg_retention.c) and the
 * inbox's purge (pg_inbound.c). */

/* Whether a lane has moved past DEAD delivery p (alias): a later delivery of its lane (seq up
 * to `upto`) attempted, or dead of its own failure, since p died — skipped while the lane's
 * policy was skip. Such a delivery holds its lane no more, for those after it. The attempt's
 * outcome also stores the first such seq on p (lane_passed_by), so that retention, deleting
 * the later deliveries, does not take the proof with them. */
#define PG_SEQ_MAX "9223372036854775807"
#define PG_LANE_MOVED_PAST(p, upto)                                                             \
  "(COALESCE(" p ".lane_passed_by <= " upto ", false) OR EXISTS (SELECT 1 FROM deliveries q"   \
  " WHERE q.endpoint_id = " p ".endpoint_id"                                                    \
  " AND q.ordering_key = " p ".ordering_key AND q.seq > " p ".seq AND q.seq <= " upto           \
  " AND ((q.state = 'dead' AND q.dead_reason NOT IN ('superseded','expired')"                   \
  " AND q.dead_at >= " p ".dead_at) OR EXISTS (SELECT 1 FROM attempts a"                        \
  " WHERE a.delivery_seq = q.seq AND a.started_at >= " p ".dead_at))))"
/* A DEAD delivery (alias p) whose event's ordering_version is below its lane's highest: it can
 * never be replayed (lane_moved_on), so it holds its lane no more than a superseded one does —
 * held by it, a block lane waited for a replay that is always refused (a review). */
#define PG_LANE_OUTRANKED(p)                                                                    \
  "COALESCE((SELECT ev.ordering_version < lv.version FROM events ev JOIN lane_versions lv"      \
  " ON lv.endpoint_id = " p ".endpoint_id AND lv.ordering_key = " p ".ordering_key"            \
  " WHERE ev.seq = " p ".event_seq), false)"
/* The lane rule's DEAD part, for EXISTS ( … ): a DEAD delivery p of lane (ep, key) before seq
 * `before` that holds it when its endpoint's lane_policy is block — neither superseded nor
 * expired, its event neither purged nor expired at `now`, not moved past up to `before`, not
 * outranked. (ep, key, before, now: SQL expressions.) The claim's LANE_HEAD and the lane hints
 * (docs/isolation.md "Ordering lanes") share it. */
#define PG_LANE_DEAD_HOLDS(ep, key, before, now)                                                \
  "SELECT 1 FROM deliveries p"                                                                  \
  " WHERE p.endpoint_id = " ep " AND p.ordering_key = " key " AND p.seq < " before              \
  " AND p.ordering_key IS NOT NULL AND p.state = 'dead'"                                        \
  " AND p.dead_reason NOT IN ('superseded','expired')"                                          \
  " AND COALESCE((SELECT ev.purged_at IS NULL AND (ev.expires_at IS NULL OR ev.expires_at > "   \
  now ") FROM events ev WHERE ev.seq = p.event_seq), true)"                                    \
  " AND NOT " PG_LANE_MOVED_PAST("p", before) " AND NOT " PG_LANE_OUTRANKED("p")
/* The hint a lane's first open delivery (alias d) is to have at `now`: true when it could be
 * claimed but a DEAD head holds its lane (its endpoint ordered, live, and blocking). */
#define PG_LANE_HELD(now)                                                                       \
  "(d.state IN ('pending','retrying') AND d.leased_until IS NULL"                               \
  " AND EXISTS (SELECT 1 FROM endpoints ep WHERE ep.id = d.endpoint_id AND ep.ordered = 1"      \
  " AND ep.lane_policy = 'block' AND ep.deleted_at IS NULL) AND EXISTS ("                       \
  PG_LANE_DEAD_HOLDS("d.endpoint_id", "d.ordering_key", "d.seq", now) "))"
/* Sets the hints of deliveries `first` (an SQL expression, for IN: lanes' first open
 * deliveries) to what they are to be; writes none that already is. */
#define PG_LANE_SETTLE_SQL(first, now)                                                          \
  "UPDATE deliveries d SET lane_wait = 1 - d.lane_wait WHERE d.seq IN " first                   \
  " AND d.lane_wait = CASE WHEN " PG_LANE_HELD(now) " THEN 0 ELSE 1 END"
/* A DEAD delivery (alias d) that may be what holds its lane: the head of a lane of a live
 * ordered endpoint whose lane_policy is block, neither superseded nor expired, its event not
 * expired at `now` (an SQL expression), and not one the lane has moved past: the SQLite store's
 * DEAD_LANE_HEAD (sqlite_int.h, which says why). */
#define PG_DEAD_LANE_HEAD(d, now)                                                               \
  "(" d ".ordering_key IS NOT NULL AND " d ".state = 'dead'"                                    \
  " AND COALESCE(" d ".dead_reason, '') NOT IN ('superseded','expired')"                        \
  " AND COALESCE((SELECT COALESCE(ev.expires_at > " now ", true) FROM events ev"                 \
  " WHERE ev.seq = " d ".event_seq), true)"                                                     \
  " AND EXISTS (SELECT 1 FROM endpoints ep WHERE ep.id = " d ".endpoint_id AND ep.ordered = 1"  \
  " AND ep.lane_policy = 'block' AND ep.deleted_at IS NULL)"                                    \
  " AND NOT " PG_LANE_MOVED_PAST(d, PG_SEQ_MAX) " AND NOT " PG_LANE_OUTRANKED(d) ")"
/* A delivery of event `ev` that keeps the event (and its dedup record) whatever its age: still
 * open (pending, retrying, held), touched or attempted at or after the cut-off $3, or a DEAD
 * delivery that may hold its lane at $4 (now: DEAD_LANE_HEAD). For NOT EXISTS ( … ).
 * (The SQLite store also keeps its newest delivery there: deliveries.seq is a rowid, and
 * deleting the largest hands it out again, so that a late outcome of the deleted one, fenced by
 * seq and lease token, could land on the new one. An identity column never hands a value out
 * twice — even after a rollback or a delete — so a late outcome finds no row here.) */
#define PG_RETAINED_DELIVERY(ev)                                                                \
  "SELECT 1 FROM deliveries d WHERE d.event_seq = " ev                                          \
  " AND (d.state IN ('pending','retrying','unknown') OR d.updated_at >= $3"                     \
  " OR " PG_DEAD_LANE_HEAD("d", "$4::bigint")                                                   \
  " OR EXISTS (SELECT 1 FROM attempts a WHERE a.delivery_seq = d.seq AND a.finished_at >= $3))"

/* sqlite_int.h's RETAINED_KEY: an Idempotency-Key given to the event within the window. */
#define PG_RETAINED_KEY(ev, before)                                                             \
  "SELECT 1 FROM idempotency_keys k WHERE k.event_seq = " ev " AND k.created_at >= " before

/* Cross-file helpers (each file's owner implements them as the SQLite backend's namesakes). */
int pg_tenant_live(hookd_store_conn *c, const char *id);                         /* pg_config.c */
int pg_endpoint_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                              hookd_delete_counts *out);                      /* pg_endpoints.c */
int pg_lane_advance(hookd_store_conn *c, int64_t seq, int64_t now_ms);         /* pg_events.c */
/* Pending deliveries of the event at event_seq, due now, one per element of the arrays ids,
 * endpoints and policies (delivery ids, endpoint ids, policy ids), in one statement; an
 * endpoint with a delivery of the event already gets none. The result's rows are the endpoint
 * ids that got one (PQclear it); NULL on failure, c->err set. */
PGresult *pg_insert_deliveries(hookd_store_conn *c, int64_t event_seq, const char *tenant_id,
                               int64_t now_ms, const char *ordering_key, pg_arr *ids,
                               pg_arr *endpoints, pg_arr *policies);          /* pg_events.c */
int pg_lane_unorder(hookd_store_conn *c, const char *endpoint_id);            /* pg_dispatch.c */
int pg_lane_unblock(hookd_store_conn *c, const char *endpoint_id,
                    int64_t now_ms);                                          /* pg_dispatch.c */

/* The ops, by file, assembled into the table in pg_conn.c. */
/* pg_config.c */
int pg_tenant_create(hookd_store_conn *c, const hookd_tenant *t);
int pg_tenant_get(hookd_store_conn *c, const char *id, hookd_tenant *out);
int pg_tenant_update(hookd_store_conn *c, const hookd_tenant *t);
int pg_tenant_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_tenant_delete_res *out);
int pg_tenant_list(hookd_store_conn *c, hookd_tenant **out, size_t *n);
int pg_tenant_page(hookd_store_conn *c, const char *after_id, int limit, hookd_tenant **out,
                   size_t *n);
int pg_event_type_create(hookd_store_conn *c, const hookd_event_type *t);
int pg_event_type_list(hookd_store_conn *c, bool archived_too, bool with_schemas,
                       const char *after, int limit, hookd_event_type **out, size_t *n);
int pg_event_type_get(hookd_store_conn *c, const char *name, hookd_event_type *out);
int pg_event_type_update(hookd_store_conn *c, const char *name, const char *description,
                         const char *schemas, int archived, int64_t now_ms,
                         hookd_event_type *out, int *changed);
int pg_backlog_count(hookd_store_conn *c, int64_t cap, int64_t *n);
int pg_config_stamps(hookd_store_conn *c, int64_t *keys, int64_t *sources);
int pg_api_key_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                     bool *more);
int pg_event_types_check(hookd_store_conn *c, const char *patterns, int *bad);
int pg_api_key_create(hookd_store_conn *c, const hookd_api_key *k);
int pg_api_key_list(hookd_store_conn *c, int64_t live_at_ms, hookd_api_key **out,
                    size_t *n);
int pg_api_key_revoke(hookd_store_conn *c, const char *id, int64_t now_ms);
int pg_audit_append(hookd_store_conn *c, const hookd_audit *a);
int pg_audit_list(hookd_store_conn *c, const char *tenant_id, int64_t before_seq, int limit,
                  hookd_audit **out, size_t *n);
int pg_answer_get(hookd_store_conn *c, const char *scope, const char *key, char **hash,
                  int *status, char **answer);
int pg_answer_put(hookd_store_conn *c, const char *scope, const char *key, const char *hash,
                  int status, const char *answer, int64_t now_ms);
int pg_answer_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                    bool *more);
/* pg_endpoints.c */
int pg_endpoint_create(hookd_store_conn *c, hookd_endpoint *ep, int max_per_tenant);
int pg_endpoint_get(hookd_store_conn *c, const char *id, hookd_endpoint *out);
int pg_endpoint_stats(hookd_store_conn *c, const char *endpoint_id, const char *from_id,
                      const char *to_id, int64_t cap, int64_t counts[HOOKD_DS__COUNT],
                      int64_t *dead_unsent);
int pg_ever_made(hookd_store_conn *c, int kind, const char *tenant_id, const char *id);
int pg_endpoint_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                     int kind, int enabled, hookd_endpoint **out, size_t *n);
int pg_endpoint_update(hookd_store_conn *c, hookd_endpoint *ep);
int pg_endpoint_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_delete_counts *out);
int pg_delete_step(hookd_store_conn *c, int64_t now_ms, int limit, hookd_delete_step *out);
int pg_owed_expired(hookd_store_conn *c, int64_t before_ms, int limit, int64_t **seqs, int *n);
/* Keeps the first *n of a retention walk's ids whose costs fit budget, the first always
 * (hookd_take_within); the walk goes on after the last. weigh_sql: PG_WEIGH(cost), where cost
 * gives one row (b, d, a) for the id x.s — the bytes, deliveries and attempts its deletion frees
 * (hookd_retention_weight), counting at most x.cap rows of a kind (HOOKD_WEIGH_ROWS). One
 * statement, which weighs the ids in order ($1) and no further than the first past the budget
 * ($2; its running total is hookd_retention_weight's sum, with the weights as $3 and $4). */
int pg_retention_trim(hookd_store_conn *c, const char *weigh_sql, int64_t budget,
                      const int64_t *ids, int *n, int64_t *after_seq);
/* (the ids' text is read once, in v: cast at each step, 1,000 ids took 100 ms) */
#define PG_WEIGH(cost)                                                                          \
  "WITH RECURSIVE v(ids, n) AS MATERIALIZED (SELECT $1::bigint[], cardinality($1::bigint[])),"  \
  " w(i, b, d, a, t) AS (SELECT 0, 0::bigint, 0::bigint, 0::bigint, 0::bigint"                  \
  " UNION ALL SELECT w.i + 1, c.b, c.d, c.a, w.t + c.b + c.d * $3::bigint + c.a * $4::bigint"   \
  " FROM w CROSS JOIN v CROSS JOIN LATERAL (SELECT v.ids[w.i + 1] AS s, $5::bigint AS cap) x"   \
  " CROSS JOIN LATERAL (" cost ") c WHERE w.i < v.n AND w.t <= $2::bigint)"                     \
  " SELECT b, d, a FROM w WHERE i > 0 ORDER BY i"
/* A cost for PG_WEIGH: the deletion of event ev with its deliveries and attempts, and bytes
 * (SQL: an integer or NULL) freed besides (sqlite_int.h SQ_WEIGH_EVENT). octet_length() reads no
 * excerpt: a stored bytea's size is in its header, or its TOAST pointer. */
#define PG_WEIGH_EVENT(ev, bytes)                                                               \
  "SELECT coalesce(" bytes ", 0) + coalesce(sum(k.n), 0) AS b, (SELECT count(*) FROM"           \
  " (SELECT 1 FROM deliveries d WHERE d.event_seq = " ev " LIMIT x.cap) q) AS d, count(*) AS a" \
  " FROM (SELECT octet_length(t.response) AS n FROM deliveries d JOIN attempts t"               \
  " ON t.delivery_seq = d.seq WHERE d.event_seq = " ev " LIMIT x.cap) k"
int pg_expire_owed(hookd_store_conn *c, const int64_t *seqs, int n, int64_t before_ms,
                   int64_t now_ms, int *expired);
int pg_master_key_claim(hookd_store_conn *c, const char *key_id, bool take, int64_t now_ms,
                        char *held, size_t cap);
int pg_endpoint_reseal(hookd_store_conn *c, const char *id, const char *secret,
                       const char *previous_secret, const char *headers);
int pg_endpoints_since(hookd_store_conn *c, int64_t since_ms, hookd_endpoint **out, size_t *n);
/* pg_events.c */
int pg_publish(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res);
int pg_event_get(hookd_store_conn *c, const char *tenant_id, const char *id, hookd_event *ev,
                 hookd_delivery **dl, size_t *n);
int pg_event_list(hookd_store_conn *c, const hookd_event_filter *f, hookd_event **out,
                  size_t *n);
int pg_delivery_get(hookd_store_conn *c, const char *id, hookd_delivery *d, hookd_attempt **att,
                    size_t *n);
int pg_delivery_list(hookd_store_conn *c, const hookd_delivery_filter *f, hookd_delivery **out,
                     size_t *n);
int pg_delivery_replay(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       hookd_delivery *out);
int pg_event_deliver(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                     const char *endpoint_id, int64_t now_ms, hookd_delivery *out);
/* pg_dispatch.c */
int pg_claim(hookd_store_conn *c, const hookd_claim_req *req, hookd_claimed **out, size_t *n,
             int64_t *next_due_ms);
int pg_record_outcome(hookd_store_conn *c, hookd_outcome *o);
int pg_release_lease(hookd_store_conn *c, const hookd_release *r);
int pg_mark_sent(hookd_store_conn *c, int64_t delivery_seq, int64_t lease_token);
int pg_reclaim_leases(hookd_store_conn *c, const char *owner, int64_t now_ms, int limit,
                      hookd_due_hint **hints, size_t *n, int *reclaimed, int *held);
int pg_lease_shift(hookd_store_conn *c, const char *owner, int64_t delta_ms, int *shifted);
int pg_endpoint_pauses(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n);
int pg_due_hints(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n);

/* Second wave (each file's owner implements them as the SQLite backend's namesakes). */
/* pg_events.c: delivery_replay's checks and write, and event_deliver with its reason (replay
 * jobs' items), as sq_replay_one / sq_event_deliver_why / sq_retry_now. */
int pg_replay_one(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why,
                  hookd_replay_memo *memo);
int pg_event_deliver_why(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                         int64_t event_seq, const char *endpoint_id, int64_t now_ms,
                         hookd_delivery *out, const char **why, int64_t *body_bytes);
int pg_retry_now(hookd_store_conn *c, int64_t seq, int64_t now_ms, const char **why);
/* pg_inbound.c */
extern const char pg_held_deleted[];
int pg_inbox_follow(hookd_store_conn *c, int64_t delivery_seq, int64_t now_ms,
                    const char *last_error, const char *result_ref);
int pg_source_delete_within(hookd_store_conn *c, const char *id, int64_t now_ms, int *budget,
                            hookd_delete_counts *out);
int pg_source_create(hookd_store_conn *c, const hookd_source *s, hookd_endpoint *dests,
                     size_t n_dests, int max_eps);
int pg_source_get(hookd_store_conn *c, const char *id, hookd_source *out,
                  hookd_endpoint **dests, size_t *n_dests);
int pg_source_update(hookd_store_conn *c, const hookd_source *s);
int pg_source_delete(hookd_store_conn *c, const char *id, int64_t now_ms,
                     hookd_delete_counts *out);
int pg_source_list(hookd_store_conn *c, hookd_source **out, size_t *n);
int pg_source_page(hookd_store_conn *c, const char *tenant_id, const char *provider,
                   const char *after, int limit, hookd_source **out, size_t *n);
int pg_receive(hookd_store_conn *c, const hookd_receive_req *req, hookd_receive_res *res);
int pg_inbox_get(hookd_store_conn *c, const char *id, hookd_inbox *out, hookd_delivery **dl,
                 size_t *n);
int pg_inbox_list(hookd_store_conn *c, const hookd_inbox_filter *f, hookd_inbox **out,
                  size_t *n);
int pg_inbox_resolve(hookd_store_conn *c, const char *id, hookd_dstate to, int64_t now_ms,
                     size_t *n_resolved, hookd_due_hint **hints, size_t *n_hints);
int pg_inbox_reforward(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                       size_t *n_made, hookd_due_hint **hints, size_t *n_hints);
int pg_inbox_purge(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                   int *purged);
int pg_object_versions_purge(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                             bool *more);
/* pg_retention.c */
int pg_retention_mark(hookd_store_conn *c, const char *kind, int64_t before_ms);
/* Deletes the events of seqs (a bigint[] literal, pg_arr) with their deliveries, attempts and,
 * when keys, the Idempotency-Keys that named them: four statements whatever their number. */
int pg_events_delete(hookd_store_conn *c, const char *seqs, bool keys);
int pg_event_payload_delete(hookd_store_conn *c, const char *tenant_id, const char *id,
                            int64_t now_ms, int64_t *seq, int64_t *purged_ms, int *cancelled);
int pg_event_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                   int64_t *after_seq, int *purged);
int pg_event_expire(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                    int *expired);
int pg_lane_versions_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                           int *purged, bool *more);
/* pg_replay.c */
int pg_replay_select(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                     int64_t max_items, hookd_replay_snapshot *out);
int pg_replay_create(hookd_store_conn *c, hookd_replay_job *job,
                     const hookd_replay_snapshot *snap, size_t *from, size_t chunk,
                     int64_t now_ms);
int pg_replay_abandon(hookd_store_conn *c, int64_t job_seq, int64_t now_ms);
int pg_replay_get(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_job *out, hookd_replay_detail *detail);
int pg_replay_list(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                   hookd_replay_job **out, size_t *n);
int pg_replay_act(hookd_store_conn *c, const char *tenant_id, const char *id,
                  hookd_replay_action action, int64_t now_ms, hookd_replay_job *out);
int pg_replay_step(hookd_store_conn *c, int64_t now_ms, hookd_replay_step_res *res);
int pg_replay_purge(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                    int *purged, bool *more);

#endif

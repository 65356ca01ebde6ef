/* pg_conn.c — the PostgreSQL backend's connections (docs/postgres.md): opening one per executor,
 * transactions (the writer's under the store-wide writer lock), the statement runner and its
 * per-connection cache of prepared statements, the column helpers, and the ops table. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "store/postgres/pg_int.h"

struct pg_shared {
  char *url;
  char *node_id; /* NULL: none (the CLI) */
  pthread_mutex_t mu; /* guards each connection's cancel object against a reconnect */
  /* the start's wait (hookd_pg_wait_ready), for the node's lock too: the writer's first open
   * only (start_wait_s 0 after it) */
  int start_wait_s;
  int migrate_wait_s; /* the same, kept for the migrations' wait for the other nodes to stop */
  bool (*start_stop)(void);
  void (*start_waiting)(const char *reason, int wait_s);
  pg_rix *rix; /* retention's indexes: asked for by the walks, built by the main thread */
};

/* The writer lock every writer transaction takes first ("hookd", "writer" in ASCII). */
#define PG_WRITER_BEGIN "BEGIN; SELECT pg_advisory_xact_lock(1752133476, 2003986804)"
/* The node ids running on this database (a node's old session not ended yet holds the same id:
 * counted once). */
#define PG_NODES_SQL "SELECT count(DISTINCT objid) FROM pg_locks WHERE " PG_NODE_LOCKS
#define PG_READER_BEGIN "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
#define PG_IDLE_IN_TXN_S "30"
/* The writer's: its transactions run their statements back to back (a batch is gathered before
 * its BEGIN), so one idle this long is a node stopped while holding the writer lock — paused (a
 * VM suspended, SIGSTOP, swapping) or its link silent — and every other node's writes wait behind
 * it until the server ends it (a review: 25 s of 503s on every node for one node paused). Below
 * the least lease margin a shared store should have (docs/postgres.md "Failure windows"). */
#define PG_WRITER_IDLE_IN_TXN_S "10"
/* How long a writer whose COMMIT went unanswered asks the server what became of it: past the
 * link timeout (30 s), within which the server ends the old session and so decides. */
#define PG_RESOLVE_MS 45000
#define PG_RESOLVE_NAP_MS 100

/* ---------- shared state ---------- */

static void nap_ms(int ms) {
  struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

int hookd_pg_shared_open(const char *url, const char *node_id, void **shared, char *err,
                         size_t errlen) {
  char *perr = NULL;
  PQconninfoOption *opts = PQconninfoParse(url, &perr);
  if (!opts) {
    /* libpq's message may quote the string, password and all */
    PQfreemem(perr);
    snprintf(err, errlen, "the store URL cannot be read as a PostgreSQL connection URI");
    return -1;
  }
  PQconninfoFree(opts);
  pg_shared *sh = calloc(1, sizeof *sh);
  if (!sh || !(sh->url = strdup(url)) || (node_id && !(sh->node_id = strdup(node_id))) ||
      !(sh->rix = pg_rix_new())) {
    if (sh) {
      free(sh->url);
      free(sh->node_id);
    }
    free(sh);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  pthread_mutex_init(&sh->mu, NULL);
  *shared = sh;
  return 0;
}

int hookd_pg_wait_ready(void *shared, int wait_s, bool (*stop)(void),
                        void (*waiting)(const char *reason, int wait_s)) {
  pg_shared *sh = shared;
  sh->start_wait_s = sh->migrate_wait_s = wait_s;
  sh->start_stop = stop;
  sh->start_waiting = waiting;
  const char *const keys[] = PG_LINK_KEYS;
  const char *vals[] = PG_LINK_VALS(sh->url, "hookd");
  vals[0] = "2"; /* connect_timeout: a host that drops packets holds a stop for 2 s at most */
  int64_t deadline = hookd_mono_ms() + (int64_t)wait_s * 1000;
  bool told = false;
  for (;;) {
    PGPing p = PQpingParams(keys, vals, 1);
    /* accepting; or parameters libpq cannot use, which the open reports */
    if (p == PQPING_OK || p == PQPING_NO_ATTEMPT) return 0;
    if (!told && waiting)
      waiting(p == PQPING_REJECT ? "the server rejects connections (starting up or shutting down)"
                                 : "the server cannot be reached",
              wait_s);
    told = true;
    for (int i = 0; i < 5; i++) { /* 500 ms, a stop heard within 100 */
      if (stop && stop()) return HOOKD_STORE_STOPPED;
      nap_ms(100);
    }
    if (hookd_mono_ms() >= deadline) return 0;
  }
}

const char *pg_shared_url(const pg_shared *sh) { return sh->url; }
const char *pg_shared_node_id(const pg_shared *sh) { return sh->node_id; }
pg_rix *pg_shared_rix(const pg_shared *sh) { return sh->rix; }
int pg_shared_migrate_wait_s(const pg_shared *sh) { return sh->migrate_wait_s; }

void hookd_pg_shared_free(void *shared) {
  pg_shared *sh = shared;
  if (!sh) return;
  pg_rix_free(sh->rix);
  pthread_mutex_destroy(&sh->mu);
  free(sh->url);
  free(sh->node_id);
  free(sh);
}

/* ---------- the CLI's offline check ---------- */

int hookd_pg_lock_offline(const char *url, void **held, char *err, size_t errlen) {
  *held = NULL;
  const char *const keys[] = {"connect_timeout", "dbname", "application_name", NULL};
  const char *const vals[] = {PG_CONNECT_TIMEOUT_S, url, "hookd-cli", NULL};
  PGconn *pg = PQconnectdbParams(keys, vals, 1);
  if (!pg || PQstatus(pg) != CONNECTION_OK) {
    const char *m = pg ? PQerrorMessage(pg) : "out of memory";
    snprintf(err, errlen, "cannot connect to the PostgreSQL store: %.*s",
             (int)strcspn(m, "\n"), m);
    PQfinish(pg);
    return -1;
  }
  /* the migration lock, held until the caller is done: a node starting meanwhile waits */
  PGresult *r = PQexec(pg, PG_MIGRATE_TRY_LOCK);
  bool got = r && PQresultStatus(r) == PGRES_TUPLES_OK && !strcmp(PQgetvalue(r, 0, 0), "t");
  PQclear(r);
  /* and no node may be running: each holds its node lock for its life (the writer and
   * migration locks share the first key: left out) */
  r = got ? PQexec(pg, PG_NODES_SQL) : NULL;
  long running = r && PQresultStatus(r) == PGRES_TUPLES_OK ? atol(PQgetvalue(r, 0, 0)) : -1;
  PQclear(r);
  if (!got || running != 0) {
    if (!got) snprintf(err, errlen, "a hookd node is starting on this store");
    else if (running > 0)
      snprintf(err, errlen, "%ld hookd node%s running on this store", running,
               running == 1 ? " is" : "s are");
    else snprintf(err, errlen, "cannot read the store's locks: %.*s",
                  (int)strcspn(PQerrorMessage(pg), "\n"), PQerrorMessage(pg));
    PQfinish(pg);
    return -1;
  }
  *held = pg;
  return 0;
}

void hookd_pg_unlock_offline(void *held) { PQfinish(held); }

/* ---------- helpers ---------- */

void pg_no_notices(void *arg, const char *message) {
  (void)arg;
  (void)message;
}

static void preps_clear(hookd_store_conn *c) {
  free(c->preps);
  c->preps = NULL;
  c->n_preps = c->cap_preps = 0;
}

/* Takes the node's lock, for the session's life ("hookd" and the id's hash): 1 taken, 0 held by
 * another session, -1 an error. */
static int node_lock(hookd_store_conn *c) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, c->sh->node_id);
  PGresult *r = pg_q(c, "SELECT pg_try_advisory_lock(1752133476, hashtext($1))", &p,
                     "node lock");
  if (!r) return -1;
  int got = !strcmp(PQgetvalue(r, 0, 0), "t");
  PQclear(r);
  if (!got) return 0;
  /* and, beside it, the schema this node's hookd runs on (shared: never waited for), so that a
   * migration tells the nodes of an older hookd from those starting on the new one (pg_schema.c
   * others_stopped) */
  pg_p_init(&p);
  pg_p_i64(&p, pg_schema_latest());
  r = pg_q(c, "SELECT pg_advisory_lock_shared(" PG_SCHEMA_LOCK_KEY ", $1::int)", &p,
           "node lock");
  if (!r) return -1;
  PQclear(r);
  return 1;
}

/* The session holding the node's lock, as the server shows it, into out (what the start's wait
 * logs: an operator tells the node's old run from a live twin by it). */
static void lock_holder(hookd_store_conn *c, char *out, size_t cap) {
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, c->sh->node_id);
  PGresult *r = pg_q_dyn(
      c, "SELECT a.pid, coalesce(host(a.client_addr), CASE WHEN a.pid IS NOT NULL AND"
         " a.client_port = -1 THEN 'a local socket' END, 'not shown'),"
         " coalesce(to_char(a.backend_start AT TIME ZONE 'UTC',"
         " 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), 'not shown'),"
         " coalesce(floor(extract(epoch FROM clock_timestamp() - a.state_change))::bigint::text"
         " || ' s', 'not shown')"
         " FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid"
         " WHERE l.locktype = 'advisory' AND l.classid = 1752133476 AND l.objsubid = 2"
         " AND l.granted AND l.objid = (hashtext($1)::bigint & 4294967295)::oid AND l.database ="
         " (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1",
      &p, "node lock holder");
  if (r && PQntuples(r) == 1)
    snprintf(out, cap, "another session holds the node id's lock (server process %s, client %s,"
             " connected %s, idle %s): this node's previous run, not ended yet by the server, "
             "or another node given the same --node-id", PQgetvalue(r, 0, 0),
             PQgetvalue(r, 0, 1), PQgetvalue(r, 0, 2), PQgetvalue(r, 0, 3));
  else
    snprintf(out, cap, "another session holds the node id's lock: this node's previous run, not "
             "ended yet by the server, or another node given the same --node-id");
  PQclear(r);
  c->err[0] = 0;
}

/* The start found the node's lock held: asks again every 500 ms, for up to the start's wait
 * (docs/postgres.md "Failure windows"). 1 taken, 0 still held, -1 an error, HOOKD_STORE_STOPPED
 * a stop asked for. */
static int node_lock_wait(hookd_store_conn *c) {
  pg_shared *sh = c->sh;
  int64_t deadline = hookd_mono_ms() + (int64_t)sh->start_wait_s * 1000;
  if (sh->start_waiting) {
    char why[400];
    lock_holder(c, why, sizeof why);
    sh->start_waiting(why, sh->start_wait_s);
  }
  for (;;) {
    for (int i = 0; i < 5; i++) { /* 500 ms, a stop heard within 100 */
      if (sh->start_stop && sh->start_stop()) return HOOKD_STORE_STOPPED;
      nap_ms(100);
    }
    int got = node_lock(c);
    if (got != 0 || hookd_mono_ms() >= deadline) return got;
  }
}

/* Sets up a session (a new one, or one whose setup failed: once more). */
/* The server's WAL timeline, as the hex of a WAL file name's first 8 digits, NULL on a standby
 * (SQL: one column). A promoted replica starts a new one; a restarted primary keeps its own. */
#define PG_TIMELINE_SQL                                                                         \
  "CASE WHEN pg_is_in_recovery() THEN NULL"                                                    \
  " ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END"

/* The writer's session: the timeline it writes on ("" when it cannot be read, and then not
 * compared: a lost COMMIT is asked about as before). */
static void read_timeline(hookd_store_conn *c) {
  c->timeline[0] = '\0';
  PGresult *r = PQexec(c->pg, "SELECT " PG_TIMELINE_SQL);
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0))
    snprintf(c->timeline, sizeof c->timeline, "%s", PQgetvalue(r, 0, 0));
  PQclear(r);
}

static int session_setup(hookd_store_conn *c) {
  PQsetNoticeReceiver(c->pg, NULL, NULL);
  PQsetNoticeProcessor(c->pg, pg_no_notices, NULL);
  /* errors without DETAIL or CONTEXT: a constraint's DETAIL quotes the row ("Failing row
   * contains (…)", a payload's text among it), and errors are logged (store.error) */
  PQsetErrorVerbosity(c->pg, PQERRORS_TERSE);
  PQsetErrorContextVisibility(c->pg, PQSHOW_CONTEXT_NEVER);
  pthread_mutex_lock(&c->sh->mu);
  if (c->cancel) PQfreeCancel(c->cancel);
  c->cancel = PQgetCancel(c->pg);
  pthread_mutex_unlock(&c->sh->mu);
  /* UTF-8 text; and what the store's correctness rests on, whatever the server, database, role
   * or URL set (one round trip):
   * - a COMMIT answered is on disk (2xx only after it): synchronous_commit raised from off (a
   *   common tuning), never lowered (remote_apply stays);
   * - the writer's reads see every commit made before its lock was granted: READ COMMITTED (a
   *   default of repeatable read took the snapshot before the lock, docs/postgres.md);
   * - waits for the writer lock end when hookd says (its lock and statement timeouts), not at a
   *   role's lock_timeout (a read-only default is left: a fence holds, docs/postgres.md). */
  if (pg_exec(c, "SET client_encoding = 'UTF8';"
                 " SELECT set_config('synchronous_commit', 'on', false)"
                 " WHERE current_setting('synchronous_commit') = 'off';"
                 " SET default_transaction_isolation = 'read committed';"
                 " SET lock_timeout = 0;"
                 " SET statement_timeout = 0",
              "session") != 0)
    return HOOKD_STORE_ERR;
  /* a session left idle inside a transaction (its node stalled, its link silent) is ended by
   * the server, so that the writer lock it holds does not stop every other node's writes; and
   * the server probes the link of an idle session too, so that a session whose node is gone
   * (its link dropped without a word: a NAT's state lost) ends with the node lock it holds,
   * instead of refusing the node's own reconnect for the OS's two hours of keepalive */
  if (pg_exec(c, HOOKD_PG_NO_JIT, "session") != 0) return HOOKD_STORE_ERR;
  if (pg_exec(c, c->writer ? "SET idle_in_transaction_session_timeout = '" PG_WRITER_IDLE_IN_TXN_S
                            "s'"
                          : "SET idle_in_transaction_session_timeout = '" PG_IDLE_IN_TXN_S "s'",
              "session") != 0 ||
      pg_exec(c, "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5;"
                 " SET tcp_keepalives_count = 3; SET tcp_user_timeout = " PG_LINK_TIMEOUT_MS,
              "session") != 0)
    return HOOKD_STORE_ERR;
  if (c->writer) read_timeline(c);
  if (!c->writer || !c->sh->node_id) return HOOKD_STORE_OK;
  int got = node_lock(c);
  if (got == 0 && c->sh->start_wait_s > 0) got = node_lock_wait(c);
  if (got < 0) return got == HOOKD_STORE_STOPPED ? HOOKD_STORE_STOPPED : HOOKD_STORE_ERR;
  if (!got) {
    snprintf(c->err, sizeof c->err,
             "another hookd with node id \"%.64s\" is running on this database (--node-id)%s",
             c->sh->node_id, c->sh->start_wait_s > 0 ? "; its session held the lock "
                                                       "throughout the start's wait" : "");
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

static void set_err(hookd_store_conn *c, const char *what, const char *msg) {
  size_t n = strlen(msg);
  while (n && (msg[n - 1] == '\n' || msg[n - 1] == ' ')) n--; /* libpq ends with a newline */
  snprintf(c->err, sizeof c->err, "%s: %.*s", what, (int)n, msg);
}

/* Records a failed statement's SQLSTATE and message in c (r NULL: the link's), and clears r. */
static void statement_failed(hookd_store_conn *c, PGresult *r, const char *what) {
  const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  snprintf(c->sqlstate, sizeof c->sqlstate, "%s", st ? st : "08006"); /* none: the link */
  /* a server fenced read-only or demoted, or shutting down: the session stays up and every
   * batch on it would fail — a new one finds the server that takes writes (read-write) */
  if (st && (!strcmp(st, "25006") || !strncmp(st, "57P", 3))) c->stale = 1;
  set_err(c, what, r ? PQresultErrorMessage(r) : PQerrorMessage(c->pg));
  PQclear(r);
}

int pg_fail(hookd_store_conn *c, const char *what) {
  /* after a failed statement its message stays: it says more than ours */
  if (!c->sqlstate[0]) snprintf(c->err, sizeof c->err, "%s", what);
  return HOOKD_STORE_ERR;
}

const char *pg_sqlstate(hookd_store_conn *c) { return c->sqlstate; }

void pg_p_init(pg_params *p) { p->n = 0; }

static void push(pg_params *p, const char *v, int len, int fmt) {
  if (p->n >= PG_MAX_PARAMS) abort(); /* a programming error, caught by any test of the op */
  p->v[p->n] = v;
  p->len[p->n] = len;
  p->fmt[p->n] = fmt;
  p->n++;
}

void pg_p_text(pg_params *p, const char *s) { push(p, s, 0, 0); }

void pg_p_i64(pg_params *p, int64_t v) {
  if (p->n >= PG_MAX_PARAMS) abort();
  snprintf(p->num[p->n], sizeof p->num[p->n], "%lld", (long long)v);
  push(p, p->num[p->n], 0, 0);
}

void pg_p_i64n(pg_params *p, int64_t v) {
  if (v) pg_p_i64(p, v);
  else push(p, NULL, 0, 0);
}

void pg_p_f64(pg_params *p, double v) {
  if (p->n >= PG_MAX_PARAMS) abort();
  snprintf(p->num[p->n], sizeof p->num[p->n], "%.17g", v);
  push(p, p->num[p->n], 0, 0);
}

void pg_p_bool(pg_params *p, bool v) { pg_p_i64(p, v ? 1 : 0); }

void pg_p_blob(pg_params *p, const void *b, size_t n) {
  push(p, b ? (const char *)b : "", (int)n, 1);
}

int pg_bind_type_filter(pg_params *p, const char *type, char **own) {
  const char *exact;
  size_t prefix = hookd_type_filter_split(type, &exact);
  *own = NULL;
  if (prefix && !(*own = strndup(type, prefix))) return -1; /* "a.*" → "a." */
  pg_p_text(p, exact);
  pg_p_text(p, *own);
  return 0;
}

static size_t hash_ptr(const void *p) {
  uintptr_t x = (uintptr_t)p;
  x ^= x >> 17;
  x *= 0x9e3779b97f4a7c15ULL;
  return (size_t)(x >> 16);
}

/* The name of sql's prepared statement on this connection, preparing it the first time; -1 with
 * c->err set on failure. */
static int prepared(hookd_store_conn *c, const char *sql, const char *what) {
  if (c->cap_preps) {
    for (size_t i = hash_ptr(sql) & (c->cap_preps - 1);; i = (i + 1) & (c->cap_preps - 1)) {
      if (!c->preps[i].sql) break;
      if (c->preps[i].sql == sql) return c->preps[i].n;
    }
  }
  if ((c->n_preps + 1) * 2 > c->cap_preps) { /* grow: at most half full */
    size_t nc = c->cap_preps ? c->cap_preps * 2 : 256;
    pg_prep *nv = calloc(nc, sizeof *nv);
    if (!nv) {
      snprintf(c->err, sizeof c->err, "%s: out of memory", what);
      return -1;
    }
    for (size_t i = 0; i < c->cap_preps; i++) {
      if (!c->preps[i].sql) continue;
      size_t j = hash_ptr(c->preps[i].sql) & (nc - 1);
      while (nv[j].sql) j = (j + 1) & (nc - 1);
      nv[j] = c->preps[i];
    }
    free(c->preps);
    c->preps = nv;
    c->cap_preps = nc;
  }
  int n = (int)c->n_preps;
  char name[24];
  snprintf(name, sizeof name, "h%d", n);
  PGresult *r = PQprepare(c->pg, name, sql, 0, NULL);
  if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
    statement_failed(c, r, what);
    return -1;
  }
  PQclear(r);
  size_t i = hash_ptr(sql) & (c->cap_preps - 1);
  while (c->preps[i].sql) i = (i + 1) & (c->cap_preps - 1);
  c->preps[i].sql = sql;
  c->preps[i].n = n;
  c->n_preps++;
  return n;
}

/* Checks a result: NULL (c->err set) unless a command or rows; counts the rows written. */
static PGresult *checked(hookd_store_conn *c, PGresult *r, const char *what) {
  ExecStatusType s = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) {
    statement_failed(c, r, what);
    return NULL;
  }
  c->sqlstate[0] = 0;
  const char *tag = PQcmdStatus(r);
  if (!strncmp(tag, "INSERT", 6) || !strncmp(tag, "UPDATE", 6) || !strncmp(tag, "DELETE", 6) ||
      !strncmp(tag, "MERGE", 5))
    c->changes += atoll(PQcmdTuples(r));
  return r;
}

PGresult *pg_q(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what) {
  int n = prepared(c, sql, what);
  if (n < 0) return NULL;
  char name[24];
  snprintf(name, sizeof name, "h%d", n);
  PGresult *r = PQexecPrepared(c->pg, name, p ? p->n : 0, p ? p->v : NULL, p ? p->len : NULL,
                               p ? p->fmt : NULL, 0);
  return checked(c, r, what);
}

PGresult *pg_q_dyn(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what) {
  PGresult *r = PQexecParams(c->pg, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->len : NULL,
                             p ? p->fmt : NULL, 0);
  return checked(c, r, what);
}

int64_t pg_x(hookd_store_conn *c, const char *sql, const pg_params *p, const char *what) {
  PGresult *r = pg_q(c, sql, p, what);
  if (!r) return -1;
  const char *t = PQcmdTuples(r);
  int64_t n = *t ? atoll(t) : PQntuples(r);
  PQclear(r);
  return n;
}

void pg_wrote(hookd_store_conn *c, int64_t n) { c->changes += n; }

static int pg_nodes_live(hookd_store_conn *c, int *n) {
  PGresult *r = pg_q(c, PG_NODES_SQL, NULL, "count the nodes");
  if (!r) return HOOKD_STORE_ERR;
  *n = PQntuples(r) == 1 ? (int)pg_i64(r, 0, 0) : 0;
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* clock_timestamp(), not now(): the time the statement runs, not its transaction's start. */
static int pg_clock_ms(hookd_store_conn *c, int64_t *ms) {
  PGresult *r = pg_q(c, "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint", NULL,
                     "read the database's clock");
  if (!r) return HOOKD_STORE_ERR;
  *ms = PQntuples(r) == 1 ? pg_i64(r, 0, 0) : 0;
  PQclear(r);
  return *ms > 0 ? HOOKD_STORE_OK : pg_fail(c, "read the database's clock");
}

/* The clock guard's vote: this node's skew stored (checked_at on the database's clock), and
 * the skews of the other node ids whose node lock is held (pg_try_advisory_lock's second key is
 * the id's hashtext, held in pg_locks as an unsigned objid). Rows of ids not seen for 7 days
 * and not running go. */
#define PG_NODE_LIVE(id)                                                                        \
  "EXISTS (SELECT 1 FROM pg_locks WHERE " PG_NODE_LOCKS " AND objid::bigint = (hashtext(" id    \
  ")::bigint & 4294967295))"
#define PG_CLOCK_VOTES_SQL                                                                      \
  "WITH up AS (INSERT INTO node_clocks (node_id, skew_ms, err_ms, checked_at) VALUES ($1, $2,"  \
  " $3, " PG_DB_NOW_MS ") ON CONFLICT (node_id) DO UPDATE SET skew_ms = excluded.skew_ms,"      \
  " err_ms = excluded.err_ms, checked_at = excluded.checked_at),"                               \
  " gone AS (DELETE FROM node_clocks g WHERE g.node_id <> $1 AND g.checked_at < " PG_DB_NOW_MS \
  " - 604800000 AND NOT " PG_NODE_LIVE("g.node_id") ")"                                         \
  " SELECT n.skew_ms, n.err_ms FROM node_clocks n WHERE n.node_id <> $1 AND "                   \
  PG_NODE_LIVE("n.node_id")

static int pg_clock_votes(hookd_store_conn *c, int64_t skew_ms, int64_t err_ms,
                          hookd_clock_voter **out, size_t *n) {
  *out = NULL;
  *n = 0;
  if (!c->sh->node_id) return HOOKD_STORE_OK; /* (the CLI runs no dispatcher) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, c->sh->node_id);
  pg_p_i64(&p, skew_ms);
  pg_p_i64(&p, err_ms);
  PGresult *r = pg_q(c, PG_CLOCK_VOTES_SQL, &p, "the clocks' vote");
  if (!r) return HOOKD_STORE_ERR;
  pg_wrote(c, 1); /* the upsert (a SELECT's tag counts no CTE's writes) */
  int rows = PQntuples(r);
  if (rows > 0 && !(*out = calloc((size_t)rows, sizeof **out))) {
    PQclear(r);
    return pg_fail(c, "the clocks' vote: out of memory");
  }
  for (int i = 0; i < rows; i++)
    (*out)[i] = (hookd_clock_voter){pg_i64(r, i, 0), pg_i64(r, i, 1)};
  *n = (size_t)rows;
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* The retention windows (store.h): this node's stored, the others running read (the upsert is
 * not seen by the statement's own read: this node's are added here). Rows of ids not seen for
 * 7 days and not running go. */
#define PG_RETENTION_SQL                                                                        \
  "WITH up AS (INSERT INTO node_retention (node_id, inbox_s, payload_s, event_s, seen_at)"      \
  " VALUES ($1, $2, $3, $4, " PG_DB_NOW_MS ") ON CONFLICT (node_id) DO UPDATE SET"              \
  " inbox_s = excluded.inbox_s, payload_s = excluded.payload_s, event_s = excluded.event_s,"    \
  " seen_at = excluded.seen_at),"                                                               \
  " gone AS (DELETE FROM node_retention g WHERE g.node_id <> $1 AND g.seen_at < " PG_DB_NOW_MS \
  " - 604800000 AND NOT " PG_NODE_LIVE("g.node_id") ")"                                         \
  " SELECT count(*), COALESCE(max(r.inbox_s), 0), bool_or(r.payload_s = 0),"                    \
  " COALESCE(max(r.payload_s), 0), bool_or(r.event_s = 0), COALESCE(max(r.event_s), 0)"         \
  " FROM node_retention r WHERE r.node_id <> $1 AND " PG_NODE_LIVE("r.node_id")

static int pg_retention_windows(hookd_store_conn *c, const int64_t mine[3], int64_t out[3]) {
  memcpy(out, mine, 3 * sizeof *out);
  if (!c->sh->node_id) return HOOKD_STORE_OK; /* (the CLI walks nothing) */
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, c->sh->node_id);
  for (int i = 0; i < 3; i++) pg_p_i64(&p, mine[i]);
  PGresult *r = pg_q(c, PG_RETENTION_SQL, &p, "the nodes' retention windows");
  if (!r) return HOOKD_STORE_ERR;
  pg_wrote(c, 1); /* the upsert (a SELECT's tag counts no CTE's writes) */
  if (PQntuples(r) == 1 && pg_i64(r, 0, 0) > 0) {
    if (pg_i64(r, 0, 1) > out[0]) out[0] = pg_i64(r, 0, 1);
    for (int i = 1; i < 3; i++) { /* (0: off, kept for ever — the longest) */
      bool off = !strcmp(PQgetvalue(r, 0, 2 * i), "t");
      int64_t longest = pg_i64(r, 0, 2 * i + 1);
      if (out[i] != 0 && (off || longest > out[i])) out[i] = off ? 0 : longest;
    }
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

static int pg_nodes_list(hookd_store_conn *c, hookd_node_row **out, size_t *n, int *live) {
  *out = NULL;
  *n = 0;
  int rc = pg_nodes_live(c, live);
  if (rc) return rc;
  PGresult *r = pg_q(c, "SELECT n.node_id, n.skew_ms, n.err_ms, n.checked_at, " PG_NODE_LIVE(
                            "n.node_id") " FROM node_clocks n ORDER BY n.node_id",
                     NULL, "list the nodes");
  if (!r) return HOOKD_STORE_ERR;
  int rows = PQntuples(r);
  if (rows > 0 && !(*out = calloc((size_t)rows, sizeof **out))) {
    PQclear(r);
    return pg_fail(c, "list the nodes: out of memory");
  }
  for (int i = 0; i < rows; i++) {
    hookd_node_row *x = &(*out)[i];
    *x = (hookd_node_row){.node_id = pg_str(r, i, 0),
                          .clock = {pg_i64(r, i, 1), pg_i64(r, i, 2)},
                          .checked_ms = pg_i64(r, i, 3),
                          .live = !strcmp(PQgetvalue(r, i, 4), "t")};
    *n = (size_t)i + 1; /* (freed whole on an error below) */
    if (!x->node_id) {
      PQclear(r);
      hookd_node_rows_free(*out, *n);
      *out = NULL;
      *n = 0;
      return pg_fail(c, "list the nodes: out of memory");
    }
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

int pg_exec(hookd_store_conn *c, const char *sql, const char *what) {
  PGresult *r = checked(c, PQexec(c->pg, sql), what);
  if (!r) return HOOKD_STORE_ERR;
  PQclear(r);
  return HOOKD_STORE_OK;
}

bool pg_null(const PGresult *r, int row, int col) { return PQgetisnull(r, row, col); }

char *pg_str(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : strdup(PQgetvalue(r, row, col));
}

const char *pg_val(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

int64_t pg_i64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

double pg_f64(const PGresult *r, int row, int col) {
  return PQgetisnull(r, row, col) ? 0 : strtod(PQgetvalue(r, row, col), NULL);
}

unsigned char *pg_blob(const PGresult *r, int row, int col, size_t *len) {
  *len = 0;
  if (PQgetisnull(r, row, col)) return NULL;
  size_t n = 0;
  unsigned char *raw = PQunescapeBytea((const unsigned char *)PQgetvalue(r, row, col), &n);
  if (!raw) return NULL;
  unsigned char *out = malloc(n + 1);
  if (out) {
    memcpy(out, raw, n);
    out[n] = 0;
    *len = n;
  }
  PQfreemem(raw);
  return out;
}

void pg_copy(const PGresult *r, int row, int col, char *dst, size_t cap) {
  snprintf(dst, cap, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

/* ---------- connections and transactions ---------- */

static int pg_open(void *shared, int writer, hookd_store_conn **out, char *err, size_t errlen) {
  pg_shared *sh = shared;
  hookd_store_conn *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return HOOKD_STORE_ERR;
  }
  c->sh = sh;
  c->writer = writer;
  hookd_pfilter_cache_init(&c->pf);
  const char *const keys[] = PG_LINK_KEYS;
  const char *const vals[] = PG_LINK_VALS(sh->url, "hookd");
  c->pg = PQconnectdbParams(keys, vals, 1);
  if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
    const char *m = c->pg ? PQerrorMessage(c->pg) : "out of memory";
    size_t n = strlen(m);
    while (n && m[n - 1] == '\n') n--;
    snprintf(err, errlen, "cannot connect to the PostgreSQL store: %.*s", (int)n, m);
    PQfinish(c->pg);
    hookd_pfilter_cache_free(&c->pf);
    free(c);
    return HOOKD_STORE_ERR;
  }
  int set = session_setup(c);
  if (writer) sh->start_wait_s = 0; /* (a reconnect's lock is not waited for: docs/postgres.md) */
  if (set != 0) {
    snprintf(err, errlen, "%s", set == HOOKD_STORE_STOPPED ? "stopped while waiting for the node "
             "id's lock" : c->err);
    PQfinish(c->pg);
    if (c->cancel) PQfreeCancel(c->cancel);
    preps_clear(c);
    hookd_pfilter_cache_free(&c->pf);
    free(c);
    return set == HOOKD_STORE_STOPPED ? HOOKD_STORE_STOPPED : HOOKD_STORE_ERR;
  }
  *out = c;
  return HOOKD_STORE_OK;
}

static void pg_close(hookd_store_conn *c) {
  if (!c) return;
  PQfinish(c->pg);
  if (c->cancel) PQfreeCancel(c->cancel);
  preps_clear(c);
  hookd_pfilter_cache_free(&c->pf);
  hookd_hold_memo_free(&c->hold);
  free(c);
}

static const char *pg_errmsg(hookd_store_conn *c) { return c->err[0] ? c->err : "no error"; }
static void pg_clear_error(hookd_store_conn *c) { c->err[0] = 0; }

static void pg_interrupt(hookd_store_conn *c) {
  char buf[256];
  pthread_mutex_lock(&c->sh->mu);
  if (c->cancel) PQcancel(c->cancel, buf, sizeof buf);
  pthread_mutex_unlock(&c->sh->mu);
}

/* After a failed batch, a batch that writes nothing takes a transaction id: its commit then
 * writes a commit record and flushes it, which tests the server (its link, its disk), and only
 * a write that went through says the store takes writes again. Without one an idle node stayed
 * "storage_unavailable" (/readyz 503) after a brief outage until something wrote. */
static int pg_probe(hookd_store_conn *c) {
  PGresult *r = PQexec(c->pg, "SELECT txid_current()");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    statement_failed(c, r, "probe");
    return HOOKD_STORE_ERR;
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* The server's settings no session can override (store.h durability_check): with fsync off a
 * COMMIT answered is not on disk (a crash of the server or its host loses acknowledged
 * events), with full_page_writes off a torn page may corrupt the database. */
static int pg_durability_check(hookd_store_conn *c, char *out, size_t cap) {
  out[0] = '\0';
  PGresult *r =
      PQexec(c->pg, "SELECT current_setting('fsync'), current_setting('full_page_writes')");
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    statement_failed(c, r, "read the server's durability settings");
    return HOOKD_STORE_ERR;
  }
  bool fsync_off = !strcmp(PQgetvalue(r, 0, 0), "off");
  bool fpw_off = !strcmp(PQgetvalue(r, 0, 1), "off");
  PQclear(r);
  if (fsync_off || fpw_off)
    snprintf(out, cap, "the PostgreSQL server runs with %s off: %s",
             fsync_off && fpw_off ? "fsync and full_page_writes" : fsync_off ? "fsync"
                                                                            : "full_page_writes",
             fsync_off ? "a commit it answers is not on disk, and a crash of the server or its "
                         "host loses events hookd acknowledged"
                       : "a crash during a page write may corrupt the database");
  return HOOKD_STORE_OK;
}

bool pg_reports_read_only(const PGconn *pg) {
  const char *ro = PQparameterStatus(pg, "default_transaction_read_only");
  const char *hs = PQparameterStatus(pg, "in_hot_standby");
  return (ro && !strcmp(ro, "on")) || (hs && !strcmp(hs, "on"));
}

static int pg_begin(hookd_store_conn *c, int writer) {
  c->in_savepoint = 0;
  for (int again = 0;; again++) {
    /* lost since the last transaction: once more. A new session that could not be set up (the
     * node's lock taken meanwhile by another node of this id) is not used: every transaction
     * tries again, and fails until it can (docs/postgres.md "Failure windows") */
    /* a server that no longer takes writes since a reload (a fence; a standby after a failover)
     * says so (PostgreSQL 14 reports both): a reader's session too goes to the one that does,
     * where the writer's went, not left reading a frozen store */
    if (pg_reports_read_only(c->pg)) c->stale = 1;
    if (PQstatus(c->pg) != CONNECTION_OK || c->setup_failed || c->stale) {
      if (PQstatus(c->pg) != CONNECTION_OK || c->stale) {
        c->stale = 0;
        PQreset(c->pg);
        preps_clear(c); /* (the prepared statements were the old session's) */
      }
      if (PQstatus(c->pg) != CONNECTION_OK) {
        set_err(c, "reconnect", PQerrorMessage(c->pg));
        return HOOKD_STORE_ERR;
      }
      c->setup_failed = session_setup(c) != 0;
      if (c->setup_failed) return HOOKD_STORE_ERR;
    }
    int rc = pg_exec(c, writer ? PG_WRITER_BEGIN : PG_READER_BEGIN, "begin");
    /* a link the BEGIN found dead (the server restarted, or ended the idle session): nothing
     * ran on it, so the transaction begins again on a new one — once */
    if (rc == 0 || again || PQstatus(c->pg) == CONNECTION_OK) return rc;
  }
}

/* The outcome of transaction xid, whose COMMIT was sent and went unanswered (the link dropped):
 * asked over a session of its own (no node lock: it only reads), again while the server has not
 * ended the old session yet ("in progress") or cannot be reached, for up to PG_RESOLVE_MS.
 * HOOKD_STORE_OK: committed; HOOKD_STORE_ERR: rolled back; HOOKD_STORE_UNKNOWN: no answer
 * (docs/postgres.md "Failure windows"). */
/* The key of this writer's row in commit_marks: the node's id (one writer a node, its lock
 * held), or the CLI's. */
static const char *mark_key(const hookd_store_conn *c) {
  const char *id = pg_shared_node_id(c->sh);
  return id ? id : "hookd-cli";
}

static int commit_outcome(hookd_store_conn *c, const char *xid) {
  const char *const base_k[] = PG_LINK_KEYS;
  const char *const base_v[] = PG_LINK_VALS(c->sh->url, "hookd");
  const char *keys[sizeof base_k / sizeof *base_k + 4], *vals[sizeof keys / sizeof *keys];
  size_t nk = 0;
  for (; base_k[nk]; nk++) keys[nk] = base_k[nk], vals[nk] = base_v[nk];
  /* the server the writer's session was on, whether it takes writes now or not (after the URL:
   * they win over it): a primary fenced read-only still knows its transactions, and a
   * read-write session would not be given there (another timeline's answer is none anyway) */
  const char *host = PQhost(c->pg), *port = PQport(c->pg);
  keys[nk] = "target_session_attrs", vals[nk++] = "any";
  if (host && *host) keys[nk] = "host", vals[nk++] = host;
  if (port && *port) keys[nk] = "port", vals[nk++] = port;
  const char *addr = PQhostaddr(c->pg); /* (a URL's hostaddr list would not match one host) */
  if (addr && *addr) keys[nk] = "hostaddr", vals[nk++] = addr;
  keys[nk] = vals[nk] = NULL;
  const char *params[1] = {xid};
  int64_t deadline = hookd_mono_ms() + PG_RESOLVE_MS;
  PGconn *q = NULL;
  int rc = HOOKD_STORE_UNKNOWN;
  for (;;) {
    if (!q || PQstatus(q) != CONNECTION_OK) {
      PQfinish(q);
      q = PQconnectdbParams(keys, vals, 1);
      if (q) PQsetNoticeProcessor(q, pg_no_notices, NULL);
    }
    if (q && PQstatus(q) == CONNECTION_OK) {
      PGresult *r = PQexecParams(q, "SELECT txid_status($1::bigint), " PG_TIMELINE_SQL, 1, NULL,
                                 params, NULL, NULL, 0);
      /* an id past the server's next (22023): a crash lost the transaction and nothing has
       * taken the id since — asked as a transaction that ended, its token deciding */
      const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      if (state && !strcmp(state, "22023") && c->token[0]) {
        PQclear(r);
        r = PQexec(q, "SELECT 'aborted', " PG_TIMELINE_SQL);
      }
      bool answered = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
      /* another timeline (a replica promoted meanwhile, which never saw the id and may since
       * have given it to another transaction: "committed" would be another node's) is no answer,
       * nor is a standby's */
      bool same = !c->timeline[0] ||
                  (answered && !PQgetisnull(r, 0, 1) && !strcmp(PQgetvalue(r, 0, 1), c->timeline));
      const char *st = answered && same && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
      bool committed = !strcmp(st, "committed"), ended = committed || !strcmp(st, "aborted");
      bool wait = !strcmp(st, "in progress") || (!answered && PQstatus(q) != CONNECTION_OK);
      PQclear(r); /* (st with it) */
      /* ended: the token decides, not the id — a server that crashed before the COMMIT reached
       * its disk gives the same id to its next transaction, whose "committed" was taken for
       * this one's (rows answered 2xx that do not exist: a review). The token is there only if
       * this transaction's writes are. (An id recycled and its transaction still running reads
       * "in progress": waited for, then the token.) */
      if (ended && c->token[0]) {
        const char *mp[1] = {mark_key(c)};
        PGresult *m = PQexecParams(q, "SELECT token::text FROM commit_marks WHERE node_id = $1",
                                   1, NULL, mp, NULL, NULL, 0);
        if (PQresultStatus(m) == PGRES_TUPLES_OK)
          rc = PQntuples(m) == 1 && !strcmp(PQgetvalue(m, 0, 0), c->token) ? HOOKD_STORE_OK
                                                                            : HOOKD_STORE_ERR;
        else
          wait = PQstatus(q) != CONNECTION_OK; /* (asked again; a refusal is no answer) */
        PQclear(m);
      } else if (ended) { /* (no token written: a transaction of the CLI's older paths) */
        rc = committed ? HOOKD_STORE_OK : HOOKD_STORE_ERR;
      }
      /* any other answer (an id the server never gave out: a promoted replica) is no answer */
      if (rc != HOOKD_STORE_UNKNOWN || !wait) break;
    }
    if (hookd_mono_ms() + PG_RESOLVE_NAP_MS > deadline) break;
    nap_ms(PG_RESOLVE_NAP_MS);
  }
  PQfinish(q);
  if (rc == HOOKD_STORE_OK) c->err[0] = 0;
  if (rc != HOOKD_STORE_UNKNOWN)
    c->settled = rc == HOOKD_STORE_OK ? HOOKD_STORE_SETTLED_COMMITTED
                                      : HOOKD_STORE_SETTLED_ROLLED_BACK;
  if (rc == HOOKD_STORE_ERR)
    snprintf(c->err, sizeof c->err,
             "commit: the link to the server dropped and the server rolled the transaction back");
  return rc;
}

/* The batch's transaction id, and its token written into commit_marks when it wrote: prepared
 * (pg_q) — planned anew at each batch, a data-modifying CTE, it doubled the ack's latency at
 * a moderate load (BENCHMARKS.md "Stop 54") */
static const char mark_sql[] =
    "WITH x AS (SELECT txid_current_if_assigned() AS id), m AS (INSERT INTO"
    " commit_marks(node_id, token) SELECT $1, $2::bigint FROM x WHERE x.id IS NOT NULL"
    " ON CONFLICT (node_id) DO UPDATE SET token = EXCLUDED.token RETURNING 1)"
    " SELECT (SELECT id FROM x), (SELECT count(*) FROM m)";

static int pg_commit(hookd_store_conn *c) {
  /* the transaction's id, if it wrote: what to ask the server about should the COMMIT's answer
   * not come (without one it wrote nothing, and a lost COMMIT lost nothing) */
  char xid[24] = "";
  c->token[0] = '\0';
  if (c->writer && PQtransactionStatus(c->pg) == PQTRANS_INTRANS) {
    /* and, when it wrote, the batch's token into commit_marks, in the same round trip: what
     * a lost COMMIT's outcome is read by (commit_outcome) */
    uint64_t t = 0;
    if (hookd_random_bytes(&t, sizeof t) != 0) t = (uint64_t)hookd_mono_ms();
    char token[24];
    snprintf(token, sizeof token, "%lld", (long long)(t >> 1)); /* (a bigint: positive) */
    pg_params p;
    pg_p_init(&p);
    pg_p_text(&p, mark_key(c));
    pg_p_text(&p, token);
    PGresult *x = pg_q(c, mark_sql, &p, "commit");
    if (!x || PQntuples(x) != 1) { /* not sent: the server rolls the transaction back */
      if (x) statement_failed(c, x, "commit");
      return HOOKD_STORE_ERR;
    }
    pg_copy(x, 0, 0, xid, sizeof xid);
    if (xid[0]) snprintf(c->token, sizeof c->token, "%s", token);
    PQclear(x);
  }
  PGresult *r = PQexec(c->pg, "COMMIT");
  /* a failure the server did not word (no SQLSTATE) is the link's, whatever libpq's status says
   * (an older libpq leaves a link a timeout ended marked OK) */
  bool link_lost = !r || PQstatus(c->pg) != CONNECTION_OK ||
                   (PQresultStatus(r) != PGRES_COMMAND_OK &&
                    !PQresultErrorField(r, PG_DIAG_SQLSTATE));
  if (link_lost) {
    /* the COMMIT may have reached the server and committed before the connection went */
    set_err(c, "commit", PQerrorMessage(c->pg));
    PQclear(r);
    return xid[0] ? commit_outcome(c, xid) : HOOKD_STORE_ERR;
  }
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    set_err(c, "commit", PQresultErrorMessage(r));
    PQclear(r);
    return HOOKD_STORE_ERR;
  }
  /* the COMMIT of a transaction a statement aborted answers ROLLBACK */
  int ok = !strcmp(PQcmdStatus(r), "COMMIT");
  PQclear(r);
  if (!ok) {
    snprintf(c->err, sizeof c->err, "commit: the server rolled the transaction back");
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

static int pg_commit_settled(hookd_store_conn *c) {
  int s = c->settled;
  c->settled = 0;
  return s;
}

static int pg_rollback(hookd_store_conn *c) {
  c->in_savepoint = 0;
  if (PQtransactionStatus(c->pg) == PQTRANS_IDLE) return HOOKD_STORE_OK;
  PGresult *r = PQexec(c->pg, "ROLLBACK");
  PQclear(r);
  return HOOKD_STORE_OK;
}

/* In PostgreSQL a failed statement aborts the transaction, and only a rollback to a savepoint
 * opened before it recovers it: in_txn needs to know whether the op's savepoint is open. */
static int pg_savepoint(hookd_store_conn *c) {
  int rc = pg_exec(c, "SAVEPOINT op", "savepoint");
  if (rc == 0) c->in_savepoint = 1;
  return rc;
}
static int pg_release(hookd_store_conn *c) {
  c->in_savepoint = 0;
  return pg_exec(c, "RELEASE op", "release");
}
static int pg_rollback_to(hookd_store_conn *c) {
  return pg_exec(c, "ROLLBACK TO op", "rollback to savepoint");
}
static int64_t pg_changes(hookd_store_conn *c) { return c->changes; }

/* Open, or aborted by a statement inside the op's savepoint (a rollback to it recovers the
 * transaction). Aborted outside one, or gone with the connection, the transaction is lost. */
static int pg_in_txn(hookd_store_conn *c) {
  switch (PQtransactionStatus(c->pg)) {
  case PQTRANS_INTRANS:
  case PQTRANS_ACTIVE: return 1;
  case PQTRANS_INERROR: return c->in_savepoint;
  default: return 0;
  }
}

const hookd_store_backend hookd_pg_backend = {
    .name = "postgres",
    .open = pg_open,
    .close = pg_close,
    .errmsg = pg_errmsg,
    .clear_error = pg_clear_error,
    .interrupt = pg_interrupt,
    .migrate = pg_migrate,
    .durability_check = pg_durability_check,
    .first_sealed = pg_first_sealed,
    .begin = pg_begin,
    .commit = pg_commit,
    .commit_settled = pg_commit_settled,
    .rollback = pg_rollback,
    .savepoint = pg_savepoint,
    .release = pg_release,
    .rollback_to = pg_rollback_to,
    .changes = pg_changes,
    .probe = pg_probe,
    .clock_ms = pg_clock_ms,
    .nodes_live = pg_nodes_live,
    .clock_votes = pg_clock_votes,
    .nodes_list = pg_nodes_list,
    .retention_windows = pg_retention_windows,
    .endpoint_pauses = pg_endpoint_pauses,
    .in_txn = pg_in_txn,
    .tenant_create = pg_tenant_create,
    .tenant_get = pg_tenant_get,
    .tenant_update = pg_tenant_update,
    .tenant_delete = pg_tenant_delete,
    .event_type_create = pg_event_type_create,
    .event_type_list = pg_event_type_list,
    .event_type_get = pg_event_type_get,
    .backlog_count = pg_backlog_count,
    .config_stamps = pg_config_stamps,
    .event_type_update = pg_event_type_update,
    .event_types_check = pg_event_types_check,
    .tenant_list = pg_tenant_list,
    .tenant_page = pg_tenant_page,
    .endpoint_create = pg_endpoint_create,
    .endpoint_get = pg_endpoint_get,
    .endpoint_stats = pg_endpoint_stats,
    .event_deliver = pg_event_deliver,
    .ever_made = pg_ever_made,
    .endpoint_list = pg_endpoint_list,
    .endpoint_update = pg_endpoint_update,
    .endpoint_delete = pg_endpoint_delete,
    .delete_step = pg_delete_step,
    .endpoint_reseal = pg_endpoint_reseal,
    .master_key_claim = pg_master_key_claim,
    .owed_expired = pg_owed_expired,
    .expire_owed = pg_expire_owed,
    .endpoints_since = pg_endpoints_since,
    .publish = pg_publish,
    .event_payload_delete = pg_event_payload_delete,
    .event_get = pg_event_get,
    .delivery_get = pg_delivery_get,
    .delivery_list = pg_delivery_list,
    .delivery_replay = pg_delivery_replay,
    .claim = pg_claim,
    .record_outcome = pg_record_outcome,
    .release_lease = pg_release_lease,
    .mark_sent = pg_mark_sent,
    .reclaim_leases = pg_reclaim_leases,
    .lease_shift = pg_lease_shift,
    .due_hints = pg_due_hints,
    .api_key_create = pg_api_key_create,
    .api_key_list = pg_api_key_list,
    .api_key_revoke = pg_api_key_revoke,
    .audit_append = pg_audit_append,
    .answer_get = pg_answer_get,
    .answer_put = pg_answer_put,
    .answer_purge = pg_answer_purge,
    .api_key_purge = pg_api_key_purge,
    .audit_list = pg_audit_list,
    .source_create = pg_source_create,
    .source_get = pg_source_get,
    .source_update = pg_source_update,
    .source_delete = pg_source_delete,
    .source_list = pg_source_list,
    .source_page = pg_source_page,
    .receive = pg_receive,
    .inbox_get = pg_inbox_get,
    .inbox_list = pg_inbox_list,
    .inbox_resolve = pg_inbox_resolve,
    .inbox_reforward = pg_inbox_reforward,
    .inbox_purge = pg_inbox_purge,
    .object_versions_purge = pg_object_versions_purge,
    .lane_versions_purge = pg_lane_versions_purge,
    .event_purge = pg_event_purge,
    .event_expire = pg_event_expire,
    .replay_select = pg_replay_select,
    .event_list = pg_event_list,
    .replay_create = pg_replay_create,
    .replay_get = pg_replay_get,
    .replay_list = pg_replay_list,
    .replay_abandon = pg_replay_abandon,
    .replay_act = pg_replay_act,
    .replay_step = pg_replay_step,
    .replay_purge = pg_replay_purge,
};

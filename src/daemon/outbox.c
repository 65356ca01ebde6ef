/* outbox.c — the transactional outbox's relay (docs/outbox.md, O2).
 *
 * One thread, one libpq connection to the producer's database. A cycle is one transaction
 * there: take the oldest waiting rows (FOR UPDATE, a locked one waited for), publish each into
 * the engine under its row's event id and wait for the engine's fsync'd commits, then delete the
 * rows published and mark the rows refused, and commit. A crash anywhere before that commit leaves
 * the rows to be taken again; the engine answers the repeat as a duplicate. Between cycles the
 * thread waits for a NOTIFY on the channel hookd_outbox, a poll interval, or a stop. */
#include "daemon/outbox.h"

#include <libpq-fe.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/clock.h"
#include "core/num.h"
#include "core/timefmt.h"
#include "daemon/api.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "store/postgres/pg_store.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define BUSY_WAIT_MS 1000 /* the store behind, or unable to commit: try again after this */
/* A statement's answer is awaited this long at most: past the session's statement_timeout
 * (60 s), a database that no longer answers at all (a partition, a stopped server) */
#define QUERY_TIMEOUT_MS 90000
#define SKIP_MAX 10000 /* refused rows whose mark failed, left out of this run's SELECTs */
/* how long such a row is left alone: then taken again, its mark tried again. A seq is no row's
 * for ever: a table made again, truncated or its sequence reset (a failover that lost rows)
 * gives it to a new row, which was then never relayed, without a word (a review). */
#define SKIP_RETRY_MS (10 * 60 * 1000)
/* rows the engine answered 5xx while others of their batch were published, each tried again
 * after its own backoff (docs/outbox.md): past this many, a row deferred is simply in the next
 * batch again */
#define HELD_MAX 1000
#define WHY_MAX 200    /* the refusal written to relay_error (ASCII: the API's messages) */
#define UNCONVERTIBLE "a text column of the row has no UTF-8 form in the database's encoding"
/* a text column's length in UTF-8, converted by the server (the encoding probe) */
#define PROBE_LEN(col) "coalesce(octet_length(convert_to(" col ", 'UTF8')), 0)"

enum { C_SEQ, C_TENANT, C_ID, C_TYPE, C_PAYLOAD, C_OCCURRED, C_OKEY, C_OVER, C_CHANNELS,
       C_SCHEMA, C_AGE, C_PLEN, C_LOCKED, C__COUNT };
/* A batch's payload text fetched at most (its first row whatever its size): docs/outbox.md. */
#define OUTBOX_BATCH_BYTES "16777216"
#define DEFERRED_LOG_MS 60000 /* outbox.deferred names one row at most once a minute */
#define SETTLE_SAY_MS 10000   /* outbox.settling while the engine's outcomes do not come */
/* payload text handed to the engine before its commits are waited for and the parsed bodies
 * freed: parsed, a payload takes up to ~20 times its text (docs/outbox.md) */
#define PARSED_TEXT_MAX ((size_t)2 << 20)

struct hookd_outbox {
  hookd_app *app;
  pthread_t thread;
  int wake_fd; /* an eventfd: written once by stop, readable from then on */
  atomic_bool stopping;
  PGconn *pg;          /* the relay thread's own */
  char *password;      /* the connection string's ("" none): cut out of every message logged */
  struct skipped_row *skip; /* refused rows whose mark failed (a column too short, a trigger): */
  size_t n_skip;       /* left out of the SELECTs for a while, not retaken in a loop */
  int64_t skip_retry_ms; /* that while: SKIP_RETRY_MS (HOOKD_OUTBOX_SKIP_RETRY_MS: tests) */
  bool stuck;          /* more of them than SKIP_MAX: no row is taken until some are due */
  struct held_row *held; /* rows deferred (a 5xx) beside rows published: hold() */
  size_t n_held;
  bool reconnect;      /* a statement failed as a server not (or no longer) the primary does */
  bool waiting_said;   /* outbox.standby logged for this wait */
  bool abandoned;      /* publishes left unanswered at a stop (settle): the process must end */
  long long deferred_seq;     /* the row outbox.deferred last named, and when (monotonic) */
  int64_t deferred_logged_ms;
  char select_sql[2048], delete_sql[300], mark_sql[300], lag_sql[400], seqs_sql[600];
  char probe_sql[1024];
  char table[300]; /* the table's name, quoted */
};

/* A row the engine could not take now (a 5xx) while others of its batch were published: left
 * out of the batches until due_ms, so the rows behind it go on (before, a review, every batch
 * waited a second for it: 10,000 rows behind one such row took 22 s instead of 1.2 s). Its lane
 * (the rows of its tenant and ordering_key) waits behind it meanwhile: an ordered lane is not
 * overtaken beyond its batch. */
typedef struct held_row {
  long long seq;
  int64_t due_ms, born_ms; /* monotonic: tried again from due_ms; written at born_ms (the lag) */
  int backoff_ms;          /* BACKOFF_MIN_MS doubling to BACKOFF_MAX_MS */
  bool seen;               /* in the cycle's batch */
  char *lane;              /* "tenant/ordering_key"; NULL when it has no ordering_key */
} held_row;

/* A refused row whose mark failed: left out of the batches until due_ms (monotonic), or until
 * the relay connects again. */
typedef struct skipped_row {
  long long seq;
  int64_t due_ms;
} skipped_row;

static void skip_expire(hookd_outbox *o, bool everything);

/* One cycle's publishes in flight: their outcomes come on the writer's thread. */
typedef struct batch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int pending;
} batch;

typedef struct row {
  long long seq;
  int64_t age_ms; /* since the row was written (0 when unknown) */
  const char *event_id, *tenant, *okey; /* (okey NULL: none) */
  hookd_publish_outcome o;
  bool marked; /* refused, and relay_error written */
  batch *b;    /* the cycle's, while its publish is out */
  json_t *body; /* the publish's fields, read by its op until it is done */
} row;

static void publish_done(void *arg, const hookd_publish_outcome *o) {
  row *r = arg;
  batch *b = r->b;
  r->o = *o;
  pthread_mutex_lock(&b->mu);
  b->pending--;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static const char *pg_error(hookd_outbox *o, char *buf, size_t n);

static void disconnect(hookd_outbox *o) {
  if (!o->pg) return;
  PQfinish(o->pg); /* (a transaction left open is rolled back by the server) */
  o->pg = NULL;
  atomic_store_explicit(&hookd_m.outbox_connected, 0, memory_order_relaxed);
  atomic_store_explicit(&hookd_m.outbox_active, 0, memory_order_relaxed);
}


/* Notifications read and dropped; true when there was one. */
static bool drain_notifies(hookd_outbox *o) {
  bool any = false;
  for (PGnotify *n; (n = PQnotifies(o->pg)) != NULL; PQfreemem(n)) any = true;
  return any;
}

/* Waits up to ms for a stop, or (notify) a notification of rows committed. A relay backing off
 * after a failure is not woken by notifications: each commit of a busy producer would make it
 * fail again at once. */
static void wait_for(hookd_outbox *o, int ms, bool notify) {
  struct pollfd p[2] = {{.fd = o->wake_fd, .events = POLLIN}, {.fd = -1}};
  if (o->pg && PQstatus(o->pg) == CONNECTION_OK) p[1] = (struct pollfd){PQsocket(o->pg), POLLIN, 0};
  int64_t until = hookd_mono_ms() + ms;
  /* (one read with the last cycle's answers is already queued: no wait) */
  if (p[1].fd >= 0 && drain_notifies(o) && notify) return;
  while (!atomic_load(&o->stopping)) {
    int left = (int)(until - hookd_mono_ms());
    if (left <= 0) return;
    if (poll(p, p[1].fd >= 0 ? 2 : 1, left) <= 0) continue; /* (EINTR, or the time is up) */
    if (p[0].revents) return;
    if (p[1].revents) {
      if (!PQconsumeInput(o->pg)) { /* the connection broke (the server's reason is here) */
        char msg[512];
        HLOG(HOOKD_LOG_WARN, "outbox.disconnected", KV_S("error", pg_error(o, msg, sizeof msg)));
        disconnect(o);
        return;
      }
      if (drain_notifies(o) && notify) return;
    }
  }
}

/* libpq's message on one line, the connection string's password cut out (libpq quotes a token
 * it cannot parse, and a password with a '%' is one). */
static const char *pg_text(hookd_outbox *o, const char *msg, char *buf, size_t n) {
  /* masked whole before it is cut to n: a password across the cut is not shown in part */
  char *all = strdup(msg);
  if (!all) {
    snprintf(buf, n, "(out of memory)");
    return buf;
  }
  size_t len = strlen(o->password);
  for (char *p = all; len && (p = strstr(p, o->password)) != NULL;) {
    /* "[redacted]" when it fits in the password's place, else as many '*'; the search goes on
     * after it (a password found in the mask is not masked again, for ever) */
    static const char mask[] = "[redacted]";
    size_t mlen = sizeof mask - 1 <= len ? sizeof mask - 1 : len;
    memcpy(p, sizeof mask - 1 <= len ? mask : "**********", mlen);
    if (mlen < len) memmove(p + mlen, p + len, strlen(p + len) + 1);
    p += mlen;
  }
  snprintf(buf, n, "%s", all);
  free(all);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
  len = strlen(buf);
  while (len && buf[len - 1] == ' ') buf[--len] = '\0';
  return buf;
}

static const char *pg_error(hookd_outbox *o, char *buf, size_t n) {
  return pg_text(o, o->pg ? PQerrorMessage(o->pg) : "no connection", buf, n);
}

/* A NOTICE or WARNING of the database (a trigger's RAISE NOTICE): a log line, never raw text
 * on stderr among the JSON lines. */
static void on_notice(void *arg, const char *message) {
  char buf[512];
  HLOG(HOOKD_LOG_DEBUG, "outbox.notice", KV_S("message", pg_text(arg, message, buf, sizeof buf)));
}

/* Runs one statement without blocking a stop: its result (PQclear it; a statement's error is
 * a result too), or NULL when there is no connection, it broke, the database did not answer
 * within QUERY_TIMEOUT_MS, or a stop came — the connection is then dropped (o->pg NULL; its
 * transaction rolled back by the server) and the next cycle connects again. */
static PGresult *query(hookd_outbox *o, const char *sql, int n, const char *const *params) {
  if (!o->pg) return NULL;
  PGresult *last = NULL;
  if (!PQsendQueryParams(o->pg, sql, n, NULL, params, NULL, NULL, 0)) goto lost;
  int64_t until = hookd_mono_ms() + QUERY_TIMEOUT_MS;
  for (;;) {
    int flushed = PQflush(o->pg); /* 1: more to send */
    if (flushed < 0) goto lost;
    if (flushed == 0 && !PQisBusy(o->pg)) {
      PGresult *r = PQgetResult(o->pg);
      if (!r) return last; /* (the statement's end) */
      /* a server that is no longer the primary (a fenced old one after a failover) or is
       * shutting down: a new connection finds the one that is (target_session_attrs) */
      const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      if (state && (!strcmp(state, "25006") || !strncmp(state, "57P", 3))) o->reconnect = true;
      PQclear(last);
      last = r;
      continue;
    }
    int left = (int)(until - hookd_mono_ms());
    if (atomic_load(&o->stopping)) goto dropped;
    if (left <= 0) {
      HLOG(HOOKD_LOG_WARN, "outbox.disconnected",
           KV_S("error", "the database did not answer within 90 s: the connection is dropped"));
      goto dropped;
    }
    struct pollfd p[2] = {{.fd = o->wake_fd, .events = POLLIN},
                          {.fd = PQsocket(o->pg), .events = POLLIN | (flushed ? POLLOUT : 0)}};
    if (poll(p, 2, left) <= 0) continue;
    if (p[0].revents) continue; /* (a stop: handled above) */
    if ((p[1].revents & (POLLIN | POLLERR | POLLHUP)) && !PQconsumeInput(o->pg)) goto lost;
  }
lost:
  if (!atomic_load(&o->stopping)) {
    char msg[512];
    HLOG(HOOKD_LOG_WARN, "outbox.disconnected", KV_S("error", pg_error(o, msg, sizeof msg)));
  }
dropped:
  PQclear(last);
  disconnect(o);
  return NULL;
}

static bool exec_ok(hookd_outbox *o, const char *sql) {
  PGresult *res = query(o, sql, 0, NULL);
  bool ok = res && PQresultStatus(res) == PGRES_COMMAND_OK;
  PQclear(res);
  return ok;
}

static bool tuples_ok(hookd_outbox *o, const char *sql) {
  PGresult *res = query(o, sql, 0, NULL);
  bool ok = res && PQresultStatus(res) == PGRES_TUPLES_OK;
  PQclear(res);
  return ok;
}

/* The batch's 1 s lock wait bounds the rows' selects alone (a row another transaction locks is
 * waited for, not skipped: docs/outbox.md): after them, the server's own setting again, so that
 * a DELETE or a mark waiting on a producer's trigger waits as it did (the statement bound still
 * holds). */
static bool lock_wait_restore(hookd_outbox *o) {
  return tuples_ok(o, "SELECT set_config('lock_timeout', current_setting('hookd.lock_timeout'),"
                      " true)");
}

/* A batch's settings, its transaction's own: a bound on any statement and on the transaction
 * left idle (a relay whose link died holds no row locks past it), and the plans the batch's
 * statements are written for (connect_pg); no JIT (servers before PostgreSQL 11 have none: the
 * setting is then left as it is). */
#define BATCH_SETTINGS                                                                          \
  "SELECT set_config('statement_timeout', '60s', true),"                                        \
  /* (the server's own kept, for the statements after the rows' select: lock_wait_restore) */ \
  " set_config('hookd.lock_timeout', current_setting('lock_timeout'), true),"                  \
  " set_config('lock_timeout', '1s', true),"                                                    \
  " set_config('idle_in_transaction_session_timeout', '120s', true),"                           \
  " set_config('enable_seqscan', 'off', true), set_config('enable_sort', 'off', true),"         \
  " (SELECT set_config('jit', 'off', true) FROM pg_settings WHERE name = 'jit')"

/* Whether the relay's table is there, named as its statements name it (to_regclass, on the
 * session's search_path): 1 yes; 0 no, logged outbox.no_table (an error naming it); -1 the query
 * failed. Before (a review), a table missing or misnamed failed each batch's lock query, which
 * read as another relay's lock held: outbox.standby (info) for ever, no error counted. */
static int table_found(hookd_outbox *o) {
  const char *p[1] = {o->table};
  PGresult *res = query(o, "SELECT to_regclass($1) IS NOT NULL", 1, p);
  int found = res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1
                  ? !strcmp(PQgetvalue(res, 0, 0), "t")
                  : -1;
  PQclear(res);
  if (found == 0)
    HLOG(HOOKD_LOG_ERROR, "outbox.no_table", KV_S("table", o->app->cfg->outbox_table),
         KV_S("error", "no such table in the outbox's database (on its search_path)"),
         KV_S("hint", "create it (sql/outbox_postgres.sql) or mend --outbox-table; the relay "
                      "connects again with a backoff up to 30 s"));
  return found;
}

/* The session: UTF-8 text whatever the database's encoding, and a link kept alive and bounded
 * as the store's (a link gone silent fails within 30 s, not the kernel's two hours, while the
 * server's side of it held the batch's row locks). Each batch's transaction sets the rest
 * (BATCH_SETTINGS): a bound on any statement, and the plans the relay's three statements are
 * written for. An outbox churns (rows in, rows out) and its statistics lag: a freshly filled
 * table, estimated at 0.5 % of its rows waiting, had the batch's SELECT read the whole table and
 * sort it (0.2-0.6 s a batch of 1,000 at 50,000 rows, bench/outbox.sh) instead of walking the
 * waiting rows' index. No JIT either: the batch's window over its few hundred rows needs a sort,
 * which enable_sort = off prices past jit_above_cost, and compiling it took 0.3 s a batch (the
 * relay 8x slower, bench/outbox.sh; not on servers before PostgreSQL 11, which have none). The
 * connection itself is made in at most 5 s for each address tried (connect_timeout, unless the
 * URL sets another): a stop waits that long. */
static bool connect_pg(hookd_outbox *o) {
  /* (read-write: of a multi-host URL, the primary, not a standby after a failover, where LISTEN
   * and the batch's FOR UPDATE fail for ever; the URL's own setting wins) */
  const char *keys[] = {"connect_timeout", "application_name", "target_session_attrs",
                        "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
                        "tcp_user_timeout", "dbname", "client_encoding", NULL};
  const char *vals[] = {"5", "hookd-outbox", "read-write", "1", "10", "5", "3", "30000",
                        o->app->cfg->outbox_url, "UTF8", NULL};
  o->pg = PQconnectdbParams(keys, vals, 1); /* the URL's own settings win over those before it */
  /* the server's error without DETAIL or CONTEXT, which may quote a row ("Failing row
   * contains (…)"): it is logged, and kept in relay_error */
  if (o->pg) {
    PQsetErrorVerbosity(o->pg, PQERRORS_TERSE);
    PQsetErrorContextVisibility(o->pg, PQSHOW_CONTEXT_NEVER);
  }
  char msg[512];
  if (o->pg && PQstatus(o->pg) == CONNECTION_OK) {
    PQsetNoticeProcessor(o->pg, on_notice, o);
    int found = PQsetnonblocking(o->pg, 1) == 0 && exec_ok(o, "LISTEN hookd_outbox")
                    ? table_found(o)
                    : -1;
    if (found == 1) {
      skip_expire(o, true); /* (the table may be another since: its seqs other rows') */
      atomic_store_explicit(&hookd_m.outbox_connected, 1, memory_order_relaxed);
      HLOG(HOOKD_LOG_INFO, "outbox.connected", KV_S("table", o->app->cfg->outbox_table));
      return true;
    }
    if (found == 0) { /* (said: outbox.no_table) */
      disconnect(o);
      return false;
    }
  }
  if (o->pg && !atomic_load(&o->stopping)) /* (NULL: a query dropped it, and said why) */
    HLOG(HOOKD_LOG_WARN, "outbox.connect_failed", KV_S("error", pg_error(o, msg, sizeof msg)));
  disconnect(o);
  return false;
}

static const char *val(const PGresult *res, int i, int c) {
  return PQgetisnull(res, i, c) ? NULL : PQgetvalue(res, i, c);
}

/* o as the engine's answer to a row it cannot take now for want of memory (NULL): tried again. */
static json_t *unavailable(hookd_publish_outcome *o) {
  o->status = 503;
  snprintf(o->code, sizeof o->code, "unavailable");
  snprintf(o->message, sizeof o->message, "out of memory");
  return NULL;
}

/* The publish a row asks for, as POST /v1/tenants/{t}/events would take it; NULL with o filled
 * when the row cannot be one (a 503 when that is for want of memory, not the row's fault). */
static json_t *row_body(hookd_outbox *ob, const PGresult *res, int i, hookd_publish_outcome *o) {
  static const struct {
    int col;
    const char *name;
  } required[] = {{C_TENANT, "tenant is null"},
                  {C_ID, "event_id is null"},
                  {C_TYPE, "type is null"},
                  {C_PAYLOAD, "payload is null"},
                  {C_OCCURRED, "occurred_at is null or not a finite time"}};
  size_t max = ob->app->cfg->max_body_bytes;
  /* the API's limit on a request's body, on the payload's text as the table gives it (a json
   * column: the producer's own; jsonb's has a blank after each ',' and ':'): measured by the
   * database, a payload over it is not fetched */
  if (PQgetisnull(res, i, C_PAYLOAD) && !PQgetisnull(res, i, C_PLEN)) {
    o->status = 413;
    snprintf(o->code, sizeof o->code, "body_too_large");
    snprintf(o->message, sizeof o->message,
             "payload of %s bytes larger than --max-body-bytes (%zu)", val(res, i, C_PLEN), max);
    return NULL;
  }
  for (size_t k = 0; k < sizeof required / sizeof required[0]; k++) {
    if (!PQgetisnull(res, i, required[k].col)) continue;
    o->status = 422; /* (a table made without the NOT NULLs of sql/outbox_postgres.sql) */
    snprintf(o->code, sizeof o->code, "missing_field");
    snprintf(o->message, sizeof o->message, "%s", required[k].name);
    return NULL;
  }
  /* ordering_version as the API reads it, an integer: a table whose column is not a bigint
   * (text, numeric) had "abc" published as 0, "1.5" as 1 (a review) */
  long long version = 0;
  const char *over = val(res, i, C_OVER);
  if (over && hookd_parse_ll(over, LLONG_MIN, LLONG_MAX, &version) != 0) {
    o->status = 422;
    snprintf(o->code, sizeof o->code, "invalid_field");
    snprintf(o->message, sizeof o->message,
             "ordering_version must be an integer from -2^63 to 2^63-1 (a bigint column)");
    return NULL;
  }
  char err[HOOKD_JSON_ERR_MAX];
  const char *payload = val(res, i, C_PAYLOAD);
  if (strlen(payload) > max) {
    o->status = 413;
    snprintf(o->code, sizeof o->code, "body_too_large");
    snprintf(o->message, sizeof o->message, "payload larger than --max-body-bytes (%zu)", max);
    return NULL;
  }
  json_t *data = hookd_json_parse_ex(payload, strlen(payload), &ob->app->json_limits,
                                     JSON_DECODE_ANY, err);
  if (!data && hookd_json_out_of_memory(err)) /* (before, a 400 invalid_json: refused for good) */
    return unavailable(o);
  if (!data) {
    o->status = 400;
    snprintf(o->code, sizeof o->code, "invalid_json");
    /* without jansson's " near '<token>'": the token is the payload's (an email, an account
     * number), and this message is logged and kept in relay_error */
    char *near = strstr(err, " near '");
    if (near) *near = '\0';
    snprintf(o->message, sizeof o->message, "payload: %s", err);
    return NULL;
  }
  char ts[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(strtoll(val(res, i, C_OCCURRED), NULL, 10), ts);
  json_t *body = json_pack("{s:s,s:s,s:o,s:s}", "id", val(res, i, C_ID), "type",
                           val(res, i, C_TYPE), "payload", data, "occurred_at", ts);
  const char *okey = val(res, i, C_OKEY);
  const char *channels = val(res, i, C_CHANNELS), *schema = val(res, i, C_SCHEMA);
  /* each member the row has, or none of the publish: a row is never published without its
   * channels, lane or schema version (before, a failed json_loads or set dropped the member and
   * the row went out without it). Each fails only out of memory (the channels are PostgreSQL's
   * to_json of a text[]): 503, the row tried again. */
  bool ok = body != NULL;
  if (ok && okey) ok = !json_object_set_new(body, "ordering_key", json_string(okey));
  if (ok && over)
    ok = !json_object_set_new(body, "ordering_version", json_integer(version));
  if (ok && schema) ok = !json_object_set_new(body, "schema_version", json_string(schema));
  if (ok && channels) ok = !json_object_set_new(body, "channels", json_loads(channels, 0, NULL));
  if (!ok) {
    json_decref(body);
    return unavailable(o);
  }
  return body;
}

/* "{1,2,3}": the seqs of the rows published (2xx); false when none, or out of memory. */
static bool seq_array(const row *rows, int n, hookd_buf *out) {
  bool any = false;
  if (hookd_buf_puts(out, "{")) return false;
  for (int i = 0; i < n; i++) {
    if (rows[i].o.status < 200 || rows[i].o.status > 299) continue;
    if (hookd_buf_printf(out, "%s%lld", any ? "," : "", rows[i].seq)) return false;
    any = true;
  }
  return hookd_buf_puts(out, "}") == 0 && any;
}

/* One UPDATE of relay_error in its own savepoint (released either way: no subtransaction
 * left open per row). 1 written, 0 refused by the database (the savepoint rolled back; err: its
 * words), -1 the connection failed. */
static int try_mark(hookd_outbox *o, const char *seq, const char *why, char *err, size_t n) {
  const char *p[2] = {seq, why};
  if (!exec_ok(o, "SAVEPOINT mark")) return -1;
  PGresult *m = query(o, o->mark_sql, 2, p);
  bool ok = m && PQresultStatus(m) == PGRES_COMMAND_OK;
  PQclear(m);
  if (!o->pg) return -1;
  if (!ok) pg_error(o, err, n);
  if (!ok && !exec_ok(o, "ROLLBACK TO SAVEPOINT mark")) return -1;
  return exec_ok(o, "RELEASE SAVEPOINT mark") ? ok : -1;
}

/* Writes a refused row's relay_error: the reason, or when that cannot be written (a column too
 * short for it) "refused" alone (the reason is in the outbox.refused log line). A row that
 * cannot be marked at all (a trigger refusing the UPDATE) is left out of the SELECTs for
 * SKIP_RETRY_MS (skip_expire), up to SKIP_MAX rows; past that, o->stuck: the relay takes no rows
 * until some are due again and says why, rather than take the same ones in a loop. false when
 * the connection failed. */
static bool mark(hookd_outbox *o, row *r) {
  char seq[24], why[WHY_MAX + 1], msg[512];
  snprintf(seq, sizeof seq, "%lld", r->seq);
  snprintf(why, sizeof why, "%d %s: %s", r->o.status, r->o.code, r->o.message);
  int rc = try_mark(o, seq, why, msg, sizeof msg);
  if (rc == 0) rc = try_mark(o, seq, "refused", msg, sizeof msg);
  if (rc < 0) return false;
  if (rc == 1) {
    r->marked = true;
    return true;
  }
  HOOKD_INC(outbox_errors);
  HLOG(HOOKD_LOG_ERROR, "outbox.mark_failed", KV_I("seq", r->seq), KV_S("event_id", r->event_id),
       KV_S("refused", why), KV_S("error", msg),
       KV_S("hint", "the row stays unmarked and is left alone for 10 minutes (or until the relay "
                    "connects again), then taken again"));
  if (o->n_skip >= SKIP_MAX) { /* (more than SKIP_MAX: outbox.stuck) */
    o->stuck = true;
    return true;
  }
  /* out of memory for one more, the row is not left alone this time: taken again by the next
   * batch, its mark tried again (before, a review, the relay stopped: outbox.stuck until a
   * restart, for a transient failure of one realloc) */
  skipped_row *s = realloc(o->skip, (o->n_skip + 1) * sizeof *s);
  if (s) {
    o->skip = s;
    o->skip[o->n_skip++] = (skipped_row){r->seq, hookd_mono_ms() + o->skip_retry_ms};
  }
  return true;
}

/* The rows left alone whose time is up (all of them when everything is set): taken again. */
static void skip_expire(hookd_outbox *o, bool everything) {
  int64_t now = hookd_mono_ms();
  size_t kept = 0;
  for (size_t i = 0; i < o->n_skip; i++)
    if (!everything && o->skip[i].due_ms > now) o->skip[kept++] = o->skip[i];
  o->n_skip = kept;
  if (kept < SKIP_MAX) o->stuck = false;
}

/* The run's skipped rows as a bigint[] literal (with_held: and the held rows not due at now). */
static int skip_array(const hookd_outbox *o, bool with_held, int64_t now, hookd_buf *out) {
  int rc = hookd_buf_puts(out, "{");
  bool any = false;
  for (size_t i = 0; !rc && i < o->n_skip; i++, any = true)
    rc = hookd_buf_printf(out, "%s%lld", any ? "," : "", o->skip[i].seq);
  for (size_t i = 0; !rc && with_held && i < o->n_held; i++) {
    if (o->held[i].due_ms <= now) continue;
    rc = hookd_buf_printf(out, "%s%lld", any ? "," : "", o->held[i].seq);
    any = true;
  }
  return rc ? rc : hookd_buf_puts(out, "}");
}

/* The lanes of the held rows not due at now, as a text[] literal: their rows wait. */
static int lane_array(const hookd_outbox *o, int64_t now, hookd_buf *out) {
  int rc = hookd_buf_puts(out, "{");
  bool any = false;
  for (size_t i = 0; !rc && i < o->n_held; i++) {
    const char *l = o->held[i].lane;
    if (!l || o->held[i].due_ms <= now) continue;
    rc = hookd_buf_puts(out, any ? ",\"" : "\"");
    for (; !rc && *l; l++) /* (a quoted element: '"' and '\\' escaped) */
      rc = hookd_buf_printf(out, "%s%c", *l == '"' || *l == '\\' ? "\\" : "", *l);
    if (!rc) rc = hookd_buf_puts(out, "\"");
    any = true;
  }
  return rc ? rc : hookd_buf_puts(out, "}");
}

static held_row *held_find(hookd_outbox *o, long long seq) {
  for (size_t i = 0; i < o->n_held; i++)
    if (o->held[i].seq == seq) return &o->held[i];
  return NULL;
}

static void unhold(hookd_outbox *o, held_row *h) {
  free(h->lane);
  *h = o->held[--o->n_held];
}

/* r deferred (a 5xx): held with its backoff doubled, or, new, held for BACKOFF_MIN_MS. A row
 * that cannot be held (HELD_MAX, out of memory) is in the next batch again, as before. */
static void hold(hookd_outbox *o, const row *r, int64_t now) {
  held_row *h = held_find(o, r->seq);
  if (h) {
    h->backoff_ms = h->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : h->backoff_ms * 2;
    h->due_ms = now + h->backoff_ms;
    return;
  }
  if (o->n_held >= HELD_MAX) return;
  held_row *more = realloc(o->held, (o->n_held + 1) * sizeof *more);
  if (!more) return;
  o->held = more;
  char *lane = NULL;
  if (r->okey && asprintf(&lane, "%s/%s", r->tenant, r->okey) < 0) return;
  o->held[o->n_held++] = (held_row){.seq = r->seq, .due_ms = now + BACKOFF_MIN_MS,
                                .born_ms = now - r->age_ms, .backoff_ms = BACKOFF_MIN_MS,
                                .lane = lane};
}

/* Whether another held row not taken in the batch that began at start holds lane. */
static bool lane_held(const hookd_outbox *o, const char *lane, int64_t start) {
  for (size_t i = 0; lane && i < o->n_held; i++) {
    const held_row *h = &o->held[i];
    if (!h->seen && h->due_ms > start && h->lane && !strcmp(h->lane, lane)) return true;
  }
  return false;
}

/* After a batch that began at start: the held rows that were due then and did not come are
 * gone (deleted, marked by an operator) unless the batch stopped before their seq (it was
 * full, or cut: whole false, and their seq past its last) or their lane waited. */
static void forget_gone(hookd_outbox *o, int64_t start, bool whole, long long last_seq) {
  for (size_t i = o->n_held; i-- > 0;) {
    held_row *h = &o->held[i];
    if (!h->seen && h->due_ms <= start && (whole || h->seq < last_seq) &&
        !lane_held(o, h->lane, start))
      unhold(o, h);
  }
}

/* The oldest held row's age at now (0: none), and the time until the next is due (-1: none). */
static int64_t held_lag(const hookd_outbox *o, int64_t now) {
  int64_t lag = 0;
  for (size_t i = 0; i < o->n_held; i++)
    if (now - o->held[i].born_ms > lag) lag = now - o->held[i].born_ms;
  return lag;
}

static int64_t held_due_in(const hookd_outbox *o, int64_t now) {
  int64_t in = -1;
  for (size_t i = 0; i < o->n_held; i++) {
    /* (one due already and not taken waits for its lane: no turn of its own, no spin) */
    int64_t d = o->held[i].due_ms - now;
    if (d > 0 && (in < 0 || d < in)) in = d;
  }
  return in;
}

/* Waits for every outcome handed out so far (the engine's commits), then frees the bodies of
 * rows[from..to). Bounded and said: while the engine does not answer, outbox.settling every
 * SETTLE_SAY_MS; after a stop, the shutdown grace at most (1 s at least) — then the outcomes are
 * abandoned (outbox.settle_abandoned): false, the bodies, rows and batch left to the writer's
 * thread, never freed, and o->abandoned set, for the stop ends the process (hookd_outbox_stop).
 * Before (a review), an unbounded wait: a store that never answered held the relay, and a stop,
 * until the stop's watchdog. */
static bool settle(hookd_outbox *o, batch *b, row *rows, int from, int to) {
  int64_t began = hookd_mono_ms(), said = began, stop_seen = 0;
  int64_t grace = o->app->cfg->shutdown_grace_s * (int64_t)1000;
  if (grace < 1000) grace = 1000;
  pthread_mutex_lock(&b->mu);
  while (b->pending > 0) {
    struct timespec until = hookd_mono_deadline(100); /* (a stop is looked at each 100 ms) */
    pthread_cond_timedwait(&b->cv, &b->mu, &until);
    int pending = b->pending;
    int64_t now = hookd_mono_ms();
    if (pending <= 0) break;
    if (!stop_seen && atomic_load(&o->stopping)) stop_seen = now;
    if (stop_seen && now - stop_seen >= grace) {
      pthread_mutex_unlock(&b->mu);
      o->abandoned = true;
      HLOG(HOOKD_LOG_ERROR, "outbox.settle_abandoned", KV_I("publishes", pending),
           KV_I("waited_ms", now - began),
           KV_S("why", "the engine's store did not answer the relay's publishes within the "
                       "shutdown grace: the stop ends the process; the rows were not deleted "
                       "and are relayed again (duplicates where committed) at the next start"));
      return false;
    }
    if (now - said >= SETTLE_SAY_MS) {
      said = now;
      pthread_mutex_unlock(&b->mu);
      HLOG(HOOKD_LOG_WARN, "outbox.settling", KV_I("publishes", pending),
           KV_I("waited_ms", now - began),
           KV_S("why", "the engine's store has not answered the relay's publishes: nothing is "
                       "deleted until it does"));
      pthread_mutex_lock(&b->mu);
    }
  }
  pthread_mutex_unlock(&b->mu);
  for (int i = from; i < to; i++) {
    json_decref(rows[i].body);
    rows[i].body = NULL;
  }
  return true;
}

/* Publishes the batch's rows into the engine and waits for every outcome (the engine's
 * commits), PARSED_TEXT_MAX of payload text at a time. False when they were abandoned at a stop
 * (settle): rows then stays the writer's. */
static bool publish_rows(hookd_outbox *o, const PGresult *res, row *rows, int n) {
  for (int i = 0; i < n; i++) {
    rows[i].seq = strtoll(val(res, i, C_SEQ), NULL, 10);
    rows[i].event_id = PQgetvalue(res, i, C_ID); /* ("" when NULL: refused below) */
    rows[i].tenant = PQgetvalue(res, i, C_TENANT);
    rows[i].okey = val(res, i, C_OKEY);
    rows[i].age_ms = strtoll(PQgetvalue(res, i, C_AGE), NULL, 10); /* (NULL: "", 0) */
  }
  batch *b = calloc(1, sizeof *b); /* (on the heap: an abandoned batch outlives the thread) */
  if (!b) {
    for (int i = 0; i < n; i++) unavailable(&rows[i].o);
    return true;
  }
  pthread_mutex_init(&b->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->cv, &ca);
  pthread_condattr_destroy(&ca);
  size_t parsed = 0;
  int from = 0;
  for (int i = 0; i < n; i++) {
    if (parsed >= PARSED_TEXT_MAX) {
      if (!settle(o, b, rows, from, i)) return false;
      parsed = 0;
      from = i;
    }
    json_t *body = row_body(o, res, i, &rows[i].o);
    if (!body) continue;
    parsed += strlen(val(res, i, C_PAYLOAD));
    rows[i].b = b;
    pthread_mutex_lock(&b->mu);
    b->pending++;
    pthread_mutex_unlock(&b->mu);
    if (hookd_api_publish_submit(o->app, rows[i].tenant, body, publish_done, &rows[i],
                                 &rows[i].o) != 0) {
      pthread_mutex_lock(&b->mu);
      b->pending--;
      pthread_mutex_unlock(&b->mu);
    }
    rows[i].body = body; /* freed here once its publish is done, not on the store's thread */
  }
  if (!settle(o, b, rows, from, n)) return false;
  pthread_cond_destroy(&b->cv);
  pthread_mutex_destroy(&b->mu);
  free(b);
  return true;
}

/* A row is marked refused for good on a 4xx the engine classified (its code: the row's own
 * fault, as the API answers it); published on a 2xx; anything else is tried again, as a 5xx is —
 * an outcome without a code or of no class is no reason to give up on a row (O2). */
static void retry_unclassified(row *r) {
  hookd_publish_outcome *o = &r->o;
  if ((o->status >= 200 && o->status <= 299) || (o->status >= 500 && o->status <= 599) ||
      (o->status >= 400 && o->status <= 499 && o->code[0]))
    return;
  char was[sizeof o->message];
  snprintf(was, sizeof was, "%s", o->message);
  snprintf(o->message, sizeof o->message, "an outcome not classified (%d %s: %s): tried again",
           o->status, o->code, was);
  o->status = 503;
  snprintf(o->code, sizeof o->code, "unavailable");
}

/* Rows the engine could not take now (a 5xx: relayed again later), r the first of them: logged
 * once a minute while the same row stays first (one failing the same way every time is seen). */
static void deferred(hookd_outbox *o, const row *r, int n) {
  int64_t now = hookd_mono_ms();
  if (r->seq == o->deferred_seq && now - o->deferred_logged_ms < DEFERRED_LOG_MS) return;
  o->deferred_seq = r->seq;
  o->deferred_logged_ms = now;
  HLOG(HOOKD_LOG_WARN, "outbox.deferred", KV_I("seq", r->seq), KV_S("event_id", r->event_id),
       KV_S("tenant_id", r->tenant), KV_I("status", r->o.status), KV_S("code", r->o.code),
       KV_S("error", r->o.message), KV_I("rows", n));
}

/* Whether res is a failure to convert a row's text to UTF-8 (the database's encoding has no
 * UTF-8 form for it: WIN1252's undefined bytes, SQL_ASCII's non-UTF-8 ones). */
static bool unconvertible(const PGresult *res) {
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  return state && (!strcmp(state, "22P05") || !strcmp(state, "22021"));
}

/* Whether the rows of seqs[0..n) convert to UTF-8 (the probe: their text converted by the
 * server, a number fetched), in a savepoint of the batch's transaction: 1 yes, 0 one of them
 * has no UTF-8 form, -1 the database failed. */
static int probe(hookd_outbox *o, const long long *seqs, int n) {
  hookd_buf arr;
  hookd_buf_init(&arr, (size_t)n * 24 + 16);
  int brc = hookd_buf_puts(&arr, "{");
  for (int i = 0; !brc && i < n; i++)
    brc = hookd_buf_printf(&arr, "%s%lld", i ? "," : "", seqs[i]);
  if (!brc) brc = hookd_buf_puts(&arr, "}");
  PGresult *t = NULL;
  if (!brc && exec_ok(o, "SAVEPOINT probe")) {
    const char *p[1] = {arr.data};
    t = query(o, o->probe_sql, 1, p);
  }
  hookd_buf_free(&arr);
  int rc = t && PQresultStatus(t) == PGRES_TUPLES_OK ? 1 : unconvertible(t) ? 0 : -1;
  PQclear(t);
  if (rc == 0 && !exec_ok(o, "ROLLBACK TO SAVEPOINT probe")) return -1;
  return rc >= 0 && exec_ok(o, "RELEASE SAVEPOINT probe") ? rc : -1;
}

/* The rows of seqs[0..n) that have no UTF-8 form, found by halves (known: the whole is known
 * to fail, not probed again), written to bad: how many, or -1 when the database failed. */
static int find_unconvertible(hookd_outbox *o, const long long *seqs, int n, bool known,
                              long long *bad) {
  int rc = known ? 0 : probe(o, seqs, n);
  if (rc != 0) return rc < 0 ? -1 : 0;
  if (n == 1) {
    bad[0] = seqs[0];
    return 1;
  }
  int half = n / 2;
  int first = find_unconvertible(o, seqs, half, false, bad);
  if (first < 0) return -1;
  /* (none in the first half: the second fails) */
  int second = find_unconvertible(o, seqs + half, n - half, first == 0, bad + first);
  return second < 0 ? -1 : first + second;
}

/* The batch's SELECT failed to convert a row's text to UTF-8: its rows are taken again by their
 * seqs alone (none of their text converted) and probed, the whole then by halves (the rows
 * taken again are another statement's: a row of a lower seq committed meanwhile moves the
 * batch's window, and the failing row may be out of it — assumed to fail, the whole set's
 * last row was blamed, a good row refused for ever: a review), and each that has no UTF-8
 * form is marked refused (422 invalid_encoding, by its seq) and the transaction committed, the
 * next batch going on at once (0) — whatever the other rows' outcomes: before (a review), the
 * first row was relayed alone until the failing one came first, and a first row deferred (a
 * 5xx) at every try held the whole queue for ever. -1 when the database failed; -5 when no row
 * was found (said, and counted). params: the batch's limit, skip and lanes. */
static int mark_unreadable(hookd_outbox *o, const char *const *params) {
  const char *p[3] = {params[0], params[1], params[3]};
  PGresult *f = query(o, o->seqs_sql, 3, p);
  if (!f || PQresultStatus(f) != PGRES_TUPLES_OK || !lock_wait_restore(o)) {
    PQclear(f);
    return -1;
  }
  int n = PQntuples(f);
  long long *seqs = calloc((size_t)n * 2 + 1, sizeof *seqs); /* (and the bad ones after) */
  for (int i = 0; seqs && i < n; i++) seqs[i] = strtoll(PQgetvalue(f, i, 0), NULL, 10);
  PQclear(f);
  if (!seqs) return exec_ok(o, "ROLLBACK") ? -2 : -1;
  long long *bad = seqs + n;
  int n_bad = n ? find_unconvertible(o, seqs, n, false, bad) : 0;
  if (n_bad == 0) { /* (a row changed meanwhile, or converted in a way the probe does not) */
    free(seqs);
    HOOKD_INC(outbox_errors);
    HLOG(HOOKD_LOG_WARN, "outbox.failed",
         KV_S("error", "a row of the batch has no UTF-8 form, and no row was found so alone"));
    return exec_ok(o, "ROLLBACK") ? -5 : -1;
  }
  row *rows = n_bad > 0 ? calloc((size_t)n_bad, sizeof *rows) : NULL;
  bool ok = rows != NULL;
  for (int i = 0; ok && i < n_bad; i++) {
    rows[i] = (row){.seq = bad[i], .event_id = "", .tenant = "",
                    .o = {.status = 422, .code = "invalid_encoding"}};
    snprintf(rows[i].o.message, sizeof rows[i].o.message, "%s", UNCONVERTIBLE);
    ok = mark(o, &rows[i]);
  }
  ok = ok && exec_ok(o, "COMMIT");
  for (int i = 0; ok && i < n_bad; i++) {
    if (!rows[i].marked) continue; /* (said: outbox.mark_failed, left alone this run) */
    HOOKD_INC(outbox_refused);
    HLOG(HOOKD_LOG_WARN, "outbox.refused", KV_I("seq", rows[i].seq), KV_I("status", 422),
         KV_S("code", "invalid_encoding"), KV_S("error", UNCONVERTIBLE));
  }
  free(rows);
  free(seqs);
  return ok ? 0 : -1;
}

/* One relay's batch at a time per table, whatever the nodes given --outbox-url: two split a
 * backlog with SKIP LOCKED and their batches reached the engine in either order (a lane without
 * versions out of seq order). A transaction lock, keyed by the table's name, taken by each batch
 * (a session's would outlive a holder gone silent for the server's keepalive, hours, and behind
 * a pooler in transaction mode land on whichever server connection ran it). 1 when this
 * batch holds it; 0 when another's does (the query answered false): the caller rolls back and
 * waits a poll; -1 when the query failed (the table gone, a statement timeout): a failure, not a
 * standby — before (a review), read as the lock held, a missing table was a standby for ever. */
static int take_relay_lock(hookd_outbox *o) {
  char key[160];
  snprintf(key, sizeof key, "hookd_outbox:%s", o->app->cfg->outbox_table);
  const char *params[2] = {key, o->table};
  /* keyed by the table's OID — "hookd_outbox" and "public.hookd_outbox", or another
   * search_path, name one table (a review) — and by the name as given, the key of earlier
   * builds, which a node not yet upgraded takes */
  PGresult *res = query(o,
                        "SELECT pg_try_advisory_xact_lock(hashtext($1)) AND "
                        "pg_try_advisory_xact_lock(hashtext('hookd_outbox_oid:' || "
                        "$2::regclass::oid::text))",
                        2, params);
  if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
    PQclear(res);
    atomic_store_explicit(&hookd_m.outbox_active, 0, memory_order_relaxed);
    return -1;
  }
  bool held = !strcmp(PQgetvalue(res, 0, 0), "t");
  PQclear(res);
  atomic_store_explicit(&hookd_m.outbox_active, held, memory_order_relaxed);
  if (!held) HOOKD_INC(outbox_standby);
  if (held && o->waiting_said)
    HLOG(HOOKD_LOG_INFO, "outbox.relaying", KV_S("table", o->app->cfg->outbox_table));
  else if (!held && !o->waiting_said)
    HLOG(HOOKD_LOG_INFO, "outbox.standby", KV_S("table", o->app->cfg->outbox_table),
         KV_S("why", "another relay's batch holds this table's lock: this one waits a poll"));
  o->waiting_said = !held;
  return held;
}

/* One cycle. Returns the rows taken (>= 0), -1 when the database failed, -2 when the engine
 * could not take any now (they stay for the next cycle), -3 when the relay is stuck (too many
 * rows it can neither publish nor mark), -4 when another relay's batch holds the table, -5 a
 * failure said already (rows published not deleted, outbox.not_deleted; a row without a UTF-8
 * form not found): back off. *cut: the byte bound left rows out of the batch, or rows were
 * marked for their encoding (more are waiting, however few were taken). */
/* The lag read alone, outside a batch: the oldest waiting row's age (the rows left alone are no
 * lag, as the batch's select; the rows held are waiting: lag). For a cycle that takes nothing,
 * or failed: the gauge kept its last value (often 0) through the wait, and no alert fired. */
static void lag_refresh(hookd_outbox *o) {
  hookd_buf skip;
  hookd_buf_init(&skip, o->n_skip * 24 + 16);
  PGresult *lag = NULL;
  if (!skip_array(o, false, 0, &skip)) {
    const char *lp[1] = {skip.data};
    lag = query(o, o->lag_sql, 1, lp);
  }
  hookd_buf_free(&skip);
  if (lag && PQresultStatus(lag) == PGRES_TUPLES_OK && PQnfields(lag) == 1) {
    long long age = PQntuples(lag) ? strtoll(PQgetvalue(lag, 0, 0), NULL, 10) : 0;
    atomic_store_explicit(&hookd_m.outbox_lag_ms, age > 0 ? age : 0, memory_order_relaxed);
  }
  PQclear(lag);
}

static int cycle(hookd_outbox *o, bool *cut) {
  *cut = false;
  hookd_app *app = o->app;
  uint64_t depth;
  skip_expire(o, false);
  if (o->stuck) return -3;
  /* a batch takes half the room left under --max-store-queue at most: the whole of it would
   * make every publish and provider request meanwhile a 503 overloaded */
  uint64_t room = hookd_api_store_behind(app, &depth)
                      ? 0
                      : ((uint64_t)app->cfg->max_store_queue - depth) / 2;
  if (room == 0) {
    /* nothing taken while the engine's writes are behind or have no room; the lag still shown
     * as it grows (an hour of overload kept the last value, often 0, and no outbox alert fired) */
    lag_refresh(o);
    return -2;
  }
  int take = (uint64_t)app->cfg->outbox_batch < room ? app->cfg->outbox_batch : (int)room;
  /* the settings are the transaction's own (a pooler in transaction mode would hand session
   * settings on to the application's next transaction on this server connection) */
  if (!exec_ok(o, "BEGIN") || !tuples_ok(o, BATCH_SETTINGS)) return -1;
  int lock = take_relay_lock(o);
  if (lock < 0) return -1;
  if (!lock) { /* another relay's batch: the rows' lag shown as it grows (that relay's gauge is
                * read at its batches' starts: one held in its DELETE showed its last value, this
                * one 0, and no alert fired — a review) */
    if (!exec_ok(o, "ROLLBACK")) return -1;
    lag_refresh(o);
    return -4;
  }
  char limit[16];
  snprintf(limit, sizeof limit, "%d", take);
  int64_t start = hookd_mono_ms();
  for (size_t i = 0; i < o->n_held; i++) o->held[i].seen = false;
  hookd_buf skip, lanes;
  hookd_buf_init(&skip, (o->n_skip + o->n_held) * 24 + 16);
  hookd_buf_init(&lanes, o->n_held * 4096 + 16); /* (a lane: 322 characters, escaped) */
  if (skip_array(o, true, start, &skip) || lane_array(o, start, &lanes)) {
    hookd_buf_free(&skip); /* (out of memory: the transaction and its lock not left open) */
    hookd_buf_free(&lanes);
    return exec_ok(o, "ROLLBACK") ? -2 : -1;
  }
  char max[24];
  snprintf(max, sizeof max, "%zu", app->cfg->max_body_bytes);
  const char *params[4] = {limit, skip.data, max, lanes.data};
  PGresult *res = exec_ok(o, "SAVEPOINT batch") ? query(o, o->select_sql, 4, params) : NULL;
  /* a row whose text has no UTF-8 form fails the whole batch's conversion: the rows that fail
   * are found and marked (docs/outbox.md), and the next batch goes on at once */
  if (unconvertible(res)) {
    PQclear(res);
    *cut = true;
    int rc = exec_ok(o, "ROLLBACK TO SAVEPOINT batch") ? mark_unreadable(o, params) : -1;
    hookd_buf_free(&skip);
    hookd_buf_free(&lanes);
    return rc;
  }
  hookd_buf_free(&skip);
  hookd_buf_free(&lanes);
  if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQnfields(res) != C__COUNT) {
    PQclear(res);
    return -1;
  }
  if (!lock_wait_restore(o)) {
    PQclear(res);
    return -1;
  }
  int n = PQntuples(res);
  long long age = n ? strtoll(PQgetvalue(res, 0, C_AGE), NULL, 10) : 0; /* (NULL: "") */
  /* cut short by the byte bound, or by the store queue's room (a full smaller batch): not the
   * outbox drained, no poll interval before the next */
  *cut = n && (strtoll(PQgetvalue(res, 0, C_LOCKED), NULL, 10) > n ||
               (take < app->cfg->outbox_batch && n >= take));
  if (held_lag(o, start) > age) age = held_lag(o, start); /* (the rows held wait too) */
  atomic_store_explicit(&hookd_m.outbox_lag_ms, age > 0 ? age : 0, memory_order_relaxed);
  if (n == 0) {
    PQclear(res);
    if (!*cut) forget_gone(o, start, true, 0);
    return exec_ok(o, "COMMIT") ? 0 : -1;
  }
  row *rows = calloc((size_t)n, sizeof *rows);
  if (!rows) {
    PQclear(res);
    exec_ok(o, "ROLLBACK");
    return -2;
  }
  if (!publish_rows(o, res, rows, n)) { /* (a stop: abandoned, rows left to the writer) */
    PQclear(res);
    return -1;
  }
  for (int i = 0; i < n; i++) retry_unclassified(&rows[i]);

  /* the engine has committed what it took: now the rows */
  const row *first_deferred = NULL;
  int n_deferred = 0;
  for (int i = 0; i < n; i++) {
    const row *r = &rows[i];
    if (r->o.status >= 500) {
      HOOKD_INC(outbox_deferred);
      if (!n_deferred++) first_deferred = r;
    }
    if (r->o.status >= 200 && r->o.status <= 299) {
      if (r->o.duplicate) HOOKD_INC(outbox_duplicates);
      else HOOKD_INC(outbox_relayed);
    }
  }
  hookd_buf seqs;
  hookd_buf_init(&seqs, (size_t)n * 24 + 16);
  bool ok = true;
  long long published = 0, deleted = 0;
  for (int i = 0; i < n; i++) published += rows[i].o.status >= 200 && rows[i].o.status <= 299;
  bool listed = seq_array(rows, n, &seqs);
  if (published && !listed) { /* out of memory: not a DELETE that removed nothing (a review) */
    hookd_buf_free(&seqs);
    HOOKD_INC(outbox_errors);
    HLOG(HOOKD_LOG_ERROR, "outbox.failed",
         KV_S("error", "out of memory listing the rows relayed: the batch is rolled back, its "
                       "rows relayed again (duplicates, which the engine drops)"));
    exec_ok(o, "ROLLBACK");
    free(rows);
    PQclear(res);
    return -5;
  }
  if (listed) {
    const char *p[1] = {seqs.data};
    PGresult *d = query(o, o->delete_sql, 1, p);
    ok = d && PQresultStatus(d) == PGRES_COMMAND_OK;
    if (ok) deleted = strtoll(PQcmdTuples(d), NULL, 10);
    PQclear(d);
  }
  hookd_buf_free(&seqs);
  /* fewer deleted than published (a trigger returning NULL, row-level security): they would be
   * published again at every poll, as duplicates, silently (a review) */
  bool not_deleted = ok && deleted < published;
  if (not_deleted) {
    HOOKD_INC(outbox_errors);
    HLOG(HOOKD_LOG_ERROR, "outbox.not_deleted", KV_I("published", published),
         KV_I("deleted", deleted),
         KV_S("hint", "a trigger or row-level security keeps the relay's DELETE from removing "
                      "relayed rows: they are relayed again (duplicates) until it can"));
  }
  for (int i = 0; ok && i < n; i++)
    if (rows[i].o.status >= 400 && rows[i].o.status < 500) ok = mark(o, &rows[i]);
  if (ok) {
    PGresult *c = query(o, "COMMIT", 0, NULL);
    /* a transaction that failed answers COMMIT with ROLLBACK */
    ok = c && PQresultStatus(c) == PGRES_COMMAND_OK && !strcmp(PQcmdStatus(c), "COMMIT");
    PQclear(c);
  }
  for (int i = 0; ok && i < n; i++) {
    const row *r = &rows[i];
    if (!r->marked) continue;
    HOOKD_INC(outbox_refused);
    HLOG(HOOKD_LOG_WARN, "outbox.refused", KV_I("seq", r->seq), KV_S("event_id", r->event_id),
         KV_S("tenant_id", r->tenant), KV_I("status", r->o.status), KV_S("code", r->o.code),
         KV_S("error", r->o.message));
  }
  if (first_deferred) deferred(o, first_deferred, n_deferred);
  /* a row deferred while others were published is held, with its own backoff; a row
   * published or refused is held no more (the rows held but not taken: forget_gone) */
  int64_t now = hookd_mono_ms();
  for (int i = 0; ok && i < n; i++) {
    const row *r = &rows[i];
    held_row *h = held_find(o, r->seq);
    if (h) h->seen = true;
    if (r->o.status >= 500 && (published || h)) hold(o, r, now);
    else if (h && r->o.status < 500) unhold(o, h);
  }
  if (ok) forget_gone(o, start, !*cut && n < take, rows[n - 1].seq);
  free(rows);
  PQclear(res);
  if (!ok) return -1;
  if (not_deleted) return -5;
  /* the relay waits only when nothing went: the rows deferred beside rows published are held
   * (before, a review, a row deferred at every try made every batch wait BUSY_WAIT_MS) */
  if (!n_deferred || published) return n;
  return -2;
}

static int next_backoff(int backoff) {
  return backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
}


static void *main_loop(void *arg) {
  hookd_outbox *o = arg;
  int backoff = BACKOFF_MIN_MS;
  while (!atomic_load(&o->stopping)) {
    if (!o->pg && !connect_pg(o)) {
      HOOKD_INC(outbox_errors);
      wait_for(o, backoff, false);
      backoff = next_backoff(backoff);
      continue;
    }
    bool cut;
    int n = cycle(o, &cut);
    if (atomic_load(&o->stopping)) break;
    if (n == -1) {
      char msg[512];
      HOOKD_INC(outbox_errors);
      if (o->pg) { /* a statement failed (a lost connection was logged where it broke) */
        HLOG(HOOKD_LOG_WARN, "outbox.failed", KV_S("error", pg_error(o, msg, sizeof msg)));
        if (o->reconnect) disconnect(o); /* (read-only now, or going away) */
        else if (PQtransactionStatus(o->pg) != PQTRANS_IDLE) exec_ok(o, "ROLLBACK");
        /* the rows wait meanwhile (a row another transaction locks: every batch fails on it
         * until the lock goes): their lag shown as it grows */
        if (o->pg && PQtransactionStatus(o->pg) == PQTRANS_IDLE) lag_refresh(o);
      }
      o->reconnect = false;
      wait_for(o, backoff, false);
      backoff = next_backoff(backoff);
      continue;
    }
    if (n == -5) { /* (said: outbox.not_deleted, or outbox.failed: an unreadable row, memory) */
      wait_for(o, backoff, false);
      backoff = next_backoff(backoff);
      continue;
    }
    if (n == -3) {
      HOOKD_INC(outbox_errors);
      HLOG(HOOKD_LOG_ERROR, "outbox.stuck",
           KV_S("error", "more than 10,000 rows were refused and could not be marked "
                         "(outbox.mark_failed): no row is relayed until they are taken again, "
                         "10 minutes after each failed"),
           KV_S("hint", "let relay_error take the reasons (text), or mend the trigger refusing "
                        "the UPDATE"));
      wait_for(o, BACKOFF_MAX_MS, false);
      continue;
    }
    backoff = BACKOFF_MIN_MS;
    if (n == -2) wait_for(o, BUSY_WAIT_MS, false);
    /* (a standby relay waits the poll: woken by each producer's notification, it tried again
     * at every commit — a review) */
    else if (n == -4) wait_for(o, o->app->cfg->outbox_poll_ms, false);
    /* fewer than a batch: drained, unless the byte bound cut it (large payloads: a batch of
     * them is 16 MiB, and waiting a poll after each drained a backlog at 16 MiB a poll) */
    else if (n < o->app->cfg->outbox_batch && !cut) {
      int64_t poll = o->app->cfg->outbox_poll_ms, due = held_due_in(o, hookd_mono_ms());
      wait_for(o, (int)(due >= 0 && due < poll ? due : poll), true); /* (a held row's turn) */
    }
  }
  disconnect(o);
  return NULL;
}

/* The connection string's password (from the string itself; "" when none or unparsable);
 * NULL when out of memory. */
static char *find_password(const char *conninfo) {
  char *out = NULL;
  PQconninfoOption *opts = PQconninfoParse(conninfo, NULL);
  for (PQconninfoOption *op = opts; op && op->keyword; op++)
    if (!strcmp(op->keyword, "password") && op->val) out = strdup(op->val);
  PQconninfoFree(opts);
  return out ? out : strdup("");
}

hookd_outbox *hookd_outbox_start(hookd_app *app, char *err, size_t errlen) {
  const hookd_config *cfg = app->cfg;
  err[0] = '\0';
  if (!cfg->outbox_url[0]) return NULL;
  hookd_outbox *o = calloc(1, sizeof *o);
  if (!o) {
    snprintf(err, errlen, "outbox: out of memory");
    return NULL;
  }
  o->app = app;
  const char *retry = getenv("HOOKD_OUTBOX_SKIP_RETRY_MS"); /* (tests: a short while) */
  long long retry_ms; /* (read as the other numbers: anything else is the default) */
  o->skip_retry_ms = retry && !hookd_parse_ll(retry, 1, SKIP_RETRY_MS, &retry_ms) ? retry_ms
                                                                                : SKIP_RETRY_MS;
  if (!(o->password = find_password(cfg->outbox_url))) {
    free(o);
    snprintf(err, errlen, "outbox: out of memory");
    return NULL;
  }
  /* [schema.]name, checked by the configuration ([a-z_][a-z0-9_]*), quoted: a reserved word
   * ("order", "user") is a name too */
  char t[300];
  const char *dot = strchr(cfg->outbox_table, '.');
  if (dot)
    snprintf(t, sizeof t, "\"%.*s\".\"%s\"", (int)(dot - cfg->outbox_table), cfg->outbox_table,
             dot + 1);
  else
    snprintf(t, sizeof t, "\"%s\"", cfg->outbox_table);
  /* the rows locked; of those, the ones whose payloads fit OUTBOX_BATCH_BYTES together are
   * fetched, a payload over $3 (--max-body-bytes) measured and not sent (nor counted) */
  snprintf(o->select_sql, sizeof o->select_sql,
           "WITH r AS (SELECT seq, tenant, event_id, type, payload, occurred_at, ordering_key,"
           " ordering_version, channels, schema_version, created_at"
           " FROM %s WHERE relay_error IS NULL AND seq <> ALL($2::bigint[])"
           /* the lanes of rows held (a 5xx) wait behind them */
           " AND NOT coalesce(tenant || '/' || ordering_key = ANY($4::text[]), false)"
           /* a row another transaction locked is waited for (lock_timeout), never skipped:
            * the rows of its lane behind it would go first (a review) */
           " ORDER BY seq LIMIT $1::int FOR UPDATE),"
           " s AS (SELECT r.*, octet_length(payload::text) AS plen FROM r),"
           " w AS (SELECT s.*, row_number() OVER (ORDER BY seq) AS k, sum(CASE WHEN plen <="
           " $3::bigint THEN plen ELSE 0 END) OVER (ORDER BY seq) AS upto FROM s) "
           /* each text column cut one past what the API takes (so that a cut value is still
            * refused, 422, and marked): a producer's bug writing 300 MB into one is neither
            * fetched nor held, as a payload over the bound is not */
           /* (::text: a column of another type, an int schema_version or a uuid event_id,
            * failed every batch with "function left(integer, integer) does not exist") */
           "SELECT seq, left(tenant::text, 65), left(event_id::text, 129), left(type::text, 257),"
           " CASE WHEN plen <= $3::bigint THEN payload::text END, "
           /* (an infinite time is NULL here, not an error failing every batch) */
           "CASE WHEN isfinite(occurred_at) THEN "
           "floor(extract(epoch FROM occurred_at) * 1000)::bigint END,"
           " left(ordering_key::text, 257), "
           "ordering_version, CASE WHEN channels IS NOT NULL THEN to_json(ARRAY(SELECT left(c, 129)"
           " FROM unnest(channels) WITH ORDINALITY u(c, i) WHERE i <= 65 ORDER BY i))::text END,"
           " left(schema_version::text, 65), "
           "CASE WHEN isfinite(created_at) THEN "
           "floor(extract(epoch FROM clock_timestamp() - created_at) * 1000)::bigint END, plen, "
           "(SELECT count(*) FROM r) "
           "FROM w WHERE k = 1 OR upto <= " OUTBOX_BATCH_BYTES " ORDER BY seq",
           t);
  snprintf(o->delete_sql, sizeof o->delete_sql, "DELETE FROM %s WHERE seq = ANY($1::bigint[])",
           t);
  snprintf(o->lag_sql, sizeof o->lag_sql,
           "SELECT CASE WHEN isfinite(created_at) THEN floor(extract(epoch FROM "
           "clock_timestamp() - created_at) * 1000)::bigint END FROM %s "
           "WHERE relay_error IS NULL AND seq <> ALL($1::bigint[]) ORDER BY seq LIMIT 1", t);
  snprintf(o->mark_sql, sizeof o->mark_sql,
           "UPDATE %s SET relay_error = $2, relay_failed_at = now() WHERE seq = $1::bigint", t);
  /* the batch's rows by their seqs alone (none of their text converted): $1 limit, $2 skip,
   * $3 lanes, as the batch's SELECT */
  snprintf(o->seqs_sql, sizeof o->seqs_sql,
           "SELECT seq FROM %s WHERE relay_error IS NULL AND seq <> ALL($2::bigint[])"
           " AND NOT coalesce(tenant || '/' || ordering_key = ANY($3::text[]), false)"
           " ORDER BY seq LIMIT $1::int FOR UPDATE", t);
  /* each text column converted to UTF-8 by the server, as the batch's SELECT has it converted,
   * and only a number sent: the conversion fails alike (22P05, 22021), and a row's text is
   * neither transferred nor held (before, a review: the text itself, a 300 MB payload's
   * probe took hookd's peak memory from 16 MB to 602 MB) */
  snprintf(o->probe_sql, sizeof o->probe_sql,
           "SELECT sum(" PROBE_LEN("tenant") "+" PROBE_LEN("event_id") "+" PROBE_LEN("type")
           "+" PROBE_LEN("payload::text") "+" PROBE_LEN("ordering_key") "+"
           PROBE_LEN("channels::text") "+" PROBE_LEN("schema_version")
           ") FROM %s WHERE seq = ANY($1::bigint[])", t);
  snprintf(o->table, sizeof o->table, "%s", t);
  o->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (o->wake_fd < 0 || pthread_create(&o->thread, NULL, main_loop, o) != 0) {
    if (o->wake_fd >= 0) close(o->wake_fd);
    free(o->password);
    free(o);
    snprintf(err, errlen, "outbox: cannot start its thread");
    return NULL;
  }
  pthread_setname_np(o->thread, "hookd-outbox");
  atomic_store_explicit(&hookd_m.outbox_enabled, 1, memory_order_relaxed);
  return o;
}

bool hookd_outbox_stop(hookd_outbox *o) {
  if (!o) return false;
  atomic_store(&o->stopping, true);
  uint64_t one = 1; /* the relay's waits and queries poll this: each returns at once */
  if (write(o->wake_fd, &one, sizeof one) < 0) { /* (a full counter wakes it as well) */
  }
  pthread_join(o->thread, NULL);
  close(o->wake_fd);
  free(o->skip);
  while (o->n_held) unhold(o, &o->held[0]);
  free(o->held);
  free(o->password);
  bool abandoned = o->abandoned;
  free(o);
  return abandoned;
}

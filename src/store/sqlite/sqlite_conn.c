/* sqlite_conn.c — SQLite connections for hookd: WAL with synchronous=FULL, a prepared-statement
 * cache, transactions, and the checkpointer thread.
 *
 * The bulk of checkpointing never runs on the committing thread: the writer connection has
 * automatic checkpoints off and a WAL hook that wakes the checkpointer once CKPT_PAGES frames
 * have been written since the last checkpoint copied; the checkpointer runs a PASSIVE checkpoint
 * on its own connection (it never blocks the writer), and each page is copied once however many
 * commits rewrote it meanwhile.
 *
 * That alone does not let the WAL start over under sustained writes. SQLite restarts the WAL from
 * its beginning only when a write transaction begins on a fully checkpointed WAL, and while the
 * writer commits every few milliseconds a checkpoint on another connection always ends a few
 * commits behind: the file kept growing (75 → 206 MB in 60 s at 3,000 received events/s). So
 * after each of the checkpointer's passes (and whenever the WAL passes WAL_LIMIT_PAGES — times
 * WAL_HARD_FACTOR while the checkpointer runs), the writer itself runs a PASSIVE checkpoint
 * before its next transaction: it copies only what the checkpointer has not (the frames of the
 * last few commits), nothing commits meanwhile, and the
 * transaction that follows restarts the WAL (unless a reader still uses old frames; then the
 * next one tries again). The price is one short pause of the writer per CKPT_PAGES written.
 *
 * (Waking the checkpointer on the WAL's size instead of on the frames not yet copied made it run
 * after every commit once the WAL was past CKPT_PAGES: each pass copied one commit's pages and
 * synced the database, ~16 % of a core at 2,000 received events/s.) */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "store/sqlite/sqlite_int.h"
#include "store/storeq.h"

/* Wake the checkpointer once this many WAL frames (4 MiB at 4 KiB pages) are not yet copied: a
 * page written by several commits in between is copied to the database once. The writer's own
 * checkpoint after each pass — a pause of its commits, mostly the database's fsync — grows with
 * the pass: at 2,000 received events/s it averaged 3.6 ms after 1,000-frame passes, 5.9 ms after
 * 2,000 and 14 ms after 8,000, and p99 latency was 12–13, 10–16 and 22–24 ms (BENCHMARKS.md). */
#define CKPT_PAGES 1000
/* The writer also checkpoints itself past this many WAL pages (128 MiB at 4 KiB): when the
 * checkpointer cannot keep up. The file is cut back to this size when the WAL restarts after a
 * longer pile-up (journal_size_limit). While the checkpointer runs and its checkpoints do not
 * fail, the writer leaves a pile-up up to WAL_HARD_FACTOR times that to it: frames a long reader
 * held back (a `hookd backup`'s snapshot) were all copied by the writer, inline, the moment the
 * reader let go — every commit paused ~1 s (a scale review); the checkpointer copies them on its
 * own thread, and the writer then only the last commits' (its pass's end). The writer's own
 * copy of a pile-up is for a checkpointer whose checkpoints fail, or one slower than the writes
 * (the same disk: the pause is the back-pressure) past 2 GiB. */
#define WAL_LIMIT_PAGES 32000
#define WAL_HARD_FACTOR 16
/* After a pass the checkpointer makes up to CKPT_ROUNDS - 1 shorter ones while more than
 * CKPT_LEFT_PAGES frames were appended meanwhile, so that the writer's own checkpoint copies at
 * most about that many (with 8,000-frame passes at 2,000 events/s: p99 18–21 ms with the extra
 * rounds, 26–29 ms without). */
#define CKPT_ROUNDS 4
#define CKPT_LEFT_PAGES 256

typedef struct {
  dev_t dev[2];
  ino_t ino[2];
  bool seen[2];
} files_seen;

struct sq_shared {
  char *path;
  char wal_name[1100]; /* the WAL's name as SQLite makes it (after the database's real path) */
  files_seen seen;     /* files_check's: set at the writer's open, then the checkpointer's */
  pthread_t ckpt_thread;
  int ckpt_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int wal_pages;   /* frames in the WAL after the writer's last commit */
  int backfilled;  /* of those, frames a checkpoint has copied (0 once the WAL starts over) */
  int ckpt_pages;  /* wake the checkpointer at this many frames not yet copied; 0: never (tests) */
  int ckpt_passed; /* the checkpointer finished a pass: the writer finishes it, the WAL restarts */
  uint64_t passes; /* checkpointer passes that copied frames (tests) */
  uint64_t tries;  /* and every checkpoint it ran (tests) */
  int stop;
  int final_ckpt;  /* at stop: a last checkpoint before closing */
  int wal_limit;   /* the writer checkpoints itself past this WAL size */
  int wal_over;    /* the writer checkpoints before its next transaction (its thread only) */
  int64_t writer_retry_ms; /* after a failed checkpoint the writer's next one waits until then
                            * (monotonic; its thread only) */
  uint64_t ckpt_failures;  /* checkpoints that failed, busy connections aside (store.h) */
  int ckpt_failing;        /* the last checkpoint failed */
  char ckpt_err[160];
  /* an erasure committed: the checkpointer empties the WAL file then (monotonic ms; 0: none
   * asked), and not again before truncate_next_ms (ckpt_erase) */
  int64_t erase_due_ms, truncate_next_ms;
  int erase_busy; /* tries found busy since the last that emptied it (its retry's backoff) */
  uint64_t erase_gen; /* erasures asked (erase_asked): one asked while a truncation ran is not
                       * taken as done by it */
  uint64_t truncations; /* WAL files emptied so (tests) */
  int writer_copied_max; /* the most frames one of the writer's own checkpoints copied (tests) */
};

/* ---------- helpers ---------- */

int sq_fail(hookd_store_conn *c, const char *what) {
  snprintf(c->err, sizeof c->err, "%s: %s", what, sqlite3_errmsg(c->db));
  return HOOKD_STORE_ERR;
}

int sq_exec(hookd_store_conn *c, const char *sql) {
  char *msg = NULL;
  if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
    snprintf(c->err, sizeof c->err, "%s", msg ? msg : sqlite3_errmsg(c->db));
    sqlite3_free(msg);
    return HOOKD_STORE_ERR;
  }
  return HOOKD_STORE_OK;
}

sqlite3_stmt *sq_stmt(hookd_store_conn *c, enum sq_stmt_id id, const char *sql) {
  sqlite3_stmt *st = c->stmts[id];
  if (st) {
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
  }
  if (sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL) != SQLITE_OK) {
    sq_fail(c, "prepare");
    return NULL;
  }
  c->stmts[id] = st;
  return st;
}

void sq_bind_text(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

void sq_bind_i64(sqlite3_stmt *st, int i, int64_t v) { sqlite3_bind_int64(st, i, v); }

void sq_bind_i64_or_null(sqlite3_stmt *st, int i, int64_t v) {
  if (v)
    sqlite3_bind_int64(st, i, v);
  else
    sqlite3_bind_null(st, i);
}

void sq_bind_type_filter(sqlite3_stmt *st, int exact, int prefix, const char *type) {
  const char *equal;
  size_t n = hookd_type_filter_split(type, &equal);
  if (n) sqlite3_bind_text(st, prefix, type, (int)n, SQLITE_TRANSIENT); /* "a.*" → "a." */
  else if (equal) sqlite3_bind_text(st, exact, equal, -1, SQLITE_TRANSIENT);
}

char *sq_col_str(sqlite3_stmt *st, int i) {
  const unsigned char *s = sqlite3_column_text(st, i);
  return s ? strdup((const char *)s) : NULL;
}

int64_t sq_col_i64(sqlite3_stmt *st, int i) { return sqlite3_column_int64(st, i); }

int sq_read_rows(hookd_store_conn *c, sqlite3_stmt *st, size_t elem,
                 void (*read)(sqlite3_stmt *st, void *rec), void (*free_all)(void *v, size_t n),
                 void **out, size_t *n, const char *what) {
  size_t cap = 8, len = 0;
  char *v = calloc(cap, elem);
  int rc = SQLITE_DONE;
  while (v && (rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (len == cap) {
      char *nv = realloc(v, cap * 2 * elem);
      if (!nv) break;
      memset(nv + cap * elem, 0, cap * elem);
      v = nv;
      cap *= 2;
    }
    read(st, v + len++ * elem);
  }
  if (!v || rc != SQLITE_DONE) {
    if (v) free_all(v, len);
    return sq_fail(c, what);
  }
  *out = v;
  *n = len;
  return HOOKD_STORE_OK;
}

/* ---------- checkpointer ---------- */

/* After a checkpoint that failed (an I/O error, a full disk), the next waits this long: each one
 * copies the whole WAL again before its sync fails. */
#define CKPT_RETRY_MS 1000
/* After a pass that copied nothing, the wait before the next (a reader holding an old snapshot
 * holds the frames back for as long as it reads; another checkpoint holds the lock). 100 ms let
 * the WAL grow under load between passes: publish p50 at 5,000/s +0.3 ms (BENCHMARKS.md). */
#define CKPT_STALL_MS 10
/* After an erasure's commit (c->erased, sq_commit): the WAL file is emptied ERASE_DELAY_MS
 * later (the erasures of one request, or of a burst, together), at most once every
 * ERASE_EVERY_MS; the TRUNCATE checkpoint waits at most ERASE_WAIT_MS for readers on older
 * frames (the writer's transactions wait as long), and is tried again while they are there:
 * ERASE_DELAY_MS later, then twice as long each time, up to ERASE_RETRY_MAX_MS (a reader of
 * many seconds — a backup's — held the writer ERASE_WAIT_MS of every second otherwise). */
#define ERASE_DELAY_MS 1000
#define ERASE_EVERY_MS 10000
#define ERASE_WAIT_MS 50
#define ERASE_RETRY_MAX_MS 30000

/* A checkpoint's result, for hookd_sqlite_shared_health (sh->mu held). Returns whether it
 * failed: a busy connection (another checkpoint running, a reader on old frames) is not a
 * failure, the next one goes on. Only one that copied something (or had nothing to copy) says
 * the disk takes writes again: a reader's old snapshot can make a checkpoint copy nothing and
 * succeed. A failed write (a full disk, EIO from pwrite) leaves the WAL's copy mark where it
 * was, and the next checkpoint copies those frames again; a failed sync of the database does
 * not end so well (pages whose writeback failed are forgotten by Linux, which reports the error
 * once: the next checkpoint's sync succeeds, the WAL starts over, and commits acknowledged long
 * ago are gone) — the process stops there (hookd_storeq_lost_sync), and the next start copies
 * the whole WAL again. */
static int ckpt_note(sq_shared *sh, sqlite3 *db, int rc, bool progressed) {
  if (rc == SQLITE_OK) {
    if (progressed) sh->ckpt_failing = 0;
    return 0;
  }
  if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) return 0;
  int ec = sqlite3_extended_errcode(db);
  if (ec == SQLITE_IOERR_FSYNC || ec == SQLITE_IOERR_DIR_FSYNC) {
    char why[300];
    snprintf(why, sizeof why, "checkpoint: %s (%d)", sqlite3_errmsg(db), ec);
    hookd_storeq_lost_sync(why);
  }
  sh->ckpt_failures++;
  sh->ckpt_failing = 1;
  snprintf(sh->ckpt_err, sizeof sh->ckpt_err, "%s (%d)", sqlite3_errmsg(db), rc);
  return 1;
}

/* The store's files as their names reached them when first seen — at the writer's open, before
 * the checkpointer starts and the daemon listens (the WAL made by then: a review's test removed
 * it before a later first look, which then never knew it): removed or replaced since, every
 * commit goes to a file no name reaches — acknowledged, and lost at the next start (a review:
 * an `rm` of the database went unnoticed, 202s and a clean exit, then a new empty store). Each
 * check stats both names; the checkpointer's thread alone checks once it runs. */
static void files_check(sq_shared *sh) {
  char what[1300];
  files_seen *f = &sh->seen;
  const char *paths[2] = {sh->path, sh->wal_name};
  for (int i = 0; i < 2; i++) {
    struct stat st;
    int rc = stat(paths[i], &st);
    if (rc != 0 && errno != ENOENT) continue; /* (unreadable for a moment: not a verdict) */
    if (!f->seen[i]) {
      if (rc == 0) f->seen[i] = true, f->dev[i] = st.st_dev, f->ino[i] = st.st_ino;
      continue;
    }
    if (rc == 0 && st.st_dev == f->dev[i] && st.st_ino == f->ino[i]) continue;
    snprintf(what, sizeof what, "the store's %s %s was %s while hookd ran",
             i ? "WAL" : "database", paths[i], rc ? "removed" : "replaced by another file");
    hookd_storeq_store_gone(what);
  }
}

/* An erasure's WAL file emptied (sh->mu held): a TRUNCATE checkpoint copies every frame into
 * the database (whose freed pages are zeroed: secure_delete) and cuts the file to zero bytes —
 * a frame once copied is no longer read, but its bytes (a deleted payload's page) stayed in the
 * file until written over (docs/security.md "The -wal file after an erasure"). Returns whether
 * it failed; busy (a reader on older frames, the writer's transaction), it is tried again later. */
static int ckpt_erase(sq_shared *sh, sqlite3 *db) {
  uint64_t gen = sh->erase_gen;
  int left_max = sh->ckpt_pages > CKPT_LEFT_PAGES ? sh->ckpt_pages : CKPT_LEFT_PAGES;
  pthread_mutex_unlock(&sh->mu);
  /* first what can be copied without holding the writer (PASSIVE): the TRUNCATE holds its
   * transactions while it copies what is left, so it runs only once that is little — a pile-up
   * behind a reader that just let go (a backup's) would have held them while it was copied (a
   * review: a 284 ms commit at a backup's end); a frame count of one commit's worth is busy */
  int log = 0, done = 0;
  int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
  if (rc == SQLITE_OK && log - done > left_max) rc = SQLITE_BUSY;
  if (rc == SQLITE_OK) {
    sqlite3_busy_timeout(db, ERASE_WAIT_MS);
    rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_TRUNCATE, &log, &done);
    sqlite3_busy_timeout(db, 1000);
  }
  pthread_mutex_lock(&sh->mu);
  sh->tries++;
  int failed = ckpt_note(sh, db, rc, rc == SQLITE_OK);
  int64_t now = hookd_mono_ms();
  if (done > sh->backfilled && done <= sh->wal_pages) sh->backfilled = done; /* (its PASSIVE's) */
  if (rc != SQLITE_OK) {
    int64_t wait = (int64_t)ERASE_DELAY_MS << (sh->erase_busy < 5 ? sh->erase_busy : 5);
    sh->erase_busy++;
    if (wait > ERASE_RETRY_MAX_MS) wait = ERASE_RETRY_MAX_MS;
    sh->erase_due_ms = now + (failed ? CKPT_RETRY_MS : wait);
    return failed;
  }
  sh->erase_busy = 0;
  /* emptied: an erasure committed since asks for the next, not before ERASE_EVERY_MS (one
   * asked while this ran may have committed after it: its own truncation is due then) */
  sh->truncate_next_ms = now + ERASE_EVERY_MS;
  sh->erase_due_ms = sh->erase_gen != gen ? sh->truncate_next_ms : 0;
  sh->truncations++;
  sh->backfilled = 0;
  sh->wal_pages = 0;
  sh->ckpt_passed = 0;
  return 0;
}

/* An erasure committed on c (sq_commit): the checkpointer is asked to empty the WAL file. */
static void erase_asked(sq_shared *sh) {
  pthread_mutex_lock(&sh->mu);
  sh->erase_gen++;
  if (!sh->erase_due_ms) {
    int64_t due = hookd_mono_ms() + ERASE_DELAY_MS;
    sh->erase_due_ms = due > sh->truncate_next_ms ? due : sh->truncate_next_ms;
    pthread_cond_signal(&sh->cv);
  }
  pthread_mutex_unlock(&sh->mu);
}

static void *ckpt_main(void *arg) {
  sq_shared *sh = arg;
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(sh->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
      SQLITE_OK) {
    sqlite3_close(db);
    return NULL;
  }
  sqlite3_busy_timeout(db, 1000);
  sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
  pthread_mutex_lock(&sh->mu);
  int failed = 0;
  bool stalled = false;
  while (!sh->stop) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline); /* the condvar's clock: a step moves neither */
    /* also checkpoint an idle WAL now and then; after a failure, wait out the retry delay, and
     * after a pass that copied nothing a short one */
    int64_t wait_ms = failed ? CKPT_RETRY_MS : stalled ? CKPT_STALL_MS : 2000;
    deadline.tv_nsec += (wait_ms % 1000) * 1000000L;
    deadline.tv_sec += wait_ms / 1000 + deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    while (!sh->stop && (failed || stalled ||
                         !(sh->ckpt_pages && sh->wal_pages - sh->backfilled >= sh->ckpt_pages))) {
      if (!sh->ckpt_pages) {
        pthread_cond_wait(&sh->cv, &sh->mu); /* tests: only stop wakes it */
        continue;
      }
      /* an erasure's WAL file to empty (erase_asked) wakes it at its time */
      int64_t now_ns = hookd_mono_us() * 1000;
      if (sh->erase_due_ms && now_ns >= sh->erase_due_ms * 1000000) break;
      int64_t until_ns = deadline.tv_sec * 1000000000LL + deadline.tv_nsec;
      if (now_ns >= until_ns) break;
      if (sh->erase_due_ms && sh->erase_due_ms * 1000000 < until_ns)
        until_ns = sh->erase_due_ms * 1000000;
      struct timespec until = {until_ns / 1000000000LL, until_ns % 1000000000LL};
      pthread_cond_timedwait(&sh->cv, &sh->mu, &until);
    }
    failed = 0;
    stalled = false;
    if (sh->stop) break;
    files_check(sh); /* (at least every 2 s: the idle pass's wait) */
    if (sh->erase_due_ms && hookd_mono_ms() >= sh->erase_due_ms) {
      failed = ckpt_erase(sh, db);
      continue;
    }
    /* a pass, then short ones for what the writer appended meanwhile, so that what is left for
     * the writer to copy itself is a few commits' frames */
    for (int round = 0; round < CKPT_ROUNDS && !sh->stop; round++) {
      pthread_mutex_unlock(&sh->mu);
      int log = 0, done = 0;
      int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
      pthread_mutex_lock(&sh->mu);
      sh->tries++;
      failed = ckpt_note(sh, db, rc, done > sh->backfilled || done == log);
      /* done counts every frame copied in this WAL; more than before: this pass copied some
       * (a done past wal_pages belongs to a WAL that has started over meanwhile) */
      if (rc != SQLITE_OK || done <= sh->backfilled || done > sh->wal_pages) {
        /* nothing copied (a reader's snapshot older than the frames, another checkpoint under
         * way): the frames are still there, and passes at once would spin a core until then */
        stalled = !failed && round == 0 && done <= sh->wal_pages;
        break;
      }
      sh->backfilled = done;
      sh->ckpt_passed = 1;
      sh->passes++;
      if (sh->wal_pages - sh->backfilled <= CKPT_LEFT_PAGES) break;
    }
  }
  if (sh->final_ckpt) {
    /* every other connection is closed: this copies the whole WAL, and its result is reported
     * (the close that follows checkpoints again, finds nothing left, and removes the WAL) */
    pthread_mutex_unlock(&sh->mu);
    int log = 0, done = 0;
    int rc = sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
    pthread_mutex_lock(&sh->mu);
    ckpt_note(sh, db, rc, done == log);
  }
  pthread_mutex_unlock(&sh->mu);
  sqlite3_close(db);
  return NULL;
}

/* SQLite ends a transaction itself on some errors (an I/O error, SQLITE_FULL from a cache
 * spill, out of memory), even on a read: the statements after it would each commit on its own
 * — a delete's cancellations kept without its delete — until the executor notices between ops.
 * Between sq_begin and sq_commit a commit is refused (the statement fails, nothing of it
 * kept), so that a transaction lost half-way keeps nothing of what followed. */
static int commit_guard(void *arg) {
  hookd_store_conn *c = arg;
  return c->guarded && !c->committing;
}

/* Runs on the writer's thread after each commit; pages = frames in the WAL. */
static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages) {
  sq_shared *sh = arg;
  (void)db;
  (void)name;
  pthread_mutex_lock(&sh->mu);
  if (pages < sh->wal_pages) sh->backfilled = 0; /* the WAL started over */
  sh->wal_pages = pages;
  /* With a checkpointer running, the writer copies a pass's end (what it left: at most about
   * the frames that wake it), never a pile-up below the hard limit (WAL_HARD_FACTOR): those
   * are the checkpointer's, on its own thread */
  bool helped = sh->ckpt_pages && sh->ckpt_started && !sh->stop && !sh->ckpt_failing;
  if (helped)
    sh->wal_over = pages >= (int64_t)sh->wal_limit * WAL_HARD_FACTOR ||
                   (sh->ckpt_passed && pages - sh->backfilled <= sh->ckpt_pages);
  else
    sh->wal_over = pages >= sh->wal_limit || sh->ckpt_passed;
  if (sh->ckpt_pages && pages - sh->backfilled >= sh->ckpt_pages) pthread_cond_signal(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
  return SQLITE_OK;
}

/* Before a write transaction, on the writer: see the comment at the top. PASSIVE never waits;
 * if the checkpointer is busy (SQLITE_BUSY) the next transaction tries again. */
static void writer_checkpoint(hookd_store_conn *c) {
  sq_shared *sh = c->sh;
  if (sh->writer_retry_ms && hookd_mono_ms() < sh->writer_retry_ms) return;
  pthread_mutex_lock(&sh->mu);
  int before = sh->backfilled;
  pthread_mutex_unlock(&sh->mu);
  int log = 0, done = 0;
  int rc = sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done);
  pthread_mutex_lock(&sh->mu);
  int failed = ckpt_note(sh, c->db, rc, done == log);
  if (rc == SQLITE_OK && done - before > sh->writer_copied_max)
    sh->writer_copied_max = done - before;
  pthread_mutex_unlock(&sh->mu);
  if (failed) sh->writer_retry_ms = hookd_mono_ms() + CKPT_RETRY_MS;
  else if (done == log) sh->writer_retry_ms = 0;
  if (rc != SQLITE_OK || done != log) return;
  sh->wal_over = 0;
  pthread_mutex_lock(&sh->mu);
  sh->ckpt_passed = 0;
  /* the next transaction starts the WAL over (if a reader still holds old frames, the hook will
   * report more frames than this and the checkpointer wakes early once: harmless) */
  sh->backfilled = 0;
  sh->wal_pages = 0;
  pthread_mutex_unlock(&sh->mu);
}

void hookd_sqlite_set_wal_pages(void *shared, int ckpt_pages, int limit_pages) {
  sq_shared *sh = shared;
  pthread_mutex_lock(&sh->mu);
  sh->ckpt_pages = ckpt_pages;
  sh->wal_limit = limit_pages;
  pthread_mutex_unlock(&sh->mu);
}

int hookd_sqlite_writer_copied_max(void *shared) {
  sq_shared *sh = shared;
  pthread_mutex_lock(&sh->mu);
  int n = sh->writer_copied_max;
  pthread_mutex_unlock(&sh->mu);
  return n;
}

uint64_t hookd_sqlite_checkpoint_count(void *shared, bool tries) {
  sq_shared *sh = shared;
  pthread_mutex_lock(&sh->mu);
  uint64_t n = tries ? sh->tries : sh->passes;
  pthread_mutex_unlock(&sh->mu);
  return n;
}

int hookd_sqlite_shared_open(const char *path, void **shared, char *err, size_t errlen) {
  sq_process_setup();
  sq_shared *sh = calloc(1, sizeof *sh);
  if (!sh || !(sh->path = strdup(path))) {
    free(sh);
    snprintf(err, errlen, "out of memory");
    return HOOKD_STORE_ERR;
  }
  pthread_mutex_init(&sh->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  /* a wait's deadline on the monotonic clock: after a step of the wall clock back, a
   * failed checkpoint was retried only once the step had passed (the WAL growing meanwhile) */
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&sh->cv, &ca);
  pthread_condattr_destroy(&ca);
  sh->ckpt_pages = CKPT_PAGES;
  sh->wal_limit = WAL_LIMIT_PAGES;
  *shared = sh;
  return HOOKD_STORE_OK;
}

void hookd_sqlite_shared_stop(void *shared, bool final) {
  sq_shared *sh = shared;
  if (!sh || !sh->ckpt_started) return;
  pthread_mutex_lock(&sh->mu);
  sh->stop = 1;
  sh->final_ckpt = final;
  pthread_cond_signal(&sh->cv);
  pthread_mutex_unlock(&sh->mu);
  pthread_join(sh->ckpt_thread, NULL);
  pthread_mutex_lock(&sh->mu);
  sh->ckpt_started = 0;
  pthread_mutex_unlock(&sh->mu);
}

void hookd_sqlite_shared_health(void *shared, hookd_store_health *out) {
  sq_shared *sh = shared;
  pthread_mutex_lock(&sh->mu);
  out->checkpoint_failures = sh->ckpt_failures;
  out->checkpoint_failing = sh->ckpt_failing;
  snprintf(out->checkpoint_error, sizeof out->checkpoint_error, "%s", sh->ckpt_err);
  out->wal_bytes = (int64_t)sh->wal_pages * 4096; /* hookd keeps SQLite's 4 KiB pages */
  pthread_mutex_unlock(&sh->mu);
  struct stat st; /* (one stat a scrape: the file's size as the kernel has it) */
  out->db_bytes = sh->path && stat(sh->path, &st) == 0 ? (int64_t)st.st_size : -1;
}

void hookd_sqlite_shared_free(void *shared) {
  sq_shared *sh = shared;
  if (!sh) return;
  hookd_sqlite_shared_stop(sh, false);
  pthread_mutex_destroy(&sh->mu);
  pthread_cond_destroy(&sh->cv);
  free(sh->path);
  free(sh);
}

/* ---------- connections ---------- */

static void sq_close(hookd_store_conn *c);

static int sq_open(void *shared, int writer, hookd_store_conn **out, char *err, size_t errlen) {
  sq_shared *sh = shared;
  hookd_store_conn *c = calloc(1, sizeof *c);
  if (!c) {
    snprintf(err, errlen, "out of memory");
    return HOOKD_STORE_ERR;
  }
  c->writer = writer;
  c->sh = sh;
  hookd_pfilter_cache_init(&c->pf);
  int flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READWRITE | (writer ? SQLITE_OPEN_CREATE : 0);
  /* A new store is created 0600 (it holds payloads and sealed secrets); SQLite gives its -wal
   * and -shm files the database file's mode. */
  if (writer && sh->path[0] != ':' && strncmp(sh->path, "file:", 5) != 0) {
    int fd = open(sh->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  if (sqlite3_open_v2(sh->path, &c->db, flags, NULL) != SQLITE_OK) {
    snprintf(err, errlen, "cannot open %s: %s", sh->path,
             c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_close(c->db);
    free(c);
    return HOOKD_STORE_ERR;
  }
  sqlite3_busy_timeout(c->db, SQ_BUSY_TIMEOUT_MS);
  sqlite3_extended_result_codes(c->db, 1);
  /* another application's database (tables, and no schema_migrations) is not a store: refused
   * before anything is written to it (journal mode, schema) — a file that is not SQLite at all
   * fails the pragmas below with SQLite's own words */
  sqlite3_stmt *probe = NULL;
  if (writer && sqlite3_prepare_v2(c->db,
                                   "SELECT EXISTS(SELECT 1 FROM sqlite_master) AND NOT EXISTS("
                                   "SELECT 1 FROM sqlite_master WHERE type = 'table'"
                                   " AND name = 'schema_migrations')",
                                   -1, &probe, NULL) == SQLITE_OK &&
      sqlite3_step(probe) == SQLITE_ROW && sqlite3_column_int(probe, 0)) {
    sqlite3_finalize(probe);
    snprintf(err, errlen, "%s is an SQLite database of another application (no hookd schema): "
                          "refusing to use it", sh->path);
    sqlite3_close(c->db);
    free(c);
    return HOOKD_STORE_ERR;
  }
  sqlite3_finalize(probe);
  const char *pragmas = writer ? "PRAGMA journal_mode=WAL;"
                                 "PRAGMA synchronous=FULL;"
                                 "PRAGMA foreign_keys=ON;"
                                 "PRAGMA wal_autocheckpoint=0;"
                                 "PRAGMA cache_size=-65536;"
                                 "PRAGMA temp_store=MEMORY;"
                                 /* a deleted endpoint's sealed secret, an emptied payload:
                                  * zeroed where they lay, not left in free pages (Debian's
                                  * library does so by default; another may not) */
                                 "PRAGMA secure_delete=ON;"
                               : "PRAGMA synchronous=FULL;"
                                 "PRAGMA query_only=1;"
                                 "PRAGMA cache_size=-32768;";
  if (sq_exec(c, pragmas) != 0) {
    snprintf(err, errlen, "configure %s: %s", sh->path, c->err);
    sqlite3_close(c->db);
    free(c);
    return HOOKD_STORE_ERR;
  }
  if (writer) {
    int psow = -1; /* -1 queries the setting */
    c->psow = sqlite3_file_control(c->db, "main", SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) ==
                  SQLITE_OK && psow == 1;
    char limit[64]; /* hookd keeps SQLite's default 4 KiB pages */
    snprintf(limit, sizeof limit, "PRAGMA journal_size_limit=%lld", WAL_LIMIT_PAGES * 4096LL);
    sq_exec(c, limit); /* only a size hint: a failure costs disk space, nothing else */
    sqlite3_wal_hook(c->db, wal_hook, sh);
    sqlite3_commit_hook(c->db, commit_guard, c);
    if (!sh->ckpt_started) {
      /* the files as they are now, the WAL opened (made if missing) by a read first; the database
       * by the name it was given (a symlink's removal counts), the WAL by the name SQLite gives
       * it (a review: "<symlink>-wal" never existed, the real WAL's removal went unseen) */
      sq_exec(c, "SELECT 1 FROM sqlite_master LIMIT 1");
      const char *main_file = sqlite3_db_filename(c->db, "main");
      const char *wal = main_file ? sqlite3_filename_wal(main_file) : NULL;
      snprintf(sh->wal_name, sizeof sh->wal_name, "%s%s", wal ? wal : sh->path,
               wal ? "" : "-wal");
      files_check(sh);
    }
    if (!sh->ckpt_started && pthread_create(&sh->ckpt_thread, NULL, ckpt_main, sh) == 0) {
      pthread_setname_np(sh->ckpt_thread, "checkpoint");
      sh->ckpt_started = 1;
    }
  } else if (!sq_stmt(c, SQ_TX_BEGIN_R, "BEGIN") || !sq_stmt(c, SQ_TX_ROLLBACK, "ROLLBACK")) {
    /* prepared now: an interrupt (sq_interrupt) that lands as an op ends leaves SQLite's flag
     * set, which fails every prepare until a statement starts — a prepared BEGIN or ROLLBACK
     * clears it as it starts, one prepared then would fail and leave the transaction open */
    snprintf(err, errlen, "prepare %s: %s", sh->path, c->err);
    sq_close(c);
    return HOOKD_STORE_ERR;
  }
  *out = c;
  return HOOKD_STORE_OK;
}

static void sq_close(hookd_store_conn *c) {
  if (!c) return;
  for (int i = 0; i < SQ__COUNT; i++) sqlite3_finalize(c->stmts[i]);
  sqlite3_close(c->db);
  hookd_pfilter_cache_free(&c->pf);
  hookd_hold_memo_free(&c->hold);
  free(c);
}

static const char *sq_errmsg(hookd_store_conn *c) { return c->err; }
static void sq_clear_error(hookd_store_conn *c) { c->err[0] = '\0'; }
static void sq_interrupt(hookd_store_conn *c) { sqlite3_interrupt(c->db); }

/* A cached statement stepped but not reset keeps its read snapshot open past the end of the
 * transaction (a reader would then never see later commits): end every transaction with every
 * statement reset. */
static void reset_all(hookd_store_conn *c) {
  for (int i = 0; i < SQ__COUNT; i++)
    if (c->stmts[i]) sqlite3_reset(c->stmts[i]);
}

/* Transaction control runs for every op: prepared once, like every other statement. */
static int tx(hookd_store_conn *c, enum sq_stmt_id id, const char *sql) {
  sqlite3_stmt *st = sq_stmt(c, id, sql);
  if (!st) return HOOKD_STORE_ERR;
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  return rc == SQLITE_DONE ? HOOKD_STORE_OK : sq_fail(c, sql);
}

static int sq_begin(hookd_store_conn *c, int writer) {
  if (!writer) return tx(c, SQ_TX_BEGIN_R, "BEGIN");
  if (c->sh->wal_over) writer_checkpoint(c);
  int rc = tx(c, SQ_TX_BEGIN_W, "BEGIN IMMEDIATE");
  c->guarded = rc == HOOKD_STORE_OK;
  return rc;
}
static int sq_commit(hookd_store_conn *c) {
  reset_all(c);
  c->committing = true;
  int rc = tx(c, SQ_TX_COMMIT, "COMMIT");
  c->committing = false;
  c->guarded = !sqlite3_get_autocommit(c->db);
  if (c->erased) erase_asked(c->sh); /* (a commit failed may have committed: asked all the same) */
  c->erased = false;
  /* the WAL frames, commit mark included, may be written and only their sync have failed:
   * recovery would then bring the transaction back. A write that failed (EFBIG past a file-size
   * limit, EIO) is another matter: the frames are written in order, the commit frame last, and
   * with powersafe overwrite nothing is written after it (no padding frames), so the commit
   * frame is incomplete or absent, and recovery drops the transaction — a failure, as ENOSPC's
   * SQLITE_FULL is. */
  if (rc == HOOKD_STORE_OK) return rc;
  /* Only the failures known to come before anything of the commit is durable say "failed";
   * any other (an fsync's EIO, an out-of-memory appending to the WAL index after the frames
   * were synced) may have committed: unknown, never answered as a failure (a client would
   * retry a publish that landed) */
  int ec = sqlite3_extended_errcode(c->db), pc = ec & 0xff;
  bool failed = pc == SQLITE_FULL || pc == SQLITE_CONSTRAINT || pc == SQLITE_BUSY ||
                pc == SQLITE_LOCKED || pc == SQLITE_READONLY ||
                (ec == SQLITE_IOERR_WRITE && c->psow);
  return failed ? rc : HOOKD_STORE_UNKNOWN;
}
static int sq_rollback(hookd_store_conn *c) {
  reset_all(c);
  c->guarded = false;
  c->erased = false;
  if (sqlite3_get_autocommit(c->db)) return HOOKD_STORE_OK;
  return tx(c, SQ_TX_ROLLBACK, "ROLLBACK");
}
static int sq_savepoint(hookd_store_conn *c) { return tx(c, SQ_TX_SAVEPOINT, "SAVEPOINT op"); }
static int sq_release(hookd_store_conn *c) { return tx(c, SQ_TX_RELEASE, "RELEASE op"); }
static int sq_rollback_to(hookd_store_conn *c) {
  return tx(c, SQ_TX_ROLLBACK_TO, "ROLLBACK TO op");
}
static int64_t sq_changes(hookd_store_conn *c) { return sqlite3_total_changes64(c->db); }
/* the header's user_version (unused by hookd): page 1 rewritten, one WAL frame */
static int sq_probe(hookd_store_conn *c) { return sq_exec(c, "PRAGMA user_version = 0"); }
static int sq_in_txn(hookd_store_conn *c) { return !sqlite3_get_autocommit(c->db); }

const hookd_store_backend hookd_sqlite_backend = {
    .name = "sqlite",
    .open = sq_open,
    .close = sq_close,
    .errmsg = sq_errmsg,
    .clear_error = sq_clear_error,
    .interrupt = sq_interrupt,
    .migrate = sq_migrate,
    .recover = sq_recover,
    .first_sealed = sq_first_sealed,
    .begin = sq_begin,
    .commit = sq_commit,
    .rollback = sq_rollback,
    .savepoint = sq_savepoint,
    .release = sq_release,
    .rollback_to = sq_rollback_to,
    .changes = sq_changes,
    .probe = sq_probe,
    .in_txn = sq_in_txn,
    .tenant_create = sq_tenant_create,
    .tenant_get = sq_tenant_get,
    .tenant_update = sq_tenant_update,
    .tenant_delete = sq_tenant_delete,
    .event_type_create = sq_event_type_create,
    .event_type_list = sq_event_type_list,
    .event_type_get = sq_event_type_get,
    .backlog_count = sq_backlog_count,
    .config_stamps = sq_config_stamps,
    .heartbeat = sq_heartbeat,
    .event_type_update = sq_event_type_update,
    .event_types_check = sq_event_types_check,
    .tenant_list = sq_tenant_list,
    .tenant_page = sq_tenant_page,
    .endpoint_create = sq_endpoint_create,
    .endpoint_get = sq_endpoint_get,
    .endpoint_stats = sq_endpoint_stats,
    .event_deliver = sq_event_deliver,
    .ever_made = sq_ever_made,
    .endpoint_list = sq_endpoint_list,
    .endpoint_update = sq_endpoint_update,
    .endpoint_delete = sq_endpoint_delete,
    .delete_step = sq_delete_step,
    .endpoint_reseal = sq_endpoint_reseal,
    .master_key_claim = sq_master_key_claim,
    .owed_expired = sq_owed_expired,
    .expire_owed = sq_expire_owed,
    .endpoints_since = sq_endpoints_since,
    .publish = sq_publish,
    .event_payload_delete = sq_event_payload_delete,
    .event_get = sq_event_get,
    .delivery_get = sq_delivery_get,
    .delivery_list = sq_delivery_list,
    .delivery_replay = sq_delivery_replay,
    .claim = sq_claim,
    .record_outcome = sq_record_outcome,
    .release_lease = sq_release_lease,
    .mark_sent = sq_mark_sent,
    .reclaim_leases = sq_reclaim_leases,
    .lease_shift = sq_lease_shift,
    .due_hints = sq_due_hints,
    .api_key_create = sq_api_key_create,
    .api_key_list = sq_api_key_list,
    .api_key_revoke = sq_api_key_revoke,
    .audit_append = sq_audit_append,
    .answer_get = sq_answer_get,
    .answer_put = sq_answer_put,
    .answer_purge = sq_answer_purge,
    .api_key_purge = sq_api_key_purge,
    .audit_list = sq_audit_list,
    .source_create = sq_source_create,
    .source_get = sq_source_get,
    .source_update = sq_source_update,
    .source_delete = sq_source_delete,
    .source_list = sq_source_list,
    .source_page = sq_source_page,
    .receive = sq_receive,
    .inbox_get = sq_inbox_get,
    .inbox_list = sq_inbox_list,
    .inbox_resolve = sq_inbox_resolve,
    .inbox_reforward = sq_inbox_reforward,
    .inbox_purge = sq_inbox_purge,
    .object_versions_purge = sq_object_versions_purge,
    .lane_versions_purge = sq_lane_versions_purge,
    .event_purge = sq_event_purge,
    .event_expire = sq_event_expire,
    .replay_select = sq_replay_select,
    .event_list = sq_event_list,
    .replay_create = sq_replay_create,
    .replay_get = sq_replay_get,
    .replay_list = sq_replay_list,
    .replay_abandon = sq_replay_abandon,
    .replay_act = sq_replay_act,
    .replay_step = sq_replay_step,
    .replay_purge = sq_replay_purge,
};

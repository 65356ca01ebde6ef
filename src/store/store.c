/* store.c — opening a store by URL, and the record helpers every backend shares. */
#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/inbound.h"
#include "core/payload_filter.h"
#include "core/scope.h"
#include "core/secretbox.h"
#include "store/postgres/pg_store.h"
#include "store/sqlite/sqlite_int.h"
#include "store/storeq.h"

const char *const hookd_recv_outcome_names[HOOKD_RECV__COUNT] = {
    "new", "duplicate", "conflict", "semantic_duplicate", "stale", "filtered"};

/* flock()s path (created 0600 if missing; *created says so): the descriptor, -1 with err. */
static int lock_file(const char *path, const char *store_path, bool *created, char *err,
                     size_t errlen) {
  /* made here, or not at all (O_EXCL: never through a link someone left at its name) */
  int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  *created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      snprintf(err, errlen, "another hookd is running on %s (a daemon, or a hookd keys command "
                            "writing to it: start again once it ends)", store_path);
    else
      snprintf(err, errlen, "cannot lock %s: %s (a local file system is needed)", path,
               strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

/* A sqlite: store is a file by its path. A URI (file:NAME, which SQLite builds with URIs open
 * as NAME while the lock, the 0600 mode and the key file went to a file named "file:NAME") or
 * :memory: (nothing durable) is refused. */
static int sqlite_path_ok(const char *path, char *err, size_t errlen) {
  if (!strncmp(path, "file:", 5) || path[0] == ':') {
    snprintf(err, errlen, "sqlite:PATH takes a file's path, not a URI (file:…) or :memory: "
                          "(use sqlite:./%s for a file so named)", path);
    return -1;
  }
  return 0;
}

int hookd_store_lock_offline(const char *url, hookd_store_lockset *out, char *err,
                             size_t errlen) {
  if (!hookd_store_is_postgres(url)) return hookd_store_lock(url, out, err, errlen);
  out->db_fd = out->legacy_fd = -1;
  return hookd_pg_lock_offline(url, &out->pg, err, errlen);
}

int hookd_store_remains(const char *url, const char *suffix, char *err, size_t errlen) {
  if (strncmp(url, "sqlite:", 7) != 0) return 0;
  const char *path = url + 7;
  if (access(path, F_OK) == 0 || errno != ENOENT) return 0;
  char other[1100];
  snprintf(other, sizeof other, "%s%s", path, suffix);
  struct stat st;
  if (stat(other, &st) != 0 || st.st_size == 0) return 0; /* (empty: a start killed early) */
  snprintf(err, errlen,
           "the store's database %s is missing but %s is there: the remains of a store, not a "
           "new one — restore the database (with its key file), or remove %s to start an empty "
           "store",
           path, other, other);
  return -1;
}

/* (store.h) */
int hookd_store_file_check(const char *url, char *err, size_t errlen) {
  if (strncmp(url, "sqlite:", 7) != 0) return 0;
  const char *path = url + 7;
  /* a device, a pipe or a directory is no store: refused before anything is made beside it
   * (before, a review: `sqlite:/dev/null` wrote /dev/null.lock and /dev/null-journal, then
   * failed with "disk I/O error") */
  struct stat at;
  if (stat(path, &at) == 0 && !S_ISREG(at.st_mode)) {
    const char *what = S_ISDIR(at.st_mode)                          ? "a directory"
                       : S_ISCHR(at.st_mode) || S_ISBLK(at.st_mode) ? "a device"
                       : S_ISFIFO(at.st_mode)                       ? "a pipe"
                                                                    : "a special file";
    snprintf(err, errlen, "%s is not a store file but %s: a store is a regular file (or a path "
                          "where none is yet)",
             path, what);
    return -1;
  }
  return hookd_store_dir_check(url, err, errlen);
}

/* (store.h) */
int hookd_store_dir_check(const char *url, char *err, size_t errlen) {
  if (strncmp(url, "sqlite:", 7) != 0) return 0;
  const char *path = url + 7;
  /* SQLite makes the -wal and -shm files beside the database: a directory this user cannot
   * write failed with "attempt to write a readonly database" (a review) — said as such, unless
   * both are there already */
  char dir[1100], wal[1100], shm[1100];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash) *(slash == dir ? slash + 1 : slash) = '\0';
  else snprintf(dir, sizeof dir, ".");
  snprintf(wal, sizeof wal, "%s-wal", path);
  snprintf(shm, sizeof shm, "%s-shm", path);
  if ((access(wal, F_OK) != 0 || access(shm, F_OK) != 0) && access(dir, W_OK | X_OK) != 0 &&
      (errno == EACCES || errno == EPERM)) {
    snprintf(err, errlen, "the directory %s cannot be written by this user (uid %u): the store's "
                          "-wal and -shm files are made there",
             dir, (unsigned)geteuid());
    return -1;
  }
  return 0;
}

int hookd_store_lock(const char *url, hookd_store_lockset *out, char *err, size_t errlen) {
  out->db_fd = out->legacy_fd = -1;
  out->pg = NULL;
  if (strncmp(url, "sqlite:", 7) != 0) return 0;
  const char *path = url + 7;
  if (sqlite_path_ok(path, err, errlen) != 0) return -1;
  if (hookd_store_file_check(url, err, errlen) != 0) return -1;
  /* (before the lock, which creates the file; the key file is the daemon's to ask about:
   * keyring.c knows whether it is the store's own key) */
  if (hookd_store_remains(url, "-wal", err, errlen) != 0) return -1;
  char legacy[1100];
  snprintf(legacy, sizeof legacy, "%s.lock", path);
  bool created;
  if ((out->db_fd = lock_file(path, path, &created, err, errlen)) < 0) return -1;
  if ((out->legacy_fd = lock_file(legacy, path, &created, err, errlen)) < 0) {
    close(out->db_fd); /* nothing of SQLite's is open on the file yet */
    out->db_fd = -1;
    return -1;
  }
  /* Run as root (a CLI key command on a daemon user's store), a lock file it just made would be
   * root's: the daemon's user could no longer open it. Given to the database's owner, as SQLite
   * does with the -wal and -shm files it makes as root — only one made by this call: a file
   * found there (a link to /etc/shadow, say) is never given away. */
  struct stat db, lk;
  if (created && geteuid() == 0 && fstat(out->db_fd, &db) == 0 &&
      fstat(out->legacy_fd, &lk) == 0 && S_ISREG(lk.st_mode) && lk.st_nlink == 1 &&
      (lk.st_uid != db.st_uid || lk.st_gid != db.st_gid))
    (void)!fchown(out->legacy_fd, db.st_uid, db.st_gid); /* best effort, as SQLite's */
  return 0;
}

bool hookd_store_lock_if_free(const char *url, hookd_store_lockset *out) {
  *out = (hookd_store_lockset){-1, -1, NULL};
  if (strncmp(url, "sqlite:", 7) != 0) return false;
  char legacy[1100], err[256];
  snprintf(legacy, sizeof legacy, "%s.lock", url + 7);
  return access(legacy, F_OK) == 0 && hookd_store_lock(url, out, err, sizeof err) == 0;
}

void hookd_store_unlock(hookd_store_lockset *l) {
  if (l->pg) hookd_pg_unlock_offline(l->pg);
  l->pg = NULL;
  if (l->legacy_fd >= 0) close(l->legacy_fd);
  if (l->db_fd >= 0) close(l->db_fd);
  l->db_fd = l->legacy_fd = -1;
}

bool hookd_publish_same_request(const hookd_publish_req *req, const void *stored, size_t len) {
  if (!stored || len != 32) return false;
  return memcmp(stored, req->request_hash, 32) == 0 ||
         (req->request_hash_legacy && memcmp(stored, req->request_hash_legacy, 32) == 0);
}

const char *hookd_store_strerror(int rc) {
  switch (rc) {
  case HOOKD_STORE_OK: return "ok";
  case HOOKD_STORE_ERR: return "storage error";
  case HOOKD_STORE_NOTFOUND: return "not found";
  case HOOKD_STORE_EXISTS: return "already exists";
  case HOOKD_STORE_CONFLICT: return "conflict";
  case HOOKD_STORE_STALE: return "stale lease";
  case HOOKD_STORE_STATE: return "illegal in the current state";
  case HOOKD_STORE_LIMIT: return "limit reached";
  case HOOKD_STORE_UNKNOWN: return "commit outcome unknown (I/O error)";
  case HOOKD_STORE_STOPPED: return "stopped";
  }
  return "unknown";
}

void hookd_tenant_free(hookd_tenant *t) {
  free(t->id);
  free(t->name);
  free(t->metadata);
  memset(t, 0, sizeof *t);
}

void hookd_tenant_delete_res_free(hookd_tenant_delete_res *r) {
  for (size_t i = 0; i < r->n_endpoints; i++) free(r->endpoint_ids[i]);
  for (size_t i = 0; i < r->n_sources; i++) free(r->source_ids[i]);
  free(r->endpoint_ids);
  free(r->source_ids);
  memset(r, 0, sizeof *r);
}

void hookd_event_types_free(hookd_event_type *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].description);
    free(v[i].schemas);
  }
  free(v);
}

void hookd_node_rows_free(hookd_node_row *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].node_id);
  free(v);
}

void hookd_tenants_free(hookd_tenant *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_tenant_free(&v[i]);
  free(v);
}

void hookd_endpoint_free(hookd_endpoint *e) {
  free(e->lane_policy);
  free(e->id);
  free(e->tenant_id);
  free(e->url);
  free(e->description);
  free(e->event_types);
  free(e->disabled_reason);
  free(e->signing);
  free(e->source_id);
  hookd_secret_free(e->secret);
  hookd_secret_free(e->previous_secret);
  hookd_secret_free(e->headers);
  free(e->channels);
  free(e->metadata);
  free(e->payload_filter);
  free(e->body_format);
  memset(e, 0, sizeof *e);
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

void hookd_endpoint_copy(hookd_endpoint *dst, const hookd_endpoint *src) {
  *dst = *src;
  dst->id = dup_or_null(src->id);
  dst->tenant_id = dup_or_null(src->tenant_id);
  dst->url = dup_or_null(src->url);
  dst->description = dup_or_null(src->description);
  dst->event_types = dup_or_null(src->event_types);
  dst->disabled_reason = dup_or_null(src->disabled_reason);
  dst->signing = dup_or_null(src->signing);
  dst->source_id = dup_or_null(src->source_id);
  dst->lane_policy = dup_or_null(src->lane_policy);
  dst->secret = dup_or_null(src->secret);
  dst->previous_secret = dup_or_null(src->previous_secret);
  dst->headers = dup_or_null(src->headers);
  dst->channels = dup_or_null(src->channels);
  dst->metadata = dup_or_null(src->metadata);
  dst->payload_filter = dup_or_null(src->payload_filter);
  dst->body_format = dup_or_null(src->body_format);
}

void hookd_event_free(hookd_event *e) {
  free(e->id);
  free(e->tenant_id);
  free(e->type);
  free(e->body);
  free(e->content_type);
  free(e->meta);
  free(e->schema_version);
  free(e->ordering_key);
  free(e->channels);
  free(e->test_endpoint);
  memset(e, 0, sizeof *e);
}

void hookd_events_free(hookd_event *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_event_free(&v[i]);
  free(v);
}

void hookd_delivery_free(hookd_delivery *d) {
  free(d->id);
  free(d->event_id);
  free(d->event_type);
  free(d->endpoint_id);
  free(d->tenant_id);
  free(d->lease_owner);
  free(d->last_error);
  free(d->dead_reason);
  free(d->ordering_key);
  free(d->result_ref);
  memset(d, 0, sizeof *d);
}

void hookd_attempt_free(hookd_attempt *a) {
  free(a->outcome);
  free(a->error);
  free(a->response);
  free(a->trigger);
  free(a->url);
  memset(a, 0, sizeof *a);
}

void hookd_endpoints_free(hookd_endpoint *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_endpoint_free(&v[i]);
  free(v);
}

void hookd_deliveries_free(hookd_delivery *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_delivery_free(&v[i]);
  free(v);
}

void hookd_attempts_free(hookd_attempt *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_attempt_free(&v[i]);
  free(v);
}

void hookd_publish_res_free(hookd_publish_res *r) {
  free(r->event_id);
  for (size_t i = 0; i < r->n_endpoints; i++) free(r->endpoints[i]);
  memset(r, 0, sizeof *r);
}

int hookd_publish_pfilter(struct hookd_pfilter_cache *pf, const char *filter,
                          const hookd_publish_req *req, json_t **parsed, long *steps) {
  if (req->payload) return hookd_pfilter_match_payload(pf, filter, req->payload, steps);
  return hookd_pfilter_match_envelope(pf, filter, req->body, req->body_len, parsed, steps);
}

int hookd_claim_passes(hookd_store_conn *c, const hookd_claim_req *req, hookd_claim_kind_fn kind,
                       hookd_claimed *v, size_t *len) {
  /* (without the one replay first, live filling every claim left a replayed lane head none,
   * its lane's later deliveries waiting behind it: the dispatcher sends it first too) */
  int first = req->replay_first && req->replay_limit > 0 && req->limit > 0 ? 1 : 0;
  size_t start = *len;
  int rc = kind(c, req, true, first, v, len);
  int replays = (int)(*len - start);
  if (!rc) rc = kind(c, req, false, req->limit - (int)(*len - start), v, len);
  /* the replays after the live ones — none when the first pass found none to take: in the same
   * transaction, at the same time, a live claim makes no replay claimable (a statement saved on
   * every other claim of an ordered endpoint) */
  int more = first && !replays ? 0 : req->replay_limit - replays;
  if (more > req->limit - (int)(*len - start)) more = req->limit - (int)(*len - start);
  if (!rc) rc = kind(c, req, true, more, v, len);
  return rc;
}

void hookd_walk_begin(hookd_walk_batch *w, int64_t before_ms, int64_t after_seq, int64_t *ids) {
  *w = (hookd_walk_batch){.before_ms = before_ms,
                          .ahead_ms = hookd_now_ms() + HOOKD_RETENTION_AHEAD_MS,
                          .last = after_seq,
                          .ids = ids};
}

bool hookd_walk_row(hookd_walk_batch *w, int64_t seq, int64_t t, bool eligible) {
  if (t >= w->before_ms && t < w->ahead_ms) {
    w->fresh = true;
    return false;
  }
  w->last = seq;
  w->scanned++;
  if (t < w->before_ms && eligible) w->ids[w->n++] = seq; /* (else: stamped ahead) */
  return true;
}

int64_t hookd_walk_next(const hookd_walk_batch *w, int limit) {
  return w->fresh || w->scanned < limit ? 0 : w->last;
}

bool hookd_replay_turn_end(int taken, const hookd_replay_budget *left, bool complete, double *at,
                           double now) {
  if ((left->bytes > 0 && left->items > 0) || complete) return true;
  if (!taken) return false;
  if (*at < now) *at = now;
  return true;
}

int hookd_replay_walk_run(hookd_store_conn *c, hookd_replay_walk *w, hookd_replay_step_res *res,
                          size_t *hcap, hookd_replay_budget *left) {
  const hookd_replay_due *j = w->job;
  int rc = HOOKD_STORE_OK;
  hookd_replay_memo memo = {.swept = true};
  double per_item = 1000.0 / j->rate;
  /* the bucket holds at most one second's worth: a job held up (the store, a restart) does not
   * burst its whole delay */
  double bucket = (double)j->next_at, *at = &bucket;
  if (bucket < w->limit - 1000) bucket = w->limit - 1000;
  /* never more than one item's wait ahead, unless the clock stepped back: then due now
   * (docs/architecture.md "Clocks"; the claim of due jobs takes such a job too) */
  if (bucket > w->limit + per_item + 1000) bucket = w->limit;
  w->replayed = w->skipped = w->passed = 0;
  w->taken = 0;
  w->held = NULL;
  /* the walk's frontier: items from it on were never looked at in this round; below it, from
   * the first open item on, the open items are those passed. The walk starts at the first item,
   * goes on in order while items move, and at the first held one there jumps to the frontier */
  /* a job over one endpoint (filter.endpoint, a missing job's) stops at its held item; another
   * passes it and goes on with the others */
  bool single = j->endpoint_id != NULL;
  int64_t first = j->next_item;
  int64_t frontier = single || j->scan_item < first ? first : j->scan_item;
  int64_t cur = first;
  bool end = false; /* the walk reached the job's last open item */
  /* the open items from cur on, read a few at a time (one query an item cost the bench's jobs
   * their pace): valid while the walk goes on in order, read again where it jumps */
  int64_t ahead[64];
  size_t n_ahead = 0, at_ahead = 0;
  /* the step's bytes of bodies and its items are shared by its jobs: once spent, the jobs after
   * take none and go first at the next step (hookd_replay_turn_end) */
  while (*at <= w->limit && w->taken < HOOKD_REPLAY_STEP_MAX && left->bytes > 0 &&
         left->items > 0) {
    while (at_ahead < n_ahead && ahead[at_ahead] < cur) at_ahead++; /* (jumped past) */
    if (at_ahead == n_ahead) {
      at_ahead = 0;
      if ((rc = w->open_from(c, j->seq, cur, ahead, 64, &n_ahead)) != 0) break;
    }
    if (at_ahead == n_ahead) {
      end = true;
      break;
    }
    int64_t n = ahead[at_ahead++];
    if (n >= frontier) frontier = n; /* (past what was passed: the frontier goes on) */
    bool passed_before = n < frontier;
    const char *result;
    char *ep = NULL;
    int64_t read = 0;
    if ((rc = w->item(c, j, n, w->now_ms, &memo, w->hm, &result, &ep, &read)) != 0) break;
    if (result && !strcmp(result, "spent")) { /* (the step's probes: docs/replay.md) */
      free(ep);
      left->items = 0; /* item n stays open; the jobs after go first at the next step */
      break;
    }
    w->taken++;
    left->items--;
    if (result && !strcmp(result, "held")) { /* left open */
      if (n == first || !w->held) {
        free(w->held);
        w->held = ep;
      } else {
        free(ep);
      }
      if (single) break;
      w->passed++;
      if (passed_before) cur = frontier; /* (the rest passed before waits: to the frontier) */
      else cur = frontier = n + 1;
      continue;
    }
    cur = n + 1;
    if (!passed_before) frontier = cur;
    left->bytes -= read;
    if (result && !strcmp(result, "replayed")) {
      w->replayed++;
      rc = hookd_hint_add(&res->hints, &res->n_hints, hcap, ep, w->now_ms) ? HOOKD_STORE_ERR : 0;
      free(ep);
      if (rc) break;
      *at += per_item;
    } else if (result) {
      w->skipped++; /* a skip sends nothing: it takes no share of the rate */
    }
  }
  size_t got = 0; /* the first open item now; none: the job is complete */
  if (!rc) rc = w->open_from(c, j->seq, first, &w->next, 1, &got);
  if (rc) {
    free(w->held);
    w->held = NULL;
    return rc;
  }
  w->complete = !got;
  if (w->complete) w->next = j->total + 1;
  /* at its end the walk starts over at the first item (the round's passed items looked at
   * again); never behind the first open item */
  w->frontier = end || frontier < w->next ? w->next : frontier;
  w->write = hookd_replay_turn_end(w->taken, left, w->complete, at, w->limit);
  /* looked at again a poll later (held long, a slower one: each look writes the row) when it
   * stopped at its held item, or moved nothing of what it looked at */
  bool moved = w->replayed || w->skipped;
  bool wait = single ? w->held != NULL
                        : (w->passed > 0 && !moved) || (end && !moved && !w->complete);
  int64_t poll = j->held_since > 0 && w->now_ms - j->held_since >= HOOKD_REPLAY_HOLD_LONG_MS
                     ? HOOKD_REPLAY_HOLD_SLOW_POLL_MS
                     : HOOKD_REPLAY_HOLD_POLL_MS;
  if (wait && bucket < w->limit + poll) bucket = w->limit + poll;
  w->at = bucket;
  return HOOKD_STORE_OK;
}

/* (a clock stepped back makes every record stale: probed again) */
static bool hold_fresh(const hookd_hold_seen *s, int64_t now_ms) {
  return now_ms >= s->probed_at && now_ms - s->probed_at < HOOKD_REPLAY_HOLD_POLL_MS;
}

hookd_hold_seen *hookd_hold_find(hookd_hold_memo *m, const char *endpoint_id) {
  for (size_t i = 0; i < m->n; i++)
    if (!strcmp(m->v[i].endpoint_id, endpoint_id)) return &m->v[i];
  return NULL;
}

void hookd_hold_sweep(hookd_hold_memo *m, int64_t now_ms) {
  m->rows_left = HOOKD_REPLAY_STEP_PROBE_ROWS;
  size_t k = 0;
  for (size_t i = 0; i < m->n; i++) {
    if (hold_fresh(&m->v[i], now_ms)) m->v[k++] = m->v[i];
    else free(m->v[i].endpoint_id);
  }
  m->n = k;
}

hookd_hold_seen *hookd_hold_add(hookd_hold_memo *m, const char *endpoint_id, bool enabled,
                                int64_t waiting, int64_t oldest, int64_t now_ms) {
  if (m->n == m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 8;
    hookd_hold_seen *v = realloc(m->v, cap * sizeof *v);
    if (!v) return NULL;
    m->v = v;
    m->cap = cap;
  }
  char *id = strdup(endpoint_id);
  if (!id) return NULL;
  m->v[m->n] = (hookd_hold_seen){.endpoint_id = id, .enabled = enabled, .waiting = waiting,
                                  .oldest = oldest, .probed_at = now_ms};
  return &m->v[m->n++];
}

bool hookd_hold_behind(const hookd_hold_seen *s, int64_t now_ms) {
  if (!s->enabled) return false; /* its items are refused (endpoint_disabled, _deleted) */
  return s->waiting >= HOOKD_REPLAY_HOLD_COUNT ||
         (s->oldest > 0 && now_ms - s->oldest >= HOOKD_REPLAY_HOLD_AFTER_MS);
}

void hookd_hold_moved(hookd_hold_seen *s, int64_t now_ms) {
  s->waiting++;
  if (s->oldest <= 0 || now_ms < s->oldest) s->oldest = now_ms;
}

void hookd_hold_memo_free(hookd_hold_memo *m) {
  for (size_t i = 0; i < m->n; i++) free(m->v[i].endpoint_id);
  free(m->v);
  *m = (hookd_hold_memo){0};
}

int64_t hookd_walk_again(int64_t seq) { return seq > 1 ? seq - 1 : -1; }

int hookd_retry_due_already(char *err, size_t errlen, const char **why) {
  if (!why) return HOOKD_STORE_OK;
  *why = "already_due";
  snprintf(err, errlen, "its next attempt was due already: nothing brought forward");
  return HOOKD_STORE_STATE;
}

int hookd_replay_over(char *err, size_t errlen, int64_t count, int64_t max, const char *what,
                      const char *narrow) {
  if (count > HOOKD_REPLAY_COUNT_UPTO(max))
    snprintf(err, errlen,
             "the filter matches more than %lld %s (--max-replay-items is %lld): narrow it (%s)",
             (long long)HOOKD_REPLAY_COUNT_UPTO(max), what, (long long)max, narrow);
  else
    snprintf(err, errlen,
             "the filter matches %lld %s, more than --max-replay-items (%lld): narrow it (%s)",
             (long long)count, what, (long long)max, narrow);
  return HOOKD_STORE_LIMIT;
}

int hookd_take_within(const int64_t *cost, int n, int64_t budget) {
  int64_t sum = 0;
  int k = 0;
  while (k < n && (k == 0 || sum + cost[k] <= budget)) sum += cost[k++];
  return k;
}

int64_t hookd_retention_weight(int64_t bytes, int64_t deliveries, int64_t attempts) {
  return bytes + deliveries * HOOKD_DELIVERY_WEIGHT + attempts * HOOKD_ATTEMPT_WEIGHT;
}

const char *hookd_inbox_status_of(int64_t unknown, int64_t dead, int64_t retrying,
                                  int64_t pending, int64_t delivered, const char **deciding) {
  /* a forward still retried or waiting comes before a dead one: dead_lettered is final, and a
   * record read so while another forward goes on was answered and listed as settled */
  static const struct {
    const char *status, *deciding;
  } by[] = {{"unknown", "unknown"},
            {"retryable_failed", "retrying"},
            /* (its waiting forwards' error: none when there is none, as for a record with no
             * forward left waiting) */
            {"received", "pending"},
            {"dead_lettered", "dead"},
            {"completed", NULL}};
  int i = unknown ? 0 : retrying ? 1 : pending ? 2 : dead ? 3 : delivered ? 4 : 2;
  *deciding = by[i].deciding;
  return by[i].status;
}

int hookd_replay_state_check(hookd_dstate state, char *err, size_t errlen, const char **why) {
  hookd_dstate to;
  if (hookd_dstate_next(state, HOOKD_DT_REPLAY, &to) != 0) {
    snprintf(err, errlen, "a %s delivery cannot be replayed%s", hookd_dstate_name(state),
             hookd_dstate_active(state) ? ": it is already scheduled" : "");
    *why = "state_changed";
    return HOOKD_STORE_STATE;
  }
  /* the table's unknown → pending is the resolve's "retry": the request may have reached the
   * destination, and only an operator's word sends it again */
  if (state == HOOKD_DS_UNKNOWN) {
    snprintf(err, errlen,
             "a delivery held unknown (its request may have reached the destination) is settled "
             "with POST /v1/inbox/{id}/resolve, not replayed");
    *why = "state_changed";
    return HOOKD_STORE_STATE;
  }
  return 0;
}

void hookd_replay_memo_fill(hookd_replay_memo *m, hookd_store_conn *c, const char *endpoint_id,
                            hookd_endpoint_get_fn get) {
  if (m->endpoint_id[0] && !strcmp(m->endpoint_id, endpoint_id)) return;
  hookd_endpoint ep;
  m->rc = get(c, endpoint_id, &ep);
  m->enabled = m->ordered = m->block = false;
  m->idempotent = true;
  if (m->rc == 0) {
    m->enabled = ep.enabled;
    m->idempotent = !ep.source_id || ep.idempotent;
    m->ordered = ep.ordered;
    m->block = ep.lane_policy && !strcmp(ep.lane_policy, "block");
    hookd_endpoint_free(&ep);
  }
  /* an error is not kept (the next item asks again), nor an id too long to compare */
  bool keep = strlen(endpoint_id) < sizeof m->endpoint_id &&
              (m->rc == 0 || m->rc == HOOKD_STORE_NOTFOUND);
  snprintf(m->endpoint_id, sizeof m->endpoint_id, "%s", keep ? endpoint_id : "");
}

int hookd_replay_check(const hookd_replay_facts *f, const hookd_replay_memo *m, int64_t now_ms,
                       char *err, size_t errlen, const char **why) {
  if (m->rc == HOOKD_STORE_NOTFOUND) {
    snprintf(err, errlen, "its endpoint was deleted");
    *why = "endpoint_deleted";
    return HOOKD_STORE_STATE;
  }
  if (m->rc) return m->rc;
  if (!m->enabled) {
    snprintf(err, errlen, "its endpoint is disabled");
    *why = "endpoint_disabled";
    return HOOKD_STORE_STATE;
  }
  /* a forward to a destination that is not idempotent, given up by an operator after an outcome
   * that may have reached it (resolve "dead_lettered"): a job's sweep of a window's dead
   * deliveries leaves it (the handler may have applied it once already); a replay naming it
   * sends it, the operator's word */
  if (m->swept && !m->idempotent && f->dead_reason && !strcmp(f->dead_reason, "operator")) {
    snprintf(err, errlen,
             "an operator gave it up after an outcome that may have reached its destination, "
             "which is not idempotent: replay it by its id");
    *why = "given_up";
    return HOOKD_STORE_STATE;
  }
  /* a delivered forward to such a destination was applied by its handler, which cannot tell a
   * second one (a review: a sweep of delivered deliveries sent each again); a replay naming it
   * by its id sends it */
  if (m->swept && !m->idempotent && f->state == HOOKD_DS_DELIVERED) {
    snprintf(err, errlen,
             "its destination applied it and is not idempotent: replay it by its id");
    *why = "not_idempotent";
    return HOOKD_STORE_STATE;
  }
  /* superseded at publish: a higher version of its lane was given first; it was never sent,
   * and sending it now would take the receiver back */
  if (f->dead_reason && !strcmp(f->dead_reason, "superseded")) {
    snprintf(err, errlen,
             "it was superseded by a higher ordering_version of its lane: never sent, never "
             "replayed");
    *why = "superseded";
    return HOOKD_STORE_STATE;
  }
  /* on an ordered endpoint, a version its lane has moved past is not sent again either */
  if (m->ordered && f->laned && f->versioned && f->version < f->lane_version) {
    snprintf(err, errlen,
             "its lane has moved on to ordering_version %lld (this event has %lld): an ordered "
             "lane never goes back",
             (long long)f->lane_version, (long long)f->version);
    *why = "lane_moved_on";
    return HOOKD_STORE_STATE;
  }
  /* in a block lane, a head made DEAD "expired" before its event expired (its next retry would
   * have come after it) let its successors pass it: replayed it would go after them */
  bool expired_dead = f->state == HOOKD_DS_DEAD && f->dead_reason &&
                      !strcmp(f->dead_reason, "expired");
  if (expired_dead && m->ordered && m->block && f->passed) {
    snprintf(err, errlen,
             "it went DEAD (its event would expire before its next attempt) and its lane went on "
             "past it: an ordered lane never goes back");
    *why = "lane_moved_on";
    return HOOKD_STORE_STATE;
  }
  /* an expired event's delivery would go DEAD "expired" without an attempt: not replayable */
  if (f->expires_at && f->expires_at <= now_ms) {
    snprintf(err, errlen, "its event expired (expires_at passed): it would not be sent");
    *why = "expired";
    return HOOKD_STORE_STATE;
  }
  if (f->purged) { /* never rebuilt from current state (O17) */
    snprintf(err, errlen,
             "its event's payload was deleted (DELETE …/payload) or purged"
             " (--payload-retention-s): nothing left to send");
    *why = "payload_purged";
    return HOOKD_STORE_STATE;
  }
  return 0;
}

void hookd_claimed_free(hookd_claimed *c) {
  hookd_delivery_free(&c->d);
  free(c->body);
  free(c->content_type);
  free(c->meta);
  c->body = c->content_type = c->meta = NULL;
}

void hookd_source_free(hookd_source *s) {
  free(s->id);
  free(s->tenant_id);
  free(s->provider);
  hookd_secret_free(s->secrets);
  free(s->event_types);
  free(s->identity_paths);
  free(s->business_paths);
  free(s->business_operation);
  free(s->version_object_path);
  free(s->version_path);
  free(s->version_header);
  free(s->generic);
  free(s->prior_identity_paths);
  free(s->business_types);
  memset(s, 0, sizeof *s);
}

void hookd_sources_free(hookd_source *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_source_free(&v[i]);
  free(v);
}

void hookd_inbox_free(hookd_inbox *r) {
  free(r->id);
  free(r->source_id);
  free(r->tenant_id);
  free(r->provider);
  free(r->identity_key);
  free(r->identity_kind);
  free(r->provider_event_id);
  free(r->business_key);
  free(r->event_type);
  free(r->payload_hash);
  free(r->status);
  free(r->conflict_of);
  free(r->result_ref);
  free(r->last_error);
  memset(r, 0, sizeof *r);
}

void hookd_inboxes_free(hookd_inbox *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_inbox_free(&v[i]);
  free(v);
}

void hookd_receive_res_free(hookd_receive_res *r) {
  hookd_inbox_free(&r->record);
  for (size_t i = 0; i < r->n_endpoints; i++) free(r->endpoints[i]);
  r->n_endpoints = 0;
}

int hookd_seq_push(int64_t **v, size_t *n, size_t *cap, int64_t seq) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    int64_t *nv = realloc(*v, nc * sizeof *nv);
    if (!nv) return -1;
    *v = nv;
    *cap = nc;
  }
  (*v)[(*n)++] = seq;
  return 0;
}

int hookd_hint_push(hookd_due_hint **v, size_t *n, size_t *cap, const char *ep, int64_t due) {
  if (*n == *cap) {
    size_t nc = *cap ? *cap * 2 : 16;
    hookd_due_hint *nv = realloc(*v, nc * sizeof **v);
    if (!nv) return -1;
    *v = nv;
    *cap = nc;
  }
  (*v)[*n].endpoint_id = strdup(ep);
  if (!(*v)[*n].endpoint_id) return -1;
  (*v)[(*n)++].due_ms = due;
  return 0;
}

int hookd_hint_add(hookd_due_hint **v, size_t *n, size_t *cap, const char *ep, int64_t due) {
  for (size_t i = 0; i < *n; i++) {
    if (strcmp((*v)[i].endpoint_id, ep) == 0) {
      if (due < (*v)[i].due_ms) (*v)[i].due_ms = due;
      return 0;
    }
  }
  return hookd_hint_push(v, n, cap, ep, due);
}

void hookd_due_hints_free(hookd_due_hint *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].endpoint_id);
  free(v);
}

const hookd_api_key *hookd_api_key_find_active(hookd_store_conn *c, const hookd_store_backend *be,
                                               const char *id, hookd_api_key **list, size_t *n,
                                               int *rc) {
  hookd_api_keys_free(*list, *n);
  *list = NULL;
  *n = 0;
  if ((*rc = be->api_key_list(c, 0, list, n)) != 0) return NULL;
  for (size_t i = 0; i < *n; i++)
    if (!strcmp((*list)[i].id, id)) return (*list)[i].revoked_ms ? NULL : &(*list)[i];
  return NULL;
}

int hookd_scope_tenants_exist(hookd_store_conn *c, const hookd_store_backend *be,
                              const char *scope, char *missing, size_t len) {
  const char *cur = scope, *t;
  size_t tl;
  while (hookd_scope_next(&cur, &t, &tl)) {
    char id[HOOKD_SCOPE_MAX + 1];
    snprintf(id, sizeof id, "%.*s", (int)tl, t);
    hookd_tenant got;
    int rc = be->tenant_get(c, id, &got);
    if (rc == HOOKD_STORE_OK) hookd_tenant_free(&got);
    if (rc == HOOKD_STORE_NOTFOUND) snprintf(missing, len, "%s", id);
    if (rc) return rc;
  }
  return 0;
}

void hookd_api_key_free(hookd_api_key *k) {
  free(k->id);
  free(k->role);
  free(k->tenants);
  free(k->name);
  memset(k, 0, sizeof *k);
}

void hookd_audits_free(hookd_audit *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(v[i].actor);
    free(v[i].action);
    free(v[i].target);
    free(v[i].tenant_id);
    free(v[i].reason);
    free(v[i].detail);
  }
  free(v);
}

void hookd_api_keys_free(hookd_api_key *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_api_key_free(&v[i]);
  free(v);
}

void hookd_outcome_run(hookd_outcome *o) {
  if (!o->asked_kept) {
    o->asked_kept = true;
    o->asked_to = o->to;
    o->asked_next_attempt_ms = o->next_attempt_ms;
    o->asked_dead_reason = o->dead_reason;
    o->asked_last_error = o->last_error;
    return;
  }
  o->to = o->asked_to;
  o->next_attempt_ms = o->asked_next_attempt_ms;
  o->dead_reason = o->asked_dead_reason;
  o->last_error = o->asked_last_error;
}

void hookd_claim_mode(hookd_claim_req *r, bool ordered, bool block) {
  r->ordered = ordered;
  r->lane_block = ordered && block;
  if (!ordered) r->replay_first = false; /* (one replay first: an ordered endpoint's turn) */
}

bool hookd_channels_match(const char *endpoint, const char *event) {
  if (!endpoint) return true;
  for (const char *e = event; e && *e;) {
    const char *ee = strchr(e, ',');
    size_t el = ee ? (size_t)(ee - e) : strlen(e);
    for (const char *p = endpoint; *p;) {
      const char *pe = strchr(p, ',');
      size_t pl = pe ? (size_t)(pe - p) : strlen(p);
      if (pl == el && !memcmp(p, e, el)) return true;
      p = pe ? pe + 1 : p + pl;
    }
    e = ee ? ee + 1 : NULL;
  }
  return false;
}

bool hookd_filter_match(const char *filter, const char *type) {
  if (!filter || !*filter) return true;
  size_t tlen = strlen(type);
  const char *p = filter;
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == 1 && p[0] == '*') return true;
    if (len >= 2 && p[len - 1] == '*' && (p[len - 2] == '.' || p[len - 2] == '/')) {
      /* "a.b.*" matches "a.b.c" and deeper, not "a.b" itself; a '/' before the '*' does the
       * same for topics written with '/' (Shopify's "orders/create"; only a source's allowlist
       * has them) */
      if (tlen >= len && memcmp(type, p, len - 1) == 0) return true;
    } else if (len == tlen && memcmp(type, p, len) == 0) {
      return true;
    }
    if (!end) break;
    p = end + 1;
  }
  return false;
}

size_t hookd_type_filter_split(const char *type, const char **exact) {
  size_t n = type ? strlen(type) : 0;
  *exact = NULL;
  if (n >= 2 && (type[n - 2] == '.' || type[n - 2] == '/') && type[n - 1] == '*') return n - 1;
  if (type && strcmp(type, "*") != 0) *exact = type;
  return 0;
}

int hookd_store_url_check(const char *url, char *err, size_t errlen) {
  if (!strncmp(url, "sqlite:", 7) && url[7]) return sqlite_path_ok(url + 7, err, errlen);
  if (hookd_store_is_postgres(url)) return 0;
  /* the scheme only: a database URL may carry a password */
  size_t scheme = strcspn(url, ":/@");
  bool bare = url[scheme] != ':' || !scheme; /* no scheme: a path, perhaps */
  /* key=value, or a URL with its scheme mistyped ("postgresql//u:pw@h", ":pw@h"): either may
   * hold a password */
  if ((strchr(url, '=') && url[scheme] != ':') || (bare && (strchr(url, '@') || strchr(url, ':'))))
    snprintf(err, errlen, "unsupported store (its text is not repeated: it may hold a "
                          "password): a store is a URL (sqlite:PATH or postgresql://…)");
  else if (bare) /* a path (no password) */
    snprintf(err, errlen, "unsupported store \"%.64s\": a store is a URL (sqlite:PATH or "
                          "postgresql://…)", url);
  else
    snprintf(err, errlen, "unsupported store \"%.*s:…\" (expected sqlite:PATH or "
                          "postgresql://…)",
             (int)(scheme > 32 ? 32 : scheme), url);
  return -1;
}

bool hookd_store_is_postgres(const char *url) {
  return !strncmp(url, "postgresql://", 13) || !strncmp(url, "postgres://", 11);
}

void hookd_store_url_shown(const char *url, char *out, size_t cap) {
  if (!hookd_store_is_postgres(url)) {
    snprintf(out, cap, "%s", url);
    return;
  }
  /* who and where, never the password (nor options that might hold one) */
  const char *user = "", *host = "", *port = "", *db = "";
  char *why = NULL;
  PQconninfoOption *opts = PQconninfoParse(url, &why);
  PQfreemem(why);
  for (PQconninfoOption *o = opts; o && o->keyword; o++) {
    if (!o->val) continue;
    if (!strcmp(o->keyword, "user")) user = o->val;
    else if (!strcmp(o->keyword, "host")) host = o->val;
    else if (!strcmp(o->keyword, "port")) port = o->val;
    else if (!strcmp(o->keyword, "dbname")) db = o->val;
  }
  snprintf(out, cap, "postgresql://%s%s%s%s%s/%s", user, *user ? "@" : "", host, *port ? ":" : "",
           port, db);
  PQconninfoFree(opts);
}

int hookd_store_open(const hookd_store_config *cfg, hookd_store **out, char *err, size_t errlen) {
  int ret = HOOKD_STORE_ERR;
  hookd_store *s = calloc(1, sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return HOOKD_STORE_ERR;
  }
  if (strncmp(cfg->url, "sqlite:", 7) == 0 && cfg->url[7]) {
    if (sqlite_path_ok(cfg->url + 7, err, errlen) != 0) goto fail;
    s->be = &hookd_sqlite_backend;
    s->shared_free = hookd_sqlite_shared_free;
    s->shared_stop = hookd_sqlite_shared_stop;
    s->shared_health = hookd_sqlite_shared_health;
    if (hookd_sqlite_shared_open(cfg->url + 7, &s->shared, err, errlen) != 0) goto fail;
  } else if (hookd_store_is_postgres(cfg->url)) {
    s->be = &hookd_pg_backend;
    s->shared_free = hookd_pg_shared_free;
    if (hookd_pg_shared_open(cfg->url, cfg->node_id, &s->shared, err, errlen) != 0) goto fail;
    if (cfg->wait_s > 0 && hookd_pg_wait_ready(s->shared, cfg->wait_s, cfg->stop_requested,
                                               cfg->waiting) == HOOKD_STORE_STOPPED) {
      snprintf(err, errlen, "stopped while waiting for the PostgreSQL store to accept connections");
      ret = HOOKD_STORE_STOPPED;
      goto fail;
    }
  } else {
    hookd_store_url_check(cfg->url, err, errlen); /* (its message) */
    goto fail;
  }

  hookd_store_conn *wc = NULL, *rc = NULL, *sc = NULL;
  int orc = s->be->open(s->shared, 1, &wc, err, errlen); /* (PostgreSQL: waits for the node's
                                                         * lock as for the server) */
  if (orc != 0) {
    if (orc == HOOKD_STORE_STOPPED) ret = orc;
    goto fail;
  }
  /* the master key that sealed the stored secrets, against the one the start will use: refused
   * here, before the migrations (refused after them, by the keyring's load, a start given the
   * wrong key file during an upgrade left a store the previous hookd no longer opens: a
   * review) */
  char sealed_by[17];
  int frc = cfg->expect_key_id && s->be->first_sealed ? s->be->first_sealed(wc, sealed_by) : 0;
  if (frc < 0 || (frc == 1 && strcmp(sealed_by, cfg->expect_key_id) != 0)) {
    if (frc < 0)
      snprintf(err, errlen, "%s", s->be->errmsg(wc));
    else if (!cfg->expect_key_id[0]) /* (before, found after the migrations: no way back) */
      snprintf(err, errlen,
               "the store's secrets were sealed with master key %s, and no master key can be "
               "read: %s; refusing to start (the store was not migrated)",
               sealed_by, cfg->no_key_why ? cfg->no_key_why : "none is configured");
    else
      snprintf(err, errlen,
               "the store's secrets were sealed with master key %s but the configured key is %s: "
               "refusing to start (the store was not migrated)",
               sealed_by, cfg->expect_key_id);
    s->be->close(wc);
    goto fail;
  }
  int64_t m0 = hookd_mono_ms();
  int mrc = s->be->migrate(wc, !cfg->no_migrate, cfg->stop_requested, cfg->migrating,
                           &s->schema_from,
                           &s->schema_to);
  s->migrate_ms = hookd_mono_ms() - m0;
  if (mrc == 0 && cfg->recover_wal && s->be->recover) mrc = s->be->recover(wc);
  if (mrc == 0 && s->be->durability_check)
    mrc = s->be->durability_check(wc, s->not_durable, sizeof s->not_durable);
  if (mrc != 0) {
    if (mrc == HOOKD_STORE_STOPPED) /* the backend's words: where it stopped, or what it
                                     * waited for (before, a review: "while migrating" for any) */
      snprintf(err, errlen, "%s", s->be->errmsg(wc));
    else
      snprintf(err, errlen, "%s%s", cfg->no_migrate ? "" : "migrate: ", s->be->errmsg(wc));
    s->be->close(wc);
    ret = mrc == HOOKD_STORE_STOPPED ? mrc : HOOKD_STORE_ERR;
    goto fail;
  }
  if (s->be->open(s->shared, 0, &rc, err, errlen) != 0) {
    s->be->close(wc);
    goto fail;
  }
  if (s->be->open(s->shared, 0, &sc, err, errlen) != 0) {
    s->be->close(wc);
    s->be->close(rc);
    goto fail;
  }
  s->writer = hookd_storeq_start(s->be, wc, 1, cfg->max_batch, "store-writer");
  s->reader = hookd_storeq_start(s->be, rc, 0, 1, "store-reader");
  s->scan = hookd_storeq_start(s->be, sc, 0, 1, "store-scan");
  if (!s->writer || !s->reader || !s->scan) {
    snprintf(err, errlen, "cannot start store threads");
    if (s->writer) hookd_storeq_stop(s->writer); else s->be->close(wc);
    if (s->reader) hookd_storeq_stop(s->reader); else s->be->close(rc);
    if (s->scan) hookd_storeq_stop(s->scan); else s->be->close(sc);
    s->writer = s->reader = s->scan = NULL;
    goto fail;
  }
  *out = s;
  return HOOKD_STORE_OK;
fail:
  if (s->shared_free) s->shared_free(s->shared);
  free(s);
  return ret;
}

void hookd_store_interrupt_scans(hookd_store *s) {
  if (s && s->scan) hookd_storeq_interrupt(s->scan);
}

void hookd_store_health_get(hookd_store *s, hookd_store_health *out) {
  memset(out, 0, sizeof *out);
  if (s && s->shared_health) s->shared_health(s->shared, out);
}

int hookd_store_indexes_step(hookd_store *s, char *err, size_t errlen) {
  err[0] = '\0';
  return s && s->be == &hookd_pg_backend ? hookd_pg_indexes_step(s->shared, err, errlen) : 0;
}

static void pg_watch_stop(void *w) { hookd_pg_watch_stop(w); }

int hookd_store_watch(hookd_store *s, void (*changed)(void *arg, int what, int64_t seq),
                      void *arg, char *err,
                      size_t errlen) {
  if (s->be != &hookd_pg_backend) return 1;
  hookd_pg_watch *w;
  if (hookd_pg_watch_start(s->shared, changed, arg, &w, err, errlen) != 0) return -1;
  s->watch = w;
  s->watch_stop = pg_watch_stop;
  return 0;
}

void hookd_store_unwatch(hookd_store *s) {
  if (!s || !s->watch) return;
  s->watch_stop(s->watch);
  s->watch = NULL;
}

void hookd_store_close_checked(hookd_store *s, hookd_store_health *final) {
  if (final) memset(final, 0, sizeof *final);
  if (!s) return;
  hookd_store_unwatch(s);
  hookd_storeq_stop(s->scan);
  hookd_storeq_stop(s->reader);
  hookd_storeq_stop(s->writer);
  if (s->shared_stop) s->shared_stop(s->shared, final != NULL);
  if (final && s->shared_health) s->shared_health(s->shared, final);
  if (s->shared_free) s->shared_free(s->shared);
  free(s);
}

void hookd_store_close(hookd_store *s) { hookd_store_close_checked(s, NULL); }

void hookd_replay_job_free(hookd_replay_job *j) {
  free(j->id);
  free(j->tenant_id);
  free(j->state);
  free(j->filter);
  free(j->actor);
  free(j->reason);
  free(j->held_endpoint);
  memset(j, 0, sizeof *j);
}

void hookd_replay_jobs_free(hookd_replay_job *v, size_t n) {
  for (size_t i = 0; i < n; i++) hookd_replay_job_free(&v[i]);
  free(v);
}

static void counts_free(hookd_replay_count *v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i].key);
  free(v);
}

void hookd_replay_detail_free(hookd_replay_detail *d) {
  counts_free(d->endpoints, d->n_endpoints);
  counts_free(d->skipped, d->n_skipped);
  counts_free(d->states, d->n_states);
  memset(d, 0, sizeof *d);
}

void hookd_replay_snapshot_free(hookd_replay_snapshot *s) {
  free(s->seqs);
  free(s->filter_state);
  free(s->endpoint_id);
  memset(s, 0, sizeof *s);
}

void hookd_replay_step_res_free(hookd_replay_step_res *r) {
  hookd_due_hints_free(r->hints, r->n_hints);
  for (size_t i = 0; i < r->n_completed; i++) free(r->completed[i]);
  free(r->completed);
  memset(r, 0, sizeof *r);
}

int hookd_inbox_conflict_key(const char *identity_key, const char *payload_hash, char out[65]) {
  char text[256];
  int n = snprintf(text, sizeof text, "conflict\n%s\n%s", identity_key ? identity_key : "",
                   payload_hash ? payload_hash : "");
  if (n < 0 || (size_t)n >= sizeof text) return -1;
  return hookd_in_sha256_hex(text, (size_t)n, out);
}

const char *const hookd_sealed_columns[HOOKD_SEALED_COLUMNS][2] = {
    {"endpoints", "secret"}, {"endpoints", "previous_secret"}, {"endpoints", "headers"},
    {"sources", "secrets"}};

void hookd_sealed_column_sql(size_t i, char *sql, size_t cap) {
  snprintf(sql, cap, "SELECT %s FROM %s WHERE %s LIKE 'sealed:%%' LIMIT 1",
           hookd_sealed_columns[i][1], hookd_sealed_columns[i][0], hookd_sealed_columns[i][1]);
}

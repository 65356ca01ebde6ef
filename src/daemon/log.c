/* log.c — JSON-lines logger. Each line is formatted into a thread-local buffer and written
 * with a single write(2), so lines from different threads never interleave. With the writer
 * thread started (hookd_log_async_start, `serve`), a line that stderr — a pipe or a socket whose
 * reader fell behind — cannot take at once waits in a bounded queue that thread writes out, and
 * past the queue lines are dropped and counted: no thread ever waits for the log's reader. */
#include "daemon/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/timefmt.h"
#include "core/utf8.h"

int hookd_log_level = HOOKD_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int hookd_log_parse_level(const char *s) {
  for (int i = 0; i < 4; i++)
    if (strcmp(s, level_names[i]) == 0) return i;
  return -1;
}

size_t hookd_log_escape(const char *s, char *out, size_t cap) {
  size_t o = 0, n = strlen(s);
  if (cap == 0) return 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    char tmp[8];
    const char *rep = NULL;
    size_t replen = 0, adv = 1;
    if (c == '"') rep = "\\\"";
    else if (c == '\\') rep = "\\\\";
    else if (c == '\n') rep = "\\n";
    else if (c == '\r') rep = "\\r";
    else if (c == '\t') rep = "\\t";
    else if (c < 0x20 || c == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\u%04x", c);
      rep = tmp;
    } else if (c >= 0x80) {
      size_t l = hookd_utf8_len(s + i, n - i);
      if (l == 0) {
        rep = "\\ufffd";
      } else {
        rep = s + i;
        replen = l;
        adv = l;
      }
    } else {
      rep = s + i;
      replen = 1;
    }
    if (!replen) replen = strlen(rep);
    if (o + replen >= cap) break;
    memcpy(out + o, rep, replen);
    o += replen;
    i += adv;
  }
  out[o] = '\0';
  return o;
}

/* ---------- the writer thread and its queue ---------- */

#define LOG_QUEUE_BYTES (1u << 20)

static struct {
  _Atomic bool on;  /* the writer thread runs: lines go through log_write's queue path */
  bool direct;      /* a line may go out at once (nb_fd, or a socket): else always queued */
  bool stop;        /* asked to end once the queue is written */
  bool ended;       /* the writer thread is past its last write (then joined at once) */
  int nb_fd;        /* stderr reopened without blocking (a pipe); -1: a socket (send) */
  char *q;          /* ring of queued bytes */
  size_t cap, head, len;
  uint64_t dropped; /* since the last log.dropped line */
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;      /* something to write, or stop */
  pthread_cond_t drained; /* the queue is empty (hookd_log_flush), or the writer ended */
} lq = {.nb_fd = -1,
        .mu = PTHREAD_MUTEX_INITIALIZER,
        .cv = PTHREAD_COND_INITIALIZER,
        .drained = PTHREAD_COND_INITIALIZER};
static _Atomic uint64_t dropped_total;

uint64_t hookd_log_dropped_total(void) { return atomic_load(&dropped_total); }

static void write_all(const char *p, size_t n) {
  while (n) {
    ssize_t w = write(STDERR_FILENO, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) { /* stderr non-blocking already */
      struct pollfd pfd = {.fd = STDERR_FILENO, .events = POLLOUT};
      if (poll(&pfd, 1, -1) >= 0 || errno == EINTR) continue;
    }
    if (w <= 0) return; /* (stderr closed or failing: the line is lost, as before) */
    p += w;
    n -= (size_t)w;
  }
}

/* A write that does not wait: the bytes taken, or -1 (errno EAGAIN when the reader is behind). */
static ssize_t try_write(const char *p, size_t n) {
  if (lq.nb_fd >= 0) return write(lq.nb_fd, p, n);
  return send(STDERR_FILENO, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void enqueue(const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) lq.q[(lq.head + lq.len + i) % lq.cap] = p[i];
  lq.len += n;
}

/* Under lq.mu: a line goes at once while nothing waits (the usual case: the order of lines and
 * the moment they are read are as without the queue), else behind what waits; a line the
 * queue has no room for is dropped whole. */
static void log_write(const char *line, size_t n) {
  if (!atomic_load(&lq.on)) {
    write_all(line, n);
    return;
  }
  pthread_mutex_lock(&lq.mu);
  if (!atomic_load(&lq.on)) { /* stopped while this waited for the lock: the queue is gone */
    pthread_mutex_unlock(&lq.mu);
    write_all(line, n);
    return;
  }
  size_t done = 0;
  if (lq.direct && lq.len == 0 && !lq.dropped) {
    ssize_t w;
    do w = try_write(line, n); while (w < 0 && errno == EINTR);
    done = w > 0 ? (size_t)w : 0;
    /* another failure than a full pipe: lost, as a blocking write's would be */
    if (done == n || (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) done = n;
  }
  if (done < n) {
    if (done == 0 && n > lq.cap - lq.len) { /* (a line begun is always finished) */
      lq.dropped++;
      atomic_fetch_add(&dropped_total, 1);
    } else {
      enqueue(line + done, n - done);
      pthread_cond_signal(&lq.cv);
    }
  }
  pthread_mutex_unlock(&lq.mu);
}

static void *writer_main(void *arg) {
  (void)arg;
  /* whole lines, PIPE_BUF at most a write (a line is 4,096 bytes at most): a pipe takes each
   * write whole, so no other writer of it (hookd's stdout under 2>&1) lands inside a line, and a
   * process ended mid-queue leaves no line cut */
  static char chunk[4096];
  pthread_mutex_lock(&lq.mu);
  for (;;) {
    while (!lq.len && !lq.stop) pthread_cond_wait(&lq.cv, &lq.mu);
    if (!lq.len) break; /* stopping, everything written */
    size_t n = lq.len < sizeof chunk ? lq.len : sizeof chunk;
    for (size_t i = 0; i < n; i++) chunk[i] = lq.q[(lq.head + i) % lq.cap];
    size_t end = n;
    while (end > 0 && chunk[end - 1] != '\n') end--;
    if (end) n = end; /* (none: the rest of one line, taken whole) */
    pthread_mutex_unlock(&lq.mu);
    write_all(chunk, n); /* waits for the reader: only this thread does */
    pthread_mutex_lock(&lq.mu);
    lq.head = (lq.head + n) % lq.cap;
    lq.len -= n;
    if (!lq.len) pthread_cond_broadcast(&lq.drained);
    if (!lq.len && lq.dropped) { /* caught up: said once, behind the lines written */
      uint64_t lost = lq.dropped;
      lq.dropped = 0;
      pthread_mutex_unlock(&lq.mu);
      /* an error: the lines dropped may have been errors, and --log-level error shows it */
      HLOG(HOOKD_LOG_ERROR, "log.dropped", KV_I("lines", (int64_t)lost),
           KV_S("why", "stderr's reader fell behind by more than the log queue"));
      pthread_mutex_lock(&lq.mu);
    }
  }
  lq.ended = true;
  pthread_cond_broadcast(&lq.drained);
  pthread_mutex_unlock(&lq.mu);
  return NULL;
}

void hookd_log_async_start(void) {
  struct stat st;
  if (atomic_load(&lq.on) || fstat(STDERR_FILENO, &st) != 0 ||
      !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return; /* a terminal or a file: written as before */
  /* a pipe: a description of its own (O_NONBLOCK on stderr's would reach every process sharing
   * it). Refused (a pipe of another user's: sudo -u, a container runtime's), every line is
   * queued, the writer thread alone writing — never the thread that logs */
  if (S_ISFIFO(st.st_mode)) lq.nb_fd = open("/proc/self/fd/2", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  lq.direct = S_ISSOCK(st.st_mode) || lq.nb_fd >= 0;
  const char *knob = getenv("HOOKD_LOG_QUEUE_BYTES"); /* (tests: a small queue) */
  long bytes = knob ? strtol(knob, NULL, 10) : 0;
  lq.cap = bytes >= 8192 && bytes <= (1L << 30) ? (size_t)bytes : LOG_QUEUE_BYTES;
  lq.q = malloc(lq.cap);
  lq.head = lq.len = 0;
  lq.stop = lq.ended = false;
  if (!lq.q || pthread_create(&lq.thread, NULL, writer_main, NULL) != 0) {
    free(lq.q);
    lq.q = NULL;
    if (lq.nb_fd >= 0) close(lq.nb_fd);
    lq.nb_fd = -1;
    return;
  }
  atomic_store(&lq.on, true);
}

void hookd_log_flush(int ms) {
  if (!atomic_load(&lq.on)) return;
  /* (on the monotonic clock: one set back an hour ended the wall clock's wait at once) */
  struct timespec until = hookd_mono_deadline(ms);
  pthread_mutex_lock(&lq.mu);
  while (lq.len && pthread_cond_clockwait(&lq.drained, &lq.mu, CLOCK_MONOTONIC, &until) == 0)
    continue;
  pthread_mutex_unlock(&lq.mu);
}

void hookd_log_async_stop(void) {
  if (!atomic_load(&lq.on)) return;
  pthread_mutex_lock(&lq.mu);
  lq.stop = true;
  pthread_cond_signal(&lq.cv);
  pthread_mutex_unlock(&lq.mu);
  /* what waits is written — for 5 s at most: a reader stalled for good must not hold the exit
   * (the thread, left writing, goes with the process; nothing of it is freed under it) */
  struct timespec until = hookd_mono_deadline(5000);
  pthread_mutex_lock(&lq.mu);
  while (!lq.ended && pthread_cond_clockwait(&lq.drained, &lq.mu, CLOCK_MONOTONIC, &until) == 0)
    continue;
  bool ended = lq.ended;
  pthread_mutex_unlock(&lq.mu);
  if (!ended) return;
  pthread_join(lq.thread, NULL); /* (past its last write: at once) */
  pthread_mutex_lock(&lq.mu);
  atomic_store(&lq.on, false);
  pthread_mutex_unlock(&lq.mu);
  free(lq.q);
  lq.q = NULL;
  if (lq.nb_fd >= 0) close(lq.nb_fd);
  lq.nb_fd = -1;
}

void hookd_log_kv(int level, const char *msg, const hookd_kv *kv, size_t n) {
  static _Thread_local char line[4096];
  char ts[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(hookd_now_ms(), ts);
  size_t o = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
                              level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
  const size_t room = sizeof line - 3; /* keep space for "}\n" */
  o += hookd_log_escape(msg, line + o, room - o - 1);
  line[o++] = '"';
  /* A member that does not fit is left out whole (the line stays valid JSON): the line is cut
   * back to where the member began. */
  for (size_t i = 0; i < n && o < room; i++) {
    if (kv[i].type == 1 && !kv[i].s) continue;
    size_t mark = o;
    int w = snprintf(line + o, room - o, ",\"%s\":", kv[i].k);
    if (w < 0 || (size_t)w >= room - o) {
      o = mark;
      break;
    }
    o += (size_t)w;
    if (kv[i].type == 2) {
      w = snprintf(line + o, room - o, "%lld", (long long)kv[i].i);
      if (w < 0 || (size_t)w >= room - o) {
        o = mark;
        break;
      }
      o += (size_t)w;
    } else {
      if (o + 2 >= room) {
        o = mark;
        break;
      }
      line[o++] = '"';
      o += hookd_log_escape(kv[i].s, line + o, room - o - 1);
      line[o++] = '"';
    }
  }
  line[o++] = '}';
  line[o++] = '\n';
  log_write(line, o);
}

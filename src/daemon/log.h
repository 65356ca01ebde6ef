/* log.h — structured logs: one JSON object per line on stderr.
 *
 *   HLOG(HOOKD_LOG_WARN, "delivery.dead", KV_S("delivery_id", id), KV_I("attempt", n));
 *
 * Every value is escaped (untrusted bytes included: invalid UTF-8 becomes U+FFFD, controls are
 * \u-escaped), so a log line is always one valid JSON line. Callers pass ids and categories,
 * never payloads, secrets or signatures. */
#ifndef HOOKD_DAEMON_LOG_H
#define HOOKD_DAEMON_LOG_H

#include <stddef.h>
#include <stdint.h>

enum { HOOKD_LOG_DEBUG = 0, HOOKD_LOG_INFO, HOOKD_LOG_WARN, HOOKD_LOG_ERROR };

typedef struct hookd_kv {
  const char *k;
  int type; /* 1 string, 2 integer */
  const char *s;
  int64_t i;
} hookd_kv;

#define KV_S(key, val) ((hookd_kv){(key), 1, (val), 0})
#define KV_I(key, val) ((hookd_kv){(key), 2, NULL, (int64_t)(val)})

extern int hookd_log_level;
int hookd_log_parse_level(const char *s); /* -1 when unknown */

void hookd_log_kv(int level, const char *msg, const hookd_kv *kv, size_t n);

#define HLOG(level, msg, ...)                                                                  \
  do {                                                                                         \
    if ((level) >= hookd_log_level) {                                                          \
      const hookd_kv hlog_kv_[] = {__VA_ARGS__};                                               \
      hookd_log_kv((level), (msg), hlog_kv_, sizeof hlog_kv_ / sizeof hlog_kv_[0]);            \
    }                                                                                          \
  } while (0)

/* The writer thread (serve): when stderr is a pipe or a socket, a line it cannot take at once
 * waits in a bounded queue that thread writes out; past it, lines are dropped and counted. */
void hookd_log_async_start(void);
void hookd_log_async_stop(void); /* writes what waits, then lines go straight out again */
/* Waits (ms at most) until what waits is written: before an _exit, whose reason was just said */
void hookd_log_flush(int ms);
uint64_t hookd_log_dropped_total(void);

/* Appends s (untrusted) as a JSON string body — without quotes — to out[0..cap), always
 * NUL-terminating; returns the bytes written. Exposed for tests. */
size_t hookd_log_escape(const char *s, char *out, size_t cap);

#endif

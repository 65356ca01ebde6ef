/* bench_util.h — the small helpers the C load tools (curl_ceiling.c, openloop.c,
 * hang_receiver.c) share.
 * Header-only. */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#include <stddef.h>
#include <time.h>

/* Monotonic seconds. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A libcurl write or header callback that reads and drops the bytes. */
static inline size_t discard(char *p, size_t size, size_t n, void *arg) {
  (void)p;
  (void)arg;
  return size * n;
}

#endif

/* clock.c — wall and monotonic clocks. */
#include "core/clock.h"

#include <time.h>

static int64_t read_clock(clockid_t id, int64_t div) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * (1000000000 / div) + ts.tv_nsec / div;
}

int64_t hookd_now_ms(void) { return read_clock(CLOCK_REALTIME, 1000000); }
int64_t hookd_now_us(void) { return read_clock(CLOCK_REALTIME, 1000); }
int64_t hookd_mono_ms(void) { return read_clock(CLOCK_MONOTONIC, 1000000); }
int64_t hookd_mono_us(void) { return read_clock(CLOCK_MONOTONIC, 1000); }

int64_t hookd_clock_bounded(int64_t wall_now, int64_t mono_now, int64_t wall_ref,
                            int64_t mono_ref) {
  int64_t bound = wall_ref + (mono_now - mono_ref);
  return wall_now < bound ? wall_now : bound;
}

int64_t hookd_bounded_clock_behind(const hookd_bounded_clock *c, int64_t wall_now,
                                   int64_t mono_now) {
  int64_t behind = c->wall_ref + (mono_now - c->mono_ref) - wall_now;
  return behind > 0 ? behind : 0;
}

void hookd_bounded_clock_note(hookd_bounded_clock *c, int64_t wall_now, int64_t mono_now) {
  int64_t behind = hookd_bounded_clock_behind(c, wall_now, mono_now);
  if (behind >= 1000 && behind > c->behind_max) c->behind_max = behind;
}

int64_t hookd_bounded_clock_read(hookd_bounded_clock *c, int64_t wall_now, int64_t mono_now,
                                 bool *rebased) {
  *rebased = false;
  hookd_bounded_clock_note(c, wall_now, mono_now);
  int64_t now = hookd_clock_bounded(wall_now, mono_now, c->wall_ref, c->mono_ref);
  if (wall_now - now < 1000) { /* within a second of it: not ahead */
    c->ahead_since = 0;
  } else if (!c->ahead_since) {
    c->ahead_since = mono_now;
  } else if (mono_now - c->ahead_since >= c->trust_ms) {
    /* the reference was this far behind: so may be what was stamped until now */
    if (wall_now - now > c->behind_max) c->behind_max = wall_now - now;
    c->wall_ref = wall_now;
    c->mono_ref = mono_now;
    c->ahead_since = 0;
    *rebased = true;
    now = wall_now;
  }
  return now;
}

int hookd_mono_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t ca;
  int rc = pthread_condattr_init(&ca);
  if (rc) return rc;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  rc = pthread_cond_init(cv, &ca);
  pthread_condattr_destroy(&ca);
  return rc;
}

struct timespec hookd_mono_deadline(int64_t ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += (time_t)(ms / 1000);
  t.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* clock.c — wall and monotonic clocks. */
#include "core/clock.h"

#include <time.h>

static int64_t read_clock(clockid_t id, int64_t div) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * (1000000000 / div) + ts.tv_nsec / div;
}

int64_t hookd_now_ms(void) { return read_clock(CLOCK_REALTIME, 1000000); }
int64_t hookd_mono_ms(void) { return read_clock(CLOCK_MONOTONIC, 1000000); }
int64_t hookd_mono_us(void) { return read_clock(CLOCK_MONOTONIC, 1000); }

int64_t hookd_clock_bounded(int64_t wall_now, int64_t mono_now, int64_t wall_ref,
                            int64_t mono_ref) {
  int64_t bound = wall_ref + (mono_now - mono_ref);
  return wall_now < bound ? wall_now : bound;
}

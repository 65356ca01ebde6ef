/* clock.h — the two clocks hookd uses: wall time in ms (stored, sent, compared with other
 * machines) and monotonic ms (latencies and timers inside one process). */
#ifndef HOOKD_CORE_CLOCK_H
#define HOOKD_CORE_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

int64_t hookd_now_ms(void);  /* CLOCK_REALTIME, ms since the Unix epoch */
int64_t hookd_now_us(void);  /* CLOCK_REALTIME, µs since the Unix epoch */
int64_t hookd_mono_ms(void); /* CLOCK_MONOTONIC, ms */
int64_t hookd_mono_us(void); /* CLOCK_MONOTONIC, µs */
/* ms from now on CLOCK_MONOTONIC, as a deadline for pthread_cond_clockwait or a condition
 * variable set to that clock: a step of the wall clock moves it not */
struct timespec hookd_mono_deadline(int64_t ms);
/* Initialises *cv timed on CLOCK_MONOTONIC, for waits until hookd_mono_deadline (0, or an
 * error number as pthread_cond_init's). */
int hookd_mono_cond_init(pthread_cond_t *cv);

/* The wall time now, read no further ahead than the monotonic clock has run since a reference
 * taken at once from both (wall_ref, mono_ref): what a step forward of the wall clock cannot
 * move on (retention's "now": a step must not purge early). A step back is taken as it is. */
int64_t hookd_clock_bounded(int64_t wall_now, int64_t mono_now, int64_t wall_ref,
                            int64_t mono_ref);

/* Retention's clock: hookd_clock_bounded from a reference (the start), except that a reading
 * ahead of the bound that has lasted trust_ms is taken as the right time and becomes the
 * reference (a clock that was behind at the start, set right since). */
typedef struct hookd_bounded_clock {
  int64_t wall_ref, mono_ref;
  int64_t ahead_since; /* monotonic: reading ahead of the bound since then; 0 = not */
  int64_t trust_ms;
  /* The most the wall clock has read behind the bound (a second or more), or the reference was
   * behind when it moved: what was stamped meanwhile looks older by up to this, so retention
   * keeps everything this much longer (a clock days behind, then set right, purged records a
   * second old). */
  int64_t behind_max;
} hookd_bounded_clock;
/* The time to use now; *rebased when the reference moved at this reading. Notes, too. */
int64_t hookd_bounded_clock_read(hookd_bounded_clock *c, int64_t wall_now, int64_t mono_now,
                                 bool *rebased);
/* Notes how far behind the bound the wall clock reads now (behind_max): called often, a step
 * back is seen while it lasts. */
void hookd_bounded_clock_note(hookd_bounded_clock *c, int64_t wall_now, int64_t mono_now);
/* How far behind the bound the wall clock reads now (0 when not): what the time read already
 * holds back of behind_max. */
int64_t hookd_bounded_clock_behind(const hookd_bounded_clock *c, int64_t wall_now,
                                   int64_t mono_now);

#endif

/* clock.h — the two clocks hookd uses: wall time in ms (stored, sent, compared with other
 * machines) and monotonic ms (latencies and timers inside one process). */
#ifndef HOOKD_CORE_CLOCK_H
#define HOOKD_CORE_CLOCK_H

#include <stdint.h>

int64_t hookd_now_ms(void);  /* CLOCK_REALTIME, ms since the Unix epoch */
int64_t hookd_mono_ms(void); /* CLOCK_MONOTONIC, ms */
int64_t hookd_mono_us(void); /* CLOCK_MONOTONIC, µs */

#endif

/* retry_after.h — parse a Retry-After header value (RFC 9110 §10.2.3): delta-seconds or an
 * HTTP-date. Pure: the caller passes the current time. */
#ifndef HOOKD_CORE_RETRY_AFTER_H
#define HOOKD_CORE_RETRY_AFTER_H

#include <stdint.h>

/* On success returns 0 and the delay in ms from now (0 for a date in the past; at most ten
 * years). Returns -1 for garbage, so the caller falls back to its own backoff. */
int hookd_retry_after_parse(const char *value, int64_t now_ms, int64_t *delay_ms);

#endif

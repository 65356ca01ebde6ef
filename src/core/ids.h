/* ids.h — public identifiers: "<prefix>_" + 26 characters of Crockford base32 over 48 bits of
 * millisecond time and 80 random bits (ULID layout), so ids sort by creation time, reveal no
 * counts, and never collide in practice. Also random secrets and tokens. */
#ifndef HOOKD_CORE_IDS_H
#define HOOKD_CORE_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HOOKD_ID_MAX 48 /* buffer size that fits any generated id with its prefix */
/* Sorts after every id (ids are ASCII letters, digits and "_-.:"): "before it" is every id, the
 * bound of a list's first page ("id < ?", an index range, not "? = '' OR id < ?", a scan). */
#define HOOKD_ID_AFTER_ALL "~"

/* Writes "<prefix>_<26 chars>" into out (HOOKD_ID_MAX bytes). prefix is at most 8 chars. The
 * time is now_ms, or, when that is behind (the wall clock stepped back), the last stamp carried
 * on by the monotonic clock: ids of one process do not go back in time. The random part is
 * fresh. Returns 0, or -1 if the CSPRNG failed. */
int hookd_id_new(const char *prefix, int64_t now_ms, char out[HOOKD_ID_MAX]);

/* The least id of this prefix stamped at ms (its random part all zeros): every id made at ms or
 * later sorts at or after it, every one made before, before it — a time bound on an index of
 * ids (clamped to 0..2^48-1 ms). */
void hookd_id_floor(const char *prefix, int64_t ms, char out[HOOKD_ID_MAX]);

/* Fills out with n bytes from the CSPRNG. Returns 0 or -1. */
int hookd_random_bytes(void *out, size_t n);

/* A uniformly random 64-bit value from the CSPRNG (aborts if the CSPRNG fails: used where a
 * value is mandatory, like jitter). */
uint64_t hookd_random_u64(void);

/* True when s is a plausible caller-supplied identifier: 1..max bytes of [A-Za-z0-9_.:-], not
 * "." nor ".." (a path segment every HTTP client rewrites). */
int hookd_id_valid(const char *s, size_t max);

/* True when s has the form hookd_id_new gives ids of this prefix ("dlv" → "dlv_" and 26
 * characters of its base32). */
bool hookd_id_generated(const char *s, const char *prefix);

/* True when s has the form of an id hookd generates for events ("evt_" or "in_" and 26
 * characters of its base32): reserved, so that the ids hookd chose stay unique everywhere (a
 * producer taking one of another tenant's would give receivers two events under one
 * webhook-id). */
bool hookd_id_reserved(const char *s);

/* An attempt's id: its delivery's id and its number, "dlv_….3" — attempts are their delivery's
 * numbered rows; the API and the logs show the same id. Writes out (HOOKD_ATTEMPT_ID_MAX bytes)
 * and returns it, or NULL for number 0 (no attempt). */
#define HOOKD_ATTEMPT_ID_MAX (HOOKD_ID_MAX + 16)
const char *hookd_attempt_id(const char *delivery_id, int number, char *out);

#endif

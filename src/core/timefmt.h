/* timefmt.h — time text formats hookd reads and writes: RFC 3339 (API, envelopes) and
 * HTTP-date (Retry-After). Pure, locale- and timezone-independent. */
#ifndef HOOKD_CORE_TIMEFMT_H
#define HOOKD_CORE_TIMEFMT_H

#include <stdint.h>

#define HOOKD_RFC3339_MAX 32

/* "2024-01-02T03:04:05.678Z". */
void hookd_fmt_rfc3339_ms(int64_t ms, char out[HOOKD_RFC3339_MAX]);

/* Parses "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)" (T or t or space). Returns 0 or -1. */
int hookd_parse_rfc3339(const char *s, int64_t *ms);
/* The same as a bound of a [since, until) filter over ms times: a fraction finer than a ms
 * rounds up (a time at ms t is at or after "….1375Z" exactly when t >= ….138, and before it
 * exactly when t < ….138), where hookd_parse_rfc3339 cuts it. */
int hookd_parse_rfc3339_bound(const char *s, int64_t *ms);
/* The last millisecond RFC 3339 writes (9999-12-31T23:59:59.999Z). */
#define HOOKD_RFC3339_LAST_MS 253402300799999LL

/* Same grammar, exactly: seconds since the epoch and the fraction's digits without trailing
 * zeros ("" when none); -1 also when the fraction has more than HOOKD_RFC3339_FRAC_MAX-1 digits. */
#define HOOKD_RFC3339_FRAC_MAX 20
int hookd_parse_rfc3339_exact(const char *s, int64_t *secs, char frac[HOOKD_RFC3339_FRAC_MAX]);

/* Parses an HTTP-date in any of the three forms RFC 9110 §5.6.7 requires recipients to accept
 * (IMF-fixdate, RFC 850, asctime). Returns 0 and seconds since the epoch, or -1. */
int hookd_parse_http_date(const char *s, int64_t *epoch_s);

/* Days since 1970-01-01 of a proleptic Gregorian date (month 1..12). */
int64_t hookd_days_from_civil(int64_t y, unsigned m, unsigned d);

#endif

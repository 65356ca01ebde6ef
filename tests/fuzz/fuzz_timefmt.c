/* fuzz_timefmt.c — libFuzzer target for the time texts hookd reads (core/timefmt.c): RFC 3339
 * (event occurred_at, versions) and HTTP-date (Retry-After). The input, as a string, is parsed
 * both ways; an accepted RFC 3339 text must give the instant timegm(3) gives for its fields
 * (offset subtracted, a leap second read as :59), its milliseconds the fraction's first three
 * digits, and hookd_fmt_rfc3339_ms of that instant must parse back to it; an accepted HTTP-date
 * must give timegm's instant. The first 8 bytes, as seconds in years 1..9999, are also written in
 * RFC 3339 and in the three HTTP-date forms, each of which must parse back to the same second. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_input.h"
#include "core/timefmt.h"

#define MAX_LEN 256

static const char *const wday_s[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const wday_l[] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                     "Thursday", "Friday", "Saturday"};
static const char *const mon_s[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                    "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

static int num(const char *s, int n) {
  int v = 0;
  for (int i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
  return v;
}

static int64_t gm(int y, int mo, int d, int h, int mi, int se) {
  struct tm tm = {.tm_year = y - 1900, .tm_mon = mo - 1, .tm_mday = d,
                  .tm_hour = h, .tm_min = mi, .tm_sec = se == 60 ? 59 : se};
  return (int64_t)timegm(&tm);
}

/* An accepted RFC 3339 text: "YYYY-MM-DDTHH:MM:SS[.f+](Z|±HH:MM)", fields at fixed places. */
static void rfc3339_reference(const char *s) {
  int64_t secs, ms;
  char frac[HOOKD_RFC3339_FRAC_MAX];
  int rc = hookd_parse_rfc3339_exact(s, &secs, frac);
  check((hookd_parse_rfc3339(s, &ms) == 0) == (rc == 0));
  if (rc != 0) return;
  check(memchr(frac, '\0', sizeof frac) != NULL);
  size_t fl = strlen(frac);
  check(fl == 0 || frac[fl - 1] != '0');
  const char *tz = s + 19;
  if (*tz == '.') {
    tz++;
    while (*tz >= '0' && *tz <= '9') tz++;
  }
  int64_t off = 0;
  if (*tz == '+' || *tz == '-') off = (*tz == '-' ? -1 : 1) * (num(tz + 1, 2) * 3600 + num(tz + 4, 2) * 60);
  int64_t want = gm(num(s, 4), num(s + 5, 2), num(s + 8, 2), num(s + 11, 2), num(s + 14, 2),
                    num(s + 17, 2)) - off;
  check(secs == want);
  int f3 = 0;
  for (size_t i = 0; i < 3; i++) f3 = f3 * 10 + (i < fl ? frac[i] - '0' : 0);
  check(ms == secs * 1000 + f3);

  /* An accepted instant lies in years 1..9999 whatever its offset ("0001-01-01T00:00:00+00:01"
   * and "9999-12-31T23:59:59-00:01" are refused: they could not be written back), so every one
   * round-trips. */
  static const int64_t lo = -62135596800000LL, hi = 253402300800000LL; /* [0001, 10000) */
  check(ms >= lo && ms < hi);
  char buf[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(ms, buf);
  check(memchr(buf, '\0', sizeof buf) != NULL);
  int64_t again;
  check(hookd_parse_rfc3339(buf, &again) == 0 && again == ms);
}

static void http_date_reference(const char *s) {
  int64_t secs;
  if (hookd_parse_http_date(s, &secs) != 0) return;
  int y, mo = 0, d, t; /* t: where HH:MM:SS starts */
  size_t n = strlen(s);
  const char *comma = strchr(s, ',');
  const char *m;
  if (comma && comma - s == 3) { /* IMF-fixdate */
    d = num(s + 5, 2), m = s + 8, y = num(s + 12, 4), t = 17;
  } else if (comma) { /* RFC 850 */
    const char *q = comma + 2;
    d = num(q, 2), m = q + 3, y = num(q + 7, 2), t = (int)(q + 10 - s);
    y += y < 70 ? 2000 : 1900;
  } else { /* asctime */
    d = s[8] == ' ' ? num(s + 9, 1) : num(s + 8, 2), m = s + 4, y = num(s + n - 4, 4), t = 11;
  }
  for (int i = 0; i < 12; i++)
    if (memcmp(m, mon_s[i], 3) == 0) mo = i + 1;
  check(mo != 0);
  check(secs == gm(y, mo, d, num(s + t, 2), num(s + t + 3, 2), num(s + t + 6, 2)));
}

/* A second in years 1..9999, written every way hookd reads, must read back the same. */
static void write_and_read(int64_t secs) {
  static const int64_t lo = -62135596800LL, hi = 253402300800LL;
  secs = lo + (int64_t)((uint64_t)secs % (uint64_t)(hi - lo));
  time_t tt = (time_t)secs;
  struct tm tm;
  check(gmtime_r(&tt, &tm) != NULL);
  int y = tm.tm_year + 1900;
  char buf[96];
  int64_t back, ms;
  snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, tm.tm_mon + 1, tm.tm_mday,
           tm.tm_hour, tm.tm_min, tm.tm_sec);
  check(hookd_parse_rfc3339(buf, &ms) == 0 && ms == secs * 1000);
  char fmt[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(secs * 1000 + 7, fmt);
  check(strncmp(fmt, buf, 19) == 0 && strcmp(fmt + 19, ".007Z") == 0);
  snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d GMT", wday_s[tm.tm_wday], tm.tm_mday,
           mon_s[tm.tm_mon], y, tm.tm_hour, tm.tm_min, tm.tm_sec);
  check(hookd_parse_http_date(buf, &back) == 0 && back == secs);
  snprintf(buf, sizeof buf, "%s %s %2d %02d:%02d:%02d %04d", wday_s[tm.tm_wday], mon_s[tm.tm_mon],
           tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, y);
  check(hookd_parse_http_date(buf, &back) == 0 && back == secs);
  if (y >= 1970 && y <= 2069) {
    snprintf(buf, sizeof buf, "%s, %02d-%s-%02d %02d:%02d:%02d GMT", wday_l[tm.tm_wday],
             tm.tm_mday, mon_s[tm.tm_mon], y % 100, tm.tm_hour, tm.tm_min, tm.tm_sec);
    check(hookd_parse_http_date(buf, &back) == 0 && back == secs);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_LEN) return 0;
  char *s = malloc(size + 1);
  if (!s) abort();
  if (size) memcpy(s, data, size);
  s[size] = '\0';
  rfc3339_reference(s);
  http_date_reference(s);
  if (size >= 8) {
    int64_t secs;
    memcpy(&secs, data, sizeof secs);
    write_and_read(secs);
  }
  free(s);
  return 0;
}

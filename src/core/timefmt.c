/* timefmt.c — RFC 3339 and HTTP-date, with explicit calendar arithmetic (no TZ, no locale). */
#include "core/timefmt.h"

#include <stdio.h>
#include <string.h>

/* Howard Hinnant's days_from_civil. */
int64_t hookd_days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = (unsigned)(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = (unsigned)(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

void hookd_fmt_rfc3339_ms(int64_t ms, char out[HOOKD_RFC3339_MAX]) {
  int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  int msec = (int)(ms - secs * 1000);
  int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
  int64_t rem = secs - days * 86400;
  int64_t y;
  unsigned m, d;
  civil_from_days(days, &y, &m, &d);
  snprintf(out, HOOKD_RFC3339_MAX, "%04lld-%02u-%02uT%02d:%02d:%02d.%03dZ", (long long)y, m, d,
           (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60), msec);
}

static int digits(const char **p, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    char c = (*p)[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  *p += n;
  *out = v;
  return 0;
}

static int valid_ymdhms(int y, int mo, int d, int h, int mi, int s) {
  static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1]) return 0;
  if (mo == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 0;
  return h <= 23 && mi <= 59 && s <= 60;
}

int hookd_parse_rfc3339_exact(const char *s, int64_t *secs_out,
                              char frac[HOOKD_RFC3339_FRAC_MAX]) {
  const char *p = s;
  int y, mo, d, h, mi, se;
  frac[0] = '\0';
  if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
      digits(&p, 2, &d))
    return -1;
  if (*p != 'T' && *p != 't' && *p != ' ') return -1;
  p++;
  if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi) || *p++ != ':' || digits(&p, 2, &se))
    return -1;
  if (*p == '.') {
    p++;
    size_t n = 0;
    while (*p >= '0' && *p <= '9') {
      if (n + 1 >= HOOKD_RFC3339_FRAC_MAX) return -1;
      frac[n++] = *p++;
    }
    if (n == 0) return -1;
    while (n && frac[n - 1] == '0') n--;
    frac[n] = '\0';
  }
  int offset_min = 0;
  if (*p == 'Z' || *p == 'z') {
    p++;
  } else if (*p == '+' || *p == '-') {
    int sign = *p++ == '-' ? -1 : 1, oh, om;
    if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59) return -1;
    offset_min = sign * (oh * 60 + om);
  } else {
    return -1;
  }
  if (*p != '\0' || !valid_ymdhms(y, mo, d, h, mi, se)) return -1;
  /* a leap second is inserted at 23:59:60 UTC only (RFC 3339 §5.7: at whatever local time that
   * is); it reads as the second before it */
  if (se == 60 && ((h * 60 + mi - offset_min) % 1440 + 1440) % 1440 != 1439) return -1;
  if (se == 60) se = 59;
  int64_t secs = hookd_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 +
                 mi * 60 + se - (int64_t)offset_min * 60;
  /* the instant itself within years 1..9999, as written back in UTC ("0001-01-01T00:00:00+00:01"
   * is in year 0, "9999-12-31T23:59:59-00:01" in 10000: neither could be formatted back) */
  if (secs < -62135596800LL || secs >= 253402300800LL) return -1;
  *secs_out = secs;
  return 0;
}

int hookd_parse_rfc3339(const char *s, int64_t *ms) {
  int64_t secs;
  char frac[HOOKD_RFC3339_FRAC_MAX];
  if (hookd_parse_rfc3339_exact(s, &secs, frac) != 0) return -1;
  size_t fl = strlen(frac);
  int frac_ms = 0;
  for (size_t i = 0; i < 3; i++) frac_ms = frac_ms * 10 + (i < fl ? frac[i] - '0' : 0);
  *ms = secs * 1000 + frac_ms;
  return 0;
}

int hookd_parse_rfc3339_bound(const char *s, int64_t *ms) {
  int64_t secs;
  char frac[HOOKD_RFC3339_FRAC_MAX];
  if (hookd_parse_rfc3339_exact(s, &secs, frac) != 0) return -1;
  size_t fl = strlen(frac); /* (without trailing zeros: past 3 digits, a part of a ms) */
  int frac_ms = 0;
  for (size_t i = 0; i < 3; i++) frac_ms = frac_ms * 10 + (i < fl ? frac[i] - '0' : 0);
  *ms = secs * 1000 + frac_ms + (fl > 3);
  return 0;
}

static int month_index(const char *p) {
  static const char *names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; i++)
    if (strncmp(p, names[i], 3) == 0) return i + 1;
  return -1;
}

static int day_name(const char **p, int long_form) {
  static const char *shortn[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  static const char *longn[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                "Friday", "Saturday", "Sunday"};
  for (int i = 0; i < 7; i++) {
    const char *n = long_form ? longn[i] : shortn[i];
    size_t len = strlen(n);
    if (strncmp(*p, n, len) == 0) {
      *p += len;
      return 0;
    }
  }
  return -1;
}

static int hms(const char **p, int *h, int *mi, int *s) {
  if (digits(p, 2, h) || *(*p)++ != ':' || digits(p, 2, mi) || *(*p)++ != ':' || digits(p, 2, s))
    return -1;
  return 0;
}

int hookd_parse_http_date(const char *s, int64_t *epoch_s) {
  const char *p = s;
  int y, mo, d, h, mi, se;
  const char *comma = strchr(s, ',');
  if (comma && comma - s == 3) {
    /* IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT */
    if (day_name(&p, 0) || *p++ != ',' || *p++ != ' ' || digits(&p, 2, &d) || *p++ != ' ')
      return -1;
    if ((mo = month_index(p)) < 0) return -1;
    p += 3;
    if (*p++ != ' ' || digits(&p, 4, &y) || *p++ != ' ' || hms(&p, &h, &mi, &se)) return -1;
    if (strcmp(p, " GMT") != 0) return -1;
  } else if (comma) {
    /* RFC 850: Sunday, 06-Nov-94 08:49:37 GMT */
    if (day_name(&p, 1) || *p++ != ',' || *p++ != ' ' || digits(&p, 2, &d) || *p++ != '-')
      return -1;
    if ((mo = month_index(p)) < 0) return -1;
    p += 3;
    if (*p++ != '-' || digits(&p, 2, &y) || *p++ != ' ' || hms(&p, &h, &mi, &se)) return -1;
    if (strcmp(p, " GMT") != 0) return -1;
    y += y < 70 ? 2000 : 1900; /* RFC 9110: a two-digit year more than 50 years ahead is past */
  } else {
    /* asctime: Sun Nov  6 08:49:37 1994 */
    if (day_name(&p, 0) || *p++ != ' ') return -1;
    if ((mo = month_index(p)) < 0) return -1;
    p += 3;
    if (*p++ != ' ') return -1;
    if (*p == ' ') {
      p++;
      if (digits(&p, 1, &d)) return -1;
    } else if (digits(&p, 2, &d)) {
      return -1;
    }
    if (*p++ != ' ' || hms(&p, &h, &mi, &se) || *p++ != ' ' || digits(&p, 4, &y) || *p != '\0')
      return -1;
  }
  if (!valid_ymdhms(y, mo, d, h, mi, se)) return -1;
  if (se == 60) se = 59;
  *epoch_s = hookd_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + se;
  return 0;
}

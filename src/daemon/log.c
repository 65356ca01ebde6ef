/* log.c — JSON-lines logger. Each line is formatted into a thread-local buffer and written
 * with a single write(2), so lines from different threads never interleave. */
#include "daemon/log.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/timefmt.h"
#include "core/utf8.h"

int hookd_log_level = HOOKD_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

int hookd_log_parse_level(const char *s) {
  for (int i = 0; i < 4; i++)
    if (strcmp(s, level_names[i]) == 0) return i;
  return -1;
}

size_t hookd_log_escape(const char *s, char *out, size_t cap) {
  size_t o = 0, n = strlen(s);
  if (cap == 0) return 0;
  for (size_t i = 0; i < n;) {
    unsigned char c = (unsigned char)s[i];
    char tmp[8];
    const char *rep = NULL;
    size_t replen = 0, adv = 1;
    if (c == '"') rep = "\\\"";
    else if (c == '\\') rep = "\\\\";
    else if (c == '\n') rep = "\\n";
    else if (c == '\r') rep = "\\r";
    else if (c == '\t') rep = "\\t";
    else if (c < 0x20 || c == 0x7f) {
      snprintf(tmp, sizeof tmp, "\\u%04x", c);
      rep = tmp;
    } else if (c >= 0x80) {
      size_t l = hookd_utf8_len(s + i, n - i);
      if (l == 0) {
        rep = "\\ufffd";
      } else {
        rep = s + i;
        replen = l;
        adv = l;
      }
    } else {
      rep = s + i;
      replen = 1;
    }
    if (!replen) replen = strlen(rep);
    if (o + replen >= cap) break;
    memcpy(out + o, rep, replen);
    o += replen;
    i += adv;
  }
  out[o] = '\0';
  return o;
}

void hookd_log_kv(int level, const char *msg, const hookd_kv *kv, size_t n) {
  static _Thread_local char line[4096];
  char ts[HOOKD_RFC3339_MAX];
  hookd_fmt_rfc3339_ms(hookd_now_ms(), ts);
  size_t o = (size_t)snprintf(line, sizeof line, "{\"ts\":\"%s\",\"level\":\"%s\",\"msg\":\"", ts,
                              level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
  const size_t room = sizeof line - 3; /* keep space for "}\n" */
  o += hookd_log_escape(msg, line + o, room - o - 1);
  line[o++] = '"';
  /* A member that does not fit is left out whole (the line stays valid JSON): the line is cut
   * back to where the member began. */
  for (size_t i = 0; i < n && o < room; i++) {
    if (kv[i].type == 1 && !kv[i].s) continue;
    size_t mark = o;
    int w = snprintf(line + o, room - o, ",\"%s\":", kv[i].k);
    if (w < 0 || (size_t)w >= room - o) {
      o = mark;
      break;
    }
    o += (size_t)w;
    if (kv[i].type == 2) {
      w = snprintf(line + o, room - o, "%lld", (long long)kv[i].i);
      if (w < 0 || (size_t)w >= room - o) {
        o = mark;
        break;
      }
      o += (size_t)w;
    } else {
      if (o + 2 >= room) {
        o = mark;
        break;
      }
      line[o++] = '"';
      o += hookd_log_escape(kv[i].s, line + o, room - o - 1);
      line[o++] = '"';
    }
  }
  line[o++] = '}';
  line[o++] = '\n';
  ssize_t wr = write(STDERR_FILENO, line, o);
  (void)wr;
}

/* envelope.c — the "data" member's bytes within an outbound event's stored envelope
 * (envelope.h). Pure byte work: no parse, so the bytes sent are the stored ones. */
#include "core/envelope.h"

#include <string.h>

bool hookd_envelope_data(const char *env, size_t len, const char **data, size_t *data_len) {
  static const char head[] = "{\"id\":\"", ts[] = ",\"timestamp\":\"", tail[] = "\",\"data\":";
  if (!env || len < sizeof head || memcmp(env, head, sizeof head - 1) || env[len - 1] != '}')
    return false;
  /* the id and type are JSON strings in which a quote is always escaped (\"), and a schema
   * version is bare: the first `,"timestamp":"` is the member's own, and the timestamp (RFC
   * 3339, no quote) ends at the first `","data":` */
  const char *t = memmem(env, len, ts, sizeof ts - 1);
  if (!t) return false;
  t += sizeof ts - 1;
  const char *d = memmem(t, len - (size_t)(t - env), tail, sizeof tail - 1);
  if (!d || memchr(t, '"', (size_t)(d - t))) return false;
  d += sizeof tail - 1;
  if (d >= env + len - 1) return false; /* no value before the closing brace */
  *data = d;
  *data_len = (size_t)(env + len - 1 - d);
  return true;
}

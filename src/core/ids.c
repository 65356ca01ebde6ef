/* ids.c — ULID-layout identifiers and CSPRNG helpers (OpenSSL RAND_bytes). */
#include "core/ids.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"

static const char crockford[] = "0123456789abcdefghjkmnpqrstvwxyz";

/* Small random draws (ids, jitter) come from a per-thread buffer refilled from the CSPRNG in
 * blocks: one RAND_bytes call per few dozen draws instead of one each. */
static _Thread_local unsigned char pool[512];
static _Thread_local size_t pool_left;

int hookd_random_bytes(void *out, size_t n) {
  if (n > sizeof pool / 4) return RAND_bytes(out, (int)n) == 1 ? 0 : -1;
  if (pool_left < n) {
    if (RAND_bytes(pool, (int)sizeof pool) != 1) return -1;
    pool_left = sizeof pool;
  }
  memcpy(out, pool + sizeof pool - pool_left, n);
  memset(pool + sizeof pool - pool_left, 0, n); /* used bytes do not linger */
  pool_left -= n;
  return 0;
}

uint64_t hookd_random_u64(void) {
  uint64_t v;
  if (hookd_random_bytes(&v, sizeof v) != 0) abort();
  return v;
}

/* The time ids are stamped with: the wall clock, but never behind the last stamp carried on by
 * the monotonic clock — after a step back of the wall clock, ids go on from where they were at
 * the speed of real time (and take the wall clock again once it has caught up), so the lists
 * ordered by id stay newest first (docs/architecture.md "Clocks"). The random part is drawn
 * afresh for every id: nothing in an id counts the ids made before it (a counter in ULID's
 * monotonic mode would tell one tenant how many ids others made in between: a review). */
static pthread_mutex_t id_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t id_wall, id_mono; /* the last stamp taken from the wall clock, and when */

/* "<prefix>_" and raw's 128 bits as 26 base32 digits, most significant first. */
static void encode(const char *prefix, const unsigned char raw[16], char out[HOOKD_ID_MAX]) {
  size_t plen = strlen(prefix);
  if (plen > 8) plen = 8;
  memcpy(out, prefix, plen);
  out[plen] = '_';
  char *p = out + plen + 1;
  /* 128 bits -> 26 base32 digits, most significant first (the top digit holds 3 bits). */
  for (int d = 0; d < 26; d++) {
    int bit = 128 - (26 - d) * 5; /* index of the lowest bit of this digit, from the top */
    unsigned v = 0;
    for (int k = 0; k < 5; k++) {
      int b = bit + k;
      v <<= 1;
      if (b >= 0) v |= (raw[b / 8] >> (7 - b % 8)) & 1u;
    }
    p[d] = crockford[v & 31];
  }
  p[26] = '\0';
}

int hookd_id_new(const char *prefix, int64_t now_ms, char out[HOOKD_ID_MAX]) {
  unsigned char raw[16];
  if (hookd_random_bytes(raw + 6, 10) != 0) return -1;
  int64_t mono = hookd_mono_ms();
  pthread_mutex_lock(&id_mu);
  int64_t carried = id_wall ? id_wall + (mono - id_mono) : INT64_MIN;
  if (now_ms >= carried) {
    id_wall = now_ms;
    id_mono = mono;
  }
  uint64_t t = (uint64_t)(now_ms >= carried ? now_ms : carried);
  pthread_mutex_unlock(&id_mu);
  for (int i = 5; i >= 0; i--) {
    raw[i] = (unsigned char)(t & 0xff);
    t >>= 8;
  }
  encode(prefix, raw, out);
  return 0;
}

void hookd_id_floor(const char *prefix, int64_t ms, char out[HOOKD_ID_MAX]) {
  unsigned char raw[16] = {0};
  uint64_t t = ms < 0 ? 0 : ms > 0xFFFFFFFFFFFFLL ? 0xFFFFFFFFFFFFull : (uint64_t)ms;
  for (int i = 5; i >= 0; i--) {
    raw[i] = (unsigned char)(t & 0xff);
    t >>= 8;
  }
  encode(prefix, raw, out);
}

int hookd_id_valid(const char *s, size_t max) {
  size_t n = 0;
  for (; s[n]; n++) {
    char c = s[n];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-' || c == '.' || c == ':';
    if (!ok || n >= max) return 0;
  }
  return n > 0 && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

bool hookd_id_generated(const char *s, const char *prefix) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) != 0 || s[n] != '_') return false;
  const char *t = s + n + 1;
  if (strlen(t) != 26) return false;
  for (; *t; t++)
    if (!strchr(crockford, *t)) return false;
  return true;
}

bool hookd_id_reserved(const char *s) {
  return hookd_id_generated(s, "evt") || hookd_id_generated(s, "in");
}

const char *hookd_attempt_id(const char *delivery_id, int number, char *out) {
  if (number <= 0 || !delivery_id) return NULL;
  snprintf(out, HOOKD_ATTEMPT_ID_MAX, "%s.%d", delivery_id, number);
  return out;
}

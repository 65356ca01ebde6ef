/* strmap.c — open-addressing string map (FNV-1a hash, seeded per process). See strmap.h. */
#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

static char tombstone_key[1];
#define TOMB tombstone_key

/* The keys are often a client's (a payload filter's text, ids a client names): with a fixed hash,
 * keys crafted offline to share a slot's low bits made every lookup walk one long cluster (a
 * review: 1,000 payload filters, the shared writer ~11x slower per event). A random seed per
 * process, and a finalizer that carries every bit of the state into the low ones the table
 * reads, leave nothing to compute in advance. */
static uint64_t seed;

__attribute__((constructor)) static void seed_init(void) {
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
    struct timespec ts; /* (no entropy yet, early at boot: something that varies) */
    clock_gettime(CLOCK_MONOTONIC, &ts);
    seed = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)ts.tv_sec ^ (uintptr_t)&ts;
  }
}

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ULL ^ seed;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  h ^= seed; /* splitmix64's finalizer */
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

void hookd_strmap_init(hookd_strmap *m) { memset(m, 0, sizeof *m); }

void hookd_strmap_free(hookd_strmap *m) {
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].key && m->slots[i].key != TOMB) free(m->slots[i].key);
  free(m->slots);
  memset(m, 0, sizeof *m);
}

static hookd_strmap_slot *find(const hookd_strmap *m, const char *key) {
  if (!m->cap) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
    hookd_strmap_slot *s = &m->slots[i];
    if (!s->key) return NULL;
    if (s->key != TOMB && strcmp(s->key, key) == 0) return s;
  }
}

void *hookd_strmap_get(const hookd_strmap *m, const char *key) {
  hookd_strmap_slot *s = find(m, key);
  return s ? s->val : NULL;
}

static int grow(hookd_strmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16;
  if (m->len * 4 < m->cap) ncap = m->cap; /* mostly tombstones: rehash in place size */
  hookd_strmap_slot *ns = calloc(ncap, sizeof *ns);
  if (!ns) return -1;
  for (size_t i = 0; i < m->cap; i++) {
    hookd_strmap_slot *s = &m->slots[i];
    if (!s->key || s->key == TOMB) continue;
    size_t j = hash(s->key) & (ncap - 1);
    while (ns[j].key) j = (j + 1) & (ncap - 1);
    ns[j] = *s;
  }
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  m->used = m->len;
  return 0;
}

int hookd_strmap_put(hookd_strmap *m, const char *key, void *val) {
  hookd_strmap_slot *s = find(m, key);
  if (s) {
    s->val = val;
    return 0;
  }
  if ((m->used + 1) * 4 >= m->cap * 3 && grow(m) != 0) return -1;
  char *k = strdup(key);
  if (!k) return -1;
  size_t mask = m->cap - 1;
  size_t i = hash(key) & mask;
  while (m->slots[i].key && m->slots[i].key != TOMB) i = (i + 1) & mask;
  if (!m->slots[i].key) m->used++;
  m->slots[i].key = k;
  m->slots[i].val = val;
  m->len++;
  return 0;
}

void *hookd_strmap_del(hookd_strmap *m, const char *key) {
  hookd_strmap_slot *s = find(m, key);
  if (!s) return NULL;
  void *v = s->val;
  free(s->key);
  s->key = TOMB;
  s->val = NULL;
  m->len--;
  return v;
}

size_t hookd_strmap_next(const hookd_strmap *m, size_t pos, const char **key, void **val) {
  for (size_t i = pos; i < m->cap; i++) {
    if (m->slots[i].key && m->slots[i].key != TOMB) {
      *key = m->slots[i].key;
      *val = m->slots[i].val;
      return i + 1;
    }
  }
  return 0;
}

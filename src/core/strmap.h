/* strmap.h — a string-keyed hash map (open addressing, linear probing, power-of-two table).
 * Keys are copied; values are caller pointers. Not thread-safe: one owner. */
#ifndef HOOKD_CORE_STRMAP_H
#define HOOKD_CORE_STRMAP_H

#include <stddef.h>

typedef struct hookd_strmap_slot {
  char *key; /* NULL = empty; tombstones use a shared sentinel */
  void *val;
} hookd_strmap_slot;

typedef struct hookd_strmap {
  hookd_strmap_slot *slots;
  size_t cap;  /* power of two */
  size_t len;  /* live entries */
  size_t used; /* live + tombstones */
} hookd_strmap;

void hookd_strmap_init(hookd_strmap *m);
void hookd_strmap_free(hookd_strmap *m); /* frees keys, not values */
void *hookd_strmap_get(const hookd_strmap *m, const char *key);
/* Inserts or replaces; returns 0 or -1 on allocation failure. */
int hookd_strmap_put(hookd_strmap *m, const char *key, void *val);
/* Removes and returns the value, or NULL. */
void *hookd_strmap_del(hookd_strmap *m, const char *key);
/* Iteration: for (size_t i = 0; (i = hookd_strmap_next(m, i, &k, &v)) != 0;) … */
size_t hookd_strmap_next(const hookd_strmap *m, size_t pos, const char **key, void **val);

#endif

/* cursor.h — opaque list cursors. A list paged by store position (events, inbox, audit: a seq
 * shared by every tenant) hands out the position sealed, so that no cursor reveals a count: two
 * of one tenant's cursors would otherwise tell it how many rows other tenants wrote in between.
 * One AES-128 block (the position and a check naming the list and its scope) under a key derived
 * from the master key, as 32 hex digits: a cursor this key did not make for this list is refused.
 * Pure logic on OpenSSL. */
#ifndef HOOKD_CORE_CURSOR_H
#define HOOKD_CORE_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#define HOOKD_CURSOR_LEN 32 /* hex digits, without the NUL */

typedef struct hookd_cursor_key {
  unsigned char k[16];
} hookd_cursor_key;

/* The cursor key of a master key (SHA-256 over it and a label, cut to 16 bytes). */
int hookd_cursor_key_derive(const unsigned char *master, size_t len, hookd_cursor_key *out);
/* Seals seq (> 0) of the list named by a letter into out; scope (NULL or "": none) names whose
 * list it is — one tenant's events — and a cursor of one scope is refused by another (the check
 * is 7 bytes of a hash of it). Returns 0, or -1 (OpenSSL failed). */
int hookd_cursor_seal(const hookd_cursor_key *k, char list, const char *scope, int64_t seq,
                      char out[HOOKD_CURSOR_LEN + 1]);
/* Opens a cursor: 0 with *seq (> 0), or -1 when s is not one this key sealed for this list and
 * scope. */
int hookd_cursor_open(const hookd_cursor_key *k, char list, const char *scope, const char *s,
                      int64_t *seq);

#endif

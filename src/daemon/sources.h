/* sources.h — the receive path's in-memory view of inbound sources: provider, opened secrets,
 * rules. Built from the store at start, updated by the API as sources change and refreshed
 * periodically (other nodes). Readers take a reference to an immutable snapshot, so a lookup
 * never waits on a store read and a source changed mid-request does not move under it. */
#ifndef HOOKD_DAEMON_SOURCES_H
#define HOOKD_DAEMON_SOURCES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/inbound.h"
#include "core/jsonio.h"
#include "daemon/keyring.h"
#include "store/store.h"

#define HOOKD_SOURCE_MAX_SECRETS 16 /* a source's secrets, at most (POST /v1/sources) */

typedef struct hookd_source_rt {
  _Atomic int refs;
  hookd_source src;            /* as stored (secrets sealed) */
  hookd_provider provider;
  char **secrets;              /* opened */
  int64_t *secret_expires_ms;  /* per secret: accepted before then; 0 = no expiry */
  size_t n_secrets;
  bool has_generic;
  hookd_generic_hmac generic;  /* strings point into generic_json */
  json_t *generic_json;
  _Atomic bool warned_version; /* inbound.version_not_datetime logged (once per form: a source
                                  whose header carries numbers would log it on every event) */
  uint64_t gen;                /* the cache's generation when it was put */
} hookd_source_rt;

typedef struct hookd_source_cache hookd_source_cache;

hookd_source_cache *hookd_source_cache_new(const hookd_keyring *keyring);
void hookd_source_cache_free(hookd_source_cache *s);

/* Replaces or adds one source (deleted ones are removed); builds its runtime form. Returns 0,
 * or -1 when its secrets do not open (it is then left out). */
int hookd_source_cache_put(hookd_source_cache *s, const hookd_source *src);
void hookd_source_cache_remove(hookd_source_cache *s, const char *id);
/* The cache's generation: every put and remove moves it on. Read it before reading the store's
 * list for hookd_source_cache_sync. */
uint64_t hookd_source_cache_generation(hookd_source_cache *s);
/* Takes the whole list (a periodic refresh), read after the cache was at generation `since`:
 * sources missing from it are removed, changed ones rebuilt — except what this node put or
 * removed after `since` (a create, PATCH or DELETE committed after the list's snapshot began,
 * which the list does not show yet: undone, a new source answered 404 for up to 2 s, and a
 * PATCH's revoked secret came back). */
void hookd_source_cache_sync(hookd_source_cache *s, const hookd_source *list, size_t n,
                             uint64_t since);

/* A reference to the source, or NULL. Release it with hookd_source_rt_release. */
hookd_source_rt *hookd_source_cache_get(hookd_source_cache *s, const char *id);
void hookd_source_rt_release(hookd_source_rt *rt);

/* Parses a generic-HMAC settings object (API input) into g, pointing into v. Returns NULL, or
 * what is wrong, naming the field — also a template that leaves the body, or the configured
 * timestamp or id header, out of the signed text. */
const char *hookd_generic_parse(const json_t *v, hookd_generic_hmac *g);

#endif

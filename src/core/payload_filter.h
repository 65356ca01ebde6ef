/* payload_filter.h — an endpoint's payload filter (docs/api.md "Payload filters"): a JSON
 * object matched against an event's payload, with Hookdeck's and Convoy's operators ($eq, $gt,
 * $in, $or, …). Pure logic over jansson values: the API checks a filter once, the store's
 * fan-out matches each event against it — parsed once (a cache keyed by the filter's text) and
 * within a budget of steps, so that no filter and payload hold the writer long. */
#ifndef HOOKD_PAYLOAD_FILTER_H
#define HOOKD_PAYLOAD_FILTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/strmap.h"

#define HOOKD_PFILTER_MAX_BYTES 4096 /* the filter's compact JSON text */
#define HOOKD_PFILTER_MAX_DEPTH 8    /* nested objects and operators */
#define HOOKD_PFILTER_MAX_LIST 256   /* elements of an $in, $nin, $or or $and */
/* Steps (a value compared, an array element visited, 64 bytes of a string read) one match may
 * take: past it, the filter does not take the event (HOOKD_PFILTER_OVER); and all the matches
 * of one event's fan-out together. */
#define HOOKD_PFILTER_BUDGET 10000
#define HOOKD_PFILTER_EVENT_BUDGET 200000
/* What each match may take even once the event's budget is spent: a filter of a few fields still
 * takes the event (a review: one endpoint's costly filter, a portal manager's to write, made
 * the cheap ones after it lose every event). An event's fan-out then takes at most
 * EVENT_BUDGET + FLOOR per filtered endpoint. */
#define HOOKD_PFILTER_FLOOR 200

/* 0 when filter is a filter; else -1, path (the place under `payload_filter`, "" for the filter
 * itself; cut to path_cap) and why (what is wrong) filled in. */
int hookd_pfilter_check(const json_t *filter, char *path, size_t path_cap, char *why,
                        size_t why_cap);

enum { HOOKD_PFILTER_NO = 0, HOOKD_PFILTER_YES = 1, HOOKD_PFILTER_OVER = -1 };

/* Whether payload (NULL: none) matches a checked filter: HOOKD_PFILTER_YES, _NO, or _OVER when
 * it took more than HOOKD_PFILTER_BUDGET steps, or more than *left (when left is given: the
 * steps left to the event's fan-out, which the match's are taken from). The caller takes OVER
 * as no, and says so. */
int hookd_pfilter_match(const json_t *filter, const json_t *payload, long *left);

/* Parsed filters by their text (one owner, e.g. a store connection; at most 4,096: a new one
 * past that takes the place of the next entry round the table, a clock hand, so that a store
 * with more filters than that still finds most of them parsed). */
typedef struct hookd_pfilter_cache {
  hookd_strmap m;
  size_t hand; /* the slot the next eviction looks at first */
} hookd_pfilter_cache;
void hookd_pfilter_cache_init(hookd_pfilter_cache *c);
void hookd_pfilter_cache_free(hookd_pfilter_cache *c);

/* The match over what is stored: the filter's JSON (NULL: none, every payload matches) and an
 * event's envelope ({"id", "type", "timestamp", "data"}: the payload is its "data"). *parsed
 * caches the envelope's parse across the endpoints of one event: NULL at first, json_decref'd
 * by the caller. cache (may be NULL) keeps the filters parsed; left (may be NULL) as above. A
 * filter that does not parse matches nothing. */
int hookd_pfilter_match_envelope(hookd_pfilter_cache *cache, const char *filter,
                                 const char *envelope, size_t len, json_t **parsed, long *left);

/* The same over a payload parsed already (the envelope's "data": a publish's payload, which the
 * API's thread parsed to check it and hands to the writer), so that the writer never parses
 * the envelope for it. payload NULL: there is none (matches no filter naming fields). */
int hookd_pfilter_match_payload(hookd_pfilter_cache *cache, const char *filter,
                                const json_t *payload, long *left);

#endif

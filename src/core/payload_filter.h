/* payload_filter.h — an endpoint's payload filter (docs/api.md "Payload filters"): a JSON
 * object matched against an event's payload, with Hookdeck's and Convoy's operators ($eq, $gt,
 * $in, $or, …). Pure logic over jansson values: the API checks a filter once, the store's
 * fan-out matches each event against it. */
#ifndef HOOKD_PAYLOAD_FILTER_H
#define HOOKD_PAYLOAD_FILTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define HOOKD_PFILTER_MAX_BYTES 4096 /* the filter's compact JSON text */
#define HOOKD_PFILTER_MAX_DEPTH 8    /* nested objects and operators */
#define HOOKD_PFILTER_MAX_LIST 256   /* elements of an $in, $nin, $or or $and */

/* 0 when filter is a filter; else -1 and err names where (the path under `payload_filter`) and
 * what is wrong. */
int hookd_pfilter_check(const json_t *filter, char *err, size_t cap);

/* Whether payload (NULL: none) matches a checked filter. */
bool hookd_pfilter_match(const json_t *filter, const json_t *payload);

/* The same over what is stored: the filter's JSON (NULL: none, every payload matches) and an
 * event's envelope ({"id", "type", "timestamp", "data"}: the payload is its "data"). *parsed
 * caches the envelope's parse across the endpoints of one event: NULL at first, json_decref'd
 * by the caller. A filter that does not parse matches nothing. */
bool hookd_pfilter_match_envelope(const char *filter, const char *envelope, size_t len,
                                  json_t **parsed);

#endif

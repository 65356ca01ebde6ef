/* custom_headers.h — an endpoint's custom request headers (a receiver behind an API gateway that
 * wants `Authorization: Bearer …` or `X-Api-Key`): which names and values are accepted, and the
 * header lines sent. The object is what the API takes, name → string value; it is stored sealed
 * as compact JSON text (its names in the order given). */
#ifndef HOOKD_CORE_CUSTOM_HEADERS_H
#define HOOKD_CORE_CUSTOM_HEADERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define HOOKD_CUSTOM_HEADERS_MAX 20
#define HOOKD_CUSTOM_HEADER_NAME_MAX 64
#define HOOKD_CUSTOM_HEADER_VALUE_MAX 1024

/* Whether v (an object, as parsed) may be an endpoint's headers: at most 20; names 1-64
 * characters of RFC 9110's tchar, unique case-insensitively, none that hookd or HTTP sets itself
 * or that would change what the request means; values strings of 1-1024 bytes of printable
 * ASCII and tabs, no blank at either end. Otherwise false, with a message in err that begins
 * with `<field>.<Name>` naming the header (or `<field>` itself: not an object, too many, a name
 * that is no token), field being where the object was given ("headers",
 * "destinations[0].headers"). */
bool hookd_custom_headers_check(const json_t *v, const char *field, char *err, size_t len);

/* Whether a header name is one hookd or HTTP sets itself (the body's framing and type, the
 * signature, its ids, the connection's) or one that changes how a request is read (a method
 * override, a range, a rewritten URL): an endpoint's headers may not set it, and an inbound
 * forward does not hand it on from the provider's request (daemon/inbound.c). */
bool hookd_custom_header_reserved(const char *name);

/* The header lines of a checked object, "Name: value" each ended by '\n', in its order
 * (malloc'd; "" for an empty object; NULL out of memory). */
char *hookd_custom_headers_lines(const json_t *v);

/* Whether the header line (`Name: value`, ll bytes) names a header of lines ('\n'-ended
 * `Name: value` or `Name:` lines, NULL: none), names compared without case: a provider's header
 * that an endpoint's own replaces (the forward, and `hookd inbox replay`). */
bool hookd_header_line_named(const char *line, size_t ll, const char *lines);

#endif

/* envelope.h — the envelope hookd stores and sends for an outbound event ({"id", "type",
 * "schema_version"?, "timestamp", "data"}, built once at publish: api_events.c), and the bytes
 * of its "data" within it: what an endpoint whose body_format is "payload" is sent (Svix sends a
 * message's payload as the body), byte for byte as the envelope holds it. */
#ifndef HOOKD_ENVELOPE_H
#define HOOKD_ENVELOPE_H
#include <stdbool.h>
#include <stddef.h>

/* Points *data / *data_len at the value of env's "data" member (env as hookd wrote it: its
 * members before "data" are an id and a type of no quote, an optional bare schema version and
 * an RFC 3339 timestamp, "data" last); false, leaving them alone, for bytes not of that form. */
bool hookd_envelope_data(const char *env, size_t len, const char **data, size_t *data_len);

#endif

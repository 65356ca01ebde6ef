/* jsonio.h — JSON at hookd's edges, on jansson:
 *  - parse untrusted bytes with limits: size, nesting depth, NUL bytes, invalid UTF-8, duplicate
 *    keys, integers beyond 64 bits (all refused with a message naming the problem);
 *  - serialise compactly with stable, shortest round-trip numbers (the bytes stored and sent);
 *  - small typed getters for request validation. */
#ifndef HOOKD_CORE_JSONIO_H
#define HOOKD_CORE_JSONIO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

typedef struct hookd_json_limits {
  size_t max_depth; /* arrays/objects nested deeper than this are refused */
} hookd_json_limits;

#define HOOKD_JSON_ERR_MAX 160

/* err's message when a parse failed for want of memory (any of jansson's allocations during it,
 * even one jansson went on past): not the text's fault — the caller answers 503, to be tried
 * again, never a refusal of the text. */
#define HOOKD_JSON_ERR_NOMEM "out of memory"
bool hookd_json_out_of_memory(const char *err);

/* The unit tests' fault: the calling thread's n-th allocation by jansson from now fails (and
 * only that one; 0 none). */
void hookd_json_fail_alloc_in(unsigned n);

/* Parses buf[0..len). On failure returns NULL and writes a message to err. */
json_t *hookd_json_parse(const char *buf, size_t len, const hookd_json_limits *lim,
                         char err[HOOKD_JSON_ERR_MAX]);

/* Same, with extra jansson decoding flags. */
json_t *hookd_json_parse_ex(const char *buf, size_t len, const hookd_json_limits *lim, int flags,
                            char err[HOOKD_JSON_ERR_MAX]);

/* A provider's body, which hookd must take whatever its integers: integers exact (64-bit) —
 * ids and versions beyond 2^53 stay distinct — and, only when one is beyond 64 bits, parsed
 * again with every integer as a double, *lossy set (integers that differ beyond 2^53 then
 * read the same; the caller hashes the raw bytes instead): every number of magnitude 2^53 or
 * more is then null in the tree, so no id, version or object key is read from a rounded value.
 * A number no double holds (about 310 digits) is an error: jansson stops there, and what follows
 * it is never checked. Valid JSON that is not I-JSON (RFC 7493) — a duplicate key (the last
 * stands), a \u0000 or a lone surrogate escape (read as U+FFFD) — is taken too, *lossy set:
 * a provider signed it, and refusing it would lose the event to its retries running out.
 * A UTF-8 byte order mark before the text is ignored, as RFC 8259 allows (the raw bytes keep it).
 * *too_deep (when not NULL) tells a body refused for its depth alone (lim->max_depth) from one
 * refused for what it holds. */
json_t *hookd_json_parse_body(const char *buf, size_t len, const hookd_json_limits *lim,
                              bool *lossy, bool *too_deep, char err[HOOKD_JSON_ERR_MAX]);

/* A body signed field by field (MoMo): strict, but a lone surrogate escape is read as U+FFFD, as
 * hookd_json_parse_body reads one (a merchant's text cut inside an emoji is still its IPN). A
 * \u0000 escape is refused (err names it): no signer writes one, and read as U+FFFD a signed
 * U+FFFD re-spelt as a NUL would verify — bytes the signature never covered. A key sent twice
 * stays refused: which copy the signature covers and which one a handler reads would be a
 * guess. */
json_t *hookd_json_parse_fields(const char *buf, size_t len, const hookd_json_limits *lim,
                                char err[HOOKD_JSON_ERR_MAX]);

/* Appends the compact serialisation of v to out. Object keys keep their order. Returns
 * HOOKD_BUF_* codes. */
int hookd_json_dump(const json_t *v, hookd_buf *out);
/* The same for the API's answers, read by people: a real as its shortest text in ECMAScript's
 * layout ("0.1", "15.9", "100.0", "1e+21"; jansson's json_dumps wrote 0.10000000000000001 and
 * 15.899999999999999: a payload's 0.1 read so in GET …/events/{id}, a review). */
int hookd_json_dump_shown(const json_t *v, hookd_buf *out);
/* hookd_json_dump_shown's text, the caller's to free; NULL out of memory or for v NULL (as
 * json_dumps: a value whose build failed). */
char *hookd_json_text_shown(const json_t *v);

/* Appends a JSON string literal (with quotes) for s[0..n). */
int hookd_json_quote(hookd_buf *out, const char *s, size_t n);

/* Shortest decimal text that reads back as exactly d (JSON-valid, no NaN/Inf), in printf's
 * "%g" layout ("0.1", "1e+300", "2.5e-07", "1e+02"); text with neither a '.' nor an exponent
 * gets ".0" ("3.0") to stay a JSON real. */
void hookd_json_fmt_double(double d, char out[32]);

/* The shortest significant digits that read back as exactly |d| (d finite, non-zero), and
 * among those of that length the closest to |d|: ECMAScript's choice of k and s in
 * Number::toString, which RFC 8785 adopts. Writes the k digits (no trailing zero, no NUL) to
 * digits and returns k (1..17); *exp10 is the power of ten of the first digit, so that
 * |d| ~ d1.d2…dk × 10^exp10. */
int hookd_json_shortest(double d, char digits[17], int *exp10);

/* Getters: return 0 when present and typed correctly, 1 when absent (or null), -1 when the
 * wrong type. */
int hookd_json_get_str(const json_t *obj, const char *key, const char **out);
int hookd_json_get_int(const json_t *obj, const char *key, int64_t *out);
int hookd_json_get_bool(const json_t *obj, const char *key, bool *out);

#endif

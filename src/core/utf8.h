/* utf8.h — well-formed UTF-8 (RFC 3629): the length of one sequence, a scrub of text that
 * must become a JSON string or a log field, and the order of two strings by their UTF-16 code
 * units (JavaScript's sort: JCS's member order, twilio-node's fields). JCS (jcs.c) decodes code
 * points itself. */
#ifndef HOOKD_CORE_UTF8_H
#define HOOKD_CORE_UTF8_H

#include <stddef.h>

/* The length (1-4) of the well-formed sequence at p, reading at most n bytes; 0 when it is
 * malformed, overlong, a surrogate or beyond U+10FFFF. */
size_t hookd_utf8_len(const char *p, size_t n);

/* Replaces, in place, every byte of the NUL-terminated s that does not belong to a well-formed
 * sequence with '?', so that a message quoting input cut mid-character (%.64s) still makes a
 * JSON string. Returns how many. */
size_t hookd_utf8_scrub(char *s);

/* <0, 0 or >0 as a sorts before, as or after b compared by their UTF-16 code units (a prefix
 * first). Byte order is code point order, and the two differ only between U+E000..U+FFFF and
 * U+10000 and above (whose surrogates sort lower). A malformed byte is the unit of its value:
 * a total order on any bytes (transitive: qsort's comparator). */
int hookd_utf16_cmp(const char *a, size_t alen, const char *b, size_t blen);

/* Which of those two ranges s holds characters of: HOOKD_UTF16_HIGH_BMP (U+E000..U+FFFF) and/or
 * HOOKD_UTF16_ASTRAL (U+10000 and above). Unless strings' ranges together are both, the two orders
 * agree on them. */
enum { HOOKD_UTF16_HIGH_BMP = 1, HOOKD_UTF16_ASTRAL = 2 };
unsigned hookd_utf16_ranges(const char *s, size_t n);

#endif

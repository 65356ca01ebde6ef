/* utf8.h — well-formed UTF-8 (RFC 3629): the length of one sequence, and a scrub of text that
 * must become a JSON string or a log field. JCS (jcs.c) decodes code points itself. */
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

#endif

/* shown_text.h — text shown to operators (an audit reason, a name, a description): the
 * characters it may hold. One rule for the API's fields and the CLI's (`hookd keys create
 * --name`), which the same lists show. */
#ifndef HOOKD_CORE_SHOWN_TEXT_H
#define HOOKD_CORE_SHOWN_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The longest name (of a key, a tenant) in bytes. */
#define HOOKD_SHOWN_NAME_MAX 200

/* Whether s (NUL-terminated) is well-formed UTF-8 without control characters — C0 (but a tab
 * and a line feed where `lines`), DEL, C1 (U+0080–U+009F) — nor the line separators and
 * bidirectional controls that reorder or break what a viewer shows (U+061C, U+200E/F,
 * U+2028/9, U+202A–E, U+2066–9); may be empty. *visible (when not NULL): something to read —
 * blanks and invisible characters alone (U+00A0, U+2000–U+200D, U+FEFF, …) are not. */
bool hookd_shown_text_ok(const char *s, bool lines, bool *visible);
/* A name: at most HOOKD_SHOWN_NAME_MAX bytes of shown text on one line. */
bool hookd_shown_name_ok(const char *s);
/* Writes n bytes of untrusted text (a handler's answer, a value written to the store by hand)
 * to a terminal on one line, as text only: line ends and tabs as blanks; other control bytes
 * (ESC, BEL: a terminal's escape sequences, NUL), C1 controls and bytes that are not UTF-8 as
 * \xNN. */
void hookd_shown_print(FILE *to, const char *s, size_t n);

#endif

/* version.h — object versions for late-event detection (docs/inbound.md "Late events"): what
 * a version value is and how two compare, exactly. Pure. */
#ifndef HOOKD_CORE_VERSION_H
#define HOOKD_CORE_VERSION_H

#include <stdbool.h>
#include <stddef.h>

enum { HOOKD_VERSION_TEXT = 0, HOOKD_VERSION_NUMBER = 1 };

/* Normalises a version as received, a string (a JSON string or a header value):
 *  - a decimal literal ("17", "0042", "-3.5", "1e+21"): NUMBER, text unchanged;
 *  - an RFC 3339 date-time ("2024-03-29T18:00:27.877041743-04:00"): NUMBER, as seconds since the
 *    epoch with the fraction's every digit ("1711749627.877041743"), so offsets and precision
 *    compare right;
 *  - anything else ("v2", "nan", "0x10", " 1", a leap second's 23:59:60): TEXT, unchanged, which
 *    is never older than anything (no order of text can be trusted).
 * Returns 0, or -1 when the result does not fit out[cap] (then the value is no version). */
int hookd_version_normalize(const char *in, char *out, size_t cap, int *kind);

/* true when s is a decimal literal: -?digits[.digits][(e|E)[+-]digits], exponent ≤ 9 digits. */
bool hookd_version_is_decimal(const char *s);

/* Compares two decimal literals by value, exactly (any length, no rounding through a double):
 * -1, 0 or 1; 2 when either is not a decimal literal. */
int hookd_version_cmp_decimal(const char *a, const char *b);

/* Whether a version `now` is older than the newest `seen` of the same object: only two numbers
 * compare. Text, versions of different kinds, or numbers that are not decimal literals (rows
 * written before this rule) do not: false, and the event goes through (at-least-once over a
 * silent drop). */
bool hookd_version_older(const char *now, int now_kind, const char *seen, int seen_kind);

#endif

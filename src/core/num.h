/* num.h — strict parsing of whole decimal numbers from untrusted text (flags, environment,
 * config files, query strings): all of it a number, within bounds, or refused; and hex. */
#ifndef HOOKD_CORE_NUM_H
#define HOOKD_CORE_NUM_H

#include <stddef.h>

/* *out = s as a decimal integer in [min, max]; 0, or -1 (nothing written) when s is empty, has
 * anything but an optional sign and digits, overflows, or is out of bounds. */
int hookd_parse_ll(const char *s, long long min, long long max, long long *out);

/* The value of a hexadecimal digit (either case), or -1. */
int hookd_hex_digit(char c);
/* Decodes exactly outlen bytes from 2 * outlen hex digits (either case), digit by digit (no
 * sign, blank or prefix taken): 0, or -1. */
int hookd_hex_decode(const char *s, size_t len, unsigned char *out, size_t outlen);

#endif

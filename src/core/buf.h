/* buf.h — growable byte buffer with a hard maximum (curl dynbuf style).
 *
 * Every buffer that holds untrusted bytes has a maximum; appending past it fails with
 * HOOKD_BUF_TOOBIG and leaves the buffer unchanged, so callers can answer 413 and move on.
 * The buffer always keeps a NUL after its content so it can be used as a C string. */
#ifndef HOOKD_CORE_BUF_H
#define HOOKD_CORE_BUF_H

#include <stdarg.h>
#include <stddef.h>

enum { HOOKD_BUF_OK = 0, HOOKD_BUF_NOMEM = -1, HOOKD_BUF_TOOBIG = -2 };

typedef struct hookd_buf {
  char *data;    /* content followed by a NUL; NULL while empty and never grown */
  size_t len;    /* bytes of content */
  size_t cap;    /* allocated bytes, including room for the NUL */
  size_t max;    /* content may never exceed this many bytes */
} hookd_buf;

void hookd_buf_init(hookd_buf *b, size_t max);
void hookd_buf_free(hookd_buf *b);
void hookd_buf_reset(hookd_buf *b); /* len = 0, memory kept */
int hookd_buf_append(hookd_buf *b, const void *p, size_t n);
/* The capacity b holds once it holds need bytes (its growth: doubling, up to max + 1). */
size_t hookd_buf_cap_for(const hookd_buf *b, size_t need);
int hookd_buf_puts(hookd_buf *b, const char *s);
int hookd_buf_printf(hookd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hookd_buf_vprintf(hookd_buf *b, const char *fmt, va_list ap);
/* Returns a pointer the caller now owns (never NULL on success: "" for empty); the buffer is
 * left empty. */
char *hookd_buf_steal(hookd_buf *b);
const char *hookd_buf_str(const hookd_buf *b); /* "" when empty */

#endif

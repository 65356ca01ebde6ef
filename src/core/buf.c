/* buf.c — growable byte buffer with a hard maximum. See buf.h. */
#include "core/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hookd_buf_init(hookd_buf *b, size_t max) {
  b->data = NULL;
  b->len = 0;
  b->cap = 0;
  b->max = max;
}

void hookd_buf_free(hookd_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

void hookd_buf_reset(hookd_buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

size_t hookd_buf_cap_for(const hookd_buf *b, size_t need) {
  if (need + 1 <= b->cap) return b->cap;
  size_t cap = b->cap ? b->cap : 64;
  while (cap < need + 1) cap *= 2;
  /* never past what the maximum can use (need <= max): a body of max bytes doubled into 2x */
  if (b->max < SIZE_MAX && cap > b->max + 1) cap = b->max + 1;
  return cap;
}

static int grow(hookd_buf *b, size_t need) {
  if (need + 1 <= b->cap) return HOOKD_BUF_OK;
  size_t cap = hookd_buf_cap_for(b, need);
  char *p = realloc(b->data, cap);
  if (!p) return HOOKD_BUF_NOMEM;
  b->data = p;
  b->cap = cap;
  return HOOKD_BUF_OK;
}

int hookd_buf_append(hookd_buf *b, const void *p, size_t n) {
  if (n > b->max || b->len > b->max - n) return HOOKD_BUF_TOOBIG;
  int rc = grow(b, b->len + n);
  if (rc) return rc;
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
  return HOOKD_BUF_OK;
}

int hookd_buf_puts(hookd_buf *b, const char *s) { return hookd_buf_append(b, s, strlen(s)); }

int hookd_buf_vprintf(hookd_buf *b, const char *fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return HOOKD_BUF_NOMEM;
  if ((size_t)n > b->max || b->len > b->max - (size_t)n) return HOOKD_BUF_TOOBIG;
  int rc = grow(b, b->len + (size_t)n);
  if (rc) return rc;
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  b->len += (size_t)n;
  return HOOKD_BUF_OK;
}

int hookd_buf_printf(hookd_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = hookd_buf_vprintf(b, fmt, ap);
  va_end(ap);
  return rc;
}

char *hookd_buf_steal(hookd_buf *b) {
  char *p = b->data;
  if (!p) p = calloc(1, 1);
  b->data = NULL;
  b->len = b->cap = 0;
  return p;
}

const char *hookd_buf_str(const hookd_buf *b) { return b->data ? b->data : ""; }

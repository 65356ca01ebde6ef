/* pg_rows.c — the PostgreSQL backend's helpers over a statement's rows, shared by its files
 * (pg_int.h): every row of a result read into an array of records (the lists), the retention
 * walk (pg_retention.c's walks and the inbox's purge), the row that holds an id an insert
 * found taken (an endpoint's or a source's create), and the array literals that let one statement
 * cover many rows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "store/postgres/pg_int.h"

int pg_read_rows(hookd_store_conn *c, PGresult *r, size_t elem, pg_row_reader read, void **out,
                 size_t *n, const char *what) {
  if (!r) return HOOKD_STORE_ERR; /* the statement failed: c->err says why */
  /* the rows are all read already, so only the array can fail */
  int rows = PQntuples(r);
  char *v = calloc(rows > 0 ? (size_t)rows : 1, elem);
  for (int i = 0; v && i < rows; i++) read(r, i, v + (size_t)i * elem);
  PQclear(r);
  if (!v) return pg_fail(c, what);
  *out = v;
  *n = (size_t)rows;
  return HOOKD_STORE_OK;
}

int pg_retention_walk(hookd_store_conn *c, const char *sql, bool with_before, int64_t before_ms,
                      int64_t now_ms, int limit, int64_t *after_seq, int64_t **ids, int *n) {
  *n = 0;
  if (!(*ids = malloc((size_t)(limit > 0 ? limit : 1) * sizeof **ids)))
    return pg_fail(c, "retention walk: out of memory");
  pg_params p;
  pg_p_init(&p);
  pg_p_i64(&p, limit);
  pg_p_i64(&p, *after_seq);
  if (with_before) pg_p_i64(&p, before_ms);
  pg_p_i64(&p, now_ms);
  PGresult *r = pg_q(c, sql, &p, "retention walk");
  if (!r) {
    free(*ids);
    *ids = NULL;
    return HOOKD_STORE_ERR;
  }
  hookd_walk_batch w;
  hookd_walk_begin(&w, before_ms, *after_seq, *ids);
  for (int i = 0, rows = PQntuples(r); i < rows && i < limit; i++)
    if (!hookd_walk_row(&w, pg_i64(r, i, 0), pg_i64(r, i, 1), pg_i64(r, i, 2) != 0)) break;
  PQclear(r);
  *n = w.n;
  *after_seq = hookd_walk_next(&w, limit);
  return HOOKD_STORE_OK;
}

int pg_insert_failed(hookd_store_conn *c) {
  /* (the tenant was found live before the insert, under the writer lock: unreachable) */
  if (!strcmp(pg_sqlstate(c), "23503")) {
    snprintf(c->err, sizeof c->err, "tenant not found");
    return HOOKD_STORE_NOTFOUND;
  }
  return HOOKD_STORE_ERR;
}

int pg_id_holder(hookd_store_conn *c, const char *sql, const char *id, const char *tenant_id,
                 const char *what, bool *deleted, bool *own) {
  *deleted = *own = false;
  pg_params p;
  pg_p_init(&p);
  pg_p_text(&p, id);
  pg_p_text(&p, tenant_id);
  PGresult *r = pg_q(c, sql, &p, what);
  if (!r) return HOOKD_STORE_ERR;
  if (PQntuples(r) == 1) {
    *deleted = pg_i64(r, 0, 0) != 0;
    *own = pg_i64(r, 0, 1) != 0;
  }
  PQclear(r);
  return HOOKD_STORE_OK;
}

static void arr_put(pg_arr *a, const char *b, size_t n) {
  if (a->oom) return;
  if (a->len + n + 2 > a->cap) { /* room for the closing brace and NUL */
    size_t cap = a->cap ? a->cap : 256;
    while (a->len + n + 2 > cap) cap *= 2;
    char *s = realloc(a->s, cap);
    if (!s) {
      a->oom = true;
      return;
    }
    a->s = s;
    a->cap = cap;
  }
  memcpy(a->s + a->len, b, n);
  a->len += n;
}

void pg_arr_init(pg_arr *a) {
  memset(a, 0, sizeof *a);
  arr_put(a, "{", 1);
}

static void arr_sep(pg_arr *a) {
  if (a->len > 1) arr_put(a, ",", 1);
}

void pg_arr_i64(pg_arr *a, int64_t v) {
  char num[24];
  int n = snprintf(num, sizeof num, "%lld", (long long)v);
  arr_sep(a);
  arr_put(a, num, (size_t)n);
}

void pg_arr_text(pg_arr *a, const char *s) {
  arr_sep(a);
  if (!s) {
    arr_put(a, "NULL", 4);
    return;
  }
  arr_put(a, "\"", 1); /* quoted: "NULL", spaces, braces and commas are then plain text */
  for (const char *q = s; *q; q++) {
    if (*q == '"' || *q == '\\') arr_put(a, "\\", 1);
    arr_put(a, q, 1);
  }
  arr_put(a, "\"", 1);
}

const char *pg_arr_done(pg_arr *a) {
  if (a->oom || !a->s) return NULL;
  a->s[a->len] = '}';
  a->s[a->len + 1] = 0;
  return a->s;
}

void pg_arr_free(pg_arr *a) {
  free(a->s);
  memset(a, 0, sizeof *a);
}

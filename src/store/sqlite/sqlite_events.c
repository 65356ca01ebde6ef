/* sqlite_events.c — a tenant's events as a list (GET /v1/tenants/{t}/events): newest first by
 * seq on the events_tenant index, filtered by type (or prefix), kind and publish time, paged by
 * seq. The bodies stay in the table: a list shows what each event is, one event its payload. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/sqlite/sqlite_int.h"

static void rd_event(sqlite3_stmt *st, void *rec) {
  hookd_event *e = rec;
  memset(e, 0, sizeof *e);
  e->seq = sq_col_i64(st, 0);
  e->id = sq_col_str(st, 1);
  e->tenant_id = sq_col_str(st, 2);
  e->type = sq_col_str(st, 3);
  e->occurred_ms = sq_col_i64(st, 4);
  e->created_ms = sq_col_i64(st, 5);
  e->expires_ms = sq_col_i64(st, 6);
  const char *kind = (const char *)sqlite3_column_text(st, 7);
  e->inbound = kind && !strcmp(kind, "inbound");
  e->purged_ms = sq_col_i64(st, 8);
  sq_read_event_extras(st, 9, e);
}

void sq_read_event_extras(sqlite3_stmt *st, int i, hookd_event *e) {
  e->schema_version = sq_col_str(st, i);
  e->ordering_key = sq_col_str(st, i + 1);
  e->has_ordering_version = sqlite3_column_type(st, i + 2) != SQLITE_NULL;
  e->ordering_version = sq_col_i64(st, i + 2);
  e->channels = sq_col_str(st, i + 3);
  e->test_endpoint = sq_col_str(st, i + 4);
}

static void free_events(void *v, size_t n) { hookd_events_free(v, n); }

int sq_event_list(hookd_store_conn *c, const hookd_event_filter *f, hookd_event **out,
                  size_t *n) {
  sqlite3_stmt *st = sq_stmt(c, SQ_EV_LIST,
                             "SELECT seq, id, tenant_id, type, occurred_at, created_at, expires_at,"
                             " kind, purged_at, schema_version, ordering_key, ordering_version,"
                             " channels, test_endpoint FROM events WHERE tenant_id = ?1"
                             " AND seq < ?2"
                             " AND (?3 IS NULL OR type = ?3)"
                             " AND (?4 IS NULL OR length(type) > length(?4)"
                             " AND substr(type, 1, length(?4)) = ?4)"
                             " AND (?5 IS NULL OR kind = ?5)"
                             " AND created_at >= ?6 AND created_at < ?7"
                             /* one of its channels (comma-separated; a name holds no comma) */
                             " AND (?9 IS NULL OR instr(',' || channels || ',', ',' || ?9 || ',')"
                             " > 0) ORDER BY seq DESC LIMIT ?8");
  if (!st) return HOOKD_STORE_ERR;
  sq_bind_text(st, 1, f->tenant_id);
  sq_bind_i64(st, 2, f->before_seq > 0 ? f->before_seq : INT64_MAX);
  sq_bind_type_filter(st, 3, 4, f->event_type);
  sq_bind_text(st, 5, f->kind == 1 ? "outbound" : f->kind == 2 ? "inbound" : NULL);
  sq_bind_i64(st, 6, f->since_ms > 0 ? f->since_ms : INT64_MIN);
  sq_bind_i64(st, 7, f->until_ms > 0 ? f->until_ms : INT64_MAX);
  sq_bind_i64(st, 8, f->limit);
  sq_bind_text(st, 9, f->channel);
  return sq_read_rows(c, st, sizeof **out, rd_event, free_events, (void **)out, n,
                      "list events");
}

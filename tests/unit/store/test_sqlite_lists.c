/* test_sqlite_lists.c — what a page of the inbox's and the deliveries' lists costs on the SQLite
 * store (docs/api.md "Inbox", "Deliveries"): a tenant, source, provider event id, state or
 * endpoint with a few rows beside another tenant's thousands newer is listed from an index's
 * ranges — its plan scans no table, and the statement's VM steps stay far below a walk of the
 * other tenant's rows — and answers as before: newest first, paged by its cursor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "core/clock.h"
#include "store/sqlite/sqlite_int.h"
#include "store/storeq.h"

#include "store_fixture.h"

/* The other tenant's rows, all newer than the small tenant's: a walk newest first reads them. */
#define BIG 3000
/* A page over the small tenant's rows reads a few per arm; a walk reads BIG rows or more. */
#define MAX_STEPS 2500

static int run_exec(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  (void)be;
  return sq_exec(c, a) == 0 ? 0 : HOOKD_STORE_ERR;
}

/* the small tenant's rows first (older), then the big one's */
static const char seed[] =
    "INSERT INTO tenants(id, created_at) VALUES ('small', 0), ('big', 0);"
    "INSERT INTO inbox(id, source_id, tenant_id, provider, identity_key, identity_kind,"
    " provider_event_id, event_type, payload_hash, status, received_at) VALUES"
    " ('in_s1', 'src_small', 'small', 'stripe', 'k1', 'provider_id', 'evt_s1', 'a.b', 'h',"
    "  'completed', 1000),"
    " ('in_s2', 'src_small', 'small', 'stripe', 'k2', 'provider_id', 'evt_s2', 'a.b', 'h',"
    "  'unknown', 1001),"
    " ('in_s3', 'src_small', 'small', 'stripe', 'k3', 'provider_id', 'evt_s3', 'a.c', 'h',"
    "  'completed', 1002);"
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000)"
    " INSERT INTO inbox(id, source_id, tenant_id, provider, identity_key, identity_kind,"
    " provider_event_id, event_type, payload_hash, status, received_at)"
    " SELECT printf('in_b%05d', i), 'src_big', 'big', 'stripe', 'k' || i, 'provider_id',"
    " 'evt_b' || i, 'a.b', 'h', 'completed', 2000 + i FROM n;"
    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3003)"
    " INSERT INTO events(seq, id, tenant_id, type, body, request_hash, occurred_at, created_at)"
    " SELECT i, 'ev' || i, CASE WHEN i <= 3 THEN 'small' ELSE 'big' END, 'a.b', x'7b7d', x'00',"
    " 0, i FROM n;"
    "INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"
    " policy_id, created_at, updated_at) VALUES"
    " ('dl_a1', 1, 'ep_small', 'small', 'delivered', 0, 1, 1, 1),"
    " ('dl_a2', 2, 'ep_small', 'small', 'dead', 0, 1, 2, 2),"
    " ('dl_a3', 3, 'ep_small', 'small', 'delivered', 0, 1, 3, 3);"
    "WITH RECURSIVE n(i) AS (SELECT 4 UNION ALL SELECT i + 1 FROM n WHERE i < 3003)"
    " INSERT INTO deliveries(id, event_seq, endpoint_id, tenant_id, state, cycle_started_at,"
    " policy_id, created_at, updated_at)"
    " SELECT printf('dl_b%05d', i), i, 'ep_big', 'big', 'delivered', 0, 1, i, i FROM n;";

typedef struct lcase {
  const hookd_inbox_filter *inbox;      /* or */
  const hookd_delivery_filter *dl;
  char ids[4][32];                      /* the page's ids, in order */
  size_t n;
  int64_t steps;                        /* the VM steps of every statement the list ran */
  char plan[4096];                      /* its list statement's query plan, a line a step */
} lcase;

/* Resets every statement's counters, runs the list, then reads what it cost and the plan of
 * the statement it ran (the one statement over inbox / deliveries that stepped). */
static int run_list(hookd_store_conn *c, const hookd_store_backend *be, void *a) {
  lcase *k = a;
  for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s))
    sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 1);
  int rc;
  k->n = 0;
  if (k->inbox) {
    hookd_inbox *v = NULL;
    if ((rc = be->inbox_list(c, k->inbox, &v, &k->n)) != 0) return rc;
    for (size_t i = 0; i < k->n && i < 4; i++)
      snprintf(k->ids[i], sizeof k->ids[i], "%s", v[i].id);
    hookd_inboxes_free(v, k->n);
  } else {
    hookd_delivery *v = NULL;
    if ((rc = be->delivery_list(c, k->dl, &v, &k->n)) != 0) return rc;
    for (size_t i = 0; i < k->n && i < 4; i++)
      snprintf(k->ids[i], sizeof k->ids[i], "%s", v[i].id);
    hookd_deliveries_free(v, k->n);
  }
  k->steps = 0;
  sqlite3_stmt *list = NULL;
  for (sqlite3_stmt *s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s)) {
    int steps = sqlite3_stmt_status(s, SQLITE_STMTSTATUS_VM_STEP, 0);
    k->steps += steps;
    if (steps && !strncmp(sqlite3_sql(s), "SELECT", 6)) list = s;
  }
  if (!list) return HOOKD_STORE_ERR;
  char eqp[16384];
  snprintf(eqp, sizeof eqp, "EXPLAIN QUERY PLAN %s", sqlite3_sql(list));
  sqlite3_stmt *q;
  if (sqlite3_prepare_v2(c->db, eqp, -1, &q, NULL) != SQLITE_OK) return HOOKD_STORE_ERR;
  k->plan[0] = '\0';
  while (sqlite3_step(q) == SQLITE_ROW) {
    size_t len = strlen(k->plan);
    snprintf(k->plan + len, sizeof k->plan - len, "%s\n",
             (const char *)sqlite3_column_text(q, 3));
  }
  sqlite3_finalize(q);
  return HOOKD_STORE_OK;
}

/* No table walked (a SCAN of one of the plan's own subqueries is a read of its few rows), the
 * index named used, and a cost of the page's order. */
static void assert_ranged(const lcase *k, const char *index) {
  if (strstr(k->plan, "SCAN i") || strstr(k->plan, "SCAN d") || !strstr(k->plan, index) ||
      k->steps > MAX_STEPS)
    print_error("plan (%lld VM steps):\n%s", (long long)k->steps, k->plan);
  assert_null(strstr(k->plan, "SCAN i"));
  assert_null(strstr(k->plan, "SCAN d"));
  assert_non_null(strstr(k->plan, index));
  assert_in_range(k->steps, 1, MAX_STEPS);
}

static int on_writer(fx *f, int (*run)(hookd_store_conn *, const hookd_store_backend *, void *),
                     void *arg) {
  return hookd_storeq_run_sync(f->s->writer, run, arg);
}

static void seeded(fx *f) { assert_int_equal(on_writer(f, run_exec, (void *)seed), 0); }

/* Runs k's list: n rows, the first and the last as given (NULL: not checked), from index's
 * ranges (NULL: not checked) */
static void listed(fx *f, lcase *k, size_t n, const char *first, const char *last,
                   const char *index) {
  assert_int_equal(on_writer(f, run_list, k), 0);
  assert_int_equal(k->n, n);
  if (first) assert_string_equal(k->ids[0], first);
  if (last) assert_string_equal(k->ids[n - 1], last);
  if (index) assert_ranged(k, index);
}

static void inbox_lists_read_their_ranges(void **state) {
  fx *f = *state;
  seeded(f);
  int64_t now = hookd_now_ms();
  /* a tenant's records, any status: one arm per status of inbox_tenant_status */
  hookd_inbox_filter by_tenant = {.tenant_id = "small", .now_ms = now, .limit = 2};
  lcase k = {.inbox = &by_tenant};
  listed(f, &k, 2, "in_s3", "in_s2", "inbox_tenant_status");
  /* the next page, from its cursor (the seq of the last one: in_s2 is the 2nd row) */
  by_tenant.before_seq = 2;
  listed(f, &k, 1, "in_s1", NULL, NULL);
  /* a time window with nothing in it reads the tenant's records only */
  hookd_inbox_filter since = {.tenant_id = "small", .since_ms = 5000, .now_ms = now,
                              .limit = 50};
  k = (lcase){.inbox = &since};
  listed(f, &k, 0, NULL, NULL, "inbox_tenant_status");
  /* a source's records, without a tenant (an admin key) and with a status */
  hookd_inbox_filter by_source = {.source_id = "src_small", .now_ms = now, .limit = 50};
  k = (lcase){.inbox = &by_source};
  listed(f, &k, 3, "in_s3", "in_s1", "inbox_source_status");
  by_source.tenant_id = "small";
  by_source.status = "unknown";
  listed(f, &k, 1, "in_s2", NULL, "inbox_source_status");
  /* "processing": the two leasable statuses' arms, the lease filtered */
  by_source.status = "processing";
  listed(f, &k, 0, NULL, NULL, "inbox_source_status");
  /* a provider's event id, with a tenant or without */
  hookd_inbox_filter by_event = {.tenant_id = "small", .event_id = "evt_s2", .now_ms = now,
                                 .limit = 50};
  k = (lcase){.inbox = &by_event};
  listed(f, &k, 1, "in_s2", NULL, "inbox_provider_event");
  by_event.tenant_id = NULL;
  listed(f, &k, 1, "in_s2", NULL, "inbox_provider_event");
}

static void delivery_lists_read_their_ranges(void **state) {
  fx *f = *state;
  seeded(f);
  /* a tenant's deliveries in a state, then in two */
  hookd_delivery_filter by_state = {.tenant_id = "big", .states = 1u << HOOKD_DS_DEAD,
                                    .limit = 50};
  lcase k = {.dl = &by_state};
  listed(f, &k, 0, NULL, NULL, "deliveries_tenant_state");
  by_state.tenant_id = "small";
  by_state.states |= 1u << HOOKD_DS_DELIVERED;
  by_state.limit = 2;
  listed(f, &k, 2, "dl_a3", "dl_a2", "deliveries_tenant_state");
  by_state.after_id = "dl_a2";
  listed(f, &k, 1, "dl_a1", NULL, NULL);
  /* an endpoint's, every state, then one */
  hookd_delivery_filter by_ep = {.tenant_id = "big", .endpoint_id = "ep_small", .limit = 50};
  k = (lcase){.dl = &by_ep};
  listed(f, &k, 0, NULL, NULL, "deliveries_endpoint_state"); /* another tenant's: none */
  by_ep.tenant_id = "small";
  listed(f, &k, 3, "dl_a3", "dl_a1", "deliveries_endpoint_state");
  by_ep.states = 1u << HOOKD_DS_DEAD;
  listed(f, &k, 1, "dl_a2", NULL, "deliveries_endpoint_state");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(inbox_lists_read_their_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(delivery_lists_read_their_ranges, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

/* api.h — shared pieces of the JSON API handlers (api_*.c): the async store-op helper, the
 * record → JSON renderers, request-body parsing, and the handler declarations the router uses.
 *
 * A handler validates its input on the ingress thread, then hands a store op to the writer
 * (mutations) or the reader (queries) and suspends the request; the op's reply callback answers
 * it after the commit, on the executor thread. */
#ifndef HOOKD_DAEMON_API_H
#define HOOKD_DAEMON_API_H

#include <jansson.h>
#include <stdbool.h>

#include "daemon/app.h"
#include "daemon/auth.h"
#include "daemon/server.h"
#include "store/storeq.h"

/* The reason logged when a destination's delete holds deliveries `unknown` (hookd_held_unknown):
 * it is not idempotent and their requests may be out. */
#define HOOKD_HELD_BY_DELETE "destination deleted while a request to it may have been in flight"

typedef struct hookd_api_op hookd_api_op;
struct hookd_api_op {
  hookd_store_op sop;
  hookd_req *req;
  hookd_app *app;
  /* runs on the executor thread inside the transaction */
  int (*run)(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *op);
  /* answers op->req (executor thread, after the commit); rc is run's result */
  void (*reply)(hookd_api_op *op, int rc);
  /* frees what the op owns beyond itself (optional) */
  void (*cleanup)(hookd_api_op *op);
  char err[256]; /* the backend's error text when run failed */
  char actor[64];   /* the API key id of the principal ("" on public routes) */
  bool read_counted; /* one of its key's --max-reads-per-key (given back when it is freed) */
  bool bad_after;    /* hookd_api_after_known refused the page's cursor (answered 400) */
  char reason[256]; /* Hookd-Reason header, for the audit log */
  int chain;        /* set by hookd_api_chain: 1 + HOOKD_API_* (the op runs again there) */
  /* hookd_api_keys_reload: the API keys read again after a change, and what answers then */
  hookd_api_key *keys;
  size_t n_keys;
  uint64_t keys_gen;
  void (*after_keys)(hookd_api_op *op);
  /* hookd_api_reply_json_applied: the answer kept until the dispatcher has applied the change */
  json_t *applied_body;
  int applied_status;
};

/* An op no HTTP request asked for (req NULL; reply must not answer one), of `size` bytes (a
 * struct that starts with hookd_api_op): `actor` names its origin in the audit log. */
void *hookd_api_op_new_internal(size_t size, hookd_app *app,
                                int (*run)(hookd_store_conn *, const hookd_store_backend *,
                                           hookd_api_op *),
                                void (*reply)(hookd_api_op *, int), const char *actor);

/* How a publish without an HTTP request ended (hookd_api_publish_submit). */
typedef struct hookd_publish_outcome {
  int status; /* 202 published (or a duplicate of an event the store has); 4xx refused, as the
                 API would answer it (the same again is refused again); 503 the store failed
                 (try again later) */
  bool duplicate;
  int deliveries;
  char code[32];     /* the API's error code when refused */
  char message[256]; /* and its message */
} hookd_publish_outcome;

/* Publishes `body` (members of POST /v1/tenants/{t}/events only: type, payload, id, …) to
 * `tenant` as that route would, without an HTTP request (the outbox relay, docs/outbox.md).
 * 0: submitted to the writer, and done(arg, outcome) is called on the writer's thread after
 * the commit (or its failure); -1: refused before, *refused filled, done never called. The
 * op reads body's payload (its payload filters' match) until done: the caller keeps body, and
 * touches it no more, until then. */
int hookd_api_publish_submit(hookd_app *app, const char *tenant, json_t *body,
                             void (*done)(void *arg, const hookd_publish_outcome *o), void *arg,
                             hookd_publish_outcome *refused);

/* Allocates an op of `size` bytes (a struct that starts with hookd_api_op) for request r. */
void *hookd_api_op_new(size_t size, hookd_req *r, hookd_app *app,
                       int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                       void (*reply)(hookd_api_op *, int));
/* Suspends the request and submits the op to the writer (write) or reader. */
void hookd_api_submit(hookd_api_op *op, bool write);
/* The same, to the store's scan executor (long read-only scans, store.h). */
void hookd_api_submit_scan(hookd_api_op *op);

/* An event-type filter or pattern: a type as hookd or a provider names it — printable ASCII
 * without ',' (Shopify's "orders/create", GitLab's "Push Hook"), no blank at either end, at
 * most 256 bytes —, "*", or a prefix ending in ".*" or '/' and '*': the only wildcards the
 * matchers know (hookd_filter_match, the store's type filter). */
bool hookd_api_type_pattern_valid(const char *s);
/* A list's ?event_type= (a type pattern; NULL when absent), or a 400 answered (-1). */
int hookd_api_type_query(hookd_req *r, const char **type);
/* A list's ?event_type= (a type pattern) and ?since= / ?until= (RFC 3339; 0 when absent), or a
 * 400 answered naming the bad one (-1). */
int hookd_api_type_time_query(hookd_req *r, const char **type, int64_t *since_ms,
                              int64_t *until_ms);

/* From a reply: instead of being freed, the op runs again with run and reply on another
 * executor, the request still suspended — a long scan, then a write, then a read, say. */
enum { HOOKD_API_READER = 0, HOOKD_API_WRITER = 1, HOOKD_API_SCAN = 2 };
void hookd_api_chain(hookd_api_op *op,
                     int (*run)(hookd_store_conn *, const hookd_store_backend *, hookd_api_op *),
                     void (*reply)(hookd_api_op *, int), int where);

/* From a reply that told the dispatcher of changed endpoints or tenants: the answer (status and
 * v, taken) is sent once the dispatcher has applied them, so that no request starts from this
 * node under the old configuration after it (docs/api.md "Endpoints"). Not with
 * hookd_api_chain. */
void hookd_api_reply_json_applied(hookd_api_op *op, int status, json_t *v);

/* An audit reason (the Hookd-Reason header, a body's "reason"): 1-255 bytes of UTF-8, not
 * blank (nor only invisible characters), no control characters. */
bool hookd_api_reason_valid(const char *s);
/* A destination check that could not judge its URL now (rc HOOKD_DEST_BUSY or
 * HOOKD_DEST_DNS_AGAIN, daemon/destination.h): 503 unavailable with Retry-After, and true;
 * false for any other rc (nothing answered). field: the URL's path in the request's body. */
struct hookd_dest_check;
bool hookd_api_dest_retry(hookd_req *r, const struct hookd_dest_check *c, const char *field);
/* A body's optional "reason" (NULL when absent or no body), or a 422 answered (false). */
bool hookd_api_body_reason(hookd_req *r, const json_t *body, const char **reason);
/* A request whose body is optional and holds at most a "reason": the reason into out ("" when
 * none: the Hookd-Reason header then stands). False once answered (a 4xx naming the problem). */
bool hookd_api_reason_only_body(hookd_req *r, hookd_app *app, char out[256]);
/* The request's Idempotency-Key into *key (NULL without one): 1-255 visible ASCII characters.
 * False once answered (400 invalid_header). */
bool hookd_api_idempotency_key(hookd_req *r, const char **key);
/* A write route's Idempotency-Key and its answer (api_kept.c): prepare in the handler, lookup
 * at the start of the run, store at its end (with the run's writes), reply after the commit. */
#define HOOKD_KEPT_MS (24LL * 3600 * 1000) /* an Idempotency-Key's answer is kept 24 hours */
typedef struct hookd_kept {
  char idem[256]; /* the key, or "" */
  char scope[64]; /* the API key that sent it ("" without keys) */
  char hash[65];  /* the route, the record, the reason and the body (canonical JSON, its
                   * top-level nulls left out: hookd_json_without_nulls), hashed */
  char hash_nulls[65]; /* the same with the nulls, as earlier builds kept it; "" without any */
  char *answer;   /* the answer's JSON: built by the run, kept under the key with its writes */
  int status;
  bool replayed;  /* the answer kept for the key, given again: nothing was done */
  int64_t at_ms;  /* the request's time: the wall clock no further ahead than the monotonic one
                   * ran since the start (a step forward expired kept answers early) */
} hookd_kept;
bool hookd_kept_prepare(hookd_req *r, hookd_app *app, hookd_kept *k, const char *route,
                        const char *id, const char *why, const json_t *body, bool keyed);
int hookd_kept_lookup(hookd_kept *k, hookd_api_op *base, hookd_store_conn *c,
                      const hookd_store_backend *be);
int hookd_kept_store(hookd_kept *k, hookd_store_conn *c, const hookd_store_backend *be,
                     int status, json_t *v);
void hookd_kept_reply(hookd_kept *k, hookd_req *r);
/* The id a create's kept answer ({"id": …}) names; false when none. */
bool hookd_kept_id(const hookd_kept *k, char *out, size_t cap);

/* Appends an audit row for op's actor and reason, inside the op's transaction (call from run).
 * detail may be NULL; it never holds secrets. */
int hookd_api_audit(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                    const char *action, const char *target, const char *tenant_id,
                    const char *detail);

/* Answers with the HTTP status matching a store error, the op's error text as message. */
void hookd_api_store_error(hookd_api_op *op, int rc, const char *what);

/* A store writer that has not moved for this long (a batch running, an op waiting) is stalled:
 * /readyz says so, and new writes are refused (docs/isolation.md "Backpressure"). */
#define HOOKD_STORE_STALL_MS 10000
/* Backpressure: true (after answering 503 with Retry-After) when the store writer has more
 * queued work than --max-store-queue, or is stalled. */
bool hookd_api_store_overloaded(hookd_req *r, hookd_app *app);
/* Its two halves: whether more than --max-store-queue writes wait (how many in depth) or the
 * writer is stalled, and the 503 + Retry-After answer (for a caller that counts it elsewhere). */
bool hookd_api_store_behind(hookd_app *app, uint64_t *depth);
void hookd_api_reply_overloaded(hookd_req *r, hookd_app *app, uint64_t depth);
/* A shared store's node whose clock the other nodes outvote (docs/postgres.md "The clock
 * guard") takes no write it would stamp by its clock: true after answering 503 not_ready with
 * Retry-After (/readyz says the same). */
bool hookd_api_clock_outvoted(hookd_req *r, hookd_app *app);

/* Parses the request body as a JSON object within the configured limits; on failure answers 400
 * (503 unavailable when the parse ran out of memory: to be tried again) and returns NULL. */
json_t *hookd_api_body_object(hookd_req *r, hookd_app *app);
/* A request body as it is compared with a repeat's (an Idempotency-Key's, a publish's id): an
 * optional member sent as null is the member left out (the routes read null as "not given"), so
 * the two hash alike — a client sending `"channels": null` on one try and nothing on the next
 * was answered 409. A null of the member named value (may be NULL) is kept: a value there. A new
 * reference (NULL when out of memory); the members are shared, not copied. *dropped: whether one
 * was left out. */
json_t *hookd_json_without_nulls(json_t *body, const char *value, bool *dropped);

/* The principal the router authenticated (NULL on public routes). */
const hookd_principal *hookd_api_principal(hookd_req *r);
/* 403 forbidden with the message, counted in hookd_auth_failures_total and logged
 * (auth.refused, at most a line a second) — every 403 goes here. */
void hookd_api_forbid(hookd_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 401 unauthorized with WWW-Authenticate: Bearer; counted and logged as hookd_api_forbid is. */
void hookd_api_unauthorized(hookd_req *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Answers 403 and returns false if the principal may not act on tenant_id. */
bool hookd_api_tenant_allowed(hookd_req *r, const char *tenant_id);

/* Renderers. */
json_t *hookd_json_tenant(const hookd_tenant *t);
/* Never includes the secret. timeout_ms is the bound applied: a stored value above
 * --max-timeout-ms (lowered since it was set) shows that maximum, as the dispatcher uses it. */
/* A rate limit as the API shows it: {"per_second": n}, or null for none (0). */
json_t *hookd_json_rate(double per_second);
/* Labels kept as compact JSON (NULL: none) shown as an object ({} when none). */
json_t *hookd_json_metadata(const char *text);
/* A body's metadata (an object of at most 16 short string members; null or {}: *out NULL) as
 * compact JSON (malloc'd); -1 once answered (422 naming metadata). */
int hookd_api_metadata(hookd_req *r, const json_t *v, char **out);
/* A comma-separated list as a JSON array of strings (NULL: null). */
json_t *hookd_json_csv(const char *csv);
/* A body's channel list (an array of 1 to max names, each kept once; null or absent: *out
 * NULL) as a comma-separated string (malloc'd); -1 once answered (422 naming field), -2 out of
 * memory (answered 503 unavailable; r NULL: the caller answers, for neither is the list's
 * fault). */
int hookd_api_channels(hookd_req *r, const json_t *v, const char *field, size_t max,
                       char **out);
json_t *hookd_json_endpoint(const hookd_endpoint *e, int max_timeout_ms);
/* An endpoint's or destination's retry policy as shown (its "retry"). */
json_t *hookd_json_retry(const hookd_retry_policy *p);
int hookd_api_timeout_shown(int timeout_ms, int max_timeout_ms); /* the lower of the two */
json_t *hookd_json_delivery(const hookd_delivery *d);
/* When a delivery still to be sent is tried, as this node sees it: its next_attempt_ms held
 * back to when its endpoint's open breaker probes or its Retry-After pause ends; 0 (none) while
 * the endpoint is disabled. */
int64_t hookd_api_delivery_next(hookd_app *app, const hookd_delivery *dl);
/* hookd_json_delivery and, while it is pending or retrying, "held": what holds it past its own
 * next_attempt_at — {"by": "retry_after" | "breaker", "until"}, {"by": "disabled", "until":
 * null}, or null: what the API's reads show (a kept answer, replayed later, is the plain one). */
json_t *hookd_api_delivery_json(hookd_app *app, const hookd_delivery *d);
json_t *hookd_json_attempt(const hookd_attempt *a, const char *delivery_id);
json_t *hookd_json_time(int64_t ms); /* RFC 3339 string, or null for 0 */
/* In a run of a list paged by id: HOOKD_STORE_NOTFOUND, the op marked bad_after (answered 400
 * naming `after` by hookd_api_store_error), unless `after` ("": none) is an id that list ever
 * held — kind HOOKD_MADE_ENDPOINT or _SOURCE within tenant (NULL: any), _TENANT, or -1 an event
 * type's name. A mistyped or another list's cursor read as a position ended the paging
 * silently, with an empty or short page (a review). */
int hookd_api_after_known(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                          int kind, const char *tenant, const char *after);
/* In a run: HOOKD_STORE_NOTFOUND unless the tenant exists (a list under a mistyped tenant is
 * 404, not an empty page); the op's err names it. */
int hookd_api_tenant_known(hookd_api_op *op, hookd_store_conn *c, const hookd_store_backend *be,
                           const char *tenant);
/* A string, null for NULL; text that is not UTF-8 (a receiver's or provider's bytes) as a
 * placeholder, never a NULL that would fail the whole object. */
json_t *hookd_json_str_or_null(const char *s);

/* A rate limit field: null (unlimited), {"per_second": n} or {"per_minute": n}. Returns 0 with
 * *per_second set, or -1 after answering 422. */
int hookd_api_parse_rate(hookd_req *r, const json_t *v, const char *field, double max,
                         double *per_second);

/* An endpoint's custom headers as given in field (v: absent, null or an object name → value,
 * core/custom_headers.h): *out becomes their compact JSON text, to be sealed (NULL for null or
 * {}: none). False after answering 422 (or 503). */
bool hookd_api_parse_headers(hookd_req *r, const json_t *v, const char *field, char **out);
/* An endpoint's custom headers as shown: their names in their order, never their values (an
 * admin reads those at GET …/headers); null when the stored ones do not open. */
json_t *hookd_api_header_names(const hookd_app *app, const hookd_endpoint *ep);

/* obj.key, when present and not null, must be an integer in [min, max]: stored in *out (left
 * alone when absent); otherwise answers 422 naming "prefix.key" (or "key") and returns false. */
bool hookd_api_int_in(hookd_req *r, const json_t *obj, const char *prefix, const char *key,
                      int64_t min, int64_t max, int64_t *out);

/* Answers 422 unknown_field for the member name of an object at prefix (NULL: the body), named
 * whole in error.param ("prefix.name") and cut to 64 bytes in the message; what (NULL: none)
 * says why none is taken there. */
void hookd_api_unknown_field(hookd_req *r, const char *prefix, const char *name,
                             const char *what);

/* Every member of obj must be among names (NULL-terminated): otherwise answers 422
 * unknown_field naming it ("prefix.member", or "member" when prefix is NULL) and returns false.
 * A misspelt optional member would otherwise be ignored without a word. */
bool hookd_api_known_members(hookd_req *r, const json_t *obj, const char *prefix,
                             const char *const *names);

/* A "retry" object (an endpoint's, a source destination's): every field optional, -1 where
 * absent. */
typedef struct hookd_api_retry {
  int64_t max_attempts, backoff_base_ms, backoff_cap_ms, max_age_s, retry_after_cap_s;
  bool has_statuses;     /* retry_statuses given ([] = none) */
  uint64_t statuses[2];
} hookd_api_retry;

/* Parses v (must be an object; `field` names it in messages, e.g. "destinations[0].retry"):
 * unknown fields, wrong types and values out of range are answered 422 naming the field and
 * return -1; 0 otherwise. */
int hookd_api_parse_retry(hookd_req *r, const json_t *v, const char *field, hookd_api_retry *out);
/* Writes the fields given onto p (the policy's own check — cap >= base — is the caller's). */
void hookd_api_retry_apply(const hookd_api_retry *in, hookd_retry_policy *p);

/* Query parameter helpers: limit (1..max, default def), returns -1 after answering 400. */
int hookd_api_limit(hookd_req *r, int def, int max);
/* A list's page: ?limit= (1..500, default 50) and ?after= (an id, copied into after, "" when
 * absent; with a prefix, a list of generated ids, one of that form). Returns -1 after answering
 * 400. */
int hookd_api_page(hookd_req *r, const char *prefix, int *limit, char *after,
                   size_t after_size);
/* {"data": data, "next_cursor": last_id or null}. */
json_t *hookd_api_page_body(json_t *data, const char *last_id);
/* A store position as the API shows it: sealed (core/cursor.h: seqs are shared by every tenant,
 * and their gaps would tell one tenant how much the others write); null for 0. */
json_t *hookd_api_cursor_json(const hookd_app *app, char list, const char *scope, int64_t seq);
/* {"data": data, "next_cursor": next_seq sealed, or null (0)}: the newest-first lists paged by
 * ?before= (audit, inbox, events). scope: the tenant whose list it is (events: its cursor is
 * refused by another tenant's list), NULL for the cross-tenant lists (a key scoped to tenants
 * lists its own there). */
json_t *hookd_api_seq_page_body(const hookd_app *app, char list, const char *scope, json_t *data,
                                int64_t next_seq);
/* ?before= (a next_cursor value of the list and scope, opened; 0 when absent); -1 after
 * answering 400. */
int hookd_api_before(hookd_req *r, const hookd_app *app, char list, const char *scope,
                     long long *before);

/* The scope of a cross-tenant listing (audit, inbox): a key scoped to tenants must name one of
 * them in ?tenant=, and ?before= is a cursor (0 when absent). Returns 0, or -1 after answering
 * 400/403. */
int hookd_api_list_scope(hookd_req *r, const hookd_app *app, char list, const char *tenant,
                         long long *before);

/* Handlers (router.c maps routes to them). */
void hookd_api_tenant_create(hookd_req *r, hookd_app *app);
void hookd_api_tenant_get(hookd_req *r, hookd_app *app);
void hookd_api_tenant_list(hookd_req *r, hookd_app *app);
void hookd_api_tenant_patch(hookd_req *r, hookd_app *app);
void hookd_api_tenant_delete(hookd_req *r, hookd_app *app);
void hookd_api_event_payload_delete(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_test(hookd_req *r, hookd_app *app);
void hookd_api_event_type_create(hookd_req *r, hookd_app *app);
void hookd_api_event_type_list(hookd_req *r, hookd_app *app);
void hookd_api_event_type_get(hookd_req *r, hookd_app *app);
void hookd_api_event_type_patch(hookd_req *r, hookd_app *app);
void hookd_api_event_type_delete(hookd_req *r, hookd_app *app);
void hookd_api_key_create(hookd_req *r, hookd_app *app);
void hookd_api_portal_access(hookd_req *r, hookd_app *app);
/* From a reply, after a commit that changed API keys: they are read again on the reader and put
 * in force on this node (unless a later read is there already), then after(op) answers. */
void hookd_api_keys_reload(hookd_api_op *op, void (*after)(hookd_api_op *op));
void hookd_api_key_list(hookd_req *r, hookd_app *app);
void hookd_api_key_revoke(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_create(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_get(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_list(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_patch(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_delete(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_secret(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_headers(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_rotate(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_public_key(hookd_req *r, hookd_app *app);
void hookd_api_endpoint_stats(hookd_req *r, hookd_app *app); /* api_endpoint_stats.c */
void hookd_api_audit_list(hookd_req *r, hookd_app *app);
void hookd_api_nodes_list(hookd_req *r, hookd_app *app);
void hookd_api_source_create(hookd_req *r, hookd_app *app);
void hookd_api_source_get(hookd_req *r, hookd_app *app);
void hookd_api_source_list(hookd_req *r, hookd_app *app);
void hookd_api_source_patch(hookd_req *r, hookd_app *app);
void hookd_api_source_delete(hookd_req *r, hookd_app *app);
void hookd_api_source_add_destination(hookd_req *r, hookd_app *app);
void hookd_api_inbox_list(hookd_req *r, hookd_app *app);
void hookd_api_inbox_get(hookd_req *r, hookd_app *app);
void hookd_api_inbox_resolve(hookd_req *r, hookd_app *app);
void hookd_api_inbox_resolve_many(hookd_req *r, hookd_app *app);
void hookd_api_inbox_replay(hookd_req *r, hookd_app *app);
void hookd_api_inbox_replay_many(hookd_req *r, hookd_app *app);
void hookd_api_event_publish(hookd_req *r, hookd_app *app);
void hookd_api_event_get(hookd_req *r, hookd_app *app);
void hookd_api_event_routing(hookd_req *r, hookd_app *app);
void hookd_api_event_list(hookd_req *r, hookd_app *app);
void hookd_api_event_republish(hookd_req *r, hookd_app *app);
void hookd_api_delivery_get(hookd_req *r, hookd_app *app);
void hookd_api_delivery_list(hookd_req *r, hookd_app *app);
void hookd_api_delivery_replay(hookd_req *r, hookd_app *app);
void hookd_api_event_deliver(hookd_req *r, hookd_app *app);
void hookd_api_replay_create(hookd_req *r, hookd_app *app);
void hookd_api_replay_get(hookd_req *r, hookd_app *app);
void hookd_api_replay_list(hookd_req *r, hookd_app *app);
void hookd_api_replay_confirm(hookd_req *r, hookd_app *app);
void hookd_api_replay_pause(hookd_req *r, hookd_app *app);
void hookd_api_replay_resume(hookd_req *r, hookd_app *app);
void hookd_api_replay_cancel(hookd_req *r, hookd_app *app);
void hookd_api_healthz(hookd_req *r, hookd_app *app);
/* The operator dashboard's page and files (dashboard.c, docs/dashboard.md). */
void hookd_api_dashboard(hookd_req *r, hookd_app *app);
void hookd_api_dashboard_file(hookd_req *r, hookd_app *app);
void hookd_api_dashboard_home(hookd_req *r, hookd_app *app);
void hookd_api_readyz(hookd_req *r, hookd_app *app);
void hookd_api_metrics(hookd_req *r, hookd_app *app);

#endif

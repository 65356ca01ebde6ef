/* store.h — hookd's storage interface.
 *
 * Three pieces:
 *  1. Records (tenant, endpoint, event, delivery, attempt, …) that every backend fills.
 *  2. hookd_store_backend: a table of synchronous functions, one per operation the engine needs.
 *     Each runs on a connection owned by one executor thread, inside the transaction (and
 *     savepoint) the executor opened. SQL lives in the backend's directory only.
 *  3. hookd_store: an opened store with its executors (storeq.h): the writer, which group-commits
 *     every mutation, the reader, which runs API queries on its own connection, and the scan
 *     executor for long read-only scans.
 *
 * Error convention: 0 on success, a negative HOOKD_STORE_* code otherwise; detail text (never a
 * secret) in the connection's error buffer, read with backend->errmsg(). Strings in records are
 * heap-allocated and owned by the record; free with the matching *_free(). */
#ifndef HOOKD_STORE_STORE_H
#define HOOKD_STORE_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/backoff.h"
#include "core/clockvote.h"
#include "core/delivery_state.h"
#include "core/ids.h"

enum {
  HOOKD_STORE_OK = 0,
  HOOKD_STORE_ERR = -1,      /* I/O or internal failure: retry later, answer 503 */
  HOOKD_STORE_NOTFOUND = -2, /* the row addressed does not exist */
  HOOKD_STORE_EXISTS = -3,   /* unique key taken by a different row */
  HOOKD_STORE_CONFLICT = -4, /* same key, different content (idempotency) */
  HOOKD_STORE_STALE = -5,    /* fenced out: the lease token is no longer current */
  HOOKD_STORE_STATE = -6,    /* the operation is illegal in the row's current state */
  HOOKD_STORE_LIMIT = -7,    /* a configured quota would be exceeded */
  HOOKD_STORE_UNKNOWN = -8,  /* commit only: an I/O error while committing — the transaction
                              * may be on disk and come back at the next start */
  HOOKD_STORE_STOPPED = -9,  /* open only: a stop was asked for while it waited (nothing done) */
};

/* commit_settled's answers. */
enum { HOOKD_STORE_SETTLED_COMMITTED = 1, HOOKD_STORE_SETTLED_ROLLED_BACK = 2 };
const char *hookd_store_strerror(int rc);

/* ---------- records ---------- */

typedef struct hookd_tenant {
  char *id;
  char *name;
  int64_t created_ms;
  int64_t updated_ms;
  int max_in_flight;     /* 0 = the server default */
  double rate_limit;     /* deliveries per second, 0 = unlimited */
  int weight;            /* share of sending turns, >= 1 */
  char *metadata;        /* the API's labels, compact JSON; NULL = none */
} hookd_tenant;

typedef struct hookd_endpoint {
  char *id;
  char *tenant_id;
  char *url;
  char *description;
  char *event_types;     /* comma-separated filter, NULL = every type; "a.*" matches a prefix */
  bool enabled;
  char *disabled_reason; /* why it was disabled (410, operator, …), NULL when enabled */
  int max_in_flight;     /* concurrent requests to this endpoint */
  int timeout_ms;        /* total request timeout */
  hookd_retry_policy policy; /* current version (policy.id) */
  char *signing;         /* "hmac" (whsec_ secret, v1) or "ed25519" (whsk_ secret, v1a) */
  char *secret;          /* current signing secret, sealed by the daemon (secretbox.h) */
  char *previous_secret; /* the rotated-out secret, still sent until previous_expires_ms */
  int64_t previous_expires_ms;
  char *headers;         /* custom request headers: a JSON object name → value, sealed like the
                            secret (they may be credentials); NULL = none */
  char *source_id;       /* set when this endpoint is an inbound source's destination */
  bool idempotent;       /* the destination tolerates a resend (ambiguous outcomes retry) */
  double rate_limit;     /* deliveries per second, 0 = unlimited */
  bool ordered;          /* ordering lanes on (events with an ordering_key) */
  char *lane_policy;     /* "skip" or "block": a lane whose head is DEAD */
  int64_t failing_since_ms; /* first failure since the last success, 0 = healthy */
  int64_t paused_until_ms;  /* a receiver's Retry-After pause (docs/isolation.md), 0 = none */
  int64_t disabled_ms;      /* when it was last disabled (by its answers or an operator), 0 while
                               enabled (read only: the store sets it) */
  int64_t created_ms;
  int64_t updated_ms;
  int64_t deleted_ms;    /* 0 unless deleted */
  char *channels;        /* comma-separated; NULL = every event (hookd_channels_match) */
  char *metadata;        /* the API's labels, compact JSON; NULL = none */
  char *payload_filter;  /* compact JSON (core/payload_filter.h); NULL = every payload */
  char *body_format;     /* "envelope" (NULL too): the stored envelope is sent; "payload": its
                            data alone (core/envelope.h), as Svix sends a message */
} hookd_endpoint;

typedef struct hookd_event {
  int64_t seq;       /* store-internal key */
  char *id;          /* public id, the webhook-id; unique per tenant */
  char *tenant_id;
  char *type;
  char *body;        /* the exact envelope bytes sent on every attempt */
  size_t body_len;
  int64_t occurred_ms;
  int64_t created_ms;
  int64_t expires_ms; /* 0 = never */
  int64_t purged_ms;  /* its payload was purged then (retention); 0 = kept */
  bool inbound;       /* an inbound event: body is the provider's raw request body */
  char *content_type; /* inbound: as received */
  char *meta;         /* inbound: the header lines its forwards carry */
  char *schema_version; /* the JSON text of the publish's schema_version (a string or an
                         * integer); NULL when none */
  char *ordering_key;   /* NULL when none */
  int64_t ordering_version;
  bool has_ordering_version;
  char *channels;       /* comma-separated; NULL when none */
  char *test_endpoint;  /* a test event's one endpoint; NULL otherwise */
} hookd_event;

/* A page of a tenant's events, newest first (event_list). */
typedef struct hookd_event_filter {
  const char *tenant_id;
  const char *event_type;     /* a type, a prefix as "invoice.*", "*", or NULL */
  int kind;                   /* 0 = any, 1 = outbound, 2 = inbound */
  const char *channel;        /* only events published to this channel, or NULL */
  int64_t since_ms, until_ms; /* publish time in [since, until); 0 = unbounded */
  int64_t before_seq;         /* only events older than this one (a cursor); 0 = the newest */
  int limit;
} hookd_event_filter;
void hookd_events_free(hookd_event *v, size_t n);

typedef struct hookd_delivery {
  int64_t seq;
  char *id;          /* public id (dlv_…) */
  int64_t event_seq;
  char *event_id;
  char *event_type;
  char *endpoint_id;
  char *tenant_id;
  hookd_dstate state;
  int attempt_count;        /* all attempts ever made */
  int cycle_base;           /* attempt_count when the current cycle (creation/replay) began */
  bool replay_cycle;        /* the current cycle was started by a replay */
  char *ordering_key;       /* lane key, NULL when the event has none */
  int64_t cycle_started_ms;
  int64_t next_attempt_ms;  /* when it may be sent (active states) */
  char *lease_owner;
  int64_t lease_token;      /* grows by one on every claim */
  int64_t leased_until_ms;  /* 0 = not leased */
  char *last_error;         /* category of the last failure */
  int last_status;          /* HTTP status of the last attempt, 0 if none */
  bool last_ambiguous;      /* its last attempt may have reached the receiver (sent, then a
                               timeout, a cut connection, 502, 504): read by the claim */
  int64_t policy_id;
  int64_t created_ms, updated_ms, delivered_ms, dead_ms;
  char *dead_reason;
  char *result_ref;         /* an inbound destination's reference for what it did */
} hookd_delivery;

#define HOOKD_EXCERPT_MAX 4096 /* bytes of a response body kept with an attempt */
/* bytes read for it: past the bound, so that what straddles the bound is masked whole before
 * the excerpt is cut (a card number or an address cut in two is masked by neither half) */
#define HOOKD_EXCERPT_READ (HOOKD_EXCERPT_MAX + 256)

typedef struct hookd_attempt {
  int number;               /* 1-based, unique per delivery */
  int64_t started_ms, finished_ms;
  char *outcome;            /* classify.h outcome names */
  int http_status;          /* 0 when no response */
  int64_t latency_ms;
  char *error;              /* transport error text, NULL on HTTP responses */
  char *response;           /* excerpt, at most HOOKD_EXCERPT_MAX bytes */
  size_t response_len;
  int64_t lease_token;
  char *trigger;            /* live, retry, replay */
  char *url;                /* where it was sent; NULL for attempts stored before hookd kept it */
} hookd_attempt;

void hookd_tenant_free(hookd_tenant *t);
void hookd_tenants_free(hookd_tenant *v, size_t n);
void hookd_endpoint_free(hookd_endpoint *e);
void hookd_event_free(hookd_event *e);
void hookd_delivery_free(hookd_delivery *d);
void hookd_attempt_free(hookd_attempt *a);
void hookd_endpoint_copy(hookd_endpoint *dst, const hookd_endpoint *src);
/* Free arrays of records. */
void hookd_endpoints_free(hookd_endpoint *v, size_t n);
void hookd_deliveries_free(hookd_delivery *v, size_t n);
void hookd_attempts_free(hookd_attempt *v, size_t n);

/* True when `type` passes the endpoint's comma-separated filter (NULL = everything; an entry
 * ending in ".*", or in '/' and '*', matches that prefix; "*" matches everything). */
bool hookd_filter_match(const char *filter, const char *type);
/* A list's event-type filter (the API's "a.type", "*", or a prefix: "a." or "a/" then '*'), as
 * a store matches it: the prefix's length ("a." of "a.*": 2) when it is one, else 0 with *exact
 * the type to equal (NULL for none: NULL or "*"). */
size_t hookd_type_filter_split(const char *type, const char **exact);
/* Whether an endpoint listing `endpoint` channels (NULL: none) receives an event published to
 * `event` channels (NULL: none): one without channels receives every event, one with some only
 * the events published to one of them. Both comma-separated. */
bool hookd_channels_match(const char *endpoint, const char *event);

/* ---------- operation arguments ---------- */

typedef struct hookd_publish_req {
  const char *tenant_id;
  const char *event_id;       /* caller's or generated */
  const char *type;
  const char *body;           /* envelope bytes */
  size_t body_len;
  /* The envelope's "data" parsed already (the API's thread parsed the request), for payload
   * filters: the fan-out matches it instead of parsing the envelope on the writer. NULL: none
   * (the envelope is parsed, once, when a filter needs it). Read only, and kept alive by the
   * caller until the op has completed. */
  const json_t *payload;
  const unsigned char *request_hash; /* 32 bytes: SHA-256 of the canonical request */
  /* 32 bytes or NULL: the hash hookd gave the same request before null members were left out
   * of it (a request with some): also the same request, so that a retry of one published
   * before an upgrade is not refused (hookd_publish_same_request) */
  const unsigned char *request_hash_legacy;
  const char *idempotency_key;       /* NULL when absent */
  int64_t occurred_ms, now_ms, expires_ms;
  const char *ordering_key;          /* NULL when absent */
  const char *schema_version;        /* JSON text (a string or an integer); NULL when absent */
  const char *channels;              /* comma-separated; NULL when none */
  const char *only_endpoint;         /* fan out to this endpoint alone, whatever its filters
                                        (a test event); HOOKD_STORE_STATE when it is disabled,
                                        deleted, another tenant's or a source's */
  int64_t ordering_version;
  bool has_ordering_version;         /* for an ordered endpoint, a version below the highest
                                      * its lane has seen makes the delivery DEAD "superseded" */
  bool existing_only;                /* answer only a repeat of an earlier request (same key or
                                      * id, same hash): HOOKD_STORE_STATE instead of creating
                                      * (a republish retried after its source was purged) */
} hookd_publish_req;

/* Whether a stored request hash (len bytes) is req's own or its legacy form. */
bool hookd_publish_same_request(const hookd_publish_req *req, const void *stored, size_t len);

#define HOOKD_FANOUT_MAX 64 /* endpoints reported back per publish (for dispatcher hints) */

typedef struct hookd_publish_res {
  char *event_id;             /* the event's id (the original one for a duplicate) */
  int n_deliveries;           /* deliveries of the event */
  int n_superseded;           /* of which created DEAD "superseded" (ordering versions) */
  bool duplicate;             /* an earlier identical request created it */
  bool key_conflict;          /* HOOKD_STORE_CONFLICT for the Idempotency-Key (not the id) */
  size_t n_endpoints;         /* endpoints that got a new delivery (first HOOKD_FANOUT_MAX) */
  char *endpoints[HOOKD_FANOUT_MAX];
  bool endpoints_truncated;   /* more endpoints than reported: rescan hints */
  int64_t due_ms;             /* when the new deliveries are due */
  int filters_over;           /* payload filters that gave up (HOOKD_PFILTER_BUDGET): not taken */
} hookd_publish_res;
void hookd_publish_res_free(hookd_publish_res *r);

/* Whether an endpoint's payload filter takes a publish's payload (HOOKD_PFILTER_*, a fan-out's
 * steps taken from *steps): req->payload when the API gave it, else the envelope, parsed once
 * into *parsed (NULL at first, json_decref'd by the caller). */
struct hookd_pfilter_cache;
int hookd_publish_pfilter(struct hookd_pfilter_cache *pf, const char *filter,
                          const hookd_publish_req *req, json_t **parsed, long *steps);

typedef struct hookd_claim_req {
  const char *endpoint_id;
  const char *owner;          /* node id of the claimer */
  int limit;                  /* deliveries in all; live ones (and their retries) first */
  int replay_limit;           /* at most this many of them from replay cycles */
  bool ordered;               /* only the head of each ordering lane is claimable */
  bool replay_first;          /* one replay (a lane's head) before the live ones */
  bool lane_block;            /* a DEAD head blocks its lane */
  int64_t now_ms;
  int64_t lease_ms;           /* leased_until = now + lease_ms */
} hookd_claim_req;

/* The claim's lane mode as the endpoint's stored row has it (the dispatcher's copy may not have
 * heard of a change committed before the claim): ordered, and a DEAD head blocking. */
void hookd_claim_mode(hookd_claim_req *r, bool ordered, bool block);

/* A claimed delivery with everything needed to send it. */
typedef struct hookd_claimed {
  hookd_delivery d;           /* seq, id, event_id, state, attempt_count, cycle, lease_token… */
  char *body;                 /* envelope bytes (outbound) or the provider's raw body (inbound) */
  size_t body_len;
  bool inbound;               /* a forward of an inbound event */
  char *content_type;         /* inbound: the provider's content type */
  char *meta;                 /* inbound: header lines to forward, "name: value\n"… */
  int64_t expires_ms;
  hookd_retry_policy policy;  /* the version the delivery started with */
} hookd_claimed;
void hookd_claimed_free(hookd_claimed *c);

typedef struct hookd_outcome {
  int64_t delivery_seq;
  int64_t lease_token;        /* the token the attempt was made under (fencing) */
  hookd_dstate from, to;
  int attempt_number;         /* attempt_count after this attempt; 0 = no attempt row */
  int64_t next_attempt_ms;
  const char *last_error;     /* category or NULL on success */
  const char *dead_reason;
  const char *endpoint_id;    /* for disable_endpoint */
  bool disable_endpoint;
  const char *disable_reason;
  const char *sent_url;       /* the URL the answer came from: an endpoint that has moved since
                                 is neither disabled nor paused by it (NULL: not checked) */
  int64_t pause_until_ms;     /* the endpoint is paused until then (Retry-After), 0 = no */
  int64_t sent_ms;            /* when the request was sent (0: unknown): the answer's word on
                                 the endpoint (failing, pause, disable) counts only if it was not
                                 moved nor enabled again since (health_since) */
  const char *result_ref;     /* the destination's reference for what it did (inbound) */
  bool inbound;               /* also update the inbox record of the event */
  bool ambiguous;             /* the attempt may have reached the receiver (sent, then no
                                 answer of its own): stored as last_ambiguous */
  bool lane;                  /* the delivery has an ordering key: a terminal outcome moves its
                                 lane's head on */
  int failing;                /* endpoint health: 1 = failing since now (if not already),
                                 -1 = healthy again, 0 = unchanged */
  int64_t failing_since_ms;   /* a disable for a failing run (not a 410): only if the store's
                                 run began at or before this (0: no such condition) */
  int64_t now_ms;
  hookd_attempt attempt;      /* the row to append (borrowed strings) */
  bool cancelled;             /* out: the delivery was cancelled while this attempt was in
                                 flight (its endpoint deleted); the attempt was recorded all the
                                 same, and a success made it delivered — nothing else changed */
  int64_t failed_write_ms;    /* when a write of this outcome first failed (0: never): the
                                 disable applies only if the endpoint's configuration was not
                                 written since — a PATCH that landed while this outcome waited
                                 out a store outage is newer than the answer */
  bool disable_declined;      /* out: disable_endpoint not applied for one of those reasons */
  bool failing_run_ended;     /* out, with disable_declined: the store's failing run is not the
                                 one asked about (failing_since_ms): a success ended it since */
  bool disabled_now;          /* out: this outcome disabled it (not an earlier one, nor a
                                 concurrent answer of the same endpoint) */
  int64_t disabled_updated_ms; /* out, with disabled_now: the endpoint's updated_at as stored
                                  (moved on by the disable: its node's copy takes it) */
  bool endpoint_gone;         /* out: its endpoint was deleted while the request was out: the
                                 attempt is recorded with its URL cut to its origin */
  bool was_held;              /* out: it was held `unknown` already (a delete, a lease that ran
                                 out) and stays so: counted when it was held, not again */
  bool keep_attempt;          /* the attempt is history even when the delivery has moved on
                                 past its lease (claimed again, an operator's resolve of the
                                 sweep's hold): appended, the delivery untouched */
  int superseded;             /* out, with keep_attempt: the delivery had moved on, so only the
                                 attempt was appended, under this number (0: not so) */
  /* The request's to, next_attempt_ms, dead_reason and last_error as asked: the store's
   * record_outcome changes them to what it wrote (an endpoint moved since, deleted meanwhile);
   * a second run (its batch redone, a failed write tried again) starts from these
   * (hookd_outcome_run), not from a decision whose write was rolled back. */
  bool asked_kept;
  hookd_dstate asked_to;
  int64_t asked_next_attempt_ms;
  const char *asked_dead_reason, *asked_last_error;
} hookd_outcome;
/* At the start of each run of record_outcome: the request as first asked. */
void hookd_outcome_run(hookd_outcome *o);

/* An entry of the event-type catalog. */
typedef struct hookd_event_type {
  char *name, *description;
  char *schemas; /* JSON Schemas by version: a compact JSON object, NULL = none (or not read) */
  int64_t created_ms, updated_ms, archived_ms; /* archived_ms 0: not archived */
} hookd_event_type;
void hookd_event_types_free(hookd_event_type *v, size_t n);

/* A node id whose clock check a shared store keeps (GET /v1/nodes, docs/postgres.md "The clock
 * guard"): its skew to the database's clock give or take err_ms, checked_ms on the database's
 * clock, and whether the node runs now (its node lock held). */
typedef struct hookd_node_row {
  char *node_id;
  hookd_clock_voter clock;
  int64_t checked_ms;
  bool live;
} hookd_node_row;
void hookd_node_rows_free(hookd_node_row *v, size_t n);

/* What an endpoint's or a source's delete did to the deliveries still active. */
typedef struct hookd_delete_counts {
  int cancelled; /* made `cancelled` */
  int held;      /* held `unknown`: a request to a destination that is not idempotent may be out */
  bool more;     /* deliveries are left to the delete walk (delete_step): docs/architecture.md */
} hookd_delete_counts;

/* The deliveries a step of the delete walk cancels (docs/architecture.md "Deletes"), and the
 * budget of a delete's own transaction: ~5 ms of the writer for rows without an ordering key,
 * ~15 ms with one (more index entries each). */
#define HOOKD_DELETE_STEP 500

/* A retention walk (inbox, payloads, events) goes in seq order and stops at the first row
 * inside the window, taking seq order for time order. A row stamped this far past the wall
 * clock (written while the clock had stepped ahead, then set right; or by a node whose clock ran
 * ahead) is passed over, kept until its time: else it would stop every walk until then. */
#define HOOKD_RETENTION_AHEAD_MS (3600 * 1000LL)

/* What one step of the delete walk did (delete_step). */
typedef struct hookd_delete_step {
  bool found;                    /* an endpoint owed cancels, or (urls) a tenant the URL walk */
  bool finished;                 /* and none are left: its flag is cleared (its walk ended) */
  char endpoint_id[HOOKD_ID_MAX];
  hookd_delete_counts counts;
  bool urls;                     /* a step of the URL walk (its deleted endpoints' attempts) */
  char tenant_id[HOOKD_ID_MAX];  /* with urls: whose */
  int urls_cut;                  /* with urls: attempts whose URL this step cut to its origin */
  int64_t urls_total;            /* with urls: and the tenant's walk so far, this step's too */
} hookd_delete_step;

/* What a tenant's delete did (tenant_delete). */
typedef struct hookd_tenant_delete_res {
  hookd_delete_counts counts;  /* over its endpoints and sources */
  int endpoints_deleted;       /* its own endpoints (not its sources' destinations) */
  int replays_cancelled;
  int keys_revoked;            /* API keys scoped to it alone */
  char **endpoint_ids;         /* every endpoint deleted, sources' destinations too */
  size_t n_endpoints;
  char **source_ids;           /* every source deleted */
  size_t n_sources;
} hookd_tenant_delete_res;
void hookd_tenant_delete_res_free(hookd_tenant_delete_res *r);

/* A claimed delivery given back unsent (its lease released). */
typedef struct hookd_release {
  int64_t delivery_seq;
  int64_t lease_token;        /* the token it was claimed with */
  hookd_dstate state;         /* as claimed (pending, retrying) */
  int64_t next_attempt_ms;    /* as claimed */
  const char *last_error;     /* as claimed */
  bool inbound;               /* its inbox record follows */
  bool maybe_sent;            /* its request may have gone out (an error after it): no release
                                 mark, a replay job's take-back leaves it (docs/replay.md) */
  int64_t now_ms;
  int attempt_number;         /* the attempt it was claimed for (attempt_count + 1; 0: not
                                 given): one a late outcome's appended attempt went past while
                                 it was claimed (late_outcome) is given back to the cycle */
} hookd_release;

typedef struct hookd_due_hint {
  char *endpoint_id;
  int64_t due_ms;             /* earliest next_attempt_at of unleased active deliveries */
} hookd_due_hint;
void hookd_due_hints_free(hookd_due_hint *v, size_t n);
/* Growing arrays the backends fill (doubling; -1 when out of memory): hints appended, or one per
 * endpoint with the earliest due (short lists), and seqs. */
int hookd_hint_push(hookd_due_hint **v, size_t *n, size_t *cap, const char *ep, int64_t due);
int hookd_hint_add(hookd_due_hint **v, size_t *n, size_t *cap, const char *ep, int64_t due);
int hookd_seq_push(int64_t **v, size_t *n, size_t *cap, int64_t seq);

typedef struct hookd_delivery_filter {
  const char *tenant_id;      /* required */
  const char *endpoint_id;    /* optional */
  const char *event_id;       /* optional */
  unsigned states;            /* 1 << hookd_dstate for each state listed; 0 = any */
  const char *event_type;     /* optional: a type, or a prefix as "invoice.*" */
  int64_t since_ms, until_ms; /* optional: created in [since, until); 0 = unbounded */
  const char *after_id;       /* pagination cursor: deliveries with id < after_id (newest first) */
  int limit;
} hookd_delivery_filter;

typedef struct hookd_api_key {
  char *id;                   /* key_…, public */
  unsigned char hash[32];     /* SHA-256 of the secret token */
  char *role;                 /* admin, operator, viewer, publisher */
  char *tenants;              /* comma-separated scope, NULL = all tenants */
  char *name;
  int64_t created_ms;
  int64_t revoked_ms;         /* 0 when active */
  int64_t expires_ms;         /* 0: never; opens nothing from then on */
} hookd_api_key;
void hookd_api_key_free(hookd_api_key *k);

/* One row of the append-only audit log. */
typedef struct hookd_audit {
  int64_t seq;
  int64_t at_ms;
  char *actor;      /* API key id, "cli", or "system" */
  char *action;     /* e.g. endpoint.create, delivery.replay */
  char *target;     /* the id acted on */
  char *tenant_id;
  char *reason;     /* given by the actor (Hookd-Reason header or a reason field) */
  char *detail;     /* what changed (field names, counts); never secrets */
} hookd_audit;
void hookd_audits_free(hookd_audit *v, size_t n);

/* ---------- inbound ---------- */

typedef struct hookd_source {
  char *id;
  char *tenant_id;
  char *provider;              /* inbound.h provider name */
  char *secrets;               /* sealed JSON array of secret strings */
  int tolerance_s;
  char *event_types;           /* comma-separated allowlist, NULL = every type */
  char *identity_paths;        /* comma-separated JSON paths: composite identity, NULL = provider id */
  char *business_paths;        /* comma-separated JSON paths of the business key, NULL = none */
  char *business_operation;    /* the operation the business key names (e.g. mark_paid) */
  char *business_types;        /* comma-separated allowlist: the types that operation is, NULL =
                                * every type */
  char *version_object_path;   /* late-event detection: the object's id … */
  char *version_path;          /* … and its version, from the body … */
  char *version_header;        /* … or from a header */
  char *generic;               /* generic HMAC settings as JSON, NULL unless provider generic */
  /* the identity rule identity_paths replaced (NULL = the provider's id), still looked up
   * until prior_identity_until_ms (0 = none): a provider's retry of an event received before
   * the change keeps its record (docs/inbound.md "Changing the identity rule") */
  char *prior_identity_paths;
  int64_t prior_identity_until_ms;
  int64_t created_ms, updated_ms, deleted_ms;
} hookd_source;
void hookd_source_free(hookd_source *s);
void hookd_sources_free(hookd_source *v, size_t n);

typedef struct hookd_inbox {
  int64_t seq;
  char *id;                    /* in_… ; the forward's webhook-id and Idempotency-Key */
  char *source_id, *tenant_id, *provider;
  char *identity_key;          /* SHA-256 hex; NULL on conflict and duplicate rows */
  char *identity_kind;         /* provider_id, composite, payload_hash */
  char *provider_event_id;
  char *business_key;
  char *event_type;
  char *payload_hash;
  char *status;                /* see docs/inbound.md */
  char *conflict_of;           /* the record a conflict or duplicate row refers to */
  int64_t event_seq;
  int attempt_count;
  int64_t received_ms, completed_ms;
  char *result_ref;
  char *last_error;
  int64_t lease_until_ms;      /* read-time: the latest live lease among its deliveries */
} hookd_inbox;
void hookd_inbox_free(hookd_inbox *r);
void hookd_inboxes_free(hookd_inbox *v, size_t n);

enum {
  HOOKD_RECV_NEW = 0,          /* stored and queued for forwarding */
  HOOKD_RECV_DUPLICATE,        /* same identity, same payload: the existing record */
  HOOKD_RECV_CONFLICT,         /* same identity, different payload: recorded, not forwarded */
  HOOKD_RECV_SEMANTIC_DUP,     /* new identity, business key already seen: recorded, not forwarded */
  HOOKD_RECV_STALE,            /* older than the newest version seen: recorded, not forwarded */
  HOOKD_RECV_FILTERED,         /* event type not allowed: recorded, not forwarded */
  HOOKD_RECV__COUNT
};
/* "new", "duplicate", "conflict", "semantic_duplicate", "stale", "filtered" (logs, metrics). */
extern const char *const hookd_recv_outcome_names[HOOKD_RECV__COUNT];

typedef struct hookd_receive_req {
  const char *inbox_id;        /* generated for a new record */
  const char *source_id, *tenant_id, *provider;
  const char *identity_key, *identity_kind, *provider_event_id;
  const char *prior_identity_key; /* the key under the source's prior identity rule, NULL when
                                   * none: a record under it is this event's */
  const char *business_key;    /* NULL when the source has no business-key rule */
  const char *event_type;
  const char *payload_hash;
  const char *alt_payload_hash; /* the hash an earlier hookd took of the same request (VNPay:
                                 * with its hash fields), NULL: none — the same payload too */
  bool filtered;
  const char *object_key;      /* late-event detection, NULL when not configured */
  const char *version;
  bool version_numeric;
  const char *body;
  size_t body_len;
  const char *content_type;
  const char *meta;            /* forwarded header lines */
  int64_t now_ms;
} hookd_receive_req;

typedef struct hookd_receive_res {
  int outcome;                 /* HOOKD_RECV_* */
  hookd_inbox record;          /* the record the provider's request maps to */
  size_t n_endpoints;          /* destinations that got a delivery (dispatcher hints) */
  char *endpoints[HOOKD_FANOUT_MAX];
  int64_t due_ms;
} hookd_receive_res;
void hookd_receive_res_free(hookd_receive_res *r);
/* The identity key a conflict row is stored under: a SHA-256 (hex) of the identity key and the
 * conflicting payload's hash, so that the same conflicting request again is found as its
 * duplicate (docs/inbound.md), never an identity a request has. 0, or -1 (hashing failed). */
int hookd_inbox_conflict_key(const char *identity_key, const char *payload_hash, char out[65]);

/* ever_made's kinds */
enum { HOOKD_MADE_ENDPOINT, HOOKD_MADE_SOURCE, HOOKD_MADE_TENANT, HOOKD_MADE_EVENT };

typedef struct hookd_inbox_filter {
  const char *tenant_id;       /* NULL = any (unscoped keys) */
  const char *source_id;
  const char *status;          /* as shown: "processing" is received or retryable_failed under
                                * a live lease, and those two exclude it */
  const char *event_id;        /* the provider's event id, NULL = any */
  const char *event_type;      /* a type pattern (hookd_api_type_pattern_valid), NULL = any */
  int64_t since_ms, until_ms;  /* received in [since, until); 0 = unbounded */
  int64_t now_ms;              /* for the lease */
  int64_t before_seq;          /* cursor, 0 = newest */
  int limit;
} hookd_inbox_filter;
void hookd_api_keys_free(hookd_api_key *v, size_t n);

/* ---------- replay jobs (docs/replay.md) ---------- */

typedef struct hookd_replay_filter {
  const char *endpoint_id;     /* NULL = any endpoint of the tenant */
  const char *event_type;      /* NULL = any; "a.*" = that prefix */
  hookd_dstate state;          /* HOOKD_DS_DEAD, HOOKD_DS_DELIVERED or HOOKD_DS_RETRYING */
  bool missing;                /* instead: the outbound events endpoint_id (required) has no
                                  delivery of; each given one when its turn comes */
  int64_t since_ms, until_ms;  /* delivery created in [since, until); 0 = unbounded */
} hookd_replay_filter;

typedef struct hookd_replay_snapshot {
  int64_t *seqs;               /* the deliveries' seqs, oldest first (a "missing" job: the
                                  events') */
  size_t n;
  int64_t count;               /* HOOKD_STORE_LIMIT: how many matched */
  char *filter_state;          /* the state they were in: an item still in it is replayed
                                  ("missing": an event the endpoint still has no delivery of) */
  char *endpoint_id;           /* "missing": the endpoint they go to */
  int64_t filters_over;        /* "missing": events left out because the endpoint's payload
                                  filter gave up on them (HOOKD_PFILTER_OVER) */
} hookd_replay_snapshot;
void hookd_replay_snapshot_free(hookd_replay_snapshot *s);

typedef struct hookd_replay_job {
  int64_t seq;
  char *id;                    /* rpl_… */
  char *tenant_id;
  char *state;                 /* building, preview, running, paused, completed, cancelled,
                                  expired, failed */
  char *filter;                /* the filter as JSON (rendered back as given, normalised) */
  char *actor, *reason;
  double rate_per_s;
  int64_t total, replayed, skipped;
  int64_t created_ms, confirmed_ms, updated_ms, finished_ms;
  int64_t next_item_ms;        /* the job's token bucket: when its next item may go (a shared
                                  store: on the database's clock, docs/replay.md "Rate") */
  int64_t items_purged_ms;     /* its items (the breakdowns) were purged then; 0 = kept */
  int64_t recalled;            /* replay_act's pause or cancel: the moves it took back */
  char *held_endpoint;         /* running, held behind this endpoint (NULL: moving) */
  int64_t held_since_ms;
} hookd_replay_job;
void hookd_replay_job_free(hookd_replay_job *j);
void hookd_replay_jobs_free(hookd_replay_job *v, size_t n);

/* A count by key (an endpoint, a skip reason, a delivery state). */
typedef struct hookd_replay_count {
  char *key;
  int64_t n, remaining;        /* remaining: endpoints only, items not processed yet */
} hookd_replay_count;

typedef struct hookd_replay_detail {
  hookd_replay_count *endpoints; /* largest first, at most HOOKD_REPLAY_ENDPOINTS_SHOWN + 1
                                    (the one more says there are more) */
  size_t n_endpoints;
  hookd_replay_count *skipped;   /* by reason */
  size_t n_skipped;
  hookd_replay_count *states;    /* current states of the deliveries replayed */
  size_t n_states;
} hookd_replay_detail;
void hookd_replay_detail_free(hookd_replay_detail *d);

/* Transitions an operator asks for. */
typedef enum {
  HOOKD_REPLAY_CONFIRM, HOOKD_REPLAY_PAUSE, HOOKD_REPLAY_RESUME, HOOKD_REPLAY_CANCEL
} hookd_replay_action;

#define HOOKD_REPLAY_ENDPOINTS_SHOWN 100 /* a job's endpoints in its breakdown */
#define HOOKD_REPLAY_ACTIVE_MAX 8 /* building/preview/running/paused jobs per tenant */
#define HOOKD_REPLAY_PREVIEW_TTL_MS 3600000 /* a preview older than this cannot be confirmed */
#define HOOKD_REPLAY_CREATE_CHUNK 2000      /* items stored per writer transaction (a few ms) */
#define HOOKD_REPLAY_BACK_CHUNK 1000 /* items a pause's or cancel's take-back walks per writer op */
#define HOOKD_REPLAY_BUILD_STALE_MS 60000 /* a job building no chunk for this long was abandoned
                                             (its daemon died): it reads as failed */
#define HOOKD_REPLAY_STEP_MAX 500          /* items per job per step */
/* Event bodies a step may read for `missing` items whose endpoint has a payload filter, across
 * its jobs: the item that passes it is the step's last (the first is always taken), as
 * retention's HOOKD_PURGE_BYTES. Skipped items take no share of a job's rate, so without it a
 * job whose filter now refuses everything parsed 500 large bodies a step. */
#define HOOKD_REPLAY_STEP_BYTES (1LL << 20)
/* Items a step takes across its jobs (~12 ms of the writer, which every tenant's publishes
 * share): 16 jobs of 500 held it ~100 ms a step, back to back (a review). */
#define HOOKD_REPLAY_STEP_ITEMS 1000
/* What is left of a step's budget, shared by its jobs in turn. */
typedef struct hookd_replay_budget {
  int64_t bytes; /* of bodies read (HOOKD_REPLAY_STEP_BYTES) */
  int items;     /* (HOOKD_REPLAY_STEP_ITEMS) */
} hookd_replay_budget;
/* A job's turn in a step once the step's bytes or items are spent: a job that took nothing is
 * not written (its next_item_at stays the oldest: it goes first at the next step), and the one
 * that spent them goes after it (*at: `now` at the least) — else each step's first job, skipping
 * large bodies, spent every step's bytes and the jobs after it waited until it had finished.
 * Returns whether the job's turn is to be written. */
bool hookd_replay_turn_end(int taken, const hookd_replay_budget *left, bool complete, double *at,
                           double now);

typedef struct hookd_store_conn hookd_store_conn; /* backend-defined */

/* Held behind an endpoint (docs/replay.md): a job moves no item to an endpoint that already has
 * HOOKD_REPLAY_HOLD_COUNT deliveries due and unclaimed, or one of them due for
 * HOOKD_REPLAY_HOLD_AFTER_MS; it is looked at again HOOKD_REPLAY_HOLD_POLL_MS later. */
#define HOOKD_REPLAY_HOLD_COUNT 1000
#define HOOKD_REPLAY_HOLD_AFTER_MS 2000
#define HOOKD_REPLAY_HOLD_POLL_MS 250
/* held this long, looked at again HOOKD_REPLAY_HOLD_SLOW_POLL_MS later instead */
#define HOOKD_REPLAY_HOLD_LONG_MS 10000
#define HOOKD_REPLAY_HOLD_SLOW_POLL_MS 1000
/* rows a step's probes read at most, across its jobs (each a row read for its lease) */
#define HOOKD_REPLAY_STEP_PROBE_ROWS 4000
/* What a probe saw waiting at one endpoint, plus what steps moved there since. Kept by the
 * writer connection for HOOKD_REPLAY_HOLD_POLL_MS (steps are 50 ms apart: probing at each cost
 * a job ~40 % of its pace, bench/run.sh replay), then probed again. */
typedef struct hookd_hold_seen {
  char *endpoint_id;
  bool enabled;      /* enabled and not deleted: else its items are skipped, never held */
  int64_t waiting;   /* due, unclaimed (counted up to HOOKD_REPLAY_HOLD_COUNT) */
  int64_t oldest;    /* the earliest due time among them; 0 = none */
  int64_t probed_at; /* the node's clock */
} hookd_hold_seen;
typedef struct hookd_hold_memo {
  hookd_hold_seen *v;
  size_t n, cap;
  int64_t rows_left; /* of this step's probes (HOOKD_REPLAY_STEP_PROBE_ROWS) */
} hookd_hold_memo;
/* The record of endpoint_id, NULL when there is none: probe it. (A step sweeps the memo first:
 * what it holds then is fresh.) */
hookd_hold_seen *hookd_hold_find(hookd_hold_memo *m, const char *endpoint_id);
/* Records a probe's answer at now_ms (an endpoint find did not find); NULL when out of memory. */
hookd_hold_seen *hookd_hold_add(hookd_hold_memo *m, const char *endpoint_id, bool enabled,
                                int64_t waiting, int64_t oldest, int64_t now_ms);
/* Forgets the records no longer fresh (each step's start: the memo holds the endpoints of the
 * last HOOKD_REPLAY_HOLD_POLL_MS only), and gives the step its probes' rows. */
void hookd_hold_sweep(hookd_hold_memo *m, int64_t now_ms);
/* Whether a job holds before moving one more delivery to the endpoint. */
bool hookd_hold_behind(const hookd_hold_seen *s, int64_t now_ms);
/* One delivery moved to the endpoint, due now. */
void hookd_hold_moved(hookd_hold_seen *s, int64_t now_ms);
void hookd_hold_memo_free(hookd_hold_memo *m);
#define HOOKD_REPLAY_RATE_MAX 10000.0      /* items a second: STEP_MAX per 50 ms step */
#define HOOKD_REPLAY_ITEMS_KEEP_MS (7LL * 86400000) /* an ended job's items, then purged */
/* a completed job is not cancelled this close to its purge (another node's clock may be ahead
 * by up to the clock guard's bound: docs/replay.md "Taking back") */
#define HOOKD_REPLAY_CANCEL_MARGIN_MS 60000

typedef struct hookd_replay_step_res {
  hookd_due_hint *hints;       /* endpoints given deliveries to send */
  size_t n_hints;
  int replayed, skipped;
  int recalled;                /* moves taken back by paused or cancelled jobs' chunks */
  char **completed;            /* ids of jobs that completed in this step */
  size_t n_completed;
  int64_t next_ms;             /* earliest next_item_at of a running job, 0 = none running */
} hookd_replay_step_res;
void hookd_replay_step_res_free(hookd_replay_step_res *r);

/* ---------- the backend ops table ---------- */


/* One kind of a claim (a backend's): up to limit deliveries of live or replay cycles appended
 * to v[*len…]. */
typedef int (*hookd_claim_kind_fn)(hookd_store_conn *c, const hookd_claim_req *req,
                                   bool replay, int limit, hookd_claimed *v, size_t *len);
/* A claim's passes, the same on every backend: live first, replays what is left (up to their
 * limit) — but one replay before when req->replay_first (an ordered endpoint's replayed
 * delivery is its lane's head). v holds req->limit; 0 or the first pass's error. */
int hookd_claim_passes(hookd_store_conn *c, const hookd_claim_req *req,
                       hookd_claim_kind_fn kind, hookd_claimed *v, size_t *len);

/* A retention walk's batch (inbox, payloads, events), the same on every backend: rows in seq
 * order are given to hookd_walk_row until it says stop — at the first row at or after
 * before_ms, passing over one stamped HOOKD_RETENTION_AHEAD_MS past the wall clock (a clock
 * stepped forward, then set right). ids (room for the batch's limit) gets the eligible rows'
 * seqs before it. */
typedef struct hookd_walk_batch {
  int64_t before_ms, ahead_ms, last;
  int scanned;
  bool fresh; /* it stopped at a row inside the window */
  int64_t *ids;
  int n;
} hookd_walk_batch;
void hookd_walk_begin(hookd_walk_batch *w, int64_t before_ms, int64_t after_seq, int64_t *ids);
bool hookd_walk_row(hookd_walk_batch *w, int64_t seq, int64_t t, bool eligible);
/* Where the next batch goes on: 0 (the walk starts again from the beginning) when this one
 * ended inside the window or at the end of the rows. */
int64_t hookd_walk_next(const hookd_walk_batch *w, int limit);

/* The rules of a replay of one delivery (docs/replay.md), the same on every backend: each
 * reads the facts in one statement, then asks these. On HOOKD_STORE_STATE err holds the
 * sentence and *why the refusal's name: state_changed, endpoint_deleted, endpoint_disabled,
 * superseded, lane_moved_on, expired, payload_purged. */
typedef struct hookd_replay_facts {
  hookd_dstate state;
  const char *dead_reason; /* NULL: none */
  bool laned;              /* it has an ordering key */
  bool versioned;          /* its event has an ordering_version and its lane a version reached */
  int64_t version, lane_version;
  bool passed;        /* a later delivery of its lane was delivered, claimed or attempted */
  int64_t expires_at; /* its event's (0: never) */
  bool purged;        /* its event's payload */
} hookd_replay_facts;
/* The endpoint's lookup, kept across the calls of one transaction (a replay job's step: its
 * items mostly share their endpoints, which cannot change under the writer's own transaction). */
typedef struct hookd_replay_memo {
  char endpoint_id[160];        /* the endpoint last looked up ("" = none) */
  int rc;                       /* its lookup: 0, HOOKD_STORE_NOTFOUND (deleted) or an error */
  bool enabled, ordered, block; /* block: its lane_policy */
  bool idempotent;              /* an inbound destination's flag (true for an endpoint) */
  bool swept;                   /* set by a replay job: a filter's sweep, not a delivery named */
} hookd_replay_memo;

/* A running job due for a replay step, as the backends read it. */
typedef struct hookd_replay_due {
  int64_t seq;
  char *id, *tenant_id, *filter_state;
  char *endpoint_id; /* the job's filter.endpoint (a "missing" job's endpoint) */
  double rate;
  int64_t total, next_item, next_at;
  int64_t scan_item;         /* where its walk goes on (docs/replay.md "Held behind…") */
  int64_t replayed, skipped; /* before this step */
  int64_t held_since;        /* held since (the node's clock), 0: moving */
} hookd_replay_due;

/* A running job's turn in a replay step (docs/replay.md "Held behind an endpoint"): its open
 * items walked from its first open item, in order while they move, then from its frontier
 * (scan_item) on; an item whose endpoint is behind is passed (left open), or, for a job over
 * one endpoint, stops it. Shared by the backends, whose callbacks read and decide items. */
typedef struct hookd_replay_walk {
  /* in */
  const hookd_replay_due *job;
  double limit;       /* the bucket's now (the node's clock, or the database's) */
  int64_t now_ms;     /* the node's clock (hints, holds) */
  hookd_hold_memo *hm; /* the writer connection's (kept across steps) */
  /* the open items of job_seq from `from` on, in order: up to max into out, *n of them */
  int (*open_from)(hookd_store_conn *c, int64_t job_seq, int64_t from, int64_t *out, size_t max,
                   size_t *n);
  /* item n: its result ("replayed", a skip's reason, NULL when decided already, "held" or
   * "spent": left open), *endpoint (owned) for a replayed, held or spent one, *bytes the bodies
   * it read */
  int (*item)(hookd_store_conn *c, const hookd_replay_due *j, int64_t n, int64_t now_ms,
              hookd_replay_memo *memo, hookd_hold_memo *hm, const char **result,
              char **endpoint, int64_t *bytes);
  /* out */
  int64_t replayed, skipped, passed;
  int taken;        /* items looked at (the job's share of the step's bounds) */
  int64_t next;     /* the first open item after the turn; total + 1 once complete */
  int64_t frontier; /* scan_item after the turn */
  bool complete;    /* no open item left */
  bool write;       /* the turn is to be written (hookd_replay_turn_end) */
  double at;        /* the bucket after the turn (next_item_at, whole ms up) */
  char *held;       /* (owned) the first open item's endpoint when behind, else the first passed
                       one's; NULL: none */
} hookd_replay_walk;
/* Runs w's turn: the bucket moves by the rate for each item replayed (it holds one second's
 * worth at most), res gets the hints, left is spent by each item looked at (and the bytes
 * read); a turn that stopped at its held item or moved nothing is looked at again a poll later.
 * Returns 0 or the store's error (w->held then NULL). */
int hookd_replay_walk_run(hookd_store_conn *c, hookd_replay_walk *w, hookd_replay_step_res *res,
                          size_t *hcap, hookd_replay_budget *left);
typedef int (*hookd_endpoint_get_fn)(hookd_store_conn *c, const char *id, hookd_endpoint *out);
/* Before the endpoint is looked up: refused by the delivery's state alone (still scheduled, or
 * held unknown: settled by a resolve). 0 or HOOKD_STORE_STATE. */
int hookd_replay_state_check(hookd_dstate state, char *err, size_t errlen, const char **why);
/* m holds endpoint_id's lookup after it (got with get unless m already held it). */
void hookd_replay_memo_fill(hookd_replay_memo *m, hookd_store_conn *c, const char *endpoint_id,
                            hookd_endpoint_get_fn get);
/* The rest, in order: 0 (replay it), HOOKD_STORE_STATE, or the endpoint lookup's error. */
int hookd_replay_check(const hookd_replay_facts *f, const hookd_replay_memo *m, int64_t now_ms,
                       char *err, size_t errlen, const char **why);

/* "Retry now" of a delivery whose next attempt is due already (the UPDATE moved nothing: it
 * waits on a concurrency cap, a paused endpoint, its claim): OK for the single retry-now (202,
 * as a repeated one), HOOKD_STORE_STATE with *why "already_due" and a message in err for a
 * replay job's item (why != NULL), which is then skipped, not counted replayed. */
int hookd_retry_due_already(char *err, size_t errlen, const char **why);
/* A replay filter matching more than --max-replay-items (max): its count is read up to
 * HOOKD_REPLAY_COUNT_UPTO(max) matches, no further (a tenant's scan past it held the one scan
 * thread, every tenant's job progress and lists waiting: a review measured 1.8 s over 3,000,000
 * events). The error names the count, or says it is over that bound; returns
 * HOOKD_STORE_LIMIT. what: "events" or "deliveries"; narrow: how to narrow the filter. */
#define HOOKD_REPLAY_COUNT_UPTO(max) (2 * (max))
int hookd_replay_over(char *err, size_t errlen, int64_t count, int64_t max, const char *what,
                      const char *narrow);

/* A retention op takes whole rows of its walk, in order, while their cost stays within a budget
 * (the first one always): the bytes it frees (HOOKD_PURGE_BYTES: the freed pages are zeroed into
 * the WAL and synced — a thousand 1 MiB payloads, a gigabyte), with what each row takes with it
 * weighed in bytes too (hookd_retention_weight). Returns how many of the n rows (cost: each
 * one's) this op takes. */
#define HOOKD_PURGE_BYTES (8LL << 20)
int hookd_take_within(const int64_t *cost, int n, int64_t budget);
/* What an event's deletion weighs (event retention; the inbox purge, for a record's event): the
 * bytes of its body and of its attempts' response excerpts, and each delivery and attempt
 * deleted with it. A delivery weighs 1/HOOKD_EXPIRE_DELIVERIES of the budget (a batch
 * of events fanned out to a thousand endpoints each held the writer, and every ack behind it,
 * for seconds), an attempt a page besides its excerpt: an op of 25 events, each to 20 endpoints
 * DEAD after 24 attempts with 4 KiB excerpts, took 0.35 s. Measured: on SQLite an attempt takes
 * ~25 us with an excerpt past ~1 KiB (which has a page of its own), ~1.5 us without one; on
 * PostgreSQL ~15 us even without one (its trigger reads its delivery and event). A row of either
 * kind weighs HOOKD_ATTEMPT_WEIGHT at least, so a weighing counts at most HOOKD_WEIGH_ROWS of
 * each: past that, an event is over the budget alone. */
#define HOOKD_EXPIRE_DELIVERIES 500
#define HOOKD_DELIVERY_WEIGHT (HOOKD_PURGE_BYTES / HOOKD_EXPIRE_DELIVERIES)
#define HOOKD_ATTEMPT_WEIGHT 4096
#define HOOKD_WEIGH_ROWS (HOOKD_PURGE_BYTES / HOOKD_ATTEMPT_WEIGHT + 1)
int64_t hookd_retention_weight(int64_t bytes, int64_t deliveries, int64_t attempts);
/* An event past the budget alone goes in parts (docs/api.md "Event retention"), an op each:
 * HOOKD_SHED_ATTEMPTS of its attempts, then HOOKD_EXPIRE_DELIVERIES of its deliveries, then the
 * rest with it. A review: one event to 1,000 endpoints, 100 attempts each, held the writer 8.8 s
 * whole. */
#define HOOKD_SHED_ATTEMPTS (HOOKD_WEIGH_ROWS - 1)
/* Where a walk stopped at seq goes on so that seq is read again (its rows are `> after`): 0
 * would end the walk, so the first seq gives -1. */
int64_t hookd_walk_again(int64_t seq);

/* An inbox record's status from its forwards' states (counts of each; docs/inbound.md "Inbox
 * states": the least advanced decides — unknown > retryable_failed > received > dead_lettered >
 * completed). *deciding: the delivery state whose latest last_error the record shows (NULL:
 * none, completed). */
const char *hookd_inbox_status_of(int64_t unknown, int64_t dead, int64_t retrying,
                                  int64_t pending, int64_t delivered, const char **deciding);

enum { HOOKD_EP_ANY = 0, HOOKD_EP_OWN = 1, HOOKD_EP_DEST = 2 }; /* endpoint_list's kind */

typedef struct hookd_store_backend {
  const char *name;
  /* Opens a connection. writer != 0 for the connection that commits mutations. Returns 0, or
   * HOOKD_STORE_STOPPED (a stop asked for while it waited), or another error. */
  int (*open)(void *shared, int writer, hookd_store_conn **out, char *err, size_t errlen);
  void (*close)(hookd_store_conn *c);
  const char *(*errmsg)(hookd_store_conn *c);
  /* Forgets the last error (so that errmsg() speaks of the next op only). */
  void (*clear_error)(hookd_store_conn *c);
  /* Stops the statement running on c now, from any thread (its op fails with HOOKD_STORE_ERR).
   * May be NULL: the backend has no way to, and its ops run to their end. */
  void (*interrupt)(hookd_store_conn *c);
  /* Applies numbered migrations not yet applied. Runs once at start on the writer. */
  /* Brings the schema to this hookd's version; with apply false, only checks that it is.
   * stop (NULL: none) is asked while it waits for another process: true gives up. migrating
   * (NULL: none) is told once before an upgrade's first migration runs (not a new store's). The
   * schema versions found and left are written to *from and *to (equal: nothing to do). */
  int (*migrate)(hookd_store_conn *c, bool apply, bool (*stop)(void),
                 void (*migrating)(int64_t from, int64_t to), int64_t *from, int64_t *to);
  /* A CLI command alone on an embedded store (no daemon holds it), about to write: the WAL a
   * crashed run left copied into the database first, as a daemon's start does (NULL: none). */
  int (*recover)(hookd_store_conn *c);
  /* What of the server's own settings voids "a commit answered is on disk", which no session
   * setting can restore (PostgreSQL's fsync off, full_page_writes off): a sentence in out, or
   * "" (NULL: a backend that has none to check). 0, or a store error. */
  int (*durability_check)(hookd_store_conn *c, char *out, size_t cap);
  /* The id of the master key that sealed a stored secret (an endpoint's secret, previous secret
   * or headers, a source's secrets), read with statements every schema version answers (a
   * column or table a version lacks: none there) — before the migrations. 1 with id, 0 when
   * nothing is sealed, or a store error. */
  int (*first_sealed)(hookd_store_conn *c, char id[17]);

  /* Transactions, driven by the executor. */
  int (*begin)(hookd_store_conn *c, int writer);
  int (*commit)(hookd_store_conn *c);
  /* Optional, after commit: how the commit's outcome was settled when its answer was lost —
   * HOOKD_STORE_SETTLED_COMMITTED or _ROLLED_BACK after the backend asked the server (a
   * PostgreSQL link that dropped during COMMIT), else 0. Reading it clears it. */
  int (*commit_settled)(hookd_store_conn *c);
  int (*rollback)(hookd_store_conn *c);
  int (*savepoint)(hookd_store_conn *c);
  int (*release)(hookd_store_conn *c);
  int (*rollback_to)(hookd_store_conn *c);
  /* Rows this connection has inserted, updated or deleted since it opened (monotonic): tells
   * the executor whether a failed op without a savepoint left writes behind. */
  int64_t (*changes)(hookd_store_conn *c);
  /* Writes the least a commit can carry (one page; no row), so that the commit tests the disk:
   * after a failed batch the executor adds it to batches that write nothing, and reports the
   * store healthy again only once a write went through (an empty commit succeeds on a full
   * disk). NULL: none. */
  int (*probe)(hookd_store_conn *c);
  /* The database server's own clock, in ms since the epoch (a shared store: the nodes' clocks
   * are checked against it, docs/postgres.md "The clock guard"). NULL: none (SQLite: one node,
   * its clock is the only one). */
  int (*clock_ms)(hookd_store_conn *c, int64_t *ms);
  /* The hookd nodes running on the store, this one included (a shared store: each applies its
   * share of the customers' limits, docs/postgres.md "Several nodes"). NULL: one. */
  int (*nodes_live)(hookd_store_conn *c, int *n);
  /* The clock guard's vote (docs/postgres.md "The clock guard"): stores this node's skew to the
   * database's clock (clock_ms's time minus this node's, give or take err_ms), and returns the
   * skews the other nodes running on the store stored (*out: free()). NULL: none. */
  int (*clock_votes)(hookd_store_conn *c, int64_t skew_ms, int64_t err_ms,
                     hookd_clock_voter **out, size_t *n);
  /* The retention windows to walk by (docs/postgres.md "Several nodes"): stores this node's
   * (mine: inbox, payload, event, in s; 0 for payload and event: off) and sets *out to the
   * longest of them and those of the other nodes running (0, off, the longest). NULL: one
   * node, its own. */
  int (*retention_windows)(hookd_store_conn *c, const int64_t mine[3], int64_t out[3]);
  /* The deliveries waiting to be sent, every tenant's (pending or retrying: lane heads and the
   * rows behind them), counted up to cap (docs/metrics.md hookd_deliveries_backlog): read from
   * the partial indexes that hold exactly them, so its cost is the backlog's, not the table's. */
  int (*backlog_count)(hookd_store_conn *c, int64_t cap, int64_t *n);
  /* The store's heartbeat (docs/architecture.md "Clocks"): *last_ms the stamp found (0: none),
   * then the stamp set to now_ms. at_start, with a stamp older than now_ms - gap_ms (hookd
   * stopped that long, or its clock set ahead meanwhile): each live endpoint's failing_since
   * moved on by the gap first, never past now_ms (*moved: how many) — the time hookd did not run
   * is no endpoint's failing time; at_start, none is left after now_ms either. NULL: none (a
   * shared store: its clock guard). */
  int (*heartbeat)(hookd_store_conn *c, int64_t now_ms, bool at_start, int64_t gap_ms,
                   int64_t *last_ms, int64_t *moved);
  /* The change stamps of the API keys and of the sources (docs/architecture.md "Shutdown"):
   * each moves, in the writing transaction (triggers), whenever a row of its table is inserted,
   * updated or deleted — so a reload that read a stamp before the rows reads them again only
   * when it moved. */
  int (*config_stamps)(hookd_store_conn *c, int64_t *keys, int64_t *sources);
  /* Every node id whose clock check the store keeps, by id (*out: hookd_node_rows_free), and
   * *live the nodes running (nodes_live's count: one not yet checked is counted, not listed).
   * NULL: none (SQLite: one node, no check). */
  int (*nodes_list)(hookd_store_conn *c, hookd_node_row **out, size_t *n, int *live);
  /* 1 while a transaction is open. A database can end one by itself (SQLite rolls back the
   * whole transaction on SQLITE_FULL, SQLITE_IOERR or SQLITE_NOMEM in some statements): the
   * executor then must not run another op, which would run outside the batch's transaction. */
  int (*in_txn)(hookd_store_conn *c);

  /* Tenants. */
  int (*tenant_create)(hookd_store_conn *c, const hookd_tenant *t);
  int (*tenant_get)(hookd_store_conn *c, const char *id, hookd_tenant *out);
  /* The event-type catalog: create (HOOKD_STORE_EXISTS when the name is there, archived or
   * not), list by name (schemas read when with_schemas), get one (archived or not;
   * HOOKD_STORE_NOTFOUND), update (description, schemas NULL: kept, schemas "": cleared;
   * archived -1: kept, 0/1: set; HOOKD_STORE_NOTFOUND), and the check of an endpoint's patterns
   * (comma-separated): while the catalog holds a type not archived, each must match one — else
   * HOOKD_STORE_STATE with *bad the index of the first that does not. */
  int (*event_type_create)(hookd_store_conn *c, const hookd_event_type *t);
  int (*event_type_list)(hookd_store_conn *c, bool archived_too, bool with_schemas,
                         const char *after, int limit, hookd_event_type **out,
                         size_t *n); /* names > after (NULL/"": from the first); limit 0: all */
  int (*event_type_get)(hookd_store_conn *c, const char *name, hookd_event_type *out);
  int (*event_type_update)(hookd_store_conn *c, const char *name, const char *description,
                           const char *schemas, int archived, int64_t now_ms,
                           hookd_event_type *out,
                           int *changed); /* out: 0 nothing, 1 archived now, 2 else */
  int (*event_types_check)(hookd_store_conn *c, const char *patterns, int *bad);
  /* Writes the tenant's name and limits. */
  int (*tenant_update)(hookd_store_conn *c, const hookd_tenant *t);
  /* Deletes a live tenant (HOOKD_STORE_NOTFOUND when there is none): each of its sources and
   * endpoints as their own deletes do, its replay jobs not ended cancelled, then it reads as
   * absent everywhere (tenant_get, lists, creates under it) while its id stays taken. */
  int (*tenant_delete)(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_tenant_delete_res *out);
  int (*tenant_list)(hookd_store_conn *c, hookd_tenant **out, size_t *n);
  /* At most `limit` tenants with ids after after_id ("" = from the first), by id. */
  int (*tenant_page)(hookd_store_conn *c, const char *after_id, int limit, hookd_tenant **out,
                     size_t *n);

  /* Endpoints. create stores ep->policy as a new version and fills ep->policy.id.
   * max_per_tenant > 0 refuses with HOOKD_STORE_LIMIT beyond that many live endpoints. */
  int (*endpoint_create)(hookd_store_conn *c, hookd_endpoint *ep, int max_per_tenant);
  int (*endpoint_get)(hookd_store_conn *c, const char *id, hookd_endpoint *out);
  /* Whether an endpoint (HOOKD_MADE_ENDPOINT) or a source (HOOKD_MADE_SOURCE) of this id was
   * ever made in the tenant (NULL: in any), deleted ones included — or an event
   * (HOOKD_MADE_EVENT) is kept: a list filtered by one tells "none left" from "no such id".
   * HOOKD_STORE_OK or HOOKD_STORE_NOTFOUND. */
  int (*ever_made)(hookd_store_conn *c, int kind, const char *tenant_id, const char *id);
  /* kind: HOOKD_EP_ANY, or HOOKD_EP_OWN (no source's) or HOOKD_EP_DEST (a source's) alone;
   * enabled: -1 either, 1 the enabled ones, 0 the disabled ones. */
  int (*endpoint_list)(hookd_store_conn *c, const char *tenant_id, const char *after_id,
                       int limit, int kind, int enabled, hookd_endpoint **out, size_t *n);
  /* An endpoint's deliveries with ids in [from_id, to_id) (ids sort by creation time:
   * hookd_id_floor) counted by state, each up to cap (an index range of at most cap rows a
   * state): counts[s] for every hookd_dstate, and *dead_unsent the DEAD ones never attempted
   * (superseded, expired, …), up to cap too. */
  int (*endpoint_stats)(hookd_store_conn *c, const char *endpoint_id, const char *from_id,
                        const char *to_id, int64_t cap, int64_t counts[HOOKD_DS__COUNT],
                        int64_t *dead_unsent);
  /* Writes every mutable field of ep; a policy different from the stored current version
   * becomes a new version (ep->policy.id updated). */
  int (*endpoint_update)(hookd_store_conn *c, hookd_endpoint *ep);
  /* Marks deleted and cancels its deliveries in flight and up to HOOKD_DELETE_STEP others (an
   * inbound destination that is not idempotent holds `unknown` those whose request may be out:
   * docs/inbound.md); out->more: the rest are left to delete_step (docs/architecture.md). */
  int (*endpoint_delete)(hookd_store_conn *c, const char *id, int64_t now_ms,
                         hookd_delete_counts *out);
  /* One step of the delete walk: up to `limit` more deliveries of one deleted endpoint that
   * still owes cancels (out->found false: none does). */
  int (*delete_step)(hookd_store_conn *c, int64_t now_ms, int limit, hookd_delete_step *out);
  /* Replaces the stored (sealed) secrets and custom headers of an endpoint, deleted ones
   * included: master-key rotation. */
  int (*endpoint_reseal)(hookd_store_conn *c, const char *id, const char *secret,
                         const char *previous_secret, const char *headers);
  /* The store's record of the master key its values are sealed with (its id: a fingerprint,
   * no secret): written with key_id when there is none, or when take (master-key rotation, a
   * store with nothing sealed yet); the id held afterwards into held. Nodes given another key
   * than the store's are refused at their start (docs/security.md "Keys at rest"). */
  int (*master_key_claim)(hookd_store_conn *c, const char *key_id, bool take, int64_t now_ms,
                          char *held, size_t cap);
  /* Deliveries a disabled endpoint still owes (pending or retrying, no lease) whose event
   * expired by before_ms: up to limit of their seqs into *seqs (malloc'd; the caller frees it) —
   * read on the scan connection: the claim, which expires the others, never takes a disabled
   * endpoint's. expire_owed, on the writer, makes each one still so DEAD `expired` at now_ms,
   * its lane moved on. */
  int (*owed_expired)(hookd_store_conn *c, int64_t before_ms, int limit, int64_t **seqs, int *n);
  int (*expire_owed)(hookd_store_conn *c, const int64_t *seqs, int n, int64_t before_ms,
                     int64_t now_ms, int *expired);
  /* Live endpoints changed at or after since_ms (0 = all), including deleted ones. */
  int (*endpoints_since)(hookd_store_conn *c, int64_t since_ms, hookd_endpoint **out, size_t *n);

  /* Events. */
  int (*publish)(hookd_store_conn *c, const hookd_publish_req *req, hookd_publish_res *res);
  /* tenant_id may be NULL: then an id shared by several tenants is HOOKD_STORE_CONFLICT. */
  int (*event_get)(hookd_store_conn *c, const char *tenant_id, const char *id, hookd_event *ev,
                   hookd_delivery **dl, size_t *n);

  /* Events of a tenant, newest first, without their body (body NULL). */
  int (*event_list)(hookd_store_conn *c, const hookd_event_filter *f, hookd_event **out,
                    size_t *n);

  /* Deliveries. */
  int (*delivery_get)(hookd_store_conn *c, const char *id, hookd_delivery *d,
                      hookd_attempt **att, size_t *n);
  int (*delivery_list)(hookd_store_conn *c, const hookd_delivery_filter *f,
                       hookd_delivery **out, size_t *n);
  /* Moves a delivered or dead delivery back to pending, due now, with a new cycle. swept: a
   * sweep of many (an inbox record's dead forwards), not a delivery named — it leaves what a
   * replay job leaves (hookd_replay_memo.swept: a forward given up, one applied). */
  int (*delivery_replay)(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                         hookd_delivery *out);
  /* Creates the delivery of a tenant's outbound event to one of its endpoints that has none —
   * published while the endpoint was disabled, or before it existed or subscribed —, pending
   * now as a replay cycle, and reads it into out. HOOKD_STORE_EXISTS when that pair has a
   * delivery (out->id only: replay it); NOTFOUND for the event or endpoint (the store's error
   * text names which); STATE when it would never be sent (an inbound event, a destination, a
   * disabled endpoint, a type it does not take, a purged or expired event, a lane moved past
   * its version), the text saying why. */
  int (*event_deliver)(hookd_store_conn *c, const char *tenant_id, const char *event_id,
                       const char *endpoint_id, int64_t now_ms, hookd_delivery *out);

  /* Dispatcher. */
  int (*claim)(hookd_store_conn *c, const hookd_claim_req *req, hookd_claimed **out, size_t *n,
               int64_t *next_due_ms);
  int (*record_outcome)(hookd_store_conn *c, hookd_outcome *o);
  /* Gives a claimed delivery back unsent. HOOKD_STORE_STALE when its lease was taken meanwhile;
   * but one the sweep held as unknown after its lease ran out ("the request may have been
   * sent") while this release could not be written goes back as claimed: it never was sent. */
  int (*release_lease)(hookd_store_conn *c, const hookd_release *r);
  /* The send mark (docs/inbound.md "Ambiguous outcomes"): the request of the delivery claimed
   * under lease_token is about to go out to a destination that is not idempotent, and a reclaim
   * of that lease must hold it. HOOKD_STORE_STALE when the lease is no longer held. */
  int (*mark_sent)(hookd_store_conn *c, int64_t delivery_seq, int64_t lease_token);
  /* Clears up to `limit` leases that expired before now_ms, or (owner != NULL) up to `limit`
   * leases held by owner, bumping their tokens; reports the number reclaimed, how many of them
   * were held `unknown` (an inbound destination that is not idempotent, the lease's send mark
   * written: the request may have been sent), and the endpoints affected as due hints
   * (earliest next_attempt_at per endpoint). */
  int (*reclaim_leases)(hookd_store_conn *c, const char *owner, int64_t now_ms, int limit,
                        hookd_due_hint **hints, size_t *n, int *reclaimed, int *held);
  /* Moves every lease owner holds by delta_ms (a step of the wall clock: docs/architecture.md
   * "Clocks"); reports how many. */
  int (*lease_shift)(hookd_store_conn *c, const char *owner, int64_t delta_ms, int *shifted);
  /* Earliest due time of unleased active deliveries for each endpoint that has any. */
  int (*due_hints)(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n);
  /* The live endpoints paused by a receiver's Retry-After past now_ms, each with the time its
   * pause ends (in due_ms): a shared store's nodes honour each other's pauses (docs/postgres.md
   * "Several nodes"). NULL: none (one node: its pauses are its own). */
  int (*endpoint_pauses)(hookd_store_conn *c, int64_t now_ms, hookd_due_hint **out, size_t *n);

  /* API keys. */
  int (*api_key_create)(hookd_store_conn *c, const hookd_api_key *k);
  /* every row (live_at_ms 0), or the keys the daemon loads: not revoked, and not expired before
   * live_at_ms */
  int (*api_key_list)(hookd_store_conn *c, int64_t live_at_ms, hookd_api_key **out, size_t *n);
  int (*api_key_revoke)(hookd_store_conn *c, const char *id, int64_t now_ms);

  /* Audit log: append in the transaction of the action it records; list newest first,
   * optionally for one tenant, before a seq cursor (0 = from the newest). */
  int (*audit_append)(hookd_store_conn *c, const hookd_audit *a);
  /* The answer an API request gave, kept under its caller's Idempotency-Key (the API's write
   * routes; docs/api.md): scope names the caller (its API key), hash the request (hex). 0 with
   * *hash, *status and *answer (malloc'd) when one is kept — until answer_purge drops it: no
   * age read here, by a clock that may be off — else HOOKD_STORE_NOTFOUND. */
  int (*answer_get)(hookd_store_conn *c, const char *scope, const char *key, char **hash,
                    int *status, char **answer);
  /* Keeps one, stamped now_ms, in the transaction of what the request changed (replacing one
   * under the same key). */
  int (*answer_put)(hookd_store_conn *c, const char *scope, const char *key, const char *hash,
                    int status, const char *answer, int64_t now_ms);
  /* Drops up to limit answers stamped before before_ms (the retention walk's, by its clock);
   * *more when there may be others. */
  int (*answer_purge)(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                      bool *more);
  /* Deletes up to limit API keys that expired before before_ms (a portal link's keys, one a
   * page view, would otherwise pile up, each read at every reload); *more as above. */
  int (*api_key_purge)(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                       bool *more);
  int (*audit_list)(hookd_store_conn *c, const char *tenant_id, int64_t before_seq, int limit,
                    hookd_audit **out, size_t *n);

  /* Inbound sources. create stores the source and its destinations (endpoints with
   * source_id set; their policies are stored like endpoint_create's, and they count against
   * max_endpoints_per_tenant like any endpoint: HOOKD_STORE_LIMIT). */
  int (*source_create)(hookd_store_conn *c, const hookd_source *s, hookd_endpoint *dests,
                       size_t n_dests, int max_endpoints_per_tenant);
  int (*source_get)(hookd_store_conn *c, const char *id, hookd_source *out,
                    hookd_endpoint **dests, size_t *n_dests);
  int (*source_update)(hookd_store_conn *c, const hookd_source *s);
  /* Deletes the source and its destinations (their active deliveries are cancelled). */
  int (*source_delete)(hookd_store_conn *c, const char *id, int64_t now_ms,
                       hookd_delete_counts *out);
  /* Every live source (the receive path's cache, the keyring's checks). */
  int (*source_list)(hookd_store_conn *c, hookd_source **out, size_t *n);
  /* A page of one tenant's live sources by id: up to limit after `after` ("" from the first),
   * of one provider (its name) or any (NULL) — a range of the tenant's index, not all of them;
   * tenant_id NULL: every tenant's, by id. */
  int (*source_page)(hookd_store_conn *c, const char *tenant_id, const char *provider,
                     const char *after, int limit, hookd_source **out, size_t *n);

  /* The receive path's atomic step (docs/inbound.md). */
  int (*receive)(hookd_store_conn *c, const hookd_receive_req *req, hookd_receive_res *res);
  int (*inbox_get)(hookd_store_conn *c, const char *id, hookd_inbox *out, hookd_delivery **dl,
                   size_t *n);
  int (*inbox_list)(hookd_store_conn *c, const hookd_inbox_filter *f, hookd_inbox **out,
                    size_t *n);
  /* Settles the record's deliveries held in `unknown`: to = DELIVERED (the effect happened),
   * PENDING (send again) or DEAD. HOOKD_STORE_STATE when none is held. Reports how many were
   * settled, and the endpoints of deliveries made pending (hints). */
  int (*inbox_resolve)(hookd_store_conn *c, const char *id, hookd_dstate to, int64_t now_ms,
                       size_t *n_resolved, hookd_due_hint **hints, size_t *n_hints);
  /* A record whose forward was cut off by its destination's delete (dead or cancelled, the
   * destination deleted): a forward to each destination the source has now that has none of
   * the record — the one that replaced it. Reports how many were made (0: none to make) and
   * their endpoints as hints; the record follows. swept (a batch of records, not one named): a
   * forward an operator gave up to a destination that is not idempotent is no cut-off. */
  int (*inbox_reforward)(hookd_store_conn *c, const char *id, int64_t now_ms, bool swept,
                         size_t *n_made, hookd_due_hint **hints, size_t *n_hints);
  /* Deletes up to `limit` inbox records received before `before_ms`, each with its event (body,
   * deliveries, attempts) unless a forward of it is open or was touched since `before_ms`. */
  int (*inbox_purge)(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                     int *purged);
  /* Deletes up to `limit` of the objects' newest versions (late events) not raised since
   * `before_ms`; *more when there may be others. */
  int (*object_versions_purge)(hookd_store_conn *c, int64_t before_ms, int limit, int *purged,
                               bool *more);
  /* Looks at up to `limit` ordered lanes whose highest version was not raised since
   * `before_ms`: deletes those with no delivery left (their events expired), and counts the
   * others as raised at now_ms, or at before_ms if the clock reads earlier (looked at again a
   * window later: a walk never reads the same kept lanes again). *more when there may be
   * others. */
  int (*lane_versions_purge)(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                             int *purged, bool *more);
  /* Payload retention: empties the bodies of outbound events created before `before_ms` whose
   * deliveries are all settled (none pending, retrying or held), walking `limit` events from
   * after `*after_seq` (0 when the walk is done); `purged` counts them. */
  /* An outbound event's payload emptied now (DELETE …/events/{id}/payload): its deliveries
   * still to be sent cancelled (their leases fenced), *cancelled counting them; *purged_ms when
   * it was emptied (now, or before: then nothing else changes). HOOKD_STORE_NOTFOUND, or
   * HOOKD_STORE_STATE for an inbound event. *seq: the event's, for the dispatcher. */
  int (*event_payload_delete)(hookd_store_conn *c, const char *tenant_id, const char *id,
                              int64_t now_ms, int64_t *seq, int64_t *purged_ms, int *cancelled);
  int (*event_purge)(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                     int64_t *after_seq, int *purged);
  /* Event retention: deletes outbound events created before `before_ms` whose deliveries are
   * all settled and untouched since then (and not DEAD in an ordered lane), with their
   * deliveries, attempts and Idempotency-Keys; walks like event_purge; `expired` counts them. */
  int (*event_expire)(hookd_store_conn *c, int64_t before_ms, int limit, int64_t *after_seq,
                      int *expired);

  /* Replay jobs. select (on the scan executor: a long scan holds up neither the writer nor the
   * API's reads) takes the seqs of the
   * tenant's deliveries matching f, oldest first: HOOKD_STORE_NOTFOUND when f->endpoint_id is
   * not one of the tenant's live endpoints, HOOKD_STORE_LIMIT beyond max_items (out->count then
   * holds how many match). create (writer) stores the job with the snapshot's deliveries
   * still in the filter's state, each with its id, attempt count and lease token, `chunk` of
   * them per call, so that no writer transaction holds the acks behind a long snapshot: called
   * with *from = 0 it refuses with HOOKD_STORE_CONFLICT when the tenant already has
   * HOOKD_REPLAY_ACTIVE_MAX jobs building, in preview, running or paused, or stores the job
   * (job->seq) in state `building`; each call stores snap->seqs[*from ..] up to `chunk` and
   * advances *from (job->total = items stored so far); the call that reaches snap->n makes it
   * a preview. HOOKD_STORE_STATE: the job is no longer building. Every item is checked again
   * when its turn comes. A job whose build stopped — replay_abandon after a failed chunk, or
   * nothing stored for HOOKD_REPLAY_BUILD_STALE_MS — is `failed`: ended, not counted. */
  int (*replay_select)(hookd_store_conn *c, const char *tenant_id, const hookd_replay_filter *f,
                       int64_t max_items, hookd_replay_snapshot *out);
  int (*replay_create)(hookd_store_conn *c, hookd_replay_job *job,
                       const hookd_replay_snapshot *snap, size_t *from, size_t chunk,
                       int64_t now_ms);
  /* A job still building whose create failed after a first chunk: ended as `failed`. */
  int (*replay_abandon)(hookd_store_conn *c, int64_t job_seq, int64_t now_ms);
  /* detail may be NULL. */
  int (*replay_get)(hookd_store_conn *c, const char *tenant_id, const char *id,
                    hookd_replay_job *out, hookd_replay_detail *detail);
  int (*replay_list)(hookd_store_conn *c, const char *tenant_id, const char *after_id, int limit,
                     hookd_replay_job **out, size_t *n);
  /* HOOKD_STORE_STATE (c's error says why) for a transition the job's state does not allow. A
   * preview older than HOOKD_REPLAY_PREVIEW_TTL_MS reads as state "expired" everywhere and
   * allows nothing: a refusal then writes it expired (whatever the clock reads next) and
   * answers HOOKD_STORE_OK with out->state "expired" and c's error saying why, for the caller
   * to refuse. out: the job after the transition. */
  int (*replay_act)(hookd_store_conn *c, const char *tenant_id, const char *id,
                    hookd_replay_action action, int64_t now_ms, hookd_replay_job *out);
  /* Moves each running job's due items (its rate, at most HOOKD_REPLAY_STEP_MAX) back to
   * pending like delivery_replay, or records why one was skipped; completes jobs left with
   * nothing (audited, actor "system"). */
  int (*replay_step)(hookd_store_conn *c, int64_t now_ms, hookd_replay_step_res *res);
  /* Deletes up to `limit` items of jobs that ended (or whose preview expired) before
   * before_ms; the job rows stay, marked items_purged_at. *more: there is more to delete. */
  int (*replay_purge)(hookd_store_conn *c, int64_t before_ms, int64_t now_ms, int limit,
                      int *purged, bool *more);
} hookd_store_backend;

/* The active key `id` among the keys read into *list (n of them; what *list held before — a
 * second run of a redone batch — freed first), or NULL with 0 (none, or revoked) or with the
 * read's error in *rc. The API's and the CLI's revoke. */
const hookd_api_key *hookd_api_key_find_active(hookd_store_conn *c, const hookd_store_backend *be,
                                               const char *id, hookd_api_key **list, size_t *n,
                                               int *rc);
/* Whether each tenant of a new key's scope (comma-separated; NULL: every tenant, nothing to
 * find) exists: 0, or HOOKD_STORE_NOTFOUND with the first that does not — never created, or
 * deleted (gone for good) — in missing, or the read's error. The API's and the CLI's create. */
int hookd_scope_tenants_exist(hookd_store_conn *c, const hookd_store_backend *be,
                              const char *scope, char *missing, size_t len);

/* ---------- an opened store ---------- */

typedef struct hookd_storeq hookd_storeq;

/* The backend's background work (SQLite: its checkpoints), for the daemon's logs and metrics. A
 * checkpoint that fails loses nothing (the WAL keeps every commit) but lets the WAL grow until
 * the disk is full: an operator must hear of it. */
typedef struct hookd_store_health {
  uint64_t checkpoint_failures; /* checkpoints that failed (a busy connection is no failure) */
  bool checkpoint_failing;      /* the last checkpoint failed */
  char checkpoint_error[160];   /* the last failure's text */
  int64_t wal_bytes;            /* the WAL in use: frames since it last started over */
  int64_t db_bytes;             /* the database file's size (SQLite; -1: not known) */
} hookd_store_health;

typedef struct hookd_store {
  const hookd_store_backend *be;
  void *shared;           /* backend state shared by its connections (path, checkpointer) */
  void (*shared_free)(void *shared);
  /* both optional: stop the backend's background work (final: after a last checkpoint), and
   * report on it */
  void (*shared_stop)(void *shared, bool final);
  void (*shared_health)(void *shared, hookd_store_health *out);
  hookd_storeq *writer;   /* group-committing executor */
  hookd_storeq *reader;   /* read executor */
  hookd_storeq *scan;     /* read executor for long scans (a replay job's snapshot), so that
                           * they hold up neither the writer nor the API's reads */
  int64_t schema_from, schema_to; /* the schema versions the open found and left (upgraded
                                   * when they differ; the daemon logs it) */
  int64_t migrate_ms;             /* how long the migrations took */
  char not_durable[200];          /* the backend's durability_check at the open ("": none; the
                                   * daemon warns of it) */
  void *watch;                    /* the change feed, when started (hookd_store_watch) */
  void (*watch_stop)(void *watch);
} hookd_store;

typedef struct hookd_store_config {
  const char *url;        /* "sqlite:PATH" or "postgresql://…" (docs/postgres.md) */
  int max_batch;          /* ops per group commit, default 512 */
  bool no_migrate;        /* the CLI: refuse a store whose schema is older than this hookd's
                             instead of migrating it (perhaps under a running daemon) */
  bool recover_wal;       /* the CLI, holding the store's lock (no daemon on it), about to
                             write: the backend's recover first */
  bool (*stop_requested)(void); /* asked while the open waits for another process to let go
                                 * of the store: true gives up (HOOKD_STORE_STOPPED); NULL never */
  const char *node_id;    /* a daemon's --node-id (NULL: the CLI). A shared store (PostgreSQL)
                             refuses a second live node of the same id: its leases are the
                             node's */
  int wait_s;             /* PostgreSQL: how long to wait for a server that cannot be reached
                             or rejects connections yet, and then for the node id's lock
                             another session holds (0: not at all) */
  void (*waiting)(const char *reason, int wait_s); /* told once as each wait starts */
  void (*migrating)(int64_t from, int64_t to); /* told as an upgrade's migrations begin (a long
                                                  one is silent until it ends otherwise) */
  const char *expect_key_id; /* the master key's id the start will use (NULL: not checked; "":
                                none usable, no_key_why says why): a store whose secrets another
                                key sealed, or that holds any with none usable, is refused
                                before it is migrated (docs/architecture.md "Upgrades") */
  const char *no_key_why;
} hookd_store_config;

/* Where sealed values are stored ({table, column}: an endpoint's secret, previous secret and
 * headers, a source's secrets), for the backends' first_sealed, and the statement reading one of
 * them (each column in every schema version that has it: a backend skips one its store lacks).
 * The statement is written to sql (cap bytes). */
#define HOOKD_SEALED_COLUMNS 4
extern const char *const hookd_sealed_columns[HOOKD_SEALED_COLUMNS][2];
void hookd_sealed_column_sql(size_t i, char *sql, size_t cap);

/* Whether url names a PostgreSQL store (postgresql:// or postgres://: docs/postgres.md). */
bool hookd_store_is_postgres(const char *url);
/* A store URL hookd can open (sqlite:PATH, a file's path; postgresql://… or postgres://…): 0, or
 * -1 with err saying why (never repeating a text that may hold a password). */
int hookd_store_url_check(const char *url, char *err, size_t errlen);
/* url as logs may show it: a PostgreSQL URL's user, host, port and database only. */
void hookd_store_url_shown(const char *url, char *out, size_t cap);

/* One hookd per embedded store: takes an exclusive advisory lock (flock) on the SQLite database
 * file itself, creating it (0600) if needed, so every name of the file on a local file system —
 * another spelling, a symlink, a hard link — meets the same lock (a second process would release
 * the first one's leases and send its deliveries again); and the `<path>.lock` file earlier
 * versions locked, so a daemon of an older version is refused too. Nothing for stores shared by
 * design (PostgreSQL). Returns 0, or -1 with err ("another hookd is running on PATH" when held).
 * Release with hookd_store_unlock only after the store is closed: closing any descriptor of the
 * database file drops SQLite's own POSIX locks. */
/* An embedded store's path before anything is opened or made there: -1 with err saying why when
 * it names a directory, a device or a pipe, or when its directory cannot be written (below); 0
 * otherwise (a regular file, or none yet), and for other stores. Shared by the lock (the
 * daemon's start, the CLI's writes) and the CLI's check of an existing store. */
int hookd_store_file_check(const char *url, char *err, size_t errlen);
/* SQLite makes a store's -wal and -shm files beside its database: -1 with err naming the
 * directory when this user cannot write it and they are not both there (a review: "attempt to
 * write a readonly database" said nothing of it). 0 otherwise, and for other stores. */
int hookd_store_dir_check(const char *url, char *err, size_t errlen);
typedef struct hookd_store_lockset {
  int db_fd, legacy_fd; /* -1 when not held */
  void *pg;             /* hookd_store_lock_offline on a PostgreSQL store: its connection */
} hookd_store_lockset;
int hookd_store_lock(const char *url, hookd_store_lockset *out, char *err, size_t errlen);
/* A SQLite store's database missing beside `<path><suffix>`, not empty ("-wal"; the daemon asks
 * for ".key" when that is the store's own key): the remains of a store, not a place for a new
 * one — made there, a start would go on empty, every tenant and event gone (a review: a restart
 * after an `rm` did so). -1 with err naming both, else 0 (and for any other store). */
int hookd_store_remains(const char *url, const char *suffix, char *err, size_t errlen);
/* The same for a CLI command that must not run beside any hookd (a master-key rotation): on a
 * PostgreSQL store, refused while a node runs on it, and no node starts until the unlock
 * (docs/postgres.md). */
int hookd_store_lock_offline(const char *url, hookd_store_lockset *out, char *err,
                             size_t errlen);
void hookd_store_unlock(hookd_store_lockset *l);
/* hookd_store_lock for a CLI command that may run beside a daemon (keys create, revoke): only
 * on an embedded store whose lock files a daemon made already (made by root here, a daemon
 * running as another user could not open them). true when held: no daemon runs on it. */
bool hookd_store_lock_if_free(const char *url, hookd_store_lockset *out);
/* Opens the store named by cfg->url, applies migrations, starts the executors. */
int hookd_store_open(const hookd_store_config *cfg, hookd_store **out, char *err, size_t errlen);
/* Shutting down: fails the long scans running on the scan executor now (backend->interrupt),
 * so that the requests waiting on them are answered (503) instead of holding the drain. Ops
 * started after the call run normally: call it again while draining. */
void hookd_store_interrupt_scans(hookd_store *s);
/* The backend's background work now (all zero for a backend without any). */
void hookd_store_health_get(hookd_store *s, hookd_store_health *out);
/* A shared store's retention indexes (docs/postgres.md "Retention's indexes"): a walk whose
 * index is missing does nothing and asks for it; this builds what was asked, a step at a time
 * (the main thread's, at each round of its loop), without a lock that stops the writers. 1:
 * every index asked for is ready now (the walks may run again at once); 0: nothing new (always
 * on SQLite, whose walks make their indexes themselves); -1: a build failed (err; tried again
 * later). */
int hookd_store_indexes_step(hookd_store *s, char *err, size_t errlen);
/* A shared store's change feed (docs/postgres.md "Several nodes"): changed(arg, what) is called
 * from a thread of the store's own — HOOKD_STORE_WATCH_CHANGE soon after a change to the
 * endpoints or tenants, or a node's first clock check, commits (any node's, this one's
 * included), HOOKD_STORE_WATCH_UP when it
 * listens (at start, and after a reconnect: what was sent meanwhile is lost), and
 * HOOKD_STORE_WATCH_DOWN when its link fails (it reconnects by itself), and
 * HOOKD_STORE_WATCH_KEYS soon after a change to the API keys or sources commits (instead of
 * HOOKD_STORE_WATCH_CHANGE: the endpoints need no rescan for it), and
 * HOOKD_STORE_WATCH_PURGED with the event's seq soon after an event's payload was deleted
 * through the API (any node's): what a node claimed of it and has not sent is given back. seq
 * is 0 but for HOOKD_STORE_WATCH_PURGED. Returns 0 (started), 1 (none for this store: SQLite
 * has one node), or -1 with err. */
enum { HOOKD_STORE_WATCH_CHANGE = 0, HOOKD_STORE_WATCH_UP = 1, HOOKD_STORE_WATCH_DOWN = 2,
       HOOKD_STORE_WATCH_KEYS = 3, HOOKD_STORE_WATCH_PURGED = 4 };
int hookd_store_watch(hookd_store *s, void (*changed)(void *arg, int what, int64_t seq),
                      void *arg, char *err, size_t errlen);
/* Stops the change feed (joined: no call after it returns); nothing when none runs. */
void hookd_store_unwatch(hookd_store *s);
/* Drains the executors and closes everything (the change feed first). */
void hookd_store_close(hookd_store *s);
/* The same, and *final (if not NULL) says how the last checkpoint went: a failed one leaves the
 * WAL for the next start, which copies it before writing anything. */
void hookd_store_close_checked(hookd_store *s, hookd_store_health *final);

#endif

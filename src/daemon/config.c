/* config.c — the option table and its three sources (flags, environment, file). */
#include "daemon/config.h"
#include "daemon/server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <libpq-fe.h>
#include <openssl/crypto.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "core/ids.h"
#include "core/num.h"
#include "daemon/destination.h"
#include "daemon/log.h"
#include "egress/urlpolicy.h"
#include "store/store.h"

typedef enum { T_STR, T_INT, T_I64, T_SIZE, T_BOOL, T_LIST, T_LISTEN, T_MS_FROM_S, T_LEVEL } opt_type;

typedef struct opt {
  const char *name;  /* flag without "--", config-file key */
  const char *env;   /* environment variable; NULL = HOOKD_ + the name, upper case, '_' for '-' */
  opt_type type;
  size_t off;        /* offset in hookd_config */
  size_t size;       /* buffer size for T_STR; list count offset for T_LIST */
  long long min, max;
  const char *arg, *help;
  unsigned char secret; /* SECRET_*: its value is a credential (warned of, wiped from the env) */
} opt;

enum { SECRET_NONE, SECRET_ALWAYS, SECRET_URL /* when it holds a password */ };


/* Every option has its environment variable: the table's, else one named after the option. */
static const char *env_name(const opt *o, char *buf, size_t n) {
  if (o->env) return o->env;
  size_t k = (size_t)snprintf(buf, n, "HOOKD_");
  for (const char *p = o->name; *p && k + 1 < n; p++)
    buf[k++] = *p == '-' ? '_' : (char)toupper((unsigned char)*p);
  buf[k] = '\0';
  return buf;
}

#define OFF(f) offsetof(hookd_config, f)
#define SZ(f) sizeof(((hookd_config *)0)->f)

/* (an option's fields left out are zero: `secret` is written only where it is set) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const opt opts[] = {
    {"listen", "HOOKD_LISTEN", T_LISTEN, 0, 0, 0, 0, "HOST:PORT",
     "address of the HTTP API and /in/ endpoints (port 0 = any free port)"},
    {"store", "HOOKD_STORE", T_STR, OFF(store_url), SZ(store_url), 0, 0, "URL",
     "storage: sqlite:PATH (embedded default) or postgresql://…; a URL with a password: give "
     "it through HOOKD_STORE, a --config file or libpq's PGPASSWORD / .pgpass — a command line "
     "is visible to every local user", SECRET_URL},
    {"api-key", "HOOKD_API_KEY", T_STR, OFF(api_key), SZ(api_key), 0, 0, "KEY",
     "bootstrap admin API key (else one is generated at first start and printed once); give it "
     "through HOOKD_API_KEY or a --config file: a command line is visible to every local user",
     SECRET_ALWAYS},
    {"master-key-file", "HOOKD_MASTER_KEY_FILE", T_STR, OFF(master_key_file),
     SZ(master_key_file), 0, 0, "PATH",
     "master key (base64 of 32 bytes) that seals signing secrets at rest; HOOKD_MASTER_KEY may "
     "hold the key itself. Must exist; without either, DB.key next to the database is used, "
     "created at the first start"},
    {"node-id", "HOOKD_NODE_ID", T_STR, OFF(node_id), SZ(node_id), 0, 0, "ID",
     "name of this node in leases (unique per node sharing a store)"},
    {"egress-allow", "HOOKD_EGRESS_ALLOW", T_LIST, OFF(egress_allow), OFF(n_egress_allow), 0, 0,
     "CIDR", "allow destinations in this range despite the SSRF policy (repeatable; env: "
             "comma-separated)"},
    {"allow-private-networks", "HOOKD_ALLOW_PRIVATE_NETWORKS", T_BOOL,
     OFF(allow_private_networks), 0, 0, 0, "",
     "allow private, unique-local and CGNAT destinations (development; loopback needs "
     "--egress-allow 127.0.0.0/8; link-local, cloud metadata and the other special ranges stay "
     "forbidden)"},
    {"allow-http", "HOOKD_ALLOW_HTTP", T_BOOL, OFF(allow_http), 0, 0, 0, "",
     "allow plain http:// destinations (default: https only)"},
    {"dashboard-frame-ancestors", "HOOKD_DASHBOARD_FRAME_ANCESTORS", T_STR, OFF(frame_ancestors),
     SZ(frame_ancestors), 0, 0, "ORIGINS",
     "origins that may show the dashboard in a frame (a customer portal embedded in your app), "
     "blank-separated: https://app.example.com https://*.example.com (default: none)"},
    {"svix-headers", "HOOKD_SVIX_HEADERS", T_BOOL, OFF(svix_headers), 0, 0, 0, "",
     "outbound deliveries carry svix-id, svix-timestamp and svix-signature beside the "
     "webhook-* headers, with the same values (receivers migrated from Svix that read them)"},
    {"egress-ca-file", "HOOKD_EGRESS_CA_FILE", T_STR, OFF(egress_ca_file), SZ(egress_ca_file), 0,
     0, "PATH", "PEM bundle of the CAs trusted for HTTPS destinations, instead of the system's "
                "(a private CA of internal endpoints)"},
    {"egress-proxy", "HOOKD_EGRESS_PROXY", T_STR, OFF(egress_proxy), SZ(egress_proxy), 0, 0,
     "URL", "send deliveries through this proxy (its own address is not judged by the "
            "destination policy; the proxy must enforce that policy for the hop it makes)",
     SECRET_URL},
    {"egress-ports", "HOOKD_EGRESS_PORTS", T_STR, OFF(egress_ports), SZ(egress_ports), 0, 0,
     "LIST", "destination ports allowed: comma-separated, or \"any\""},
    {"resolve", NULL, T_LIST, OFF(resolve), OFF(n_resolve), 0, 0, "HOST:PORT:ADDR",
     "pin a name to an address for deliveries (curl --resolve syntax; development and tests; "
     "env: blank-separated)"},
    {"resolve-file", NULL, T_STR, OFF(resolve_file), SZ(resolve_file), 0, 0, "PATH",
     "--resolve entries, one per line, re-read whenever the file changes (tests of DNS "
     "rebinding; development)"},
    {"max-in-flight", "HOOKD_MAX_IN_FLIGHT", T_INT, OFF(max_in_flight), 0, 1, 100000, "N",
     "deliveries in flight at once, all endpoints"},
    {"tenant-max-in-flight", NULL, T_INT, OFF(tenant_max_in_flight), 0, 1, 100000, "N",
     "deliveries in flight at once for one tenant, unless the tenant sets max_in_flight"},
    {"disable-failing-after-s", NULL, T_I64, OFF(disable_failing_after_s), 0, 0, 315360000, "S",
     "disable an endpoint that has failed without a success for this long (0 = never)"},
    {"shutdown-grace-s", NULL, T_INT, OFF(shutdown_grace_s), 0, 0, 3600, "S",
     "at shutdown, requests still in flight after this are abandoned and recorded as timed out "
     "(retried after the restart)"},
    {"max-store-queue", NULL, T_INT, OFF(max_store_queue), 0, 100, 10000000, "N",
     "publish and /in/ answer 503 with Retry-After while more store writes than this wait"},
    {"max-reads-per-key", NULL, T_INT, OFF(max_reads_per_key), 0, 1, 100000, "N",
     "API reads (lists, searches, gets) of one API key waiting for the store at once; more are "
     "answered 429 with Retry-After"},
    {"breaker-window-ms", NULL, T_I64, OFF(breaker_window_ms), 0, 100, 3600000, "MS",
     "circuit breaker: outcomes are counted over this window"},
    {"breaker-min-requests", NULL, T_INT, OFF(breaker_min_requests), 0, 1, 100000, "N",
     "circuit breaker: fewest outcomes in the window before it may open"},
    {"breaker-failure-percent", NULL, T_INT, OFF(breaker_failure_percent), 0, 1, 100, "P",
     "circuit breaker: opens when at least this share of the window's outcomes failed"},
    {"breaker-cooldown-ms", NULL, T_I64, OFF(breaker_cooldown_ms), 0, 100, 3600000, "MS",
     "circuit breaker: time open before a probe is let through"},
    {"default-max-in-flight", NULL, T_INT, OFF(default_max_in_flight), 0, 1, 10000, "N",
     "per-endpoint concurrency when the endpoint does not set max_in_flight"},
    {"default-timeout-ms", NULL, T_INT, OFF(default_timeout_ms), 0, 100, 300000, "MS",
     "total request timeout when the endpoint does not set timeout_ms"},
    {"max-timeout-ms", NULL, T_INT, OFF(max_timeout_ms), 0, 100, 300000, "MS",
     "largest timeout_ms an endpoint may set"},
    {"connect-timeout-ms", NULL, T_INT, OFF(connect_timeout_ms), 0, 100, 120000, "MS",
     "TCP + TLS connect timeout"},
    {"egress-conn-max-age-s", NULL, T_INT, OFF(egress_conn_max_age_s), 0, 1, 86400, "S",
     "a kept-alive delivery connection is not reused once older than this: a receiver's DNS "
     "change, or a --resolve pin changed, reaches its deliveries within it (and a second)"},
    {"max-response-bytes", NULL, T_SIZE, OFF(max_response_bytes), 0, 1024, 16 << 20, "BYTES",
     "read at most this much of a response body (4 KiB of it is kept)"},
    {"lease-margin-ms", NULL, T_INT, OFF(lease_margin_ms), 0, 1000, 3600000, "MS",
     "a claim's lease lasts twice the endpoint's timeout (a wait for a slot, then the "
     "request) plus this margin"},
    {"rescan-interval-ms", NULL, T_INT, OFF(rescan_interval_ms), 0, 100, 3600000, "MS",
     "how often the dispatcher reads every endpoint's due work back from the store (work "
     "another node published or left: docs/postgres.md)"},
    {"store-wait-s", NULL, T_INT, OFF(store_wait_s), 0, 0, 3600, "S",
     "PostgreSQL store: how long a start waits for a server that cannot be reached or rejects "
     "connections yet (started together, restarting), and for the node id's lock a session "
     "the server has not ended yet holds (the node's previous run); 0: not at all"},
    {"reload-interval-ms", NULL, T_INT, OFF(reload_interval_ms), 0, 100, 3600000, "MS",
     "how often API keys and sources are read back from the store (changes `hookd keys` or "
     "another node made; a SIGHUP, and a shared store's change feed, read them at once)"},
    {"no-change-feed", "HOOKD_NO_CHANGE_FEED", T_BOOL, OFF(no_change_feed), 0, 0, 0, "",
     "PostgreSQL store: do not LISTEN for the changes other nodes make (a server that "
     "refuses LISTEN); they then arrive at the next rescan. A pooler must be in session mode"},
    {"retry-max-attempts", NULL, T_INT, OFF(policy.max_attempts), 0, 1, 1000, "N",
     "default retry policy: attempts per delivery"},
    {"retry-base-ms", NULL, T_I64, OFF(policy.base_ms), 0, 1, 86400000, "MS",
     "default retry policy: first backoff ceiling (full jitter)"},
    {"retry-cap-ms", NULL, T_I64, OFF(policy.cap_ms), 0, 1, 86400000, "MS",
     "default retry policy: largest backoff ceiling"},
    {"retry-max-age-s", NULL, T_MS_FROM_S, OFF(policy.max_age_ms), 0, 1, 31536000, "S",
     "default retry policy: a delivery whose retry cycle is older than this goes DEAD at its "
     "next failed attempt (one held by an open breaker waits for its probe; it is not dropped "
     "unattempted)"},
    {"retry-after-cap-s", NULL, T_MS_FROM_S, OFF(policy.retry_after_cap_ms), 0, 0, 31536000, "S",
     "default retry policy: longest Retry-After honoured"},
    {"retry-statuses", NULL, T_STR, OFF(retry_statuses), SZ(retry_statuses), 0, 0, "LIST",
     "default retry policy: 4xx statuses retried instead of final, comma-separated (e.g. "
     "401,404: Svix retries every non-2xx; 408 and 429 are retried anyway; 410 listed is retried "
     "instead of disabling the endpoint)"},
    {"event-ttl-s", NULL, T_I64, OFF(event_ttl_s), 0, 0, 315360000, "S",
     "events expire (undelivered deliveries go DEAD) after this; 0 = never"},
    {"max-body-bytes", "HOOKD_MAX_BODY_BYTES", T_SIZE, OFF(max_body_bytes), 0, 64, 64 << 20,
     "BYTES", "largest request body accepted (413 beyond)"},
    {"max-buffered-bytes", NULL, T_SIZE, OFF(max_buffered_bytes), 0, 64, 1LL << 40, "BYTES",
     "request bodies held while they arrive, all connections together (503 and Retry-After "
     "beyond; one client address: an eighth of it, at least --max-body-bytes); at least "
     "--max-body-bytes"},
    {"max-claimed-bytes", NULL, T_SIZE, OFF(max_claimed_bytes), 0, 0, 1LL << 40, "BYTES",
     "bodies the dispatcher holds for claimed deliveries, all tenants together (each tenant "
     "keeps its weighted share); 0 = bounded by counts only"},
    {"max-json-depth", NULL, T_INT, OFF(max_json_depth), 0, 2, 1000, "N",
     "deepest JSON nesting accepted"},
    {"max-endpoints-per-tenant", NULL, T_INT, OFF(max_endpoints_per_tenant), 0, 1, 1000000, "N",
     "endpoints a tenant may register"},
    {"max-event-types", NULL, T_INT, OFF(max_event_types), 0, 1, 10000, "N",
     "entries in an endpoint's event-type filter"},
    {"max-url-length", NULL, T_SIZE, OFF(max_url_len), 0, 64, 65536, "N",
     "longest destination URL and request path"},
    {"max-headers", NULL, T_INT, OFF(max_headers), 0, 1, 10000, "N",
     "request headers accepted (431 beyond)"},
    {"max-header-bytes", NULL, T_SIZE, OFF(max_header_bytes), 0, 4096, 65536, "BYTES",
     "request line plus headers (431 beyond); also each connection's memory"},
    {"header-timeout-s", NULL, T_INT, OFF(header_timeout_s), 0, 1, 3600, "S",
     "close a client connection idle this long, or whose request head (line and headers) has "
     "not arrived whole this long after the connection's start or its last request's end"},
    {"request-timeout-s", NULL, T_INT, OFF(request_timeout_s), 0, 1, 3600, "S",
     "a request must arrive whole (line, headers, body) within this; 408 beyond"},
    {"max-connections-per-ip", NULL, T_INT, OFF(max_connections_per_ip), 0, 0, 1000000, "N",
     "concurrent client connections from one address; more are closed at once (0 = no limit: "
     "behind a proxy or load balancer every client has its address)"},
    {"max-connections", NULL, T_INT, OFF(max_connections), 0, 1, 1000000, "N",
     "concurrent client connections"},
    {"store-batch", NULL, T_INT, OFF(store_batch), 0, 1, 100000, "N",
     "most writes per group commit"},
    {"metrics-token", "HOOKD_METRICS_TOKEN", T_STR, OFF(metrics_token), SZ(metrics_token), 0, 0,
     "TOKEN", "/metrics answers only requests with \"Authorization: Bearer TOKEN\" (unset: "
              "anyone who reaches the port; prefer the environment to the command line)",
     SECRET_ALWAYS},
    {"ops-tenant", "HOOKD_OPS_TENANT", T_STR, OFF(ops_tenant), SZ(ops_tenant), 0, 0, "ID",
     "publish operational events (delivery.dead, endpoint.disabled of the other tenants) as "
     "events of this tenant, delivered to its endpoints (docs/api.md \"Operational events\")"},
    {"public-url", "HOOKD_PUBLIC_URL", T_STR, OFF(public_url), SZ(public_url), 0, 0, "URL",
     "the base URL providers use to reach /in/ (e.g. https://hooks.example.com); providers that "
     "sign the URL (Twilio) are verified against it. Default: http:// + the Host header"},
    {"payload-retention-s", NULL, T_I64, OFF(payload_retention_s), 0, 0, 315360000, "S",
     "empty the payload of an outbound event this long after it was published, once every "
     "delivery of it is settled (delivered, DEAD, cancelled); it can no longer be replayed; "
     "0 = keep payloads"},
    {"event-retention-s", NULL, T_I64, OFF(event_retention_s), 0, 0, 315360000, "S",
     "delete an outbound event this long after it was published, with its deliveries and their "
     "attempts (the audit window), once every delivery of it is settled and untouched for as "
     "long; its id can then be published again; 0 = keep events"},
    {"inbox-retention-s", NULL, T_I64, OFF(inbox_retention_s), 0, 345600, 315360000, "S",
     "keep inbound dedup records this long: at least 4 days, longer than any provider's "
     "redelivery window (Stripe: 3 days) — a redelivery after it is forwarded again"},
    {"max-replay-items", NULL, T_I64, OFF(max_replay_items), 0, 1, 100000, "N",
     "most deliveries one replay job may take (a filter matching more is refused with its "
     "count)"},
    {"outbox-url", "HOOKD_OUTBOX_URL", T_STR, OFF(outbox_url), SZ(outbox_url), 0, 0, "CONNINFO",
     "relay the transactional outbox of this PostgreSQL database (a libpq connection string or "
     "URI; docs/outbox.md) into the engine; it may hold a password: prefer the environment or "
     "a --config file to the command line", SECRET_URL},
    {"outbox-table", NULL, T_STR, OFF(outbox_table), SZ(outbox_table), 0, 0, "NAME",
     "the outbox table ([schema.]name of lower-case letters, digits and '_')"},
    {"outbox-batch", NULL, T_INT, OFF(outbox_batch), 0, 1, 1000, "N",
     "most outbox rows relayed per transaction"},
    {"outbox-poll-ms", NULL, T_INT, OFF(outbox_poll_ms), 0, 100, 60000, "MS",
     "how often the relay looks at the outbox without a notification"},
    {"log-level", "HOOKD_LOG_LEVEL", T_LEVEL, OFF(log_level), 0, 0, 0, "LEVEL",
     "debug, info, warn or error"},
};
#pragma GCC diagnostic pop
#define NOPTS (sizeof opts / sizeof opts[0])

void hookd_config_defaults(hookd_config *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->listen_host, sizeof c->listen_host, "127.0.0.1");
  c->listen_port = 8080;
  c->header_timeout_s = 10;
  c->request_timeout_s = 60;
  c->max_connections = 4096;
  snprintf(c->store_url, sizeof c->store_url, "sqlite:hookd.db");
  c->store_batch = 512;
  snprintf(c->node_id, sizeof c->node_id, "local");
  c->max_body_bytes = 1 << 20;
  c->max_buffered_bytes = 256 << 20;
  c->max_claimed_bytes = (size_t)256 << 20;
  c->max_json_depth = 32;
  c->max_endpoints_per_tenant = 1000;
  c->max_event_types = 64;
  c->max_url_len = 2048;
  c->max_headers = 100;
  c->max_header_bytes = 16 * 1024; /* also libmicrohttpd's per-connection pool, zeroed per
                                     request: bigger costs every request (bench/) */
  c->max_in_flight = 1024;
  c->tenant_max_in_flight = 256;
  c->disable_failing_after_s = 5LL * 24 * 3600;
  c->shutdown_grace_s = 10;
  c->max_store_queue = 20000;
  c->max_reads_per_key = 32;
  c->breaker_window_ms = 60000;
  c->breaker_min_requests = 10;
  c->breaker_failure_percent = 50;
  c->breaker_cooldown_ms = 30000;
  c->default_max_in_flight = 16;
  c->default_timeout_ms = 15000;
  c->max_timeout_ms = 60000;
  c->connect_timeout_ms = 5000;
  c->egress_conn_max_age_s = 300;
  c->max_response_bytes = 64 * 1024;
  c->lease_margin_ms = 30000;
  c->rescan_interval_ms = 30000;
  c->reload_interval_ms = 2000;
  c->store_wait_s = 30;
  hookd_retry_policy_defaults(&c->policy);
  c->log_level = HOOKD_LOG_INFO;
  c->inbox_retention_s = 30LL * 24 * 3600;
  c->max_replay_items = 100000;
  snprintf(c->outbox_table, sizeof c->outbox_table, "hookd_outbox");
  c->outbox_batch = 500; /* one group commit (--store-batch 512); bench/outbox.sh */
  c->outbox_poll_ms = 1000;
}

void hookd_config_free(hookd_config *c) {
  for (size_t i = 0; i < c->n_egress_allow; i++) free(c->egress_allow[i]);
  for (size_t i = 0; i < c->n_resolve; i++) free(c->resolve[i]);
  c->n_egress_allow = c->n_resolve = 0;
}

static const opt *find_opt(const char *name, size_t len) {
  for (size_t i = 0; i < NOPTS; i++)
    if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0) return &opts[i];
  return NULL;
}

static int list_add(hookd_config *c, const opt *o, const char *v, char *err, size_t errlen) {
  char **list = (char **)((char *)c + o->off);
  size_t *n = (size_t *)((char *)c + o->size);
  if (*n >= HOOKD_CFG_LIST_MAX) {
    snprintf(err, errlen, "--%s: at most %d entries", o->name, HOOKD_CFG_LIST_MAX);
    return -1;
  }
  if (!(list[*n] = strdup(v))) return -1;
  (*n)++;
  return 0;
}

/* Whether --name is among the flags (as "--name VALUE" or "--name=VALUE"). */
static bool flag_given(int argc, char **argv, const char *name) {
  size_t n = strlen(name);
  for (int i = 0; i < argc; i++)
    if (!strncmp(argv[i], "--", 2) && !strncmp(argv[i] + 2, name, n) &&
        (argv[i][2 + n] == '\0' || argv[i][2 + n] == '='))
      return true;
  return false;
}

/* Applies one value; from_env splits lists on commas. */
static int apply(hookd_config *c, const opt *o, const char *v, int from_env, char *err,
                 size_t errlen) {
  char *field = (char *)c + o->off;
  long long ll;
  switch (o->type) {
  case T_STR:
    /* `--metrics-token "$TOKEN"` with the variable unset would open /metrics to anyone; an
     * empty key file, admin key or store would be read as none given: a master key created
     * beside the database, an admin key printed to the journal, a new store */
    if (!*v && !strcmp(o->name, "metrics-token")) {
      snprintf(err, errlen, "--%s: empty (it would leave /metrics open to anyone; leave the "
               "option out for that)", o->name);
      return -1;
    }
    if (!*v && (!strcmp(o->name, "master-key-file") || !strcmp(o->name, "api-key") ||
                !strcmp(o->name, "store"))) {
      snprintf(err, errlen, "--%s: empty (leave the option out for its default)", o->name);
      return -1;
    }
    if (strlen(v) >= o->size) {
      snprintf(err, errlen, "--%s: value too long", o->name);
      return -1;
    }
    /* a key, token, URL or path read from a file or a secret keeps that file's line end
     * (HOOKD_API_KEY from a secret written with echo): kept, it was a key no request could
     * match, a new empty database beside the real one — refused, saying so. (A libpq
     * "key=value" conninfo takes blanks and line ends as separators: left to libpq.) */
    bool conninfo = o->arg && !strcmp(o->arg, "CONNINFO");
    for (const char *p = v; !conninfo && *p; p++)
      if ((unsigned char)*p < 0x20 || *p == 0x7f) {
        snprintf(err, errlen, "--%s: holds a control character (the line end of a file or "
                 "secret it was read from?)", o->name);
        return -1;
      }
    if (!conninfo && *v && (*v == ' ' || v[strlen(v) - 1] == ' ')) {
      snprintf(err, errlen, "--%s: begins or ends with a blank", o->name);
      return -1;
    }
    snprintf(field, o->size, "%s", v);
    return 0;
  case T_INT:
  case T_I64:
  case T_SIZE:
  case T_MS_FROM_S:
    if (hookd_parse_ll(v, o->min, o->max, &ll) != 0) {
      snprintf(err, errlen, "--%s: expected an integer in [%lld, %lld], got \"%.40s\"", o->name,
               o->min, o->max, v);
      return -1;
    }
    if (o->type == T_I64) {
      *(int64_t *)field = ll;
    } else if (o->type == T_INT) {
      *(int *)field = (int)ll;
    } else if (o->type == T_SIZE) {
      *(size_t *)field = (size_t)ll;
    } else {
      *(int64_t *)field = ll * 1000;
    }
    return 0;
  case T_BOOL:
    /* (a bare flag is given "true"; an empty value — "--allow-http=", "allow-http =" — is
     * not "on": it is refused) */
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes")) *(bool *)field = true;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no")) *(bool *)field = false;
    else {
      snprintf(err, errlen, "--%s: expected true or false", o->name);
      return -1;
    }
    return 0;
  case T_LIST: {
    if (!from_env) return list_add(c, o, v, err, errlen);
    /* the variable holds several items: comma-separated, blanks around them dropped — but a
     * --resolve item has commas of its own (several addresses): those are blank-separated */
    const char *seps = o->off == OFF(resolve) ? " \t" : ",";
    for (const char *p = v; *p;) {
      while (*p == ' ' || *p == '\t') p++;
      const char *e = p + strcspn(p, seps);
      size_t len = (size_t)(e - p);
      while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
      if (!*e) e = NULL;
      char item[256];
      if (len >= sizeof item) { /* refused, as the same item given by flag is */
        snprintf(err, errlen, "--%s: an item longer than %zu bytes", o->name, sizeof item - 1);
        return -1;
      }
      if (len) {
        memcpy(item, p, len);
        item[len] = '\0';
        if (list_add(c, o, item, err, errlen) != 0) return -1;
      }
      if (!e) break;
      p = e + 1;
    }
    return 0;
  }
  case T_LISTEN: {
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v || hookd_parse_ll(colon + 1, 0, 65535, &ll) != 0 ||
        (size_t)(colon - v) >= sizeof c->listen_host) {
      snprintf(err, errlen, "--listen: expected HOST:PORT, got \"%.60s\"", v);
      return -1;
    }
    const char *h = v;
    size_t hl = (size_t)(colon - v);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') h++, hl -= 2;
    if (!hl) { /* "[]:80" */
      snprintf(err, errlen, "--listen: expected HOST:PORT, got \"%.60s\" (no host)", v);
      return -1;
    }
    memcpy(c->listen_host, h, hl);
    c->listen_host[hl] = '\0';
    c->listen_port = (int)ll;
    return 0;
  }
  case T_LEVEL: {
    int lvl = hookd_log_parse_level(v);
    if (lvl < 0) {
      snprintf(err, errlen, "--log-level: expected debug, info, warn or error");
      return -1;
    }
    c->log_level = lvl;
    return 0;
  }
  }
  return -1;
}

/* Empties a list option (a later source replaces an earlier one's list). */
static void list_clear(hookd_config *c, const opt *o) {
  char **list = (char **)((char *)c + o->off);
  size_t *n = (size_t *)((char *)c + o->size);
  for (size_t k = 0; k < *n; k++) free(list[k]);
  *n = 0;
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  size_t n = strlen(s);
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

/* An SQL name hookd writes into its statements (quoted: "order" is a name too): [schema.]name,
 * each part [a-z_][a-z0-9_]* (nothing to inject). */
static bool table_name_ok(const char *s) {
  size_t part = 0, parts = 1;
  for (const char *p = s; *p; p++) {
    if (*p == '.') {
      if (!part || ++parts > 2) return false;
      part = 0;
      continue;
    }
    bool digit = *p >= '0' && *p <= '9';
    if (!((*p >= 'a' && *p <= 'z') || *p == '_' || (digit && part))) return false;
    part++;
  }
  return part > 0 && strlen(s) <= 120;
}

/* Read by libcurl's URL parser, as the egress will read it: a host, and for a proxy a scheme
 * among http, https, socks4, socks4a, socks5, socks5h (none: curl's http) and no path; else
 * http or https. */
static bool url_ok(const char *u, bool proxy, char *scheme_out, size_t scheme_cap) {
  static const char *const schemes[] = {"http", "https", "socks4", "socks4a", "socks5", "socks5h"};
  CURLU *h = curl_url();
  char *scheme = NULL, *host = NULL, *path = NULL;
  bool ok = h && curl_url_set(h, CURLUPART_URL, u,
                         proxy ? CURLU_DEFAULT_SCHEME | CURLU_NON_SUPPORT_SCHEME : 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
            curl_url_get(h, CURLUPART_HOST, &host, 0) == CURLUE_OK && host[0] &&
            curl_url_get(h, CURLUPART_PATH, &path, 0) == CURLUE_OK &&
            (!proxy || !strcmp(path, "/"));
  /* the public URL: shown to every viewer of a source and joined to "/in/{source}" — no
   * credentials, query or fragment, even empty ones libcurl reports as none (a proxy's URL may
   * carry credentials: never shown) */
  if (!proxy && strpbrk(u, "?#@")) ok = false;
  bool known = false;
  for (size_t i = 0; ok && i < (proxy ? sizeof schemes / sizeof schemes[0] : 2); i++)
    known |= !strcasecmp(scheme, schemes[i]);
  if (scheme_out) snprintf(scheme_out, scheme_cap, "%s", ok && scheme ? scheme : "");
  curl_free(scheme);
  curl_free(host);
  curl_free(path);
  curl_url_cleanup(h);
  return ok && known;
}

/* Cuts an unquoted config-file value (or a flag line) at its comment: a '#' after a blank; a
 * '#' inside a word, or leading the value, is the value's (`api-key = #K3y`). */
static void cut_comment(char *v) {
  for (char *h = strchr(v, '#'); h; h = strchr(h + 1, '#'))
    if (h > v && (h[-1] == ' ' || h[-1] == '\t')) {
      *h = '\0';
      return;
    }
}

/* Whether s (len bytes) is an origin a CSP's frame-ancestors may name: http(s)://, a host of
 * letters, digits, '-' and '.' (or "*." before one), an optional :port — nothing that could
 * end the directive or add another (';', ',', quotes, blanks). */
static bool frame_origin(const char *s, size_t len) {
  size_t i = !strncmp(s, "https://", 8) ? 8 : !strncmp(s, "http://", 7) ? 7 : 0;
  if (!i || i >= len) return false;
  if (len - i > 2 && s[i] == '*' && s[i + 1] == '.') i += 2;
  size_t host = i;
  while (i < len && (isalnum((unsigned char)s[i]) || s[i] == '-' || s[i] == '.')) i++;
  if (i == host || s[i - 1] == '.') return false;
  if (i < len && s[i] == ':') {
    size_t port = ++i;
    while (i < len && isdigit((unsigned char)s[i])) i++;
    if (i == port || i - port > 5) return false;
  }
  return i == len;
}

/* Whether a URL's authority has a password (user:password@host): a user alone is none (a review:
 * postgresql://hookd@db/hookd was warned of). */
static bool url_password(const char *val) {
  const char *s = strstr(val, "://");
  if (!s) return strchr(val, '@') != NULL; /* (not a URL: read as one might hold it) */
  s += 3;
  /* the last '@' of the rest: a password may hold an '@', or a '/' not percent-encoded
   * (u:pa/ss@db: when in doubt, a credential) */
  const char *at = strrchr(s, '@');
  return at && memchr(s, ':', (size_t)(at - s)) != NULL;
}

/* Whether a config file's value of o is a credential: an API key, the metrics token, a URL
 * or conninfo with a password in it. */
static bool holds_credential(const opt *o, const char *val) {
  return o->secret == SECRET_ALWAYS ||
         (o->secret == SECRET_URL && (url_password(val) || strstr(val, "password")));
}

void hookd_config_wipe_secret_env(void) {
  for (size_t i = 0; i < NOPTS; i++) {
    char envbuf[64];
    const char *env = env_name(&opts[i], envbuf, sizeof envbuf);
    char *v = opts[i].secret ? getenv(env) : NULL;
    if (!v) continue;
    OPENSSL_cleanse(v, strlen(v));
    unsetenv(env);
  }
}

/* set[i]: option i was given a value by the file */
/* One line of f into line (cap bytes; its '\n' kept, as fgets): 0, -1 at the end of the file,
 * 1 for a line longer than cap - 2 bytes, 2 for one holding a NUL byte. Reads at most cap - 1
 * bytes (/dev/zero as the file is one long line). */
static int read_line(FILE *f, char *line, size_t cap) {
  size_t n = 0;
  bool nul = false;
  int ch = EOF;
  while (n + 1 < cap && (ch = getc(f)) != EOF) {
    nul |= ch == '\0';
    line[n++] = (char)ch;
    if (ch == '\n') break;
  }
  line[n] = '\0';
  if (!n) return -1;
  if (nul) return 2;
  return line[n - 1] != '\n' && ch != EOF && getc(f) != EOF ? 1 : 0;
}

static int load_file(hookd_config *c, const char *path, bool *set, char *err, size_t errlen) {
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  unsigned loose = fstat(fileno(f), &st) == 0 ? (unsigned)(st.st_mode & 0777) : 0;
  if (!(loose & 077)) loose = 0; /* (its owner's alone: nothing to say) */
  char line[2048];
  int lineno = 0, rc = 0, got;
  while (rc == 0 && (got = read_line(f, line, sizeof line)) != -1) {
    lineno++;
    if (got == 1) { /* read on, its tail would be taken as a line */
      snprintf(err, errlen, "%s:%d: line longer than %zu bytes", path, lineno, sizeof line - 2);
      rc = -1;
      break;
    }
    if (got == 2) { /* (a NUL cut the line short: fgets said "longer") */
      snprintf(err, errlen, "%s:%d: holds a NUL byte (not a text file?)", path, lineno);
      rc = -1;
      break;
    }
    char *s = line;
    if (lineno == 1 && !strncmp(s, "\xef\xbb\xbf", 3)) s += 3; /* a UTF-8 byte order mark */
    s = trim(s);
    if (!*s || *s == '#') continue;
    char *eq = strchr(s, '=');
    if (eq) { /* an '=' inside a comment after a flag standing alone is not the flag's value */
      char *h = s;
      while (h < eq && !(*h == '#' && h > s && (h[-1] == ' ' || h[-1] == '\t'))) h++;
      if (h < eq) eq = NULL;
    }
    char *key = s, *val = (char *)"true"; /* a flag standing alone (checked below) */
    if (eq) {
      *eq = '\0';
      val = trim(eq + 1);
      /* a value may be quoted, as TOML and .env files write them: one matching pair around
       * it is taken off (else `api-key = "secret"` kept the quotes in the key); and a comment
       * may follow it, after a blank (else `store = sqlite:/x.db  # primary` named another
       * database, created empty, and `api-key = "k" # old` kept `"k" # old` as the key) */
      /* the closing quote: the first one followed by nothing but blanks or a comment (a quote
       * inside the value stays: 'abc'def' is abc'def) */
      char *close = NULL;
      if (val[0] == '"' || val[0] == '\'') {
        for (char *q = strchr(val + 1, val[0]); q && !close; q = strchr(q + 1, val[0])) {
          const char *after = q + 1 + strspn(q + 1, " \t");
          if (!*after || (*after == '#' && after > q + 1)) close = q;
        }
        if (!close) { /* none at all: unclosed (an operator review read "text after" then) */
          bool any = strchr(val + 1, val[0]) != NULL;
          snprintf(err, errlen, "%s:%d: %s", path, lineno,
                   any ? "text after the closing quote (a comment starts with ' #')"
                       : "the value's quote is not closed on its line");
          rc = -1;
          break;
        }
        *close = '\0';
        val++;
      } else {
        cut_comment(val);
        val = trim(val);
      }
    } else {
      cut_comment(s); /* a flag standing alone, a comment after it */
      s = trim(s);
      key = s;
    }
    key = trim(key);
    const opt *o = find_opt(key, strlen(key));
    /* the line is not echoed: it may hold a secret ("api-key: hk_…", a colon for the '=') */
    bool name_like = strlen(key) <= 40 && strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789-") ==
                                              strlen(key);
    if (!eq && !(o && o->type == T_BOOL)) { /* a flag may stand alone */
      snprintf(err, errlen, "%s:%d: expected \"name = value\"", path, lineno);
      rc = -1;
    } else if (!o) {
      snprintf(err, errlen, "%s:%d: unknown option%s%s%s", path, lineno,
               name_like ? " \"" : "", name_like ? key : "", name_like ? "\"" : "");
      rc = -1;
    } else if (loose && holds_credential(o, val)) {
      /* a credential in a file others may read: said at start (as a loose master key file) */
      snprintf(c->config_loose_path, sizeof c->config_loose_path, "%s", path);
      c->config_loose_mode = loose;
    }
    if (rc == 0 && apply(c, o, val, 0, err, errlen) != 0) { /* (o: rc says it is found) */
      char why[512];
      snprintf(why, sizeof why, "%s", err);
      snprintf(err, errlen, "%s:%d: %s", path, lineno, why); /* where the value came from */
      rc = -1;
    }
    if (rc == 0) set[o - opts] = true;
  }
  if (rc == 0 && ferror(f)) { /* a directory reads as an error, not as an empty file */
    snprintf(err, errlen, "--config %s: %s", path, strerror(errno));
    rc = -1;
  }
  fclose(f);
  return rc;
}


/* Levenshtein distance of a and b, at most 3 (a longer one reads 3). */
static int edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63 || (la > lb ? la - lb : lb - la) > 2) return 3;
  int row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      row[j] = best;
      diag = up;
    }
  }
  return row[lb] > 3 ? 3 : row[lb];
}

extern char **environ;

/* The HOOKD_ variables set that no option reads but one is named within two edits of (a typo:
 * HOOKD_LISTN, read by nothing, started hookd on its default — an operator review; a flag or a
 * file's key so mistyped is refused): noted in c->env_typos, never their values. Others (the
 * test shims', a wrapper's own) are none of hookd's business. */
static void note_env_typos(hookd_config *c) {
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (strncmp(*e, "HOOKD_", 6) != 0 || !eq || eq - *e > 63) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
    if (!strcmp(name, "HOOKD_MASTER_KEY")) continue;
    char near[64] = "";
    bool known = false, secret = false;
    /* (the master key is read by the keyring, not an option: a typo of it is looked for too) */
    if (edit_distance(name, "HOOKD_MASTER_KEY") <= 2) {
      snprintf(near, sizeof near, "HOOKD_MASTER_KEY");
      secret = true;
    }
    for (size_t i = 0; i < NOPTS && !known; i++) {
      char envbuf[64];
      const char *env = env_name(&opts[i], envbuf, sizeof envbuf);
      int d = edit_distance(name, env);
      known = d == 0;
      if (d <= 2 && !near[0]) {
        snprintf(near, sizeof near, "%s", env);
        secret = opts[i].secret;
      }
    }
    size_t used = strlen(c->env_typos);
    if (!known && near[0])
      snprintf(c->env_typos + used, sizeof c->env_typos - used, "%s%s (%s?)", used ? "," : "",
               name, near);
    /* a typo of a credential's variable holds the credential all the same: wiped as its
     * variable would be once read (/proc/<pid>/environ, a core dump) — in place, the value's
     * bytes (the environment is not changed while it is walked) */
    if (!known && secret) OPENSSL_cleanse((char *)eq + 1, strlen(eq + 1));
  }
}

int hookd_config_load(hookd_config *c, int argc, char **argv, char *err, size_t errlen) {
  /* 1. config file (found among the flags first) */
  bool file_set[NOPTS] = {false};
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      hookd_config_usage(stdout);
      return 1;
    }
    const char *file = NULL;
    if (!strcmp(argv[i], "--config") && i + 1 >= argc) {
      snprintf(err, errlen, "--config needs a value");
      return -1;
    }
    if (!strcmp(argv[i], "--config")) file = argv[i + 1];
    else if (!strncmp(argv[i], "--config=", 9)) file = argv[i] + 9;
    if (file && load_file(c, file, file_set, err, errlen) != 0) return -1;
  }
  /* 2. environment (a list from it replaces the file's) */
  for (size_t i = 0; i < NOPTS; i++) {
    char envbuf[64];
    const char *env = env_name(&opts[i], envbuf, sizeof envbuf);
    const char *v = getenv(env);
    /* an empty variable counts as unset — except the one whose empty value would be a hole,
     * unless its flag is given (flag > environment) or the file gave it (nothing left open) */
    if (!v || (!*v && (strcmp(opts[i].name, "metrics-token") != 0 ||
                       flag_given(argc, argv, opts[i].name) || c->metrics_token[0])))
      continue;
    if (opts[i].type == T_LIST) list_clear(c, &opts[i]);
    if (apply(c, &opts[i], v, 1, err, errlen) != 0) {
      char why[512];
      snprintf(why, sizeof why, "%s", err);
      snprintf(err, errlen, "%s (environment): %s", env, why);
      return -1;
    }
    size_t used = strlen(c->env_over_file); /* (a unit's Environment= over the file's) */
    if (file_set[i] && !flag_given(argc, argv, opts[i].name))
      snprintf(c->env_over_file + used, sizeof c->env_over_file - used, "%s%s",
               used ? "," : "", env);
  }
  note_env_typos(c);
  /* 3. flags; lists given by flag replace those from the environment and file */
  int list_reset[NOPTS] = {0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strncmp(a, "--", 2) != 0) {
      /* (not repeated: a second value after an option, `--api-key A B`, may be a secret — a
       * review) */
      snprintf(err, errlen, "unexpected argument at position %d after serve (not shown: it may "
                            "be a secret; each option takes one value; see --help)",
               i + 1);
      return -1;
    }
    a += 2;
    const char *eq = strchr(a, '=');
    size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
    if (nlen == 6 && !strncmp(a, "config", 6)) {
      if (!eq) i++;
      continue;
    }
    const opt *o = find_opt(a, nlen);
    if (!o) {
      snprintf(err, errlen, "unknown option --%.*s (see --help)", (int)(nlen > 60 ? 60 : nlen), a);
      return -1;
    }
    const char *v;
    if (eq) v = eq + 1;
    else if (o->type == T_BOOL) v = "true";
    else if (i + 1 < argc) v = argv[++i];
    else {
      snprintf(err, errlen, "--%s needs a value", o->name);
      return -1;
    }
    if (o->type == T_LIST && !list_reset[o - opts]) {
      list_reset[o - opts] = 1;
      list_clear(c, o);
    }
    if (apply(c, o, v, 0, err, errlen) != 0) return -1;
    if (o->secret && holds_credential(o, v)) { /* read: argv's copy goes (ps, /proc) */
      size_t used = strlen(c->argv_secrets);
      if (!strstr(c->argv_secrets, o->name))
        snprintf(c->argv_secrets + used, sizeof c->argv_secrets - used, "%s%s",
                 used ? "," : "", o->name);
      memset((char *)v, 'x', strlen(v));
    }
  }
  for (const char *p = c->frame_ancestors; *p;) { /* (no blank at either end: T_STR's check) */
    size_t n = strcspn(p, " ");
    if (n && !frame_origin(p, n) && !(n == 6 && !memcmp(p, "'self'", 6))) {
      snprintf(err, errlen,
               "--dashboard-frame-ancestors: \"%.*s\" is not an origin (https://host[:port], "
               "https://*.domain, or 'self')", (int)(n > 80 ? 80 : n), p);
      return -1;
    }
    p += n + (p[n] == ' ');
  }
  if (c->retry_statuses[0] &&
      hookd_retry_statuses_parse(c->retry_statuses, c->policy.retry_4xx) != 0) {
    snprintf(err, errlen, "--retry-statuses: expected comma-separated 4xx statuses (400-499; not "
                          "408 or 429, retried anyway; 410 listed is retried, not a disable)");
    return -1;
  }
  const char *bad = hookd_retry_policy_check(&c->policy);
  if (bad) { /* named by its flag: the policy's field names are the API's */
    static const char *const flag[][2] = {
        {"max_attempts", "--retry-max-attempts"},
        {"backoff_base_ms", "--retry-base-ms"},
        {"backoff_cap_ms", "--retry-cap-ms (must be at least --retry-base-ms)"},
        {"max_age_s", "--retry-max-age-s"},
        {"retry_after_cap_s", "--retry-after-cap-s"}};
    for (size_t i = 0; i < sizeof flag / sizeof *flag; i++)
      if (!strcmp(bad, flag[i][0])) bad = flag[i][1];
    snprintf(err, errlen, "invalid default retry policy: %s", bad);
    return -1;
  }
  /* an admin key given by flag or environment lives in memory only (never revoked, never
   * rotated): a short one on an address others reach is a guessable admin password */
  if (c->api_key[0] && strlen(c->api_key) < 16 && !hookd_config_loopback(c)) {
    snprintf(err, errlen,
             "--api-key (HOOKD_API_KEY) has %zu characters: listening beyond loopback (%s), an "
             "admin key needs 16 or more (e.g. `openssl rand -hex 24`)",
             strlen(c->api_key), c->listen_host);
    return -1;
  }
  if (c->default_timeout_ms > c->max_timeout_ms) {
    snprintf(err, errlen, "--default-timeout-ms exceeds --max-timeout-ms");
    return -1;
  }
  /* a delivery cancelled (endpoint deleted) while its request is in flight is settled: its
   * event must outlive the request, whose attempt is still to be recorded */
  if (c->event_retention_s > 0 && c->event_retention_s * 1000 <= c->max_timeout_ms) {
    snprintf(err, errlen, "--event-retention-s must be longer than --max-timeout-ms (%d ms)",
             c->max_timeout_ms);
    return -1;
  }
  if (c->egress_ca_file[0]) { /* libcurl would only say so at each request, as a TLS error */
    FILE *f = fopen(c->egress_ca_file, "r");
    struct stat st;
    if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
      snprintf(err, errlen, "--egress-ca-file %s: %s", c->egress_ca_file,
               f ? "not a file" : strerror(errno));
      if (f) fclose(f);
      return -1;
    }
    fclose(f);
  }
  /* settings that cannot work are refused at start, not discovered at every request */
  if (!c->node_id[0] || strcspn(c->node_id, " \t\r\n") != strlen(c->node_id)) {
    snprintf(err, errlen, "--node-id must be a non-empty name without spaces");
    return -1;
  }
  /* refused here, before the port is bound (exit 2), not by the store's open or the egress's
   * set-up after it (exit 1, a log line) */
  if (hookd_store_url_check(c->store_url, err, errlen) != 0) {
    char why[512];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errlen, "--store: %s", why);
    return -1;
  }
  if (hookd_destinations_check(c, err, errlen) != 0) return -1;
  if (hookd_store_is_postgres(c->store_url)) { /* docs/postgres.md */
    if (!strcmp(c->node_id, "local")) {
      snprintf(err, errlen, "a PostgreSQL store is shared by nodes: give each its own --node-id "
                            "(leases belong to it)");
      return -1;
    }
  }
  char *why = NULL;
  /* (as libpq reads it: a URI or key=value pairs; anything else is a database's name) */
  bool conninfo_form = strchr(c->outbox_url, '=') ||
                       !strncmp(c->outbox_url, "postgres://", 11) ||
                       !strncmp(c->outbox_url, "postgresql://", 13);
  PQconninfoOption *conninfo = conninfo_form ? PQconninfoParse(c->outbox_url, &why) : NULL;
  PQconninfoFree(conninfo);
  if (why) { /* (libpq's message quotes the string: it may hold a password) */
    PQfreemem(why);
    snprintf(err, errlen, "--outbox-url is not a libpq connection string or URI (its text is "
                          "not repeated here: it may hold a password)");
    return -1;
  }
  if (!table_name_ok(c->outbox_table)) {
    snprintf(err, errlen,
             "--outbox-table must be [schema.]name, each of lower-case letters, digits and '_' "
             "(not starting with a digit)");
    return -1;
  }
  char proxy_scheme[16] = "";
  if (c->egress_proxy[0] &&
      !url_ok(c->egress_proxy, true, proxy_scheme, sizeof proxy_scheme)) {
    snprintf(err, errlen,
             "--egress-proxy must be host:port or a URL (http://, https://, socks5h://… host)");
    return -1;
  }
  /* a SOCKS proxy that takes an address: libcurl resolves the destination, and no check of
   * hookd's sees what it resolved to (docs/security.md) — the scheme as libcurl parsed it
   * ("socks5:/host" is socks5 too) */
  if (!strcasecmp(proxy_scheme, "socks5") || !strcasecmp(proxy_scheme, "socks4")) {
    snprintf(err, errlen,
             "--egress-proxy %s:// has hookd resolve the destination for the proxy, which no "
             "check then sees: use socks5h:// or socks4a:// (the proxy resolves it, and must "
             "enforce the destination policy)", proxy_scheme);
    return -1;
  }
  if (c->ops_tenant[0] && !hookd_id_valid(c->ops_tenant, 64)) {
    snprintf(err, errlen, "--ops-tenant must be a tenant id (1 to 64 of A-Z a-z 0-9 _ . : -)");
    return -1;
  }
  if (c->public_url[0] && !url_ok(c->public_url, false, NULL, 0)) {
    snprintf(err, errlen, "--public-url must be an http:// or https:// URL with a host, and "
                          "no credentials, query or fragment (no '@', '?' or '#')");
    return -1;
  }
  /* joined to "/in/{source}": "https://hooks.example.com/" gave "…com//in/…", an ingest URL no
   * route answers, and a Twilio signature over a URL no provider was given */
  for (size_t n = strlen(c->public_url); n && c->public_url[n - 1] == '/';)
    c->public_url[--n] = '\0';
  for (size_t i = 0; i < c->n_resolve; i++) {
    if (!hookd_resolve_pin_valid(c->resolve[i])) {
      snprintf(err, errlen, "--resolve must be HOST:PORT:ADDR (curl's syntax; an IPv4 or [IPv6] "
                            "address, several separated by commas): \"%.80s\"", c->resolve[i]);
      return -1;
    }
  }
  if (c->max_buffered_bytes < c->max_body_bytes) {
    snprintf(err, errlen, "--max-buffered-bytes (%zu) must be at least --max-body-bytes (%zu): "
                          "a body of the largest size could never be taken",
             c->max_buffered_bytes, c->max_body_bytes);
    return -1;
  }
  /* each connection may hold max-header-bytes of memory and the answer's head: a client opening
   * every allowed connection must not take more than this */
  uint64_t conn_mem = (uint64_t)c->max_connections * (c->max_header_bytes + HOOKD_HTTP_HEAD_ROOM);
  if (conn_mem > (2ULL << 30)) {
    snprintf(err, errlen,
             "--max-connections × (--max-header-bytes + 4 KiB for the answer) is %llu MiB of"
             " connection memory: at most 2048",
             (unsigned long long)(conn_mem >> 20));
    return -1;
  }
  return 0;
}

bool hookd_config_loopback(const hookd_config *c) {
  const char *h = c->listen_host;
  struct in_addr a; /* (an address: a name "127.x.example" is anyone's) */
  if (inet_pton(AF_INET, h, &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return !strcmp(h, "::1") || !strcmp(h, "localhost");
}

void hookd_config_usage(FILE *out) {
  hookd_config d;
  hookd_config_defaults(&d);
  fprintf(out, "usage: hookd serve [options]\n\n"
               "Runs the hookd daemon: the HTTP API, the provider-facing /in/ endpoints, the\n"
               "dispatcher and the egress. Each option is also read from a config file\n"
               "(--config FILE, lines \"name = value\", the value optionally quoted, and\n"
               "\"# comments\" on their own line or after a blank) and, where shown, the\n"
               "environment.\n"
               "Precedence: flag > environment > file > default (a variable that replaces\n"
               "a file's value is said at start); an empty environment variable counts as\n"
               "unset (but HOOKD_METRICS_TOKEN: an empty one is refused).\n\n"
               "  --config FILE\n      read options from FILE\n");
  for (size_t i = 0; i < NOPTS; i++) {
    const opt *o = &opts[i];
    char def[128] = "";
    const char *field = (const char *)&d + o->off;
    switch (o->type) {
    case T_STR: /* an empty field where something is used all the same: what is */
      if (*field) {
        snprintf(def, sizeof def, "%s", field);
      } else if (!strcmp(o->name, "master-key-file")) {
        snprintf(def, sizeof def, "<sqlite path>.key");
      } else if (!strcmp(o->name, "egress-ports")) { /* the URL policy's own list */
        for (size_t k = 0, n = 0; k < hookd_url_default_ports_n && n < sizeof def; k++)
          n += (size_t)snprintf(def + n, sizeof def - n, "%s%u", k ? "," : "",
                                (unsigned)hookd_url_default_ports[k]);
      } else {
        snprintf(def, sizeof def, "(none)");
      }
      break;
    case T_INT: snprintf(def, sizeof def, "%d", *(const int *)field); break;
    case T_I64: snprintf(def, sizeof def, "%lld", (long long)*(const int64_t *)field); break;
    case T_SIZE: snprintf(def, sizeof def, "%zu", *(const size_t *)field); break;
    case T_MS_FROM_S:
      snprintf(def, sizeof def, "%lld", (long long)(*(const int64_t *)field / 1000));
      break;
    case T_BOOL: snprintf(def, sizeof def, "%s", *(const bool *)field ? "true" : "false"); break;
    case T_LIST: snprintf(def, sizeof def, "(none)"); break;
    case T_LISTEN: snprintf(def, sizeof def, "%s:%d", d.listen_host, d.listen_port); break;
    case T_LEVEL: snprintf(def, sizeof def, "info"); break;
    }
    char envbuf[64];
    fprintf(out, "  --%s%s%s\n      %s\n      default: %s; env: %s\n", o->name,
            *o->arg ? " " : "", o->arg, o->help, def, env_name(o, envbuf, sizeof envbuf));
  }
  hookd_config_free(&d);
}

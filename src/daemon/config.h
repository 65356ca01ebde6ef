/* config.h — `hookd serve` configuration: one table of options, each settable by flag, by
 * environment variable and by config file (`name = value` lines, a value quoted or not; `#`
 * comments, on a line of their own or after a value, behind a blank). Precedence:
 * flag > environment > file > default. `--help` prints the table with every default. */
#ifndef HOOKD_DAEMON_CONFIG_H
#define HOOKD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/backoff.h"

#define HOOKD_CFG_LIST_MAX 64

typedef struct hookd_config {
  /* network */
  char listen_host[256];
  int listen_port;
  int header_timeout_s;        /* idle connection / slow client timeout */
  int request_timeout_s;       /* request line to the body's last byte, whatever the pace */
  int max_connections;
  int max_connections_per_ip;  /* 0 = no limit (hookd behind a proxy sees one address) */
  /* store */
  char store_url[1024];
  int store_batch;
  char node_id[64];
  /* access */
  char api_key[256];           /* bootstrap admin key ("" = from the store, generated once) */
  char master_key_file[1024];  /* file holding the master key for secrets at rest */
  /* limits */
  size_t max_body_bytes;
  size_t max_buffered_bytes; /* request bodies held at once, all connections */
  size_t max_claimed_bytes;   /* bodies held by claimed deliveries (0 = counts only) */
  int max_json_depth;
  int max_endpoints_per_tenant;
  int max_event_types;
  size_t max_url_len;
  int max_headers;             /* request header count (431 beyond) */
  size_t max_header_bytes;     /* request line + headers (431 beyond) */
  /* egress */
  int max_in_flight;           /* global */
  int tenant_max_in_flight;    /* a tenant's cap unless it sets one */
  int64_t disable_failing_after_s; /* disable an endpoint failing this long (0 = never) */
  int shutdown_grace_s;        /* at shutdown, requests in flight longer are abandoned */
  int max_store_queue;         /* publish answers 503 beyond this many queued store writes */
  int max_reads_per_key;       /* API reads of one key at once; more are answered 429 */
  int64_t breaker_window_ms;   /* circuit breaker: outcome window … */
  int breaker_min_requests;    /* … fewest outcomes before it decides … */
  int breaker_failure_percent; /* … failure share that opens it … */
  int64_t breaker_cooldown_ms; /* … time open before a probe */
  int default_max_in_flight;   /* per endpoint */
  int default_timeout_ms;
  int max_timeout_ms;
  int connect_timeout_ms;
  int egress_conn_max_age_s; /* a kept-alive delivery connection is not reused past this age */
  size_t max_response_bytes;
  int lease_margin_ms;
  int rescan_interval_ms;
  int store_wait_s;         /* a PostgreSQL server not up yet at start: waited for */
  int reload_interval_ms;   /* API keys and sources read back from the store (docs/postgres.md) */
  bool no_change_feed;      /* a shared store's changes only at the rescans (docs/postgres.md) */
  char *egress_allow[HOOKD_CFG_LIST_MAX]; /* CIDR strings */
  size_t n_egress_allow;
  bool allow_private_networks;
  bool allow_http;
  bool svix_headers;           /* --svix-headers */
  char frame_ancestors[512];   /* --dashboard-frame-ancestors: origins that may embed the
                                  dashboard (a portal in an iframe); "" = none */
  char egress_proxy[1024];
  char egress_ca_file[1024];   /* "" = the system's CA bundle */
  char egress_ports[512];      /* "any" or comma-separated ports; "" = 80,443,8080,8443 */
  char *resolve[HOOKD_CFG_LIST_MAX];     /* curl RESOLVE entries HOST:PORT:ADDR */
  size_t n_resolve;
  char resolve_file[1024];     /* more entries, one per line, re-read when the file changes */
  /* retries */
  hookd_retry_policy policy;   /* default policy for new endpoints */
  char retry_statuses[512];    /* --retry-statuses, read into policy.retry_4xx */
  int64_t event_ttl_s;         /* events expire after this (0 = never) */
  /* inbound */
  char metrics_token[256];     /* "" = /metrics is public */
  char ops_tenant[65];         /* operational events go to this tenant; "" = none */
  char public_url[512];        /* how providers reach this daemon (Twilio signs the URL) */
  int64_t inbox_retention_s;   /* dedup records kept this long */
  int64_t payload_retention_s; /* settled outbound events' payloads kept this long (0 = ever) */
  int64_t event_retention_s;   /* settled outbound events kept this long (0 = ever) */
  int64_t max_replay_items;    /* deliveries one replay job may take (docs/replay.md) */
  char outbox_url[1024];   /* the producer's PostgreSQL for the outbox relay ("" = none) */
  char outbox_table[128];  /* its table ([schema.]name; docs/outbox.md) */
  int outbox_batch;        /* rows per relay cycle */
  int outbox_poll_ms;      /* the relay's look when no notification came */
  /* logs */
  int log_level;
  /* the --config file, when others than its owner may read it and it holds a credential (an
   * API key, the metrics token, a URL with a password): its mode, for a warning at start */
  char config_loose_path[256];
  unsigned config_loose_mode;
  /* the options given a credential on the command line ("api-key,metrics-token"): their values
   * are overwritten in argv once read (/proc/<pid>/cmdline shows argv to every local user), and
   * the start warns of them */
  char argv_secrets[96];
  /* the variables that replaced a --config file's values ("HOOKD_STORE,…"; environment >
   * file): said at start — a unit's Environment=HOOKD_STORE=… silently put a node configured
   * for PostgreSQL on a new SQLite file */
  char env_over_file[256];
  /* HOOKD_ variables no option reads whose names are a typo's distance from one's (said at
   * start: config.unknown_variable), "NAME (HOOKD_OPTION?)" comma-separated */
  char env_typos[256];
} hookd_config;

void hookd_config_defaults(hookd_config *c);
void hookd_config_free(hookd_config *c);

/* Parses argv (after the "serve" word) and the environment. Returns 0, 1 when --help was
 * printed, or -1 with a message in err. */
int hookd_config_load(hookd_config *c, int argc, char **argv, char *err, size_t errlen);

void hookd_config_usage(FILE *out);

/* Whether --listen is a loopback address (127.x, ::1, localhost): only this host reaches it. */
bool hookd_config_loopback(const hookd_config *c);

/* Wipes and unsets the environment variable of every option holding a credential (the admin
 * key, the metrics token, URLs that may carry a password), once they are read into a config:
 * /proc/<pid>/environ and a core dump would show them. */
void hookd_config_wipe_secret_env(void);

#endif

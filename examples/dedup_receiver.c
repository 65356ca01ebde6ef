/* dedup_receiver.c — an example webhook handler that makes the effect happen once.
 *
 *   dedup_receiver --db effects.db [--listen 127.0.0.1:8090] [--secret whsec_… [--secret …]]
 *
 * For each POST it checks hookd's signature (when --secret is given; twice during a rotation of
 * the secret: the new one and the previous, either verifies), then in ONE SQLite
 * transaction inserts the dedup key into processed_webhooks with
 * ON CONFLICT DO NOTHING and, only if that inserted a row, performs the side effect (here: a row
 * in `effects`). The first call writes; every repeat answers 200 and writes nothing — the seed's
 * promise, and the recipe in docs/receivers.md. It prints "listening <port>" when ready.
 *
 * The dedup key must be covered by what was verified: with --secret it is the signed webhook-id
 * (hookd's forwards send the same value as Idempotency-Key); a header the signature does not
 * cover would let anyone holding one signed request replay it under new keys, one effect each.
 * Without --secret (a local handler fed by `hookd inbox replay`, nothing verified) it is the
 * Idempotency-Key, or the webhook-id. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/sign.h"

static sqlite3 *db;
static hookd_hmac_key secret_keys[2];
static size_t have_secret;

/* What it takes: hookd sends a payload of up to its --max-body-bytes (1 MiB by default) inside
 * an envelope; a 4xx for a bigger one would make the delivery DEAD. */
#define BODY_MAX (8u << 20)

typedef struct req {
  hookd_buf body;
  int too_large; /* over BODY_MAX: refused whole, never stored cut */
} req;

static enum MHD_Result answer(struct MHD_Connection *c, unsigned status, const char *json,
                              const char *ref) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(strlen(json), (void *)json, MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, "Content-Type", "application/json");
  if (ref) MHD_add_response_header(r, "Hookd-Result-Ref", ref);
  enum MHD_Result rc = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return rc;
}

/* The whole recipe: dedup record and side effect commit together or not at all. */
static int apply_once(const char *key, const char *body, size_t len, long long *effect_id) {
  int written = -1;
  sqlite3_stmt *ins = NULL, *eff = NULL;
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) return -1;
  if (sqlite3_prepare_v2(db,
                         "INSERT INTO processed_webhooks(key, processed_at) VALUES (?1, ?2)"
                         " ON CONFLICT(key) DO NOTHING",
                         -1, &ins, NULL) != SQLITE_OK)
    goto out;
  sqlite3_bind_text(ins, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_int64(ins, 2, (sqlite3_int64)time(NULL));
  if (sqlite3_step(ins) != SQLITE_DONE) goto out;
  if (sqlite3_changes(db) == 0) {
    written = 0; /* a duplicate: nothing else happens */
  } else {
    if (sqlite3_prepare_v2(db, "INSERT INTO effects(key, body) VALUES (?1, ?2)", -1, &eff,
                           NULL) != SQLITE_OK)
      goto out;
    sqlite3_bind_text(eff, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_blob(eff, 2, body, (int)len, SQLITE_STATIC);
    if (sqlite3_step(eff) != SQLITE_DONE) goto out;
    *effect_id = sqlite3_last_insert_rowid(db);
    written = 1;
  }
out:
  sqlite3_finalize(ins);
  sqlite3_finalize(eff);
  if (written < 0 || sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
    return -1;
  }
  return written;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *data,
                                  size_t *size, void **con_cls) {
  req *r = *con_cls;
  if (!r) {
    r = calloc(1, sizeof *r);
    hookd_buf_init(&r->body, BODY_MAX);
    *con_cls = r;
    return MHD_YES;
  }
  if (*size) {
    if (!r->too_large && hookd_buf_append(&r->body, data, *size) != 0) r->too_large = 1;
    *size = 0;
    return MHD_YES;
  }
  if (r->too_large) return answer(c, 413, "{\"error\":\"body over 8 MiB\"}", NULL);
  if (strcmp(method, "POST") != 0) return answer(c, 405, "{\"error\":\"POST only\"}", NULL);
  const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
  const char *wid = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "webhook-id");
  if (have_secret) {
    const char *ts = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "webhook-timestamp");
    const char *sig = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "webhook-signature");
    if (!wid || hookd_verify_v1(secret_keys, have_secret, wid, ts, sig, r->body.data,
                                r->body.len, time(NULL), 300) != 0)
      return answer(c, 401, "{\"error\":\"bad signature\"}", NULL);
    key = wid; /* the signed id, never an unsigned header */
  }
  if (!key) key = wid;
  if (!key) return answer(c, 400, "{\"error\":\"no Idempotency-Key or webhook-id\"}", NULL);
  long long effect = 0;
  int w = apply_once(key, hookd_buf_str(&r->body), r->body.len, &effect);
  if (w < 0) return answer(c, 500, "{\"error\":\"database\"}", NULL);
  char ref[64];
  snprintf(ref, sizeof ref, "effect-%lld", effect);
  return w ? answer(c, 200, "{\"result\":\"written\"}", ref)
           : answer(c, 200, "{\"result\":\"duplicate\"}", NULL);
}

static void on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                    enum MHD_RequestTerminationCode toe) {
  req *r = *con_cls;
  if (r) {
    hookd_buf_free(&r->body);
    free(r);
  }
}

int main(int argc, char **argv) {
  const char *path = NULL;
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "dedup_receiver: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "--db")) path = argv[i + 1];
    else if (!strcmp(argv[i], "--secret")) {
      if (have_secret == 2) {
        fprintf(stderr, "dedup_receiver: --secret at most twice (the new and the previous)\n");
        return 2;
      }
      if (hookd_secret_parse(argv[i + 1], &secret_keys[have_secret]) != 0) {
        fprintf(stderr, "dedup_receiver: --secret must be whsec_<base64>\n");
        return 2;
      }
      have_secret++;
    } else if (!strcmp(argv[i], "--listen")) {
      char host[64];
      const char *colon = strrchr(argv[i + 1], ':');
      char *end;
      long port = colon ? strtol(colon + 1, &end, 10) : -1;
      snprintf(host, sizeof host, "%.*s", colon ? (int)(colon - argv[i + 1]) : 0, argv[i + 1]);
      if (!colon || *end || port < 0 || port > 65535 ||
          inet_pton(AF_INET, host, &addr.sin_addr) != 1) {
        fprintf(stderr, "dedup_receiver: --listen must be IPv4:PORT (e.g. 127.0.0.1:8090)\n");
        return 2;
      }
      addr.sin_port = htons((uint16_t)port);
    } else {
      fprintf(stderr, "dedup_receiver: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  if (!path) {
    fprintf(stderr, "usage: dedup_receiver --db FILE [--listen 127.0.0.1:PORT] [--secret whsec_… "
                    "[--secret whsec_…]]\n");
    return 2;
  }
  if (sqlite3_open(path, &db) != SQLITE_OK ||
      sqlite3_exec(db,
                   "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
                   "CREATE TABLE IF NOT EXISTS processed_webhooks(key TEXT PRIMARY KEY,"
                   " processed_at INTEGER NOT NULL);"
                   "CREATE TABLE IF NOT EXISTS effects(id INTEGER PRIMARY KEY, key TEXT NOT NULL,"
                   " body BLOB);",
                   NULL, NULL, NULL) != SQLITE_OK) {
    fprintf(stderr, "dedup_receiver: cannot open %s\n", path);
    return 1;
  }
  struct MHD_Daemon *d = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD, ntohs(addr.sin_port), NULL, NULL, on_request, NULL,
      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr, MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL,
      /* a body may take BODY_MAX: a bounded number of connections, each closed when idle */
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
      MHD_OPTION_END); /* on the --listen address only (default 127.0.0.1) */
  if (!d) {
    fprintf(stderr, "dedup_receiver: cannot listen\n");
    return 1;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  printf("listening %u\n", info ? info->port : (unsigned)ntohs(addr.sin_port));
  fflush(stdout);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGTERM);
  sigaddset(&s, SIGINT);
  sigprocmask(SIG_BLOCK, &s, NULL);
  int sig;
  sigwait(&s, &sig);
  MHD_stop_daemon(d);
  sqlite3_close(db);
  return 0;
}

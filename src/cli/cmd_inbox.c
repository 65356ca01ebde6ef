/* cmd_inbox.c — `hookd inbox replay`: local replay for developers (X7).
 *
 *   hookd inbox replay <inbox id> --to URL [--times N] [--store URL] [--allow-remote [--sign]]
 *
 * Re-sends a stored inbound request — its raw body, content type, the provider headers hookd
 * forwards, and the same Idempotency-Key every time — to a handler, N times, and prints what
 * each call answered. Each call is signed as the daemon's forward is (webhook-id = the record,
 * a fresh timestamp, one v1 signature per destination the event went to: a handler that
 * verifies with its destination's secret takes it), when the master key is at hand
 * (HOOKD_MASTER_KEY, --master-key-file, or the store's key file); else it goes unsigned, said
 * on stderr. It is an explicit developer action aimed at a local handler: the
 * daemon's destination policy does not apply, and the connection must reach a loopback address
 * (checked on the address actually connected to, no proxy) unless --allow-remote is given — a
 * stored payload may carry personal data. Sent elsewhere, the calls are unsigned unless --sign
 * asks: a validly signed copy in someone else's hands could be sent on to the real handler. */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <time.h>

#include "cli/cli.h"
#include "core/addrpolicy.h"
#include "core/buf.h"
#include "core/clock.h"
#include "core/custom_headers.h"
#include "core/num.h"
#include "core/sign.h"
#include "core/shown_text.h"
#include "daemon/keyring.h"
#include "store/storeq.h"

#define MAX_DESTS 8
/* each destination's secret, and its previous one during a rotation's overlap */
#define MAX_KEYS (2 * MAX_DESTS)

typedef struct load {
  const char *id;
  hookd_inbox rec;
  hookd_event ev;
  bool have_event;
  hookd_endpoint dests[MAX_DESTS]; /* the destinations its forwards went to (their secrets) */
  size_t n_dests;
} load;

static int run_load(hookd_store_conn *c, const hookd_store_backend *be, void *arg) {
  load *l = arg;
  hookd_delivery *dl = NULL;
  size_t n = 0;
  int rc = be->inbox_get(c, l->id, &l->rec, &dl, &n);
  if (rc) return rc;
  /* each destination once: a record replayed has several forwards to one destination, and
   * counted each time they crowded others out of the MAX_DESTS (a source's most) */
  for (size_t i = 0; i < n && l->n_dests < MAX_DESTS; i++) {
    bool seen = false;
    for (size_t j = 0; j < l->n_dests && !seen; j++)
      seen = !strcmp(l->dests[j].id, dl[i].endpoint_id);
    if (!seen && be->endpoint_get(c, dl[i].endpoint_id, &l->dests[l->n_dests]) == 0)
      l->n_dests++;
  }
  hookd_deliveries_free(dl, n);
  if (!l->rec.event_seq) return HOOKD_STORE_OK; /* filtered, stale, conflict: nothing forwarded */
  rc = be->event_get(c, l->rec.tenant_id, l->rec.id, &l->ev, NULL, NULL);
  l->have_event = rc == 0;
  return rc;
}

/* The destinations' signing keys, opened with the master key: how many (0: unsigned, with the
 * reason on stderr). A deleted destination's secret is gone: it signs nothing. */
/* keys[i] signs until until_ms[i] (a previous secret's overlap end; INT64_MAX: the current). */
static size_t open_keys(const load *l, const char *key_file, hookd_hmac_key keys[MAX_KEYS],
                        int64_t until_ms[MAX_KEYS]) {
  char err[512] = "";
  hookd_keyring k;
  if (hookd_keyring_read(key_file, &k.key, err, sizeof err) != 0) {
    fprintf(stderr, "hookd inbox replay: sent unsigned (%s)\n", err);
    return 0;
  }
  unsigned mode;
  if (hookd_keyring_file_loose(key_file, &mode))
    fprintf(stderr, "hookd inbox replay: warning: %s is readable by group or others (mode %04o): "
                    "the master key opens every stored secret; chmod 600 it\n", key_file, mode);
  size_t n = 0;
  int64_t now = hookd_now_ms();
  for (size_t i = 0; i < l->n_dests; i++) {
    const hookd_endpoint *e = &l->dests[i];
    if (!e->secret || !*e->secret || (e->signing && strcmp(e->signing, "hmac") != 0)) continue;
    /* as the forward is signed: during a rotation's overlap, with the previous secret too (a
     * handler still on it takes the call) */
    const char *sealed[2] = {e->secret, e->previous_secret && *e->previous_secret &&
                                                e->previous_expires_ms > now
                                            ? e->previous_secret
                                            : NULL};
    for (int j = 0; j < 2 && sealed[j]; j++) {
      char *plain = hookd_keyring_open(&k, sealed[j], e->id);
      if (plain && hookd_secret_parse(plain, &keys[n]) == 0)
        until_ms[n++] = j ? e->previous_expires_ms : INT64_MAX;
      else
        fprintf(stderr, "hookd inbox replay: destination %s: its %ssecret does not open\n", e->id,
                j ? "previous " : "");
      hookd_secret_free(plain);
    }
  }
  OPENSSL_cleanse(&k, sizeof k);
  if (!n)
    fprintf(stderr, "hookd inbox replay: sent unsigned (no destination secret to sign with)\n");
  return n;
}

/* The names of the destinations' own headers ("Name:\n" lines, hookd_header_line_named's;
 * NULL when none or unknown): the forward sends those, not a stored provider line of the same name, so neither
 * does a replay — a sender's value under a name the operator keeps for its gateway. Without the
 * master key they are unknown, and stderr says so. */
static char *reserved_names(const load *l, const char *key_file) {
  bool any = false;
  for (size_t i = 0; i < l->n_dests; i++) any |= l->dests[i].headers && *l->dests[i].headers;
  if (!any) return NULL;
  char err[512] = "";
  hookd_keyring k;
  if (hookd_keyring_read(key_file, &k.key, err, sizeof err) != 0) {
    fprintf(stderr, "hookd inbox replay: the destinations' own header names are unknown without "
                    "the master key: the stored header lines are sent as they are (%s)\n", err);
    return NULL;
  }
  hookd_buf names;
  hookd_buf_init(&names, 64 * 1024);
  for (size_t i = 0; i < l->n_dests; i++) {
    const hookd_endpoint *e = &l->dests[i];
    json_t *h = e->headers && *e->headers ? hookd_keyring_open_json(&k, e->headers, e->id) : NULL;
    if (e->headers && *e->headers && !json_is_object(h))
      fprintf(stderr, "hookd inbox replay: destination %s: its headers do not open\n", e->id);
    const char *name;
    json_t *v;
    json_object_foreach(h, name, v) hookd_buf_printf(&names, "%s:\n", name);
    json_decref(h);
  }
  OPENSSL_cleanse(&k, sizeof k);
  if (!names.len) {
    hookd_buf_free(&names);
    return NULL;
  }
  return hookd_buf_steal(&names);
}

/* "webhook-signature: v1,… v1,…" for one call, signed now. */
static int sign_header(const load *l, const hookd_hmac_key *keys, size_t n, int64_t ts,
                       char *out, size_t cap) {
  size_t o = (size_t)snprintf(out, cap, "webhook-signature:");
  for (size_t i = 0; i < n; i++) {
    char sig[HOOKD_SIG_MAX];
    if (hookd_sign_v1(&keys[i], l->rec.id, ts, l->ev.body, l->ev.body_len, sig) != 0) return -1;
    o += (size_t)snprintf(out + o, o < cap ? cap - o : 0, " %s", sig);
  }
  return o < cap ? 0 : -1;
}

/* The first bytes of a handler's answer, NULs included. */
typedef struct answer {
  char b[200];
  size_t len;
} answer;

static size_t collect(char *p, size_t size, size_t n, void *arg) {
  answer *a = arg;
  size_t len = size * n, room = sizeof a->b - a->len;
  memcpy(a->b + a->len, p, len < room ? len : room);
  a->len += len < room ? len : room;
  return size * n;
}

static void usage(FILE *to) {
  fprintf(to, "usage: hookd inbox replay <inbox id> --to URL [--times N (1-10000)]"
                  " [--store URL] [--master-key-file FILE] [--allow-remote [--sign]]\n");
}

/* libcurl's last step before sending: refuse a connection to anything but loopback (as the
 * destination policy classifies addresses: 127/8, ::1, and their mapped forms). */
static int loopback_only(void *arg, char *ip, char *local_ip, int remote_port, int local_port) {
  unsigned char a[16];
  static const hookd_addr_policy none = {0};
  const char *rule = inet_pton(AF_INET, ip, a) == 1    ? hookd_addr_judge(&none, AF_INET, a)
                     : inet_pton(AF_INET6, ip, a) == 1 ? hookd_addr_judge(&none, AF_INET6, a)
                                                       : NULL;
  bool ok = rule && !strcmp(rule, "loopback");
  if (!ok) snprintf(arg, 64, "%s", ip);
  return ok ? CURL_PREREQFUNC_OK : CURL_PREREQFUNC_ABORT;
}

int hookd_cmd_inbox(int argc, char **argv) {
  for (int i = 0; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout); /* asked for: the answer, on stdout */
      return 0;
    }
  if (argc >= 2 && !strcmp(argv[0], "replay") && !strncmp(argv[1], "--", 2)) {
    /* `replay --to URL in_1`: the URL would be read as the id, the id as an option */
    fprintf(stderr, "hookd inbox replay: the inbox id comes first: "
                    "hookd inbox replay <id> --to URL\n");
    usage(stderr);
    return 2;
  }
  if (argc < 2 || strcmp(argv[0], "replay") != 0) {
    if (argc == 0) fprintf(stderr, "hookd inbox: which command? (replay)\n");
    else if (strcmp(argv[0], "replay") != 0)
      fprintf(stderr, "hookd inbox: unknown command \"%.40s\"\n", argv[0]);
    else fprintf(stderr, "hookd inbox replay: the inbox id is missing\n");
    usage(stderr);
    return 2;
  }
  const char *id = argv[1], *to = NULL, *store = getenv("HOOKD_STORE"), *key_file = NULL;
  long times = 1;
  bool remote = false, sign_remote = false;
  static const char *const with_value[] = {"--to", "--times", "--store", "--master-key-file"};
  bool seen[sizeof with_value / sizeof *with_value] = {false};
  for (int i = 2; i < argc; i += 2) {
    if (!strcmp(argv[i], "--allow-remote") || !strcmp(argv[i], "--sign")) {
      *(!strcmp(argv[i], "--sign") ? &sign_remote : &remote) = true;
      i--;
      continue;
    }
    size_t o = 0;
    while (o < sizeof with_value / sizeof *with_value && strcmp(argv[i], with_value[o])) o++;
    if (o == sizeof with_value / sizeof *with_value) {
      if (!strncmp(argv[i], "--", 2))
        fprintf(stderr, "hookd inbox replay: unknown option %.40s\n", argv[i]);
      else
        fprintf(stderr, "hookd inbox replay: %s\n", HOOKD_CLI_NOT_SHOWN);
      usage(stderr);
      return 2;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "hookd inbox replay: %.40s needs a value\n", argv[i]);
      usage(stderr);
      return 2;
    }
    /* each at most once (keys refuses repeats too: which one was meant?) */
    if (seen[o]) {
      fprintf(stderr, "hookd inbox replay: %s given twice\n", argv[i]);
      return 2;
    }
    seen[o] = true;
    if (!strcmp(argv[i], "--to")) to = argv[i + 1];
    else if (!strcmp(argv[i], "--times")) {
      long long n;
      if (hookd_parse_ll(argv[i + 1], 1, 10000, &n) != 0) {
        fprintf(stderr, "hookd inbox replay: --times must be a whole number in [1, 10000]\n");
        return 2;
      }
      times = (long)n;
    }
    else if (!strcmp(argv[i], "--store")) {
      if (!*argv[i + 1]) { /* ("$STORE" unset: hookd.db here was read instead) */
        fprintf(stderr, "hookd inbox replay: --store is empty\n");
        return 2;
      }
      store = argv[i + 1];
    }
    else key_file = argv[i + 1]; /* --master-key-file */
  }
  if (sign_remote && !remote) {
    fprintf(stderr, "hookd inbox replay: --sign is for --allow-remote (a local handler's calls "
                    "are signed anyway)\n");
    return 2;
  }
  if (!to || !*to || times < 1 || times > 10000) {
    fprintf(stderr, "hookd inbox replay: --to URL is required (the local handler to send it to)\n");
    usage(stderr);
    return 2;
  }
  /* the stored request as it was: no Authorization of the URL's (nor a password in `ps`) */
  CURLU *u = curl_url();
  char *user = NULL;
  bool userinfo = u && curl_url_set(u, CURLUPART_URL, to, CURLU_GUESS_SCHEME) == CURLUE_OK &&
                  curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK;
  curl_free(user);
  curl_url_cleanup(u);
  if (userinfo) {
    fprintf(stderr, "hookd inbox replay: --to carries credentials (user@): the replay sends the "
                    "stored request's headers, nothing else\n");
    return 2;
  }
  hookd_store_config cfg = {.url = store && *store ? store : "sqlite:hookd.db", .max_batch = 16,
                            .no_migrate = true};
  char key_path[1100];
  if (hookd_cli_master_key_file("hookd inbox replay", key_file, cfg.url, key_path,
                                sizeof key_path, &key_file) != 0)
    return 2;
  if (!hookd_cli_store_exists("hookd inbox replay", cfg.url)) return 1;
  hookd_store *s = NULL;
  char err[512];
  if (hookd_store_open(&cfg, &s, err, sizeof err) != 0) {
    fprintf(stderr, "hookd inbox replay: %s\n", err);
    return 1;
  }
  load l = {.id = id};
  int rc = hookd_storeq_run_sync(s->reader, run_load, &l);
  hookd_store_close(s);
  if (rc || !l.have_event) {
    if (rc)
      fprintf(stderr, "hookd inbox replay: %s: %s\n", id,
              rc == HOOKD_STORE_NOTFOUND ? "no such inbox record" : hookd_store_strerror(rc));
    else
      fprintf(stderr, "hookd inbox replay: %s is %s: it was never forwarded, nothing to replay\n",
              id, l.rec.status);
    hookd_inbox_free(&l.rec);
    for (size_t i = 0; i < l.n_dests; i++) hookd_endpoint_free(&l.dests[i]);
    return 1;
  }
  hookd_hmac_key keys[MAX_KEYS], now_keys[MAX_KEYS];
  int64_t until_ms[MAX_KEYS];
  size_t n_keys = 0;
  if (remote && !sign_remote)
    fprintf(stderr, "hookd inbox replay: sent unsigned (--allow-remote: a signed copy elsewhere "
                    "could be sent on to the real handler; --sign signs it)\n");
  else
    n_keys = open_keys(&l, key_file, keys, until_ms);

  struct curl_slist *hs = NULL;
  char h[1024];
  /* whole, as the forward sends it (a line of its own size: a cut could end inside a quoted
   * parameter) */
  char *ct_line = NULL;
  if (asprintf(&ct_line, "Content-Type: %s",
               l.ev.content_type ? l.ev.content_type : "application/json") < 0)
    ct_line = NULL;
  hs = ct_line ? curl_slist_append(hs, ct_line) : NULL;
  free(ct_line);
  bool no_memory = !hs; /* (said below: nothing sent) */
  snprintf(h, sizeof h, "Idempotency-Key: %s", l.rec.id);
  hs = curl_slist_append(hs, h);
  hs = curl_slist_append(hs, "Expect:");
  hs = curl_slist_append(hs, "User-Agent: hookd/" HOOKD_VERSION);
  snprintf(h, sizeof h, "webhook-id: %s", l.rec.id);
  hs = curl_slist_append(hs, h);
  /* the header lines its forwards carry, each whole (a provider's value may be 1 KiB), but
   * those a destination's own headers replace in the forward */
  char *reserved = reserved_names(&l, key_file);
  for (const char *line = l.ev.meta; line && *line;) {
    const char *end = strchr(line, '\n');
    size_t ll = end ? (size_t)(end - line) : strlen(line);
    char *one = ll && !hookd_header_line_named(line, ll, reserved) ? strndup(line, ll) : NULL;
    if (one) hs = curl_slist_append(hs, one);
    free(one);
    line = end ? end + 1 : line + ll;
  }
  free(reserved);
  int failures = 0;
  CURL *e = no_memory ? NULL : curl_easy_init();
  if (no_memory) {
    fprintf(stderr, "hookd inbox replay: out of memory: nothing sent\n");
    failures++;
  } else if (!e) {
    fprintf(stderr, "hookd inbox replay: cannot start libcurl: nothing sent\n");
    failures++;
  }
  char refused_ip[64] = "";
  for (long i = 1; i <= times && e; i++) {
    answer resp = {.len = 0};
    char ts[80], sig[MAX_KEYS * (HOOKD_SIG_MAX + 1) + 32];
    int64_t now = (int64_t)time(NULL);
    struct curl_slist *call = NULL; /* this call's timestamp and signatures, then the rest */
    snprintf(ts, sizeof ts, "webhook-timestamp: %lld", (long long)now);
    call = curl_slist_append(call, ts);
    /* signed with the keys of now: a previous secret's overlap may end during the calls (up
     * to 10,000 of them, 30 s each), and after it only the new one signs, as a forward's */
    size_t n_now = 0;
    for (size_t k = 0; k < n_keys; k++)
      if (until_ms[k] > hookd_now_ms()) now_keys[n_now++] = keys[k];
    if (n_now && sign_header(&l, now_keys, n_now, now, sig, sizeof sig) == 0)
      call = curl_slist_append(call, sig);
    for (struct curl_slist *x = hs; x; x = x->next) call = curl_slist_append(call, x->data);
    curl_easy_setopt(e, CURLOPT_URL, to);
    /* the guards, or nothing sent: a libcurl older than the one built against (same soname)
     * refuses an option it does not know, and the payload would go wherever --to points */
    bool guarded = curl_easy_setopt(e, CURLOPT_PROXY, "") == CURLE_OK && /* to the handler */
                   curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    if (!remote)
      guarded = guarded &&
                curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, loopback_only) == CURLE_OK &&
                curl_easy_setopt(e, CURLOPT_PREREQDATA, refused_ip) == CURLE_OK;
    if (!guarded) {
      curl_slist_free_all(call);
      fprintf(stderr, "hookd inbox replay: this libcurl (%s) cannot hold the request to "
                      "loopback HTTP: nothing sent (7.85 or later is needed)\n",
              curl_version());
      failures++;
      break;
    }
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, l.ev.body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)l.ev.body_len);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, call);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 30000L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &resp);
    CURLcode cc = curl_easy_perform(e);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(call);
    long status = 0;
    curl_easy_getinfo(e, CURLINFO_RESPONSE_CODE, &status);
    if (refused_ip[0]) {
      fprintf(stderr,
              "hookd inbox replay: %s is not a loopback address: nothing sent (a stored request"
              " may carry personal data; --allow-remote sends it elsewhere)\n",
              refused_ip);
      failures++;
      break;
    }
    if (cc != CURLE_OK) {
      printf("%ld/%ld  %s\n", i, times, curl_easy_strerror(cc));
      failures++;
    } else {
      printf("%ld/%ld  %ld  ", i, times, status);
      hookd_shown_print(stdout, resp.b, resp.len); /* (an answer is untrusted) */
      putchar('\n');
      if (status < 200 || status > 299) failures++;
    }
  }
  curl_easy_cleanup(e);
  curl_slist_free_all(hs);
  OPENSSL_cleanse(keys, sizeof keys);
  OPENSSL_cleanse(now_keys, sizeof now_keys);
  hookd_event_free(&l.ev);
  hookd_inbox_free(&l.rec);
  for (size_t i = 0; i < l.n_dests; i++) hookd_endpoint_free(&l.dests[i]);
  return failures ? 1 : 0;
}

/* destination.c — policy construction, the connect-time hook, and the resolver pool. */
#include "daemon/destination.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "daemon/log.h"

#define RESOLVER_THREADS 4
#define MAX_ADDRS 32

struct hookd_destinations {
  hookd_url_policy url;
  pthread_mutex_t pin_mu;          /* guards the pin lists */
  struct curl_slist *fixed;        /* --resolve */
  char resolve_file[1024];
  struct stat file_st;             /* the file as last loaded */
  struct curl_slist *retired[64];  /* replaced lists, kept for requests still using them */
  int n_retired;
  hookd_cidr allow[HOOKD_CFG_LIST_MAX];
  uint16_t ports[64];
  struct curl_slist *resolve;
  pthread_t threads[RESOLVER_THREADS];
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  hookd_dest_check *head, *tail;
  int queued;
  char running[RESOLVER_THREADS][72]; /* who each thread's check is for ("": idle), until
                                        * its done() returned */
  bool busy[RESOLVER_THREADS];
  int next_slot;                      /* the next thread's place in running */
  int stop;
};

const char *hookd_destinations_addr_check(void *ctx, const struct sockaddr *sa, socklen_t len) {
  hookd_destinations *d = ctx;
  return hookd_addr_judge_sockaddr(&d->url.addr, sa, len);
}

int hookd_destinations_url_check(void *ctx, const char *url, char *rule, size_t rule_len) {
  hookd_destinations *d = ctx;
  hookd_url_info info;
  hookd_url_error err;
  if (hookd_url_check(&d->url, url, &info, &err) == 0) return 0;
  snprintf(rule, rule_len, "%s", err.rule);
  return -1;
}

static struct curl_slist *append_all(struct curl_slist *dst, const struct curl_slist *src) {
  for (; src; src = src->next) {
    struct curl_slist *t = curl_slist_append(dst, src->data);
    if (t) dst = t;
  }
  return dst;
}

/* Length of a pin's "HOST:PORT" (its removal entry's name), 0 if it has none. */
static size_t pin_name_len(const char *pin) {
  if (*pin == '+') pin++;
  const char *c = strchr(pin, ':');
  c = c ? strchr(c + 1, ':') : NULL;
  return c ? (size_t)(c - pin) : 0;
}

static bool pin_listed(const struct curl_slist *list, const char *name, size_t n) {
  for (; list; list = list->next) {
    const char *p = list->data + (list->data[0] == '+');
    if (list->data[0] != '-' && pin_name_len(list->data) == n && !strncmp(p, name, n)) return true;
  }
  return false;
}

/* libcurl keeps every CURLOPT_RESOLVE entry in its DNS cache: a pin gone from the file would
 * go on applying to deliveries (while the registration checks no longer see it) unless removed
 * by a "-HOST:PORT" entry. */
static struct curl_slist *append_removals(struct curl_slist *list, const struct curl_slist *old) {
  for (; old; old = old->next) {
    if (old->data[0] == '-') continue;
    const char *name = old->data + (old->data[0] == '+');
    size_t n = pin_name_len(old->data);
    if (!n || pin_listed(list, name, n)) continue;
    char rm[520];
    snprintf(rm, sizeof rm, "-%.*s", (int)n, name);
    struct curl_slist *t = curl_slist_append(list, rm);
    if (t) list = t;
  }
  return list;
}

/* Rebuilds d->resolve when the resolve file changed. Call with pin_mu held. */
/* A pin as libcurl reads it: HOST:PORT:ADDR[,ADDR…], each address an IPv4 or a bracketed
 * IPv6 literal. libcurl skips a malformed one without a word (the name then resolves as
 * usual): refused at start (--resolve), left out with a log line (--resolve-file). */
bool hookd_resolve_pin_valid(const char *pin) {
  const char *c1 = strchr(pin, ':');
  if (!c1 || c1 == pin) return false;
  const char *c2 = strchr(c1 + 1, ':');
  if (!c2 || c2 == c1 + 1 || c2 - c1 - 1 > 5) return false;
  long port = 0;
  for (const char *p = c1 + 1; p < c2; p++) {
    if (*p < '0' || *p > '9') return false;
    port = port * 10 + (*p - '0');
  }
  if (port < 1 || port > 65535) return false;
  for (const char *a = c2 + 1;;) {
    const char *comma = strchr(a, ',');
    size_t n = comma ? (size_t)(comma - a) : strlen(a);
    char addr[64];
    unsigned char bin[16];
    if (n < 2 || n >= sizeof addr) return false;
    bool v6 = a[0] == '[';
    if (v6 && a[n - 1] != ']') return false;
    memcpy(addr, a + v6, n - 2 * v6);
    addr[n - 2 * v6] = '\0';
    if (inet_pton(v6 ? AF_INET6 : AF_INET, addr, bin) != 1) return false;
    if (!comma) return true;
    a = comma + 1;
  }
}

static void reload_pins(hookd_destinations *d) {
  if (!d->resolve_file[0]) return;
  struct stat st;
  if (stat(d->resolve_file, &st) != 0) memset(&st, 0, sizeof st);
  if (st.st_ino == d->file_st.st_ino && st.st_size == d->file_st.st_size &&
      st.st_mtim.tv_sec == d->file_st.st_mtim.tv_sec &&
      st.st_mtim.tv_nsec == d->file_st.st_mtim.tv_nsec && d->resolve)
    return;
  struct curl_slist *list = append_all(NULL, d->fixed);
  FILE *f = fopen(d->resolve_file, "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ')) line[--n] = '\0';
    if (!n || line[0] == '#') continue;
    if (!hookd_resolve_pin_valid(line)) {
      HLOG(HOOKD_LOG_WARN, "resolve_file.invalid_line", KV_S("path", d->resolve_file),
           KV_S("line", line), KV_S("expected", "HOST:PORT:ADDR[,ADDR…] (IPv4 or [IPv6])"));
      continue;
    }
    struct curl_slist *t = curl_slist_append(list, line);
    if (t) list = t;
  }
  if (f) fclose(f);
  list = append_removals(list, d->resolve);
  if (d->resolve) {
    if (d->n_retired < (int)(sizeof d->retired / sizeof d->retired[0]))
      d->retired[d->n_retired++] = d->resolve;
    /* beyond that many reloads the list replaced is leaked rather than freed under a request
     * (a development and test option: a file changed that often is not its use) */
  }
  d->resolve = list;
  d->file_st = st;
}

struct curl_slist *hookd_destinations_resolve_list(void *ctx) {
  hookd_destinations *d = ctx;
  pthread_mutex_lock(&d->pin_mu);
  reload_pins(d);
  struct curl_slist *l = d->resolve;
  pthread_mutex_unlock(&d->pin_mu);
  return l;
}

int hookd_destinations_check_shape(hookd_destinations *d, const char *url, hookd_url_info *info,
                                   hookd_url_error *err) {
  return hookd_url_check(&d->url, url, info, err);
}

/* Looks the host:port up in the --resolve pins ("HOST:PORT:ADDR[,ADDR]"). */
static size_t pinned(hookd_destinations *d, const hookd_url_info *info, int *fam,
                     unsigned char (*addrs)[16]) {
  char prefix[300];
  snprintf(prefix, sizeof prefix, "%s:%u:", info->host, info->port);
  size_t plen = strlen(prefix), n = 0;
  for (struct curl_slist *e = hookd_destinations_resolve_list(d); e; e = e->next) {
    const char *s = e->data;
    if (*s == '+') s++;
    if (strncasecmp(s, prefix, plen) != 0) continue;
    char list[256];
    snprintf(list, sizeof list, "%s", s + plen);
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a && n < MAX_ADDRS;
         a = strtok_r(NULL, ",", &save)) {
      size_t al = strlen(a);
      if (al > 2 && a[0] == '[' && a[al - 1] == ']') {
        a[al - 1] = '\0';
        a++;
      }
      if (inet_pton(AF_INET, a, addrs[n]) == 1) fam[n++] = AF_INET;
      else if (inet_pton(AF_INET6, a, addrs[n]) == 1) fam[n++] = AF_INET6;
    }
    return n;
  }
  return 0;
}

/* A name's addresses judged (c->info: its URL's, judged by hookd_destinations_check_async). */
static void check_one(hookd_destinations *d, hookd_dest_check *c) {
  int fam[MAX_ADDRS];
  unsigned char addrs[MAX_ADDRS][16];
  size_t n = pinned(d, &c->info, fam, addrs);
  if (n == 0) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(c->info.host, NULL, &hints, &res);
    /* no such name, or no address: the `dns` rule's 422 below; any other failure (the name
     * server failing or not answering) says nothing of the name: retry (docs/security.md) */
    if (g != 0 && g != EAI_NONAME && g != EAI_NODATA && g != EAI_ADDRFAMILY) {
      if (res) freeaddrinfo(res);
      c->rc = HOOKD_DEST_DNS_AGAIN;
      snprintf(c->err.rule, sizeof c->err.rule, "dns");
      snprintf(c->err.message, sizeof c->err.message, "the host's name could not be looked up "
               "now (%s)", gai_strerror(g)); /* (strerror is not this thread's to call) */
      c->err.address[0] = '\0';
      HLOG(HOOKD_LOG_WARN, "destination.dns_failed", KV_S("host", c->info.host),
           KV_S("error", gai_strerror(g)), KV_S("who", c->who));
      return;
    }
    for (struct addrinfo *a = res; g == 0 && a && n < MAX_ADDRS; a = a->ai_next) {
      if (a->ai_family == AF_INET) {
        memcpy(addrs[n], &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
        fam[n++] = AF_INET;
      } else if (a->ai_family == AF_INET6) {
        memcpy(addrs[n], &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
        fam[n++] = AF_INET6;
      }
    }
    if (res) freeaddrinfo(res);
  }
  c->rc = hookd_url_check_resolved(&d->url, &c->info, fam,
                                   (const unsigned char(*)[16])addrs, n, &c->err);
  /* the refused address is the operator's to know, not the customer's: the 422 names the rule
   * only (an internal name's address, split-horizon DNS, would be told), the log has it */
  if (c->rc != 0 && c->err.address[0])
    HLOG(HOOKD_LOG_INFO, "destination.address_refused", KV_S("rule", c->err.rule),
         KV_S("host", c->info.host), KV_S("address", c->err.address), KV_S("who", c->who));
}

/* Checks of who running on the resolver threads (d->mu held). */
static int running_for(const hookd_destinations *d, const char *who) {
  int n = 0;
  for (int i = 0; i < RESOLVER_THREADS; i++) n += d->busy[i] && !strcmp(d->running[i], who);
  return n;
}

/* The first queued check whose asker has a thread left to it, unlinked (d->mu held). */
static hookd_dest_check *take_next(hookd_destinations *d) {
  int idle = 0;
  for (int i = 0; i < RESOLVER_THREADS; i++) idle += !d->busy[i]; /* (this one among them) */
  hookd_dest_check *prev = NULL;
  for (hookd_dest_check *c = d->head; c; prev = c, c = c->next) {
    int mine = running_for(d, c->who);
    if (mine >= HOOKD_DEST_WHO_RUNNING || (mine > 0 && idle <= 1)) continue;
    if (prev) prev->next = c->next;
    else d->head = c->next;
    if (d->tail == c) d->tail = prev;
    d->queued--;
    return c;
  }
  return NULL;
}

static void *resolver_main(void *arg) {
  hookd_destinations *d = arg;
  pthread_mutex_lock(&d->mu);
  int slot = d->next_slot++; /* this thread's place in d->running */
  pthread_mutex_unlock(&d->mu);
  for (;;) {
    pthread_mutex_lock(&d->mu);
    hookd_dest_check *c;
    while (!(c = take_next(d)) && !d->stop) pthread_cond_wait(&d->cv, &d->mu);
    if (!c) {
      pthread_mutex_unlock(&d->mu);
      return NULL;
    }
    snprintf(d->running[slot], sizeof d->running[slot], "%s", c->who); /* (c may be freed
                                                                         * once done runs) */
    d->busy[slot] = true;
    pthread_mutex_unlock(&d->mu);
    check_one(d, c);
    c->done(c, c->arg);
    pthread_mutex_lock(&d->mu);
    d->busy[slot] = false;
    pthread_cond_broadcast(&d->cv); /* (a check of the same asker may be next) */
    pthread_mutex_unlock(&d->mu);
  }
}

void hookd_destinations_check_async(hookd_destinations *d, hookd_dest_check *c) {
  c->next = NULL;
  /* a URL refused by its shape, or whose host is an address: nothing to resolve, judged here
   * (no place in the queue: a tenant registering fifty at once is not told to wait) */
  if (!c->url) { /* (its copy failed: out of memory) */
    c->rc = -1;
    snprintf(c->err.rule, sizeof c->err.rule, "internal");
    snprintf(c->err.message, sizeof c->err.message, "out of memory");
    c->done(c, c->arg);
    return;
  }
  c->rc = hookd_url_check(&d->url, c->url, &c->info, &c->err);
  if (c->rc != 0 || c->info.ip_family) {
    c->done(c, c->arg);
    return;
  }
  pthread_mutex_lock(&d->mu);
  int mine = 0;
  for (const hookd_dest_check *q = d->head; q; q = q->next) mine += !strcmp(q->who, c->who);
  if (d->queued >= HOOKD_DEST_QUEUE_MAX || mine >= HOOKD_DEST_WHO_QUEUED) {
    pthread_mutex_unlock(&d->mu);
    c->rc = HOOKD_DEST_BUSY;
    c->done(c, c->arg);
    return;
  }
  d->queued++;
  if (d->tail)
    d->tail->next = c;
  else
    d->head = c;
  d->tail = c;
  pthread_cond_signal(&d->cv);
  pthread_mutex_unlock(&d->mu);
}

/* The egress policy's settings into d (its allow list, ports and URL policy); -1 with err when
 * one is not valid. */
static int policy_parse(hookd_destinations *d, const hookd_config *cfg, char *err,
                        size_t errlen) {
  for (size_t i = 0; i < cfg->n_egress_allow; i++) {
    int rc = hookd_cidr_parse(cfg->egress_allow[i], &d->allow[i]);
    if (rc == -2) { /* "::ffff:10.0.0.0/8" would allow ::/8: loopback, every mapped address */
      char net[64];
      hookd_addr_format(d->allow[i].family, d->allow[i].addr, net, sizeof net);
      snprintf(err, errlen,
               "--egress-allow: \"%.60s\" has bits set past its prefix: it would mean %s/%d, "
               "write that if it is meant", cfg->egress_allow[i], net, d->allow[i].prefix);
    } else if (rc != 0) {
      snprintf(err, errlen, "--egress-allow: \"%.60s\" is not a CIDR", cfg->egress_allow[i]);
    }
    if (rc != 0) return -1;
  }
  d->url.addr.allow = d->allow;
  d->url.addr.n_allow = cfg->n_egress_allow;
  d->url.addr.allow_private = cfg->allow_private_networks;
  d->url.allow_http = cfg->allow_http;
  if (!strcmp(cfg->egress_ports, "any")) {
    d->url.any_port = true;
  } else if (cfg->egress_ports[0]) {
    /* "443,8443": decimal ports, each 1-65535, comma-separated — an empty item (",", "80,"),
     * a sign or a space is refused rather than skipped */
    for (const char *t = cfg->egress_ports; t;) {
      const char *comma = strchr(t, ',');
      size_t n = comma ? (size_t)(comma - t) : strlen(t);
      long v = 0;
      bool ok = n >= 1 && n <= 5 && d->url.n_ports < 64;
      for (size_t i = 0; ok && i < n; i++) {
        ok = t[i] >= '0' && t[i] <= '9';
        v = v * 10 + (t[i] - '0');
      }
      if (!ok || v < 1 || v > 65535) {
        snprintf(err, errlen, "--egress-ports: expected \"any\" or up to 64 ports (1-65535, "
                              "comma-separated), got \"%.*s\"", (int)(n > 40 ? 40 : n), t);
        return -1;
      }
      d->ports[d->url.n_ports++] = (uint16_t)v;
      t = comma ? comma + 1 : NULL;
    }
    d->url.ports = d->ports;
  }
  d->url.max_url_len = cfg->max_url_len;
  return 0;
}

int hookd_destinations_check(const hookd_config *cfg, char *err, size_t errlen) {
  hookd_destinations *d = calloc(1, sizeof *d);
  if (!d) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = policy_parse(d, cfg, err, errlen);
  free(d);
  return rc;
}

hookd_destinations *hookd_destinations_new(const hookd_config *cfg, char *err, size_t errlen) {
  hookd_destinations *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  if (policy_parse(d, cfg, err, errlen) != 0) {
    free(d);
    return NULL;
  }
  for (size_t i = 0; i < cfg->n_resolve; i++) {
    struct curl_slist *t = curl_slist_append(d->fixed, cfg->resolve[i]);
    if (t) d->fixed = t;
  }
  struct stat rst;
  if (cfg->resolve_file[0] && stat(cfg->resolve_file, &rst) != 0) /* it may appear later */
    HLOG(HOOKD_LOG_WARN, "resolve_file.missing", KV_S("path", cfg->resolve_file),
         KV_S("effect", "no pins from it until it exists"));
  d->resolve = append_all(NULL, d->fixed);
  snprintf(d->resolve_file, sizeof d->resolve_file, "%s", cfg->resolve_file);
  pthread_mutex_init(&d->pin_mu, NULL);
  pthread_mutex_init(&d->mu, NULL);
  pthread_cond_init(&d->cv, NULL);
  for (int i = 0; i < RESOLVER_THREADS; i++) {
    if (pthread_create(&d->threads[i], NULL, resolver_main, d) != 0) break;
    pthread_setname_np(d->threads[i], "resolver");
    d->nthreads++;
  }
  if (!d->nthreads) {
    snprintf(err, errlen, "cannot start resolver threads");
    hookd_destinations_free(d);
    return NULL;
  }
  return d;
}

void hookd_destinations_free(hookd_destinations *d) {
  if (!d) return;
  pthread_mutex_lock(&d->mu);
  d->stop = 1;
  pthread_cond_broadcast(&d->cv);
  pthread_mutex_unlock(&d->mu);
  for (int i = 0; i < d->nthreads; i++) pthread_join(d->threads[i], NULL);
  curl_slist_free_all(d->resolve);
  curl_slist_free_all(d->fixed);
  for (int i = 0; i < d->n_retired; i++) curl_slist_free_all(d->retired[i]);
  pthread_mutex_destroy(&d->pin_mu);
  pthread_mutex_destroy(&d->mu);
  pthread_cond_destroy(&d->cv);
  free(d);
}

/* destination.h — the destination policy of this daemon: building the address/URL policy from
 * the configuration, the connect-time check handed to the egress, and registration-time checks
 * that resolve names on a small resolver pool (getaddrinfo blocks; the ingress thread must not).
 * Names pinned with --resolve resolve to their pinned address, here as in the egress. */
#ifndef HOOKD_DAEMON_DESTINATION_H
#define HOOKD_DAEMON_DESTINATION_H

#include <curl/curl.h>

#include "daemon/config.h"
#include "egress/urlpolicy.h"

typedef struct hookd_destinations hookd_destinations;

typedef struct hookd_dest_check {
  char *url;                      /* in (owned by the check) */
  char who[72];                   /* in: whose it is (the tenant): checks are shared out by it */
  int rc;                         /* out: 0 allowed, -1 refused, HOOKD_DEST_BUSY or
                                     HOOKD_DEST_DNS_AGAIN */
  hookd_url_info info;
  hookd_url_error err;
  void (*done)(struct hookd_dest_check *c, void *arg); /* runs on a resolver thread */
  void *arg;
  struct hookd_dest_check *next;
} hookd_dest_check;

/* Builds the policy from cfg (CIDRs parsed; an invalid one fails with err). */
hookd_destinations *hookd_destinations_new(const hookd_config *cfg, char *err, size_t errlen);
/* The egress policy's settings (--egress-allow, --egress-ports) checked as _new reads them: 0,
 * or -1 with err naming the bad one (the configuration's load refuses them before hookd binds
 * its port). */
int hookd_destinations_check(const hookd_config *cfg, char *err, size_t errlen);
/* Whether a pin has libcurl's HOST:PORT:ADDR[,ADDR…] shape (--resolve, --resolve-file lines). */
bool hookd_resolve_pin_valid(const char *pin);
void hookd_destinations_free(hookd_destinations *d);

/* The egress's connect-time check (hookd_egress_addr_check signature). */
const char *hookd_destinations_addr_check(void *ctx, const struct sockaddr *sa, socklen_t len);
/* The egress's url_check: the URL's shape under the current policy (scheme, port, …). */
int hookd_destinations_url_check(void *ctx, const char *url, char *rule, size_t rule_len);
/* The current CURLOPT_RESOLVE list: --resolve entries plus --resolve-file's, reloaded when the
 * file changed (owned by d; lists replaced by a reload stay valid until d is freed). Has the
 * signature of hookd_egress_config.resolve_list. */
struct curl_slist *hookd_destinations_resolve_list(void *d);

/* Checks url synchronously without resolving names (shape and IP literals). */
int hookd_destinations_check_shape(hookd_destinations *d, const char *url, hookd_url_info *info,
                                   hookd_url_error *err);
/* The resolver queue is full: the check was not made (answer 503, the client retries). */
#define HOOKD_DEST_BUSY (-2)
/* The name's lookup failed for a reason other than its not existing (EAI_AGAIN, EAI_FAIL, …:
 * the name server failing or not answering): nothing judged (answer 503, c->err.message says
 * why; a 422 would be final to the client, docs/security.md). */
#define HOOKD_DEST_DNS_AGAIN (-3)

/* Full check on a resolver thread; c->done is called there — or at once, on the caller's
 * thread, for a URL with nothing to resolve (refused by its shape, or an address for host), and
 * with rc HOOKD_DEST_BUSY when HOOKD_DEST_QUEUE_MAX checks are waiting already (names
 * whose DNS never answers hold a resolver thread for the resolver's whole timeout; they must
 * not queue every other tenant's checks behind them without bound). c->url is freed with the
 * check by the caller after done. */
#define HOOKD_DEST_QUEUE_MAX 64
/* And shared out by whose they are (c->who, the tenant): one holds at most
 * HOOKD_DEST_WHO_RUNNING of the resolver threads, and the last idle one only if it holds none (a
 * thread is always left to one with nothing running: names that never answer cannot take them
 * all), and HOOKD_DEST_WHO_QUEUED places in the queue (past that, HOOKD_DEST_BUSY for it alone). */
#define HOOKD_DEST_WHO_RUNNING 2
#define HOOKD_DEST_WHO_QUEUED 16
void hookd_destinations_check_async(hookd_destinations *d, hookd_dest_check *c);

#endif

/* urlpolicy.h — validating a customer-supplied destination URL at registration (O14), with
 * libcurl's URL API (curl_url): scheme http/https only (http only when the operator allows it),
 * no userinfo, a port in the allowed set, a host that is not empty; an IP-literal host in any
 * form (decimal, octal, hex, shortened, bracketed IPv6, IPv6 embedding IPv4) is normalised and
 * judged by addrpolicy. A name is not resolved here: the caller resolves it (asynchronously)
 * and passes every address to hookd_url_check_resolved.
 *
 * Errors name the rule (for the API's 422 body and the logs) and never echo a secret, nor the
 * address a name resolved to (kept apart, in `address`, for the server's log). */
#ifndef HOOKD_EGRESS_URLPOLICY_H
#define HOOKD_EGRESS_URLPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/addrpolicy.h"

typedef struct hookd_url_policy {
  hookd_addr_policy addr;
  bool allow_http;          /* plain http allowed (development, tests) */
  const uint16_t *ports;    /* allowed ports; NULL = hookd_url_default_ports */
  size_t n_ports;
  bool any_port;            /* every port allowed (the operator said so) */
  size_t max_url_len;       /* default 2048 */
} hookd_url_policy;

/* The default allowed ports: 80, 443, 8080, 8443. */
extern const uint16_t hookd_url_default_ports[];
extern const size_t hookd_url_default_ports_n;

typedef struct hookd_url_info {
  char scheme[8];           /* "http" or "https" */
  char host[256];           /* lowercased name, or the normalised IP literal (no brackets) */
  uint16_t port;            /* explicit or the scheme's default */
  int ip_family;            /* AF_INET / AF_INET6 when host is an IP literal, else 0 */
  unsigned char ip[16];
} hookd_url_info;

typedef struct hookd_url_error {
  char rule[48];            /* machine name: scheme, userinfo, port, host, length, syntax,
                               or an addrpolicy rule (loopback, private, metadata, …) */
  char message[200];        /* human explanation (for the customer: the API's 422) */
  char address[46];         /* the refused address a name resolved to, else "": for the
                               server's log only — an internal name's address (split-horizon
                               DNS) is not the customer's to learn */
} hookd_url_error;

/* Checks the URL's shape and, for IP literals, its address. Returns 0 with info filled, or -1
 * with err filled. */
int hookd_url_check(const hookd_url_policy *p, const char *url, hookd_url_info *info,
                    hookd_url_error *err);

/* Judges every resolved address of a name (family/addr pairs, 4 or 16 bytes each). Returns 0
 * when all are allowed, or -1 naming the first forbidden one. n == 0 is an error ("dns"). */
int hookd_url_check_resolved(const hookd_url_policy *p, const hookd_url_info *info,
                             const int *families, const unsigned char (*addrs)[16], size_t n,
                             hookd_url_error *err);

#endif

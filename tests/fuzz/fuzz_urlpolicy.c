/* fuzz_urlpolicy.c — libFuzzer target for the URL and address parsers: arbitrary bytes (as a
 * NUL-terminated copy) go to hookd_url_check, hookd_host_parse_ip, hookd_ipv4_parse_loose and
 * hookd_cidr_parse; besides memory errors it traps on broken invariants (an accepted URL whose
 * IP-literal host is forbidden, an address that does not survive format → parse, a CIDR with
 * host bits set). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/addrpolicy.h"
#include "egress/urlpolicy.h"

#define MAX_INPUT 4096

static void url_invariants(const hookd_url_policy *p, const char *s) {
  hookd_url_info info;
  hookd_url_error err;
  memset(&err, 0, sizeof err);
  if (hookd_url_check(p, s, &info, &err) == 0) {
    check(strcmp(info.scheme, "https") == 0 ||
          (p->allow_http && strcmp(info.scheme, "http") == 0));
    check(memchr(info.host, '\0', sizeof info.host) != NULL && info.host[0] != '\0');
    bool port_ok = false;
    for (size_t i = 0; i < hookd_url_default_ports_n; i++)
      port_ok |= info.port == hookd_url_default_ports[i];
    check(port_ok);
    if (info.ip_family) {
      check(hookd_addr_judge(&p->addr, info.ip_family, info.ip) == NULL);
      unsigned char again[16];
      check(hookd_host_parse_ip(info.host, again) == info.ip_family);
      check(memcmp(again, info.ip, info.ip_family == AF_INET ? 4 : 16) == 0);
    } else {
      unsigned char ip[16];
      check(hookd_host_parse_ip(info.host, ip) == 0);
    }
  } else {
    check(err.rule[0] != '\0');
    check(memchr(err.rule, '\0', sizeof err.rule) != NULL);
    check(memchr(err.message, '\0', sizeof err.message) != NULL);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > MAX_INPUT) return 0;
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';

  hookd_url_policy strict;
  memset(&strict, 0, sizeof strict);
  url_invariants(&strict, s);

  hookd_cidr allow[1];
  check(hookd_cidr_parse("127.0.0.0/8", &allow[0]) == 0);
  hookd_url_policy dev;
  memset(&dev, 0, sizeof dev);
  dev.allow_http = true;
  dev.addr.allow = allow;
  dev.addr.n_allow = 1;
  url_invariants(&dev, s);

  unsigned char addr[16];
  int fam = hookd_host_parse_ip(s, addr);
  check(fam == 0 || fam == AF_INET || fam == AF_INET6);
  if (fam) {
    char buf[64], again_s[64];
    hookd_addr_format(fam, addr, buf, sizeof buf);
    unsigned char again[16];
    check(hookd_host_parse_ip(buf, again) == fam);
    check(memcmp(again, addr, fam == AF_INET ? 4 : 16) == 0);
    hookd_addr_format(fam, again, again_s, sizeof again_s);
    check(strcmp(buf, again_s) == 0);
    const char *rule = hookd_addr_judge(NULL, fam, addr);
    (void)rule;
  }

  unsigned char v4[4];
  if (hookd_ipv4_parse_loose(s, v4) == 0) {
    unsigned char a16[16];
    check(hookd_host_parse_ip(s, a16) == AF_INET);
    check(memcmp(a16, v4, 4) == 0);
  }

  hookd_cidr c;
  if (hookd_cidr_parse(s, &c) == 0) {
    int max = c.family == AF_INET ? 32 : 128;
    check(c.family == AF_INET || c.family == AF_INET6);
    check(c.prefix >= 0 && c.prefix <= max);
    for (int bit = c.prefix; bit < max; bit++)
      check(!(c.addr[bit / 8] & (0x80 >> (bit % 8))));
  }

  free(s);
  return 0;
}

/* test_addrpolicy.c — the SSRF address classifier: a table of host literals in every form
 * (loose IPv4, bracketed IPv6, IPv6 embedding IPv4) with the verdict and rule each must get,
 * loose IPv4 and CIDR parsing, allowlist / allow_private / metadata interplay, sockaddrs and
 * formatting. No sockets are opened. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>

#include "core/addrpolicy.h"

/* A host as it may appear in a URL; family 0 = not an IP literal; rule NULL = allowed; norm is
 * the formatted, normalised address (NULL when family is 0). */
typedef struct host_case {
  const char *host;
  int family;
  const char *norm;
  const char *rule;
} host_case;

static const host_case host_cases[] = {
    /* loopback in every IPv4 spelling */
    {"127.0.0.1", AF_INET, "127.0.0.1", "loopback"},
    {"127.1", AF_INET, "127.0.0.1", "loopback"},
    {"0177.0.0.1", AF_INET, "127.0.0.1", "loopback"},
    {"0x7f.1", AF_INET, "127.0.0.1", "loopback"},
    {"0x7f000001", AF_INET, "127.0.0.1", "loopback"},
    {"0X7F000001", AF_INET, "127.0.0.1", "loopback"},
    {"2130706433", AF_INET, "127.0.0.1", "loopback"},
    {"017700000001", AF_INET, "127.0.0.1", "loopback"},
    {"127.0.0.1.", AF_INET, "127.0.0.1", "loopback"},
    {"127.0.1", AF_INET, "127.0.0.1", "loopback"},
    {"0x7f.0.0.0x1", AF_INET, "127.0.0.1", "loopback"},
    {"00000000000000000000177.1", AF_INET, "127.0.0.1", "loopback"},
    {"127.255.255.254", AF_INET, "127.255.255.254", "loopback"},
    /* unspecified */
    {"0", AF_INET, "0.0.0.0", "unspecified"},
    {"0.0.0.0", AF_INET, "0.0.0.0", "unspecified"},
    {"0.1.2.3", AF_INET, "0.1.2.3", "unspecified"},
    /* the other IPv4 ranges */
    {"10.0.0.1", AF_INET, "10.0.0.1", "private"},
    {"012.1", AF_INET, "10.0.0.1", "private"},
    {"172.16.0.1", AF_INET, "172.16.0.1", "private"},
    {"172.31.255.255", AF_INET, "172.31.255.255", "private"},
    {"172.32.0.1", AF_INET, "172.32.0.1", NULL},
    {"192.168.1.1", AF_INET, "192.168.1.1", "private"},
    {"3232235777", AF_INET, "192.168.1.1", "private"},
    {"100.64.0.1", AF_INET, "100.64.0.1", "cgnat"},
    {"100.127.255.255", AF_INET, "100.127.255.255", "cgnat"},
    {"100.128.0.1", AF_INET, "100.128.0.1", NULL},
    {"169.254.0.1", AF_INET, "169.254.0.1", "link_local"},
    {"192.0.0.8", AF_INET, "192.0.0.8", "ietf_protocol"},
    {"192.0.2.1", AF_INET, "192.0.2.1", "documentation"},
    {"198.51.100.7", AF_INET, "198.51.100.7", "documentation"},
    {"203.0.113.9", AF_INET, "203.0.113.9", "documentation"},
    {"192.88.99.1", AF_INET, "192.88.99.1", "6to4_relay"},
    {"198.18.0.1", AF_INET, "198.18.0.1", "benchmarking"},
    {"198.19.255.255", AF_INET, "198.19.255.255", "benchmarking"},
    {"224.0.0.1", AF_INET, "224.0.0.1", "multicast"},
    {"239.255.255.250", AF_INET, "239.255.255.250", "multicast"},
    {"240.0.0.1", AF_INET, "240.0.0.1", "reserved"},
    {"255.255.255.255", AF_INET, "255.255.255.255", "broadcast"},
    {"4294967295", AF_INET, "255.255.255.255", "broadcast"},
    /* cloud metadata */
    {"169.254.169.254", AF_INET, "169.254.169.254", "metadata"},
    {"0xa9fea9fe", AF_INET, "169.254.169.254", "metadata"},
    {"2852039166", AF_INET, "169.254.169.254", "metadata"},
    {"0251.0376.0251.0376", AF_INET, "169.254.169.254", "metadata"},
    {"169.254.43518", AF_INET, "169.254.169.254", "metadata"},
    {"168.63.129.16", AF_INET, "168.63.129.16", "metadata"},
    {"100.100.100.200", AF_INET, "100.100.100.200", "metadata"},
    {"[fd00:ec2::254]", AF_INET6, "fd00:ec2::254", "metadata"},
    {"fd00:ec2::254", AF_INET6, "fd00:ec2::254", "metadata"},
    /* IPv6 ranges */
    {"[::]", AF_INET6, "::", "unspecified"},
    {"[::1]", AF_INET6, "::1", "loopback"},
    {"[0:0:0:0:0:0:0:1]", AF_INET6, "::1", "loopback"},
    {"[fc00::1]", AF_INET6, "fc00::1", "unique_local"},
    {"[fd12:3456::1]", AF_INET6, "fd12:3456::1", "unique_local"},
    {"[fe80::1]", AF_INET6, "fe80::1", "link_local"},
    {"[FEBF::1]", AF_INET6, "febf::1", "link_local"},
    {"[fec0::1]", AF_INET6, "fec0::1", "site_local"},
    {"[ff02::1]", AF_INET6, "ff02::1", "multicast"},
    {"[2001:db8::1]", AF_INET6, "2001:db8::1", "documentation"},
    {"[100::1]", AF_INET6, "100::1", "discard"},
    {"[3fff::1]", AF_INET6, "3fff::1", "documentation"},
    {"[3fff:fff::1]", AF_INET6, "3fff:fff::1", "documentation"},
    {"[3fff:1000::1]", AF_INET6, "3fff:1000::1", NULL},
    {"[5f00::1]", AF_INET6, "5f00::1", "srv6"},
    {"[2001:10::1]", AF_INET6, "2001:10::1", "ietf_protocol"},
    {"[2001:20::1]", AF_INET6, "2001:20::1", "ietf_protocol"},
    {"[2001:1ff:ffff::1]", AF_INET6, "2001:1ff:ffff::1", "ietf_protocol"},
    {"[2001:200::1]", AF_INET6, "2001:200::1", NULL},
    {"[100:0:0:1::1]", AF_INET6, "100:0:0:1::1", NULL},
    /* IPv6 embedding IPv4 */
    {"[::ffff:127.0.0.1]", AF_INET6, "::ffff:127.0.0.1", "loopback"},
    {"[::ffff:7f00:1]", AF_INET6, "::ffff:127.0.0.1", "loopback"},
    {"[0:0:0:0:0:ffff:a9fe:a9fe]", AF_INET6, "::ffff:169.254.169.254", "metadata"},
    {"[::ffff:10.1.2.3]", AF_INET6, "::ffff:10.1.2.3", "private"},
    {"[::ffff:93.184.216.34]", AF_INET6, "::ffff:93.184.216.34", NULL},
    {"[::127.0.0.1]", AF_INET6, "::127.0.0.1", "loopback"},
    {"[::7f00:1]", AF_INET6, "::127.0.0.1", "loopback"},
    {"[::a9fe:a9fe]", AF_INET6, "::169.254.169.254", "metadata"},
    {"[::2]", AF_INET6, "::2", "unspecified"}, /* IPv4-compatible 0.0.0.2 */
    {"[64:ff9b::7f00:1]", AF_INET6, "64:ff9b::7f00:1", "loopback"},
    {"[64:ff9b::127.0.0.1]", AF_INET6, "64:ff9b::7f00:1", "loopback"},
    {"[64:ff9b::a9fe:a9fe]", AF_INET6, "64:ff9b::a9fe:a9fe", "metadata"},
    {"[64:ff9b::808:808]", AF_INET6, "64:ff9b::808:808", NULL},
    /* local-use NAT64: the IPv4 address may sit at other bits (a /48 gateway would translate
     * 64:ff9b:1:7f00:0:100:808:808 to 127.0.0.1): refused whatever the last 32 bits say */
    {"[64:ff9b:1::a00:1]", AF_INET6, "64:ff9b:1::a00:1", "nat64_local"},
    {"[64:ff9b:1:ffff::7f00:1]", AF_INET6, "64:ff9b:1:ffff::7f00:1", "nat64_local"},
    {"[64:ff9b:1:7f00:0:100:808:808]", AF_INET6, "64:ff9b:1:7f00:0:100:808:808", "nat64_local"},
    {"[64:ff9b:1::a9fe:a9fe]", AF_INET6, "64:ff9b:1::a9fe:a9fe", "metadata"},
    /* IPv4-translated (SIIT) */
    {"[::ffff:0:7f00:1]", AF_INET6, "::ffff:0:7f00:1", "loopback"},
    {"[::ffff:0:a9fe:a9fe]", AF_INET6, "::ffff:0:a9fe:a9fe", "metadata"},
    {"[::ffff:0:808:808]", AF_INET6, "::ffff:0:808:808", NULL},
    /* container and Kubernetes credential endpoints, GCP's IPv6 metadata address */
    {"169.254.170.2", AF_INET, "169.254.170.2", "metadata"},
    {"169.254.170.23", AF_INET, "169.254.170.23", "metadata"},
    {"[fd00:ec2::23]", AF_INET6, "fd00:ec2::23", "metadata"},
    {"[fd20:ce::254]", AF_INET6, "fd20:ce::254", "metadata"},
    {"[2002:7f00:1::1]", AF_INET6, "2002:7f00:1::1", "loopback"},
    {"[2002:a9fe:a9fe::]", AF_INET6, "2002:a9fe:a9fe::", "metadata"},
    {"[2002:c0a8:101::]", AF_INET6, "2002:c0a8:101::", "private"},
    {"[2002:5db8:d822::1]", AF_INET6, "2002:5db8:d822::1", NULL},
    /* Teredo: client = last 32 bits inverted */
    {"[2001:0:4136:e378:8000:63bf:80ff:fffe]", AF_INET6, "2001:0:4136:e378:8000:63bf:80ff:fffe",
     "loopback"},
    {"[2001::5601:5601]", AF_INET6, "2001::5601:5601", "metadata"},
    {"[2001:0:53aa:64c:0:0:f5ff:fffe]", AF_INET6, "2001:0:53aa:64c::f5ff:fffe", "private"},
    {"[2001::ffff:ffff]", AF_INET6, "2001::ffff:ffff", "unspecified"},
    {"[2001:0:4136:e378:8000:63bf:a247:27dd]", AF_INET6, "2001:0:4136:e378:8000:63bf:a247:27dd",
     NULL},
    /* public */
    {"93.184.216.34", AF_INET, "93.184.216.34", NULL},
    {"1.1.1.1", AF_INET, "1.1.1.1", NULL},
    {"8.8.8.8", AF_INET, "8.8.8.8", NULL},
    {"1.1", AF_INET, "1.0.0.1", NULL},
    {"[2606:4700::1111]", AF_INET6, "2606:4700::1111", NULL},
    {"2606:4700:4700::1111", AF_INET6, "2606:4700:4700::1111", NULL},
    {"[2001:4860:4860::8888]", AF_INET6, "2001:4860:4860::8888", NULL},
    /* not IP literals (names, or garbage that is neither) */
    {"example.com", 0, NULL, NULL},
    {"0x", 0, NULL, NULL}, /* a bare 0x: a name to glibc and libcurl */
    {"8.8.8.0x", 0, NULL, NULL},
    {"1.0x.0177", 0, NULL, NULL},
    {"localhost", 0, NULL, NULL},
    {"127.0.0.1..", 0, NULL, NULL},
    {".127.0.0.1", 0, NULL, NULL},
    {"127..0.1", 0, NULL, NULL},
    {"1.2.3.4.5", 0, NULL, NULL},
    {"256.0.0.1", 0, NULL, NULL},
    {"127.0.0.256", 0, NULL, NULL},
    {"127.16777216", 0, NULL, NULL},
    {"4294967296", 0, NULL, NULL},
    {"0x100000000", 0, NULL, NULL},
    {"99999999999999999999", 0, NULL, NULL},
    {"08.0.0.1", 0, NULL, NULL},
    {"0x7g.1", 0, NULL, NULL},
    {"+127.0.0.1", 0, NULL, NULL},
    {" 127.0.0.1", 0, NULL, NULL},
    {"127.0.0.1 ", 0, NULL, NULL},
    {"-1", 0, NULL, NULL},
    {".", 0, NULL, NULL},
    {"", 0, NULL, NULL},
    {"[fe80::1%eth0]", 0, NULL, NULL},
    {"fe80::1%25eth0", 0, NULL, NULL},
    {"[::1", 0, NULL, NULL},
    {"::1]", 0, NULL, NULL},
    {"[]", 0, NULL, NULL},
    {"[127.0.0.1]", 0, NULL, NULL},
    {"[::ffff:127.1]", 0, NULL, NULL},
    {"1:2:3:4:5:6:7:8:9", 0, NULL, NULL},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void host_corpus(void **s) {
  hookd_addr_policy pol = {0};
  char where[128];
  for (size_t i = 0; i < COUNT(host_cases); i++) {
    const host_case *c = &host_cases[i];
    unsigned char addr[16];
    memset(addr, 0xaa, sizeof addr);
    int fam = hookd_host_parse_ip(c->host, addr);
    snprintf(where, sizeof where, "case %zu: \"%s\"", i, c->host);
    if (fam != c->family) fail_msg("%s: family %d, expected %d", where, fam, c->family);
    if (!fam) continue;
    char buf[64];
    hookd_addr_format(fam, addr, buf, sizeof buf);
    if (strcmp(buf, c->norm) != 0) fail_msg("%s: normalised to %s, expected %s", where, buf, c->norm);
    const char *rule = hookd_addr_judge(&pol, fam, addr);
    if ((rule == NULL) != (c->rule == NULL) || (rule && strcmp(rule, c->rule) != 0))
      fail_msg("%s: rule %s, expected %s", where, rule ? rule : "(allowed)",
               c->rule ? c->rule : "(allowed)");
  }
  print_message("host corpus: %zu inputs\n", COUNT(host_cases));
}

static void ipv4_loose(void **s) {
  unsigned char a[4];
  assert_int_equal(hookd_ipv4_parse_loose("1.2.3.4", a), 0);
  assert_memory_equal(a, "\x01\x02\x03\x04", 4);
  assert_int_equal(hookd_ipv4_parse_loose("1.2.772", a), 0); /* 772 = 0x0304 */
  assert_memory_equal(a, "\x01\x02\x03\x04", 4);
  assert_int_equal(hookd_ipv4_parse_loose("1.131844", a), 0); /* 0x020304 */
  assert_memory_equal(a, "\x01\x02\x03\x04", 4);
  assert_int_equal(hookd_ipv4_parse_loose("1.", a), 0);
  assert_memory_equal(a, "\x00\x00\x00\x01", 4);
  assert_int_equal(hookd_ipv4_parse_loose("0xff.0xffffff", a), 0);
  assert_memory_equal(a, "\xff\xff\xff\xff", 4);
  assert_int_equal(hookd_ipv4_parse_loose("1.2.65536", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("1.2.3.256", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("1.2.3.4..", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("1.2.3.4.", a), 0);
  assert_int_equal(hookd_ipv4_parse_loose("09", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("0x0x1", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("1e3", a), -1);
  assert_int_equal(hookd_ipv4_parse_loose(NULL, a), -1);
  assert_int_equal(hookd_ipv4_parse_loose("", a), -1);
}

static void cidr(void **s) {
  hookd_cidr c;
  assert_int_equal(hookd_cidr_parse("10.0.0.0/8", &c), 0);
  assert_int_equal(c.family, AF_INET);
  assert_int_equal(c.prefix, 8);
  assert_memory_equal(c.addr, "\x0a\x00\x00\x00", 4);
  /* bits set past the prefix: refused, the network it would mean given back */
  assert_int_equal(hookd_cidr_parse("10.1.2.3/8", &c), -2);
  assert_memory_equal(c.addr, "\x0a\x00\x00\x00", 4);
  assert_int_equal(c.prefix, 8);
  assert_int_equal(hookd_cidr_parse("::ffff:10.0.0.0/8", &c), -2); /* would be ::/8 */
  assert_int_equal(c.family, AF_INET6);
  assert_int_equal(c.addr[10], 0);
  assert_int_equal(hookd_cidr_parse("::ffff:10.0.0.0/104", &c), 0);
  assert_int_equal(hookd_cidr_parse("10.0.0.1/31", &c), -2);
  assert_int_equal(hookd_cidr_parse("10.0.0.2/31", &c), 0);
  assert_int_equal(hookd_cidr_parse("127.0.0.2", &c), 0);
  assert_int_equal(c.prefix, 32);
  assert_int_equal(hookd_cidr_parse("0.0.0.0/0", &c), 0);
  assert_int_equal(c.prefix, 0);
  assert_int_equal(hookd_cidr_parse("fd00::/8", &c), 0);
  assert_int_equal(c.family, AF_INET6);
  assert_int_equal(c.prefix, 8);
  assert_int_equal(hookd_cidr_parse("2001:db8::1", &c), 0);
  assert_int_equal(c.prefix, 128);
  assert_int_equal(hookd_cidr_parse("::/0", &c), 0);
  assert_int_equal(hookd_cidr_parse("2001:db8:ffff::/33", &c), -2);
  assert_int_equal(c.addr[4], 0x80);
  assert_int_equal(c.addr[5], 0x00);

  const char *bad[] = {"", "/8", "10.0.0.0/", "10.0.0.0/33", "10.0.0.0/-1", "10.0.0.0/+8",
                       "10.0.0.0/08", "10.0.0.0/8/8", "10.0.0.0/8 ", "10.1/8", "::/129",
                       "fe80::1%eth0/64", "[::1]/128", "example.com/8", "10.0.0.0/1000",
                       "10.0.0.0/8x"};
  for (size_t i = 0; i < COUNT(bad); i++)
    if (hookd_cidr_parse(bad[i], &c) != -1) fail_msg("cidr \"%s\" accepted", bad[i]);
  assert_int_equal(hookd_cidr_parse(NULL, &c), -1);
}

/* Writes 4 bytes: also used on a sockaddr_in's sin_addr. */
static void parse4(const char *s, void *a) {
  assert_int_equal(inet_pton(AF_INET, s, a), 1);
}

static void parse6(const char *s, unsigned char a[16]) {
  assert_int_equal(inet_pton(AF_INET6, s, a), 1);
}

static void allowlist(void **s) {
  hookd_cidr allow[3];
  assert_int_equal(hookd_cidr_parse("127.0.0.2/32", &allow[0]), 0);
  hookd_addr_policy p = {.allow = allow, .n_allow = 1};
  unsigned char a[16];

  parse4("127.0.0.2", a);
  assert_null(hookd_addr_judge(&p, AF_INET, a));
  parse4("127.0.0.3", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "loopback");
  parse4("127.0.0.1", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "loopback");
  /* the same address IPv4-mapped is covered by the IPv4 entry */
  parse6("::ffff:127.0.0.2", a);
  assert_null(hookd_addr_judge(&p, AF_INET6, a));
  parse6("::ffff:127.0.0.3", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "loopback");

  /* an entry covering metadata does not lift [metadata] */
  assert_int_equal(hookd_cidr_parse("169.254.0.0/16", &allow[1]), 0);
  assert_int_equal(hookd_cidr_parse("fd00::/8", &allow[2]), 0);
  p.n_allow = 3;
  parse4("169.254.1.1", a);
  assert_null(hookd_addr_judge(&p, AF_INET, a));
  parse4("169.254.169.254", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "metadata");
  parse6("::ffff:169.254.169.254", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "metadata");
  parse6("fd00:ec2::254", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "metadata");
  parse6("fd00:ec2::253", a); /* AWS's resolver: its whole block is the cloud's own */
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "metadata");
  parse6("fd00:1::253", a);
  assert_null(hookd_addr_judge(&p, AF_INET6, a));
  assert_int_equal(hookd_cidr_parse("169.254.169.254/32", &allow[0]), 0);
  p.n_allow = 1;
  parse4("169.254.169.254", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "metadata");
}

static void allow_private(void **s) {
  hookd_addr_policy p = {.allow_private = true};
  unsigned char a[16];
  const char *ok4[] = {"10.0.0.1", "172.16.0.1", "192.168.0.1", "100.64.0.1"};
  for (size_t i = 0; i < COUNT(ok4); i++) {
    parse4(ok4[i], a);
    if (hookd_addr_judge(&p, AF_INET, a)) fail_msg("%s refused with allow_private", ok4[i]);
  }
  parse6("fd12::1", a);
  assert_null(hookd_addr_judge(&p, AF_INET6, a));
  /* not loopback: hookd's own listener and the host's sidecars (an --egress-allow range
   * lifts it), in any form */
  const char *loop4[] = {"127.0.0.1", "127.1.2.3"};
  for (size_t i = 0; i < COUNT(loop4); i++) {
    parse4(loop4[i], a);
    assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "loopback");
  }
  const char *loop6[] = {"::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1"};
  for (size_t i = 0; i < COUNT(loop6); i++) {
    parse6(loop6[i], a);
    assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "loopback");
  }
  hookd_cidr lo[2];
  assert_int_equal(hookd_cidr_parse("127.0.0.0/8", &lo[0]), 0);
  assert_int_equal(hookd_cidr_parse("::1/128", &lo[1]), 0);
  hookd_addr_policy pl = {.allow = lo, .n_allow = 2, .allow_private = true};
  parse4("127.0.0.1", a);
  assert_null(hookd_addr_judge(&pl, AF_INET, a));
  parse6("::1", a);
  assert_null(hookd_addr_judge(&pl, AF_INET6, a));
  /* only the networks of a development setup: not every other special range */
  const struct {
    const char *addr;
    const char *rule;
  } kept4[] = {{"0.0.0.0", "unspecified"},       {"255.255.255.255", "broadcast"},
               {"224.0.0.1", "multicast"},       {"240.0.0.1", "reserved"},
               {"192.0.2.1", "documentation"},   {"192.0.0.1", "ietf_protocol"},
               {"198.18.0.1", "benchmarking"},
               /* clouds' own services live in link-local, more than the metadata list names
                * (AWS's resolver .169.253, its time server .169.123) */
               {"169.254.1.1", "link_local"},    {"169.254.169.253", "link_local"},
               {"169.254.169.123", "link_local"}};
  for (size_t i = 0; i < COUNT(kept4); i++) {
    parse4(kept4[i].addr, a);
    const char *got = hookd_addr_judge(&p, AF_INET, a);
    if (!got || strcmp(got, kept4[i].rule) != 0)
      fail_msg("%s with allow_private: %s, want %s", kept4[i].addr, got ? got : "allowed",
               kept4[i].rule);
  }
  parse6("::", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "unspecified");
  parse6("ff02::1", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "multicast");
  const char *meta4[] = {"169.254.169.254", "168.63.129.16", "100.100.100.200", "169.254.0.23",
                         "192.0.0.192"};
  for (size_t i = 0; i < COUNT(meta4); i++) {
    parse4(meta4[i], a);
    assert_string_equal(hookd_addr_judge(&p, AF_INET, a), "metadata");
  }
  const char *meta6[] = {"fd00:ec2::254", "fd00:ec2::253", "fd00:ec2::123",
                         "fd00:c1::a9fe:a9fe", "fd00:42::42", "fd00:a9fe:a9fe::1",
                         "::ffff:169.254.169.254", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::",
                         "2001::5601:5601"};
  for (size_t i = 0; i < COUNT(meta6); i++) {
    parse6(meta6[i], a);
    assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "metadata");
  }
  /* the local-use NAT64 prefix stays refused (which IPv4 address it reaches is unknown) unless
   * allowlisted as IPv6 */
  parse6("64:ff9b:1:a9fe:a9:fe00::", a);
  assert_string_equal(hookd_addr_judge(&p, AF_INET6, a), "nat64_local");
  hookd_cidr nat;
  assert_int_equal(hookd_cidr_parse("64:ff9b:1::/48", &nat), 0);
  hookd_addr_policy pa = {.allow = &nat, .n_allow = 1};
  parse6("64:ff9b:1:cb00:71:700::", a); /* 203.0.113.7 at the /48 layout */
  assert_null(hookd_addr_judge(&pa, AF_INET6, a));
  /* allowlisted, metadata stays refused at each layout a gateway may use inside it: 169.254.169.254
   * at /48, /56, /64 and /96 */
  const char *nat_meta[] = {"64:ff9b:1:a9fe:a9:fe00::", "64:ff9b:1:a9:fe:a9fe::",
                            "64:ff9b:1:0:a9:fea9:fe00:0", "64:ff9b:1::a9fe:a9fe"};
  for (size_t i = 0; i < COUNT(nat_meta); i++) {
    parse6(nat_meta[i], a);
    const char *got = hookd_addr_judge(&pa, AF_INET6, a);
    if (!got || strcmp(got, "metadata"))
      fail_msg("%s allowlisted: %s, want metadata", nat_meta[i], got ? got : "allowed");
  }
  /* a NULL policy is the default policy */
  parse4("10.0.0.1", a);
  assert_string_equal(hookd_addr_judge(NULL, AF_INET, a), "private");
  assert_string_equal(hookd_addr_judge(NULL, AF_UNIX, a), "family");
}

static void sockaddrs(void **s) {
  hookd_addr_policy p = {0};
  struct sockaddr_in sin;
  memset(&sin, 0, sizeof sin);
  sin.sin_family = AF_INET;
  sin.sin_port = htons(443);
  parse4("169.254.169.254", (unsigned char *)&sin.sin_addr);
  assert_string_equal(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin, sizeof sin),
                      "metadata");
  parse4("1.1.1.1", (unsigned char *)&sin.sin_addr);
  assert_null(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin, sizeof sin));
  assert_string_equal(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin, 4), "family");

  struct sockaddr_in6 sin6;
  memset(&sin6, 0, sizeof sin6);
  sin6.sin6_family = AF_INET6;
  parse6("::ffff:127.0.0.1", sin6.sin6_addr.s6_addr);
  assert_string_equal(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin6, sizeof sin6),
                      "loopback");
  parse6("2606:4700::1111", sin6.sin6_addr.s6_addr);
  assert_null(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin6, sizeof sin6));
  assert_string_equal(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&sin6, sizeof sin),
                      "family");

  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  ss.ss_family = AF_UNIX;
  assert_string_equal(hookd_addr_judge_sockaddr(&p, (struct sockaddr *)&ss, sizeof ss), "family");
  assert_string_equal(hookd_addr_judge_sockaddr(&p, NULL, 0), "family");
}

static void format(void **s) {
  unsigned char a[16];
  char out[64];
  parse4("192.0.2.1", a);
  hookd_addr_format(AF_INET, a, out, sizeof out);
  assert_string_equal(out, "192.0.2.1");
  parse6("::1", a);
  hookd_addr_format(AF_INET6, a, out, sizeof out);
  assert_string_equal(out, "::1");
  char tiny[4];
  parse4("192.0.2.1", a);
  hookd_addr_format(AF_INET, a, tiny, sizeof tiny);
  assert_string_equal(tiny, "192");
  hookd_addr_format(AF_UNIX, a, out, sizeof out);
  assert_string_equal(out, "?");
  hookd_addr_format(AF_INET, a, out, 0); /* must not write */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_corpus), cmocka_unit_test(ipv4_loose),
      cmocka_unit_test(cidr),        cmocka_unit_test(allowlist),
      cmocka_unit_test(allow_private), cmocka_unit_test(sockaddrs),
      cmocka_unit_test(format),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

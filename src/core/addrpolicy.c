/* addrpolicy.c — SSRF address classification (see addrpolicy.h): the forbidden-range tables,
 * reduction of IPv6 forms that embed an IPv4 address, CIDR and IP-literal parsing, formatting.
 * Pure: no DNS, no sockets, no allocation. */
#include "core/addrpolicy.h"
#include "core/num.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* One forbidden range. addr is in network byte order; IPv4 rows use the first 4 bytes. */
typedef struct range {
  unsigned char addr[16];
  int prefix;
  const char *rule;
} range;

#define V4(a, b, c, d) {a, b, c, d}

/* Order matters: the first match names the rule (255.255.255.255 lies inside 240/4). */
static const range v4_rules[] = {
    {V4(255, 255, 255, 255), 32, "broadcast"},
    {V4(0, 0, 0, 0), 8, "unspecified"},
    {V4(127, 0, 0, 0), 8, "loopback"},
    {V4(10, 0, 0, 0), 8, "private"},
    {V4(172, 16, 0, 0), 12, "private"},
    {V4(192, 168, 0, 0), 16, "private"},
    {V4(100, 64, 0, 0), 10, "cgnat"},
    {V4(169, 254, 0, 0), 16, "link_local"},
    {V4(192, 0, 0, 0), 24, "ietf_protocol"},
    {V4(192, 88, 99, 0), 24, "6to4_relay"}, /* deprecated anycast (RFC 7526) */
    {V4(192, 0, 2, 0), 24, "documentation"},
    {V4(198, 51, 100, 0), 24, "documentation"},
    {V4(203, 0, 113, 0), 24, "documentation"},
    {V4(198, 18, 0, 0), 15, "benchmarking"},
    {V4(224, 0, 0, 0), 4, "multicast"},
    {V4(240, 0, 0, 0), 4, "reserved"},
};

static const range v4_metadata[] = {
    {V4(169, 254, 169, 254), 32, "metadata"}, /* AWS, GCP, Azure, OpenStack, … */
    {V4(168, 63, 129, 16), 32, "metadata"},   /* Azure wireserver */
    {V4(100, 100, 100, 200), 32, "metadata"}, /* Alibaba Cloud */
    {V4(169, 254, 170, 2), 32, "metadata"},   /* AWS ECS task credentials */
    {V4(169, 254, 170, 23), 32, "metadata"},  /* AWS EKS Pod Identity */
    {V4(169, 254, 0, 23), 32, "metadata"},    /* Tencent Cloud */
    {V4(192, 0, 0, 192), 32, "metadata"},     /* Oracle Cloud Classic */
};

static const range v6_rules[] = {
    {{0}, 128, "unspecified"},
    {{[15] = 1}, 128, "loopback"},
    {{0xfc}, 7, "unique_local"},
    {{0xfe, 0x80}, 10, "link_local"},
    {{0xfe, 0xc0}, 10, "site_local"},
    {{0xff}, 8, "multicast"},
    {{0x20, 0x01, 0x0d, 0xb8}, 32, "documentation"},
    {{0x3f, 0xff}, 20, "documentation"}, /* RFC 9637 */
    {{0x01, 0x00}, 64, "discard"},
    {{0x5f, 0x00}, 16, "srv6"},           /* segment identifiers (RFC 9602) */
    {{0x20, 0x01}, 23, "ietf_protocol"},  /* ORCHID, benchmarking, … (Teredo is judged as IPv4) */
};

/* What --allow-private-networks lifts: the networks a development setup runs on, nothing else
 * (unspecified, broadcast, multicast, documentation, … stay refused; link-local too: clouds put
 * their own services there, more than the metadata list can name; loopback too: hookd's own
 * listener and the host's sidecars, which an operator opening 10/8 for internal receivers does
 * not mean to open to every tenant — an --egress-allow range does — docs/security.md). */
static bool private_kind(const char *rule) {
  static const char *const lifted[] = {"private", "unique_local", "site_local", "cgnat"};
  for (size_t i = 0; i < sizeof lifted / sizeof lifted[0]; i++)
    if (!strcmp(rule, lifted[i])) return true;
  return false;
}

static const range v6_metadata[] = {
    /* AWS's whole block: the metadata service (::254), EKS Pod Identity (::23), its resolver
     * (::253) and time server (::123) */
    {{0xfd, 0x00, 0x0e, 0xc2}, 32, "metadata"},
    {{0xfd, 0x20, 0x00, 0xce, [14] = 0x02, [15] = 0x54}, 128, "metadata"}, /* fd20:ce::254, GCP */
    {{0xfd, 0x00, 0x00, 0xc1, [12] = 0xa9, [13] = 0xfe, [14] = 0xa9, [15] = 0xfe},
     128, "metadata"}, /* fd00:c1::a9fe:a9fe, Oracle Cloud */
    {{0xfd, 0x00, 0x00, 0x42, [15] = 0x42}, 128, "metadata"}, /* fd00:42::42, Scaleway */
    {{0xfd, 0x00, 0xa9, 0xfe, 0xa9, 0xfe, [15] = 0x01}, 128, "metadata"}, /* fd00:a9fe:a9fe::1,
                                                                           * Linode (Akamai) */
};

/* The local-use NAT64 prefix (RFC 8215) may carry its IPv4 address at other bits than the last
 * 32 (RFC 6052 §2.2, prefixes shorter than /96): what a gateway would translate it to cannot be
 * told, so it is refused unless allowlisted as IPv6, whatever else is lifted. */
static const unsigned char nat64_local_prefix[16] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Whether the first `prefix` bits of a and b agree. */
static bool prefix_match(const unsigned char *a, const unsigned char *b, int prefix) {
  int full = prefix / 8, rest = prefix % 8;
  if (full && memcmp(a, b, (size_t)full) != 0) return false;
  if (rest) {
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    if ((a[full] & mask) != (b[full] & mask)) return false;
  }
  return true;
}

static const char *match_table(const range *t, size_t n, const unsigned char *addr) {
  for (size_t i = 0; i < n; i++)
    if (prefix_match(addr, t[i].addr, t[i].prefix)) return t[i].rule;
  return NULL;
}

/* If the IPv6 address embeds an IPv4 address in one of the forms the header lists, writes it to
 * v4 and returns true. */
static bool embedded_v4(const unsigned char *a, unsigned char v4[4]) {
  static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
  static const unsigned char translated[12] = {[8] = 0xff, [9] = 0xff}; /* SIIT ::ffff:0:0/96 */
  static const unsigned char zero[12] = {0};
  static const unsigned char nat64[12] = {0x00, 0x64, 0xff, 0x9b};
  static const unsigned char nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};

  if (memcmp(a, mapped, 12) == 0 || memcmp(a, translated, 12) == 0 || memcmp(a, nat64, 12) == 0 ||
      memcmp(a, nat64_local, 6) == 0) {
    memcpy(v4, a + 12, 4);
    return true;
  }
  if (memcmp(a, zero, 12) == 0) {
    /* IPv4-compatible ::/96, but "::" and "::1" are IPv6's own unspecified and loopback. */
    if (a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] <= 1) return false;
    memcpy(v4, a + 12, 4);
    return true;
  }
  if (a[0] == 0x20 && a[1] == 0x02) { /* 6to4: bits 16..47 */
    memcpy(v4, a + 2, 4);
    return true;
  }
  if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0x00 && a[3] == 0x00) { /* Teredo client */
    for (int i = 0; i < 4; i++) v4[i] = (unsigned char)~a[12 + i];
    return true;
  }
  return false;
}

static bool allowlisted(const hookd_addr_policy *p, int family, const unsigned char *addr) {
  if (!p || !p->allow) return false;
  for (size_t i = 0; i < p->n_allow; i++) {
    const hookd_cidr *c = &p->allow[i];
    if (c->family != family) continue;
    int max = family == AF_INET ? 32 : 128;
    if (c->prefix < 0 || c->prefix > max) continue;
    if (prefix_match(addr, c->addr, c->prefix)) return true;
  }
  return false;
}

const char *hookd_addr_judge(const hookd_addr_policy *p, int family, const unsigned char *addr) {
  if (!addr || (family != AF_INET && family != AF_INET6)) return "family";

  /* The address as judged: an IPv6 form embedding IPv4 is judged as that IPv4 address. */
  unsigned char v4[4];
  bool is_v4 = family == AF_INET;
  if (is_v4)
    memcpy(v4, addr, 4);
  else
    is_v4 = embedded_v4(addr, v4);

  const char *meta = is_v4 ? match_table(v4_metadata, COUNT(v4_metadata), v4)
                           : match_table(v6_metadata, COUNT(v6_metadata), addr);
  if (meta) return meta;
  if (family == AF_INET6 && prefix_match(addr, nat64_local_prefix, 48)) {
    if (!allowlisted(p, AF_INET6, addr)) return "nat64_local";
    /* allowlisted: metadata stays refused at every layout a gateway may use inside the /48
     * (RFC 6052 §2.2: the IPv4 address around the u octet, bits 64-71) */
    static const int at[3][4] = {{6, 7, 9, 10}, {7, 9, 10, 11}, {9, 10, 11, 12}};
    for (size_t i = 0; i < COUNT(at); i++) {
      unsigned char w[4] = {addr[at[i][0]], addr[at[i][1]], addr[at[i][2]], addr[at[i][3]]};
      if ((meta = match_table(v4_metadata, COUNT(v4_metadata), w))) return meta;
    }
  }
  /* An allowlist entry covers the address as given or the IPv4 address it embeds. */
  if (allowlisted(p, family, addr)) return NULL;
  if (family == AF_INET6 && is_v4 && allowlisted(p, AF_INET, v4)) return NULL;

  const char *rule = is_v4 ? match_table(v4_rules, COUNT(v4_rules), v4)
                           : match_table(v6_rules, COUNT(v6_rules), addr);
  return rule && p && p->allow_private && private_kind(rule) ? NULL : rule;
}

const char *hookd_addr_judge_sockaddr(const hookd_addr_policy *p, const struct sockaddr *sa,
                                      socklen_t len) {
  if (!sa || len < (socklen_t)sizeof(sa_family_t)) return "family";
  if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
    struct sockaddr_in sin;
    memcpy(&sin, sa, sizeof sin);
    return hookd_addr_judge(p, AF_INET, (const unsigned char *)&sin.sin_addr);
  }
  if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
    struct sockaddr_in6 sin6;
    memcpy(&sin6, sa, sizeof sin6);
    return hookd_addr_judge(p, AF_INET6, sin6.sin6_addr.s6_addr);
  }
  return "family";
}

/* ---- parsing ---- */

/* Parses one part [s, e) of a loose IPv4 literal: decimal, octal (leading 0) or hex (0x and at
 * least one digit). Values above 2^32-1 fail. */
static int parse_part(const char *s, const char *e, uint32_t *out) {
  if (s >= e) return -1;
  unsigned base = 10;
  if (e - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s += 2;
    if (s == e) return -1; /* a bare "0x": glibc's inet_aton and libcurl take it for a name */
  } else if (e - s >= 2 && s[0] == '0') {
    base = 8;
    s++;
  }
  uint64_t v = 0;
  for (; s < e; s++) {
    int d = hookd_hex_digit(*s);
    if (d < 0 || (unsigned)d >= base) return -1;
    v = v * base + (unsigned)d;
    if (v > UINT32_MAX) return -1;
  }
  *out = (uint32_t)v;
  return 0;
}

int hookd_ipv4_parse_loose(const char *s, unsigned char out[4]) {
  if (!s || !*s) return -1;
  size_t len = strlen(s); /* leading zeros may make a valid literal arbitrarily long */
  if (s[len - 1] == '.') len--; /* one trailing dot */
  if (len == 0) return -1;

  uint32_t parts[4];
  int n = 0;
  const char *p = s, *end = s + len;
  while (p <= end) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    const char *pe = dot ? dot : end;
    if (n == 4 || parse_part(p, pe, &parts[n]) != 0) return -1;
    n++;
    if (!dot) break;
    p = dot + 1;
    if (p == end) return -1; /* "1.2." after removing one dot was "1.2.." */
  }

  uint32_t v = 0;
  for (int i = 0; i < n - 1; i++) {
    if (parts[i] > 255) return -1;
    v |= parts[i] << (8 * (3 - i));
  }
  uint32_t last = parts[n - 1];
  int last_bytes = 4 - (n - 1);
  if (last_bytes < 4 && last >= (UINT32_C(1) << (8 * last_bytes))) return -1;
  v |= last;

  out[0] = (unsigned char)(v >> 24);
  out[1] = (unsigned char)(v >> 16);
  out[2] = (unsigned char)(v >> 8);
  out[3] = (unsigned char)v;
  return 0;
}

/* Strict inet_pton IPv6 over [s, s+n); refuses zone ids and anything too long to be an address. */
static int parse_v6(const char *s, size_t n, unsigned char addr[16]) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (n == 0 || n >= sizeof buf) return -1;
  if (memchr(s, '%', n)) return -1;
  memcpy(buf, s, n);
  buf[n] = '\0';
  struct in6_addr a;
  if (inet_pton(AF_INET6, buf, &a) != 1) return -1;
  memcpy(addr, a.s6_addr, 16);
  return 0;
}

int hookd_host_parse_ip(const char *host, unsigned char addr[16]) {
  if (!host || !*host) return 0;
  size_t len = strlen(host);
  unsigned char tmp[16] = {0};
  if (host[0] == '[') {
    if (len < 3 || host[len - 1] != ']') return 0;
    if (parse_v6(host + 1, len - 2, tmp) != 0) return 0;
    memcpy(addr, tmp, 16);
    return AF_INET6;
  }
  if (memchr(host, ':', len)) {
    if (parse_v6(host, len, tmp) != 0) return 0;
    memcpy(addr, tmp, 16);
    return AF_INET6;
  }
  if (hookd_ipv4_parse_loose(host, tmp) != 0) return 0;
  memset(addr, 0, 16);
  memcpy(addr, tmp, 4);
  return AF_INET;
}

/* Decimal prefix length, 1 to 3 digits, no sign, at most max. */
static int parse_prefix(const char *s, int max) {
  size_t n = strlen(s);
  if (n == 0 || n > 3) return -1;
  int v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -1;
    v = v * 10 + (s[i] - '0');
  }
  if (n > 1 && s[0] == '0') return -1; /* "/08" is ambiguous: refuse */
  return v <= max ? v : -1;
}

int hookd_cidr_parse(const char *s, hookd_cidr *out) {
  if (!s || !out) return -1;
  char buf[INET6_ADDRSTRLEN + 8];
  size_t len = strnlen(s, sizeof buf);
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, s, len + 1);

  char *slash = strchr(buf, '/');
  const char *pfx = NULL;
  if (slash) {
    *slash = '\0';
    pfx = slash + 1;
  }
  hookd_cidr c;
  memset(&c, 0, sizeof c);
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, buf, &a4) == 1) {
    c.family = AF_INET;
    memcpy(c.addr, &a4, 4);
    c.prefix = 32;
  } else if (!strchr(buf, '%') && inet_pton(AF_INET6, buf, &a6) == 1) {
    c.family = AF_INET6;
    memcpy(c.addr, a6.s6_addr, 16);
    c.prefix = 128;
  } else {
    return -1;
  }
  if (pfx) {
    int v = parse_prefix(pfx, c.prefix);
    if (v < 0) return -1;
    c.prefix = v;
  }
  /* The network: "10.1.2.3/8" names 10.0.0.0/8, and is refused (-2) with that network in *out */
  int bytes = c.family == AF_INET ? 4 : 16;
  bool host_bits = false;
  for (int i = 0; i < bytes; i++) {
    int keep = c.prefix - 8 * i;
    if (keep >= 8) continue;
    unsigned char net = c.addr[i] & (keep <= 0 ? 0 : (unsigned char)(0xff << (8 - keep)));
    host_bits |= net != c.addr[i];
    c.addr[i] = net;
  }
  *out = c;
  return host_bits ? -2 : 0;
}

void hookd_addr_format(int family, const unsigned char *addr, char *out, size_t outlen) {
  if (!out || outlen == 0) return;
  char buf[INET6_ADDRSTRLEN];
  const char *r = NULL;
  if (addr && (family == AF_INET || family == AF_INET6))
    r = inet_ntop(family, addr, buf, sizeof buf);
  snprintf(out, outlen, "%s", r ? buf : "?");
}

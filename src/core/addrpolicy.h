/* addrpolicy.h — which network addresses hookd may connect to (SSRF defence, O14).
 *
 * Pure: no DNS, no sockets. The egress asks it about the exact address a socket is about to
 * connect to; registration asks it about IP literals and about every address a name resolves to.
 *
 * Forbidden by default (rule names in brackets are what hookd reports and logs):
 *   IPv4: 0.0.0.0/8 [unspecified], 127/8 [loopback], 10/8 172.16/12 192.168/16 [private],
 *   100.64/10 [cgnat], 169.254/16 [link_local], 192.0.0/24 [ietf_protocol],
 *   192.88.99/24 [6to4_relay], 192.0.2/24 198.51.100/24 203.0.113/24 [documentation],
 *   198.18/15 [benchmarking], 224/4 [multicast], 240/4 [reserved], 255.255.255.255 [broadcast].
 *   IPv6: :: [unspecified], ::1 [loopback], fc00::/7 [unique_local], fe80::/10 [link_local],
 *   fec0::/10 [site_local], ff00::/8 [multicast], 2001:db8::/32 3fff::/20 [documentation],
 *   100::/64 [discard], 5f00::/16 [srv6], 2001::/23 [ietf_protocol].
 *   IPv6 forms that embed an IPv4 address are reduced to it and judged as IPv4: IPv4-mapped
 *   ::ffff:0:0/96, IPv4-compatible ::/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48 (last 32 bits),
 *   6to4 2002::/16 (bits 16..47), Teredo 2001::/32 (the client address: last 32 bits inverted).
 *   Cloud metadata [metadata]: 169.254.169.254, fd00:ec2::254, 168.63.129.16, 100.100.100.200 —
 *   always forbidden, even when private networks or an allowlist entry would allow them.
 *
 * Operator settings: allow_private lifts [private], [unique_local], [site_local] and [cgnat]
 * (the networks of a development setup; not [link_local]: a link-local address needs a zone no
 * URL carries; not [loopback]: hookd's own listener and the host's sidecars are there, which
 * opening 10/8 for internal receivers must not open to every tenant); an allowlist entry (CIDR)
 * lifts every rule except [metadata] for the addresses it covers (127.0.0.0/8 for loopback). */
#ifndef HOOKD_CORE_ADDRPOLICY_H
#define HOOKD_CORE_ADDRPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct hookd_cidr {
  int family;              /* AF_INET or AF_INET6 */
  unsigned char addr[16];  /* network byte order; IPv4 uses the first 4 bytes */
  int prefix;              /* 0..32 or 0..128 */
} hookd_cidr;

typedef struct hookd_addr_policy {
  const hookd_cidr *allow; /* operator allowlist */
  size_t n_allow;
  bool allow_private;      /* lift the private, unique-local, site-local and CGNAT rules */
} hookd_addr_policy;

/* Parses "a.b.c.d/n", "a.b.c.d" (= /32), "x::y/n", "x::y" (= /128). Returns 0, -1 (not a CIDR)
 * or -2 (bits set past the prefix: *out holds the network it would mean, host bits cleared). */
int hookd_cidr_parse(const char *s, hookd_cidr *out);

/* Returns NULL when the address may be connected to, else the rule name that forbids it.
 * family AF_INET: addr holds 4 bytes; AF_INET6: 16 bytes (network order). */
const char *hookd_addr_judge(const hookd_addr_policy *p, int family, const unsigned char *addr);

/* Same, for a socket address (sockaddr_in / sockaddr_in6). Unknown families are refused
 * ("family"). */
const char *hookd_addr_judge_sockaddr(const hookd_addr_policy *p, const struct sockaddr *sa,
                                      socklen_t len);

/* Parses an IPv4 literal the way inet_aton and URL parsers accept it — 1 to 4 parts, each
 * decimal, octal (leading 0) or hex (0x), the last part filling the remaining bytes, an optional
 * single trailing dot ("127.1", "0x7f.1", "0177.0.0.1", "2130706433", "017700000001",
 * "127.0.0.1.") — into 4 bytes. Returns 0, or -1 when the text is not an IPv4 literal. */
int hookd_ipv4_parse_loose(const char *s, unsigned char out[4]);

/* Parses a host that may be an IP literal: any IPv4 form above, or an IPv6 address with or
 * without brackets (zone ids refused). Returns AF_INET / AF_INET6 and fills addr, or 0 when the
 * host is a name (not an IP literal). */
int hookd_host_parse_ip(const char *host, unsigned char addr[16]);

/* Formats an address for logs and errors ("127.0.0.1", "::1"). */
void hookd_addr_format(int family, const unsigned char *addr, char *out, size_t outlen);

#endif

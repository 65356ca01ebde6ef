/* urlpolicy.c — registration-time destination URL validation (see urlpolicy.h): libcurl's URL
 * parser (the same one the egress uses) splits the URL; the scheme, userinfo, port and host
 * rules are applied here, and an IP-literal host is re-parsed by addrpolicy and judged.
 * Error messages never quote the URL, its userinfo or its path. */
#include "egress/urlpolicy.h"

#include <curl/curl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

const uint16_t hookd_url_default_ports[] = {80, 443, 8080, 8443};
const size_t hookd_url_default_ports_n = sizeof hookd_url_default_ports /
                                         sizeof hookd_url_default_ports[0];

#define DEFAULT_MAX_URL_LEN 2048
#define MAX_SCHEME_LEN 40

/* Fills err (when given) and returns -1. msg is built by the caller and never holds the URL. */
static int fail(hookd_url_error *err, const char *rule, const char *msg) {
  if (err) {
    snprintf(err->rule, sizeof err->rule, "%s", rule);
    snprintf(err->message, sizeof err->message, "%s", msg);
    err->address[0] = '\0';
  }
  return -1;
}

static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }
static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

/* RFC 3986 scheme followed by ':' — copies it lowercased into out and returns its length, or 0
 * when the URL does not start with one. */
static size_t lexical_scheme(const char *url, char *out, size_t outlen) {
  if (!is_alpha(url[0])) return 0;
  size_t i = 1;
  while (i <= MAX_SCHEME_LEN && (is_alpha(url[i]) || is_digit(url[i]) || url[i] == '+' ||
                                 url[i] == '-' || url[i] == '.'))
    i++;
  if (i > MAX_SCHEME_LEN || url[i] != ':') return 0;
  size_t n = i < outlen ? i : outlen - 1;
  for (size_t k = 0; k < n; k++) out[k] = lower(url[k]);
  out[n] = '\0';
  return i;
}

/* Whether the authority (after "scheme:" and any slashes, up to '/', '?' or '#') has an '@'. */
static bool lexical_userinfo(const char *url, size_t scheme_len) {
  const char *p = url + scheme_len + 1;
  while (*p == '/') p++;
  for (; *p && *p != '/' && *p != '?' && *p != '#'; p++)
    if (*p == '@') return true;
  return false;
}

/* curl_url_get into a bounded buffer. Returns the CURLUcode; on success out is filled (and a
 * value that does not fit is CURLUE_OUT_OF_MEMORY, which callers treat as a failure). */
static CURLUcode get_part(CURLU *u, CURLUPart part, unsigned flags, char *out, size_t outlen) {
  char *v = NULL;
  CURLUcode rc = curl_url_get(u, part, &v, flags);
  if (rc == CURLUE_OK) {
    size_t n = strlen(v);
    if (n >= outlen) {
      rc = CURLUE_OUT_OF_MEMORY;
    } else {
      memcpy(out, v, n + 1);
    }
  }
  curl_free(v);
  return rc;
}

/* A present user, password or login options part (even empty: "https://@host/"). */
static bool has_part(CURLU *u, CURLUPart part) {
  char *v = NULL;
  CURLUcode rc = curl_url_get(u, part, &v, 0);
  curl_free(v);
  return rc == CURLUE_OK;
}

/* Whether the host's last label (ignoring one trailing dot) looks numeric: all decimal digits
 * or 0x-hex. Such a host that did not parse as an IPv4 literal is refused rather than handed to
 * a resolver that may read it as an address in its own way. */
static bool ends_in_number(const char *host) {
  size_t len = strlen(host);
  if (len && host[len - 1] == '.') len--;
  size_t start = len;
  while (start > 0 && host[start - 1] != '.') start--;
  const char *l = host + start;
  size_t n = len - start;
  if (n == 0) return false;
  size_t i = 0;
  if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
    for (i = 2; i < n; i++)
      if (!is_digit(l[i]) && !((l[i] >= 'a' && l[i] <= 'f') || (l[i] >= 'A' && l[i] <= 'F')))
        return false;
    return true;
  }
  for (i = 0; i < n; i++)
    if (!is_digit(l[i])) return false;
  return true;
}

/* An ASCII DNS name: labels of letters, digits, '-' and '_', 1..63 bytes each, at most 253
 * bytes plus an optional trailing dot. Internationalised names must be given in their
 * punycode (xn--) form, so Unicode look-alikes (fullwidth digits, ideographic full stops) never
 * reach IDNA mapping. */
static bool valid_name(const char *host) {
  size_t len = strlen(host);
  if (len && host[len - 1] == '.') len--;
  if (len == 0 || len > 253) return false;
  size_t label = 0;
  for (size_t i = 0; i < len; i++) {
    char c = host[i];
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!(is_alpha(c) || is_digit(c) || c == '-' || c == '_')) return false;
    if (++label > 63) return false;
  }
  return label > 0;
}

static bool is_localhost(const char *host) {
  size_t len = strlen(host);
  if (len && host[len - 1] == '.') len--;
  static const char lh[] = "localhost";
  size_t n = sizeof lh - 1;
  if (len < n || strncasecmp(host + len - n, lh, n) != 0) return false;
  return len == n || host[len - n - 1] == '.';
}

static bool port_allowed(const hookd_url_policy *p, unsigned port) {
  if (p->any_port) return port >= 1 && port <= 65535;
  const uint16_t *ports = hookd_url_default_ports;
  size_t n = hookd_url_default_ports_n;
  if (p->ports && p->n_ports) {
    ports = p->ports;
    n = p->n_ports;
  }
  for (size_t i = 0; i < n; i++)
    if (ports[i] == port) return true;
  return false;
}

static int parse_port(const char *s, unsigned *out) {
  unsigned v = 0;
  size_t i = 0;
  for (; s[i]; i++) {
    if (!is_digit(s[i]) || i >= 5) return -1;
    v = v * 10 + (unsigned)(s[i] - '0');
  }
  if (i == 0 || v > 65535) return -1;
  *out = v;
  return 0;
}

/* The checks after the URL parsed; u is owned by the caller. */
static int check_parsed(const hookd_url_policy *p, CURLU *u, size_t scheme_len, const char *url,
                        hookd_url_info *info, hookd_url_error *err) {
  char scheme[MAX_SCHEME_LEN + 1];
  if (get_part(u, CURLUPART_SCHEME, 0, scheme, sizeof scheme) != CURLUE_OK)
    return fail(err, "scheme", "the URL has no usable scheme");
  for (char *c = scheme; *c; c++) *c = lower(*c);
  bool https = strcmp(scheme, "https") == 0;
  if (!https && !(strcmp(scheme, "http") == 0 && p->allow_http))
    return fail(err, "scheme", p->allow_http ? "scheme not allowed (use http or https)"
                                             : "scheme not allowed (use https; the operator's "
                                               "--allow-http permits http)");

  if (has_part(u, CURLUPART_USER) || has_part(u, CURLUPART_PASSWORD) ||
      has_part(u, CURLUPART_OPTIONS) || lexical_userinfo(url, scheme_len))
    return fail(err, "userinfo", "credentials in the URL are not allowed");

  char zone[8];
  if (get_part(u, CURLUPART_ZONEID, 0, zone, sizeof zone) != CURLUE_NO_ZONEID)
    return fail(err, "host", "IPv6 zone identifiers are not allowed");

  char host[512];
  CURLUcode rc = get_part(u, CURLUPART_HOST, 0, host, sizeof host);
  if (rc == CURLUE_NO_HOST || (rc == CURLUE_OK && host[0] == '\0'))
    return fail(err, "host", "the URL has no host");
  if (rc != CURLUE_OK) return fail(err, "host", "the host is not valid");

  char portstr[8];
  unsigned port = 0;
  rc = get_part(u, CURLUPART_PORT, CURLU_DEFAULT_PORT, portstr, sizeof portstr);
  if (rc != CURLUE_OK || parse_port(portstr, &port) != 0)
    return fail(err, "port", "the port is not valid");
  if (!port_allowed(p, port)) {
    char msg[96];
    snprintf(msg, sizeof msg,
             "port %u is not allowed (the operator's --egress-ports lists those that are)", port);
    return fail(err, "port", msg);
  }

  hookd_url_info out;
  memset(&out, 0, sizeof out);
  snprintf(out.scheme, sizeof out.scheme, "%s", scheme);
  out.port = (uint16_t)port;

  /* Parse the host ourselves: curl leaves "127.0.0.1." and bracketed forms as they are. */
  int fam = hookd_host_parse_ip(host, out.ip);
  if (fam) {
    out.ip_family = fam;
    hookd_addr_format(fam, out.ip, out.host, sizeof out.host);
    const char *rule = hookd_addr_judge(&p->addr, fam, out.ip);
    if (rule) {
      if (err) {
        snprintf(err->rule, sizeof err->rule, "%s", rule);
        snprintf(err->message, sizeof err->message, "address %s is not allowed (%s)", out.host,
                 rule);
      }
      return -1;
    }
    /* judged as the address it names, but not deliverable: curl takes "127.0.0.1." for a
     * name, which the connection's pin (the address checked) does not match */
    if (host[0] && host[strlen(host) - 1] == '.')
      return fail(err, "host", "an IP address host must not end in a dot");
  } else {
    if (strpbrk(host, "[]:%") || !valid_name(host))
      return fail(err, "host", "the host is not a valid ASCII host name or IP address");
    if (ends_in_number(host))
      return fail(err, "host", "the host looks numeric but is not a valid IP address");
    /* a localhost name is a loopback address: allowed where 127.0.0.1 is (an --egress-allow
     * range covering it); the address connected to is checked all the same */
    static const unsigned char loopback4[16] = {127, 0, 0, 1};
    if (is_localhost(host) && hookd_addr_judge(&p->addr, AF_INET, loopback4))
      return fail(err, "loopback", "localhost names are not allowed (the operator's "
                                   "--egress-allow range covering 127.0.0.1 permits them)");
    size_t n = strlen(host);
    for (size_t i = 0; i <= n; i++) out.host[i] = lower(host[i]);
  }
  if (info) *info = out;
  return 0;
}

int hookd_url_check(const hookd_url_policy *p, const char *url, hookd_url_info *info,
                    hookd_url_error *err) {
  hookd_url_policy defaults;
  if (!p) {
    memset(&defaults, 0, sizeof defaults);
    p = &defaults;
  }
  if (err) {
    err->rule[0] = '\0';
    err->message[0] = '\0';
    err->address[0] = '\0';
  }
  if (!url || !*url) return fail(err, "syntax", "the URL is empty");
  size_t max = p->max_url_len ? p->max_url_len : DEFAULT_MAX_URL_LEN;
  size_t len = strnlen(url, max + 1);
  if (len > max) return fail(err, "length", "the URL is longer than the limit");
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)url[i];
    if (c <= 0x20 || c == 0x7f)
      return fail(err, "syntax", "the URL contains spaces or control characters");
  }

  /* Judge the scheme before parsing, so that file:, gopher:, javascript: … are reported as
   * "scheme" whether or not curl can parse them. */
  char scheme[MAX_SCHEME_LEN + 1];
  size_t scheme_len = lexical_scheme(url, scheme, sizeof scheme);
  if (scheme_len == 0) return fail(err, "scheme", "the URL must start with https://");
  if (strcmp(scheme, "https") != 0 && !(strcmp(scheme, "http") == 0 && p->allow_http))
    return fail(err, "scheme", p->allow_http ? "scheme not allowed (use http or https)"
                                             : "scheme not allowed (use https; the operator's "
                                               "--allow-http permits http)");

  /* Exactly two slashes: curl and browsers read "https:///host" as "https://host", other
   * parsers do not; a registered URL must not be ambiguous. */
  if (url[scheme_len + 1] != '/' || url[scheme_len + 2] != '/' || url[scheme_len + 3] == '/')
    return fail(err, "syntax", "the URL must have the form https://host/path");

  CURLU *u = curl_url();
  if (!u) return fail(err, "syntax", "out of memory");
  CURLUcode rc = curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME);
  int ret;
  if (rc == CURLUE_BAD_PORT_NUMBER) {
    ret = fail(err, "port", "the port is not valid");
  } else if (rc == CURLUE_BAD_LOGIN || rc == CURLUE_BAD_USER || rc == CURLUE_BAD_PASSWORD) {
    ret = fail(err, "userinfo", "credentials in the URL are not allowed");
  } else if (rc == CURLUE_NO_HOST || rc == CURLUE_BAD_HOSTNAME || rc == CURLUE_BAD_IPV6) {
    ret = fail(err, "host", "the host is missing or not valid");
  } else if (rc != CURLUE_OK) {
    char msg[160];
    snprintf(msg, sizeof msg, "the URL is not valid: %s", curl_url_strerror(rc));
    ret = fail(err, "syntax", msg);
  } else {
    ret = check_parsed(p, u, scheme_len, url, info, err);
  }
  curl_url_cleanup(u);
  return ret;
}

int hookd_url_check_resolved(const hookd_url_policy *p, const hookd_url_info *info,
                             const int *families, const unsigned char (*addrs)[16], size_t n,
                             hookd_url_error *err) {
  hookd_url_policy defaults;
  if (!p) {
    memset(&defaults, 0, sizeof defaults);
    p = &defaults;
  }
  if (err) err->address[0] = '\0';
  if (n == 0 || !families || !addrs)
    return fail(err, "dns", "the host did not resolve to any address");
  /* a localhost name allowed (hookd_url_check: 127.0.0.1 is) may also resolve to ::1 (Debian's
   * /etc/hosts): that one refused is skipped at the connection, which then takes 127.0.0.1 —
   * not a reason to refuse the URL, unless nothing else is left */
  static const unsigned char loopback6[16] = {[15] = 1};
  bool localhost = info && is_localhost(info->host);
  size_t skipped = 0;
  for (size_t i = 0; i < n; i++) {
    const char *rule = hookd_addr_judge(&p->addr, families[i], addrs[i]);
    if (!rule) continue;
    if (localhost && families[i] == AF_INET6 && !memcmp(addrs[i], loopback6, 16)) {
      skipped++;
      continue;
    }
    if (err) {
      /* the message names the rule only: it goes back to the customer, and the address of an
       * internal name (split-horizon DNS) would tell them what it is; the caller logs it */
      snprintf(err->rule, sizeof err->rule, "%s", rule);
      snprintf(err->message, sizeof err->message,
               "the host resolves to an address that is not allowed (%s)", rule);
      hookd_addr_format(families[i], addrs[i], err->address, sizeof err->address);
    }
    return -1;
  }
  if (skipped == n) { /* ::1 alone */
    if (err) {
      snprintf(err->rule, sizeof err->rule, "loopback");
      snprintf(err->message, sizeof err->message,
               "the host resolves to ::1 only, which is not allowed (loopback)");
    }
    return -1;
  }
  return 0;
}

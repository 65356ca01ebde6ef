/* classify.c — the outcome table. See classify.h for the rules. */
#include "core/classify.h"

static const struct {
  hookd_class cls;
  const char *outcome, *category;
} net_rows[HOOKD_NET__COUNT] = {
    [HOOKD_NET_OK] = {HOOKD_CLASS_SUCCESS, "success", ""},
    [HOOKD_NET_TIMEOUT] = {HOOKD_CLASS_RETRY, "timeout", "timeout"},
    [HOOKD_NET_DNS] = {HOOKD_CLASS_RETRY, "dns_error", "dns"},
    [HOOKD_NET_CONNECT] = {HOOKD_CLASS_RETRY, "connect_error", "connect"},
    [HOOKD_NET_TLS] = {HOOKD_CLASS_RETRY, "tls_error", "tls"},
    [HOOKD_NET_BLOCKED] = {HOOKD_CLASS_PERMANENT, "blocked", "blocked"},
    [HOOKD_NET_PROTOCOL] = {HOOKD_CLASS_RETRY, "protocol_error", "protocol"},
    [HOOKD_NET_TOO_LARGE] = {HOOKD_CLASS_RETRY, "too_large", "response_too_large"},
};

hookd_classification hookd_classify(hookd_net net, int status) {
  hookd_classification c;
  if ((unsigned)net >= HOOKD_NET__COUNT) net = HOOKD_NET_PROTOCOL;
  if (net != HOOKD_NET_OK) {
    c.cls = net_rows[net].cls;
    c.outcome = net_rows[net].outcome;
    c.category = net_rows[net].category;
    return c;
  }
  c.outcome = "http_error";
  if (status >= 200 && status <= 299) {
    c.cls = HOOKD_CLASS_SUCCESS;
    c.outcome = "success";
    c.category = "";
  } else if (status == 410) {
    c.cls = HOOKD_CLASS_GONE;
    c.category = "http_410";
  } else if (status == 408) {
    c.cls = HOOKD_CLASS_RETRY;
    c.category = "http_408";
  } else if (status == 429) {
    c.cls = HOOKD_CLASS_RETRY;
    c.category = "http_429";
  } else if (status >= 500 && status <= 599) {
    c.cls = HOOKD_CLASS_RETRY;
    c.category = "http_5xx";
  } else if (status >= 400 && status <= 499) {
    c.cls = HOOKD_CLASS_PERMANENT;
    c.category = "http_4xx";
  } else if (status >= 300 && status <= 399) {
    c.cls = HOOKD_CLASS_RETRY; /* redirects are never followed; the URL may be fixed */
    c.category = "http_3xx";
  } else {
    c.cls = HOOKD_CLASS_RETRY; /* 1xx as final status, or out-of-range numbers */
    c.category = "http_other";
  }
  return c;
}

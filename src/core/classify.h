/* classify.h — what one HTTP attempt's result means for the delivery (O6):
 *   2xx success; 408, 429, 5xx, 3xx (never followed), timeouts and network errors retryable;
 *   410 gone (DEAD and the endpoint disabled); other 4xx permanent (unless the delivery's retry
 *   policy lists the status: the dispatcher retries it); a destination refused by the address
 *   policy is permanent ("blocked").
 * Pure table; unit-tested row by row. */
#ifndef HOOKD_CORE_CLASSIFY_H
#define HOOKD_CORE_CLASSIFY_H

/* How the transport ended, independent of libcurl's codes (egress maps them). */
typedef enum hookd_net {
  HOOKD_NET_OK = 0,     /* a complete HTTP response was received */
  HOOKD_NET_TIMEOUT,    /* connect or total timeout */
  HOOKD_NET_DNS,        /* name did not resolve */
  HOOKD_NET_CONNECT,    /* connection refused / reset before a response */
  HOOKD_NET_TLS,        /* handshake or certificate failure */
  HOOKD_NET_BLOCKED,    /* the address policy refused the destination */
  HOOKD_NET_PROTOCOL,   /* malformed response, connection dropped mid-response */
  HOOKD_NET_TOO_LARGE,  /* the response exceeded the hard read bound */
  HOOKD_NET__COUNT
} hookd_net;

typedef enum hookd_class {
  HOOKD_CLASS_SUCCESS = 0,
  HOOKD_CLASS_RETRY,
  HOOKD_CLASS_PERMANENT,
  HOOKD_CLASS_GONE,
} hookd_class;

typedef struct hookd_classification {
  hookd_class cls;
  const char *outcome;  /* attempts.outcome: success, http_error, timeout, dns_error,
                           connect_error, tls_error, blocked, protocol_error, too_large */
  const char *category; /* deliveries.last_error: e.g. http_5xx, http_429, http_3xx, timeout */
} hookd_classification;

/* status is the HTTP status when net == HOOKD_NET_OK, else ignored. */
hookd_classification hookd_classify(hookd_net net, int status);

#endif

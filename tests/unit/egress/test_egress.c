/* test_egress.c — the libcurl egress (egress.c) against a real HTTP server on loopback
 * (libmicrohttpd): what an attempt reports when a refused address sits next to an allowed one,
 * and when a reused connection dies under a request that must not be sent twice. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <microhttpd.h>
#include <cmocka.h>

#include "core/addrpolicy.h"
#include "egress/egress.h"

/* ---- the server: answers 200, except the requests numbered in drop_at (1-based), whose
 * connection it closes once the request has arrived, without an answer ---- */
static _Atomic int served;
static int drop_at;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state) {
  (void)cls, (void)url, (void)method, (void)version, (void)upload;
  if (!*state) { /* headers: wait for the body */
    *state = c;
    return MHD_YES;
  }
  if (*upload_size) {
    *upload_size = 0;
    return MHD_YES;
  }
  int n = ++served;
  if (n == drop_at) return MHD_NO; /* read, then the connection closes: no answer */
  struct MHD_Response *r = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
  enum MHD_Result rc = MHD_queue_response(c, 200, r);
  MHD_destroy_response(r);
  return rc;
}

static struct MHD_Daemon *server_start(uint16_t *port) {
  struct MHD_Daemon *d =
      MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_request, NULL,
                       MHD_OPTION_SOCK_ADDR, NULL, MHD_OPTION_END);
  assert_non_null(d);
  const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  *port = i->port;
  return d;
}

/* ---- the egress: 127.0.0.0/8 allowed, everything else judged by the real policy ---- */
static hookd_addr_policy policy;
static hookd_cidr loopback;
static const char *judge(void *ctx, const struct sockaddr *sa, socklen_t len) {
  (void)ctx;
  return hookd_addr_judge_sockaddr(&policy, sa, len);
}
static struct curl_slist *pins;
static struct curl_slist *resolve(void *ctx) {
  (void)ctx;
  return pins;
}

static hookd_egress *egress_new(void) {
  assert_int_equal(hookd_cidr_parse("127.0.0.0/8", &loopback), 0);
  policy = (hookd_addr_policy){.allow = &loopback, .n_allow = 1};
  hookd_egress_config cfg = {.addr_check = judge, .resolve_list = resolve,
                             .max_response_bytes = 1 << 16, .excerpt_bytes = 256};
  hookd_egress *eg = hookd_egress_new(&cfg);
  assert_non_null(eg);
  return eg;
}

static int finished;
static void on_done(hookd_egress_req *r, void *arg) {
  (void)r, (void)arg;
  finished++;
}

/* Sends one POST and waits for its outcome. */
static void send_one(hookd_egress *eg, hookd_egress_req *req, const char *url) {
  static struct curl_slist *h;
  if (!h) h = curl_slist_append(NULL, "Expect:");
  *req = (hookd_egress_req){.url = url, .headers = h, .body = "{\"n\":1}", .body_len = 7,
                            .timeout_ms = 10000};
  assert_int_equal(hookd_egress_start(eg, req), 0);
  int want = finished + 1;
  while (finished < want) hookd_egress_poll(eg, 100, on_done, NULL);
}

/* A name with a refused address (a unique-local IPv6 one) and an allowed one: libcurl goes on to
 * the allowed address, and its 200 is a delivery, not a refusal. */
static void refused_address_next_to_an_allowed_one(void **s) {
  (void)s;
  uint16_t port;
  struct MHD_Daemon *d = server_start(&port);
  served = 0;
  drop_at = 0;
  char pin[96], url[64];
  snprintf(pin, sizeof pin, "dual.test:%u:[fd00::1],127.0.0.1", port);
  snprintf(url, sizeof url, "http://dual.test:%u/hook", port);
  pins = curl_slist_append(NULL, pin);
  hookd_egress *eg = egress_new();
  hookd_egress_req req;
  send_one(eg, &req, url);
  assert_int_equal(req.net, HOOKD_NET_OK);
  assert_int_equal(req.status, 200);
  assert_int_equal(served, 1);
  hookd_egress_req_cleanup(&req);

  /* every address refused: that is a refusal */
  curl_slist_free_all(pins);
  snprintf(pin, sizeof pin, "only.test:%u:[fd00::1]", port);
  snprintf(url, sizeof url, "http://only.test:%u/hook", port);
  pins = curl_slist_append(NULL, pin);
  send_one(eg, &req, url);
  assert_int_equal(req.net, HOOKD_NET_BLOCKED);
  assert_string_equal(req.blocked_rule, "unique_local");
  assert_int_equal(served, 1);
  hookd_egress_req_cleanup(&req);
  hookd_egress_free(eg);
  curl_slist_free_all(pins);
  pins = NULL;
  MHD_stop_daemon(d);
}

/* The second request goes over the first one's connection, which the server closes once it has
 * read the request. libcurl would send it again on a new connection by itself — a send no attempt
 * records, outside the backoff; the request ends ambiguous instead (sent, no answer), saying
 * why, and the server saw it once. */
static void no_silent_resend_on_a_reused_connection(void **s) {
  (void)s;
  uint16_t port;
  struct MHD_Daemon *d = server_start(&port);
  served = 0;
  drop_at = 2;
  char url[64];
  snprintf(url, sizeof url, "http://127.0.0.1:%u/hook", port);
  hookd_egress *eg = egress_new();
  hookd_egress_req req;
  send_one(eg, &req, url);
  assert_int_equal(req.status, 200);
  hookd_egress_req_cleanup(&req);
  send_one(eg, &req, url);
  assert_int_equal(served, 2); /* the dropped one, not again */
  assert_int_equal(req.net, HOOKD_NET_PROTOCOL);
  assert_int_equal(req.status, 0);
  assert_true(req.request_sent);
  assert_non_null(strstr(req.error, "closed after the request was sent"));
  hookd_egress_req_cleanup(&req);
  hookd_egress_free(eg);
  MHD_stop_daemon(d);
}

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(refused_address_next_to_an_allowed_one),
      cmocka_unit_test(no_silent_resend_on_a_reused_connection),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  curl_global_cleanup();
  return rc;
}

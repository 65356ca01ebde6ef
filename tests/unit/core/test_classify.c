/* test_classify.c — the outcome classification table, row by row. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/classify.h"

static void http_statuses(void **s) {
  static const struct {
    int status;
    hookd_class cls;
    const char *category;
  } rows[] = {
      {200, HOOKD_CLASS_SUCCESS, ""},        {201, HOOKD_CLASS_SUCCESS, ""},
      {204, HOOKD_CLASS_SUCCESS, ""},        {299, HOOKD_CLASS_SUCCESS, ""},
      {301, HOOKD_CLASS_RETRY, "http_3xx"},  {302, HOOKD_CLASS_RETRY, "http_3xx"},
      {307, HOOKD_CLASS_RETRY, "http_3xx"},  {400, HOOKD_CLASS_PERMANENT, "http_4xx"},
      {401, HOOKD_CLASS_PERMANENT, "http_4xx"}, {403, HOOKD_CLASS_PERMANENT, "http_4xx"},
      {404, HOOKD_CLASS_PERMANENT, "http_4xx"}, {408, HOOKD_CLASS_RETRY, "http_408"},
      {409, HOOKD_CLASS_PERMANENT, "http_4xx"}, {410, HOOKD_CLASS_GONE, "http_410"},
      {422, HOOKD_CLASS_PERMANENT, "http_4xx"}, {429, HOOKD_CLASS_RETRY, "http_429"},
      {500, HOOKD_CLASS_RETRY, "http_5xx"},  {502, HOOKD_CLASS_RETRY, "http_5xx"},
      {503, HOOKD_CLASS_RETRY, "http_5xx"},  {599, HOOKD_CLASS_RETRY, "http_5xx"},
      {100, HOOKD_CLASS_RETRY, "http_other"}, {600, HOOKD_CLASS_RETRY, "http_other"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    hookd_classification c = hookd_classify(HOOKD_NET_OK, rows[i].status);
    assert_int_equal(c.cls, rows[i].cls);
    assert_string_equal(c.category, rows[i].category);
    assert_string_equal(c.outcome, rows[i].cls == HOOKD_CLASS_SUCCESS ? "success" : "http_error");
  }
}

static void transport(void **s) {
  static const struct {
    hookd_net net;
    hookd_class cls;
    const char *outcome;
  } rows[] = {
      {HOOKD_NET_TIMEOUT, HOOKD_CLASS_RETRY, "timeout"},
      {HOOKD_NET_DNS, HOOKD_CLASS_RETRY, "dns_error"},
      {HOOKD_NET_CONNECT, HOOKD_CLASS_RETRY, "connect_error"},
      {HOOKD_NET_TLS, HOOKD_CLASS_RETRY, "tls_error"},
      {HOOKD_NET_PROTOCOL, HOOKD_CLASS_RETRY, "protocol_error"},
      {HOOKD_NET_TOO_LARGE, HOOKD_CLASS_RETRY, "too_large"},
      {HOOKD_NET_BLOCKED, HOOKD_CLASS_PERMANENT, "blocked"},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    /* the status is ignored when no response arrived */
    hookd_classification c = hookd_classify(rows[i].net, 200);
    assert_int_equal(c.cls, rows[i].cls);
    assert_string_equal(c.outcome, rows[i].outcome);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(http_statuses),
      cmocka_unit_test(transport),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

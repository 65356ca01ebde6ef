/* test_custom_headers.c — an endpoint's custom headers: the names and values accepted, the
 * messages naming the refused one, and the header lines sent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <cmocka.h>

#include "core/custom_headers.h"

/* Checks the object in JSON text js; the message in err when refused. */
static bool check(const char *js, char *err, size_t len) {
  json_t *v = json_loads(js, JSON_DECODE_ANY, NULL);
  assert_non_null(v);
  err[0] = '\0';
  bool ok = hookd_custom_headers_check(v, "headers", err, len);
  json_decref(v);
  return ok;
}

/* Checks one header of a name of nlen 'a's and a value of vlen 'v's (the bounds). */
static bool check_sized(size_t nlen, size_t vlen, char *err, size_t len) {
  char js[1200];
  snprintf(js, sizeof js, "{\"%*s\": \"%*s\"}", (int)nlen, "", (int)vlen, "");
  memset(js + 2, 'a', nlen);
  memset(js + 2 + nlen + 4, 'v', vlen);
  return check(js, err, len);
}

static void accepted(void **st) {
  (void)st;
  char err[512];
  assert_true(check("{}", err, sizeof err));
  assert_true(check("{\"Authorization\": \"Bearer abc.def\", \"X-Api-Key\": \"k\"}", err,
                    sizeof err));
  assert_true(check("{\"X-Tab\": \"a\\tb\", \"x!#$%&'*+-.^_`|~9\": \"v\"}", err, sizeof err));
  /* names that only start like a reserved one */
  assert_true(check("{\"Hostname\": \"a\", \"Tex\": \"b\", \"Webhook\": \"c\"}", err, sizeof err));
  assert_true(check_sized(64, 1024, err, sizeof err));
  assert_true(check_sized(1, 1, err, sizeof err));
}

static void reserved_names(void **st) {
  (void)st;
  static const char *const names[] = {
      "Content-Type", "content-length", "Content-Encoding", "Transfer-Encoding", "HOST",
      "Connection",   "Keep-Alive",     "TE",               "Trailer",           "Upgrade",
      "Expect",       "User-Agent",     "Idempotency-Key",  "Proxy-Authorization",
      "webhook-id",   "Webhook-Signature", "svix-id",       "Hookd-Attempt",
      /* what changes the request's meaning: its body's range or language, a compressed answer
       * (unreadable to the response excerpt), another method */
      "Content-Range", "Content-Language", "Accept-Encoding", "Range", "X-HTTP-Method-Override",
      "X-HTTP-Method", "X-Method-Override", "If-Range",
      /* another path, for servers that honour a rewrite header */
      "X-Original-URL", "X-Rewrite-URL", NULL};
  char err[512], js[128], want[96];
  for (int i = 0; names[i]; i++) {
    snprintf(js, sizeof js, "{\"%s\": \"x\"}", names[i]);
    assert_false(check(js, err, sizeof err));
    snprintf(want, sizeof want, "headers.%s is a header hookd or HTTP sets", names[i]);
    assert_non_null(strstr(err, want));
    /* and the list it gives names it (or its prefix): the refused is told why */
    char lower[64], *dash;
    snprintf(lower, sizeof lower, "%s", names[i]);
    for (char *p = lower; *p; p++) *p = (char)tolower((unsigned char)*p);
    bool named = strstr(strchr(err, '(') ? strchr(err, '(') : err, lower) != NULL;
    if (!named && (dash = strchr(lower, '-')) != NULL) {
      dash[1] = '*', dash[2] = '\0';
      named = strstr(err, lower) != NULL;
    }
    if (!named) fail_msg("%s is not in the list the message gives: %s", names[i], err);
  }
}

static void refused(void **st) {
  (void)st;
  char err[512];
  assert_false(check("[]", err, sizeof err));
  assert_string_equal(strtok(err, " "), "headers");
  assert_false(check("\"Bearer x\"", err, sizeof err));
  /* not a token: the message names the field, and quotes the name */
  assert_false(check("{\"X Bad\": \"v\"}", err, sizeof err));
  assert_non_null(strstr(err, "headers: \"X Bad\" is not a header name"));
  assert_false(check("{\"X:Y\": \"v\"}", err, sizeof err));
  assert_false(check("{\"\": \"v\"}", err, sizeof err));
  assert_false(check_sized(65, 1, err, sizeof err));
  char js[200];
  /* values: not a string, control characters, 8-bit bytes, blanks at an end, too long */
  static const char *const values[] = {"1",          "null",         "[\"a\"]",   "\"a\\r\\nB: c\"",
                                       "\"a\\nb\"",  "\"\\u00e9\"",  "\" a\"",    "\"a\\t\"",
                                       "\"a\\u007f\"",
                                       "\"\"", /* empty: libcurl would drop the header */
                                       NULL};
  for (int i = 0; values[i]; i++) {
    snprintf(js, sizeof js, "{\"X-Api-Key\": %s}", values[i]);
    assert_false(check(js, err, sizeof err));
    assert_int_equal(strncmp(err, "headers.X-Api-Key must be a string", 34), 0);
  }
  assert_false(check_sized(1, 1025, err, sizeof err));
  /* twice, whatever the case */
  assert_false(check("{\"X-Key\": \"a\", \"x-key\": \"b\"}", err, sizeof err));
  assert_non_null(strstr(err, "headers.x-key is given twice"));
}

static void too_many(void **st) {
  (void)st;
  json_t *v = json_object();
  char name[16], err[512];
  for (int i = 0; i < HOOKD_CUSTOM_HEADERS_MAX; i++) {
    snprintf(name, sizeof name, "X-H%d", i);
    json_object_set_new(v, name, json_string("v"));
  }
  assert_true(hookd_custom_headers_check(v, "destinations[0].headers", err, sizeof err));
  json_object_set_new(v, "X-One-More", json_string("v"));
  assert_false(hookd_custom_headers_check(v, "destinations[0].headers", err, sizeof err));
  assert_int_equal(strncmp(err, "destinations[0].headers must be", 31), 0);
  json_decref(v);
}

/* The lines sent, in the order given. */
static void lines(void **st) {
  (void)st;
  json_t *v = json_loads("{\"X-B\": \"2\", \"Authorization\": \"Bearer x\"}", 0, NULL);
  char *l = hookd_custom_headers_lines(v);
  assert_string_equal(l, "X-B: 2\nAuthorization: Bearer x\n");
  free(l);
  json_decref(v);
  v = json_object();
  l = hookd_custom_headers_lines(v);
  assert_string_equal(l, "");
  free(l);
  json_decref(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(accepted), cmocka_unit_test(reserved_names), cmocka_unit_test(refused),
      cmocka_unit_test(too_many), cmocka_unit_test(lines),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

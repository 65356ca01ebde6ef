/* test_log.c — structured log lines: whatever the sizes of the message and the values, every
 * line written is one valid JSON object (a member that does not fit is left out whole). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"

/* Runs hookd_log_kv with stderr sent to a temporary file; returns the line written. */
static char *log_line(const char *msg, const hookd_kv *kv, size_t n) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int saved = dup(STDERR_FILENO);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
  hookd_log_kv(HOOKD_LOG_ERROR, msg, kv, n);
  assert_true(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  long len = ftell(tmp);
  if (len <= 0) len = lseek(fileno(tmp), 0, SEEK_END);
  assert_true(len > 0);
  char *out = calloc(1, (size_t)len + 1);
  assert_non_null(out);
  assert_int_equal(pread(fileno(tmp), out, (size_t)len, 0), len);
  fclose(tmp);
  return out;
}

static void every_line_is_json_whatever_the_value_sizes(void **s) {
  char *big = malloc(5000);
  assert_non_null(big);
  /* value lengths around the 4 KiB line limit, where the key fits and the value does not */
  for (size_t vlen = 3900; vlen <= 4100; vlen++) {
    memset(big, 'v', vlen);
    big[vlen] = '\0';
    hookd_kv kv[] = {KV_S("identity_kind", "id"), KV_S("value", big), KV_I("n", 12345)};
    for (size_t k = 1; k <= 3; k++) {
      char *line = log_line("inbound.accepted", kv, k);
      json_error_t err;
      json_t *v = json_loads(line, 0, &err);
      if (!v) fail_msg("vlen %zu, %zu members: not JSON (%s): ...%s", vlen, k, err.text,
                       line + (strlen(line) > 60 ? strlen(line) - 60 : 0));
      assert_string_equal(json_string_value(json_object_get(v, "msg")), "inbound.accepted");
      json_decref(v);
      free(line);
    }
  }
  /* a message longer than the line */
  memset(big, 'm', 4999);
  big[4999] = '\0';
  hookd_kv kv[] = {KV_I("n", 1)};
  char *line = log_line(big, kv, 1);
  json_t *v = json_loads(line, 0, NULL);
  assert_non_null(v);
  json_decref(v);
  free(line);
  free(big);
}

int main(void) {
  hookd_log_level = HOOKD_LOG_DEBUG;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_line_is_json_whatever_the_value_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

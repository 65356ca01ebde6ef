/* fuzz_custom_headers.c — libFuzzer target for an endpoint's custom request headers (a
 * customer's JSON that becomes header lines of every request to its endpoint): the input is the
 * JSON object. An object the check accepts gives one `Name: value` line per member, each ended by
 * a single '\n', only printable ASCII (and tabs inside a value), and no name that
 * hookd sets itself: no header can be smuggled into a request. One it refuses says why, naming
 * the field. Nothing may crash, overrun or leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/custom_headers.h"
#include "core/jsonio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = dup_range(data, size);
  char err[HOOKD_JSON_ERR_MAX];
  hookd_json_limits lim = {.max_depth = 8};
  json_t *v = hookd_json_parse(text, size, &lim, err);
  if (v) {
    char why[256];
    why[0] = '\0';
    if (!hookd_custom_headers_check(v, "headers", why, sizeof why)) {
      check(strncmp(why, "headers", 7) == 0);
    } else {
      check(json_is_object(v) && json_object_size(v) <= HOOKD_CUSTOM_HEADERS_MAX);
      char *lines = hookd_custom_headers_lines(v);
      check(lines != NULL);
      size_t n = 0;
      for (char *l = lines; *l;) {
        char *nl = strchr(l, '\n');
        check(nl != NULL);
        char *colon = memchr(l, ':', (size_t)(nl - l));
        check(colon != NULL && colon > l && colon[1] == ' ');
        for (char *c = l; c < nl; c++)
          check(*c == '\t' ? c > colon + 1 : (unsigned char)*c >= 0x20 && (unsigned char)*c < 0x7f);
        check(hookd_header_line_named(l, (size_t)(nl - l), lines)); /* found among its own */
        *colon = '\0';
        check(!hookd_custom_header_reserved(l));
        *colon = ':';
        n++;
        l = nl + 1;
      }
      check(n == json_object_size(v));
      free(lines);
    }
  }
  json_decref(v);
  free(text);
  return 0;
}

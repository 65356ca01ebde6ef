/* fuzz_identity.c — libFuzzer target for event identity: the input is split into JSON paths,
 * header lines, a query and a body; the body is parsed (when it is JSON) and every provider's
 * event id, event type and handshake are extracted, along with a dotted path and a composite
 * key. Nothing may crash or overrun, and ids always fit and are NUL-terminated. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/inbound.h"
#include "core/jsonio.h"

#define MAX_HEADERS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const uint8_t *p = data;
  size_t left = size;
  char *paths = segment(&p, &left);
  char *hdrs = segment(&p, &left);
  char *query = segment(&p, &left);
  char *body = dup_range(p, left);

  hookd_in_header h[MAX_HEADERS];
  size_t nh = 0;
  for (char *line = hdrs; line && *line && nh < MAX_HEADERS;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    char *colon = strchr(line, ':');
    if (colon) {
      *colon = '\0';
      h[nh].name = line;
      h[nh].value = colon + 1;
      nh++;
    }
    line = nl ? nl + 1 : NULL;
  }
  hookd_in_request req = {.method = "POST",
                          .url = "https://hooks.example.com/in?x=1",
                          .query = *query ? query : NULL,
                          .headers = h,
                          .n_headers = nh,
                          .body = body,
                          .body_len = left,
                          .now_s = 1700000000};
  char err[HOOKD_JSON_ERR_MAX];
  hookd_json_limits lim = {.max_depth = 64};
  json_t *root = left ? hookd_json_parse(body, left, &lim, err) : NULL;

  static const char *const sv[] = {"zoom_secret"};
  hookd_in_secrets secrets = {sv, 1};
  hookd_generic_hmac g = {.header = "X-Sig", .id_header = "X-Id"};
  hookd_buf resp;
  hookd_buf_init(&resp, 1 << 16);
  for (int pv = 0; pv < HOOKD_PROVIDER__COUNT; pv++) {
    char id[64], small[4], type[64];
    int rc = hookd_in_event_id((hookd_provider)pv, &req, root, &g, id, sizeof id);
    if ((rc != 0 && rc != 1) || !memchr(id, '\0', sizeof id) || (rc == 1 && id[0])) abort();
    rc = hookd_in_event_id((hookd_provider)pv, &req, root, &g, small, sizeof small);
    if (!memchr(small, '\0', sizeof small)) abort();
    rc = hookd_in_event_type((hookd_provider)pv, &req, root, type, sizeof type);
    if ((rc != 0 && rc != 1) || !memchr(type, '\0', sizeof type)) abort();
    int status = 0;
    hookd_buf_reset(&resp);
    if (hookd_in_handshake((hookd_provider)pv, &req, root, &secrets, &status, &resp) &&
        status != 200 && !(pv == HOOKD_PROVIDER_DISCORD && status == 204)) /* a PING: 204 */
      abort();
  }
  if (root) {
    (void)hookd_json_path(root, paths);
    hookd_buf key;
    hookd_buf_init(&key, 1 << 16);
    char missing[16];
    int rc = hookd_in_composite_key(root, paths, &key, missing, sizeof missing);
    if (rc != 0 && rc != 1 && rc != HOOKD_BUF_NOMEM && rc != HOOKD_BUF_TOOBIG) abort();
    if (!memchr(missing, '\0', sizeof missing)) abort();
    hookd_buf_free(&key);
  }
  hookd_buf_free(&resp);
  json_decref(root);
  free(paths);
  free(hdrs);
  free(query);
  free(body);
  return 0;
}

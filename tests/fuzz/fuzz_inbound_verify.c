/* fuzz_inbound_verify.c — libFuzzer target for the inbound verifiers: the input is split into a
 * URL, a query, header lines and a body, and every provider (generic included, configured from
 * the first byte) verifies it against a fixed set of secrets. Nothing may crash, leak or read
 * out of bounds, and every result must be one of the HOOKD_VERIFY_* codes with a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "core/inbound.h"

#define MAX_HEADERS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  uint8_t cfg = data[0];
  const uint8_t *p = data + 1;
  size_t left = size - 1;
  char *url = segment(&p, &left);
  char *query = segment(&p, &left);
  char *hdrs = segment(&p, &left);
  /* the rest, 0x01 bytes included, is the body */
  char *body = dup_range(p, left);

  hookd_in_header h[MAX_HEADERS];
  size_t nh = 0;
  for (char *line = hdrs; line && *line && nh < MAX_HEADERS;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    char *colon = strchr(line, ':');
    if (colon) {
      *colon = '\0';
      char *v = colon + 1;
      while (*v == ' ') v++;
      h[nh].name = line;
      h[nh].value = v;
      nh++;
    }
    line = nl ? nl + 1 : NULL;
  }

  hookd_in_request req = {
      .method = (cfg & 0x80) ? "GET" : "POST",
      .url = url,
      .query = *query ? query : NULL,
      .headers = h,
      .n_headers = nh,
      .body = body,
      .body_len = left,
      .now_s = 1700000000,
  };
  static const char *const secrets[] = {
      "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
      "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
      "ACCESSKEY123:SECRETKEY456",
      "secret",
  };
  hookd_in_secrets s = {secrets, sizeof secrets / sizeof secrets[0]};
  hookd_generic_hmac g = {
      .header = "X-Signature",
      .prefix = (cfg & 0x20) ? "sha256=" : NULL,
      .algorithm = (hookd_md)(cfg % 3),
      .encoding = (cfg >> 2) & 1 ? HOOKD_ENC_BASE64 : HOOKD_ENC_HEX,
      .template = (cfg & 0x08) ? "{id}.{timestamp}.{body}{unknown}{" : NULL,
      .id_header = (cfg & 0x08) ? "X-Id" : NULL,
      .timestamp_header = (cfg & 0x10) ? "X-Timestamp" : NULL,
  };
  for (int pv = 0; pv < HOOKD_PROVIDER__COUNT; pv++) {
    hookd_verify_result res;
    int rc = hookd_in_verify((hookd_provider)pv, &req, &s, (cfg & 0x40) ? 0 : 86400 * 365 * 30, &g,
                             &res);
    if (rc != res.rc || rc > 0 || rc < HOOKD_VERIFY_MISMATCH) abort();
    if (!memchr(res.reason, '\0', sizeof res.reason) || !res.reason[0]) abort();
  }
  /* VNPay's forward text, whatever the query */
  hookd_buf fw;
  hookd_buf_init(&fw, 1 << 20);
  if (hookd_in_vnpay_forward(&req, cfg & 1, &fw, NULL) < -1) abort();
  hookd_buf_free(&fw);
  free(url);
  free(query);
  free(hdrs);
  free(body);
  return 0;
}

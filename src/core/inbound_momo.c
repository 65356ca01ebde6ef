/* inbound_momo.c — MoMo IPN: a JSON body whose "signature" is hex HMAC-SHA256(secretKey, raw)
 * with raw = "accessKey=…&amount=…&extraData=…&message=…&orderId=…&orderInfo=…&orderType=…&
 * partnerCode=…&payType=…&requestId=…&responseTime=…&resultCode=…&transId=…" (fields in that
 * order, values as sent: strings verbatim, numbers in decimal). The configured secret is
 * "<accessKey>:<secretKey>", since the access key is part of the signed text but not of the
 * body.
 *
 * Handlers bind the body with case-insensitive readers (Json.NET, System.Text.Json's web
 * defaults), which would take an unsigned "ResultCode" next to the signed "resultCode". So a
 * field name that equals a signed one (or "signature") but for case, and a non-ASCII name (.NET
 * folds 'ſ' onto 's'), make the body malformed; and amount, transId, resultCode and
 * responseTime must be JSON integers, as MoMo documents them (Long): a real of the same value
 * signs the same text, so 1e3 or 1000.00000000000001 for a signed 1000 would verify, and a
 * handler reading a long or a decimal would see what MoMo never sent. */
#include <math.h>
#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>

#include "core/inbound_int.h"
#include "core/jsonio.h"

static const char *const fields[] = {
    "amount",      "extraData", "message",   "orderId",      "orderInfo",  "orderType",
    "partnerCode", "payType",   "requestId", "responseTime", "resultCode", "transId",
};

static const char *const numbers[] = {"amount", "transId", "resultCode", "responseTime"};

/* NULL, or why the body's shape is refused (see the top of the file). */
static const char *shape_error(json_t *root) {
  const char *k;
  json_t *v;
  json_object_foreach(root, k, v) {
    for (const char *c = k; *c; c++)
      if ((unsigned char)*c >= 0x80) return "momo: a field name is not ASCII";
    for (size_t i = 0; i <= sizeof fields / sizeof fields[0]; i++) {
      const char *f = i < sizeof fields / sizeof fields[0] ? fields[i] : "signature";
      if (strcasecmp(k, f) == 0 && strcmp(k, f) != 0)
        return "momo: a field name differs from a signed one only in case";
    }
  }
  for (size_t i = 0; i < sizeof numbers / sizeof numbers[0]; i++)
    if (!json_is_integer(json_object_get(root, numbers[i])))
      return "momo: amount, transId, resultCode or responseTime is not an integer";
  return NULL;
}

#define NOT_SCALAR (-3) /* (apart from the buffer's HOOKD_BUF_NOMEM and _TOOBIG) */

/* Appends a field's value as MoMo writes it: a hookd_buf code, or NOT_SCALAR for a value that is
 * not a string or number. */
static int append_value(hookd_buf *b, const json_t *v) {
  char num[32];
  if (!v || json_is_null(v)) return 0;
  if (json_is_string(v)) return hookd_buf_append(b, json_string_value(v), json_string_length(v));
  if (json_is_integer(v))
    return hookd_buf_printf(b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
  if (json_is_real(v)) {
    if (!isfinite(json_real_value(v))) return NOT_SCALAR;
    hookd_jcs_number(json_real_value(v), num);
    return hookd_buf_puts(b, num);
  }
  return NOT_SCALAR;
}

int hookd_in_verify_momo(const hookd_in_request *req, const hookd_in_secrets *s,
                         hookd_verify_result *out) {
  if (!req->body_len) return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, "momo: empty body");
  char err[HOOKD_JSON_ERR_MAX];
  hookd_json_limits lim = {.max_depth = 32};
  json_t *root = hookd_json_parse_fields(req->body, req->body_len, &lim, err);
  if (!root && hookd_json_out_of_memory(err))
    return hookd_in_result(out, HOOKD_VERIFY_INTERNAL, "momo: out of memory");
  if (!root || !json_is_object(root)) {
    /* jansson's message may quote the body: the reason (logged) names the problem only */
    const char *why = root                                  ? "momo: body is not a JSON object"
                      : strstr(err, "duplicate object key") ? "momo: a field is sent twice"
                      : strstr(err, "nested deeper")        ? "momo: body nested too deep"
                      : strstr(err, "too big integer")      ? "momo: an integer beyond 64 bits"
                      : strstr(err, "\\u0000")              ? "momo: a \\u0000 escape in the body"
                                                            : "momo: body is not valid JSON";
    json_decref(root);
    return hookd_in_result(out, HOOKD_VERIFY_MALFORMED, why);
  }
  int rc = HOOKD_VERIFY_MALFORMED;
  const char *reason = "momo: missing or malformed signature";
  hookd_buf tail;
  hookd_buf_init(&tail, HOOKD_IN_MAX_FORM);
  unsigned char sig[32], mac[64];
  const char *sighex = NULL;
  if (hookd_json_get_str(root, "signature", &sighex) != 0 ||
      hookd_hex_decode(sighex, strlen(sighex), sig, sizeof sig) != 0)
    goto done;
  const char *bad = shape_error(root);
  if (bad) {
    reason = bad;
    goto done;
  }

  /* Everything after "accessKey=<key>": the same for every configured secret. */
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    int brc = hookd_buf_printf(&tail, "&%s=", fields[i]);
    if (!brc) brc = append_value(&tail, json_object_get(root, fields[i]));
    if (brc) { /* hookd's own failure (out of memory) is not the request's */
      rc = brc == HOOKD_BUF_NOMEM ? HOOKD_VERIFY_INTERNAL : HOOKD_VERIFY_MALFORMED;
      reason = brc == NOT_SCALAR       ? "momo: a signed field is not a string or number"
               : brc == HOOKD_BUF_NOMEM ? "momo: out of memory"
                                        : "momo: body too large";
      goto done;
    }
  }
  int match = 0, usable = 0;
  for (size_t k = 0; k < s->n && k < HOOKD_IN_MAX_SECRETS; k++) {
    const char *colon = strchr(s->v[k], ':');
    if (!colon || !colon[1]) continue;
    usable = 1;
    const char *secret = colon + 1;
    const void *parts[] = {"accessKey=", s->v[k], hookd_buf_str(&tail)};
    size_t lens[] = {10, (size_t)(colon - s->v[k]), tail.len};
    if (hookd_hmac(HOOKD_MD_SHA256, secret, strlen(secret), parts, lens, 3, mac) == 32)
      match |= hookd_ct_equal(sig, 32, mac, 32);
  }
  OPENSSL_cleanse(mac, sizeof mac);
  if (!usable) {
    rc = HOOKD_VERIFY_MISMATCH;
    reason = "momo: no usable secret (expected accessKey:secretKey)";
  } else {
    rc = match ? HOOKD_VERIFY_OK : HOOKD_VERIFY_MISMATCH;
    reason = match ? "momo: signature valid" : "momo: signature does not match";
  }
  if (rc == HOOKD_VERIFY_OK) { /* (an integer: shape_error checked it) */
    int64_t ms = (int64_t)json_integer_value(json_object_get(root, "responseTime"));
    out->timestamp_s = ms / 1000;
    rc = hookd_in_ipn_time(ms / 1000, req->now_s);
    if (rc == HOOKD_VERIFY_STALE) reason = "momo: responseTime is more than 3 days old";
    if (rc == HOOKD_VERIFY_FUTURE) reason = "momo: responseTime is more than a day ahead";
  }
done:
  hookd_buf_free(&tail);
  json_decref(root);
  return hookd_in_result(out, rc, reason);
}

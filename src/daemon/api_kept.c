/* api_kept.c — an API write route's Idempotency-Key and its answer (table api_answers): a
 * request sent again with the key — from the same API key, to the same route and record, with
 * the same body and reason — gets the first answer again (Idempotent-Replayed: true) and
 * changes nothing; the same key with another request is 409. The answer is kept in the
 * transaction of what the request changed, for 24 hours (docs/api.md "Idempotency-Key"). */
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/clock.h"
#include "core/inbound.h"
#include "core/jsonio.h"
#include "core/sign.h"
#include "daemon/api.h"

/* hex of HMAC-SHA256 under a key drawn from the master key for this use alone: a body that
 * carries secrets (an endpoint's, a source's) is kept as no plain hash of them. */
static int keyed_hex(const hookd_app *app, const void *data, size_t len, char hex[65]) {
  unsigned char k[64], mac[64];
  const void *label[] = {"hookd api answers v1"};
  const size_t label_len[] = {20};
  const void *parts[] = {data};
  const size_t lens[] = {len};
  int rc = hookd_hmac(HOOKD_MD_SHA256, app->keyring.key.key, sizeof app->keyring.key.key, label,
                      label_len, 1, k) == 32 &&
                   hookd_hmac(HOOKD_MD_SHA256, k, 32, parts, lens, 1, mac) == 32
               ? 0
               : -1;
  if (!rc)
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
  OPENSSL_cleanse(k, sizeof k); /* (drawn from the master key: not left on the stack) */
  OPENSSL_cleanse(mac, sizeof mac);
  return rc;
}

/* hex of the hash of route, record, reason and canonical body (NULL: none); false out of memory */
static bool request_hash(const hookd_app *app, const char *route, const char *id, const char *why,
                         const json_t *body, bool keyed, size_t max_body, char out[65]) {
  hookd_buf b;
  /* canonical numbers take up to 5.25 times their bytes ("1e20" is 21 digits) */
  hookd_buf_init(&b, max_body * 6 + 1024);
  bool ok = hookd_buf_printf(&b, "%s\x1f%s\x1f%s\x1f", route, id ? id : "", why ? why : "") == 0 &&
            (!body || hookd_jcs(body, &b) == 0) &&
            (keyed ? keyed_hex(app, b.data, b.len, out) : hookd_in_sha256_hex(b.data, b.len, out)) ==
                0;
  hookd_buf_free(&b);
  return ok;
}

/* The request's key and hash: the route, the record's id (NULL for a batch), the reason (the
 * body's; NULL: the Hookd-Reason header's, as the audit records it) and the body (canonical;
 * NULL: none); keyed when the body may carry secrets. False once answered. */
bool hookd_kept_prepare(hookd_req *r, hookd_app *app, hookd_kept *k, const char *route,
                        const char *id, const char *why, const json_t *body, bool keyed) {
  const char *idem;
  if (!hookd_api_idempotency_key(r, &idem)) return false;
  if (!idem) return true;
  if (!why) why = hookd_req_header(r, "Hookd-Reason");
  snprintf(k->idem, sizeof k->idem, "%s", idem);
  k->at_ms = hookd_clock_bounded(hookd_now_ms(), hookd_mono_ms(), app->started_ms,
                                 app->started_mono_ms);
  const hookd_principal *p = hookd_api_principal(r);
  snprintf(k->scope, sizeof k->scope, "%s", p ? p->key_id : "");
  /* a member sent as null is the member left out (a retry that leaves it out is the same request:
   * a review); the hash of the body as sent is kept beside, which earlier builds kept */
  bool dropped = false;
  json_t *given = body ? hookd_json_without_nulls((json_t *)body, NULL, &dropped) : NULL;
  bool ok = (!body || given) &&
            request_hash(app, route, id, why, given, keyed, app->cfg->max_body_bytes, k->hash);
  json_decref(given);
  k->hash_nulls[0] = '\0';
  if (ok && dropped)
    ok = request_hash(app, route, id, why, body, keyed, app->cfg->max_body_bytes, k->hash_nulls);
  if (!ok) hookd_req_error(r, 503, "unavailable", "out of memory");
  return ok;
}

/* A run's start: 0 with k->replayed when the key's answer is kept (the same request: given
 * again, nothing done), HOOKD_STORE_NOTFOUND without a key or for a new one, and
 * HOOKD_STORE_CONFLICT (said in err) when the key named another request. */
int hookd_kept_lookup(hookd_kept *k, hookd_api_op *base, hookd_store_conn *c,
                      const hookd_store_backend *be) {
  free(k->answer); /* a second run (its batch redone) starts afresh */
  k->answer = NULL;
  k->replayed = false;
  if (!k->idem[0]) return HOOKD_STORE_NOTFOUND;
  char *hash = NULL;
  int rc = be->answer_get(c, k->scope, k->idem, &hash, &k->status, &k->answer);
  if (rc) return rc;
  bool same = !strcmp(hash, k->hash) || (k->hash_nulls[0] && !strcmp(hash, k->hash_nulls));
  free(hash);
  if (!same) {
    free(k->answer);
    k->answer = NULL;
    snprintf(base->err, sizeof base->err,
             "this Idempotency-Key was sent with another request (a key names one request for "
             "24 hours)");
    return HOOKD_STORE_CONFLICT;
  }
  k->replayed = true;
  return 0;
}

/* A run's end: its answer (v, taken over), kept under the key with the run's writes. */
int hookd_kept_store(hookd_kept *k, hookd_store_conn *c, const hookd_store_backend *be,
                     int status, json_t *v) {
  k->answer = v ? hookd_json_text_shown(v) : NULL; /* (as hookd_req_reply_json writes it) */
  json_decref(v);
  k->status = status;
  if (!k->answer) return HOOKD_STORE_ERR;
  return k->idem[0] ? be->answer_put(c, k->scope, k->idem, k->hash, status, k->answer, k->at_ms)
                    : 0;
}

/* The id a create's kept answer names ({"id": …}) into out; false when it names none. */
bool hookd_kept_id(const hookd_kept *k, char *out, size_t cap) {
  json_t *a = k->answer ? json_loads(k->answer, 0, NULL) : NULL;
  const char *id = json_string_value(json_object_get(a, "id"));
  snprintf(out, cap, "%s", id ? id : "");
  json_decref(a);
  return out[0] != '\0';
}

/* The answer, given (again: said so). */
void hookd_kept_reply(hookd_kept *k, hookd_req *r) {
  if (k->replayed) hookd_req_add_header(r, "Idempotent-Replayed", "true");
  char *a = k->answer;
  k->answer = NULL;
  hookd_req_reply(r, k->status, "application/json", a, strlen(a));
}

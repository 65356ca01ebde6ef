/* inbound_identity.c — what an inbound request is, once verified: the provider's own event or
 * delivery id (the default deduplication identity), the event type, the synchronous handshakes
 * some providers require (Slack url_verification, Zoom endpoint.url_validation, Discord PING),
 * dotted JSON path lookup, and composite keys built from several paths. */
#include <math.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "core/inbound_int.h"
#include "core/jsonio.h"

/* ---- small helpers --------------------------------------------------------------------------- */

/* Copies s[0..n) to out; 0 when it fits and is non-empty, else 1 (out = ""). */
static int put(char *out, size_t outlen, const char *s, size_t n) {
  if (!out || !outlen) return 1;
  out[0] = '\0';
  if (!s || !n || n >= outlen || memchr(s, '\0', n)) return 1; /* no truncated ids */
  memcpy(out, s, n);
  out[n] = '\0';
  return 0;
}

static int put_str(char *out, size_t outlen, const char *s) {
  return put(out, outlen, s, s ? strlen(s) : 0);
}

const char *hookd_in_scalar_text(const json_t *v, char tmp[HOOKD_IN_SCALAR_MAX], size_t *len) {
  if (json_is_string(v)) {
    *len = json_string_length(v);
    return json_string_value(v);
  }
  if (json_is_integer(v)) {
    int n = snprintf(tmp, HOOKD_IN_SCALAR_MAX, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    *len = n > 0 ? (size_t)n : 0;
    return tmp;
  }
  if (json_is_real(v) && isfinite(json_real_value(v))) {
    hookd_jcs_number(json_real_value(v), tmp);
    *len = strlen(tmp);
    return tmp;
  }
  return NULL;
}

static int put_json(char *out, size_t outlen, const json_t *v) {
  char tmp[HOOKD_IN_SCALAR_MAX];
  size_t len = 0;
  const char *s = v ? hookd_in_scalar_text(v, tmp, &len) : NULL;
  return put(out, outlen, s, len);
}

/* "a:b[:c]" from scalar parts (NULL parts skipped); 1 when a required part is missing. A part's
 * own ':' and '%' are written %3A and %25, so two different lists never join to the same id
 * (MoMo's orderId "A:B" + requestId "C" against "A" + "B:C"); ids without either character
 * read as they always did. */
static int put_joined(char *out, size_t outlen, const json_t *const *parts, size_t n,
                      size_t required) {
  if (!out || !outlen) return 1;
  out[0] = '\0';
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char tmp[HOOKD_IN_SCALAR_MAX];
    size_t len = 0;
    const char *s = parts[i] ? hookd_in_scalar_text(parts[i], tmp, &len) : NULL;
    if (!s || !len) {
      if (i < required) {
        out[0] = '\0';
        return 1;
      }
      continue;
    }
    size_t need = len;
    for (size_t k = 0; k < len; k++) need += (s[k] == ':' || s[k] == '%') ? 2 : 0;
    if (o + (o ? 1 : 0) + need >= outlen || memchr(s, '\0', len)) {
      out[0] = '\0';
      return 1;
    }
    if (o) out[o++] = ':';
    for (size_t k = 0; k < len; k++) {
      if (s[k] == ':' || s[k] == '%') {
        memcpy(out + o, s[k] == ':' ? "%3A" : "%25", 3);
        o += 3;
      } else {
        out[o++] = s[k];
      }
    }
  }
  out[o] = '\0';
  return o ? 0 : 1;
}

/* Form fields of the body (Twilio) or of the query (VNPay), as JSON strings in an object. */
/* The form's fields as an object, the first of a name sent twice kept; *pairs (when asked) the
 * fields the form holds, repeats counted. */
static json_t *form_object(const char *s, size_t len, size_t *pairs) {
  hookd_in_form f;
  if (!s || hookd_in_form_parse(s, len, &f) != 0) return NULL;
  if (pairs) *pairs = f.n;
  json_t *o = json_object();
  for (size_t i = 0; o && i < f.n; i++)
    if (!json_object_getn(o, f.kv[i].k, f.kv[i].klen)) /* first occurrence wins */
      json_object_setn_new_nocheck(o, f.kv[i].k, f.kv[i].klen,
                                   json_stringn_nocheck(f.kv[i].v, f.kv[i].vlen));
  hookd_in_form_free(&f);
  return o;
}

static const json_t *obj_get(const json_t *o, const char *k) {
  return json_is_object(o) ? json_object_get(o, k) : NULL;
}

/* ---- event id -------------------------------------------------------------------------------- */

/* Zoom sends no event id: the event, its time and the object's id — and for an event about one
 * of the object's members, that member: a participant (its first non-empty id of
 * participant_uuid, user_id, id: empty for a guest), a registrant or a chat message (their id).
 * Two people joining one meeting, or registering for one webinar, in the same millisecond are
 * two events; the second was taken for a conflict, never forwarded (reviews). An event without
 * an object id (a phone call's ringing has call_id, a chat message message_id) has none: its
 * payload hash keys it (a retry resends the same body), since event and time alone made two
 * calls ringing in the same millisecond one event, the second dropped as a conflict. legacy:
 * the id hookd took for it before (hookd_in_legacy_event_id): event and time without an object
 * id; event, time and object id for a registrant's or a chat message's event. */
static int zoom_id(const json_t *body, bool legacy, char *out, size_t outlen) {
  const json_t *obj = obj_get(obj_get(body, "payload"), "object");
  const json_t *oid = obj_get(obj, "id");
  const json_t *who = obj_get(obj, "participant"), *sub = NULL;
  static const char *const ids[] = {"participant_uuid", "user_id", "id"};
  for (size_t i = 0; i < 3 && !sub; i++) {
    const json_t *v = obj_get(who, ids[i]);
    if ((json_is_string(v) && json_string_length(v)) || json_is_integer(v)) sub = v;
  }
  static const char *const members[] = {"registrant", "chat_message"};
  for (size_t i = 0; i < 2 && !who && !sub; i++) {
    const json_t *v = obj_get(obj_get(obj, members[i]), "id");
    if ((json_is_string(v) && json_string_length(v)) || json_is_integer(v)) sub = v;
  }
  bool since = !who && sub; /* a member keyed since 2026-12-07: the key before it is looked up */
  const json_t *parts[] = {obj_get(body, "event"), obj_get(body, "event_ts"), oid, sub};
  char tmp[HOOKD_IN_SCALAR_MAX];
  size_t len = 0;
  bool has_oid = oid && hookd_in_scalar_text(oid, tmp, &len) && len;
  if (!legacy) return put_joined(out, outlen, parts, sub ? 4 : 3, 3);
  if (has_oid) /* keyed as before, or as before the member was */
    return since ? put_joined(out, outlen, parts, 3, 3) : 1;
  /* before: the object id was optional (skipped when missing) */
  return put_joined(out, outlen, parts, sub && !since ? 4 : 3, 2);
}

/* Twilio: a JSON body's members or form fields (a POST's body, a GET's query), which its
 * signature covers; a JSON body is never read as a form (a message's text holding
 * "&MessageSid=X" would name the id). A message: its MessageSid, and the status of a status
 * callback (one for each status of the message). A Conversations webhook (it names its
 * EventType) carries in each of its events (added, updated, each delivery receipt) the
 * MessageSid of the message they speak of, and no id of its own: the hash of its form's fields,
 * sorted and decoded but RetryCount (each event's differ: its sids, status, dates), which the
 * signature covers — not the token, which a captured request would carry anew (a JSON body,
 * which may be read lossily, is keyed as before: the token, else its payload hash). A call: only a status callback (it
 * carries CallbackSource) is CallSid and CallStatus. Else the I-Twilio-Idempotency-Token header
 * (the same on Twilio's retries, not signed: only where the signed fields name no event) — a
 * voice webhook (the incoming call, each <Gather> of it) has no id of its own: a call's two menu
 * steps are both "in-progress", and were taken for one event; without the token its payload hash
 * keys it. legacy: the id an earlier hookd took when it differs — the token first, else the
 * MessageSid; and before that, CallSid and CallStatus for a voice webhook. */
enum tw_kind { TW_NONE, TW_MSG, TW_CALL, TW_TOKEN, TW_FIELDS };

/* "fields:" and the SHA-256 (hex) of the form's fields' canonical JSON (RFC 8785: sorted,
 * escaped one way) but RetryCount, which Twilio's retries of one event change. 1 when they
 * cannot be written. */
static int fields_hash(const json_t *form, char hex[65]) {
  json_t *f = json_is_object(form) ? json_copy((json_t *)form) : NULL;
  if (f) json_object_del(f, "RetryCount");
  hookd_buf b;
  hookd_buf_init(&b, (size_t)8 << 20);
  int rc = f && hookd_jcs(f, &b) == HOOKD_BUF_OK && hookd_in_sha256_hex(b.data, b.len, hex) == 0
               ? 0
               : 1;
  hookd_buf_free(&b);
  json_decref(f);
  return rc;
}
static int fields_id(const json_t *form, char *out, size_t outlen) {
  char hex[65];
  if (outlen <= 7 + 64 || fields_hash(form, hex)) return 1;
  snprintf(out, outlen, "fields:%s", hex);
  return 0;
}
const char *hookd_in_volatile_member(hookd_provider p) {
  return p == HOOKD_PROVIDER_STRIPE ? "pending_webhooks" : NULL;
}

int hookd_in_twilio_form_hash(const char *s, size_t len, char out[65]) {
  size_t pairs = 0;
  json_t *form = form_object(s, len, &pairs);
  /* a name sent twice: the object keeps its first value, and two forms differing only in a later
   * one would hash alike — one event's payload taken for another's (keyed by it: dropped as its
   * duplicate). Such a form is hashed as its bytes (1). */
  int rc = form && json_object_size(form) == pairs ? fields_hash(form, out) : 1;
  json_decref(form);
  return rc;
}

static int twilio_id(const hookd_in_request *req, const json_t *body, bool legacy, char *out,
                     size_t outlen) {
  const char *token = hookd_in_header_get(req, "I-Twilio-Idempotency-Token");
  if (token && !*token) token = NULL;
  size_t qlen = 0;
  const char *q = req->body_len ? req->body : hookd_in_query(req, &qlen);
  /* a body typed as anything but a form is not read as one: a JSON body too deep to parse (body
   * NULL) is keyed by its hash, not split on '&' */
  const char *ct = hookd_in_header_get(req, "Content-Type");
  bool form_ok = !req->body_len || !ct || hookd_in_is_form(ct);
  json_t *form =
      body || !form_ok ? NULL : form_object(q, req->body_len ? req->body_len : qlen, NULL);
  const json_t *from = body ? body : form;
  const json_t *msg[] = {obj_get(from, "MessageSid"), obj_get(from, "MessageStatus")};
  const json_t *call[] = {obj_get(from, "CallSid"), obj_get(from, "CallStatus")};
  const json_t *src = obj_get(from, "CallbackSource");
  bool status_cb = (json_is_string(src) && json_string_length(src)) || json_is_number(src);
  bool conv = obj_get(from, "EventType") != NULL;
  bool msg_ok = put_joined(out, outlen, msg, 2, 1) == 0;
  bool call_ok = put_joined(out, outlen, call, 2, 1) == 0;
  enum tw_kind now = conv && form           ? TW_FIELDS
                     : !conv && msg_ok      ? TW_MSG
                     : status_cb && call_ok ? TW_CALL
                     : token                ? TW_TOKEN
                                            : TW_NONE;
  /* an earlier hookd's: the token first, then the MessageSid, then a status callback's call */
  enum tw_kind was = token ? TW_TOKEN : msg_ok ? TW_MSG : status_cb && call_ok ? TW_CALL : TW_NONE;
  enum tw_kind k = now;
  if (legacy) /* (and before that, a voice webhook's call and status) */
    k = was != now ? was : !token && !msg_ok && !status_cb && call_ok ? TW_CALL : TW_NONE;
  int rc = k == TW_MSG    ? put_joined(out, outlen, msg, 2, 1)
           : k == TW_CALL ? put_joined(out, outlen, call, 2, 1)
           : k == TW_TOKEN  ? put_str(out, outlen, token)
           : k == TW_FIELDS ? fields_id(form, out, outlen)
                            : 1;
  if (rc) out[0] = '\0';
  json_decref(form);
  return rc;
}

int hookd_in_legacy_event_id(hookd_provider p, const hookd_in_request *req, const json_t *body,
                             char *out, size_t outlen) {
  if (out && outlen) out[0] = '\0';
  if (!req || !out || !outlen) return 1;
  if (p == HOOKD_PROVIDER_ZOOM) return zoom_id(body, true, out, outlen);
  if (p == HOOKD_PROVIDER_TWILIO) return twilio_id(req, body, true, out, outlen);
  if (p == HOOKD_PROVIDER_GITLAB) { /* the UUID, without an Idempotency-Key */
    const char *k = hookd_in_header_get(req, "Idempotency-Key");
    return k && *k ? 1 : put_str(out, outlen, hookd_in_header_get(req, "X-Gitlab-Event-UUID"));
  }
  return 1;
}

int hookd_in_event_id(hookd_provider p, const hookd_in_request *req, const json_t *body,
                      const hookd_generic_hmac *generic, char *out, size_t outlen) {
  if (out && outlen) out[0] = '\0';
  if (!req || !out || !outlen) return 1;
  const char *h;
  switch (p) {
  case HOOKD_PROVIDER_STRIPE:
  case HOOKD_PROVIDER_DISCORD: return put_json(out, outlen, obj_get(body, "id"));
  case HOOKD_PROVIDER_GITHUB:
    return put_str(out, outlen, hookd_in_header_get(req, "X-GitHub-Delivery"));
  case HOOKD_PROVIDER_SHOPIFY:
    h = hookd_in_shopify_header(req, "Webhook-Id");
    if (!h || !*h) h = hookd_in_shopify_header(req, "Event-Id");
    return put_str(out, outlen, h);
  case HOOKD_PROVIDER_STANDARD: { /* the id the signature covered */
    const char *ts, *sig;
    hookd_in_standard_headers(req, &h, &ts, &sig);
    return put_str(out, outlen, h);
  }
  case HOOKD_PROVIDER_SLACK: return put_json(out, outlen, obj_get(body, "event_id"));
  case HOOKD_PROVIDER_PADDLE:
    if (put_json(out, outlen, obj_get(body, "event_id")) == 0) return 0;
    return put_json(out, outlen, obj_get(body, "notification_id"));
  case HOOKD_PROVIDER_ZOOM: return zoom_id(body, false, out, outlen);
  case HOOKD_PROVIDER_GITLAB:
    /* Idempotency-Key is the same on GitLab's retries and manual resends. X-Gitlab-Event-UUID
     * (all an older GitLab sends) is no id: new on every send, and shared by recursive hooks'
     * distinct events (the second a conflict, never forwarded) — the payload hash keys those.
     * Signed with a signing token (Standard Webhooks' way), the request's webhook-id, which
     * GitLab sets to its Idempotency-Key and which the signature covers: a captured request
     * sent again with another Idempotency-Key stays a duplicate — and so does one whose headers
     * were renamed svix-* (verified by those: its svix-id is the signed id) */
    {
      const char *ts, *sig;
      hookd_in_standard_headers(req, &h, &ts, &sig);
      if (sig && h && *h) return put_str(out, outlen, h);
    }
    return put_str(out, outlen, hookd_in_header_get(req, "Idempotency-Key"));
  case HOOKD_PROVIDER_TWILIO: return twilio_id(req, body, false, out, outlen);
  case HOOKD_PROVIDER_VNPAY: {
    size_t qlen = 0;
    const char *q = hookd_in_query(req, &qlen);
    json_t *form = form_object(q, qlen, NULL);
    const json_t *parts[] = {obj_get(form, "vnp_TxnRef"), obj_get(form, "vnp_TransactionNo")};
    int rc = put_joined(out, outlen, parts, 2, 2);
    json_decref(form);
    return rc;
  }
  case HOOKD_PROVIDER_MOMO: {
    const json_t *parts[] = {obj_get(body, "orderId"), obj_get(body, "requestId")};
    return put_joined(out, outlen, parts, 2, 2);
  }
  case HOOKD_PROVIDER_GENERIC:
    if (!generic || !generic->id_header || !*generic->id_header) return 1;
    return put_str(out, outlen, hookd_in_header_get(req, generic->id_header));
  case HOOKD_PROVIDER__COUNT: break;
  }
  return 1;
}

/* ---- event type ------------------------------------------------------------------------------ */

/* A Slack form post's type: an interaction's own (its payload field's JSON "type":
 * block_actions, view_submission, shortcut, …), or "slash_command" for a slash command; 2 when
 * the form or its payload cannot be read (past the form's bounds — a large view_submission's
 * whole view passes 64 KiB —, or JSON deeper than 64 or not valid): unread, not absent. */
static int slack_form_type(const hookd_in_request *req, char *out, size_t outlen) {
  if (!hookd_in_is_form(hookd_in_header_get(req, "Content-Type"))) return 1;
  json_t *form = form_object(req->body, req->body_len, NULL);
  if (!form && req->body_len) return 2;
  const json_t *pl = obj_get(form, "payload"), *cmd = obj_get(form, "command");
  int rc = 1;
  if (json_is_string(pl)) {
    static const hookd_json_limits lim = {.max_depth = 64};
    char err[HOOKD_JSON_ERR_MAX];
    json_t *v = hookd_json_parse(json_string_value(pl), json_string_length(pl), &lim, err);
    const json_t *t = obj_get(v, "type");
    if (json_is_string(t)) rc = put_json(out, outlen, t);
    else if (!v) rc = 2;
    json_decref(v);
  } else if (json_is_string(cmd) && json_string_length(cmd)) {
    rc = put_str(out, outlen, "slash_command");
  }
  json_decref(form);
  return rc;
}

int hookd_in_event_type(hookd_provider p, const hookd_in_request *req, const json_t *body,
                        char *out, size_t outlen) {
  if (out && outlen) out[0] = '\0';
  if (!req || !out || !outlen) return 1;
  switch (p) {
  case HOOKD_PROVIDER_STRIPE:
  case HOOKD_PROVIDER_STANDARD: {
    const json_t *t = obj_get(body, "type");
    return json_is_string(t) ? put_json(out, outlen, t) : 1;
  }
  case HOOKD_PROVIDER_GITHUB:
    return put_str(out, outlen, hookd_in_header_get(req, "X-GitHub-Event"));
  case HOOKD_PROVIDER_SHOPIFY:
    return put_str(out, outlen, hookd_in_shopify_header(req, "Topic"));
  case HOOKD_PROVIDER_SLACK: {
    const json_t *t = obj_get(obj_get(body, "event"), "type");
    if (!json_is_string(t)) t = obj_get(body, "type");
    if (json_is_string(t)) return put_json(out, outlen, t);
    return body ? 1 : slack_form_type(req, out, outlen);
  }
  case HOOKD_PROVIDER_PADDLE: {
    const json_t *t = obj_get(body, "event_type");
    return json_is_string(t) ? put_json(out, outlen, t) : 1;
  }
  case HOOKD_PROVIDER_ZOOM: {
    const json_t *t = obj_get(body, "event");
    return json_is_string(t) ? put_json(out, outlen, t) : 1;
  }
  case HOOKD_PROVIDER_GITLAB:
    return put_str(out, outlen, hookd_in_header_get(req, "X-Gitlab-Event"));
  case HOOKD_PROVIDER_DISCORD: {
    /* a webhook event names its type ("APPLICATION_AUTHORIZED"); an interaction is a number */
    const json_t *t = obj_get(obj_get(body, "event"), "type");
    if (json_is_string(t)) return put_json(out, outlen, t);
    t = obj_get(body, "type");
    return json_is_number(t) ? put_json(out, outlen, t) : 1;
  }
  case HOOKD_PROVIDER_VNPAY:
  case HOOKD_PROVIDER_MOMO: return put_str(out, outlen, "payment");
  case HOOKD_PROVIDER_TWILIO:
  case HOOKD_PROVIDER_GENERIC:
  case HOOKD_PROVIDER__COUNT: break;
  }
  return 1;
}

bool hookd_in_provider_has_type(hookd_provider p) {
  return p != HOOKD_PROVIDER_TWILIO && p != HOOKD_PROVIDER_GENERIC && p < HOOKD_PROVIDER__COUNT;
}

/* ---- handshakes ------------------------------------------------------------------------------ */

int hookd_in_handshake(hookd_provider p, const hookd_in_request *req, const json_t *body,
                       const hookd_in_secrets *secrets, int *status, hookd_buf *resp_body) {
  if (!req || !json_is_object(body) || !status || !resp_body) return 0;
  if (p == HOOKD_PROVIDER_SLACK) {
    const char *type = NULL, *challenge = NULL;
    if (hookd_json_get_str(body, "type", &type) != 0 || strcmp(type, "url_verification") != 0)
      return 0;
    if (hookd_json_get_str(body, "challenge", &challenge) != 0) return -1;
    const json_t *c = json_object_get(body, "challenge");
    hookd_buf_reset(resp_body);
    int rc = hookd_buf_puts(resp_body, "{\"challenge\":");
    if (!rc) rc = hookd_json_quote(resp_body, challenge, json_string_length(c));
    if (!rc) rc = hookd_buf_puts(resp_body, "}");
    if (rc) return -1;
    *status = 200;
    return 1;
  }
  if (p == HOOKD_PROVIDER_ZOOM) {
    const char *event = NULL;
    if (hookd_json_get_str(body, "event", &event) != 0 ||
        strcmp(event, "endpoint.url_validation") != 0)
      return 0;
    const json_t *t = obj_get(obj_get(body, "payload"), "plainToken");
    if (!json_is_string(t) || !secrets || !secrets->n || !secrets->v || !secrets->v[0]) return -1;
    const void *parts[] = {json_string_value(t)};
    size_t lens[] = {json_string_length(t)};
    unsigned char mac[64];
    char hex[65];
    if (hookd_hmac(HOOKD_MD_SHA256, secrets->v[0], strlen(secrets->v[0]), parts, lens, 1, mac) !=
        32)
      return 0;
    hookd_in_hex_encode(mac, 32, hex);
    OPENSSL_cleanse(mac, sizeof mac);
    hookd_buf_reset(resp_body);
    int rc = hookd_buf_puts(resp_body, "{\"plainToken\":");
    if (!rc) rc = hookd_json_quote(resp_body, json_string_value(t), json_string_length(t));
    if (!rc) rc = hookd_buf_printf(resp_body, ",\"encryptedToken\":\"%s\"}", hex);
    if (rc) return -1;
    *status = 200;
    return 1;
  }
  if (p == HOOKD_PROVIDER_DISCORD) {
    const json_t *t = json_object_get(body, "type");
    if (!json_is_integer(t)) return 0;
    hookd_buf_reset(resp_body);
    if (json_integer_value(t) == 0) { /* a webhook events URL's PING: 204, no body */
      *status = 204;
      return 1;
    }
    /* an interactions URL's PING; type 1 with an "event" is a webhook event, not a PING */
    if (json_integer_value(t) != 1 || json_object_get(body, "event")) return 0;
    if (hookd_buf_puts(resp_body, "{\"type\":1}") != 0) return 0;
    *status = 200;
    return 1;
  }
  return 0;
}

bool hookd_in_is_form(const char *ct) {
  /* the media type whole: then its parameters or blanks ("…-urlencodedx" is another type) */
  return ct && !strncasecmp(ct, "application/x-www-form-urlencoded", 33) &&
         (ct[33] == '\0' || ct[33] == ';' || ct[33] == ' ' || ct[33] == '\t');
}

int hookd_in_stored_ack(hookd_provider p, const hookd_in_request *req, const json_t *body,
                        hookd_in_ack *ack) {
  static const char json[] = "application/json";
  *ack = (hookd_in_ack){200, NULL, NULL, NULL};
  switch (p) {
  case HOOKD_PROVIDER_VNPAY:
    *ack = (hookd_in_ack){200, json, "{\"RspCode\":\"00\",\"Message\":\"Confirm Success\"}", NULL};
    return 1;
  case HOOKD_PROVIDER_MOMO: ack->status = 204; return 1;
  case HOOKD_PROVIDER_TWILIO:
    *ack = (hookd_in_ack){200, "text/xml",
                          "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response></Response>", NULL};
    return 1;
  case HOOKD_PROVIDER_SLACK: {
    if (!hookd_in_is_form(hookd_in_header_get(req, "Content-Type"))) return 0;
    char type[64];
    if (slack_form_type(req, type, sizeof type) == 0 &&
        (!strcmp(type, "block_suggestion") || !strcmp(type, "dialog_suggestion")))
      *ack = (hookd_in_ack){200, json, "{\"options\":[]}", NULL};
    return 1;
  }
  case HOOKD_PROVIDER_DISCORD: {
    const json_t *t = obj_get(body, "type");
    json_int_t type = json_is_integer(t) ? json_integer_value(t) : -1;
    if (type == 1 && json_is_object(obj_get(body, "event")))
      ack->status = 204; /* a webhook event: acknowledged with no body */
    else if (type == 3)
      /* a component: DEFERRED_UPDATE_MESSAGE (the message stays as it is) */
      *ack = (hookd_in_ack){200, json, "{\"type\":6}", NULL};
    else if (type == 4) /* autocomplete cannot wait for the application: no choices */
      *ack = (hookd_in_ack){200, json, "{\"type\":8,\"data\":{\"choices\":[]}}", NULL};
    else /* a command, a modal: DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE; when nothing will follow
          * it up, an ephemeral (flags 64) CHANNEL_MESSAGE_WITH_SOURCE says so */
      *ack = (hookd_in_ack){200, json, "{\"type\":5}",
                            "{\"type\":4,\"data\":{\"content\":"
                            "\"This interaction is not handled.\",\"flags\":64}}"};
    return 1;
  }
  default: return 0;
  }
}

/* ---- JSON paths and composite keys ----------------------------------------------------------- */

const json_t *hookd_json_path(const json_t *root, const char *path) {
  if (!root || !path) return NULL;
  const json_t *cur = root;
  const char *p = path;
  if (!*p) return root;
  for (;;) {
    const char *dot = strchr(p, '.');
    size_t len = dot ? (size_t)(dot - p) : strlen(p);
    if (!len) return NULL;
    if (json_is_object(cur)) {
      cur = json_object_getn(cur, p, len);
    } else if (json_is_array(cur)) {
      if (len > 9) return NULL;
      size_t idx = 0;
      for (size_t i = 0; i < len; i++) {
        if (p[i] < '0' || p[i] > '9') return NULL;
        idx = idx * 10 + (size_t)(p[i] - '0');
      }
      if (len > 1 && p[0] == '0') return NULL; /* no "01" */
      cur = json_array_get(cur, idx);
    } else {
      return NULL;
    }
    if (!cur) return NULL;
    if (!dot) return cur;
    p = dot + 1;
  }
}

void hookd_in_display_id(const char *in, char *out, size_t cap) {
  static const char hex[] = "0123456789ABCDEF";
  size_t o = 0;
  if (!cap) return;
  for (const unsigned char *p = (const unsigned char *)in; *p; p++) {
    if (*p >= 0x20 && *p < 0x7f) {
      if (o + 1 >= cap) break;
      out[o++] = (char)*p;
    } else {
      if (o + 3 >= cap) break;
      out[o++] = '%';
      out[o++] = hex[*p >> 4];
      out[o++] = hex[*p & 15];
    }
  }
  out[o] = '\0';
}

#define COMPOSITE_MAX_PATHS 32
#define PATH_MAX_LEN 256

int hookd_in_composite_key(const json_t *root, const char *paths, hookd_buf *out, char *missing,
                           size_t missing_len) {
  if (missing && missing_len) missing[0] = '\0';
  if (!paths || !out) return -1;
  const char *p = paths;
  size_t count = 0;
  int first = 1;
  for (;;) {
    const char *comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    const char *path = hookd_in_trim(p, &len);
    char buf[PATH_MAX_LEN];
    const json_t *v = NULL;
    if (len && len < sizeof buf && ++count <= COMPOSITE_MAX_PATHS) {
      memcpy(buf, path, len);
      buf[len] = '\0';
      v = hookd_json_path(root, buf);
    }
    /* Scalars only; null and an empty string count as missing (a field left blank by the
     * provider: keyed by it, every event blank there would be one event, the rest lost) */
    if (!v || json_is_null(v) || json_is_object(v) || json_is_array(v) ||
        (json_is_string(v) && json_string_length(v) == 0)) {
      if (missing && missing_len) {
        size_t n = len < missing_len ? len : missing_len - 1;
        memcpy(missing, path, n);
        missing[n] = '\0';
      }
      return 1;
    }
    int rc = first ? 0 : hookd_buf_append(out, "|", 1);
    first = 0;
    if (!rc) rc = hookd_buf_append(out, path, len);
    if (!rc) rc = hookd_buf_append(out, "=", 1);
    if (!rc) rc = hookd_jcs(v, out);
    if (rc) return rc < 0 ? rc : HOOKD_BUF_NOMEM;
    if (!comma) return 0;
    p = comma + 1;
  }
}

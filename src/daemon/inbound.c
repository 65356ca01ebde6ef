/* inbound.c — the provider-facing receive path, POST /in/{source} (GET for VNPay's IPN).
 * docs/inbound.md has the order of the checks and why.
 *
 * Everything up to the store runs on the ingress thread from the in-memory source cache:
 * method, content type, signature on the raw bytes, timestamp, handshakes, event-type
 * allowlist, identity. The store step is one writer op (group-committed); the provider gets its
 * 2xx only after the commit. Nothing is stored for a request that fails verification, and the
 * logs never carry the body, a secret or a signature. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/clock.h"
#include "core/custom_headers.h"
#include "core/ids.h"
#include "core/inbound.h"
#include "core/redact.h"
#include "core/timefmt.h"
#include "core/version.h"
#include "daemon/api.h"
#include "daemon/inbound.h"
#include "daemon/log.h"
#include "daemon/metrics.h"
#include "daemon/sources.h"

#define MAX_IN_HEADERS 128
#define MOMO_BODY_MAX 65536 /* an IPN is under 2 KiB */
#define HOOKD_STR_(x) #x
#define HOOKD_STR(x) HOOKD_STR_(x)

typedef struct recv_op {
  hookd_api_op base;
  hookd_receive_req rq;
  hookd_receive_res rs;
  hookd_provider provider;
  bool hash_failed; /* a key could not be computed (SHA-256 or memory failed): answered as a
                     * storage failure, nothing stored, the provider retries */
  char inbox_id[HOOKD_ID_MAX];
  char source_id[HOOKD_ID_MAX + 64];
  char tenant_id[HOOKD_ID_MAX + 64];
  char provider_name[24];
  char identity_key[65];
  char identity_kind[16];
  char prior_identity_key[65]; /* under the source's prior identity rule (docs/inbound.md) */
  char provider_event_id[256];
  char business_key[65];
  char event_type[256];
  char payload_hash[65];
  char alt_payload_hash[65]; /* VNPay: as hookd took it before (hookd_receive_req) */
  char object_key[65];
  char version[256];
  char *content_type; /* the forward's: as received (heap) */
  bool has_ack;      /* the provider expects its own answer, not hookd's (hookd_in_stored_ack) */
  hookd_in_ack ack;
  hookd_buf body;
  hookd_buf meta;
} recv_op;

static void recv_cleanup(hookd_api_op *base) {
  recv_op *op = (recv_op *)base;
  /* also after a failure: a receive that ran in a batch that did not commit filled it */
  hookd_receive_res_free(&op->rs);
  hookd_buf_free(&op->body);
  hookd_buf_free(&op->meta);
  free(op->content_type);
}

/* Keeps printable ASCII only: values that become forwarded header lines. */
static void header_safe(const char *in, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = in; *p && o + 1 < cap; p++)
    if ((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f) out[o++] = *p;
  out[o] = '\0';
}

/* A provider's header that the forward carries as it came (what Hookdeck users expect: a
 * Shopify app serving many shops reads X-Shopify-Shop-Domain, a GitLab handler its instance):
 * all but the names an endpoint's own headers may not set either (the connection's, the body's
 * framing, what changes how the request is read, what the forward sets itself, hookd's
 * signature: hookd_custom_header_reserved), credentials (a client posing as a provider might
 * send them; GitLab's token is one) and the client addresses proxies set. */
static bool forwardable(const char *name) {
  if (hookd_custom_header_reserved(name)) return false;
  static const char *const drop[] = {
      "Accept", "Authorization", "Cookie", "Forwarded", "HTTP2-Settings", "X-Real-IP",
      "True-Client-IP", "CF-Connecting-IP", "X-Client-IP", "X-Cluster-Client-IP",
      "Fastly-Client-IP"};
  for (size_t i = 0; i < sizeof drop / sizeof *drop; i++)
    if (!strcasecmp(name, drop[i])) return false;
  /* a header carrying a credential — GitLab's X-Gitlab-Token is the source's secret itself —
   * is neither stored in the clear with the event nor handed on: the names the excerpts mask
   * (core/redact.h), but a provider's idempotency token (Twilio's), which is an id */
  size_t n = strlen(name);
  if (hookd_redact_name_sensitive(name) &&
      !(n >= 18 && !strcasecmp(name + n - 18, "-idempotency-token")))
    return false;
  /* (the reserved names hold the provider's Standard Webhooks headers under either spelling: a
   * Svix library reads svix-* before webhook-*, and would check the provider's signature, the
   * source's secret, against the destination's, refusing every forward of a Svix-signed one) */
  return strncasecmp(name, "X-Forwarded-", 12) != 0;
}

/* Whether name is one of the comma-separated tokens of the request's Connection headers (conns:
 * every line of it, a list may come in several): a header the client named hop-by-hop (RFC 9110
 * 7.6.1), which is not handed on. */
static bool hop_listed(const char *const *conns, size_t nc, const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < nc; i++) {
    for (const char *p = conns[i]; p && *p;) {
      while (*p == ' ' || *p == '\t' || *p == ',') p++;
      const char *e = p;
      while (*e && *e != ',' && *e != ' ' && *e != '\t') e++;
      if ((size_t)(e - p) == n && !strncasecmp(p, name, n)) return true;
      p = e;
    }
  }
  return false;
}

/* Whether a header value is handed on as it came: visible ASCII, spaces and tabs. A value with
 * any other byte is left out whole, never altered (a handler checking a signed value would see
 * a different one). */
static bool value_forwardable(const char *v) {
  for (const unsigned char *p = (const unsigned char *)v; *p; p++)
    if ((*p < 0x20 && *p != '\t') || *p >= 0x7f) return false;
  return true;
}

/* n bytes of a value's part without the blanks after them (a media type before its ';'). */
static size_t trimmed_len(const char *v, size_t n) {
  while (n && (v[n - 1] == ' ' || v[n - 1] == '\t')) n--;
  return n;
}

/* The length of ct's media type, its parameters and trailing spaces left out (0 for none). */
static size_t media_len(const char *ct) {
  if (!ct) return 0;
  const char *semi = strchr(ct, ';');
  return trimmed_len(ct, semi ? (size_t)(semi - ct) : strlen(ct));
}
static bool is_json(const char *ct) {
  size_t n = media_len(ct);
  return (n == 16 && !strncasecmp(ct, "application/json", 16)) ||
         (n > 5 && !strncasecmp(ct + n - 5, "+json", 5));
}
static bool is_xml(const char *ct) {
  size_t n = media_len(ct);
  return (n == 15 && !strncasecmp(ct, "application/xml", 15)) ||
         (n == 8 && !strncasecmp(ct, "text/xml", 8));
}

/* Whether a body reads as JSON by its bytes: its first byte past blanks (and a UTF-8 byte order
 * mark) opens an object or an array. */
static bool looks_json(const char *b, size_t n) {
  size_t i = n >= 3 && !memcmp(b, "\xEF\xBB\xBF", 3) ? 3 : 0;
  while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n')) i++;
  return i < n && (b[i] == '{' || b[i] == '[');
}

/* Content types each provider sends. */
static bool content_type_ok(hookd_provider p, const char *ct) {
  switch (p) {
  case HOOKD_PROVIDER_SHOPIFY: return is_json(ct) || is_xml(ct); /* a subscription's format */
  case HOOKD_PROVIDER_TWILIO:
  case HOOKD_PROVIDER_SLACK:
  case HOOKD_PROVIDER_GITHUB: return is_json(ct) || hookd_in_is_form(ct);
  case HOOKD_PROVIDER_VNPAY:
  case HOOKD_PROVIDER_GENERIC: return true;
  default: return is_json(ct);
  }
}

/* Answers a provider the way it expects. */
static void reply_ack(hookd_req *r, const recv_op *op, const hookd_inbox *rec, bool dup) {
  if (op->has_ack) {
    const hookd_in_ack *a = &op->ack;
    /* a record kept without being forwarded (filtered, stale, a conflict, a business-key
     * duplicate) links no event */
    const char *body = a->unforwarded_body && !rec->event_seq ? a->unforwarded_body : a->body;
    char *b = body ? strdup(body) : NULL;
    if (body && !b) { /* out of memory: no answer the provider would misread */
      hookd_req_error(r, 503, "unavailable", "out of memory");
      return;
    }
    hookd_req_reply(r, a->status, b ? a->content_type : NULL, b, b ? strlen(b) : 0);
  } else {
    const char *status = rec->status;
    bool live_lease = rec->lease_until_ms > hookd_now_ms();
    if (live_lease && (!strcmp(status, "received") || !strcmp(status, "retryable_failed")))
      status = "processing";
    json_t *v = json_pack("{s:s,s:s,s:b}", "inbox_id", rec->id, "status", status, "duplicate",
                          dup);
    /* the record a conflict or a business-key duplicate refers to */
    if (rec->conflict_of) json_object_set_new(v, "duplicate_of", json_string(rec->conflict_of));
    if (rec->result_ref) json_object_set_new(v, "result_ref", json_string(rec->result_ref));
    hookd_req_reply_json(r, 200, v);
  }
}

/* VNPay's "try again" ("99": it retries), where other providers get a 503. */
static void reply_vnpay_retry(hookd_req *r) {
  hookd_req_reply_json(r, 200,
                       json_pack("{s:s,s:s}", "RspCode", "99", "Message", "Unknown error"));
}

static void reply_receive(hookd_api_op *base, int rc) {
  recv_op *op = (recv_op *)base;
  if (rc) {
    HOOKD_INC(inbound_unavailable[rc == HOOKD_STORE_STATE ? HOOKD_UNAVAIL_NO_DESTINATION
                                                          : HOOKD_UNAVAIL_STORE]);
    if (rc == HOOKD_STORE_STATE) /* not a store failure: every destination was deleted */
      HLOG(HOOKD_LOG_WARN, "inbound.no_destination", KV_S("source_id", op->source_id),
           KV_S("tenant_id", op->tenant_id));
    else
      HLOG(HOOKD_LOG_ERROR, "inbound.store_failed", KV_S("source_id", op->source_id),
           KV_S("tenant_id", op->tenant_id), KV_S("error", hookd_store_strerror(rc)));
    if (op->provider == HOOKD_PROVIDER_VNPAY) {
      reply_vnpay_retry(base->req);
      return;
    }
    if (rc == HOOKD_STORE_STATE) { /* no destination left: nothing stored, the provider retries */
      hookd_req_add_header(base->req, "Retry-After", "60");
      hookd_req_error(base->req, 503, "no_destination",
                      "source %s has no destination to forward to; nothing was stored",
                      op->source_id);
      return;
    }
    hookd_api_store_error(base, rc, "source");
    return;
  }
  int out = op->rs.outcome;
  if (out < 0 || out >= HOOKD_RECV__COUNT) out = HOOKD_RECV_NEW;
  HOOKD_INC(inbound[out]);
  HOOKD_ADD(deliveries_created, (uint64_t)op->rs.n_endpoints); /* the forwards */
  for (size_t i = 0; i < op->rs.n_endpoints; i++)
    hookd_dispatcher_hint(base->app->disp, op->rs.endpoints[i], op->rs.due_ms);
  HLOG(out == HOOKD_RECV_CONFLICT ? HOOKD_LOG_WARN : HOOKD_LOG_DEBUG, "inbound.received",
       KV_S("outcome", hookd_recv_outcome_names[out]), KV_S("inbox_id", op->rs.record.id),
       KV_S("event_id", op->rs.record.id), /* its forwards' lines name it so */
       /* the provider's (as the inbox shows it): what an operator greps for from its dashboard */
       KV_S("provider_event_id", op->provider_event_id), KV_S("source_id", op->source_id),
       KV_S("tenant_id", op->tenant_id),
       KV_S("provider", op->provider_name), KV_S("event_type", op->event_type),
       KV_S("identity_kind", op->identity_kind));
  hookd_hist_observe_us(&hookd_m.inbound_ack, hookd_req_age_us(base->req));
  /* a duplicate: of a recorded event, by its identity or (status "duplicate") its business key */
  reply_ack(base->req, op, &op->rs.record,
            out == HOOKD_RECV_DUPLICATE || out == HOOKD_RECV_SEMANTIC_DUP);
}

static int run_receive(hookd_store_conn *c, const hookd_store_backend *be, hookd_api_op *base) {
  recv_op *op = (recv_op *)base;
  if (op->hash_failed) {
    snprintf(base->err, sizeof base->err, "an identity key could not be computed");
    return HOOKD_STORE_ERR; /* 503 (VNPay: "99"): the provider retries */
  }
  hookd_receive_res_free(&op->rs); /* a second run (its batch redone) starts afresh */
  return be->receive(c, &op->rq, &op->rs);
}

/* A refused request counted, logged (HOOKD_REJECTIONS_LOG_PER_S lines a second per source, the
 * next counting those not logged) and kept with its source's latest refusals: log_why never
 * quotes the request (API readers see it too). */
static void count_rejected(hookd_app *app, const hookd_source_rt *rt, int status,
                           hookd_reject_reason reason, const char *log_why) {
  HOOKD_INC(inbound_rejected[reason]);
  int64_t unlogged =
      hookd_rejections_add(app->rejections, rt->src.id, hookd_now_ms(), status, reason, log_why);
  if (unlogged < 0) return; /* the source's lines of this second are out: counted, kept */
  HLOG(HOOKD_LOG_INFO, "inbound.rejected", KV_S("source_id", rt->src.id),
       KV_S("tenant_id", rt->src.tenant_id), KV_S("provider", rt->src.provider),
       KV_S("reason", log_why), KV_S("kind", hookd_reject_names[reason]),
       KV_I("suppressed", unlogged));
}

/* Answers a refused request with why; the log gets log_why. */
static void reject_as(hookd_app *app, hookd_req *r, hookd_provider p, const hookd_source_rt *rt,
                      int status, const char *code, hookd_reject_reason reason, const char *why,
                      const char *log_why) {
  count_rejected(app, rt, status, reason, log_why);
  if (p == HOOKD_PROVIDER_VNPAY && status == 401) {
    hookd_req_reply_json(r, 200, json_pack("{s:s,s:s}", "RspCode", "97", "Message",
                                           "Invalid Checksum"));
    return;
  }
  hookd_req_error(r, status, code, "%s", why);
}

static void reject(hookd_app *app, hookd_req *r, hookd_provider p, const hookd_source_rt *rt,
                   int status, const char *code, hookd_reject_reason reason, const char *why) {
  reject_as(app, r, p, rt, status, code, reason, why, why);
}

/* A JSON scalar as text, as identities write it (hookd_in_scalar_text), booleans too. */
static const char *scalar_text(const json_t *v, char num[HOOKD_IN_SCALAR_MAX], size_t *len) {
  if (!json_is_boolean(v)) return hookd_in_scalar_text(v, num, len);
  *len = json_is_true(v) ? 4 : 5;
  return json_is_true(v) ? "true" : "false";
}

/* A version (docs/inbound.md "Late events"): numbers and date-times compare by value, the rest
 * as text; false when there is none or it does not fit out (then nothing is held back). */
static bool version_of(const char *text, size_t len, char *out, size_t cap, bool *numeric) {
  int kind;
  if (!text || len >= cap || memchr(text, '\0', len) ||
      hookd_version_normalize(text, out, cap, &kind) != 0)
    return false;
  *numeric = kind == HOOKD_VERSION_NUMBER;
  return true;
}

/* The identity key: SHA-256 hex of provider, source, tenant, the identity's kind and value. */
static int key_of(const recv_op *op, const char *kind, const char *ident, char key_out[65]) {
  hookd_buf key;
  hookd_buf_init(&key, 4096);
  int rc = hookd_buf_printf(&key, "%s\x1f%s\x1f%s\x1f%s\x1f%s", op->provider_name, op->source_id,
                            op->tenant_id, kind, ident) != 0 ||
                   hookd_in_sha256_hex(key.data, key.len, key_out) != 0
               ? -1
               : 0;
  hookd_buf_free(&key);
  return rc;
}

/* A request's identity key under an identity rule (paths: a composite's JSON paths, NULL for the
 * provider's id, else the payload hash; see docs/inbound.md "Identity") and its kind; the
 * provider's id into op->provider_event_id when set_pid. -1 when it could not be computed (out
 * of memory, SHA-256): a storage failure, the provider retries. */
static int identity_under(recv_op *op, const hookd_source_rt *rt, const hookd_in_request *in,
                          const char *paths, const json_t *json, bool lossy, size_t comp_max,
                          char key_out[65], char kind[16], bool set_pid) {
  char ident[1024] = "";
  char missing[128];
  int rc = 0;
  hookd_buf comp;
  hookd_buf_init(&comp, comp_max);
  const hookd_generic_hmac *g = rt->has_generic ? &rt->generic : NULL;
  /* a body holding an integer beyond 64 bits was read with such integers rounded (lossy):
   * values of it cannot key anything (two events would share a key), so neither a composite
   * identity nor a business key is taken from it — the provider's id or the raw bytes' hash is
   * the identity, and it has no business key */
  bool has_id = false;
  int crc = paths && json && !lossy
                ? hookd_in_composite_key(json, paths, &comp, missing, sizeof missing)
                : 1;
  if (crc == HOOKD_BUF_NOMEM) {
    rc = -1;
  } else if (crc == 0) {
    snprintf(kind, 16, "composite");
    rc = hookd_in_sha256_hex(comp.data, comp.len, ident) != 0 ? -1 : 0;
    /* the provider's id is still the record's event id and the forward's header, the link an
     * operator follows back to the provider ("evt_…"), though it does not key anything here */
    char pid[sizeof ident];
    if (set_pid && hookd_in_event_id(op->provider, in, json, g, pid, sizeof pid) == 0)
      hookd_in_display_id(pid, op->provider_event_id, sizeof op->provider_event_id);
  } else if ((has_id = hookd_in_event_id(op->provider, in, json, g, ident, sizeof ident) == 0) &&
             !(lossy && strstr(ident, "\xef\xbf\xbd"))) {
    snprintf(kind, 16, "provider_id");
    if (set_pid) hookd_in_display_id(ident, op->provider_event_id, sizeof op->provider_event_id);
  } else {
    /* no id; or one holding U+FFFD in a body read with its \u0000 and lone surrogate escapes as
     * U+FFFD: ids that differ only there read alike, so the raw bytes' hash keys it (a
     * provider's retry sends the same bytes), the id still shown */
    if (set_pid && has_id)
      hookd_in_display_id(ident, op->provider_event_id, sizeof op->provider_event_id);
    snprintf(kind, 16, "payload_hash");
    snprintf(ident, sizeof ident, "%s", op->payload_hash);
  }
  hookd_buf_free(&comp);
  return rc ? rc : key_of(op, kind, ident, key_out);
}

/* Whether a source of provider p receives requests of this method: POST; VNPay's IPN is a GET,
 * and a Twilio webhook may be configured to be one (its fields in the signed URL's query). The
 * router routes no other method to /in/ (a 405 there). */
static bool gets_too(hookd_provider p) {
  return p == HOOKD_PROVIDER_VNPAY || p == HOOKD_PROVIDER_TWILIO;
}
static bool method_received(hookd_provider p, const char *method) {
  return !strcmp(method, "POST") || (gets_too(p) && !strcmp(method, "GET"));
}

/* 405 with the methods this provider sends (a Stripe source's are not a VNPay source's). */
static void refuse_method(hookd_req *r, hookd_provider p) {
  hookd_req_add_header(r, "Allow", gets_too(p) ? "GET, POST" : "POST");
  hookd_req_error(r, 405, "method_not_allowed", "this source receives %s",
                  gets_too(p) ? "GET or POST" : "POST");
}

void hookd_inbound_wrong_method(hookd_req *r, hookd_app *app, const char *source_id) {
  hookd_source_rt *rt = hookd_source_cache_get(app->sources, source_id);
  if (!rt) {
    hookd_req_error(r, 404, "not_found", "no such source");
    return;
  }
  refuse_method(r, rt->provider);
  hookd_source_rt_release(rt);
}

void hookd_inbound_too_large(hookd_app *app, const char *source_id, const char *method) {
  if (strchr(source_id, '/')) return; /* no route (a 404 otherwise) */
  hookd_source_rt *rt = hookd_source_cache_get(app->sources, source_id);
  if (!rt) return; /* no such source: a 404 otherwise */
  if (!method_received(rt->provider, method)) { /* a 405 otherwise */
    hookd_source_rt_release(rt);
    return;
  }
  count_rejected(app, rt, 413, HOOKD_REJECT_BODY_TOO_LARGE, "request body over --max-body-bytes");
  hookd_source_rt_release(rt);
}

/* A MoMo body past its bound: at the gate on its announced length, in the handler on the bytes
 * a chunked body brought (it announced none). True once answered. */
static bool momo_too_long(hookd_req *r, hookd_app *app, const hookd_source_rt *rt,
                          size_t body_len) {
  /* MoMo signs inside the body: it is parsed before it is verified, on the thread that serves
   * every provider — an unsigned megabyte would cost ~50 ms of it; an IPN is under 2 KiB */
  if (rt->provider != HOOKD_PROVIDER_MOMO || body_len <= MOMO_BODY_MAX) return false;
  reject(app, r, rt->provider, rt, 413, "body_too_large", HOOKD_REJECT_BODY_TOO_LARGE,
         "a MoMo IPN body is at most " HOOKD_STR(MOMO_BODY_MAX) " bytes");
  return true;
}

/* The refusals a request's head decides — its method, content type and coding, a MoMo body's
 * announced length — made at the gate, before a body is held and "100 Continue" asked for a
 * request that cannot succeed. True once answered. */
static bool refused_by_head(hookd_req *r, hookd_app *app, const hookd_source_rt *rt) {
  hookd_provider p = rt->provider;
  const char *method = hookd_req_method(r);
  if (!method_received(p, method)) {
    refuse_method(r, p);
    return true;
  }
  const char *ct = hookd_req_header(r, "Content-Type");
  if (strcmp(method, "GET") != 0 && !content_type_ok(p, ct)) {
    reject(app, r, p, rt, 415, "unsupported_media_type", HOOKD_REJECT_MEDIA_TYPE,
           "content type not sent by this provider");
    return true;
  }
  /* a compressed body would be verified, stored and forwarded as its compressed bytes (the
   * handler told nothing of it: Content-Encoding is not forwarded): no provider sends one */
  const char *coding = hookd_req_header(r, "Content-Encoding");
  size_t coding_len = coding ? strlen(coding) : 0; /* (its trailing blanks cut: scan_header) */
  if (coding_len && !(coding_len == 8 && !strncasecmp(coding, "identity", 8))) {
    reject(app, r, p, rt, 415, "unsupported_media_type", HOOKD_REJECT_MEDIA_TYPE,
           "Content-Encoding is not accepted: send the body uncompressed");
    return true;
  }
  return momo_too_long(r, app, rt, hookd_req_announced(r));
}

bool hookd_inbound_gate(hookd_req *r, hookd_app *app) {
  hookd_source_rt *rt = hookd_source_cache_get(app->sources, hookd_req_param(r, 0));
  if (!rt) {
    hookd_req_error(r, 404, "not_found", "no such source");
    return false;
  }
  /* the verifiers see MAX_IN_HEADERS: a second signature header past them would go unseen
   * ("sent twice" refuses it) — refused on the head, before a body is held for it */
  if (hookd_req_headers(r, NULL, NULL, 0) > MAX_IN_HEADERS) {
    hookd_source_rt_release(rt);
    hookd_req_error(r, 431, "headers_too_large",
                    "more than " HOOKD_STR(MAX_IN_HEADERS)
                    " request headers on a provider's request");
    return false;
  }
  bool refused = refused_by_head(r, app, rt);
  hookd_source_rt_release(rt);
  return !refused;
}

void hookd_inbound_handle(hookd_req *r, hookd_app *app) {
  hookd_source_rt *rt = hookd_source_cache_get(app->sources, hookd_req_param(r, 0));
  if (!rt) {
    hookd_req_error(r, 404, "not_found", "no such source");
    return;
  }
  hookd_provider p = rt->provider;
  recv_op *op = NULL;
  json_t *json = NULL;
  hookd_buf url = {0}; /* the URL the provider called, as signed (Twilio) */
  bool lossy = false; /* an integer beyond 64 bits: the canonical form cannot be trusted */
  const char *method = hookd_req_method(r);
  bool get = !strcmp(method, "GET");
  const char *ct = hookd_req_header(r, "Content-Type");
  size_t body_len;
  const char *body = hookd_req_body(r, &body_len);
  /* (the rest of the head was judged at the gate: hookd_api_gate runs before every handler) */
  if (momo_too_long(r, app, rt, body_len)) goto done;
  if (get && body_len && p == HOOKD_PROVIDER_TWILIO) { /* nothing would sign it */
    reject(app, r, p, rt, 400, "invalid_request", HOOKD_REJECT_INVALID_REQUEST,
           "a GET carries no body");
    goto done;
  }
  /* a Twilio GET is forwarded as the form POST Twilio would have sent: its query */
  bool query_body = get && p == HOOKD_PROVIDER_TWILIO;
  /* Twilio signs its form fields one by one: a form too big to parse is refused as such, not
   * as a bad signature */
  if (p == HOOKD_PROVIDER_TWILIO && (get || hookd_in_is_form(ct))) {
    const char *form = get ? hookd_req_query_string(r) : body;
    if (form && hookd_in_form_too_big(form, get ? strlen(form) : body_len)) {
      reject(app, r, p, rt, 413, "body_too_large", HOOKD_REJECT_BODY_TOO_LARGE,
             "a Twilio form is at most " HOOKD_STR(HOOKD_IN_FORM_MAX_BYTES) " bytes and "
             HOOKD_STR(HOOKD_IN_FORM_MAX_PAIRS) " fields");
      goto done;
    }
  }

  /* the request as the verifiers see it */
  const char *names[MAX_IN_HEADERS], *values[MAX_IN_HEADERS];
  size_t nh = hookd_req_headers(r, names, values, MAX_IN_HEADERS); /* at most: the gate */
  if (nh > MAX_IN_HEADERS) nh = MAX_IN_HEADERS;
  hookd_in_header hdrs[MAX_IN_HEADERS];
  for (size_t i = 0; i < nh; i++) hdrs[i] = (hookd_in_header){names[i], values[i]};
  const char *query = hookd_req_query_string(r);
  /* The URL the provider called, for the one verifier that signs it (Twilio's): whole, however
   * long — MHD bounds the query only by the request head's size, and a cut URL fails. Every
   * other provider's request goes without (nothing built on the receive path for it). */
  size_t qlen = strlen(query);
  if (p == HOOKD_PROVIDER_TWILIO) {
    const char *host = hookd_req_header(r, "Host");
    hookd_buf_init(&url, qlen + strlen(hookd_req_path(r)) + sizeof app->cfg->public_url +
                             (host ? strlen(host) : 0) + 16);
    int urc = app->cfg->public_url[0]
                  ? hookd_buf_printf(&url, "%s%s%s%s", app->cfg->public_url, hookd_req_path(r),
                                     *query ? "?" : "", query)
                  : hookd_buf_printf(&url, "http://%s%s%s%s", host ? host : "localhost",
                                     hookd_req_path(r), *query ? "?" : "", query);
    if (urc) {
      hookd_req_error(r, 503, "unavailable", "out of memory");
      goto done;
    }
  }
  int64_t now_ms = hookd_now_ms(); /* the verifiers' and the secrets' expiry */
  hookd_in_request in = {.method = method,
                         .url = url.data,
                         .query = *query ? query : NULL,
                         .headers = hdrs, .n_headers = nh, .body = body, .body_len = body_len,
                         .now_s = now_ms / 1000};
  /* the source's secrets but those expired (the previous one of a rotation, after its time) */
  const char *live[HOOKD_SOURCE_MAX_SECRETS];
  size_t n_live = 0;
  for (size_t i = 0; i < rt->n_secrets && n_live < HOOKD_SOURCE_MAX_SECRETS; i++)
    if (!rt->secret_expires_ms[i] || rt->secret_expires_ms[i] > now_ms)
      live[n_live++] = rt->secrets[i];
  hookd_in_secrets secrets = {live, n_live};
  if (!n_live) { /* no request can verify: said so, not "signature mismatch" */
    reject(app, r, p, rt, 401, "invalid_signature", HOOKD_REJECT_SIGNATURE_MISMATCH,
           "every secret of this source has expired (PATCH /v1/sources/{id} secrets)");
    goto done;
  }
  hookd_verify_result vr;
  if (hookd_in_verify(p, &in, &secrets, rt->src.tolerance_s,
                      rt->has_generic ? &rt->generic : NULL, &vr) != HOOKD_VERIFY_OK) {
    if (vr.rc == HOOKD_VERIFY_INTERNAL) { /* hookd's own failure, not the request's: retried */
      if (p == HOOKD_PROVIDER_VNPAY)
        reply_vnpay_retry(r);
      else {
        hookd_req_add_header(r, "Retry-After", "1");
        hookd_req_error(r, 503, "unavailable", "out of memory");
      }
      goto done;
    }
    hookd_reject_reason why = vr.rc == HOOKD_VERIFY_STALE    ? HOOKD_REJECT_TIMESTAMP_STALE
                              : vr.rc == HOOKD_VERIFY_FUTURE   ? HOOKD_REJECT_TIMESTAMP_FUTURE
                              : vr.rc == HOOKD_VERIFY_MISMATCH ? HOOKD_REJECT_SIGNATURE_MISMATCH
                                                               : HOOKD_REJECT_SIGNATURE_MALFORMED;
    /* without --public-url Twilio's signed URL is a guess (http://, the Host header): behind
     * a TLS proxy every request fails — the 401 and the log say what to set */
    bool guessed = p == HOOKD_PROVIDER_TWILIO && vr.rc == HOOKD_VERIFY_MISMATCH &&
                   !app->cfg->public_url[0];
    reject(app, r, p, rt, 401, "invalid_signature", why,
           guessed ? "twilio: signature does not match http://{Host}/in/{id} (hookd has no "
                     "--public-url: set it to the URL Twilio calls)"
           : vr.reason[0] ? vr.reason
                          : "signature refused");
    goto done;
  }

  /* The body as JSON, when it is JSON — read from its bytes, which the signature covers, not
   * from Content-Type, which no provider signs: a captured request sent again under another
   * type would otherwise lose its id, composite, business key and version and take another
   * hash, a new key — forwarded twice (docs/inbound.md, "The content type is not signed"). */
  bool json_ct = is_json(ct), json_bytes = body_len && looks_json(body, body_len);
  if (json_bytes && !json_ct && p != HOOKD_PROVIDER_GENERIC && p != HOOKD_PROVIDER_VNPAY) {
    /* a provider that sends a form or XML as well as JSON: none sends JSON under those */
    reject(app, r, p, rt, 400, "invalid_request", HOOKD_REJECT_INVALID_REQUEST,
           is_xml(ct) ? "the body is JSON but its Content-Type says XML"
                      : "the body is JSON but its Content-Type says a form");
    goto done;
  }
  bool body_unread = false; /* too deep to read: its type too, where the body holds it */
  if (body_len && (json_ct || json_bytes)) {
    char err[HOOKD_JSON_ERR_MAX];
    bool too_deep;
    json = hookd_json_parse_body(body, body_len, &app->json_limits, &lossy, &too_deep, err);
    if (!json && !too_deep && ct && !json_ct) {
      /* typed as something else (text/plain) and not JSON after all: kept as bytes */
      lossy = false;
    } else if (too_deep) {
      /* valid or not, deeper than hookd reads (--max-json-depth, which bounds its recursion):
       * a provider signed it, and a 400 would only make it retry until it gives up — kept as
       * bytes, like a body that is not JSON (hashed raw, keyed by a header id or that hash) */
      body_unread = true;
      HLOG(HOOKD_LOG_INFO, "inbound.body_not_read", KV_S("source_id", rt->src.id),
           KV_S("tenant_id", rt->src.tenant_id), KV_S("reason", err));
    } else if (!json && hookd_json_out_of_memory(err)) {
      /* hookd's own failure, not the body's: a 400 is never retried by a provider */
      hookd_req_error(r, 503, "unavailable", "out of memory");
      goto done;
    } else if (!json) { /* jansson's message quotes the body near the error: the provider's
                         * own bytes */
      reject_as(app, r, p, rt, 400, "invalid_json", HOOKD_REJECT_INVALID_JSON, err,
                "invalid JSON body");
      goto done;
    }
  }

  /* handshakes are answered at once and stored nowhere */
  int hs_status = 0;
  hookd_buf hs;
  hookd_buf_init(&hs, 4096);
  /* Zoom's answer is keyed with the secret that verified the request (during a rotation the
   * provider may hold either) */
  hookd_in_secrets matched = {&vr.secret, 1};
  int hs_rc = hookd_in_handshake(p, &in, json, vr.secret ? &matched : &secrets, &hs_status, &hs);
  if (hs_rc < 0) {
    hookd_buf_free(&hs);
    reject(app, r, p, rt, 400, "invalid_request", HOOKD_REJECT_INVALID_REQUEST,
           p == HOOKD_PROVIDER_SLACK
               ? "slack: a url_verification without a challenge string (of 4 KiB at most)"
               : "zoom: an endpoint.url_validation without a plainToken string (of 4 KiB at most)");
    goto done;
  }
  if (hs_rc == 1) {
    HOOKD_INC(inbound_handshakes);
    /* a source being set up (or re-checked by its provider): seen in the log, its token not */
    HLOG(HOOKD_LOG_INFO, "inbound.handshake", KV_S("source_id", rt->src.id),
         KV_S("tenant_id", rt->src.tenant_id), KV_S("provider", rt->src.provider),
         KV_I("status", hs_status));
    size_t n = hs.len;
    if (n) {
      hookd_req_reply(r, hs_status, "application/json", hookd_buf_steal(&hs), n);
    } else {
      hookd_buf_free(&hs);
      hookd_req_reply(r, hs_status, NULL, NULL, 0); /* Discord's webhook PING: 204 */
    }
    goto done;
  }
  hookd_buf_free(&hs);

  if (hookd_dispatcher_clock_outvoted(app->disp)) { /* its times would be this node's clock's */
    HOOKD_INC(inbound_unavailable[HOOKD_UNAVAIL_CLOCK]);
    if (p == HOOKD_PROVIDER_VNPAY) reply_vnpay_retry(r);
    else hookd_api_clock_outvoted(r, app);
    goto done;
  }
  uint64_t depth;
  if (hookd_api_store_behind(app, &depth)) { /* the provider retries */
    HOOKD_INC(inbound_unavailable[HOOKD_UNAVAIL_OVERLOADED]);
    if (p == HOOKD_PROVIDER_VNPAY) reply_vnpay_retry(r);
    else hookd_api_reply_overloaded(r, app, depth); /* 503 + Retry-After */
    goto done;
  }
  op = hookd_api_op_new(sizeof *op, r, app, run_receive, reply_receive);
  if (!op) goto done;
  op->base.cleanup = recv_cleanup;
  op->provider = p;
  op->has_ack = hookd_in_stored_ack(p, &in, json, &op->ack) == 1;
  int64_t now = hookd_now_ms();
  hookd_id_new("in", now, op->inbox_id);
  snprintf(op->source_id, sizeof op->source_id, "%s", rt->src.id);
  snprintf(op->tenant_id, sizeof op->tenant_id, "%s", rt->src.tenant_id);
  snprintf(op->provider_name, sizeof op->provider_name, "%s", hookd_provider_name(p));
  char type[256] = "";
  /* (2: a form too large to read — Slack's — holds the type: unread, as a body too deep) */
  bool form_unread = hookd_in_event_type(p, &in, json, type, sizeof type) == 2;
  header_safe(type, op->event_type, sizeof op->event_type);
  /* a type that is not printable ASCII is no type the allowlist may match ("in\u00e9voice.paid"
   * made "invoice.paid" once its é was left out): unknown, filtered where a list is set */
  if (strcmp(type, op->event_type) != 0) op->event_type[0] = '\0';
  /* a body too deep to read has no type an allowlist could judge (where the body holds it):
   * forwarded, the handler decides — filtered, it was dropped for good (docs/inbound.md) */
  bool type_unread = (body_unread || form_unread) && !op->event_type[0] &&
                     hookd_in_provider_has_type(p);
  if (type_unread && rt->src.event_types)
    HLOG(HOOKD_LOG_WARN, "inbound.body_not_read", KV_S("source_id", rt->src.id),
         KV_S("tenant_id", rt->src.tenant_id), KV_S("type", "unread: forwarded, not filtered"));
  bool filtered = rt->src.event_types && !type_unread &&
                  !hookd_filter_match(rt->src.event_types, op->event_type);

  /* the body forwarded and stored: the raw bytes; VNPay: only what vnp_SecureHash signs.
   * Not built (out of memory): 503 / "99", nothing stored. */
  /* (VNPay's is rebuilt from the query: PHP's urlencode writes a byte as 3 at most) */
  hookd_buf_init(&op->body, p == HOOKD_PROVIDER_VNPAY ? qlen * 3 + 256
                            : query_body              ? qlen + 1
                                                      : app->cfg->max_body_bytes + 1);
  size_t vnp_signed = 0;
  if (p == HOOKD_PROVIDER_VNPAY)
    op->hash_failed |= hookd_in_vnpay_forward(&in, vr.signed_without_empty, &op->body,
                                                &vnp_signed) != 0;
  else if (query_body)
    op->hash_failed |= hookd_buf_append(&op->body, query, strlen(query)) != 0;
  else /* the request's own buffer: held once (body still points into it) */
    hookd_req_body_take(r, &op->body);

  /* payload hash: canonical JSON, else the raw bytes (VNPay: the signed pairs — not the hash
   * fields, whose spelling may differ: a hex digest's case, an optional vnp_SecureHashType; an
   * earlier hookd hashed them too, which is the alternative hash). Canonical numbers
   * take at most 5.25 times their bytes ("1e20" is 21 digits), so the bound never refuses a
   * body; a canonical form that cannot be written is a failure, not a reason to hash other
   * bytes (a retry would then get another identity). */
  hookd_buf canon;
  hookd_buf_init(&canon, app->cfg->max_body_bytes * 6 + 64);
  if (json && !lossy) {
    /* without a member a retry of the same event may carry changed (Stripe's pending_webhooks:
     * a retry was a conflict, and a filtered event re-sent so never promoted — a review); the
     * whole body's hash, an earlier hookd's, is the alternative */
    json_t *steady = NULL;
    const char *volatile_member = hookd_in_volatile_member(p);
    if (volatile_member && json_is_object(json) && json_object_get(json, volatile_member)) {
      steady = json_copy(json); /* (shallow: the members shared, the object its own) */
      op->hash_failed |= !steady || json_object_del(steady, volatile_member) != 0 ||
                         hookd_jcs(json, &canon) != 0 ||
                         hookd_in_sha256_hex(canon.data, canon.len, op->alt_payload_hash) != 0;
      hookd_buf_reset(&canon);
    }
    if (!op->hash_failed && hookd_jcs(steady ? steady : json, &canon) == 0)
      op->hash_failed |= hookd_in_sha256_hex(canon.data, canon.len, op->payload_hash) != 0;
    else
      op->hash_failed = true;
    json_decref(steady);
  } else if (p == HOOKD_PROVIDER_VNPAY) {
    op->hash_failed |= hookd_in_sha256_hex(op->body.data, vnp_signed, op->payload_hash) != 0 ||
                       hookd_in_sha256_hex(op->body.data, op->body.len, op->alt_payload_hash) != 0;
  } else if (p == HOOKD_PROVIDER_TWILIO && (query_body || hookd_in_is_form(ct)) &&
             hookd_in_twilio_form_hash(query_body ? op->body.data : body,
                                       query_body ? op->body.len : body_len,
                                       op->payload_hash) == 0) {
    /* its fields but RetryCount, which a retry changes (a retry was a conflict: a review); the
     * raw bytes' hash, an earlier hookd's, is the alternative (no failure: a form parsed) */
    op->hash_failed |= hookd_in_sha256_hex(query_body ? op->body.data : body,
                                           query_body ? op->body.len : body_len,
                                           op->alt_payload_hash) != 0;
  } else if (query_body)
    op->hash_failed |= hookd_in_sha256_hex(op->body.data, op->body.len, op->payload_hash) != 0;
  else
    op->hash_failed |= hookd_in_sha256_hex(body, body_len, op->payload_hash) != 0;
  hookd_buf_free(&canon);

  /* identity: a configured composite, else the provider's id, else the payload hash — and,
   * while a changed rule's prior one is still looked up, the key under that one too */
  size_t comp_max = app->cfg->max_body_bytes * 6 + 4096;
  op->hash_failed |= identity_under(op, rt, &in, rt->src.identity_paths, json, lossy, comp_max,
                                    op->identity_key, op->identity_kind, true) != 0;
  bool has_prior = rt->src.prior_identity_until_ms > now;
  if (has_prior) {
    char kind[sizeof op->identity_kind];
    op->hash_failed |= identity_under(op, rt, &in, rt->src.prior_identity_paths, json, lossy,
                                      comp_max, op->prior_identity_key, kind, false) != 0;
    /* a rule that keys this event as the current one does looks up nothing more */
    has_prior = strcmp(op->prior_identity_key, op->identity_key) != 0;
  }
  /* a provider's id whose rule changed in hookd itself (hookd_in_legacy_event_id): the key it
   * had before is looked up the same way (unless the source's own prior rule takes the slot) */
  char legacy[1024];
  if (!has_prior && strcmp(op->identity_kind, "composite") != 0 &&
      hookd_in_legacy_event_id(p, &in, json, legacy, sizeof legacy) == 0) {
    op->hash_failed |= key_of(op, "provider_id", legacy, op->prior_identity_key) != 0;
    has_prior = true;
  }
  /* a VNPay IPN without its ids is keyed by its payload hash, which an earlier hookd took with
   * the hash fields: that key too */
  if (!has_prior && op->alt_payload_hash[0] && !strcmp(op->identity_kind, "payload_hash")) {
    op->hash_failed |=
        key_of(op, "payload_hash", op->alt_payload_hash, op->prior_identity_key) != 0;
    has_prior = true;
  }
  hookd_buf comp;
  char missing[128];

  /* business key and object version, when the source declares them */
  bool has_bkey = false, has_version = false, numeric = false;
  /* the business key: for the types its operation is (all, when the rule names none) */
  bool bkey_type = !rt->src.business_types || (op->event_type[0] &&
                                                hookd_filter_match(rt->src.business_types,
                                                                   op->event_type));
  if (rt->src.business_paths && json && !lossy && bkey_type) {
    hookd_buf_init(&comp, comp_max);
    int brc = hookd_buf_printf(&comp, "%s\x1f",
                               rt->src.business_operation ? rt->src.business_operation : "");
    if (!brc) brc = hookd_in_composite_key(json, rt->src.business_paths, &comp, missing,
                                           sizeof missing);
    if (brc == HOOKD_BUF_NOMEM) {
      op->hash_failed = true;
    } else if (brc == 0) {
      op->hash_failed |= hookd_in_sha256_hex(comp.data, comp.len, op->business_key) != 0;
      has_bkey = true;
    }
    hookd_buf_free(&comp);
  } else if (p == HOOKD_PROVIDER_SHOPIFY && !rt->src.business_paths) {
    /* Shopify's duplicate marker is X-Shopify-Event-Id: one event reaches a source under a
     * webhook id per subscription, the event id the same. It keys as a business key (the
     * identity stays the webhook id, constant over retries, as before), with the topic: one
     * event may trigger several topics, each its own webhook to forward. An Events delivery
     * names its subscription's handle (and the action): two subscriptions on one topic, each with
     * its own query and handle to route by, are two deliveries to forward (a provider review:
     * the second was taken for a duplicate); Shopify says to tell their duplicates apart by the
     * webhook id, the identity. Without a handle, the key is as before. */
    const char *eid = hookd_in_shopify_header(&in, "Event-Id");
    const char *topic = hookd_in_shopify_header(&in, "Topic");
    const char *handle = hookd_in_shopify_header(&in, "Handle");
    const char *action = hookd_in_shopify_header(&in, "Action");
    if (handle && !*handle) handle = NULL;
    if (eid && *eid) { /* sized to the headers: a long id must not fail the key (503 for ever) */
      hookd_buf_init(&comp, strlen(eid) + (topic ? strlen(topic) : 0) +
                                (handle ? strlen(handle) : 0) + (action ? strlen(action) : 0) +
                                32);
      op->hash_failed |= hookd_buf_printf(&comp, "shopify-event\x1f%s\x1f%s", topic ? topic : "",
                                          eid) != 0 ||
                         (handle && hookd_buf_printf(&comp, "\x1f%s\x1f%s", handle,
                                                     action ? action : "") != 0) ||
                         hookd_in_sha256_hex(comp.data, comp.len, op->business_key) != 0;
      hookd_buf_free(&comp);
      has_bkey = true;
    }
  }
  if (rt->src.version_object_path && json) {
    const json_t *obj = hookd_json_path(json, rt->src.version_object_path);
    char num[HOOKD_IN_SCALAR_MAX];
    size_t len = 0;
    const char *objtext = obj ? scalar_text(obj, num, &len) : NULL;
    /* a blank id is no object (all blank ones would share its version), nor one read with
     * U+FFFD from a body that was not I-JSON (obj_\ud800 and obj_\udbff read alike) */
    if (objtext && len && !(lossy && memmem(objtext, len, "\xef\xbf\xbd", 3))) {
      /* the object's whole id, hashed with the rule that reads its version: a source whose
       * rule changes starts afresh (a counter read after a date-time's 1.7e9 made every later
       * event of the object stale) */
      hookd_buf okey;
      hookd_buf_init(&okey, len + strlen(rt->src.version_object_path) + 1024);
      op->hash_failed |=
          hookd_buf_printf(&okey, "%s\x1f%s\x1f%s\x1f", rt->src.version_object_path,
                           rt->src.version_path ? rt->src.version_path : "",
                           rt->src.version_header ? rt->src.version_header : "") != 0 ||
          hookd_buf_append(&okey, objtext, len) != 0 ||
          hookd_in_sha256_hex(okey.data, okey.len, op->object_key) != 0;
      hookd_buf_free(&okey);
      if (rt->src.version_header) {
        const char *hv = hookd_in_header_get(&in, rt->src.version_header);
        char safe[sizeof op->version];
        if (hv && strlen(hv) < sizeof safe) {
          header_safe(hv, safe, sizeof safe);
          has_version = version_of(safe, strlen(safe), op->version, sizeof op->version, &numeric);
          /* the header is not signed (Shopify signs the body only): a replayed request could
           * carry a version above any to come and make every later event of the object look
           * stale. A date-time is bounded by now (one in the future is no version); a number
           * has no bound (99999999999999), so a header's version is a date-time or none. */
          int64_t secs;
          char frac[HOOKD_RFC3339_FRAC_MAX];
          bool datetime = hookd_parse_rfc3339_exact(safe, &secs, frac) == 0;
          if (has_version && (!datetime || secs > in.now_s +
                                                      hookd_in_tolerance(rt->src.tolerance_s))) {
            has_version = false;
            if (datetime || !atomic_exchange(&rt->warned_version, true))
              HLOG(HOOKD_LOG_WARN,
                   datetime ? "inbound.version_in_future" : "inbound.version_not_datetime",
                   KV_S("source_id", op->source_id), KV_S("tenant_id", op->tenant_id),
                   KV_S("header", rt->src.version_header));
          }
        }
      } else if (rt->src.version_path) {
        const json_t *ver = hookd_json_path(json, rt->src.version_path);
        const char *vt = ver ? scalar_text(ver, num, &len) : NULL;
        has_version = version_of(vt, len, op->version, sizeof op->version, &numeric);
      }
    }
  }

  /* what the forward carries (the body is op->body, above) */
  hookd_buf_init(&op->meta, 32 * 1024);
  bool form_body = p == HOOKD_PROVIDER_VNPAY || query_body;
  /* as received, whole (a cut could end inside a quoted parameter); one with a byte outside
   * printable ASCII (obs-text), without those bytes */
  op->content_type =
      strdup(ct && !form_body ? ct
             : form_body      ? "application/x-www-form-urlencoded"
                              : "application/octet-stream");
  if (op->content_type && !value_forwardable(op->content_type))
    header_safe(ct, op->content_type, strlen(op->content_type) + 1);
  int mrc = hookd_buf_printf(&op->meta, "hookd-provider: %s\nhookd-source-id: %s\n",
                             op->provider_name, op->source_id);
  if (!mrc && op->event_type[0])
    mrc = hookd_buf_printf(&op->meta, "hookd-event-type: %s\n", op->event_type);
  if (!mrc && op->provider_event_id[0])
    mrc = hookd_buf_printf(&op->meta, "hookd-provider-event-id: %s\n", op->provider_event_id);
  /* then the provider's own headers, whole (what does not fit 32 KiB is left out) */
  const char *conns[MAX_IN_HEADERS];
  size_t nc = 0;
  for (size_t i = 0; i < nh; i++)
    if (!strcasecmp(hdrs[i].name, "Connection")) conns[nc++] = hdrs[i].value;
  for (size_t i = 0; !mrc && i < nh; i++) {
    const char *v = hdrs[i].value ? hdrs[i].value : "";
    if (!forwardable(hdrs[i].name) || hop_listed(conns, nc, hdrs[i].name) ||
        !value_forwardable(v))
      continue;
    /* a generic source's token is the source's secret itself: neither kept nor handed on */
    if (p == HOOKD_PROVIDER_GENERIC && rt->generic.mode != HOOKD_GENERIC_HMAC &&
        !strcasecmp(hdrs[i].name, rt->generic.header))
      continue;
    size_t before = op->meta.len;
    if (hookd_buf_printf(&op->meta, "%s: %s\n", hdrs[i].name, v) != 0) {
      op->meta.len = before; /* no room: this one is left out (not cut short), the next tried */
      op->meta.data[before] = '\0';
    }
  }
  op->hash_failed |= mrc != 0 || !op->content_type; /* out of memory: 503, the provider retries */

  op->rq = (hookd_receive_req){.inbox_id = op->inbox_id,
                               .source_id = op->source_id,
                               .tenant_id = op->tenant_id,
                               .provider = op->provider_name,
                               .identity_key = op->identity_key,
                               .identity_kind = op->identity_kind,
                               .prior_identity_key = has_prior ? op->prior_identity_key : NULL,
                               .provider_event_id =
                                   op->provider_event_id[0] ? op->provider_event_id : NULL,
                               .business_key = has_bkey ? op->business_key : NULL,
                               .event_type = op->event_type,
                               .payload_hash = op->payload_hash,
                               .alt_payload_hash =
                                   op->alt_payload_hash[0] ? op->alt_payload_hash : NULL,
                               .filtered = filtered,
                               .object_key = has_version ? op->object_key : NULL,
                               .version = has_version ? op->version : NULL,
                               .version_numeric = numeric,
                               .body = hookd_buf_str(&op->body),
                               .body_len = op->body.len,
                               .content_type = op->content_type,
                               .meta = hookd_buf_str(&op->meta),
                               .now_ms = now};
  /* the receive's only expected failure (a taken identity) comes before its first write, and
   * run_receive may run twice */
  op->base.sop.flags = HOOKD_STORE_OP_NO_SAVEPOINT;
  hookd_api_submit(&op->base, true);
done:
  hookd_buf_free(&url);
  json_decref(json);
  hookd_source_rt_release(rt);
}

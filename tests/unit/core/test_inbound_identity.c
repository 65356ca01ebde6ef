/* test_inbound_identity.c — event ids, event types, handshakes, JSON paths and composite keys
 * (inbound_identity.c), provider by provider as inbound.h lists them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/inbound.h"

static json_t *J(const char *s) {
  json_error_t e;
  json_t *v = json_loads(s, 0, &e);
  if (!v) fail_msg("parse: %s", e.text);
  return v;
}

static hookd_in_request R(const hookd_in_header *h, size_t n, const char *body) {
  hookd_in_request r = {.method = "POST",
                        .url = "https://hooks.example.com/in",
                        .headers = h,
                        .n_headers = n,
                        .body = body,
                        .body_len = body ? strlen(body) : 0};
  return r;
}

static void event_ids(void **st) {
  char id[128];
  hookd_in_request r = R(NULL, 0, "");
  json_t *b = J("{\"id\":\"evt_123\",\"type\":\"invoice.paid\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_STRIPE, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "evt_123");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_STRIPE, &r, NULL, NULL, id, sizeof id), 1);
  assert_string_equal(id, "");
  /* too small an output: no (truncated) id */
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_STRIPE, &r, b, NULL, id, 4), 1);
  json_decref(b);

  hookd_in_header gh[] = {{"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}};
  r = R(gh, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GITHUB, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "72d3162e-cc78-11e3-81ab-4c9367dc0958");

  hookd_in_header sh[] = {{"X-Shopify-Event-Id", "ev-9"}};
  r = R(sh, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_SHOPIFY, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "ev-9");
  hookd_in_header sh2[] = {{"X-Shopify-Event-Id", "ev-9"}, {"X-Shopify-Webhook-Id", "wh-1"}};
  r = R(sh2, 2, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_SHOPIFY, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "wh-1");
  /* Shopify Events' names, without the X-; an X- one first */
  hookd_in_header sh3[] = {{"shopify-webhook-id", "wh-2"}, {"shopify-topic", "orders/paid"}};
  r = R(sh3, 2, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_SHOPIFY, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "wh-2");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_SHOPIFY, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "orders/paid");
  hookd_in_header sh4[] = {{"Shopify-Webhook-Id", "wh-3"}, {"X-Shopify-Webhook-Id", "wh-4"}};
  r = R(sh4, 2, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_SHOPIFY, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "wh-4");

  hookd_in_header sv[] = {{"svix-id", "msg_2"}};
  r = R(sv, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_STANDARD, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "msg_2");

  b = J(
      "{\"event_id\":\"Ev123\",\"type\":\"event_callback\",\"event\":{\"type\":\"app_mention\"}}");
  r = R(NULL, 0, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_SLACK, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "Ev123");
  json_decref(b);

  b = J("{\"notification_id\":\"ntf_1\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_PADDLE, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "ntf_1");
  json_decref(b);
  b = J("{\"notification_id\":\"ntf_1\",\"event_id\":\"evt_1\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_PADDLE, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "evt_1");
  json_decref(b);

  b = J(
      "{\"event\":\"meeting.started\",\"event_ts\":1700000000123,"
      "\"payload\":{\"object\":{\"id\":85746065432}}}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_ZOOM, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "meeting.started:1700000000123:85746065432");
  json_decref(b);
  /* a participant's event names the participant: two joining in one millisecond are two */
  const char *joins[][2] = {
      {"{\"participant_uuid\":\"P-UUID-1\",\"user_id\":\"16790528\",\"id\":\"\"}", "P-UUID-1"},
      {"{\"user_id\":\"16790529\",\"id\":\"\"}", "16790529"},
      {"{\"participant_uuid\":\"\",\"id\":\"u_3\"}", "u_3"},
      {"{\"user_name\":\"guest\",\"id\":\"\"}", NULL}};
  for (size_t i = 0; i < 4; i++) {
    char body[512], want[128];
    snprintf(body, sizeof body,
             "{\"event\":\"meeting.participant_joined\",\"event_ts\":1700000000123,"
             "\"payload\":{\"object\":{\"id\":\"85746065432\",\"participant\":%s}}}",
             joins[i][0]);
    snprintf(want, sizeof want, "meeting.participant_joined:1700000000123:85746065432%s%s",
             joins[i][1] ? ":" : "", joins[i][1] ? joins[i][1] : "");
    b = J(body);
    assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_ZOOM, &r, b, NULL, id, sizeof id), 0);
    assert_string_equal(id, want);
    json_decref(b);
  }
  /* a registrant's and a chat message's event name them (two registering for one webinar in one
   * millisecond are two: a review); the key before them is the legacy one */
  const char *members[][3] = {
      {"webinar.registration_created", "\"registrant\":{\"id\":\"regA\",\"email\":\"a@x\"}",
       "regA"},
      {"meeting.chat_message_sent", "\"chat_message\":{\"id\":\"c1\",\"message\":\"hi\"}",
       "c1"}};
  for (size_t i = 0; i < 2; i++) {
    char body[512], want[128];
    snprintf(body, sizeof body,
             "{\"event\":\"%s\",\"event_ts\":1700000000123,"
             "\"payload\":{\"object\":{\"id\":98765432100,%s}}}",
             members[i][0], members[i][1]);
    b = J(body);
    snprintf(want, sizeof want, "%s:1700000000123:98765432100:%s", members[i][0], members[i][2]);
    assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_ZOOM, &r, b, NULL, id, sizeof id), 0);
    assert_string_equal(id, want);
    snprintf(want, sizeof want, "%s:1700000000123:98765432100", members[i][0]);
    assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_ZOOM, &r, b, id, sizeof id), 0);
    assert_string_equal(id, want);
    json_decref(b);
  }
  /* a participant's event has no legacy key (its member was keyed from the start) */
  b = J("{\"event\":\"meeting.participant_left\",\"event_ts\":1,"
        "\"payload\":{\"object\":{\"id\":5,\"participant\":{\"user_id\":\"u\"}}}}");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_ZOOM, &r, b, id, sizeof id), 1);
  json_decref(b);
  /* without an object id, event and time are no id (two calls ringing in one millisecond were
   * one event): none, the payload hash keys it; hookd's former id is the legacy one */
  b = J("{\"event\":\"phone.callee_ringing\",\"event_ts\":1700000000123,"
        "\"payload\":{\"object\":{\"call_id\":\"7001\"}}}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_ZOOM, &r, b, NULL, id, sizeof id), 1);
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_ZOOM, &r, b, id, sizeof id), 0);
  assert_string_equal(id, "phone.callee_ringing:1700000000123");
  json_decref(b);
  b = J("{\"event\":\"meeting.started\",\"event_ts\":1,\"payload\":{\"object\":{\"id\":5}}}");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_ZOOM, &r, b, id, sizeof id), 1);
  json_decref(b);
  b = J("{\"event\":\"user.created\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_ZOOM, &r, b, NULL, id, sizeof id), 1);
  json_decref(b);

  hookd_in_header gl[] = {{"Idempotency-Key", "idem-1"}};
  r = R(gl, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "idem-1");
  /* the key GitLab keeps across retries and resends wins over the per-send Event-UUID */
  hookd_in_header gl2[] = {{"Idempotency-Key", "idem-1"}, {"X-Gitlab-Event-UUID", "uuid-1"}};
  r = R(gl2, 2, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "idem-1");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, id, sizeof id), 1);
  /* signed with a signing token: the signed webhook-id (GitLab's is its Idempotency-Key), not
   * the Idempotency-Key a copy of the request could change */
  hookd_in_header gls[] = {{"Idempotency-Key", "changed-2"}, {"webhook-id", "idem-1"},
                           {"webhook-timestamp", "1"}, {"webhook-signature", "v1,x"}};
  r = R(gls, 4, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "idem-1");
  /* older GitLab: the UUID, shared by recursive hooks' distinct events, is no id (the payload
   * hash keys the event); it is the legacy one, which hookd took before */
  hookd_in_header gl3[] = {{"X-Gitlab-Event-UUID", "uuid-1"}};
  r = R(gl3, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, NULL, id, sizeof id), 1);
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_GITLAB, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "uuid-1");

  /* the signed MessageSid, not the token beside it (not signed: a captured request sent again
   * under another token would be a new event); the token is the legacy id, taken first before */
  hookd_in_header tw[] = {{"I-Twilio-Idempotency-Token", "tok-1"}};
  r = R(tw, 1, "MessageSid=SM1&Body=hi");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM1");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "tok-1");
  hookd_in_header tw2[] = {{"I-Twilio-Idempotency-Token", "tok-2"}};
  r = R(tw2, 1, "MessageSid=SM1&Body=hi");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM1");
  /* a Conversations webhook: its events all carry the message's MessageSid, and no id of their
   * own — the hash of its signed fields, sorted and decoded (not the unsigned token: a captured
   * one sent under another token is a duplicate); the token, or else the MessageSid, an earlier
   * hookd took is the legacy */
  char conv1[128], conv2[128];
  r = R(tw, 1, "EventType=onDeliveryUpdated&MessageSid=IM1&Status=read&DeliveryReceiptSid=DY1");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, conv1, sizeof conv1), 0);
  assert_int_equal(strncmp(conv1, "fields:", 7), 0);
  assert_int_equal(strlen(conv1), 7 + 64);
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "tok-1");
  /* the same fields reordered and escaped otherwise, under another token: the same event */
  r = R(tw2, 1, "DeliveryReceiptSid=DY%31&Status=read&MessageSid=IM1&EventType=onDeliveryUpdated");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, conv2, sizeof conv2), 0);
  assert_string_equal(conv2, conv1);
  /* Twilio's retry of it (its RetryCount grows): the same event */
  r = R(tw, 1, "EventType=onDeliveryUpdated&MessageSid=IM1&Status=read&DeliveryReceiptSid=DY1&RetryCount=1");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, conv2, sizeof conv2), 0);
  assert_string_equal(conv2, conv1);
  /* the next receipt of the same message: another event */
  r = R(tw, 1, "EventType=onDeliveryUpdated&MessageSid=IM1&Status=read&DeliveryReceiptSid=DY2");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, conv2, sizeof conv2), 0);
  assert_string_not_equal(conv2, conv1);
  r = R(NULL, 0, "EventType=onDeliveryUpdated&MessageSid=IM1&Status=read&DeliveryReceiptSid=DY1");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, conv2, sizeof conv2), 0);
  assert_string_equal(conv2, conv1);
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "IM1");
  /* a Conversations event as JSON (no form): not its MessageSid, which the message's other
   * events share — its token (JSON may be read lossily: no fields hash), else its payload hash */
  json_t *conv_json = json_pack("{s:s,s:s,s:s}", "EventType", "onMessageUpdated", "MessageSid",
                                "IM1", "Body", "edited");
  hookd_in_header jh[] = {{"I-Twilio-Idempotency-Token", "tok-j"}, {"Content-Type", "application/json"}};
  r = R(jh, 2, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, conv_json, NULL, id, sizeof id), 0);
  assert_string_equal(id, "tok-j");
  r = R(jh + 1, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, conv_json, NULL, id, sizeof id), 1);
  json_decref(conv_json);
  /* a status callback of a call with a token: its call and status, the token the legacy */
  r = R(tw, 1, "CallSid=CA9&CallStatus=ringing&CallbackSource=call-progress-events");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "CA9:ringing");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "tok-1");
  /* a voice webhook names no event: the token keys it (Twilio's retries keep it) */
  r = R(tw, 1, "CallSid=CA1&CallStatus=in-progress&Digits=1");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "tok-1");
  /* a status callback: one per status of the call or message */
  r = R(NULL, 0, "CallSid=CA1&CallStatus=ringing&CallbackSource=call-progress-events");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "CA1:ringing");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 1);
  /* a voice webhook (a <Gather>'s digits): no id, the payload hash keys it; the legacy id is
   * what hookd took before */
  r = R(NULL, 0, "CallSid=CA1&CallStatus=in-progress&Digits=1");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 1);
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 0);
  assert_string_equal(id, "CA1:in-progress");
  r = R(tw, 1, "CallSid=CA1&CallStatus=in-progress&Digits=1");
  assert_int_equal(hookd_in_legacy_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, id, sizeof id), 1);
  r = R(NULL, 0, "MessageStatus=delivered&MessageSid=SM1&SmsStatus=delivered");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM1:delivered");
  /* a GET callback: its query */
  r = R(NULL, 0, NULL);
  r.method = "GET";
  r.url = "https://hooks.example.com/in?CallSid=CA7&From=%2B1555&CallbackSource=x";
  r.query = "CallSid=CA7&From=%2B1555&CallbackSource=x";
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "CA7");
  r = R(NULL, 0, "Body=hi+there&MessageSid=SM%31");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM1");
  r = R(NULL, 0, "Body=hi");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 1);
  /* an id with a NUL byte is no id (it would be truncated) */
  r = R(NULL, 0, "MessageSid=SM1%00x");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 1);
  /* a JSON body (bodySHA256 scheme): the parsed body's member */
  b = J("{\"MessageSid\":\"SM9\"}");
  r = R(NULL, 0, "{\"MessageSid\":\"SM9\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM9");
  json_decref(b);
  /* one too deep to parse (no body given): not read as a form — a text holding
   * "&MessageSid=SMx&" names no id; the payload hash keys it */
  hookd_in_header json_ct[] = {{"Content-Type", "application/json"}};
  r = R(json_ct, 1, "[[[{\"t\":\"a&MessageSid=SMx&b\"}]]]");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 1);
  hookd_in_header form_ct[] = {{"Content-Type", "application/x-www-form-urlencoded"}};
  r = R(form_ct, 1, "Body=hi&MessageSid=SM2");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_TWILIO, &r, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "SM2");

  b = J("{\"id\":\"1190000000000000000\",\"type\":2}");
  r = R(NULL, 0, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_DISCORD, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "1190000000000000000");
  json_decref(b);

  hookd_in_request vr = {.method = "GET",
                         .url = "https://shop.example.com/ipn",
                         .query = "vnp_TxnRef=ORDER5&vnp_Amount=100&vnp_TransactionNo=14226112"};
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_VNPAY, &vr, NULL, NULL, id, sizeof id), 0);
  assert_string_equal(id, "ORDER5:14226112");
  vr.query = "vnp_TxnRef=ORDER5";
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_VNPAY, &vr, NULL, NULL, id, sizeof id), 1);

  b = J("{\"orderId\":\"ORD1\",\"requestId\":\"REQ1\",\"amount\":5}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_MOMO, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "ORD1:REQ1");
  json_decref(b);
  /* the parts' own ':' and '%' are escaped: "A:B" + "C" and "A" + "B:C" are two ids */
  b = J("{\"orderId\":\"A:B\",\"requestId\":\"C%\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_MOMO, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "A%3AB:C%25");
  json_decref(b);
  b = J("{\"orderId\":\"A\",\"requestId\":\"B:C%\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_MOMO, &r, b, NULL, id, sizeof id), 0);
  assert_string_equal(id, "A:B%3AC%25");
  json_decref(b);
  /* escaping counts against the room: 4 bytes + NUL do not hold "A%3A:" */
  b = J("{\"orderId\":\"A:\",\"requestId\":\"B\"}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_MOMO, &r, b, NULL, id, 6), 1);
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_MOMO, &r, b, NULL, id, 7), 0);
  assert_string_equal(id, "A%3A:B");
  json_decref(b);

  hookd_generic_hmac g = {.header = "X-Sig", .id_header = "X-Delivery"};
  hookd_in_header gn[] = {{"x-delivery", "d-77"}};
  r = R(gn, 1, "{}");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GENERIC, &r, NULL, &g, id, sizeof id), 0);
  assert_string_equal(id, "d-77");
  assert_int_equal(hookd_in_event_id(HOOKD_PROVIDER_GENERIC, &r, NULL, NULL, id, sizeof id), 1);
}

static void event_types(void **st) {
  char t[64];
  hookd_in_request r = R(NULL, 0, "{}");
  json_t *b = J("{\"type\":\"invoice.paid\"}");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_STRIPE, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "invoice.paid");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_STANDARD, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "invoice.paid");
  json_decref(b);

  hookd_in_header h[] = {{"X-GitHub-Event", "push"},
                         {"X-Shopify-Topic", "orders/create"},
                         {"X-Gitlab-Event", "Push Hook"}};
  r = R(h, 3, "{}");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_GITHUB, &r, NULL, t, sizeof t), 0);
  assert_string_equal(t, "push");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_SHOPIFY, &r, NULL, t, sizeof t), 0);
  assert_string_equal(t, "orders/create");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_GITLAB, &r, NULL, t, sizeof t), 0);
  assert_string_equal(t, "Push Hook");

  b = J("{\"type\":\"event_callback\",\"event\":{\"type\":\"app_mention\"}}");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_SLACK, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "app_mention");
  json_decref(b);
  b = J("{\"type\":\"url_verification\"}");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_SLACK, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "url_verification");
  json_decref(b);

  b = J("{\"event_type\":\"transaction.completed\",\"event\":\"meeting.ended\",\"type\":2}");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_PADDLE, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "transaction.completed");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_ZOOM, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "meeting.ended");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_DISCORD, &r, b, t, sizeof t), 0);
  assert_string_equal(t, "2");
  json_decref(b);

  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_VNPAY, &r, NULL, t, sizeof t), 0);
  assert_string_equal(t, "payment");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_MOMO, &r, NULL, t, sizeof t), 0);
  assert_string_equal(t, "payment");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_TWILIO, &r, NULL, t, sizeof t), 1);
  assert_string_equal(t, "");
  assert_int_equal(hookd_in_event_type(HOOKD_PROVIDER_STRIPE, &r, NULL, t, sizeof t), 1);
}

static void handshakes(void **st) {
  hookd_buf out;
  hookd_buf_init(&out, 4096);
  int status = 0;
  hookd_in_request r = R(NULL, 0, "{}");
  const char *zs[] = {"zoom_test_secret_token"};
  hookd_in_secrets secrets = {zs, 1};

  json_t *b = J(
      "{\"token\":\"x\",\"challenge\":\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\","
      "\"type\":\"url_verification\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_SLACK, &r, b, NULL, &status, &out), 1);
  assert_int_equal(status, 200);
  assert_string_equal(hookd_buf_str(&out),
                      "{\"challenge\":\"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P\"}");
  /* the same body is no handshake for another provider */
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_STRIPE, &r, b, NULL, &status, &out), 0);
  json_decref(b);
  b = J("{\"type\":\"event_callback\",\"challenge\":\"x\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_SLACK, &r, b, NULL, &status, &out), 0);
  json_decref(b);

  /* printf '%s' 'qgg8vlvZRS6UYooatFL8Aw' | openssl dgst -sha256 -hmac 'zoom_test_secret_token' */
  b =
      J("{\"payload\":{\"plainToken\":\"qgg8vlvZRS6UYooatFL8Aw\"},\"event_ts\":1654503849680,"
        "\"event\":\"endpoint.url_validation\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_ZOOM, &r, b, &secrets, &status, &out), 1);
  assert_int_equal(status, 200);
  assert_string_equal(hookd_buf_str(&out),
                      "{\"plainToken\":\"qgg8vlvZRS6UYooatFL8Aw\",\"encryptedToken\":"
                      "\"8d4dd13bef79e3935d4da689b9e1bb2f36cd7182ef1655edf4b46b51d8119c93\"}");
  /* a handshake that cannot be answered (no secret to key it, no token, a token past the
   * answer's bound) is one to refuse, not an event (-1) */
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_ZOOM, &r, b, NULL, &status, &out), -1);
  json_decref(b);
  b = J("{\"payload\":{\"plainToken\":7},\"event\":\"endpoint.url_validation\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_ZOOM, &r, b, &secrets, &status, &out), -1);
  json_decref(b);
  b = J("{\"type\":\"url_verification\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_SLACK, &r, b, NULL, &status, &out), -1);
  json_decref(b);
  char big[6000];
  snprintf(big, sizeof big, "{\"type\":\"url_verification\",\"challenge\":\"%05000d\"}", 0);
  b = J(big);
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_SLACK, &r, b, NULL, &status, &out), -1);
  json_decref(b);

  b = J("{\"type\":1,\"id\":\"1\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_DISCORD, &r, b, NULL, &status, &out), 1);
  assert_string_equal(hookd_buf_str(&out), "{\"type\":1}");
  json_decref(b);
  b = J("{\"type\":2,\"id\":\"1\"}");
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_DISCORD, &r, b, NULL, &status, &out), 0);
  json_decref(b);
  assert_int_equal(hookd_in_handshake(HOOKD_PROVIDER_DISCORD, &r, NULL, NULL, &status, &out), 0);
  hookd_buf_free(&out);
}

static void paths(void **st) {
  json_t *b =
      J("{\"data\":{\"object\":{\"id\":\"pi_1\",\"n\":3,\"ref\":\"\"}},"
        "\"items\":[{\"id\":7},{\"id\":8}],\"a.b\":1}");
  assert_string_equal(json_string_value(hookd_json_path(b, "data.object.id")), "pi_1");
  assert_int_equal(json_integer_value(hookd_json_path(b, "items.1.id")), 8);
  assert_ptr_equal(hookd_json_path(b, ""), b);
  assert_null(hookd_json_path(b, "items.2.id"));
  assert_null(hookd_json_path(b, "items.01.id"));
  assert_null(hookd_json_path(b, "items.x"));
  assert_null(hookd_json_path(b, "data..object"));
  assert_null(hookd_json_path(b, "data.object.id.more"));
  assert_null(hookd_json_path(b, "nope"));
  assert_null(hookd_json_path(NULL, "a"));

  hookd_buf out;
  hookd_buf_init(&out, 1024);
  char missing[32];
  assert_int_equal(hookd_in_composite_key(b, "data.object.id, items.0.id,data.object.n", &out,
                                          missing, sizeof missing),
                   0);
  assert_string_equal(hookd_buf_str(&out), "data.object.id=\"pi_1\"|items.0.id=7|data.object.n=3");
  hookd_buf_reset(&out);
  assert_int_equal(hookd_in_composite_key(b, "data.object.id,data.object.missing", &out, missing,
                                          sizeof missing),
                   1);
  assert_string_equal(missing, "data.object.missing");
  hookd_buf_reset(&out);
  assert_int_equal(hookd_in_composite_key(b, "data.object", &out, missing, sizeof missing), 1);
  assert_string_equal(missing, "data.object");
  hookd_buf_reset(&out);
  /* a blank field is missing: keyed by it, every event blank there would be one event */
  assert_int_equal(hookd_in_composite_key(b, "data.object.id,data.object.ref", &out, missing,
                                          sizeof missing),
                   1);
  assert_string_equal(missing, "data.object.ref");
  hookd_buf_reset(&out);
  assert_int_equal(
      hookd_in_composite_key(b, "data.object.id,,items", &out, missing, sizeof missing), 1);
  assert_string_equal(missing, "");
  /* a key that cannot be written is not a missing field (no fallback to another identity) */
  hookd_buf tiny;
  hookd_buf_init(&tiny, 8);
  assert_int_equal(hookd_in_composite_key(b, "data.object.id", &tiny, missing, sizeof missing),
                   HOOKD_BUF_TOOBIG);
  hookd_buf_free(&tiny);
  json_decref(b);
  hookd_buf_free(&out);
  /* a provider's id as records show it: bytes beyond printable ASCII as %XX, cut before an
   * escape that does not fit */
  char shown[12];
  hookd_in_display_id("evt_\xc3\xb1\x01", shown, sizeof shown);
  assert_string_equal(shown, "evt_%C3%B1");
  hookd_in_display_id("evt_a%20", shown, sizeof shown);
  assert_string_equal(shown, "evt_a%20");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(event_ids),
      cmocka_unit_test(event_types),
      cmocka_unit_test(handshakes),
      cmocka_unit_test(paths),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}

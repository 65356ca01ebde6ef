// providers.mjs — sign requests the way each provider does, for black-box tests of the inbound
// receive path. Written from the providers' documented algorithms with node:crypto, independent
// of hookd's C verifiers.
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';

const hmac = (alg, key, data, enc = 'hex') => createHmac(alg, key).update(data).digest(enc);

// Stripe-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "t.body")> (several v1 during rotation)
export function stripe(body, secrets, ts = Math.floor(Date.now() / 1000)) {
  const sigs = (Array.isArray(secrets) ? secrets : [secrets]).map((s) => `v1=${hmac('sha256', s, `${ts}.${body}`)}`);
  return { 'Content-Type': 'application/json', 'Stripe-Signature': [`t=${ts}`, ...sigs].join(',') };
}

export function github(body, secret, delivery, event = 'push') {
  return { 'Content-Type': 'application/json', 'X-GitHub-Event': event, 'X-GitHub-Delivery': delivery,
    'X-Hub-Signature-256': `sha256=${hmac('sha256', secret, body)}` };
}

export function slack(body, secret, ts = Math.floor(Date.now() / 1000)) {
  return { 'Content-Type': 'application/json', 'X-Slack-Request-Timestamp': String(ts),
    'X-Slack-Signature': `v0=${hmac('sha256', secret, `v0:${ts}:${body}`)}` };
}

export function standard(body, secret, id, ts = new Date()) {
  const sig = new Webhook(secret).sign(id, ts, body);
  return { 'Content-Type': 'application/json', 'webhook-id': id,
    'webhook-timestamp': String(Math.floor(ts.getTime() / 1000)), 'webhook-signature': sig };
}

// VNPay IPN: GET with vnp_ params; vnp_SecureHash = hex HMAC-SHA512 over the sorted params,
// each urlencode(k)=urlencode(v) as PHP's urlencode does (space as '+').
const phpEncode = (s) => encodeURIComponent(s).replace(/%20/g, '+').replace(/[!'()*~]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase());
export function vnpayQuery(params, secret) {
  const keys = Object.keys(params).filter((k) => k.startsWith('vnp_')).sort();
  const data = keys.map((k) => `${phpEncode(k)}=${phpEncode(params[k])}`).join('&');
  return `${data}&vnp_SecureHash=${hmac('sha512', secret, data)}`;
}

// MoMo IPN: signature = hex HMAC-SHA256(secretKey, "accessKey=…&amount=…&…") in field order.
export function momoBody(fields, accessKey, secretKey) {
  const order = ['accessKey', 'amount', 'extraData', 'message', 'orderId', 'orderInfo', 'orderType',
    'partnerCode', 'payType', 'requestId', 'responseTime', 'resultCode', 'transId'];
  const all = { accessKey, ...fields };
  const raw = order.map((k) => `${k}=${all[k] ?? ''}`).join('&');
  return JSON.stringify({ ...fields, signature: hmac('sha256', secretKey, raw) });
}

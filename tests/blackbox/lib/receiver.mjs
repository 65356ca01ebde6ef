// receiver.mjs — webhook receivers on loopback with controllable behaviour, recording every
// request, and verifying every signature with the standardwebhooks reference library.
import http from 'node:http';
import { after } from 'node:test';
import { Webhook } from 'standardwebhooks';

// behave(req, n) → { status, headers, body, delayMs } | 'hang' | 'drop' | 'drop-after-read'
// Receivers a failed test left open are closed once the file's tests are done (2 s later, after
// the file's own `after` hooks), so that they do not keep the test process (and CI) waiting.
const live = new Set();
let hangSeq = 0; // the order requests began to hang in, across receivers
after(() => { setTimeout(() => { for (const r of [...live]) r.close(); }, 2000).unref(); });

function answerHung(res, status) {
  try { res.writeHead(status); res.end('ok'); } catch { /* closed */ }
}

// maxHeaderSize: the request head node accepts (its default is 16 KiB; 431 beyond)
export async function startReceiver(behave = () => ({ status: 200 }),
  { host = '127.0.0.1', maxHeaderSize } = {}) {
  const r = new Receiver(behave, maxHeaderSize);
  live.add(r);
  await new Promise((resolve) => r.server.listen(0, host, resolve));
  r.port = r.server.address().port;
  r.url = `http://${host}:${r.port}/hook`;
  return r;
}

class Receiver {
  constructor(behave, maxHeaderSize) {
    this.behave = behave;
    this.requests = [];
    this.open = 0;       // requests not answered or closed yet
    this.maxOpen = 0;    // the most that were open at once
    this.waiters = [];
    this.hanging = [];
    this.sockets = new Set();
    this.server = http.createServer(maxHeaderSize ? { maxHeaderSize } : {},
      (req, res) => this.onRequest(req, res));
    this.server.on('connection', (s) => { this.sockets.add(s); s.on('close', () => this.sockets.delete(s)); });
  }

  onRequest(req, res) {
    this.open++;
    if (this.open > this.maxOpen) this.maxOpen = this.open;
    res.on('close', () => { this.open--; });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      // remotePort: which of hookd's connections carried it (a new one, or one kept alive)
      const rec = { n: this.requests.length + 1, at: Date.now(), method: req.method, url: req.url, headers: req.headers, body,
        remotePort: req.socket.remotePort };
      this.requests.push(rec);
      const b = this.behave(rec, rec.n);
      if (b === 'hang') { res.hangSeq = hangSeq++; this.hanging.push(res); }
      else if (b === 'drop' || b === 'drop-after-read') { req.socket.destroy(); }
      else {
        const answer = () => { res.writeHead(b.status ?? 200, b.headers ?? {}); res.end(b.body ?? 'ok'); };
        if (b.delayMs) setTimeout(answer, b.delayMs); else answer(); // delayMs: a slow answer
      }
      this.waiters = this.waiters.filter((w) => { if (w.pred(this)) { w.resolve(this.requests); return false; } return true; });
    });
  }

  // Resolves when pred(receiver) holds (checked on every request); bounded.
  waitFor(pred, timeout = 15000, what = 'receiver requests') {
    if (typeof pred === 'number') { const n = pred; pred = (r) => r.requests.length >= n; }
    if (pred(this)) return Promise.resolve(this.requests);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (v) => { clearTimeout(t); resolve(v); } };
      const t = setTimeout(() => { this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`${what}: timed out after ${timeout} ms with ${this.requests.length} requests`)); }, timeout);
      t.unref();
      this.waiters.push(w);
    });
  }

  // Verifies a recorded request with the Standard Webhooks reference library; throws if invalid.
  verify(rec, secret) {
    const wh = new Webhook(secret);
    return wh.verify(rec.body, {
      'webhook-id': rec.headers['webhook-id'],
      'webhook-timestamp': rec.headers['webhook-timestamp'],
      'webhook-signature': rec.headers['webhook-signature'],
    });
  }

  // Answers the request that has hung the longest (its hangSeq orders it among receivers);
  // resolves once the answer is out (open counts it no more).
  releaseFirst(status = 200) {
    const res = this.hanging.shift();
    const closed = new Promise((resolve) => { if (res.closed) resolve(); else res.once('close', resolve); });
    answerHung(res, status);
    return closed;
  }

  releaseHanging(status = 200) {
    for (const res of this.hanging.splice(0)) answerHung(res, status);
  }

  async close() {
    if (!live.delete(this)) return; /* closed already */
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

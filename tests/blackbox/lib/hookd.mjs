// hookd.mjs — start a real hookd daemon for a test, talk to its API, stop or kill it.
// The daemon listens on 127.0.0.1 with port 0; the port is read from its "listening" log line.
// Every wait is bounded; nothing sleeps as synchronisation.
import { spawn, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after } from 'node:test';

export const HOOKD_BIN = process.env.HOOKD_BIN || new URL('../../../build/hookd', import.meta.url).pathname;
export const API_KEY = 'test-admin-key-0001';

// Options every test daemon gets: loopback receivers allowed, http, any port, fast retries.
export const TEST_ARGS = [
  '--egress-allow', '127.0.0.0/8', '--allow-http', '--egress-ports', 'any',
  '--retry-base-ms', '100', '--retry-cap-ms', '400', '--log-level', 'debug',
];

// Every daemon a test starts dies with the test file, even when a test fails before it could
// stop it: no orphan keeps retrying in the background, and no live daemon keeps the test process
// (and CI) waiting after a failure. Once the file's tests are done, pass or fail, a daemon still
// running 2 s later (after the file's own `after` hooks have stopped theirs) is killed; the timer
// is unref'd, so it never holds the process open by itself.
const children = new Set();
const killAll = () => { for (const p of children) { try { p.kill('SIGKILL'); } catch { /* gone */ } } };
process.on('exit', killAll);
after(() => { setTimeout(killAll, 2000).unref(); });

// HOOKD_TEST_STORE=postgres runs the daemons of a test file on PostgreSQL stores
// (docs/postgres.md: `make test-postgres`): one private server per file (lib/postgres.mjs), one
// database per daemon directory (a restart on the same directory finds its store again), with
// the node id and master key a shared store needs, the same at each restart.
const PG_MODE = process.env.HOOKD_TEST_STORE === 'postgres';
let pgServer = null;
const pgStores = new Map();
// A test's `skip` option where it reads or breaks the SQLite file itself (docs/postgres.md "Tests").
export const SQLITE_ONLY = PG_MODE && 'reads or breaks the SQLite store itself';
// Where a node's wall clock steps away from the database's by more than the clock guard's bound:
// on a shared store the node then holds its claims until its clock agrees again (docs/postgres.md
// "The clock guard"), instead of going on as one node alone does (docs/architecture.md "Clocks").
// a store other nodes share (PostgreSQL): a start leaves its node id's leases to run out
export const SHARED_STORE = PG_MODE;
export const ONE_NODE_CLOCK = PG_MODE && 'a shared store holds a node whose clock steps away from the database\'s';
// The server stops once the file's daemons have exited: this hook runs before the file's own
// `after` hooks (registered later), which may still stop a daemon that drains into its store.
// (At the file's top level: an `after` registered inside a hook runs when that hook ends.)
if (PG_MODE) {
  after(() => {
    const exited = (p) => new Promise((r) => (p.exitCode !== null || p.signalCode !== null ? r() : p.once('exit', r)));
    const bound = new Promise((r) => { setTimeout(r, 30000).unref(); });
    Promise.race([Promise.all([...children].map(exited)), bound])
      .then(async () => { if (pgServer) await (await pgServer).stop(); });
  });
}
async function pgStore(dir, args, env) {
  if (!pgServer) {
    const { startPostgres } = await import('./postgres.mjs');
    pgServer = startPostgres();
  }
  const server = await pgServer;
  if (!pgStores.has(dir)) {
    pgStores.set(dir, { url: await server.database(), node: `node-${pgStores.size + 1}`,
      key: randomBytes(32).toString('base64') });
  }
  const s = pgStores.get(dir);
  const keyGiven = 'HOOKD_MASTER_KEY' in env || args.includes('--master-key-file');
  return {
    store: s.url,
    args: args.includes('--node-id') ? args : ['--node-id', s.node, ...args],
    env: keyGiven ? env : { HOOKD_MASTER_KEY: s.key, ...env },
  };
}

// Every directory made is removed when the test file's process exits (after its daemons are
// killed), cleaned up by its test or not; HOOKD_TEST_KEEP_TMP=1 keeps them for a post-mortem.
const madeDirs = new Set();
process.on('exit', () => {
  if (process.env.HOOKD_TEST_KEEP_TMP === '1') return;
  for (const d of madeDirs) { try { rmSync(d, { recursive: true, force: true }); } catch { /* busy */ } }
});
export function tempDir(prefix = 'hookd-test-') {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  madeDirs.add(dir);
  return { dir, cleanup: () => { rmSync(dir, { recursive: true, force: true }); madeDirs.delete(dir); } };
}

// The fault-injection shim (tests/blackbox/fixtures/faultfs.c), built next to hookd: with
// faultDisk() a daemon's store writes fail with ENOSPC (or EFBIG) while the returned flag file
// exists. Sanitizer runtimes want to be first in the library list; this one only intercepts
// writes, so that check is turned off for it.
export const FAULTFS = process.env.HOOKD_FAULTFS || join(dirname(HOOKD_BIN), 'libhookd_faultfs.so');
function faultEnv(vars) {
  const asan = process.env.ASAN_OPTIONS ? `${process.env.ASAN_OPTIONS}:` : '';
  return { LD_PRELOAD: FAULTFS, ASAN_OPTIONS: `${asan}verify_asan_link_order=0`, ...vars };
}
// errno 'SLOW' (with slowMs): the writes succeed, each after slowMs, while filled. suffix: only
// the writes to the file whose name ends so ('.db': the database, not its WAL — checkpoints).
export function faultDisk(dir, errno = 'ENOSPC', slowMs = 0, suffix = '') {
  const flag = join(dir, 'disk-full');
  return {
    env: faultEnv({ HOOKD_FAULT_FLAG: flag, HOOKD_FAULT_ERRNO: errno, HOOKD_FAULT_SLOW_MS: String(slowMs),
      HOOKD_FAULT_SUFFIX: suffix }),
    fill: () => writeFileSync(flag, ''),
    free: () => rmSync(flag, { force: true }),
  };
}
// A file system without hard links: link() fails with EPERM.
export function faultNoLink() {
  return faultEnv({ HOOKD_FAULT_NOLINK: '1' });
}
// A slow name server for one hostname of the test's own: it resolves to 127.0.0.1, after ms
// milliseconds once slow() is called (at once before, and after fast()). ms 'EAI_AGAIN' or
// 'EAI_FAIL': the lookup fails so instead while slow (a name server not answering, failing).
export function faultDns(dir, name, ms) {
  const flag = join(dir, 'dns-slow');
  return {
    env: faultEnv({ HOOKD_FAULT_DNS: `${name}=${ms}`, HOOKD_FAULT_DNS_FLAG: flag }),
    slow: () => writeFileSync(flag, ''),
    fast: () => rmSync(flag, { force: true }),
  };
}

// Loopback only: a connect() off the machine fails, and its address is recorded — offMachine()
// lists what was tried (none expected).
export function faultLoopbackOnly(dir) {
  const file = join(dir, 'off-machine');
  return {
    env: faultEnv({ HOOKD_FAULT_LOOPBACK_ONLY: file }),
    offMachine: () => (existsSync(file) ? readFileSync(file, 'utf8').split('\n').filter(Boolean) : []),
  };
}

// A wall clock that steps (docs/architecture.md "Clocks"): step(ms) sets it ms ahead of the
// real one (behind when negative), seen by hookd within 20 ms; the monotonic clock never moves.
export function faultClock(dir) {
  const file = join(dir, 'clock-offset-ms');
  writeFileSync(file, '0');
  return {
    env: faultEnv({ HOOKD_FAULT_CLOCK: file }),
    step: (ms) => writeFileSync(file, String(ms)),
  };
}

// wrap: a command that execs hookd in its own place (same pid), e.g. ['prlimit', '--nofile=256:8192']
// store: a store URL instead of the directory's SQLite file (a PostgreSQL database: postgres.mjs).
// until: the log line that says it has started ('startup.bound': only its listener, before the
// store is open; it has the port too).
export async function startHookd({ dir, args = [], env = {}, apiKey = API_KEY, testArgs = TEST_ARGS, wrap = [], store, until = 'listening' } = {}) {
  const ownDir = !dir;
  if (!dir) dir = tempDir().dir;
  const db = join(dir, 'hookd.db');
  if (PG_MODE && !store && !args.includes('--store')) ({ store, args, env } = await pgStore(dir, args, env));
  const argv = ['serve', '--listen', '127.0.0.1:0', '--store', store ?? `sqlite:${db}`,
                ...(apiKey ? ['--api-key', apiKey] : []), ...testArgs, ...args];
  const [cmd, ...pre] = wrap.length ? [...wrap, HOOKD_BIN] : [HOOKD_BIN];
  const proc = spawn(cmd, [...pre, ...argv], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(proc);
  proc.on('exit', () => children.delete(proc));
  const h = new Hookd(proc, dir, db, apiKey, ownDir);
  h.store = store ?? `sqlite:${db}`; // the URL its CLI commands take
  h.storeEnv = env.HOOKD_MASTER_KEY ? { HOOKD_MASTER_KEY: env.HOOKD_MASTER_KEY } : {};
  const exitedEarly = h.exited.then(({ code, signal }) => {
    throw new Error(`hookd did not start: exited (code ${code}, signal ${signal})\n${h.stderrText.slice(-2000)}`);
  });
  await Promise.race([h.waitForLog((l) => l.msg === until, 20000, 'hookd did not start'), exitedEarly]);
  exitedEarly.catch(() => {}); // a later exit is the test's business
  h.port = h.logs.find((l) => l.msg === until).port;
  h.url = `http://127.0.0.1:${h.port}`;
  return h;
}

class Hookd {
  constructor(proc, dir, db, apiKey, ownDir) {
    this.proc = proc; this.dir = dir; this.db = db; this.apiKey = apiKey; this.ownDir = ownDir;
    this.logs = []; this.stdout = ''; this.stderrText = ''; this.waiters = [];
    this.exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    let buf = '';
    proc.stdout.on('data', (d) => { this.stdout += d; });
    proc.stderr.on('data', (d) => {
      this.stderrText += d;
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i); buf = buf.slice(i + 1);
        let obj = null;
        try { obj = JSON.parse(line); } catch { obj = { msg: '(non-json)', line }; }
        this.logs.push(obj);
        this.waiters = this.waiters.filter((w) => { if (w.pred(obj)) { w.resolve(obj); return false; } return true; });
      }
    });
  }

  waitForLog(pred, timeout = 10000, what = 'log line') {
    const found = this.logs.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve: (v) => { clearTimeout(t); resolve(v); } };
      const t = setTimeout(() => { this.waiters = this.waiters.filter((x) => x !== w);
        reject(new Error(`${what}: timed out after ${timeout} ms\n${this.stderrText.slice(-3000)}`)); }, timeout);
      t.unref(); // a wait that lost a race must not keep the test process alive
      this.waiters.push(w);
    });
  }

  async api(method, path, body, headers = {}) {
    const h = { ...headers };
    if (this.apiKey && !('Authorization' in h)) h.Authorization = `Bearer ${this.apiKey}`;
    let payload;
    if (body !== undefined) { payload = typeof body === 'string' ? body : JSON.stringify(body); h['Content-Type'] ??= 'application/json'; }
    let res;
    try {
      res = await fetch(this.url + path, { method, headers: h, body: payload });
    } catch (e) { // name the socket's error and show what hookd said last
      const c = e.cause ? ` (${e.cause.code ?? ''} ${e.cause.message ?? ''})` : '';
      throw new Error(`${method} ${path}: ${e.message}${c}\n${this.stderrText.slice(-2000)}`, { cause: e });
    }
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* not JSON */ }
    return { status: res.status, headers: res.headers, json, text };
  }

  // Graceful stop: SIGTERM, then the exit status (must be 0 for a clean shutdown).
  // Another process takes the store's write lock (hookd's writer then waits out its busy
  // timeout and fails); resolves once it holds it, to a release(sql = 'ROLLBACK') that ends it.
  async lockStore() {
    const p = spawn('sqlite3', [this.db], { stdio: ['pipe', 'pipe', 'inherit'] });
    children.add(p);
    p.on('exit', () => children.delete(p));
    let out = '';
    await new Promise((resolve, reject) => {
      p.stdout.on('data', (b) => { out += b; if (out.includes('locked')) resolve(); });
      p.on('exit', () => reject(new Error('sqlite3 could not take the write lock')));
      // .timeout: hookd may be writing at that moment (without it BEGIN failed at once, the
      // SELECT still ran, and the caller went on without the lock); .bail: never "locked"
      // without the lock
      p.stdin.write(".timeout 10000\n.bail on\nBEGIN IMMEDIATE;\nSELECT 'locked';\n");
    });
    return async (sql = 'ROLLBACK') => {
      const exited = new Promise((resolve) => p.on('exit', resolve));
      p.stdin.end(`${sql};\n`);
      await exited;
    };
  }

  async stop() {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.exited;
    this.proc.kill('SIGTERM');
    const r = await withTimeout(this.exited, 30000, 'hookd did not exit after SIGTERM').catch((e) => {
      // what it was doing: its last log lines and every thread's stack, then it is killed
      let stacks = '';
      try {
        stacks = execFileSync('gdb', ['-p', String(this.proc.pid), '-batch', '-ex', 'thread apply all bt 12'],
          { encoding: 'utf8', timeout: 30000, stdio: ['ignore', 'pipe', 'ignore'] });
      } catch { /* no gdb */ }
      console.error(`${e.message}: its last logs:\n${this.logs.slice(-40).map((l) => JSON.stringify(l)).join('\n')}\n${stacks}`);
      this.proc.kill('SIGKILL');
      throw e;
    });
    if (r.code !== 0) console.error(`hookd exited with ${r.code}:\n${this.stderrText.slice(-6000)}`);
    if (this.ownDir) rmSync(this.dir, { recursive: true, force: true });
    return r;
  }

  async kill9() {
    this.proc.kill('SIGKILL');
    return withTimeout(this.exited, 10000, 'hookd did not die');
  }

  // Reads the SQLite store directly (the daemon may be dead): sqlite3 CLI, JSON rows. A live
  // daemon's writer may hold the lock for a commit: waited for (5 s), as the daemon's own
  // connections do, instead of failing at once with "database is locked".
  // SQL spelt for the store's own database: a blob literal from hex, a blob column as upper hex.
  sqlBlob(hex) { return this.store?.startsWith('postgresql://') ? `'\\x${hex}'::bytea` : `X'${hex}'`; }
  sqlHex(col) { return this.store?.startsWith('postgresql://') ? `upper(encode(${col}, 'hex'))` : `hex(${col})`; }

  // On a PostgreSQL store (HOOKD_TEST_STORE=postgres) the same SQL goes to its database through
  // psql: a query's rows as JSON (bytea columns as "\\x…" text), a statement's none.
  query(sql) {
    if (this.store?.startsWith('postgresql://')) {
      const q = sql.trim().replace(/;$/, '');
      const rows = /^(select|with)\b/i.test(q);
      const out = execFileSync('psql', [this.store, '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-c',
        rows ? `SELECT COALESCE(json_agg(q), '[]') FROM (${q}) q` : q], { encoding: 'utf8' });
      return rows ? JSON.parse(out) : [];
    }
    const out = execFileSync('sqlite3', ['-json', '-cmd', '.timeout 5000', this.db, sql], { encoding: 'utf8' });
    return out.trim() ? JSON.parse(out) : [];
  }
}

export function withTimeout(promise, ms, what) {
  let t;
  return Promise.race([promise.finally(() => clearTimeout(t)),
    new Promise((_, reject) => { t = setTimeout(() => reject(new Error(`${what} (after ${ms} ms)`)), ms); })]);
}

// Polls an async condition until it returns a truthy value; bounded. Use for API state that has
// no push notification (a delivery's state), never as a fixed sleep.
// Resolves once every thread of process pid is stopped (after a SIGSTOP: a stop takes a while
// to reach each thread of a loaded process, and one still running may read an answer or commit).
export function waitStopped(pid, what = 'the process stopped') {
  const tasks = readdirSync(`/proc/${pid}/task`);
  return waitUntil(() => tasks.every((t) => {
    try {
      return /\) (\S) /.exec(readFileSync(`/proc/${pid}/task/${t}/stat`, 'utf8'))[1] === 'T';
    } catch { return true; } // (a thread gone)
  }), { what, timeout: 10000, interval: 1 });
}

export async function waitUntil(fn, { timeout = 10000, interval = 25, what = 'condition' } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeout} ms (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, interval));
  }
}

// Creates a tenant and an endpoint for url; returns {tenant, endpoint, secret}.
export async function setup(h, url, endpointFields = {}, tenant = `t${Math.random().toString(36).slice(2, 10)}`) {
  const t = await h.api('POST', '/v1/tenants', { id: tenant, name: tenant });
  if (t.status !== 201) throw new Error(`tenant create: ${t.status} ${t.text}`);
  const e = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, { url, ...endpointFields });
  if (e.status !== 201) throw new Error(`endpoint create: ${e.status} ${e.text}`);
  return { tenant, endpoint: e.json.id, secret: e.json.secret, ep: e.json };
}

// n endpoints of tenant with these fields, 50 created at a time.
export async function makeEndpoints(h, tenant, n, fields) {
  for (let i = 0; i < n; i += 50) {
    await Promise.all(Array.from({ length: Math.min(50, n - i) }, async () => {
      const e = await h.api('POST', `/v1/tenants/${tenant}/endpoints`, fields);
      if (e.status !== 201) throw new Error(`endpoint create: ${e.status} ${e.text}`);
    }));
  }
}

export async function publish(h, tenant, body, headers = {}) {
  return h.api('POST', `/v1/tenants/${tenant}/events`, body, headers);
}

export async function waitDelivery(h, eventId, pred, what = 'delivery state', timeout = 15000) {
  return waitUntil(async () => {
    const r = await h.api('GET', `/v1/events/${eventId}`);
    if (r.status !== 200) return null;
    const d = r.json.deliveries;
    return pred(d) ? d : null;
  }, { timeout, what });
}

export async function getDelivery(h, id) {
  const r = await h.api('GET', `/v1/deliveries/${id}`);
  if (r.status !== 200) throw new Error(`delivery ${id}: ${r.status} ${r.text}`);
  return r.json;
}

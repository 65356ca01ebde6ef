// postgres.mjs — a real PostgreSQL server of the test's own, on loopback, in a fresh data
// directory (initdb), for the outbox relay's tests (docs/outbox.md). Debian's server binaries
// (scripts/deps.sh installs them); as root they run as the `postgres` user, which initdb needs.
// Readiness is a successful connection (bounded), never a sleep.
import { spawn, execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { waitUntil } from './hookd.mjs';

function binDir() {
  const base = '/usr/lib/postgresql';
  const versions = existsSync(base) ? readdirSync(base).filter((v) => existsSync(join(base, v, 'bin', 'initdb'))) : [];
  if (!versions.length) throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql (run scripts/deps.sh)');
  versions.sort((a, b) => Number(b) - Number(a));
  return join(base, versions[0], 'bin');
}

export async function freePort() {
  const held = await holdPort();
  await held.release();
  return held.port;
}

// A free port, held (listened on) until release(): meanwhile no listener of this process (a
// receiver, a daemon on port 0) can be given it. For a server that must be told its port
// before it can start (a database down at first, started later on the same port). A
// connection to it is cut at once, as near a refusal as a listener comes.
export function holdPort(port = 0) {
  return new Promise((resolve, reject) => {
    const s = createServer((sock) => sock.destroy());
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => resolve({ port: s.address().port, release: () => new Promise((r) => s.close(r)) }));
  });
}

// Starts a server (on `port` when given, else a free one); returns {url, port, query(sql,
// params), client(), stop()}. url is a libpq URI for hookd's --outbox-url.
export async function startPostgres({ port: wanted } = {}) {
  const bin = binDir();
  const root = process.getuid() === 0;
  // (as root under /tmp itself: the postgres user must get through every directory above it,
  // and a TMPDIR of one's own is often 0700)
  const dir = mkdtempSync(join(root ? '/tmp' : tmpdir(), 'hookd-pg-'));
  // setpriv execs the command in its own place: the pid is the server's, and signals reach it
  const as = (cmd, args) => (root
    ? ['setpriv', ['--reuid=postgres', '--regid=postgres', '--init-groups', '--', cmd, ...args]]
    : [cmd, args]);
  if (root) chownSync(dir, Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' })),
    Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' })));
  const data = join(dir, 'data');
  // --no-locale: whatever LANG says (a locale the machine has not generated fails initdb)
  const [c1, a1] = as(join(bin, 'initdb'), ['-D', data, '-A', 'trust', '-U', 'hookd', '--no-sync', '-E', 'UTF8', '--no-locale']);
  try {
    execFileSync(c1, a1, { stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${e.stderr?.toString() ?? e.message}`);
  }
  // A free port found beforehand may be taken before the server binds it (by another test's
  // listener): then the server exits, and a port of the caller's choosing aside, it tries another.
  let port, proc, exited, url, main;
  const client = async (connectionTimeoutMillis = 0) => {
    const c = new pg.Client({ connectionString: url, connectionTimeoutMillis });
    await c.connect();
    return c;
  };
  // the server on port p, accepting connections (its admin client `main`), or an error
  const launch = async (p) => {
    port = p;
    const [c2, a2] = as(join(bin, 'postgres'), ['-D', data, '-k', dir, '-p', String(port),
      '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'log_min_messages=fatal']);
    proc = spawn(c2, a2, { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    proc.stderr.on('data', (d) => { log = (log + d).slice(-4000); });
    // ('close': its stderr read to the end, the reason it exited with included)
    exited = new Promise((resolve) => proc.once('close', resolve));
    url = `postgresql://hookd@127.0.0.1:${port}/postgres`;
    try {
      await waitUntil(async () => {
        if (proc.exitCode !== null) {
          await exited;
          throw new Error(`postgres exited: ${log}`);
        }
        // (bounded: a listener that took the port may accept and never answer; and the server
        // that answers must be this one, not another test's that had the port first)
        let c;
        try {
          c = await client(2000);
          if ((await c.query('SHOW data_directory')).rows[0].data_directory === data) {
            main = c;
            // (a server's crash ends this session too: its next query fails, not the process)
            main.on('error', () => {});
            return true;
          }
        } catch { /* not yet */ }
        await c?.end().catch(() => {});
        return false;
      }, { timeout: 30000, what: 'postgres accepting connections' });
    } catch (e) {
      proc.kill('SIGKILL');
      await exited;
      throw e;
    }
  };
  for (let tries = 1; ; tries++) {
    try {
      await launch(wanted ?? await freePort());
      break;
    } catch (e) {
      if (wanted !== undefined || tries === 3 || !/could not bind|in use|could not create any TCP/i.test(e.message)) {
        rmSync(dir, { recursive: true, force: true });
        throw e;
      }
    }
  }
  let databases = 0;
  return {
    url,
    port,
    client,
    // a fresh database of its own (hookd's store: docs/postgres.md); its libpq URI
    async database() {
      const name = `hookd_${++databases}`;
      await main.query(`CREATE DATABASE ${name}`);
      return `postgresql://hookd@127.0.0.1:${port}/${name}`;
    },
    query: (sql, params) => main.query(sql, params),
    // a copy here of database `from` (a URI on another server), under its name, as it is now
    // (a replica promoted after a failover, as far as it had replayed); its libpq URI
    async copyOf(from) {
      const name = new URL(from).pathname.slice(1);
      await main.query(`CREATE DATABASE ${name}`);
      const to = `postgresql://hookd@127.0.0.1:${port}/${name}`;
      const dump = execFileSync(join(bin, 'pg_dump'), ['-Fc', '-d', from], { stdio: ['ignore', 'pipe', 'pipe'] });
      execFileSync(join(bin, 'pg_restore'), ['--no-owner', '-d', to], { input: dump, stdio: ['pipe', 'ignore', 'pipe'] });
      return to;
    },
    // a fast shutdown (every session cut, as a restart or a failover does), then — after
    // whileDown() — the same server again on the same port (held meanwhile, so that no
    // listener of this process is given it; a connection to it is cut at once)
    async restart(whileDown = async () => {}) {
      await main.end().catch(() => {});
      proc.kill('SIGINT');
      await exited;
      const held = await holdPort(port);
      try {
        await whileDown();
      } finally {
        await held.release();
      }
      await launch(port);
    },
    async stop() {
      await main.end().catch(() => {});
      proc.kill('SIGINT'); // fast shutdown: open connections are cut
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

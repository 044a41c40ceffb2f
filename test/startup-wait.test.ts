// A process started while PostgreSQL is restarting (or not up yet) waits for it instead of
// exiting: openRuntime retries connection refusals for up to a minute, and a LISTEN opened
// meanwhile keeps trying in the background.
import assert from 'node:assert/strict';
import { connect, createServer, type Server } from 'node:net';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { openRuntime } from '../src/main.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { freePort } from './helpers/fake-http.ts';
import { dyingProxy } from './helpers/dying-proxy.ts';
import { runAiq } from './helpers/processes.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(() => t.close());

/** A TCP forwarder to the real server, started only when asked: until then the port refuses. */
function forwardTo(port: number, target: URL): Server {
  const server = createServer((socket) => {
    const upstream = connect(Number(target.port || 5432), target.hostname);
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  server.listen(port, '127.0.0.1');
  return server;
}

test('openRuntime waits for a database that comes up a second later', async () => {
  const port = await freePort();
  const real = new URL(t.url!);
  const delayed = new URL(t.url!);
  delayed.host = `127.0.0.1:${port}`;
  let proxy: Server | undefined;
  const startsLater = setTimeout(() => (proxy = forwardTo(port, real)), 1000);
  const started = Date.now();
  try {
    const runtime = await openRuntime(loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', DATABASE_URL: delayed.toString() }), 'cli');
    assert.ok(Date.now() - started >= 900, 'it waited for the database');
    const { rows } = await runtime.db.query<{ ok: number }>('select 1 as ok');
    assert.equal(rows[0]!.ok, 1);
    await runtime.db.close();
  } finally {
    clearTimeout(startsLater);
    proxy?.close();
  }
});

// A restart that begins inside a start-up step kills its connection between two statements
// of the migration's transaction; node-postgres then reports "not queryable" with no error
// code. That is the same restart, not a reason to exit (a chaos run lost a worker to it).
test('openRuntime tries again when its connection dies in the middle of a start-up step', async () => {
  const proxy = await dyingProxy(t.url!);
  try {
    const runtime = await openRuntime(loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', DATABASE_URL: proxy.url }), 'cli');
    const { rows } = await runtime.db.query<{ applied: number }>('select count(*)::int as applied from aiq_migrations');
    assert.ok(rows[0]!.applied > 0);
    await runtime.db.close();
  } finally {
    proxy.close();
  }
});

test('a LISTEN opened while the database is unreachable connects when it comes up', async () => {
  const port = await freePort();
  const real = new URL(t.url!);
  const delayed = new URL(t.url!);
  delayed.host = `127.0.0.1:${port}`;
  const db = openPostgres({ connectionString: delayed.toString() });
  let proxy: Server | undefined;
  try {
    const heard: string[] = [];
    let reconnected = false;
    // The port refuses: listening must not fail the caller (workers poll as well).
    const stop = await db.listen('aiq_startup_test', (payload) => heard.push(payload), () => (reconnected = true));
    proxy = forwardTo(port, real);
    const deadline = Date.now() + 15_000;
    while (heard.length === 0 && Date.now() < deadline) {
      await t.db.query(`select pg_notify('aiq_startup_test', 'hello')`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.ok(reconnected, 'it told the caller it (re)connected, so a worker polls for missed work');
    assert.equal(heard[0], 'hello');
    await stop();
  } finally {
    await db.close();
    proxy?.close();
  }
});

test('a port already in use stops aiq serve with what to do, not a bare EADDRINUSE', async () => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as { port: number }).port;
  try {
    const ran = await runAiq(['serve'], { DATABASE_URL: t.url!, PORT: String(port), LOG_LEVEL: 'silent' }, 60_000);
    assert.equal(ran.code, 1, ran.out);
    assert.match(ran.out, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is in use \\(another aiq, or another program\\): stop that, or set PORT to a free port`));
  } finally {
    busy.close();
  }
});

test('HOST beyond loopback without ADMIN_TOKEN is refused before anything opens: no database folder is left', async () => {
  const dataDir = join(tmpdir(), `aiq-exposed-${process.pid}-${Date.now()}`);
  const ran = await runAiq(['start'], { DATA_DIR: dataDir, HOST: '0.0.0.0', PORT: String(await freePort()), LOG_LEVEL: 'silent' }, 60_000);
  assert.equal(ran.code, 1, ran.out);
  assert.match(ran.out, /HOST=0\.0\.0\.0 exposes the dashboard beyond this machine: set ADMIN_TOKEN/);
  assert.equal(existsSync(dataDir), false);
});

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
import { ROOT, runAiq, waitFor } from './helpers/processes.ts';
import { jobEnqueue, jobGet } from '../src/queue/index.ts';
import { spawn } from 'node:child_process';
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

test('a public PUBLIC_URL (a tunnel for Twilio) without ADMIN_TOKEN is refused before anything opens', async () => {
  // A tunnel that rewrites Host and adds no forwarding header would look like this machine.
  const dataDir = join(tmpdir(), `aiq-tunnel-${process.pid}-${Date.now()}`);
  const ran = await runAiq(['start'], { DATA_DIR: dataDir, PUBLIC_URL: 'https://abc123.ngrok-free.app', PORT: String(await freePort()), LOG_LEVEL: 'silent' }, 60_000);
  assert.equal(ran.code, 1, ran.out);
  assert.match(ran.out, /PUBLIC_URL=https:\/\/abc123\.ngrok-free\.app makes aiq reachable from outside this machine .*: set ADMIN_TOKEN/);
  assert.equal(existsSync(dataDir), false);
});

test('TRUST_PROXY with Twilio credentials and no PUBLIC_URL is refused before anything opens, naming PUBLIC_URL', async () => {
  // Found in review: signatures were then checked against X-Forwarded-Proto and -Host, which a
  // client sends itself (nginx passes them on by default): a post Twilio signed for another
  // address of the account (a staging aiq's) was taken, with that address forwarded.
  const dataDir = join(tmpdir(), `aiq-unpinned-${process.pid}-${Date.now()}`);
  const twilio = { TWILIO_ACCOUNT_SID: `AC${'0123456789abcdef'.repeat(2)}`, TWILIO_AUTH_TOKEN: 'a-twilio-auth-token', TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886' };
  const ran = await runAiq(['start'], { DATA_DIR: dataDir, TRUST_PROXY: '127.0.0.1', ...twilio, PORT: String(await freePort()), LOG_LEVEL: 'silent' }, 60_000);
  assert.equal(ran.code, 1, ran.out);
  assert.match(ran.out, /TRUST_PROXY=127\.0\.0\.1 without PUBLIC_URL: Twilio's webhook signatures would be checked against .*X-Forwarded-Host.* Set PUBLIC_URL to the address Twilio calls/);
  assert.equal(existsSync(dataDir), false);
});

test('aiq worker whose WORKER_METRICS_PORT is in use exits saying so, before it claims anything', async () => {
  const busy = createServer();
  await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
  const port = (busy.address() as { port: number }).port;
  try {
    const ran = await runAiq(['worker'], { DATABASE_URL: t.url!, WORKER_METRICS_PORT: String(port), LOG_LEVEL: 'silent', AI_PROVIDER: 'local' }, 60_000);
    assert.equal(ran.code, 1, ran.out);
    assert.match(ran.out, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is in use .*set WORKER_METRICS_PORT to a free port`));
  } finally {
    busy.close();
  }
});

test('aiq worker with WORKER_METRICS_PORT answers its own /metrics (the jobs it ran) and /readyz', async () => {
  const port = await freePort();
  const child = spawn(process.execPath, ['bin/aiq.js', 'worker'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH!, DATABASE_URL: t.url!, WORKER_METRICS_PORT: String(port), LOG_LEVEL: 'silent', AI_PROVIDER: 'local' },
    stdio: 'ignore',
  });
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'the worker to answer /readyz', 60_000, 100);
    // A job for a document that is gone: it ends at once, counted in the worker's registry.
    const id = await jobEnqueue(t.db, { type: 'embed_record', payload: { table: 'documents', id: '00000000-0000-4000-8000-000000000000' } });
    await waitFor(async () => ['done', 'failed'].includes((await jobGet(t.db, id))!.status), 'the job to end', 30_000, 100);
    await waitFor(async () => /aiq_job_attempts_total\{type="embed_record",outcome="(done|failed)"\} 1/.test(await (await fetch(`${base}/metrics`)).text()), 'the attempt in /metrics', 10_000, 100);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
});

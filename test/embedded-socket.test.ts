// One embedded database, many commands: while `aiq start` holds the data folder, CLI commands
// and psql reach it through its socket; the session is shared in turns, so nobody's
// statement lands inside somebody else's transaction.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { migrate } from '../src/db/migrate.ts';
import { openPglite } from '../src/db/pglite.ts';
import { seedEmbeddedDataDir } from './helpers/db.ts';
import { socketPathFor } from '../src/db/pglite-socket.ts';
import { freePort } from './helpers/fake-http.ts';
import { ROOT, runAiq as aiq, waitFor } from './helpers/processes.ts';

function socketClient(dir: string): pg.Client {
  return new pg.Client({ host: dir, user: 'postgres', database: 'postgres' });
}

test('a socket client and the app take turns: neither runs inside the other\'s transaction', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aiq-sock-'));
  await seedEmbeddedDataDir(dir);
  const db = await openPglite({ dataDir: dir, serveSocket: true });
  try {
    await migrate(db);
    assert.equal(statSync(socketPathFor(dir)).mode & 0o777, 0o600, 'only the owner may connect');
    await db.exec('create table turns (n int)');
    const client = socketClient(dir);
    await client.connect();
    await client.query('begin');
    await client.query('insert into turns values (1)');
    let appSaw: number | undefined;
    const appRead = db.query<{ n: number }>('select count(*)::int as n from turns').then((r) => (appSaw = r.rows[0]!.n));
    await client.query('insert into turns values (2)');
    assert.equal(appSaw, undefined, "the app waits for the client's transaction to end");
    await client.query('rollback');
    await appRead;
    assert.equal(appSaw, 0, 'the app never saw the rolled-back rows');

    // And the other way round: the client waits for the app's transaction.
    let clientSaw: number | undefined;
    let clientRead: Promise<unknown> | undefined;
    await db.transaction(async (tx) => {
      await tx.query('insert into turns values (3)');
      clientRead = client.query<{ n: number }>('select count(*)::int as n from turns').then((r) => (clientSaw = r.rows[0]!.n));
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(clientSaw, undefined, "the client waits for the app's transaction to end");
      await tx.query('insert into turns values (4)');
    });
    await clientRead;
    assert.equal(clientSaw, 2, 'the client saw the committed transaction whole');

    // A client that disappears mid-transaction: rolled back, and the session is free again.
    await client.query('begin');
    await client.query('insert into turns values (5)');
    client.on('error', () => {}); // the client learns its connection is gone; expected here
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
    assert.equal((await db.query<{ n: number }>('select count(*)::int as n from turns')).rows[0]!.n, 2);
    await client.end().catch(() => {});
  } finally {
    await db.close();
    assert.equal(existsSync(socketPathFor(dir)), false, 'closing removes the socket');
    rmSync(dir, { recursive: true, force: true });
  }
});


test("a socket client's settings leave with it: the app's session is as it was once the client has gone", async () => {
  // Found by an operations probe: the embedded database is one session, so a `psql -h
  // DATA_DIR` that ran `set search_path = …` or `set timezone = …` (or `reset all`, which
  // turned wal_recycle back on, see openPglite) changed the running aiq's session for good:
  // after the operator had left, every query of the app failed or read days in another zone.
  const dir = mkdtempSync(join(tmpdir(), 'aiq-sock-settings-'));
  await seedEmbeddedDataDir(dir);
  const db = await openPglite({ dataDir: dir, serveSocket: true });
  try {
    await db.exec('create table visits (n int)');
    const setting = async (name: string) => (await db.query<{ v: string }>(`select current_setting('${name}') as v`)).rows[0]!.v;
    const before = { timezone: await setting('timezone'), search_path: await setting('search_path') };
    const client = socketClient(dir);
    await client.connect();
    await client.query('reset all');
    await client.query("set search_path = pg_catalog");
    await client.query("set timezone = 'Pacific/Kiritimati'");
    await client.end();
    await waitFor(async () => (await setting('search_path')) === before.search_path, 'the client to be gone', 5_000);
    assert.equal(await setting('timezone'), before.timezone);
    assert.equal(await setting('wal_recycle'), 'off', 'a WAL segment is still never kept for reuse');
    assert.equal((await db.query<{ n: number }>('select count(*)::int as n from visits')).rows[0]!.n, 0);
  } finally {
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a large result reaches a socket client whole', { timeout: 60_000 }, async () => {
  // Found by an operations probe: 100,000 rows through psql lost protocol synchronisation
  // (node-postgres hung): the socket wrote views of PGlite's memory that it had overwritten.
  const dir = mkdtempSync(join(tmpdir(), 'aiq-sock-'));
  await seedEmbeddedDataDir(dir);
  const db = await openPglite({ dataDir: dir, serveSocket: true });
  const client = socketClient(dir);
  try {
    await db.exec(`create table big (s text); insert into big select 'SM' || md5(g::text) from generate_series(1, 150000) g`);
    await client.connect();
    const { rows } = await client.query<{ s: string; g: number }>('select s, row_number() over ()::int as g from big');
    assert.equal(rows.length, 150_000);
    assert.ok(rows.every((row, i) => row.g === i + 1 && /^SM[0-9a-f]{32}$/.test(row.s)), 'every row as it was');
  } finally {
    await client.end().catch(() => {});
    await db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('CLI commands work while `aiq start` runs on the embedded database, and the server sees what they did', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aiq-one-'));
  await seedEmbeddedDataDir(dir);
  const port = await freePort();
  const env = { DATA_DIR: dir, AI_PROVIDER: 'local', LOG_LEVEL: 'info', LOG_FORMAT: 'json', WORKER_POLL_INTERVAL_MS: '200' };
  const server = spawn(process.execPath, ['bin/aiq.js', 'start'], { cwd: ROOT, env: { PATH: process.env.PATH!, ...env, PORT: String(port) } });
  let log = '';
  server.stdout.on('data', (c) => (log += c));
  server.stderr.on('data', (c) => (log += c));
  const base = `http://127.0.0.1:${port}`;
  const api = async (path: string) => (await fetch(`${base}${path}`)).json() as Promise<Record<string, unknown>>;
  try {
    await waitFor(async () => (await fetch(`${base}/readyz`).then((r) => r.ok, () => false)), 'aiq start to be ready', 60_000, 100);

    const stats = await aiq(['stats'], env);
    assert.equal(stats.code, 0, stats.out);
    assert.match(stats.out, /total/);

    const doc = join(dir, 'lunch.md');
    writeFileSync(doc, '# Lunch\n\nLunch is served at noon in the canteen.\n');
    const added = await aiq(['add-document', doc, '--title', 'Canteen'], env);
    assert.equal(added.code, 0, added.out);
    assert.match(added.out, /"Canteen" inserted: 1 chunks/);

    // A type no worker handles would wait for ever: refused, with the known ones.
    const typo = await aiq(['enqueue', 'embed_recrod', '{}'], env);
    assert.equal(typo.code, 2, typo.out);
    assert.match(typo.out, /no aiq worker handles job type "embed_recrod": it would wait for ever \(known types: .*embed_record/);
    const enqueued = await aiq(['enqueue', 'embed_record', JSON.stringify({ kind: 'not-a-table' }), '--max-attempts', '1'], env);
    assert.equal(enqueued.code, 0, enqueued.out);
    const jobId = enqueued.out.trim();

    // The running server's worker runs both jobs and its API shows the document.
    await waitFor(async () => (await api(`/api/jobs/${jobId}`)).status === 'failed', 'the enqueued job to be run by the server', 30_000, 100);
    const documents = await api('/api/documents');
    assert.match(JSON.stringify(documents), /Canteen/);

    const jobs = await aiq(['jobs', '--status', 'failed'], env);
    assert.equal(jobs.code, 0, jobs.out);
    assert.match(jobs.out, new RegExp(jobId));
    // One line a job: its error (a validation error lists its issues over lines) stays on it.
    assert.ok(jobs.out.trim().split('\n').slice(1).every((line) => /^[0-9a-f-]{36}  /.test(line)), jobs.out);

    // psql speaks to it too, as to any PostgreSQL.
    const psql = spawnSync('psql', ['-h', dir, '-U', 'postgres', '-qAtc', 'select count(*) from documents'], { encoding: 'utf8' });
    if (!psql.error) assert.equal(psql.stdout.trim(), '1', psql.stderr);

    // A second server on the same folder is still refused: the lock stays.
    const second = await aiq(['start'], { ...env, PORT: String(await freePort()) });
    assert.equal(second.code, 1);
    assert.match(second.out, /in use by process \d+/);
  } finally {
    server.kill('SIGTERM');
    await new Promise((resolve) => server.once('exit', resolve));
    rmSync(dir, { recursive: true, force: true });
  }
  // The one error logged is the job enqueued to fail; nothing about the socket or the session.
  assert.equal(log.match(/"level":50/g)?.length, 1, log);
});

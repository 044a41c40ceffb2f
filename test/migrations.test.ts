// Migrations: idempotent, safe when two processes start at once, and the embedded
// database's folder lock.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { migrate, migrationFiles, pendingMigrations } from '../src/db/migrate.ts';
import { DataDirLockedError } from '../src/db/errors.ts';
import { openPglite } from '../src/db/pglite.ts';
import { openPostgres } from '../src/db/postgres.ts';
import { BACKENDS, SERVER_URL, seedEmbeddedDataDir } from './helpers/db.ts';
import { ROOT } from './helpers/processes.ts';
import { spawn } from 'node:child_process';

async function emptyServerDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `aiq_t_mig_${process.pid}_${Math.random().toString(36).slice(2, 7)}`;
  const admin = new pg.Client({ connectionString: SERVER_URL });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(SERVER_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: SERVER_URL });
      await c.connect();
      await c.query(`drop database if exists ${name} with (force)`);
      await c.end();
    },
  };
}

function runCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['bin/aiq.js', ...args], { cwd: ROOT, env: { ...process.env, ...env } });
    let out = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (out += c));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

test('migrating twice applies everything once, then nothing', async () => {
  const target = await emptyServerDatabase();
  const db = openPostgres({ connectionString: target.url });
  try {
    assert.deepEqual(await pendingMigrations(db), migrationFiles().map((m) => m.name));
    assert.deepEqual(await migrate(db), migrationFiles().map((m) => m.name));
    assert.deepEqual(await migrate(db), []);
    assert.deepEqual(await pendingMigrations(db), []);
  } finally {
    await db.close();
    await target.drop();
  }
});

test('two processes migrating one database at once do not collide', async () => {
  const target = await emptyServerDatabase();
  try {
    const [a, b] = await Promise.all([runCli(['migrate'], { DATABASE_URL: target.url }), runCli(['migrate'], { DATABASE_URL: target.url })]);
    assert.equal(a.code, 0, a.out);
    assert.equal(b.code, 0, b.out);
    assert.equal([a.out, b.out].filter((o) => o.includes('nothing to apply')).length, 1, 'one applied, the other found nothing left');
  } finally {
    await target.drop();
  }
});

test('the embedded database refuses a second owner of its folder, and frees it on close', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aiq-lock-'));
  await seedEmbeddedDataDir(dir);
  try {
    const first = await openPglite({ dataDir: dir });
    await migrate(first);
    const second = await runCli(['stats'], { DATA_DIR: dir, DATABASE_URL: '' });
    assert.equal(second.code, 1);
    assert.match(second.out, /in use by process \d+.*set DATABASE_URL/s);
    assert.doesNotMatch(second.out, /at .*\.ts:\d+/, 'no stack trace');
    await first.close();
    const again = await openPglite({ dataDir: dir });
    assert.deepEqual(await pendingMigrations(again), []);
    await again.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(DataDirLockedError);
});

for (const backend of BACKENDS) {
  test(`the queue table carries autovacuum settings for a queue's churn (${backend.name})`, async () => {
    const t = await backend.fresh();
    try {
      const { rows } = await t.db.query<{ options: string[] }>(`select reloptions as options from pg_class where oid = 'ai_jobs'::regclass`);
      const options = Object.fromEntries((rows[0]?.options ?? []).map((o) => o.split('=') as [string, string]));
      // Far below the server defaults (0.2 and 0.1 of the table): a million finished jobs
      // must not wait for 200,000 dead rows before a vacuum.
      assert.equal(options.autovacuum_vacuum_scale_factor, '0.02');
      assert.equal(options.autovacuum_vacuum_insert_scale_factor, '0.02');
      assert.equal(options.autovacuum_analyze_scale_factor, '0.02');
      assert.equal(options.autovacuum_vacuum_threshold, '1000');
    } finally {
      await t.close();
    }
  });
}

for (const backend of BACKENDS) {
  test(`new jobs and messages get time-ordered ids, so a big table's indexes grow at one edge (${backend.name})`, async () => {
    const t = await backend.fresh();
    try {
      const before = Date.now();
      const { rows } = await t.db.query<{ id: string; created_at: Date }>(
        `insert into ai_jobs (type, payload) select 'probe', jsonb_build_object('i', g) from generate_series(1, 50) g returning id, created_at`,
      );
      const after = Date.now();
      for (const { id } of rows) {
        assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, `${id} is a version 7, RFC 9562 uuid`);
        const millis = parseInt(id.replace(/-/g, '').slice(0, 12), 16);
        assert.ok(millis >= before - 1000 && millis <= after + 1000, `${id} carries its creation time`);
      }
      assert.equal(new Set(rows.map((r) => r.id)).size, rows.length, 'unique');
      const message = await t.db.query<{ id: string }>(
        `with c as (insert into contacts (whatsapp_number) values ('+31600000001') returning id),
              v as (insert into conversations (contact_id) select id from c returning id)
         insert into messages (conversation_id, source, body, status, twilio_sid, seq) select id, 'inbound', 'hoi', 'received', 'SMprobe', 1 from v returning id`,
      );
      assert.match(message.rows[0]!.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7/);
    } finally {
      await t.close();
    }
  });
}

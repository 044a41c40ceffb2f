// No process drops embeddings it was not asked to: `aiq stats` and `aiq worker` started with
// another embedding dimension (real processes, server PostgreSQL) leave every embedding in
// place, the worker's jobs wait with the reason, /readyz and the dashboard say why, and only
// `aiq reembed --switch --yes` rebuilds the space.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { localProviderCreate } from '../src/ai/local-provider.ts';
import { openPostgres } from '../src/db/postgres.ts';
import type { Database } from '../src/db/types.ts';
import { embedRecord } from '../src/jobs/embed-record.ts';
import { inboundStoreAndEnqueue } from '../src/jobs/autoreply.ts';
import { documentSave } from '../src/knowledge/documents.ts';
import { vectorSpaceOpen, vectorSpaceSwitch, vectorStaleCount } from '../src/knowledge/vectors.ts';
import { jobEnqueue } from '../src/queue/index.ts';
import { startAdminApp } from './helpers/admin-app.ts';
import { freshServerDatabase, SERVER_URL, type TestDatabase } from './helpers/db.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

function aiq(url: string, args: string[], env: Record<string, string> = {}): { done: Promise<{ code: number | string; out: string }>; kill(): void } {
  const child = spawn(process.execPath, ['bin/aiq.js', ...args], {
    cwd: ROOT,
    env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn', AI_PROVIDER: 'local', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (out += c));
  return {
    done: new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code: code ?? signal ?? -1, out }))),
    kill: () => child.kill('SIGTERM'),
  };
}

/** Everything a start-up could have changed about the stored embeddings. */
async function embeddingState(db: Database) {
  const result = await db.query(
    `select (select row_to_json(s) from knowledge_vector_settings s) as settings,
            (select count(embedding)::int from document_chunks) as chunks_embedded,
            (select count(*)::int from documents where embedded_hash is not null) as documents_embedded,
            (select string_agg(column_name || ' ' || data_type, ', ' order by table_name) from information_schema.columns
              where table_schema = current_schema() and column_name = 'embedding') as columns`,
  );
  return result.rows[0] as { settings: Record<string, unknown>; chunks_embedded: number; documents_embedded: number; columns: string };
}

describe('the embedding space is changed only when asked', () => {
  let t: TestDatabase;
  let original: Awaited<ReturnType<typeof embeddingState>>;
  const ai = localProviderCreate({ dimensions: 256 });
  const OTHER = { EMBEDDING_DIMENSIONS: '384' };

  before(async () => {
    t = await freshServerDatabase();
    assert.equal((await vectorSpaceOpen(t.db, { provider: ai.name, model: ai.embeddingModel, dimensions: 256 })).status, 'ready');
    const saved = await t.db.transaction((tx) => documentSave(tx, { title: 'Leave', body: 'Every employee has 25 days of paid holiday per year.' }));
    assert.equal((await embedRecord(t.db, ai, { table: 'documents', id: saved.id })).status, 'embedded');
    original = await embeddingState(t.db);
    assert.equal(original.chunks_embedded, 1);
  });
  after(() => t.close());

  test('`aiq stats` and `aiq jobs` with other AI settings change nothing', async () => {
    for (const args of [['stats'], ['jobs']]) {
      const run = await aiq(t.url!, args, OTHER).done;
      assert.equal(run.code, 0, run.out);
    }
    assert.deepEqual(await embeddingState(t.db), original);
  });

  test('read-only commands do not migrate: an empty database is reported, not built', async () => {
    const name = `aiq_t_${process.pid}_empty`;
    const admin = openPostgres({ connectionString: SERVER_URL });
    await admin.query(`drop database if exists ${name}`);
    await admin.query(`create database ${name}`);
    const url = new URL(SERVER_URL);
    url.pathname = `/${name}`;
    try {
      const run = await aiq(url.toString(), ['stats']).done;
      assert.equal(run.code, 1, run.out);
      assert.match(run.out, /not current .*aiq migrate/);
      const empty = openPostgres({ connectionString: url.toString() });
      const tables = await empty.query<{ n: number }>(`select count(*)::int as n from information_schema.tables where table_schema = 'public'`);
      await empty.close();
      assert.equal(tables.rows[0]!.n, 0);
    } finally {
      await admin.query(`drop database if exists ${name} with (force)`);
      await admin.close();
    }
  });

  test('a worker with another dimension keeps the embeddings; its jobs wait with the reason', async () => {
    const embedJob = await jobEnqueue(t.db, { type: 'embed_record', payload: { table: 'documents', id: (await t.db.query<{ id: string }>('select id from documents')).rows[0]!.id } });
    await t.db.query('update documents set embedded_hash = null');
    const reply = await inboundStoreAndEnqueue(t.db, { whatsappNumber: '+31612340000', body: 'How many holiday days?', mediaUrls: [], twilioSid: `SM${'a'.repeat(32)}` });
    const worker = aiq(t.url!, ['worker'], OTHER);
    try {
      const errorOf = async (id: string) => (await t.db.query<{ last_error: string | null; status: string }>('select last_error, status from ai_jobs where id = $1', [id])).rows[0]!;
      const autoreplyJob = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [reply!.messageId])).rows[0]!.id;
      for (const id of [embedJob, autoreplyJob]) {
        // A worker process starting on a loaded machine (CI, two cores) took over 30 s.
        await waitFor(async () => /embedding space mismatch/.test((await errorOf(id)).last_error ?? ''), `job ${id} to report the mismatch`, 120_000, 100);
        const job = await errorOf(id);
        assert.equal(job.status, 'pending', 'waits for the operator, does not fail');
        assert.match(job.last_error!, /256.*384[\s\S]*aiq reembed --switch/);
      }
    } finally {
      worker.kill();
      await worker.done;
    }
    await t.db.query('update documents set embedded_hash = content_hash');
    assert.deepEqual(await embeddingState(t.db), original);
  });

  test('/readyz stays ready and says why; the dashboard shows it on every page', async () => {
    const app = await startAdminApp({ ...OTHER, ADMIN_TOKEN: '' }, t);
    try {
      const ready = await app.app.inject({ url: '/readyz' });
      assert.equal(ready.statusCode, 200);
      assert.match(ready.json().embeddings, /embedding space mismatch/);
      for (const url of ['/admin', '/admin/jobs', '/admin/documents']) {
        const page = await app.app.inject({ url });
        assert.match(page.body, /class="banner alert"[^>]*>embedding space mismatch/, url);
      }
    } finally {
      await app.close();
    }
    assert.deepEqual(await embeddingState(t.db), original);
  });

  test('`aiq reembed --switch` needs --yes without a terminal, then rebuilds and re-embeds', async () => {
    const refused = await aiq(t.url!, ['reembed', '--switch'], OTHER).done;
    assert.equal(refused.code, 2, refused.out);
    assert.match(refused.out, /drops 1 stored embedding .*256.*re-embeds all 1 record/s);
    assert.match(refused.out, /pass --yes/);
    assert.deepEqual(await embeddingState(t.db), original);

    const switched = await aiq(t.url!, ['reembed', '--switch', '--yes'], OTHER).done;
    assert.equal(switched.code, 0, switched.out);
    assert.match(switched.out, /1 embedded/);
    const now = await embeddingState(t.db);
    assert.equal(now.settings.dimensions, 384);
    assert.equal(now.documents_embedded, 1);
    const length = await t.db.query<{ n: number }>('select array_length(embedding, 1) as n from document_chunks');
    assert.equal(length.rows[0]!.n, 384);
  });
});

test('an embedding made before a switch to another model is not stored in the new space (it stays stale for reembed)', async () => {
  const t = await freshServerDatabase();
  try {
    const old = localProviderCreate({ dimensions: 256 });
    await vectorSpaceOpen(t.db, { provider: old.name, model: old.embeddingModel, dimensions: 256 });
    const saved = await t.db.transaction((tx) => documentSave(tx, { title: 'Leave', body: 'Every employee has 25 days of paid holiday per year.' }));
    // A worker still set up for the old model, its embeddings call taking a while.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let entered!: () => void;
    const inside = new Promise<void>((resolve) => (entered = resolve));
    const slowOld = Object.create(old) as typeof old;
    slowOld.embed = async (texts, options) => {
      entered();
      await gate;
      return old.embed(texts, options);
    };
    const job = embedRecord(t.db, slowOld, { table: 'documents', id: saved.id });
    await inside;
    // Meanwhile the operator runs `aiq reembed --switch` for another model of the same size.
    assert.equal((await vectorSpaceSwitch(t.db, { provider: 'openai', model: 'text-embedding-3-small', dimensions: 256 })).switched, true);
    release();
    assert.equal((await job).status, 'superseded');
    assert.equal(await vectorStaleCount(t.db), 1, 'still to be embedded in the new space');
    const vectors = await t.db.query<{ n: number }>('select count(embedding)::int as n from document_chunks');
    assert.equal(vectors.rows[0]!.n, 0, "no old model's vector in the new space");
  } finally {
    await t.close();
  }
});

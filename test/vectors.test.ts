// Vector storage on both paths: pgvector (embedded PGlite) and real[] with the SQL cosine
// operator (server PostgreSQL without pgvector). The same documents embedded the same way
// give the same nearest neighbours on both; another space is refused, and rebuilt only when
// the switch is asked for.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { localProviderCreate } from '../src/ai/local-provider.ts';
import { aiProviderCreate } from '../src/ai/providers.ts';
import { embeddingSpaceOf } from '../src/ai/types.ts';
import { loadConfig } from '../src/config.ts';
import { RetryLaterError } from '../src/queue/index.ts';
import type { Database } from '../src/db/types.ts';
import type { AiProvider } from '../src/ai/types.ts';
import { embedRecord } from '../src/jobs/embed-record.ts';
import { documentRechunk, documentSave } from '../src/knowledge/documents.ts';
import { chunkSearch } from '../src/knowledge/search.ts';
import { vectorSettingsGet, vectorSpaceCheck, vectorSpaceOpen, vectorSpaceSwitch, vectorStaleCount, VectorSpaceMismatchError, type VectorStorage } from '../src/knowledge/vectors.ts';
import { freshPgliteDatabase, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { fakeOpenAiEnv, startFakeOpenAi } from './helpers/fake-openai.ts';

const DOCS = [
  { title: 'Leave policy', body: 'Every employee has 25 days of paid holiday per year.\n\nRequest leave in the HR portal at least two weeks ahead.' },
  { title: 'Expenses', body: 'Travel expenses are reimbursed within 30 days.\n\nSubmit receipts through the finance app; taxi rides need a reason.' },
  { title: 'IT support', body: 'A forgotten password is reset at the service desk.\n\nLaptops are replaced every four years.' },
  { title: 'Parking', body: 'The parking garage opens at 7:00. Visitors register at the front desk for a parking pass.' },
];
const QUERIES = ['how many holiday days do I get', 'I forgot my password', 'where do I submit taxi receipts', 'parking for visitors'];

const ai = localProviderCreate({ dimensions: 256 });
const space = { provider: ai.name, model: ai.embeddingModel, dimensions: ai.dimensions };

async function seed(db: Database): Promise<void> {
  for (const doc of DOCS) {
    const saved = await db.transaction((tx) => documentSave(tx, doc));
    assert.equal((await embedRecord(db, ai, { table: 'documents', id: saved.id })).status, 'embedded');
  }
}

/** The nearest chunks by vector only, as retrieval's vector side ranks them. */
async function chunkNearest(db: Database, vector: number[], limit: number) {
  const hits = await chunkSearch(db, '', vector, { limit, mode: 'vector', rrfK: 60, vectorWeight: 1, lexicalWeight: 1 });
  return hits.map((h) => ({ ...h, distance: 1 - h.similarity! }));
}

async function neighbours(db: Database) {
  const results = [];
  for (const query of QUERIES) {
    const [vector] = (await ai.embed([query])).vectors;
    const chunks = await chunkNearest(db, vector!, 3);
    results.push({ query, chunks: chunks.map((c) => ({ title: c.title, content: c.content, distance: c.distance })) });
  }
  return results;
}

const stores: Record<string, { t: TestDatabase; storage: VectorStorage }> = {};

before(async () => {
  for (const [name, fresh] of [['pglite', freshPgliteDatabase], ['postgres', freshServerDatabase]] as const) {
    const t = await fresh();
    const state = await vectorSpaceOpen(t.db, space);
    assert.equal(state.status, 'ready');
    assert.ok(state.status === 'ready' && state.created, 'a fresh database gets its columns at first start');
    stores[name] = { t, storage: state.space.storage };
    await seed(t.db);
  }
});
after(async () => {
  for (const { t } of Object.values(stores)) await t.close();
});

test('PGlite stores vectors with pgvector and an HNSW index; the server uses real[]', async () => {
  assert.equal(stores.pglite!.storage, 'pgvector');
  assert.equal(stores.postgres!.storage, 'real[]');
  const index = await stores.pglite!.t.db.query<{ indexdef: string }>(`select indexdef from pg_indexes where indexname = 'document_chunks_embedding_idx'`);
  assert.match(index.rows[0]!.indexdef, /USING hnsw \(embedding vector_cosine_ops\)/);
});

test('nearest neighbours agree between pgvector and real[]', async () => {
  const fromPgvector = await neighbours(stores.pglite!.t.db);
  const fromArrays = await neighbours(stores.postgres!.t.db);
  for (let i = 0; i < QUERIES.length; i++) {
    const a = fromPgvector[i]!;
    const b = fromArrays[i]!;
    assert.deepEqual(b.chunks.map((c) => c.content), a.chunks.map((c) => c.content), `same ranking for "${a.query}"`);
    a.chunks.forEach((c, j) => assert.ok(Math.abs(c.distance - b.chunks[j]!.distance) < 1e-5, 'same distances'));
  }
  // And they are the right ones.
  assert.deepEqual(fromPgvector.map((r) => r.chunks[0]!.title), ['Leave policy', 'IT support', 'Expenses', 'Parking']);
});

for (const name of ['pglite', 'postgres']) {
  describe(`embed_record on ${name}`, () => {
    test('is skipped when the content hash did not change, and redone when it did', async () => {
      const { db } = stores[name]!.t;
      const doc = await db.query<{ id: string }>(`select id from documents where title = 'Parking'`);
      const id = doc.rows[0]!.id;
      assert.equal((await embedRecord(db, ai, { table: 'documents', id })).status, 'unchanged');
      const saved = await db.transaction((tx) => documentSave(tx, { title: 'Parking', body: 'The garage now opens at 6:30.' }));
      assert.equal(saved.status, 'updated');
      assert.equal(await vectorStaleCount(db), 1);
      assert.equal((await embedRecord(db, ai, { table: 'documents', id })).status, 'embedded');
      assert.equal(await vectorStaleCount(db), 0);
      assert.equal((await embedRecord(db, ai, { table: 'documents', id: '00000000-0000-4000-8000-000000000000' })).status, 'missing');
      // A person job queued before people stopped being embedded does nothing.
      assert.equal((await embedRecord(db, ai, { table: 'people', id: '00000000-0000-4000-8000-000000000000' })).status, 'skipped');
    });

    test('a document cut again while its embedding is computed: that embedding is superseded, the next one stores the new chunks', async () => {
      const { db } = stores[name]!.t;
      const id = (await db.query<{ id: string }>(`select id from documents where title = 'Leave policy'`)).rows[0]!.id;
      await db.query('update documents set embedded_hash = null where id = $1', [id]);
      // The worker's start cuts every document again with new settings while this job embeds.
      let cut = false;
      const racing: AiProvider = {
        ...ai,
        embed: async (texts, options) => {
          const result = await ai.embed(texts, options);
          if (!cut) cut = await db.transaction((tx) => documentRechunk(tx, id, { maxChars: 300, overlapChars: 0 }));
          return result;
        },
      };
      assert.equal((await embedRecord(db, racing, { table: 'documents', id })).status, 'superseded');
      assert.ok(cut);
      assert.equal((await embedRecord(db, ai, { table: 'documents', id })).status, 'embedded', "the re-cut's own job embeds it");
      const chunks = (await db.query<{ total: number; embedded: number }>('select count(*)::int as total, count(embedding)::int as embedded from document_chunks where document_id = $1', [id])).rows[0]!;
      assert.ok(chunks.total > 0);
      assert.equal(chunks.embedded, chunks.total, 'every chunk of the new cut has its vector');
      assert.equal(await vectorStaleCount(db), 0);
    });

    test('opening another space changes nothing and refuses to embed; only the switch rebuilds', async () => {
      const { db } = stores[name]!.t;
      const again = await vectorSpaceOpen(db, space);
      assert.ok(again.status === 'ready' && !again.created);
      assert.equal(await vectorStaleCount(db), 0);
      const wider = localProviderCreate({ dimensions: 384 });
      const embeddedBefore = await db.query<{ n: number }>('select count(embedding)::int as n from document_chunks');
      const mismatch = await vectorSpaceOpen(db, { ...space, dimensions: 384 });
      assert.equal(mismatch.status, 'mismatch');
      assert.match(mismatch.status === 'mismatch' ? mismatch.reason : '', /aiq reembed --switch/);
      // Nothing was dropped, nothing marked stale.
      assert.equal(await vectorStaleCount(db), 0);
      assert.deepEqual(await db.query<{ n: number }>('select count(embedding)::int as n from document_chunks').then((r) => r.rows), embeddedBefore.rows);
      const docs = await db.query<{ id: string }>('select id from documents');
      await db.query('update documents set embedded_hash = null where id = $1', [docs.rows[0]!.id]);
      await assert.rejects(embedRecord(db, wider, { table: 'documents', id: docs.rows[0]!.id }), VectorSpaceMismatchError);
      await assert.rejects(vectorSpaceCheck(db, { ...space, dimensions: 384 }), /embedding space mismatch/);

      const switched = await vectorSpaceSwitch(db, { ...space, dimensions: 384 });
      assert.equal(switched.switched, true);
      assert.deepEqual(switched.previous, { storage: stores[name]!.storage, ...space });
      assert.equal(await vectorStaleCount(db), DOCS.length);
      for (const { id } of docs.rows) await embedRecord(db, wider, { table: 'documents', id });
      const [vector] = (await wider.embed(['holiday days'])).vectors;
      assert.equal((await chunkNearest(db, vector!, 1))[0]!.title, 'Leave policy');
      // Back to the original space for the other tests in this file.
      await vectorSpaceSwitch(db, space);
      assert.deepEqual(await vectorSettingsGet(db), { storage: stores[name]!.storage, ...space });
      for (const { id } of docs.rows) await embedRecord(db, ai, { table: 'documents', id });
    });
  });
}

test("a handbook larger than the provider's rate limit lets through at once is embedded over several attempts, each chunk paid for once", async () => {
  const fake = await startFakeOpenAi();
  const t = await freshServerDatabase();
  try {
    const openai = aiProviderCreate(loadConfig(fakeOpenAiEnv(fake)));
    await vectorSpaceOpen(t.db, embeddingSpaceOf(openai));
    // 150 sections, a chunk each: three embedding requests (64, 64, 22).
    const body = Array.from({ length: 150 }, (_, i) => `## Article ${i + 1}\n\nRule ${i + 1} of the handbook: requests of kind ${i + 1} go to desk ${i % 7}.`).join('\n\n');
    const saved = await t.db.transaction((tx) => documentSave(tx, { title: 'Handbook', body }));
    assert.equal(saved.chunks, 150);
    // A tokens-per-minute quota: one request's worth goes through, the next is throttled (429).
    let paid = 0;
    let status = '';
    for (let attempt = 0; attempt < 5 && status !== 'embedded'; attempt++) {
      fake.reset();
      fake.failNext({ kind: 'delay', ms: 0 }, { endpoint: 'embeddings' });
      fake.failNext({ kind: 'status', status: 429, headers: { 'retry-after-ms': '10' } }, { endpoint: 'embeddings' });
      try {
        status = (await embedRecord(t.db, openai, { table: 'documents', id: saved.id })).status;
      } catch (err) {
        assert.ok(err instanceof RetryLaterError, String(err));
      }
      paid += fake.embeddingRequests().filter((r) => r.outcome === 200).reduce((n, r) => n + r.body.input.length, 0);
    }
    assert.equal(status, 'embedded', 'embedded within five attempts');
    assert.equal(paid, 150, 'every chunk embedded once');
    const chunks = (await t.db.query<{ total: number; embedded: number }>('select count(*)::int as total, count(embedding)::int as embedded from document_chunks')).rows[0]!;
    assert.deepEqual(chunks, { total: 150, embedded: 150 });
    assert.equal(await vectorStaleCount(t.db), 0);
  } finally {
    await t.close();
    await fake.close();
  }
});

// Seed-style enqueues, as the original design note writes them: a payload alone with its
// type inside. On both databases: the worker runs it under that type; an explicit type
// column wins; no type anywhere is refused with a message that says what to do.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLogger } from '../src/logger.ts';
import { jobGet, Worker, type JobHandler } from '../src/queue/index.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

const anything = { safeParse: (input: unknown) => ({ success: true as const, data: input as { n?: number } }) };

for (const backend of BACKENDS) {
  describe(`seed-style inserts on ${backend.name}`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await backend.fresh();
    });
    after(() => t.close());

    test('insert into ai_jobs (payload) enqueues a job of the payload\'s type, and a worker runs it', async () => {
      const seen: Array<{ type: string; n?: number }> = [];
      const record = (type: string): JobHandler<{ n?: number }> => ({ type, schema: anything, run: async ({ payload }) => void seen.push({ type, n: payload.n }) });
      const worker = new Worker({ db: t.db, logger: createLogger('silent'), handlers: [record('seed_a'), record('seed_b')], pollIntervalMs: 100 });
      await worker.start();
      try {
        const inserted = await t.db.query<{ id: string; type: string }>(`insert into ai_jobs (payload) values ('{"type": "seed_a", "n": 1}') returning id, type`);
        assert.equal(inserted.rows[0]!.type, 'seed_a');
        const explicit = await t.db.query<{ id: string; type: string }>(`insert into ai_jobs (type, payload) values ('seed_b', '{"type": "seed_a", "n": 2}') returning id, type`);
        assert.equal(explicit.rows[0]!.type, 'seed_b', 'the type column wins over the payload');
        worker.wake();
        for (const id of [inserted.rows[0]!.id, explicit.rows[0]!.id]) await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', `job ${id} done`);
        assert.deepEqual(seen.sort((a, b) => a.n! - b.n!), [{ type: 'seed_a', n: 1 }, { type: 'seed_b', n: 2 }]);
      } finally {
        await worker.stop();
      }
    });

    test('without a type anywhere the insert is refused with a clear reason and nothing is stored', async () => {
      const before = await t.db.query<{ n: number }>('select count(*)::int as n from ai_jobs');
      for (const payload of ['{"messageId": "m1"}', '{"type": ""}', '[1, 2]']) {
        await assert.rejects(t.db.query(`insert into ai_jobs (payload) values ($1::jsonb)`, [payload]), /a job needs a type: set the type column, or put "type" in the payload/, payload);
      }
      const afterwards = await t.db.query<{ n: number }>('select count(*)::int as n from ai_jobs');
      assert.equal(afterwards.rows[0]!.n, before.rows[0]!.n);
    });
  });
}

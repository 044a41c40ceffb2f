// Losing the database connection in the middle of a job (pg_terminate_backend on every
// connection of the worker) must not lose the job: it completes once the pool reconnects.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
import { createLogger } from '../src/logger.ts';
import { jobEnqueue, jobGet, Worker } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(() => t.close());

async function terminateWorkerConnections(url: string): Promise<number> {
  const killer = new pg.Client({ connectionString: url });
  await killer.connect();
  try {
    const result = await killer.query(
      `select pg_terminate_backend(pid) from pg_stat_activity
       where datname = current_database() and application_name like 'aiq-worker-under-test%'`,
    );
    return result.rowCount ?? 0;
  } finally {
    await killer.end();
  }
}

test('a job whose worker loses every database connection mid-run still completes, once', async () => {
  const db = openPostgres({ connectionString: t.url!, applicationName: 'aiq-worker-under-test', onError: () => {} });
  let runs = 0;
  let killed = 0;
  const worker = new Worker({
    db,
    logger: createLogger('silent'),
    pollIntervalMs: 200,
    handlers: [
      {
        type: 'fragile',
        schema: { safeParse: (input: unknown) => ({ success: true as const, data: input }) },
        async run() {
          runs++;
          if (runs === 1) killed = await terminateWorkerConnections(t.url!);
          return { runs };
        },
      },
    ],
  });
  await worker.start();
  try {
    const id = await jobEnqueue(t.db, { type: 'fragile', payload: {} });
    await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'job done after the connections came back', 20_000);
    assert.ok(killed >= 2, `terminated the pool and the LISTEN connection (${killed})`);
    assert.equal(runs, 1, 'the completed work was recorded, not redone');
    // The LISTEN connection came back too: a new job is picked up without the poll.
    const second = await jobEnqueue(t.db, { type: 'fragile', payload: {} });
    await waitFor(async () => (await jobGet(t.db, second))!.status === 'done', 'second job done', 20_000);
  } finally {
    await worker.stop();
    await db.close();
  }
});

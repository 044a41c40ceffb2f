// A real worker process for tests: runs the queue's Worker against DATABASE_URL with test
// handlers that record every execution in `test_runs`, so tests can count runs per job.
// Prints "ready" once it listens; SIGTERM/SIGINT stop it gracefully, and it prints how many
// statements and transactions the worker sent ("statements N"), for tests that compare load.
import { openPostgres } from '../../src/db/postgres.ts';
import type { Database } from '../../src/db/types.ts';
import { createLogger } from '../../src/logger.ts';
import { Worker, type JobHandler } from '../../src/queue/index.ts';

const db = openPostgres({ connectionString: process.env.DATABASE_URL!, poolSize: 5 });
let statements = 0;
const counted: Database = {
  ...db,
  query: (text, values) => (statements++, db.query(text, values)),
  transaction: (work) => (statements++, db.transaction(work)),
};
const anyPayload = { safeParse: (input: unknown) => ({ success: true as const, data: input as { sleepMs?: number } }) };

await db.query(`create table if not exists test_runs (job_id uuid not null, worker text not null, at timestamptz not null default now())`);

const record = (kind: string): JobHandler<{ sleepMs?: number }> => ({
  type: kind,
  schema: anyPayload,
  async run({ job, payload, signal }) {
    await db.query('insert into test_runs (job_id, worker) values ($1, $2)', [job.id, worker.id]);
    if (payload.sleepMs) {
      await new Promise((resolve, reject) => {
        const timer = setTimeout(resolve, payload.sleepMs);
        signal.addEventListener('abort', () => {
          clearTimeout(timer);
          reject(signal.reason);
        });
      });
    }
  },
});

const worker = new Worker({
  db: counted,
  handlers: [record('count')],
  logger: createLogger(process.env.LOG_LEVEL ?? 'silent'),
  concurrency: Number(process.env.WORKER_CONCURRENCY ?? 10),
  leaseSeconds: Number(process.env.JOB_LEASE_SECONDS ?? 30),
  shutdownGraceMs: Number(process.env.SHUTDOWN_GRACE_MS ?? 5000),
  pollIntervalMs: 500,
});
await worker.start();
console.log('ready');

const stop = async () => {
  await worker.stop();
  await db.close();
  console.log(`statements ${statements}`);
  process.exit(0);
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);

// The seed's own queue, as /work/shared/seed/design-note.nl.txt describes it: its table, its
// claim_ai_jobs, and its pollOnce loop (claim a batch, Promise.all, markDone per job, sleep
// 1 s when idle). Kept faithful, including its batch barrier, as the baseline aiq replaces.
// It lives in its own schema so it cannot touch aiq's tables.
import pg from 'pg';
import type { BenchPayload, BenchSystem, Handler } from './types.ts';

// The note's table and claim, verbatim apart from the schema name.
const SCHEMA_SQL = `
  create schema seed;
  create table seed.ai_jobs (
    id          uuid primary key default gen_random_uuid(),
    status      text not null default 'pending',
    payload     jsonb not null,
    attempts    int not null default 0,
    max_attempts int not null default 3,
    next_run_at timestamptz not null default now(),
    last_error  text,
    created_at  timestamptz default now(),
    updated_at  timestamptz default now()
  );
  create function seed.claim_ai_jobs(batch_size int) returns setof seed.ai_jobs language sql as $$
    update seed.ai_jobs
    set status = 'processing', attempts = attempts + 1, updated_at = now()
    where id in (
      select id from seed.ai_jobs
      where status = 'pending' and next_run_at <= now()
      order by next_run_at
      limit batch_size
      for update skip locked
    )
    returning *;
  $$;`;

const SLOW_JOB_THRESHOLD_MS = 8000;
const IDLE_SLEEP_MS = 1000;

/** min(2^attempts × 5, 300), as in the note. */
function calcBackoffSeconds(attempts: number): number {
  return Math.min(Math.pow(2, attempts) * 5, 300);
}

interface SeedJob {
  id: string;
  payload: BenchPayload;
  attempts: number;
  max_attempts: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export const seed: BenchSystem = {
  name: 'seed',
  variants: {
    defaults: { label: 'pollOnce(10), 1 s idle sleep', settings: { concurrency: 10, idleSleepMs: IDLE_SLEEP_MS } },
    best: { label: 'pollOnce(10), 1 s idle sleep', settings: { concurrency: 10, idleSleepMs: IDLE_SLEEP_MS } },
    hol: { label: 'pollOnce(50), 1 s idle sleep', settings: { concurrency: 50, idleSleepMs: IDLE_SLEEP_MS } },
  },
  async setup(url) {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(SCHEMA_SQL);
    await client.end();
  },
  async openProducer(url) {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    return {
      async enqueueMany(payloads) {
        // The seed inserts through supabase, whose array insert is one multi-row statement.
        await pool.query(`insert into seed.ai_jobs (payload) select * from unnest($1::jsonb[])`, [payloads.map((p) => JSON.stringify(p))]);
      },
      async enqueueOne(payload) {
        await pool.query(`insert into seed.ai_jobs (payload) values ($1)`, [JSON.stringify(payload)]);
      },
      close: () => pool.end(),
    };
  },
  async prepareWorker(url, variant, handler: Handler) {
    const concurrency = (seed.variants[variant]!.settings.concurrency as number) ?? 10;
    const pool = new pg.Pool({ connectionString: url, max: 10 });
    const claimNext = async (n: number) => (await pool.query<SeedJob>('select * from seed.claim_ai_jobs($1)', [n])).rows;
    const markDone = (id: string) => pool.query(`update seed.ai_jobs set status = 'done', updated_at = now() where id = $1`, [id]);
    const markFailed = (id: string, err: string) =>
      pool.query(`update seed.ai_jobs set status = 'failed', last_error = $2, updated_at = now() where id = $1`, [id, err]);
    const requeueWithBackoff = (id: string, attempts: number, err: string) =>
      pool.query(`update seed.ai_jobs set status = 'pending', last_error = $2, next_run_at = $3 where id = $1`, [
        id,
        err,
        new Date(Date.now() + calcBackoffSeconds(attempts) * 1000).toISOString(),
      ]);
    const executeJob = async (job: SeedJob): Promise<number> => {
      const started = Date.now();
      await handler(job.payload);
      await markDone(job.id);
      return Date.now() - started;
    };
    const pollOnce = async (n: number): Promise<number> => {
      const jobs = await claimNext(n);
      if (jobs.length === 0) return 0;
      await Promise.all(
        jobs.map(async (job) => {
          try {
            const durationMs = await executeJob(job);
            if (durationMs > SLOW_JOB_THRESHOLD_MS) console.warn(`SLOW job ${job.id}: ${durationMs}ms`);
          } catch (err) {
            const message = err instanceof Error ? err.message : String(err);
            if (job.attempts >= job.max_attempts) await markFailed(job.id, message);
            else await requeueWithBackoff(job.id, job.attempts, message);
          }
        }),
      );
      return jobs.length;
    };
    await pool.query('select 1');
    let stopping = false;
    let loop: Promise<void> | undefined;
    return {
      async start() {
        loop = (async () => {
          while (!stopping) {
            const n = await pollOnce(concurrency).catch((err: Error) => (console.error('[seed]', err.message), 0));
            if (n === 0 && !stopping) await sleep(IDLE_SLEEP_MS);
          }
        })();
      },
      async stop() {
        stopping = true;
        await loop;
        await pool.end();
      },
    };
  },
  unfinishedSql: `select count(*)::int as n from seed.ai_jobs where status <> 'done'`,
  notCompletedSql: `select count(*)::int as n from seed.ai_jobs where status <> 'done'`,
};

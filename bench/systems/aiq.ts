// aiq driven through its public queue API: jobEnqueueMany/jobEnqueue and the Worker.
import { migrate } from '../../src/db/migrate.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import { jobEnqueue, jobEnqueueMany, Worker, type JobHandler, type Logger, type WorkerOptions } from '../../src/queue/index.ts';
import type { BenchPayload, BenchSystem, Handler } from './types.ts';

const silent: Logger = {
  debug() {},
  info() {},
  warn() {},
  error(obj, msg) {
    console.error('[aiq]', msg, JSON.stringify(obj));
  },
  child() {
    return silent;
  },
};

const anyPayload = { safeParse: (input: unknown) => ({ success: true as const, data: input as BenchPayload }) };

type Settings = Pick<WorkerOptions, 'concurrency' | 'prefetch' | 'maxClaimBatch'>;

const settings: Record<string, Settings> = {
  defaults: { concurrency: 10 },
  pooled: { concurrency: 10 },
  'pooled-direct': { concurrency: 10 },
  best: { concurrency: 50, prefetch: 1000, maxClaimBatch: 1000 },
  hol: { concurrency: 50 },
};

/** The same database through the pooler at BENCH_POOLER_URL. */
function throughPooler(url: string): string {
  const pooler = process.env.BENCH_POOLER_URL;
  if (!pooler) throw new Error('the pooled variants need BENCH_POOLER_URL');
  return Object.assign(new URL(pooler), { pathname: new URL(url).pathname }).toString();
}

export const aiq: BenchSystem = {
  name: 'aiq',
  variants: {
    defaults: { label: 'defaults, concurrency 10', settings: settings.defaults! },
    best: { label: 'concurrency 50, prefetch 1000, maxClaimBatch 1000', settings: settings.best! },
    hol: { label: 'defaults, concurrency 50', settings: settings.hol! },
    pooled: { label: 'defaults through PgBouncer (transaction mode), no direct URL: polls every 2 s', settings: settings.pooled! },
    'pooled-direct': { label: 'defaults through PgBouncer, LISTEN on DATABASE_DIRECT_URL', settings: settings['pooled-direct']! },
  },
  async setup(url) {
    const db = openPostgres({ connectionString: url, poolSize: 1 });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
  },
  async openProducer(url) {
    const db = openPostgres({ connectionString: url, poolSize: 2, applicationName: 'bench-producer' });
    return {
      async enqueueMany(payloads) {
        await jobEnqueueMany(db, payloads.map((payload) => ({ type: 'bench', payload })));
      },
      async enqueueOne(payload) {
        await jobEnqueue(db, { type: 'bench', payload });
      },
      close: () => db.close(),
    };
  },
  async prepareWorker(url, variant, handler: Handler) {
    // The pooled variants reach the same database through BENCH_POOLER_URL's PgBouncer.
    const pooled = variant.startsWith('pooled') ? throughPooler(url) : url;
    const db = openPostgres({ connectionString: pooled, directConnectionString: variant === 'pooled-direct' ? url : undefined, applicationName: 'bench-worker' });
    await db.query('select 1');
    const bench: JobHandler<BenchPayload> = { type: 'bench', schema: anyPayload, run: ({ payload }) => handler(payload) };
    const worker = new Worker({ db, handlers: [bench], logger: silent, ...settings[variant] });
    return {
      start: () => worker.start(),
      async stop() {
        await worker.stop();
        await db.close();
      },
    };
  },
  // One count per state, each answered at once by its partial index (claim: pending, lease:
  // processing); `status in (…)` or `status <> 'done'` would scan a million finished rows on
  // every poll and bill that to the scale figure.
  unfinishedSql: `select ((select count(*) from ai_jobs where status = 'pending')
                        + (select count(*) from ai_jobs where status = 'processing'))::int as n`,
  notCompletedSql: `select count(*)::int as n from ai_jobs where status <> 'done'`,
};

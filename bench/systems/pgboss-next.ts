// The newest pg-boss (bench/next, Node 22+; `npm run bench -- --peers next`) through its
// public API: insert/send and work(), with the settings of pgboss.ts. What changed since
// 10.x: PgBoss is a named export, insert() takes the queue name first, stop() has no `wait`
// (it resolves once stopped), and one work() runs several pollers with localConcurrency,
// where 10.x needed one work() call each. Its default poll is still 2 s. Its newer options
// (LISTEN/NOTIFY with a queue's `notify`, burstWhenBatchFull) are left off: the variants
// stay the same as the 10.x ones.
// Imported by path from bench/next/node_modules (see graphile-next.ts for why, and for
// the type check on a clone that has not installed bench/next).
// @ts-ignore -- bench/next is installed only for this mode (npm ci --prefix bench/next)
import { PgBoss } from '../next/node_modules/pg-boss/dist/index.js';
import { peerVersion } from './peers.ts';
import type { BenchPayload, BenchSystem } from './types.ts';

const QUEUE = 'bench';
const version = peerVersion('pg-boss', 'next');

/** pgboss.ts's settings: its `workers` work() calls are localConcurrency here. */
const settings: Record<string, { localConcurrency: number; batchSize: number; pollingIntervalSeconds?: number }> = {
  defaults: { localConcurrency: 1, batchSize: 10 },
  best: { localConcurrency: 4, batchSize: 500, pollingIntervalSeconds: 0.5 },
};

async function openBoss(url: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url });
  boss.on('error', (err: Error) => console.error('[pg-boss]', err.message));
  await boss.start();
  return boss;
}

export const pgboss: BenchSystem = {
  name: 'pg-boss',
  variants: {
    defaults: { label: `${version}: one work(), batchSize 10, 2 s poll (default)`, settings: settings.defaults! },
    best: { label: `${version}: one work() with localConcurrency 4 × batchSize 500, 0.5 s poll`, settings: settings.best! },
  },
  async setup(url) {
    const boss = await openBoss(url);
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false });
  },
  async openProducer(url) {
    const boss = await openBoss(url);
    return {
      async enqueueMany(payloads) {
        await boss.insert(QUEUE, payloads.map((data) => ({ data })));
      },
      async enqueueOne(payload) {
        await boss.send(QUEUE, payload);
      },
      close: () => boss.stop({ graceful: false }),
    };
  },
  async prepareWorker(url, variant, handler) {
    const options = settings[variant]!;
    const boss = await openBoss(url);
    return {
      async start() {
        // A pg-boss handler receives the fetched batch; running it with Promise.all is how a
        // batch is processed in parallel (and why a slow job holds back its batch).
        await boss.work<BenchPayload>(QUEUE, options, (jobs: Array<{ data: BenchPayload }>) => Promise.all(jobs.map((job) => handler(job.data))));
      },
      stop: () => boss.stop({ graceful: false }),
    };
  },
  unfinishedSql: `select count(*)::int as n from pgboss.job where state <> 'completed'`,
  notCompletedSql: `select count(*)::int as n from pgboss.job where state <> 'completed'`,
};

// pg-boss 10.4.2 through its public API: insert/send and work(). Settings are the ones in
// issue #3's table; its default poll is 2 s, which bounds its default throughput.
import PgBoss from 'pg-boss';
import type { BenchPayload, BenchSystem } from './types.ts';

const QUEUE = 'bench';

const settings: Record<string, { workers: number; batchSize: number; pollingIntervalSeconds?: number }> = {
  defaults: { workers: 1, batchSize: 10 },
  best: { workers: 4, batchSize: 500, pollingIntervalSeconds: 0.5 },
};

async function openBoss(url: string): Promise<PgBoss> {
  const boss = new PgBoss({ connectionString: url });
  boss.on('error', (err) => console.error('[pg-boss]', err.message));
  await boss.start();
  return boss;
}

export const pgboss: BenchSystem = {
  name: 'pg-boss',
  variants: {
    defaults: { label: 'one work(), batchSize 10', settings: settings.defaults! },
    best: { label: '4 workers × batchSize 500, 0.5 s poll', settings: settings.best! },
  },
  async setup(url) {
    const boss = await openBoss(url);
    await boss.createQueue(QUEUE);
    await boss.stop({ graceful: false, wait: true });
  },
  async openProducer(url) {
    const boss = await openBoss(url);
    return {
      async enqueueMany(payloads) {
        await boss.insert(payloads.map((data) => ({ name: QUEUE, data })));
      },
      async enqueueOne(payload) {
        await boss.send(QUEUE, payload);
      },
      close: () => boss.stop({ graceful: false, wait: true }),
    };
  },
  async prepareWorker(url, variant, handler) {
    const { workers, ...options } = settings[variant]!;
    const boss = await openBoss(url);
    return {
      async start() {
        // A pg-boss handler receives the fetched batch; running it with Promise.all is how a
        // batch is processed in parallel (and why a slow job holds back its batch).
        for (let i = 0; i < workers; i++) {
          await boss.work<BenchPayload>(QUEUE, options, (jobs) => Promise.all(jobs.map((job) => handler(job.data))));
        }
      },
      stop: () => boss.stop({ graceful: false, wait: true }),
    };
  },
  unfinishedSql: `select count(*)::int as n from pgboss.job where state <> 'completed'`,
  notCompletedSql: `select count(*)::int as n from pgboss.job where state <> 'completed'`,
};

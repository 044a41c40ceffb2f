// graphile-worker 0.17.3 through its public API: runMigrations, makeWorkerUtils
// (addJobs/addJob) and run() with a task list. Settings are the ones in issue #3's table.
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import type { BenchPayload, BenchSystem } from './types.ts';

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error('[graphile-worker]', message);
});

const settings: Record<string, { concurrentJobs: number; localQueue?: { size: number }; completeJobBatchDelay?: number; failJobBatchDelay?: number }> = {
  defaults: { concurrentJobs: 10 },
  best: { concurrentJobs: 24, localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  hol: { concurrentJobs: 50 },
};

export const graphile: BenchSystem = {
  name: 'graphile-worker',
  variants: {
    defaults: { label: 'defaults, concurrency 10', settings: settings.defaults! },
    best: { label: 'concurrency 24, localQueue 500, batch delays 0', settings: settings.best! },
    hol: { label: 'defaults, concurrency 50', settings: settings.hol! },
  },
  async setup(url) {
    await runMigrations({ connectionString: url, logger: quiet });
  },
  async openProducer(url) {
    const utils = await makeWorkerUtils({ connectionString: url, logger: quiet });
    return {
      async enqueueMany(payloads) {
        await utils.addJobs(payloads.map((payload) => ({ identifier: 'bench', payload })));
      },
      async enqueueOne(payload) {
        await utils.addJob('bench', payload);
      },
      close: async () => {
        await utils.release();
      },
    };
  },
  async prepareWorker(url, variant, handler) {
    // run() connects and starts in one call: there is nothing to open ahead of it.
    let runner: Awaited<ReturnType<typeof run>> | undefined;
    return {
      async start() {
        runner = await run({
          connectionString: url,
          noHandleSignals: true,
          logger: quiet,
          taskList: { bench: (payload) => handler(payload as BenchPayload) },
          preset: { worker: settings[variant] },
        });
      },
      stop: async () => runner?.stop(),
    };
  },
  unfinishedSql: `select count(*)::int as n from graphile_worker._private_jobs`,
  notCompletedSql: `select count(*)::int as n from graphile_worker._private_jobs`,
};

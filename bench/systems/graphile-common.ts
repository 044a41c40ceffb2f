// graphile-worker as the benchmark drives it, whichever version: runMigrations,
// makeWorkerUtils (addJobs/addJob) and run() with a task list. The settings are the ones in
// issue #3's table; graphile.ts binds this to the root's 0.17.3 (Node 20) and
// graphile-next.ts to bench/next's newest release (Node 24, `--peers next`), so both run
// the same variants.
import type { BenchPayload, BenchSystem, Handler } from './types.ts';

/** The `worker` settings of graphile-worker's preset (the same names in 0.17 and 0.18). */
export type GraphileSettings = {
  concurrentJobs: number;
  localQueue?: { size: number };
  completeJobBatchDelay?: number;
  failJobBatchDelay?: number;
};

const settings: Record<string, GraphileSettings> = {
  defaults: { concurrentJobs: 10 },
  best: { concurrentJobs: 24, localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 },
  hol: { concurrentJobs: 50 },
};

/** Only errors reach the console. */
export const quietLog = (level: string, message: string) => {
  if (level === 'error') console.error('[graphile-worker]', message);
};

/** The three calls that differ by version only in where they come from. */
export interface GraphileApi {
  migrate(url: string): Promise<void>;
  workerUtils(url: string): Promise<{
    addJobs(specs: Array<{ identifier: string; payload: BenchPayload }>): Promise<unknown>;
    addJob(identifier: string, payload: BenchPayload): Promise<unknown>;
    release(): unknown;
  }>;
  run(url: string, settings: GraphileSettings, task: (payload: unknown) => Promise<void>): Promise<{ stop(): Promise<void> }>;
}

export function graphileSystem(api: GraphileApi, version: string): BenchSystem {
  return {
    name: 'graphile-worker',
    variants: {
      defaults: { label: `${version}: defaults, concurrency 10`, settings: settings.defaults! },
      best: { label: `${version}: concurrency 24, localQueue 500, batch delays 0`, settings: settings.best! },
      hol: { label: `${version}: defaults, concurrency 50`, settings: settings.hol! },
    },
    setup: (url) => api.migrate(url),
    async openProducer(url) {
      const utils = await api.workerUtils(url);
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
    async prepareWorker(url, variant, handler: Handler) {
      // run() connects and starts in one call: there is nothing to open ahead of it.
      let runner: { stop(): Promise<void> } | undefined;
      return {
        async start() {
          runner = await api.run(url, settings[variant]!, (payload) => handler(payload as BenchPayload));
        },
        stop: async () => runner?.stop(),
      };
    },
    unfinishedSql: `select count(*)::int as n from graphile_worker._private_jobs`,
    notCompletedSql: `select count(*)::int as n from graphile_worker._private_jobs`,
  };
}

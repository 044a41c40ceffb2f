// The newest graphile-worker (bench/next, Node 22+; `npm run bench -- --peers next`) through
// the same public API and the same settings as graphile.ts (graphile-common.ts). Imported by
// path from bench/next/node_modules, so the root's 0.17.3 is never picked up by mistake.
// The type check must pass on a clone that has not installed bench/next: there the import
// has no types (any); once installed, tsc checks these calls against 0.18's own types.
// @ts-ignore -- bench/next is installed only for this mode (npm ci --prefix bench/next)
import { Logger, makeWorkerUtils, run, runMigrations } from '../next/node_modules/graphile-worker/dist/index.js';
import { graphileSystem, quietLog } from './graphile-common.ts';
import type { GraphileSettings } from './graphile-common.ts';
import { peerVersion } from './peers.ts';

const logger = new Logger(() => quietLog);

export const graphile = graphileSystem(
  {
    migrate: (url: string) => runMigrations({ connectionString: url, logger }),
    workerUtils: (url: string) => makeWorkerUtils({ connectionString: url, logger }),
    run: (url: string, settings: GraphileSettings, task: (payload: unknown) => Promise<void>) =>
      run({ connectionString: url, noHandleSignals: true, logger, taskList: { bench: task }, preset: { worker: settings } }),
  },
  peerVersion('graphile-worker', 'next'),
);

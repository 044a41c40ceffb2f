// graphile-worker 0.17.3 (the root devDependency, the last release that runs on Node 20)
// through its public API; what the benchmark does with it is in graphile-common.ts.
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import { graphileSystem, quietLog } from './graphile-common.ts';
import { peerVersion } from './peers.ts';

const logger = new Logger(() => quietLog);

export const graphile = graphileSystem(
  {
    migrate: (url) => runMigrations({ connectionString: url, logger }),
    workerUtils: (url) => makeWorkerUtils({ connectionString: url, logger }),
    run: (url, settings, task) =>
      run({ connectionString: url, noHandleSignals: true, logger, taskList: { bench: task }, preset: { worker: settings } }),
  },
  peerVersion('graphile-worker', 'default'),
);

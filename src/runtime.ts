// What every part of a running aiq process shares: configuration, database, logger and the
// job handlers. Built once by main.ts (the composition root) and passed down explicitly.
import type { Env } from './config.ts';
import type { Database } from './db/types.ts';
import type { Logger } from 'pino';
import type { JobHandler } from './queue/index.ts';

export interface Runtime {
  config: Env;
  db: Database;
  logger: Logger;
  handlers: JobHandler<any>[];
}

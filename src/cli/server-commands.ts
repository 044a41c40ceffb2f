// Long-running commands (start, serve, worker) and migrate.
import { migrate, pendingMigrations } from '../db/migrate.ts';
import { openDatabase } from '../db/open.ts';
import { run } from '../main.ts';
import type { Command } from './command.ts';

export const serverCommands: Command[] = [
  {
    name: 'start',
    usage: 'start',
    summary: 'server and worker in one process (the default; works on the embedded database)',
    run: (_args, config) => run(config, 'start'),
  },
  {
    name: 'serve',
    usage: 'serve',
    summary: 'HTTP only: webhooks, dashboard, API, metrics (needs DATABASE_URL)',
    run: (_args, config) => run(config, 'serve'),
  },
  {
    name: 'worker',
    usage: 'worker',
    summary: 'run jobs only; start as many as you like (needs DATABASE_URL)',
    run: (_args, config) => run(config, 'worker'),
  },
  {
    name: 'migrate',
    usage: 'migrate [--status]',
    summary: 'apply pending database migrations (start-up does this too)',
    async run(args, config) {
      const db = await openDatabase({ databaseUrl: config.DATABASE_URL, dataDir: config.DATA_DIR, applicationName: 'aiq-migrate' });
      try {
        if (args.includes('--status')) {
          const pending = await pendingMigrations(db);
          console.log(pending.length === 0 ? 'schema is up to date' : `pending: ${pending.join(', ')}`);
          return pending.length === 0 ? 0 : 1;
        }
        const applied = await migrate(db);
        console.log(applied.length === 0 ? 'schema is up to date; nothing to apply' : `applied: ${applied.join(', ')}`);
      } finally {
        await db.close();
      }
    },
  },
];

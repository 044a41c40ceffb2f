// Long-running commands (start, serve, worker) and migrate.
import type { Env } from '../config.ts';
import type { Role } from '../main.ts';
import { stopOnSignals } from '../shutdown.ts';
import { refuseMissingEmbedded, UsageError, type Command } from './command.ts';

/** The application is loaded when a server starts, not for `aiq --help`. */
async function run(config: Env, role: Role): Promise<void> {
  stopOnSignals(); // before the application loads: a SIGTERM meanwhile must not kill it half-started
  const main = await import('../main.ts');
  await main.run(config, role);
}

export const serverCommands: Command[] = [
  {
    name: 'start',
    group: 'Run aiq',
    summary: 'server and worker in one process (what `npm start` runs; works on the embedded database)',
    example: 'aiq start\nPORT=8080 DATABASE_URL=postgres://localhost/aiq aiq start',
    run: (_input, config) => run(config, 'start'),
  },
  {
    name: 'serve',
    group: 'Run aiq',
    summary: 'HTTP only: webhooks, dashboard, API, metrics (needs DATABASE_URL)',
    example: 'DATABASE_URL=postgres://db/aiq aiq serve',
    run: (_input, config) => run(config, 'serve'),
  },
  {
    name: 'worker',
    group: 'Run aiq',
    summary: 'run jobs only; start as many as you like (needs DATABASE_URL)',
    example: 'DATABASE_URL=postgres://db/aiq WORKER_CONCURRENCY=50 aiq worker',
    run: (_input, config) => run(config, 'worker'),
  },
  {
    name: 'doctor',
    group: 'Run aiq',
    summary: 'check configuration, database, pooler, schema, embeddings, Twilio and the AI provider',
    example: 'aiq doctor\nDATABASE_DIRECT_URL=postgres://db:5432/aiq aiq doctor',
    run: async (_input, config) => (await import('./doctor.ts')).doctor(config),
  },
  {
    name: 'backup',
    args: '<file>',
    group: 'Run aiq',
    summary: 'write a consistent copy of the embedded database (also while aiq start runs)',
    options: { force: { type: 'boolean', description: 'replace the file when it exists (without it, an existing file is left alone)' } },
    example: 'aiq backup backups/aiq-$(date +%F).tar.gz',
    run: async (input, config) => (await import('./backup.ts')).backup(input, config),
  },
  {
    name: 'restore',
    args: '<file>',
    group: 'Run aiq',
    summary: 'load a backup as the embedded database (stop aiq first; the current one is moved aside)',
    example: 'aiq restore backups/aiq-2026-12-04.tar.gz',
    run: async (input, config) => (await import('./backup.ts')).restore(input, config),
  },
  {
    name: 'migrate',
    group: 'Run aiq',
    summary: 'apply pending database migrations (start-up does this too)',
    options: { status: { type: 'boolean', description: 'only list pending migrations; change nothing (exit 1 when some are pending, or a newer aiq migrated the database)' } },
    example: 'aiq migrate --status',
    async run({ values }, config) {
      if (values.status) refuseMissingEmbedded(config);
      const [{ openDatabase }, { migrate, pendingMigrations, unknownMigrations }] = await Promise.all([import('../db/open.ts'), import('../db/migrate.ts')]);
      const db = await openDatabase({ databaseUrl: config.DATABASE_URL && (config.DATABASE_DIRECT_URL ?? config.DATABASE_URL), dataDir: config.DATA_DIR, applicationName: 'aiq-migrate', joinRunning: true });
      try {
        if (config.DATABASE_URL && config.DATABASE_DIRECT_URL) {
          const [{ openPostgres }, { databaseIdentity, directElsewhere }] = await Promise.all([import('../db/postgres.ts'), import('../db/pooler.ts')]);
          const main = openPostgres({ connectionString: config.DATABASE_URL, poolSize: 1, preparedStatements: 'off', applicationName: 'aiq-migrate' });
          const through = await databaseIdentity(main)
            .catch((err: Error) => {
              err.message = `DATABASE_URL: ${err.message}`;
              throw err;
            })
            .finally(() => main.close());
          const elsewhere = directElsewhere(through, await databaseIdentity(db));
          if (elsewhere) throw new UsageError(`nothing ${values.status ? 'checked' : 'applied'}: ${elsewhere}`);
        }
        if (values.status) {
          const [pending, unknown] = await Promise.all([pendingMigrations(db), unknownMigrations(db)]);
          if (unknown.length > 0) console.log(`the schema is newer than this aiq: a newer aiq applied ${unknown.join(', ')}, which this version does not know; run that version or a later one`);
          if (pending.length > 0) console.log(`pending: ${pending.join(', ')}`);
          if (pending.length + unknown.length === 0) console.log('schema is up to date');
          return pending.length + unknown.length === 0 ? 0 : 1;
        }
        const applied = await migrate(db).catch((err: Error) => {
          if (config.DATABASE_DIRECT_URL) err.message = `DATABASE_DIRECT_URL: ${err.message}`;
          throw err;
        });
        console.log(applied.length === 0 ? 'schema is up to date; nothing to apply' : `applied: ${applied.join(', ')}`);
      } finally {
        await db.close();
      }
    },
  },
];

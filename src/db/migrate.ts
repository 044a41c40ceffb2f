// Applies the numbered plain-SQL files in migrations/ in order, each recorded in
// aiq_migrations, all inside one transaction under an advisory lock so that two processes
// starting at once do not collide: the second waits, then finds nothing left to do.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Database, Queryable } from './types.ts';

export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** The migration files, ordered by their number (`0001_queue.sql` → version 1). */
export function migrationFiles(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{4}_[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 4)),
      name: file.replace(/\.sql$/, ''),
      sql: readFileSync(`${dir}/${file}`, 'utf8'),
    }));
}

// Any constant works as the lock key; this one is ours alone ('aiq:migrate').
const MIGRATION_LOCK_KEY = 727_001;

/** Applies every migration not yet recorded; returns the names it applied. */
export async function migrate(db: Database, migrations = migrationFiles()): Promise<string[]> {
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    await tx.query(`
      create table if not exists aiq_migrations (
        version    int primary key,
        name       text not null,
        applied_at timestamptz not null default now()
      )`);
    const applied = new Set((await tx.query<{ version: number }>('select version from aiq_migrations')).rows.map((r) => r.version));
    const done: string[] = [];
    for (const migration of migrations) {
      if (applied.has(migration.version)) continue;
      await tx.exec(migration.sql);
      await tx.query('insert into aiq_migrations (version, name) values ($1, $2)', [migration.version, migration.name]);
      done.push(migration.name);
    }
    return done;
  });
}

/**
 * The migrations the database has that `migrations` does not: a newer aiq applied them (a
 * rollback, a backup of a newer version). This version's code was not written for that schema.
 */
export async function unknownMigrations(db: RowReader, migrations = migrationFiles()): Promise<string[]> {
  const exists = await db.query<{ exists: boolean }>("select to_regclass('aiq_migrations') is not null as exists");
  if (!exists.rows[0]?.exists) return [];
  const { rows } = await db.query<{ name: string }>('select name from aiq_migrations where version <> all($1::int[]) order by version', [migrations.map((m) => m.version)]);
  return rows.map((r) => r.name);
}

/** What reading rows takes: a Queryable, or a bare PGlite (a restore checks a backup with one). */
interface RowReader {
  query<R>(text: string, values?: unknown[]): Promise<{ rows: R[] }>;
}

/** The migrations not yet applied (for /readyz and `aiq migrate --status`). */
export async function pendingMigrations(db: Queryable, migrations = migrationFiles()): Promise<string[]> {
  const exists = await db.query<{ exists: boolean }>("select to_regclass('aiq_migrations') is not null as exists");
  if (!exists.rows[0]?.exists) return migrations.map((m) => m.name);
  const applied = new Set((await db.query<{ version: number }>('select version from aiq_migrations')).rows.map((r) => r.version));
  return migrations.filter((m) => !applied.has(m.version)).map((m) => m.name);
}

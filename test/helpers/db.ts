// Test databases: real PostgreSQL, one fresh database per test file cloned from a
// migrated template (`create database … template …`), and fresh in-memory PGlite databases
// loaded from a migrated, dumped data folder (cached on disk) so none pays for initdb.
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { migrate, migrationFiles } from '../../src/db/migrate.ts';
import { openPglite } from '../../src/db/pglite.ts';
import { openPostgres } from '../../src/db/postgres.ts';
import type { Database } from '../../src/db/types.ts';

export const SERVER_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const schemaHash = createHash('sha256')
  .update(migrationFiles().map((m) => m.name + m.sql).join('\n'))
  .digest('hex')
  .slice(0, 12);
const TEMPLATE = `aiq_tpl_${schemaHash}`;

/**
 * Set by CI's pooler run: the code under test reaches its database through PgBouncer in
 * transaction mode, while databases are created and dropped on the server directly.
 */
export const POOLER_URL = process.env.TEST_POOLER_URL || undefined;
/** The same PgBouncer's Unix-socket folder (CI sets it too), for what differs there. */
export const POOLER_SOCKET_DIR = process.env.TEST_POOLER_SOCKET_DIR || undefined;

function urlFor(database: string, base = SERVER_URL): string {
  const url = new URL(base);
  url.pathname = `/${database}`;
  return url.toString();
}

async function admin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: SERVER_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

async function ensureTemplate(): Promise<void> {
  await admin(async (client) => {
    // Test files run in parallel processes: one builds the template, the others wait.
    await client.query('select pg_advisory_lock(727002)');
    try {
      const exists = await client.query('select 1 from pg_database where datname = $1', [TEMPLATE]);
      if (exists.rowCount) return;
      await client.query(`create database ${TEMPLATE}_build`).catch(() => {});
      const db = openPostgres({ connectionString: urlFor(`${TEMPLATE}_build`) });
      try {
        await migrate(db);
      } finally {
        await db.close();
      }
      await client.query(`alter database ${TEMPLATE}_build rename to ${TEMPLATE}`);
    } finally {
      await client.query('select pg_advisory_unlock(727002)');
    }
  });
}

export interface TestDatabase {
  db: Database;
  /** Connection string (server databases only), for child processes: through the pooler in a pooler run. */
  url?: string;
  /** The same database on the server itself, never through a pooler. */
  directUrl?: string;
  close(): Promise<void>;
}

/** A fresh, migrated database on the PostgreSQL server. */
export async function freshServerDatabase(): Promise<TestDatabase> {
  await ensureTemplate();
  const name = `aiq_t_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  await admin((client) => client.query(`create database ${name} template ${TEMPLATE}`));
  const url = urlFor(name, POOLER_URL);
  // As a deployment behind a pooler would: LISTEN on a direct connection (DATABASE_DIRECT_URL).
  const db = openPostgres({ connectionString: url, directConnectionString: POOLER_URL && urlFor(name), poolSize: 20 });
  return {
    db,
    url,
    directUrl: urlFor(name),
    async close() {
      await db.close();
      await admin((client) => client.query(`drop database if exists ${name} with (force)`));
    },
  };
}

async function pgliteTemplate(): Promise<Blob> {
  const cacheDir = join(tmpdir(), 'aiq-test-cache');
  const file = join(cacheDir, `pglite-${schemaHash}.tar`);
  if (!existsSync(file)) {
    const db = await openPglite();
    await migrate(db);
    const dump = await db.dump();
    await db.close();
    mkdirSync(cacheDir, { recursive: true });
    const partial = `${file}.${process.pid}`;
    writeFileSync(partial, Buffer.from(await dump.arrayBuffer()));
    renameSync(partial, file);
  }
  return new Blob([readFileSync(file)]);
}

/**
 * Puts a migrated embedded database into `dataDir` (its pgdata folder), as `aiq start`
 * would leave it, copied from one built once per schema. Creating an embedded database
 * costs PGlite's initdb, about 10 s of CPU on this machine (reopening one costs 1 s), and
 * dozens of tests start aiq on a new folder only to test something else: on CI's two
 * cores, shared by two test processes, that was minutes of every run. A test about the
 * creation itself (the first start, a new folder's mode) does not call this.
 */
export async function seedEmbeddedDataDir(dataDir: string): Promise<void> {
  const seed = join(tmpdir(), 'aiq-test-cache', `pglite-dir-${schemaHash}`);
  if (!existsSync(seed)) {
    // Test files run in parallel processes: each builds its own and the first rename wins.
    const build = `${seed}.${process.pid}`;
    rmSync(build, { recursive: true, force: true });
    const db = await openPglite({ dataDir: build });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    try {
      renameSync(join(build, 'pgdata'), seed);
    } catch (err) {
      if (!existsSync(seed)) throw err;
    }
    rmSync(build, { recursive: true, force: true });
  }
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  cpSync(seed, join(dataDir, 'pgdata'), { recursive: true });
}

/** A fresh, migrated in-memory PGlite database. */
export async function freshPgliteDatabase(): Promise<TestDatabase> {
  const db = await openPglite({ loadDataDir: await pgliteTemplate() });
  return { db, close: () => db.close() };
}

export const BACKENDS = [
  { name: 'postgres', fresh: freshServerDatabase },
  { name: 'pglite', fresh: freshPgliteDatabase },
] as const;

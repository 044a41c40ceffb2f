// Fresh databases for benchmark runs on the server PostgreSQL: every measured run gets its
// own, created from template0 and dropped afterwards, so no run sees another's rows.
import pg from 'pg';

export const ADMIN_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export function urlFor(database: string): string {
  const url = new URL(ADMIN_URL);
  url.pathname = `/${database}`;
  return url.toString();
}

export async function withAdmin<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: ADMIN_URL });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

let counter = 0;

/** Creates an empty database and returns its name and URL. */
export async function createDatabase(): Promise<{ name: string; url: string }> {
  counter += 1;
  const name = `aiq_bench_${process.pid}_${counter}`;
  // Database names are identifiers: quoted as such, never passed as values.
  await withAdmin((client) => client.query(`create database ${pg.escapeIdentifier(name)} template template0`));
  return { name, url: urlFor(name) };
}

export async function dropDatabase(name: string): Promise<void> {
  await withAdmin((client) => client.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`));
}

/**
 * Drops databases left behind by an interrupted earlier benchmark: only those whose
 * process (the pid in the name) is gone, so two benchmarks can run side by side.
 */
export async function dropLeftovers(): Promise<void> {
  await withAdmin(async (client) => {
    const rows = await client.query<{ datname: string }>(`select datname from pg_database where datname like 'aiq\\_bench\\_%'`);
    for (const row of rows.rows) {
      const pid = Number(row.datname.split('_')[2]);
      if (Number.isInteger(pid) && processAlive(pid)) continue;
      await client.query(`drop database if exists ${pg.escapeIdentifier(row.datname)} with (force)`);
    }
  });
}

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** A short-lived connection to a benchmark database. */
export async function withDatabase<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

// Chooses the database from configuration: a server when DATABASE_URL is set, else the
// embedded PGlite in DATA_DIR.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { DataDirLockedError } from './errors.ts';
import { socketPathFor } from './pglite-socket.ts';
import type { PreparedStatementsMode } from './prepared.ts';
import type { Database } from './types.ts';

export interface OpenOptions {
  databaseUrl?: string;
  /** Bypasses a transaction-mode pooler, for LISTEN (see PostgresOptions). */
  databaseDirectUrl?: string;
  dataDir: string;
  poolSize?: number;
  /** Named prepared statements on a server database (see PostgresOptions). */
  preparedStatements?: PreparedStatementsMode;
  applicationName?: string;
  onError?: (err: Error) => void;
  /** Serve the embedded database to CLI commands and psql (`aiq start`). */
  serveSocket?: boolean;
  /**
   * When a running `aiq start` holds the embedded database, reach it through its socket
   * instead of failing (one-shot CLI commands; never a second server or worker).
   */
  joinRunning?: boolean;
}

export async function openDatabase(options: OpenOptions): Promise<Database> {
  // Each driver is loaded only when it is used: PGlite's WebAssembly is not for a server's CLI.
  if (options.databaseUrl) {
    const { openPostgres } = await import('./postgres.ts');
    return openPostgres({
      connectionString: options.databaseUrl,
      directConnectionString: options.databaseDirectUrl,
      poolSize: options.poolSize,
      preparedStatements: options.preparedStatements,
      applicationName: options.applicationName,
      onError: options.onError,
    });
  }
  const { openPglite } = await import('./pglite.ts');
  try {
    return await openPglite({ dataDir: options.dataDir, serveSocket: options.serveSocket, onError: options.onError });
  } catch (err) {
    if (!(err instanceof DataDirLockedError) || !options.joinRunning) throw err;
    const socketDir = resolve(options.dataDir);
    if (!existsSync(socketPathFor(socketDir))) throw err;
    // The running aiq speaks PostgreSQL's protocol on its socket: node-postgres reaches it.
    const { openPostgres } = await import('./postgres.ts');
    return openPostgres({
      connectionString: `postgresql://postgres@/postgres?host=${encodeURIComponent(socketDir)}`,
      poolSize: options.poolSize,
      // A one-shot command on a socket that serves one connection at a time: nothing to gain.
      preparedStatements: 'off',
      applicationName: options.applicationName,
      onError: options.onError,
    });
  }
}

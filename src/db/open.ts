// Chooses the database from configuration: a server when DATABASE_URL is set, else the
// embedded PGlite in DATA_DIR.
import { openPglite } from './pglite.ts';
import { openPostgres } from './postgres.ts';
import type { Database } from './types.ts';

export interface OpenOptions {
  databaseUrl?: string;
  dataDir: string;
  poolSize?: number;
  applicationName?: string;
  onError?: (err: Error) => void;
}

export async function openDatabase(options: OpenOptions): Promise<Database> {
  if (options.databaseUrl) {
    return openPostgres({
      connectionString: options.databaseUrl,
      poolSize: options.poolSize,
      applicationName: options.applicationName,
      onError: options.onError,
    });
  }
  return openPglite({ dataDir: options.dataDir });
}

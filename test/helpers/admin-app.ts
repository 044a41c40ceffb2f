// A built app (no port unless asked) over a fresh server database, assembled by the real
// composition root (openRuntime), for the dashboard, API and metrics tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/http/app.ts';
import { openRuntime } from '../../src/main.ts';
import type { Runtime } from '../../src/runtime.ts';
import { freshServerDatabase, seedEmbeddedDataDir, type TestDatabase } from './db.ts';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface AdminApp {
  app: FastifyInstance;
  runtime: Runtime;
  database: TestDatabase;
  close(): Promise<void>;
}

/** Builds the app on a fresh server database; `env` overrides the defaults (token set, local AI, log transport). */
export async function startAdminApp(env: Record<string, string> = {}, database?: TestDatabase): Promise<AdminApp> {
  const t = database ?? (await freshServerDatabase());
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_TOKEN: TEST_ADMIN_TOKEN, AI_PROVIDER: 'local', DATABASE_URL: t.url!, ...env });
  const runtime = await openRuntime(config, 'cli');
  const app = await buildApp(runtime);
  return {
    app,
    runtime,
    database: t,
    async close() {
      await app.close();
      await runtime.db.close();
      if (!database) await t.close();
    },
  };
}

/** The same on the embedded database (PGlite) in a temporary data folder, as `npm start` runs. */
export async function startEmbeddedAdminApp(env: Record<string, string> = {}): Promise<Omit<AdminApp, 'database'>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'aiq-admin-'));
  await seedEmbeddedDataDir(dataDir);
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_TOKEN: TEST_ADMIN_TOKEN, AI_PROVIDER: 'local', DATA_DIR: dataDir, ...env });
  const runtime = await openRuntime(config, 'cli');
  const app = await buildApp(runtime);
  return {
    app,
    runtime,
    async close() {
      await app.close();
      await runtime.db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

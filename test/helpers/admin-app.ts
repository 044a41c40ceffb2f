// A built app (no port unless asked) over a fresh database, with the real config loader,
// metrics and handlers, for the dashboard, API and metrics tests.
import type { FastifyInstance } from 'fastify';
import { loadConfig } from '../../src/config.ts';
import { aiProviderCreate } from '../../src/ai/providers.ts';
import { buildApp } from '../../src/http/app.ts';
import { PromMetrics } from '../../src/http/metrics.ts';
import { buildHandlers } from '../../src/jobs/registry.ts';
import { createLogger } from '../../src/logger.ts';
import type { Runtime } from '../../src/runtime.ts';
import { freshServerDatabase, type TestDatabase } from './db.ts';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface AdminApp {
  app: FastifyInstance;
  runtime: Runtime;
  database: TestDatabase;
  close(): Promise<void>;
}

/** Builds the app on a fresh server database; `env` overrides the defaults (token set). */
export async function startAdminApp(env: Record<string, string> = {}, database?: TestDatabase): Promise<AdminApp> {
  const t = database ?? (await freshServerDatabase());
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', ADMIN_TOKEN: TEST_ADMIN_TOKEN, ...env });
  const runtime: Runtime = { config, db: t.db, logger: createLogger('silent'), handlers: [], metrics: new PromMetrics(t.db, 'local'), ai: aiProviderCreate(config) };
  runtime.handlers = buildHandlers(runtime);
  const app = await buildApp(runtime);
  return {
    app,
    runtime,
    database: t,
    async close() {
      await app.close();
      await t.close();
    },
  };
}

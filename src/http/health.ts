// Liveness and readiness for load balancers and orchestrators.
import type { FastifyPluginAsync } from 'fastify';
import { pendingMigrations } from '../db/migrate.ts';
import type { Runtime } from '../runtime.ts';

export const healthRoutes: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  // Up: the process answers. Says nothing about the database, on purpose.
  app.get('/healthz', async () => ({ status: 'ok' }));

  // Ready: the database answers and its schema is current.
  app.get('/readyz', async (_request, reply) => {
    try {
      const pending = await pendingMigrations(runtime.db);
      if (pending.length > 0) return reply.status(503).send({ status: 'migrations pending', pending });
      return { status: 'ready', database: runtime.db.kind };
    } catch {
      return reply.status(503).send({ status: 'database unreachable' });
    }
  });
};

// Liveness and readiness for load balancers and orchestrators.
import type { FastifyPluginAsync } from 'fastify';
import { embeddingSpaceOf } from '../ai/types.ts';
import { pendingMigrations } from '../db/migrate.ts';
import { VectorSpaceMismatchError, vectorSpaceCheck } from '../knowledge/vectors.ts';
import type { Runtime } from '../runtime.ts';

export const healthRoutes: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  // Up: the process answers. Says nothing about the database, on purpose.
  app.get('/healthz', async () => ({ status: 'ok' }));

  // Ready: the database answers and its schema is current. An embedding-space mismatch is
  // reported but keeps it ready: webhooks and the dashboard work, and taking the process out
  // of a load balancer would lose messages instead of holding their replies.
  app.get('/readyz', async (_request, reply) => {
    try {
      const pending = await pendingMigrations(runtime.db);
      if (pending.length > 0) return reply.status(503).send({ status: 'migrations pending', pending });
      const embeddings = await embeddingsProblem(runtime);
      return { status: 'ready', database: runtime.db.kind, ...(embeddings ? { embeddings } : {}) };
    } catch {
      return reply.status(503).send({ status: 'database unreachable' });
    }
  });
};

/** Why retrieval and embedding are paused (an embedding-space mismatch), or null. */
export async function embeddingsProblem(runtime: Pick<Runtime, 'db' | 'ai'>): Promise<string | null> {
  try {
    await vectorSpaceCheck(runtime.db, embeddingSpaceOf(runtime.ai));
    return null;
  } catch (err) {
    if (err instanceof VectorSpaceMismatchError) return err.message;
    throw err;
  }
}

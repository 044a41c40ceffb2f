// Liveness and readiness for load balancers and orchestrators.
import type { FastifyPluginAsync } from 'fastify';
import { embeddingSpaceOf } from '../ai/types.ts';
import { allowedHostsOf } from '../config.ts';
import { pendingMigrations } from '../db/migrate.ts';
import { VectorSpaceMismatchError, vectorSpaceCheck } from '../knowledge/vectors.ts';
import type { Runtime } from '../runtime.ts';
import { hostRefusal } from './host-names.ts';

// /readyz's answer when it is not ready, under a name aiq does not answer to.
const NOT_READY = { status: 'not ready' };

export const healthRoutes: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  // Up: the process answers. Says nothing about the database, on purpose.
  app.get('/healthz', async () => ({ status: 'ok' }));

  // Ready: the database answers and its schema is current. An embedding-space mismatch is
  // reported but keeps it ready: webhooks and the dashboard work, and taking the process out
  // of a load balancer would lose messages instead of holding their replies.
  //
  // Why it is not ready (the pending migrations by name, the database, the embedding space's
  // provider and model) only under a name aiq answers to, as the admin side (host-names.ts):
  // a page that DNS-rebinds its own name to an aiq on the admin's network would read them.
  // Under any other name the same status code, without the reasons: a load balancer's or
  // orchestrator's probe (by IP, localhost or a machine name, which are ours; or by a name it
  // was given) is never refused, so no process leaves the rotation for the name it was asked by.
  const allowedHosts = allowedHostsOf(runtime.config);
  app.get('/readyz', async (request, reply) => {
    const detailed = hostRefusal(request, allowedHosts) === null;
    try {
      const pending = await pendingMigrations(runtime.db);
      if (pending.length > 0) return reply.status(503).send(detailed ? { status: 'migrations pending', pending } : NOT_READY);
      const embeddings = await embeddingsProblem(runtime);
      if (!detailed) return { status: 'ready' };
      return { status: 'ready', database: runtime.db.kind, ...(embeddings ? { embeddings } : {}) };
    } catch {
      return reply.status(503).send(detailed ? { status: 'database unreachable' } : NOT_READY);
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

// Builds the HTTP app as a plugin tree without listening, so tests call `app.inject()` or
// listen on a port of their choosing. Every route group is registered explicitly here.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Runtime } from '../runtime.ts';
import { adminApi } from './admin-api.ts';
import { AdminAuth } from './auth.ts';
import { dashboard } from './dashboard/index.ts';
import { healthRoutes } from './health.ts';
import { instrumentWebhooks, metricsRoutes } from './metrics.ts';
import { webhookRoutes } from './webhooks.ts';

export async function buildApp(runtime: Runtime): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: runtime.logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: runtime.config.WEBHOOK_BODY_LIMIT_BYTES,
    trustProxy: true,
  });

  // One error handler: 4xx keep their message, 5xx never show internals to the caller.
  app.setErrorHandler((error: { statusCode?: number; message: string; code?: string }, request, reply) => {
    const status = error.statusCode && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) {
      request.log.error({ err: error, url: request.url }, 'request failed');
      return reply.status(status).send({ error: 'internal error' });
    }
    return reply.status(status).send({ error: error.message, code: error.code });
  });

  await app.register(healthRoutes, { runtime });
  instrumentWebhooks(app, runtime.metrics);
  await app.register(metricsRoutes, { metrics: runtime.metrics });
  await app.register(webhookRoutes, { runtime });
  const auth = new AdminAuth(runtime.config.ADMIN_TOKEN);
  await app.register(adminApi, { runtime, auth });
  await app.register(dashboard, { runtime, auth, logTransport: runtime.transport.kind === 'log' });
  return app;
}

// Builds the HTTP app as a plugin tree without listening, so tests call `app.inject()` or
// listen on a port of their choosing. Every route group is registered explicitly here.
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { trustProxyOf } from '../config.ts';
import type { Runtime } from '../runtime.ts';
import { adminApi } from './admin-api.ts';
import { auditTrail } from './audit-trail.ts';
import { authFailureLimiter } from './auth-failures.ts';
import { AdminAuth } from './auth.ts';
import { dashboard } from './dashboard/index.ts';
import { healthRoutes } from './health.ts';
import { rootRoutes } from './root.ts';
import { instrumentWebhooks, metricsRoutes } from './metrics.ts';
import { webhookRoutes } from './webhooks.ts';

export async function buildApp(runtime: Runtime): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: runtime.logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: runtime.config.WEBHOOK_BODY_LIMIT_BYTES,
    // Off unless TRUST_PROXY names the proxy: otherwise any client could pick the host the
    // DNS-rebinding check sees, the scheme the Secure cookie follows and the address that
    // rate limits and logs use, just by sending X-Forwarded-* headers.
    trustProxy: trustProxyOf(runtime.config),
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

  await app.register(rootRoutes);
  await app.register(healthRoutes, { runtime });
  instrumentWebhooks(app, runtime.metrics);
  await app.register(metricsRoutes, { metrics: runtime.metrics, config: runtime.config });
  await app.register(webhookRoutes, { runtime });
  const auth = new AdminAuth(runtime.config.ADMIN_TOKEN);
  auditTrail(app, runtime.db, auth);
  const limiter = await authFailureLimiter(app, { maxFailures: runtime.config.AUTH_FAILURE_LIMIT, windowSeconds: runtime.config.AUTH_FAILURE_WINDOW_SECONDS });
  await app.register(adminApi, { runtime, auth, limiter });
  await app.register(dashboard, { runtime, auth, limiter, logTransport: runtime.transport.kind === 'log' });
  return app;
}

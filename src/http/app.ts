// Builds the HTTP app as a plugin tree without listening, so tests call `app.inject()` or
// listen on a port of their choosing. Every route group is registered explicitly here.
import { loggedPath } from '../logger.ts';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyRequest } from 'fastify';
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
    // Fastify's default is no bound at all: a client that sends its headers and then stalls
    // (slowloris) held its socket open for good. Node's own default (300 s) is restored.
    ...requestTimeoutOptions(runtime.config.HTTP_REQUEST_TIMEOUT_SECONDS),
    // Off unless TRUST_PROXY names the proxy: otherwise any client could pick the host the
    // DNS-rebinding check sees, the scheme the Secure cookie follows and the address that
    // rate limits and logs use, just by sending X-Forwarded-* headers.
    trustProxy: trustProxyOf(runtime.config),
  });

  // One error handler: 4xx keep their message, 5xx never show internals to the caller.
  app.setErrorHandler((error: { statusCode?: number; message: string; code?: string }, request, reply) => {
    const status = error.statusCode && error.statusCode >= 400 ? error.statusCode : 500;
    if (status >= 500) {
      request.log.error({ err: error, url: loggedPath(request.url) }, 'request failed');
      return reply.status(status).send({ error: 'internal error' });
    }
    return reply.status(status).send({ error: error.message, code: error.code });
  });

  // PostgreSQL stores no NUL character in text: on the admin side a query or body holding
  // one is bad input (400), not a database error (500) at whatever statement it reaches.
  // Webhooks are left alone: their signature covers the body as sent.
  app.addHook('preHandler', async (request, reply) => {
    if (!/^\/(api|admin)(\/|\?|$)/.test(routedPath(request))) return;
    // An upload's file field is the route's to judge (uploadRoute).
    const { fileField } = request.routeOptions.config as { fileField?: string };
    const body = fileField && request.body && typeof request.body === 'object' ? { ...request.body, [fileField]: undefined } : request.body;
    if (/%00/i.test(request.url) || holdsNul(body)) {
      return reply.status(400).send({ error: 'the request holds a NUL character (\\u0000), which cannot be stored: remove it' });
    }
    // Half an emoji (a lone UTF-16 surrogate, "\ud83d" in JSON: what JavaScript's slice leaves
    // when it cuts one) is stored as U+FFFD, as every UTF-8 text column stores it; as JSON the
    // database refused it, and a document holding one was answered 500.
    request.body = wellFormed(request.body);
  });

  // Every answer is what it says it is (no content sniffing); the admin API's answers hold
  // personal data and stay out of the browser's and any proxy's cache.
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-content-type-options', 'nosniff');
    if (/^\/api(\/|\?|$)/.test(routedPath(request)) && !reply.hasHeader('cache-control')) reply.header('cache-control', 'no-store');
  });

  await app.register(rootRoutes);
  await app.register(healthRoutes, { runtime });
  instrumentWebhooks(app, runtime.metrics);
  const limiter = await authFailureLimiterOf(app, runtime);
  await app.register(metricsRoutes, { metrics: runtime.metrics, config: runtime.config, limiter });
  await app.register(webhookRoutes, { runtime });
  const auth = new AdminAuth(runtime.config.ADMIN_TOKEN);
  auditTrail(app, runtime.db, auth);
  await app.register(adminApi, { runtime, auth, limiter });
  await app.register(dashboard, { runtime, auth, limiter, logTransport: runtime.transport.kind === 'log' });
  return app;
}

/**
 * The path the request was routed by: its route's pattern (`/api/conversations/:id`), else
 * the raw URL. Not the raw URL alone: `/%61pi/conversations` is routed to /api/conversations
 * and answered with what it holds, while a test of the raw URL saw no /api in it.
 */
function routedPath(request: FastifyRequest): string {
  return request.routeOptions.url ?? request.url;
}

/**
 * The bound on receiving a whole request, and how often Node looks for requests past it
 * (its default, every 30 s, would let a short bound run up to 30 s over): a tenth of it.
 * Given to Node's server as it is created (`http`): Fastify's own requestTimeout, which it
 * sets on the server afterwards, is not enforced by Node 20 or 24 (a stalled request was
 * still open after 40 s with it at 1 s), and without it Fastify would set 0 afterwards.
 */
function requestTimeoutOptions(seconds: number): { requestTimeout: number; http: { requestTimeout: number; connectionsCheckingInterval: number } } {
  const ms = seconds * 1000;
  return { requestTimeout: ms, http: { requestTimeout: ms, connectionsCheckingInterval: Math.min(30_000, Math.ceil(ms / 10)) } };
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/** A parsed body with every lone surrogate in its strings, keys and values replaced by U+FFFD. */
function wellFormed(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return value.replace(LONE_SURROGATE, '\ufffd');
  if (value === null || typeof value !== 'object' || depth > 20) return value;
  if (Array.isArray(value)) return value.map((item) => wellFormed(item, depth + 1));
  // Parsed JSON and forms only: anything else (a Buffer) is left as it came.
  const prototype = Object.getPrototypeOf(value);
  if (prototype !== Object.prototype && prototype !== null) return value;
  return Object.fromEntries(Object.entries(value).map(([key, item]) => [wellFormed(key), wellFormed(item, depth + 1)]));
}

/** Whether a parsed body holds a NUL character in any string, key or value. */
function holdsNul(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  if (value === null || typeof value !== 'object' || depth > 20) return false;
  return Object.entries(value).some(([key, item]) => key.includes('\u0000') || holdsNul(item, depth + 1));
}

/**
 * What `aiq worker` answers when WORKER_METRICS_PORT is set: /healthz, /readyz and its own
 * /metrics. Job timings, reclaims and the LLM's and Twilio's calls are counted in the
 * process that runs the jobs, which `aiq serve`'s /metrics cannot see.
 */
export async function buildWorkerApp(runtime: Runtime): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: runtime.logger.child({ component: 'http' }) as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    ...requestTimeoutOptions(runtime.config.HTTP_REQUEST_TIMEOUT_SECONDS),
    trustProxy: trustProxyOf(runtime.config),
  });
  app.addHook('onSend', async (_request, reply) => {
    reply.header('x-content-type-options', 'nosniff');
  });
  await app.register(healthRoutes, { runtime });
  await app.register(metricsRoutes, { metrics: runtime.metrics, config: runtime.config, limiter: await authFailureLimiterOf(app, runtime) });
  return app;
}

const authFailureLimiterOf = (app: FastifyInstance, runtime: Runtime) =>
  authFailureLimiter(app, { maxFailures: runtime.config.AUTH_FAILURE_LIMIT, windowSeconds: runtime.config.AUTH_FAILURE_WINDOW_SECONDS });

// The admin JSON API under /api: what the dashboard does, for scripts. Bearer ADMIN_TOKEN
// (open on loopback without one), never for another site's pages, zod-validated input, 4xx
// with a message that says what was wrong. The conversation and knowledge groups are
// registered here, behind the same check.
import { loggedPath } from '../logger.ts';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { usageReport } from '../ai/costs.ts';
import { auditRecord } from '../privacy/audit.ts';
import { jobCount, jobGet, jobList, jobRetry, jobRetryCount, jobRetryMany, jobStats, scheduleEnable, scheduleList } from '../queue/index.ts';
import { jobCancelChecked, REPLY_IN_FLIGHT } from '../jobs/cancel-guard.ts';
import { allowedHostsOf } from '../config.ts';
import type { Runtime } from '../runtime.ts';
import { conversationApi } from './admin-api-conversations.ts';
import { knowledgeApi } from './admin-api-knowledge.ts';
import { privacyApi } from './admin-api-privacy.ts';
import { parseOr400 } from './api-input.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';
import { OPEN_ELSEWHERE, admit, bearerToken, fromThisMachine, type AdminAuth } from './auth.ts';
import { crossSiteRefusal, isStateChanging } from './cross-site.ts';
import { hostRefusal } from './host-names.ts';
import { IdParams, JobFilterQuery, RetryBound, toJobFilter } from './admin/inputs.ts';
import { jobMinuteStats, jobSlowList } from './admin/queue-queries.ts';

const JobListQuery = JobFilterQuery.extend({
  after: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(50),
});
const RetryFailedBody = z
  .object({
    type: z.string().trim().min(1).max(200).optional(),
    q: z.string().trim().min(1).max(200).optional(),
    /** Only count what would be retried (for a confirmation prompt); the answer's failedBy bounds the retry to those. */
    dryRun: z.boolean().default(false),
    /** Retry only jobs that had failed by then (a dry run's failedBy); without it, all that match now. */
    failedBy: RetryBound.optional(),
  })
  .strict();

const UsageQuery = z.object({ days: z.coerce.number().int().min(1).max(366).default(30) });

export const OPEN_MODE_NEEDS_HEADER =
  'Refused: a state-changing API request needs an "Authorization: Bearer …" header, also without ADMIN_TOKEN (any value then, e.g. "Bearer local"). ' +
  'A page on another site cannot send that header, so it cannot use the API through your browser.';

export const adminApi: FastifyPluginAsync<{ runtime: Runtime; auth: AdminAuth; limiter: AuthFailureLimiter }> = async (app, { runtime, auth, limiter }) => {
  const { db } = runtime;
  // JSON only: a text/plain body (fastify parses one by default) reached the routes as a
  // string and was refused as "expected object", a 400 that hid the real mistake (415).
  app.removeContentTypeParser('text/plain');
  const allowedHosts = allowedHostsOf(runtime.config);

  app.addHook('onRequest', async (request: FastifyRequest, reply: FastifyReply) => {
    if (auth.open && !fromThisMachine(request)) return reply.status(403).send({ error: OPEN_ELSEWHERE });
    // Before the token is read: a rebinding page's wrong guesses must not count (host-names.ts).
    const foreignHost = hostRefusal(request, allowedHosts);
    if (foreignHost) return reply.status(403).send({ error: foreignHost });
    const crossSite = crossSiteRefusal(request, runtime.config.PUBLIC_URL);
    if (crossSite) return reply.status(403).send({ error: crossSite });
    const token = bearerToken(request);
    if (auth.open) {
      // No secret to check, so the header itself is the proof: a cross-site page can send it
      // only after a CORS preflight, which this server never grants.
      if (isStateChanging(request) && token === undefined) return reply.status(403).send({ error: OPEN_MODE_NEEDS_HEADER });
      return admit(request);
    }
    if (await limiter.refuseIfBlocked(request, reply)) return reply;
    if (auth.checkToken(token)) return admit(request);
    // A request without any token is no guess at it; only wrong tokens count.
    if (token !== undefined) {
      await limiter.recordFailure(request);
      request.log.warn({ ip: request.ip, url: loggedPath(request.url) }, 'admin API refused: wrong bearer token');
    }
    await reply
      .status(401)
      .header('www-authenticate', 'Bearer realm="aiq"')
      .send({ error: 'missing or wrong admin token: send the header "Authorization: Bearer <ADMIN_TOKEN>"' });
  });

  // The admin token is one shared secret: the audit log can say no more than that it was used.
  const actor = runtime.config.ADMIN_TOKEN ? 'api:token' : 'api:open (loopback, no ADMIN_TOKEN)';

  // A consistent copy of the embedded database while it runs (`aiq backup` asks here when
  // the server holds the folder). A server database has pg_dump for this. Audited: it is
  // everyone's data at once, and an export of one person's is recorded.
  app.get('/api/backup', async (_request, reply) => {
    if (!runtime.db.backup) return reply.status(409).send({ error: 'this aiq runs on a PostgreSQL server: back it up with pg_dump (README, Operations)' });
    const backup = Buffer.from(await (await runtime.db.backup()).arrayBuffer());
    await auditRecord(db, { actor, action: 'backup', result: 'ok', details: { bytes: backup.length } });
    const name = `aiq-backup-${new Date().toISOString().replace(/[:.]/g, '-')}.tar.gz`;
    return reply.header('content-type', 'application/gzip').header('content-disposition', `attachment; filename="${name}"`).header('cache-control', 'no-store').send(backup);
  });

  // What the AI cost per day, model and purpose, priced by AI_PRICES (src/ai/costs.ts).
  app.get('/api/usage', async (request, reply) => {
    const query = parseOr400(UsageQuery, request.query, reply);
    if (!query) return reply;
    return usageReport(db, runtime.config.AI_PRICES, runtime.config.AI_PRICE_CURRENCY, query.days);
  });

  // Recurring jobs: list, and enable or disable one (recorded by the audit trail).
  app.get('/api/schedules', async () => ({ schedules: await scheduleList(db) }));
  app.post('/api/schedules/:name/:change', async (request, reply) => {
    const { name, change } = request.params as { name: string; change: string };
    if (change !== 'enable' && change !== 'disable') return reply.status(404).send({ error: 'POST /api/schedules/<name>/enable or /disable' });
    if (!(await scheduleEnable(db, name, change === 'enable'))) return reply.status(404).send({ error: `no schedule named "${name.slice(0, 100)}"` });
    return { name, enabled: change === 'enable' };
  });

  app.get('/api/stats', async () => {
    const [stats, minutes, slow] = await Promise.all([jobStats(db), jobMinuteStats(db), jobSlowList(db, runtime.config.SLOW_JOB_THRESHOLD_MS)]);
    return { ...stats, lastHour: minutes, slow: slow.map((s) => ({ id: s.job.id, type: s.job.type, status: s.job.status, durationMs: s.durationMs })) };
  });

  app.get('/api/jobs', async (request, reply) => {
    const query = parseOr400(JobListQuery, request.query, reply);
    if (!query) return reply;
    try {
      const page = await jobList(db, toJobFilter(query), { after: query.after, limit: query.limit });
      return { jobs: page.jobs, nextCursor: page.nextCursor };
    } catch (err) {
      if (err instanceof RangeError) return reply.status(400).send({ error: `after: ${err.message}` });
      throw err;
    }
  });

  app.get('/api/jobs/count', async (request, reply) => {
    const query = parseOr400(JobFilterQuery, request.query, reply);
    if (!query) return reply;
    return { count: await jobCount(db, toJobFilter(query)) };
  });

  app.get('/api/jobs/:id', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    const job = await jobGet(db, params.id);
    if (!job) return reply.status(404).send({ error: 'no job with this id' });
    return job;
  });

  // Retry and cancel answer 409 when the job exists but is in the wrong state, so a script
  // can tell "not found" from "not now".
  app.post('/api/jobs/:id/retry', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    if (await jobRetry(db, params.id)) return { id: params.id, status: 'pending' };
    const job = await jobGet(db, params.id);
    if (!job) return reply.status(404).send({ error: 'no job with this id' });
    return reply.status(409).send({ error: `only failed or cancelled jobs can be retried; this one is ${job.status}` });
  });

  app.post('/api/jobs/:id/cancel', async (request, reply) => {
    const params = parseOr400(IdParams, request.params, reply);
    if (!params) return reply;
    const outcome = await jobCancelChecked(db, params.id);
    if (outcome === 'cancelled') return { id: params.id, status: 'cancelled' };
    if (outcome === 'reply_in_flight') return reply.status(409).send({ error: REPLY_IN_FLIGHT });
    const job = await jobGet(db, params.id);
    if (!job) return reply.status(404).send({ error: 'no job with this id' });
    return reply.status(409).send({ error: `only pending jobs can be cancelled; this one is ${job.status}` });
  });

  app.post('/api/jobs/retry-failed', async (request, reply) => {
    const body = parseOr400(RetryFailedBody, request.body, reply);
    if (!body) return reply;
    const filter = { status: 'failed' as const, type: body.type, search: body.q };
    if (body.dryRun) return { ...(await jobRetryCount(db, filter)), retried: false };
    return { count: await jobRetryMany(db, filter, body.failedBy), retried: true };
  });

  await app.register(conversationApi, { runtime });
  await app.register(knowledgeApi, { runtime });
  await app.register(privacyApi, { runtime, actor });
};

// Prometheus metrics at /metrics, with prom-client. Owns the registry: queue gauges read
// from jobStats at scrape time, job timings fed by the worker's events (the queue itself
// never imports prom-client), webhook latency from a request hook, and the Twilio/LLM call
// timings app code reports through `runtime.metrics`.
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { allowedHostsOf, type Env } from '../config.ts';
import type { TokenUsage } from '../ai/types.ts';
import type { Queryable } from '../db/types.ts';
import { jobStats, type Worker } from '../queue/index.ts';
import type { AppMetrics, CallOutcome } from '../runtime.ts';
import type { AuthFailureLimiter } from './auth-failures.ts';
import { bearerToken, fromThisMachine, safeEqual } from './auth.ts';
import { hostRefusal } from './host-names.ts';

// Job and outside-call latencies: from a fast local handler (5 ms) to a slow LLM (2 min).
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
// Webhooks must answer Twilio in milliseconds, so the buckets are finer at the low end.
const WEBHOOK_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** The prom-client implementation of AppMetrics, plus what the worker and HTTP feed it. */
export class PromMetrics implements AppMetrics {
  /** Each instance has its own registry, so several runtimes (tests) never collide. */
  readonly registry = new Registry();
  private readonly jobs: Gauge<'status' | 'type'>;
  private readonly oldestDue: Gauge;
  private readonly scrapeOk: Gauge;
  private readonly jobDuration: Histogram<'type' | 'outcome'>;
  private readonly jobAttempts: Counter<'type' | 'outcome'>;
  private readonly jobFailures: Counter<'type' | 'final'>;
  private readonly slowJobs: Counter<'type'>;
  private readonly leaseReclaims: Counter<'type' | 'status'>;
  private readonly leaseLost: Counter<'type'>;
  private readonly webhookDuration: Histogram<'route' | 'status_code'>;
  private readonly twilioDuration: Histogram<'operation' | 'outcome'>;
  private readonly twilioErrors: Counter<'operation' | 'outcome'>;
  private readonly llmDuration: Histogram<'provider' | 'operation' | 'outcome'>;
  private readonly llmErrors: Counter<'provider' | 'operation' | 'outcome'>;
  private readonly llmTokens: Counter<'provider' | 'model' | 'operation' | 'kind'>;
  private readonly optChanges: Counter<'change' | 'by'>;
  private readonly optedOut: Gauge;

  constructor(
    private readonly db: Queryable,
    private readonly aiProvider: string,
  ) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, prefix: 'aiq_process_' });

    // Counted in the database on each scrape (see scrape()): true for every worker process
    // at once, and correct right after a restart, which in-process counters would not be.
    // Tokens this process spent, for rate() per model; the cost report reads ai_usage instead.
    this.optChanges = new Counter({ name: 'aiq_whatsapp_opt_changes_total', help: 'WhatsApp opt-outs and opt-ins recorded, by change (out | in) and by whom (contact | admin)', labelNames: ['change', 'by'], registers });
    this.optedOut = new Gauge({ name: 'aiq_whatsapp_contacts_opted_out', help: 'Contacts opted out now (nothing is sent to them)', registers });
    this.llmTokens = new Counter({ name: 'aiq_ai_tokens_total', help: 'AI tokens spent, by provider, model, operation and kind (prompt | completion)', labelNames: ['provider', 'model', 'operation', 'kind'], registers });

    this.jobs = new Gauge({ name: 'aiq_jobs', help: 'Jobs in the table by status and type', labelNames: ['status', 'type'], registers });
    this.oldestDue = new Gauge({ name: 'aiq_jobs_oldest_due_age_seconds', help: 'Seconds the oldest due pending job has waited', registers });
    this.scrapeOk = new Gauge({ name: 'aiq_jobs_scrape_ok', help: '1 when the job gauges were read from the database on this scrape, 0 when that failed', registers });

    this.jobDuration = new Histogram({
      name: 'aiq_job_duration_seconds',
      help: 'Handler run time per attempt, by type and outcome (done | retry | failed)',
      labelNames: ['type', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.jobAttempts = new Counter({ name: 'aiq_job_attempts_total', help: 'Attempts run, by type and outcome', labelNames: ['type', 'outcome'], registers });
    this.jobFailures = new Counter({
      name: 'aiq_job_failures_total',
      help: 'Failed attempts by type; final="true" when the job gave up (status failed)',
      labelNames: ['type', 'final'],
      registers,
    });
    this.slowJobs = new Counter({ name: 'aiq_jobs_slow_total', help: 'Jobs that ran longer than SLOW_JOB_THRESHOLD_MS', labelNames: ['type'], registers });
    this.leaseReclaims = new Counter({
      name: 'aiq_job_lease_reclaims_total',
      help: 'Jobs taken back from a worker whose lease expired, by type and new status',
      labelNames: ['type', 'status'],
      registers,
    });
    this.leaseLost = new Counter({ name: 'aiq_job_lease_lost_total', help: 'Running jobs this worker abandoned because its lease was lost', labelNames: ['type'], registers });
    this.webhookDuration = new Histogram({
      name: 'aiq_webhook_request_duration_seconds',
      help: 'Time to answer a Twilio webhook',
      labelNames: ['route', 'status_code'],
      buckets: WEBHOOK_BUCKETS,
      registers,
    });
    this.twilioDuration = new Histogram({
      name: 'aiq_twilio_call_duration_seconds',
      help: 'Twilio REST call latency',
      labelNames: ['operation', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.twilioErrors = new Counter({ name: 'aiq_twilio_call_errors_total', help: 'Twilio REST calls that failed', labelNames: ['operation', 'outcome'], registers });
    this.llmDuration = new Histogram({
      name: 'aiq_llm_call_duration_seconds',
      help: 'LLM and embeddings call latency',
      labelNames: ['provider', 'operation', 'outcome'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.llmErrors = new Counter({
      name: 'aiq_llm_call_errors_total',
      help: 'LLM and embeddings calls that failed (outcome rate_limited for a 429)',
      labelNames: ['provider', 'operation', 'outcome'],
      registers,
    });
  }

  observeTwilioCall(operation: string, durationMs: number, outcome: CallOutcome): void {
    this.twilioDuration.observe({ operation, outcome }, durationMs / 1000);
    if (outcome !== 'ok') this.twilioErrors.inc({ operation, outcome });
  }

  observeLlmCall(operation: string, durationMs: number, outcome: CallOutcome, spent?: { model: string; usage: TokenUsage }): void {
    const labels = { provider: this.aiProvider, operation, outcome };
    this.llmDuration.observe(labels, durationMs / 1000);
    if (outcome !== 'ok') this.llmErrors.inc(labels);
    if (spent) {
      const base = { provider: this.aiProvider, model: spent.model, operation };
      this.llmTokens.inc({ ...base, kind: 'prompt' }, spent.usage.promptTokens);
      this.llmTokens.inc({ ...base, kind: 'completion' }, spent.usage.completionTokens);
    }
  }

  observeOptChange(change: 'out' | 'in', by: 'contact' | 'admin'): void {
    this.optChanges.inc({ change, by });
  }

  observeWebhook(route: string, statusCode: number, durationMs: number): void {
    this.webhookDuration.observe({ route, status_code: String(statusCode) }, durationMs / 1000);
  }

  // Read before rendering rather than in gauge `collect` callbacks: prom-client runs those
  // concurrently, so one query could not feed several gauges in time.
  async scrape(): Promise<{ contentType: string; body: string }> {
    try {
      const stats = await jobStats(this.db);
      this.jobs.reset();
      for (const [type, byStatus] of Object.entries(stats.counts)) {
        for (const [status, count] of Object.entries(byStatus)) this.jobs.set({ status, type }, count ?? 0);
      }
      this.oldestDue.set(stats.oldestDueAgeSeconds);
      const optedOut = await this.db.query<{ n: number }>('select count(*)::int as n from contacts where opted_out_at is not null');
      this.optedOut.set(optedOut.rows[0]?.n ?? 0);
      this.scrapeOk.set(1);
    } catch {
      // Nothing read is nothing known: the last counts would keep a backlog alert quiet
      // while the database is gone. The job series disappear, the single values are NaN.
      this.jobs.reset();
      this.oldestDue.set(Number.NaN);
      this.optedOut.set(Number.NaN);
      this.scrapeOk.set(0);
    }
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }

  attachWorker(worker: Worker): void {
    worker.on('job:done', ({ job, durationMs }) => {
      this.jobDuration.observe({ type: job.type, outcome: 'done' }, durationMs / 1000);
      this.jobAttempts.inc({ type: job.type, outcome: 'done' });
    });
    worker.on('job:failed', ({ job, durationMs, status }) => {
      const outcome = status === 'failed' ? 'failed' : 'retry';
      this.jobDuration.observe({ type: job.type, outcome }, durationMs / 1000);
      this.jobAttempts.inc({ type: job.type, outcome });
      this.jobFailures.inc({ type: job.type, final: String(status === 'failed') });
    });
    worker.on('job:slow', ({ job }) => this.slowJobs.inc({ type: job.type }));
    worker.on('lease:reclaimed', ({ type, status }) => this.leaseReclaims.inc({ type, status }));
    worker.on('lease:lost', (job) => this.leaseLost.inc({ type: job.type }));
  }
}

/**
 * Times every webhook route (`/webhooks/...`). Registered on the root instance, because a
 * hook added inside a plugin would only see that plugin's routes.
 */
export function instrumentWebhooks(app: FastifyInstance, metrics: AppMetrics): void {
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url;
    if (route?.startsWith('/webhooks/')) metrics.observeWebhook(route, reply.statusCode, reply.elapsedTime);
  });
}

/**
 * Who may scrape: with METRICS_TOKEN, whoever sends it as a bearer token; without one, only
 * a client on this machine asking directly, as for open mode's admin side (fromThisMachine):
 * not a page elsewhere that DNS-rebinds its name to 127.0.0.1, and nothing a proxy or tunnel
 * relayed (behind a local one every connection is loopback). Returns the refusal, or null to serve.
 */
export function metricsRefusal(request: FastifyRequest, config: Pick<Env, 'METRICS_TOKEN'>): { status: number; error: string } | null {
  if (config.METRICS_TOKEN) {
    if (safeEqual(bearerToken(request) ?? '', config.METRICS_TOKEN)) return null;
    return { status: 401, error: 'metrics need "Authorization: Bearer <METRICS_TOKEN>"' };
  }
  if (fromThisMachine(request)) return null;
  return { status: 403, error: 'metrics are served to this machine only, at a loopback address (http://127.0.0.1 or http://localhost): set METRICS_TOKEN to scrape from elsewhere' };
}

/**
 * GET /metrics. Not behind ADMIN_TOKEN: it holds counts and timings, never user text, and
 * a Prometheus scraper should not need the admin's key; it has its own (metricsRefusal).
 */
export const metricsRoutes: FastifyPluginAsync<{ metrics: AppMetrics; config: Env; limiter: AuthFailureLimiter }> = async (app, { metrics, config, limiter }) => {
  const allowedHosts = allowedHostsOf(config);
  app.get('/metrics', async (request, reply) => {
    // Before the token is read: a rebinding page's wrong guesses must not count (host-names.ts).
    const foreignHost = hostRefusal(request, allowedHosts);
    if (foreignHost) return reply.status(403).send({ error: foreignHost });
    // Wrong tokens count against the address as the admin's do (auth-failures.ts): /metrics
    // may be reachable from anywhere, and guessing it would otherwise go on unslowed.
    if (config.METRICS_TOKEN && (await limiter.refuseIfBlocked(request, reply))) return reply;
    const refusal = metricsRefusal(request, config);
    // Only a wrong token is a guess. A request with none is what any page can have the
    // admin's browser send (<img src=…/metrics>), and the budget is the admin's too.
    if (refusal?.status === 401 && bearerToken(request) !== undefined) await limiter.recordFailure(request);
    if (refusal) return reply.status(refusal.status).send({ error: refusal.error });
    const { contentType, body } = await metrics.scrape();
    return reply.type(contentType).send(body);
  });
};

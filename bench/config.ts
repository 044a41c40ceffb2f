// The benchmark plan: job counts for the full run (issue #3) and for --quick (CI), and which
// configurations of which systems each scenario runs. Settings themselves live with each
// system in bench/systems/.

export interface Plan {
  rounds: number;
  drainJobs: number;
  /** pg-boss at its defaults takes 10 jobs per 2 s poll: 20,000 would take over an hour. */
  pollBoundJobs: number;
  /**
   * A backlog, drained by aiq and graphile-worker at their best settings: a drain of 20,000
   * jobs is over in under a second, and cost that grows with the batches (a completion that
   * compared every job with every other) showed only from ~100,000.
   */
  backlogJobs: number;
  pickupJobs: number;
  pickupIntervalMs: number;
  /**
   * Jobs trickled before the measured ones and not counted in p50/p99: the first jobs after
   * start-up pay each library's connection set-up, statement preparation and JIT, which is
   * a cold start, not pickup. The first one's latency is reported apart ('pickup first').
   */
  pickupWarmupJobs: number;
  holJobs: number;
  holSlowShare: number;
  holSlowMs: number;
  holFastMs: number;
  holConcurrency: number;
  scaleJobs: number;
  /** Finished jobs in ai_jobs for the scale scenario (compared with an empty table). */
  scaleFinished: number;
  /** Webhook acknowledgement (issue #4): autocannon duration and connections. */
  webhookSeconds: number;
  /** Runs per round of each whole-process CLI timing (their median is the round's figure). */
  cliRuns: number;
  /** The capacity matrix: LLM latencies (ms) × worker concurrencies, 3 waves of messages each. */
  capacityLlmMs: number[];
  capacityConcurrency: number[];
  webhookConnections: number;
  /**
   * aiq serve and the INSERT floor again with this many connections: group commit fills its
   * batches only when enough webhooks are in flight at once (bench/webhook.ts).
   */
  webhookBusyConnections: number;
  /**
   * Webhook at scale (issue #18): stored messages (inbound + replies, with their finished
   * jobs; bench/lib/prefill.ts) in the database of a second aiq serve run.
   */
  webhookPrefillMessages: number;
  /** End to end (issue #5): messages one at a time with an instant LLM, then a burst with a slow one. */
  pipelineOverheadMessages: number;
  pipelineBurstMessages: number;
  pipelineLlmMs: number;
  pipelineConcurrency: number;
}

export const FULL: Plan = {
  rounds: 3,
  drainJobs: 20_000,
  pollBoundJobs: 60,
  backlogJobs: 100_000,
  pickupJobs: 500,
  pickupIntervalMs: 5,
  pickupWarmupJobs: 20,
  holJobs: 2_000,
  holSlowShare: 0.01,
  holSlowMs: 5_000,
  holFastMs: 20,
  holConcurrency: 50,
  scaleJobs: 20_000,
  scaleFinished: 1_000_000,
  webhookSeconds: 10,
  cliRuns: 7,
  capacityLlmMs: [500, 2_000, 5_000],
  capacityConcurrency: [50, 200, 500],
  webhookConnections: 10,
  webhookBusyConnections: 100,
  webhookPrefillMessages: 1_000_000,
  pipelineOverheadMessages: 200,
  pipelineBurstMessages: 1_600,
  pipelineLlmMs: 2_000,
  pipelineConcurrency: 200,
};

export const QUICK: Plan = {
  rounds: 1,
  drainJobs: 500,
  pollBoundJobs: 20,
  backlogJobs: 1_000,
  pickupJobs: 30,
  pickupIntervalMs: 5,
  pickupWarmupJobs: 5,
  holJobs: 200,
  holSlowShare: 0.01,
  holSlowMs: 1_000,
  holFastMs: 20,
  holConcurrency: 50,
  scaleJobs: 1_000,
  scaleFinished: 20_000,
  webhookSeconds: 2,
  cliRuns: 3,
  capacityLlmMs: [500],
  capacityConcurrency: [50],
  webhookConnections: 10,
  webhookBusyConnections: 100,
  webhookPrefillMessages: 20_000,
  pipelineOverheadMessages: 10,
  pipelineBurstMessages: 100,
  // A check that the burst completes, not a figure: a short LLM keeps CI's run short.
  pipelineLlmMs: 300,
  pipelineConcurrency: 200,
};

/** A system in one of its configurations. */
export interface Config {
  system: string;
  variant: string;
}

export const configName = (c: Config) => `${c.system} ${c.variant}`;

/** Drain and pickup run every system at its defaults and at its best settings. */
export const DRAIN_CONFIGS: Config[] = [
  { system: 'aiq', variant: 'defaults' },
  { system: 'graphile-worker', variant: 'defaults' },
  { system: 'pg-boss', variant: 'defaults' },
  { system: 'seed', variant: 'defaults' },
  { system: 'aiq', variant: 'best' },
  { system: 'graphile-worker', variant: 'best' },
  { system: 'pg-boss', variant: 'best' },
];

/** pg-boss at its defaults takes 5 jobs/s: 200 jobs/s arriving would only measure its backlog. */
/** The backlog drain: aiq and graphile-worker at their best (pg-boss tuned takes ~25 s per 100,000). */
export const BACKLOG_CONFIGS = DRAIN_CONFIGS.filter((c) => c.variant === 'best' && (c.system === 'aiq' || c.system === 'graphile-worker'));

export const PICKUP_CONFIGS = DRAIN_CONFIGS.filter((c) => !(c.system === 'pg-boss' && c.variant === 'defaults'));

/**
 * With BENCH_POOLER_URL (PgBouncer in transaction mode in front of the same server): aiq's
 * worker through the pooler, polling without a direct URL and listening with one.
 */
export const POOLER_CONFIGS: Config[] = process.env.BENCH_POOLER_URL
  ? [
      { system: 'aiq', variant: 'pooled' },
      { system: 'aiq', variant: 'pooled-direct' },
    ]
  : [];

/** Head-of-line at concurrency 50: aiq's pool next to graphile-worker's and the seed's batches. */
export const HOL_CONFIGS: Config[] = [
  { system: 'aiq', variant: 'hol' },
  { system: 'graphile-worker', variant: 'hol' },
  { system: 'seed', variant: 'hol' },
];

/**
 * The webhook benchmark's runs, alternating within each round (bench/webhook.ts): aiq serve
 * on an empty database, its two floors (bench/floors/webhook-floor.ts), and aiq serve on a
 * database holding plan.webhookPrefillMessages stored messages; then aiq serve and the
 * INSERT floor with plan.webhookBusyConnections connections.
 */
export const WEBHOOK_AIQ = 'aiq serve';
export const WEBHOOK_FLOOR_INSERT = 'floor: fastify + INSERT';
export const WEBHOOK_FLOOR_NONE = 'floor: fastify, no database';
/** "1M" for 1,000,000, else "20,000". */
export const countText = (n: number) => (n >= 1_000_000 && n % 1_000_000 === 0 ? `${n / 1_000_000}M` : n.toLocaleString('en'));
export const webhookPrefilledName = (plan: Plan) => `aiq serve, ${countText(plan.webhookPrefillMessages)} stored messages`;
/** A webhook run's name with plan.webhookBusyConnections connections instead of the usual. */
export const webhookBusyName = (name: string, plan: Plan) => `${name}, ${plan.webhookBusyConnections} connections`;

/**
 * The pipeline benchmark's systems (bench/pipeline.ts): aiq's serve and worker, and next to
 * them in the same round the script a user would write instead (bench/peers/hand-written-script.ts).
 */
export const PIPELINE_AIQ = 'aiq serve + worker';
export const PIPELINE_SCRIPT = 'hand-written script (openai + twilio, nothing stored)';
export const pipelinePrefilledName = (plan: Plan) => `${PIPELINE_AIQ}, ${countText(plan.webhookPrefillMessages)} stored messages`;

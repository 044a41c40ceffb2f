// The four scenarios of issue #3, each one measured run on its own fresh database:
// drain throughput, pickup latency, head-of-line blocking and table scale. The parent only
// sets up and measures; producing and working happen in child processes.
import { Child } from './lib/child.ts';
import { createDatabase, dropDatabase, withDatabase } from './lib/database.ts';
import { seededRandom } from '../test/helpers/fake-http.ts';
import { percentile } from './lib/stats.ts';
import { loadSystem } from './systems/index.ts';
import type { Config, Plan } from './config.ts';
import type { ProducerConfig } from './processes/producer.ts';
import type { WorkerConfig } from './processes/worker.ts';

export interface RunOutcome {
  ok: boolean;
  error?: string;
  figures: Record<string, number>;
}

const MINUTE = 60_000;

async function inFreshDatabase(system: string, work: (url: string) => Promise<Record<string, number>>): Promise<RunOutcome> {
  const { name, url } = await createDatabase();
  try {
    await (await loadSystem(system)).setup(url);
    return { ok: true, figures: await work(url) };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err), figures: {} };
  } finally {
    await dropDatabase(name).catch(() => {});
  }
}

async function produce(cfg: ProducerConfig): Promise<{ enqueueMs: number; rate?: number }> {
  const producer = new Child('producer.ts', cfg);
  try {
    const result = await producer.waitFor('result', 5 * MINUTE);
    await producer.exit();
    return result as unknown as { enqueueMs: number; rate?: number };
  } finally {
    producer.kill();
  }
}

interface WorkerResult {
  handled: number;
  notCompleted: number;
  elapsedMs: number;
  latencies: number[];
  /** Pickup: the warm-up jobs' latencies, the first of them cold. */
  warmLatencies: number[];
}

/** Starts a worker on jobs already queued and waits until the database shows them all done. */
async function drainWith(config: Config, url: string, expected: number, timeoutMs: number): Promise<WorkerResult> {
  const worker = new Child('worker.ts', { ...config, url, mode: 'drain', expected } satisfies WorkerConfig);
  try {
    await worker.waitFor('ready', MINUTE);
    worker.send({ type: 'go' });
    const result = (await worker.waitFor('result', timeoutMs)) as unknown as WorkerResult;
    const stopped = await worker.waitFor('stopped', 30_000);
    if (stopped.handled !== expected) throw new Error(`ran ${String(stopped.handled)} handlers for ${expected} jobs`);
    if (result.notCompleted !== 0) throw new Error(`${result.notCompleted} jobs did not end completed`);
    await worker.exit();
    return result;
  } finally {
    worker.kill();
  }
}

/** Drain throughput: bulk-enqueue `count` no-op jobs, then time one worker draining them. */
export function drain(config: Config, count: number): Promise<RunOutcome> {
  return inFreshDatabase(config.system, async (url) => {
    const enqueue = await produce({ system: config.system, url, mode: 'bulk', count });
    const result = await drainWith(config, url, count, 10 * MINUTE);
    return { enqueueRate: enqueue.rate!, drainRate: (count / result.elapsedMs) * 1000 };
  });
}

/** Pickup latency: an idle worker, jobs enqueued one at a time carrying their enqueue time. */
export function pickup(config: Config, plan: Plan): Promise<RunOutcome> {
  return inFreshDatabase(config.system, async (url) => {
    const warmup = plan.pickupWarmupJobs;
    const expected = plan.pickupJobs + warmup;
    const worker = new Child('worker.ts', { ...config, url, mode: 'pickup', expected } satisfies WorkerConfig);
    try {
      await worker.waitFor('ready', MINUTE);
      worker.send({ type: 'go' });
      await worker.waitFor('started', MINUTE);
      // Let it settle into idle (first poll done, LISTEN established) before producing.
      await new Promise((resolve) => setTimeout(resolve, 1000));
      await produce({ system: config.system, url, mode: 'trickle', count: plan.pickupJobs, warmup, intervalMs: plan.pickupIntervalMs });
      const result = (await worker.waitFor('result', 5 * MINUTE)) as unknown as WorkerResult;
      const stopped = await worker.waitFor('stopped', 30_000);
      if (stopped.handled !== expected) throw new Error(`ran ${String(stopped.handled)} handlers for ${expected} jobs`);
      if (result.notCompleted !== 0) throw new Error(`${result.notCompleted} jobs did not end completed`);
      await worker.exit();
      const l = result.latencies;
      return { p50: percentile(l, 50), p95: percentile(l, 95), p99: percentile(l, 99), max: Math.max(...l), first: result.warmLatencies[0]! };
    } finally {
      worker.kill();
    }
  });
}

/** The same slow-job positions for every system and round. */
export function holSleeps(plan: Plan): Record<number, number> {
  const random = seededRandom(3);
  const slow = Math.round(plan.holJobs * plan.holSlowShare);
  const sleeps: Record<number, number> = {};
  while (Object.keys(sleeps).length < slow) sleeps[Math.floor(random() * plan.holJobs)] = plan.holSlowMs;
  return sleeps;
}

/** Total work divided by concurrency: issue #3's "ideal". */
export function holIdealMs(plan: Plan): number {
  const slow = Math.round(plan.holJobs * plan.holSlowShare);
  return (slow * plan.holSlowMs + (plan.holJobs - slow) * plan.holFastMs) / plan.holConcurrency;
}

/**
 * No schedule can beat total work ÷ concurrency, nor the longest single job: the larger of
 * the two is the floor even for a scheduler that knew every job's duration in advance.
 */
export function holLowerBoundMs(plan: Plan): number {
  return Math.max(holIdealMs(plan), plan.holSlowMs);
}

/**
 * A perfect FIFO pool: `concurrency` slots, jobs started in enqueue order the instant a slot
 * frees, zero queue overhead. Unlike total work ÷ concurrency (which is below the longest
 * single job here, so no system can reach it), this is what a queue with no head-of-line
 * blocking and no overhead would achieve.
 */
export function holPerfectPoolMs(plan: Plan): number {
  const sleeps = holSleeps(plan);
  const slots: number[] = new Array(plan.holConcurrency).fill(0);
  for (let i = 0; i < plan.holJobs; i++) {
    let earliest = 0;
    for (let s = 1; s < slots.length; s++) if (slots[s]! < slots[earliest]!) earliest = s;
    slots[earliest]! += sleeps[i] ?? plan.holFastMs;
  }
  return Math.max(...slots);
}

/** Head-of-line: a few slow jobs among many fast ones at concurrency 50. */
export function headOfLine(config: Config, plan: Plan): Promise<RunOutcome> {
  return inFreshDatabase(config.system, async (url) => {
    await produce({ system: config.system, url, mode: 'bulk', count: plan.holJobs, sleeps: holSleeps(plan), fastMs: plan.holFastMs });
    const result = await drainWith(config, url, plan.holJobs, 10 * MINUTE);
    return { drainMs: result.elapsedMs };
  });
}

// Finished rows as a busy queue leaves them: each job inserted, claimed and completed (two
// dead row versions each, as the real churn leaves), with finish times over the past day.
const FINISHED_ROWS_SQL = [
  `insert into ai_jobs (type, payload, status, attempts, attempted_at, created_at, updated_at, next_run_at, locked_by, locked_until)
   select 'bench_old', '{}'::jsonb, 'processing', 1, t, t, t, t, 'bench', t + interval '5 minutes'
   from (select now() - make_interval(secs => g % 86400) as t from generate_series(1, $1::int) g) rows`,
  `update ai_jobs set status = 'done', finished_at = attempted_at, locked_by = null, locked_until = null where type = 'bench_old'`,
];

/**
 * The table a drain and an enqueue meet: empty, or with `finished` jobs done before them,
 * either as the fill left it (dead rows, no visibility map, no statistics: what a server
 * with autovacuum off has) or as autovacuum keeps it (VACUUM ANALYZE, which ai_jobs'
 * autovacuum settings trigger after 2% of the table changes).
 */
export type TableState = 'empty' | 'as left' | 'vacuumed';

/** Scale: aiq's bulk enqueue and claim+complete rates on a table in `state`. */
export function scale(config: Config, plan: Plan, state: TableState): Promise<RunOutcome> {
  return inFreshDatabase(config.system, async (url) => {
    await withDatabase(url, async (client) => {
      if (state !== 'empty') {
        for (const sql of FINISHED_ROWS_SQL) await client.query(sql, sql.includes('$1') ? [plan.scaleFinished] : []);
        if (state === 'vacuumed') await client.query('vacuum analyze ai_jobs');
      }
      // The fill writes hundreds of MB of WAL; without a checkpoint here, the one it triggers
      // runs during the measured drain (seen in the server log) and bills the set-up to it.
      await client.query('checkpoint');
    });
    const enqueue = await produce({ system: config.system, url, mode: 'bulk', count: plan.scaleJobs });
    // The drain waits for zero unfinished rows of any type; the old rows are all done.
    const result = await drainWith(config, url, plan.scaleJobs, 10 * MINUTE);
    return { rate: (plan.scaleJobs / result.elapsedMs) * 1000, enqueueRate: enqueue.rate! };
  });
}

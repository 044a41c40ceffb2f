// The worker process: prepares one system's worker, starts it on the parent's "go", counts
// handler runs, and reports once every job ran AND the database records every completion
// (a batched completion still in memory does not count as done).
import pg from 'pg';
import { loadSystem } from '../systems/index.ts';
import type { BenchPayload } from '../systems/types.ts';
import { nowMs } from '../lib/stats.ts';
import { config, fail, nextMessage, send } from './ipc.ts';

export interface WorkerConfig {
  system: string;
  variant: string;
  url: string;
  mode: 'drain' | 'pickup';
  expected: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const cfg = config<WorkerConfig>();
  const system = await loadSystem(cfg.system);
  const checker = new pg.Client({ connectionString: cfg.url, application_name: 'bench-checker' });
  await checker.connect();

  let handled = 0;
  let firstStart = 0;
  let lastHandled = 0;
  const latencies: number[] = [];
  const warmLatencies: number[] = [];
  let allHandled!: () => void;
  const everyJobRan = new Promise<void>((resolve) => (allHandled = resolve));

  const worker = await system.prepareWorker(cfg.url, cfg.variant, async (payload: BenchPayload) => {
    const now = nowMs();
    if (firstStart === 0) firstStart = now;
    if (cfg.mode === 'pickup' && payload.t !== undefined) (payload.warm ? warmLatencies : latencies).push(now - payload.t);
    if (payload.ms) await sleep(payload.ms);
    handled += 1;
    if (handled === cfg.expected) {
      lastHandled = nowMs();
      allHandled();
    }
  });
  await send({ type: 'ready' });
  await nextMessage('go');
  const go = nowMs();
  await worker.start();
  await send({ type: 'started' });

  await everyJobRan;
  // Completions may be batched: done means the database says so.
  let unfinished = -1;
  while (unfinished !== 0) {
    unfinished = (await checker.query<{ n: number }>(system.unfinishedSql)).rows[0]!.n;
    if (unfinished !== 0) await sleep(2);
  }
  const confirmed = nowMs();
  const notCompleted = (await checker.query<{ n: number }>(system.notCompletedSql)).rows[0]!.n;
  await send({
    type: 'result',
    handled,
    notCompleted,
    // Throughput is timed from the first handler start, so each library's start-up (its
    // migrations check, connecting) is not counted against it.
    elapsedMs: confirmed - firstStart,
    fromGoMs: confirmed - go,
    handlersMs: lastHandled - firstStart,
    latencies,
    warmLatencies,
  });
  await Promise.race([worker.stop(), sleep(10_000)]).catch((err) => console.error('stop failed', err));
  // Anything handled beyond the expected count would be a duplicate run.
  await send({ type: 'stopped', handled });
  await checker.end();
  process.exit(0);
}

main().catch(fail);

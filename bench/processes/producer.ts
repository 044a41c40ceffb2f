// The producer process: enqueues through the system's own API, either all at once (bulk,
// timed: the enqueue rate) or one job at a time at a fixed interval carrying its enqueue time.
import { loadSystem } from '../systems/index.ts';
import type { BenchPayload } from '../systems/types.ts';
import { nowMs } from '../lib/stats.ts';
import { config, fail, send } from './ipc.ts';

export interface ProducerConfig {
  system: string;
  url: string;
  mode: 'bulk' | 'trickle';
  count: number;
  /** trickle: milliseconds between enqueues. */
  intervalMs?: number;
  /** trickle: jobs enqueued first, at the same pace, marked `warm` (not measured). */
  warmup?: number;
  /** bulk: handler sleep per job position (head-of-line); absent means no-op jobs. */
  sleeps?: Record<number, number>;
  fastMs?: number;
  /** bulk: largest batch per enqueue call. */
  chunk?: number;
}

// After the warm-up jobs, before the measured ones: the warm-up's last jobs are done by then.
const WARMUP_PAUSE_MS = 250;

async function main(): Promise<void> {
  const cfg = config<ProducerConfig>();
  const system = await loadSystem(cfg.system);
  const producer = await system.openProducer(cfg.url);
  try {
    if (cfg.mode === 'bulk') {
      const payloads: BenchPayload[] = [];
      for (let i = 0; i < cfg.count; i++) {
        const ms = cfg.sleeps?.[i] ?? cfg.fastMs;
        payloads.push(ms === undefined ? { i } : { i, ms });
      }
      const chunk = cfg.chunk ?? cfg.count;
      const started = nowMs();
      for (let i = 0; i < payloads.length; i += chunk) await producer.enqueueMany(payloads.slice(i, i + chunk));
      const enqueueMs = nowMs() - started;
      await send({ type: 'result', enqueueMs, rate: (cfg.count / enqueueMs) * 1000 });
    } else {
      const interval = cfg.intervalMs ?? 5;
      const trickle = async (count: number, warm: boolean) => {
        const started = nowMs();
        for (let i = 0; i < count; i++) {
          await producer.enqueueOne(warm ? { i, t: nowMs(), warm } : { i, t: nowMs() });
          // Keep to the schedule rather than sleeping a fixed time after each enqueue.
          const wait = started + (i + 1) * interval - nowMs();
          if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        }
        return nowMs() - started;
      };
      if (cfg.warmup) {
        await trickle(cfg.warmup, true);
        await new Promise((resolve) => setTimeout(resolve, WARMUP_PAUSE_MS));
      }
      await send({ type: 'result', enqueueMs: await trickle(cfg.count, false) });
    }
  } finally {
    await producer.close();
  }
  process.exit(0);
}

main().catch(fail);

// Read-only queue statistics the overview charts need beyond queue/admin.ts: throughput and
// duration percentiles per minute, and slow jobs. Each reads only the last hour through
// the finished_at index, or the processing rows through the lease index, so the table's
// size (millions of finished jobs) does not matter. `now` is a parameter for tests.
import type { Queryable } from '../../db/types.ts';
import type { Job } from '../../queue/index.ts';
import { jobFromRow } from '../../queue/store.ts';

export interface MinuteStats {
  /** Start of each minute, oldest first: 60 slots ending with the current minute. */
  minutes: Date[];
  done: number[];
  failed: number[];
  /** Run time of the final attempt of done jobs, per minute, in ms; null for empty minutes. */
  p50: Array<number | null>;
  p95: Array<number | null>;
  p99: Array<number | null>;
}

// The duration of a done job is its last attempt: attempted_at is set by the claim that
// ran it, finished_at by its completion.
const MINUTES_SQL = `
  select date_trunc('minute', finished_at) as minute,
         count(*) filter (where status = 'done')::int as done,
         count(*) filter (where status = 'failed')::int as failed,
         percentile_cont(array[0.5, 0.95, 0.99]) within group (
           order by extract(epoch from finished_at - attempted_at) * 1000
         ) filter (where status = 'done' and attempted_at is not null) as pct
  from ai_jobs
  where finished_at > date_trunc('minute', coalesce($1::timestamptz, now())) - interval '59 minutes'
    and status in ('done', 'failed')
  group by 1
  order by 1`;

/** Done and failed jobs per minute and duration percentiles over the last hour. */
export async function jobMinuteStats(db: Queryable, now?: Date): Promise<MinuteStats> {
  const result = await db.query<{ minute: Date; done: number; failed: number; pct: number[] | null }>(MINUTES_SQL, [now ?? null]);
  const end = new Date(now ?? Date.now());
  end.setUTCSeconds(0, 0);
  const stats: MinuteStats = { minutes: [], done: [], failed: [], p50: [], p95: [], p99: [] };
  const byMinute = new Map(result.rows.map((row) => [new Date(row.minute).getTime(), row]));
  for (let i = 59; i >= 0; i--) {
    const minute = new Date(end.getTime() - i * 60_000);
    const row = byMinute.get(minute.getTime());
    stats.minutes.push(minute);
    stats.done.push(row?.done ?? 0);
    stats.failed.push(row?.failed ?? 0);
    const pct = row?.pct ?? null;
    stats.p50.push(pct ? Math.round(pct[0]!) : null);
    stats.p95.push(pct ? Math.round(pct[1]!) : null);
    stats.p99.push(pct ? Math.round(pct[2]!) : null);
  }
  return stats;
}

export interface SlowJob {
  job: Job;
  /** How long it ran (done) or has been running (processing), in ms. */
  durationMs: number;
}

// Running jobs past the threshold (the lease index holds only processing rows), then done
// jobs of the last hour that took longer, slowest first.
const SLOW_SQL = `
  (select *, extract(epoch from coalesce($2::timestamptz, now()) - attempted_at) * 1000 as duration_ms
   from ai_jobs
   where status = 'processing' and attempted_at < coalesce($2::timestamptz, now()) - make_interval(secs => $1 / 1000.0)
   order by attempted_at
   limit 10)
  union all
  (select *, extract(epoch from finished_at - attempted_at) * 1000 as duration_ms
   from ai_jobs
   where status = 'done' and finished_at > coalesce($2::timestamptz, now()) - interval '1 hour'
     and finished_at - attempted_at > make_interval(secs => $1 / 1000.0)
   order by finished_at - attempted_at desc
   limit 10)`;

/** Jobs slower than `thresholdMs`: running now, or done within the last hour. */
export async function jobSlowList(db: Queryable, thresholdMs: number, now?: Date): Promise<SlowJob[]> {
  const result = await db.query<Record<string, unknown> & { duration_ms: number }>(SLOW_SQL, [thresholdMs, now ?? null]);
  return result.rows.map((row) => ({ job: jobFromRow(row as never), durationMs: Math.round(Number(row.duration_ms)) }));
}

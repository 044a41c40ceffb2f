// What people (dashboard, API, CLI) do to the queue: look at it, retry, cancel, clean up.
// Read paths stay fast with millions of finished rows: keyset paging on (created_at, id),
// and statuses written as constants so the partial indexes apply (listing index: all but
// processing; lease index: processing only; migrations/0005_lifecycle_indexes.sql).
import { escapeLike } from '../db/like.ts';
import type { Queryable } from '../db/types.ts';
import { isUuid, jobFromRow } from './store.ts';
import { JOB_STATUSES, type Job, type JobStatus } from './types.ts';

export interface JobFilter {
  status?: JobStatus;
  type?: string;
  /** Text searched in the payload and the last error (case-insensitive). */
  search?: string;
  /** Only jobs created before this. */
  createdBefore?: Date;
  /** Only jobs created after this. */
  createdAfter?: Date;
}

// Optional filters as `$n is null or …`: one static statement, no SQL built from flags.
// The status ($1) is not among them: each statement pairs it with constant statuses, which
// is what lets the planner use the partial indexes.
const FILTER_WHERE = `
  ($2::text is null or type = $2)
  and ($3::text is null or payload::text ilike '%' || $3 || '%' or last_error ilike '%' || $3 || '%')
  and ($4::timestamptz is null or created_at < $4)
  and ($5::timestamptz is null or created_at > $5)`;

function filterValues(filter: JobFilter): unknown[] {
  return [filter.status ?? null, filter.type ?? null, filter.search ? escapeLike(filter.search) : null, filter.createdBefore ?? null, filter.createdAfter ?? null];
}

export interface JobPage {
  jobs: Job[];
  /** Pass as `after` for the next page; null on the last page. */
  nextCursor: string | null;
}

// The cursor carries created_at to the microsecond, as Postgres keeps it (a JavaScript date
// keeps milliseconds): a bulk enqueue gives a whole batch one created_at, and a cursor cut
// to the millisecond skipped the rest of such a batch after the first page.
const PAGE_WHERE = `${FILTER_WHERE}
  and ($6::timestamptz is null or (created_at, id) < ($6, $7::uuid))`;

// The listing index is (status, created_at, id), so newest first over all statuses is one
// top-N scan per status, merged (Merge Append) and cut: ~N index entries per status at any
// page depth. A branch whose status $1 rules out is constant-false and reads nothing.
// Processing jobs are not in that index; the lease index holds them (a few hundred), sorted.
// The branches return keys only, so a type filter is checked in the index (type is INCLUDEd,
// an index-only scan) instead of fetching every skipped row; the page's rows are then read by id.
// The branches differ only in their status, a constant of JOB_STATUSES (never input).
const listBranch = (status: JobStatus) => `
  (select created_at, id from ai_jobs
   where status = '${status}' and ($1::text is null or $1 = '${status}') and ${PAGE_WHERE}
   order by created_at desc, id desc limit $8)`;

/**
 * A timestamptz column as a page cursor carries it: ISO in UTC to the microsecond, as
 * PostgreSQL keeps it (a JavaScript date keeps milliseconds).
 */
export const cursorTimeSql = (column: string): string => `to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;

const LIST_SQL = `
  select j.*, ${cursorTimeSql('page.created_at')} as cursor_created_at
  from (
    select created_at, id from (${JOB_STATUSES.map(listBranch).join(' union all ')}) keys
    order by created_at desc, id desc
    limit $8
  ) page
  join ai_jobs j on j.id = page.id
  order by page.created_at desc, page.id desc`;

/** Newest first, keyset-paged: page 1,000 costs what page 1 does. */
export async function jobList(db: Queryable, filter: JobFilter, options: { limit?: number; after?: string } = {}): Promise<JobPage> {
  const limit = Math.min(Math.max(options.limit ?? 50, 1), 500);
  const cursor = timeCursorDecode(options.after);
  const result = await db.query<Record<string, unknown> & { id: string; cursor_created_at: string }>(LIST_SQL, [
    ...filterValues(filter),
    cursor?.time ?? null,
    cursor?.id ?? null,
    limit + 1,
  ]);
  const jobs = result.rows.slice(0, limit).map((row) => jobFromRow(row as never));
  const last = result.rows[limit - 1];
  return { jobs, nextCursor: result.rows.length > limit && last ? timeCursorEncode(last.cursor_created_at, last.id) : null };
}

/** A keyset page cursor for lists ordered by (a time, id) descending: `time` as cursorTimeSql writes it. */
export function timeCursorEncode(time: string, id: string): string {
  return Buffer.from(`${time}|${id}`).toString('base64url');
}

// The timestamp goes to Postgres as text, microseconds intact; checked here only for shape.
const CURSOR_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** A time that exists: JavaScript rolls 2024-02-30 over into March, PostgreSQL refuses it, and year 0. */
function realTime(text: string): boolean {
  const parsed = new Date(text);
  return !Number.isNaN(parsed.getTime()) && parsed.getUTCFullYear() >= 1 && parsed.toISOString().slice(0, 19) === text.slice(0, 19);
}

/** An ISO time in UTC to the microsecond, as cursors and jobRetryCount's failedBy carry it, that exists. */
export function isIsoTime(text: string): boolean {
  return CURSOR_TIME.test(text) && realTime(text);
}

/** timeCursorEncode's (time, id); null without a cursor; a RangeError for one it did not write. */
export function timeCursorDecode(cursor: string | undefined): { time: string; id: string } | null {
  if (!cursor) return null;
  const [time, id] = Buffer.from(cursor, 'base64url').toString().split('|');
  if (!time || !isIsoTime(time) || !id || !isUuid(id)) {
    throw new RangeError('invalid page cursor');
  }
  return { time, id };
}

// With a status, only that status's part of the listing index is read (index-only when the
// text search is unset; type is INCLUDEd); processing rows come from the lease index. A part
// that $1 rules out reads nothing. Without a status this counts nearly every row.
const COUNT_SQL = `
  select ((select count(*) from ai_jobs
           where status in ('pending', 'done', 'failed', 'cancelled') and ($1::text is null or status = $1) and ${FILTER_WHERE})
        + (select count(*) from ai_jobs
           where status = 'processing' and ($1 is null or $1 = 'processing') and ${FILTER_WHERE}))::int as count`;

/** Counts jobs matching a filter (for "retry all N failed jobs?" confirmations). */
export async function jobCount(db: Queryable, filter: JobFilter): Promise<number> {
  const result = await db.query<{ count: number }>(COUNT_SQL, filterValues(filter));
  return result.rows[0]?.count ?? 0;
}

// Retrying a failed or cancelled job gives it a fresh set of attempts; its history
// (`errors`) is kept so the admin still sees why it failed before.
const RETRY_SET = `
  status = 'pending', attempts = 0, throttles = 0, next_run_at = now(), finished_at = null,
  locked_until = null, updated_at = now()`;

/** Puts one failed or cancelled job back to pending. False when it is in another state. */
export async function jobRetry(db: Queryable, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  const result = await db.query(`update ai_jobs set ${RETRY_SET} where id = $1 and status in ('failed', 'cancelled')`, [id]);
  if (result.rowCount > 0) await db.query(`select pg_notify('aiq_jobs', '')`);
  return result.rowCount > 0;
}

// A bulk retry is confirmed as "retry these N": the count says when it was made, and the
// retry takes only jobs that had failed by then. Jobs failing between the two (an outage
// while the admin reads the prompt) are left for another decision. The bound is the count's
// statement time, to the microsecond; failures whose transaction began before the count
// and committed after it (a window of milliseconds) may go with the N uncounted.
const RETRY_BOUND_WHERE = `($6::timestamptz is null or finished_at <= $6)`;

const RETRY_COUNT_SQL = `
  select count(*)::int as count, to_char(now() at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') as failed_by
  from ai_jobs
  where status in ('failed', 'cancelled') and status = $1 and ${FILTER_WHERE} and finished_at <= now()`;

export interface RetryPreview {
  count: number;
  /** Pass to jobRetryMany: it then retries only these jobs, not those failing after the count. */
  failedBy: string;
}

function retryStatus(filter: JobFilter): 'failed' | 'cancelled' {
  const status = filter.status ?? 'failed';
  if (status !== 'failed' && status !== 'cancelled') throw new RangeError('only failed or cancelled jobs can be retried');
  return status;
}

/** How many jobs a bulk retry of this filter would put back now (for "retry all N?"). */
export async function jobRetryCount(db: Queryable, filter: JobFilter): Promise<RetryPreview> {
  const result = await db.query<{ count: number; failed_by: string }>(RETRY_COUNT_SQL, filterValues({ ...filter, status: retryStatus(filter) }));
  const row = result.rows[0]!;
  return { count: row.count, failedBy: row.failed_by };
}


/**
 * Retries every failed (default) or cancelled job matching the filter; returns how many.
 * With `failedBy` (from jobRetryCount), only those that had failed by then.
 */
export async function jobRetryMany(db: Queryable, filter: JobFilter, failedBy?: string): Promise<number> {
  const status = retryStatus(filter);
  if (failedBy !== undefined && !isIsoTime(failedBy)) throw new RangeError('invalid failedBy time');
  // The constant statuses let the update find its rows through the listing index.
  const result = await db.query(
    `update ai_jobs set ${RETRY_SET} where status in ('failed', 'cancelled') and status = $1 and ${FILTER_WHERE} and ${RETRY_BOUND_WHERE}`,
    [...filterValues({ ...filter, status }), failedBy ?? null],
  );
  if (result.rowCount > 0) await db.query(`select pg_notify('aiq_jobs', '')`);
  return result.rowCount;
}

/** Cancels a pending job (a running one cannot be stopped safely). False otherwise. */
export async function jobCancel(db: Queryable, id: string): Promise<boolean> {
  if (!isUuid(id)) return false;
  const result = await db.query(
    `update ai_jobs set status = 'cancelled', finished_at = now(), updated_at = now()
     where id = $1 and status = 'pending'`,
    [id],
  );
  return result.rowCount > 0;
}

export interface QueueStats {
  /** counts[type][status] */
  counts: Record<string, Partial<Record<JobStatus, number>>>;
  totals: Record<JobStatus, number>;
  /** Seconds the oldest due pending job has waited; 0 when none is due. */
  oldestDueAgeSeconds: number;
}

// Counts per type and status, each status through the smallest index that holds it: done
// through its deduplicated (type) index, pending, failed and cancelled through the listing
// index, processing through the lease index. All index-only where the visibility map allows.
const STATS_SQL = `
  select type, 'done' as status, count(*)::int as count from ai_jobs
  where status = 'done'
  group by type
  union all
  select type, status, count(*)::int as count from ai_jobs
  where status in ('pending', 'failed', 'cancelled')
  group by type, status
  union all
  select type, status, count(*)::int as count from ai_jobs
  where status = 'processing'
  group by type, status
  order by type, status`;

export async function jobStats(db: Queryable): Promise<QueueStats> {
  const [counts, oldest] = await Promise.all([
    db.query<{ type: string; status: JobStatus; count: number }>(STATS_SQL),
    db.query<{ age: number | null }>(
      `select extract(epoch from now() - min(next_run_at))::float8 as age
       from ai_jobs where status = 'pending' and next_run_at <= now()`,
    ),
  ]);
  const totals: Record<JobStatus, number> = { pending: 0, processing: 0, done: 0, failed: 0, cancelled: 0 };
  const byType: QueueStats['counts'] = {};
  for (const row of counts.rows) {
    (byType[row.type] ??= {})[row.status] = row.count;
    totals[row.status] += row.count;
  }
  return { counts: byType, totals, oldestDueAgeSeconds: Math.max(0, oldest.rows[0]?.age ?? 0) };
}

/**
 * Deletes done and cancelled jobs finished more than `retentionDays` ago, in batches so
 * that no statement holds locks for long. Failed jobs stay until an admin retries them.
 */
export async function jobCleanup(db: Queryable, retentionDays: number, batchSize = 5000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result = await db.query(
      `delete from ai_jobs where id in (
         select id from ai_jobs
         where finished_at < now() - make_interval(secs => $1)
           and status in ('done', 'cancelled')
         limit $2
         -- A job being retried meanwhile is skipped, not deleted once the retry commits.
         for update skip locked)`,
      [retentionDays * 86_400, batchSize],
    );
    deleted += result.rowCount;
    if (result.rowCount < batchSize) return deleted;
  }
}

// Every statement the queue runs, in one place, each with why it is shaped as it is.
// Functions are named noun-verb (jobClaim, jobFail …) and take any Queryable, so callers
// can run them inside their own transaction. Values are always parameters.
import type { Queryable } from '../db/types.ts';
import type { AttemptError, ClaimedJob, EnqueueInput, Job, JobStatus } from './types.ts';

interface JobRow {
  id: string;
  type: string;
  payload: unknown;
  status: JobStatus;
  priority: number;
  ordering_key: string | null;
  attempts: number;
  max_attempts: number;
  throttles: number;
  next_run_at: Date;
  last_error: string | null;
  errors: AttemptError[];
  result: unknown;
  locked_by: string | null;
  locked_until: Date | null;
  attempted_at: Date | null;
  created_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

type ClaimedJobRow = Pick<JobRow, 'id' | 'type' | 'payload' | 'priority' | 'ordering_key' | 'attempts' | 'max_attempts' | 'throttles' | 'created_at'>;

function claimedJobFromRow(row: ClaimedJobRow): ClaimedJob {
  return {
    id: row.id,
    type: row.type,
    payload: row.payload,
    priority: row.priority,
    orderingKey: row.ordering_key,
    attempts: row.attempts,
    maxAttempts: row.max_attempts,
    // A row read without the column (a partial select) counts as never throttled.
    throttles: row.throttles ?? 0,
    createdAt: row.created_at,
  };
}

export function jobFromRow(row: JobRow): Job {
  return {
    ...claimedJobFromRow(row),
    status: row.status,
    nextRunAt: row.next_run_at,
    lastError: row.last_error,
    errors: row.errors ?? [],
    result: row.result,
    lockedBy: row.locked_by,
    lockedUntil: row.locked_until,
    attemptedAt: row.attempted_at,
    updatedAt: row.updated_at,
    finishedAt: row.finished_at,
  };
}

// Defaults come from the table, so a plain SQL insert and this one behave alike.
const ENQUEUE_SQL = `
  insert into ai_jobs (type, payload, next_run_at, priority, max_attempts, ordering_key)
  values ($1, $2::jsonb, coalesce($3::timestamptz, now()), coalesce($4::int, 0), coalesce($5::int, 3), $6)
  returning id`;

/** Enqueues one job; pass the caller's transaction to enqueue atomically with its data. */
export async function jobEnqueue(db: Queryable, input: EnqueueInput): Promise<string> {
  const result = await db.query<{ id: string }>(ENQUEUE_SQL, enqueueValues(input));
  return result.rows[0]!.id;
}

function enqueueValues(input: EnqueueInput): unknown[] {
  return [enqueueType(input), payloadJson(input), enqueueRunAt(input), input.priority ?? null, input.maxAttempts ?? null, input.orderingKey ?? null];
}

// What PostgreSQL would refuse in its own words ("null value in column payload",
// "unsupported Unicode escape sequence", a date it cannot parse), refused here naming the
// field (found by a queue probe).
function enqueueType(input: EnqueueInput): string {
  if (typeof input.type !== 'string' || input.type === '') throw new TypeError(`a job's type must be a non-empty string, not ${JSON.stringify(input.type)}`);
  return input.type;
}

const JSON_NUL = /(?:^|[^\\])(?:\\\\)*\\u0000/;

function payloadJson(input: EnqueueInput): string {
  let json: string | undefined;
  try {
    json = JSON.stringify(input.payload ?? null);
  } catch (err) {
    throw new TypeError(`the payload of a ${input.type} job is not JSON: ${(err as Error).message}`);
  }
  if (json === undefined) throw new TypeError(`the payload of a ${input.type} job is not JSON (a function or a symbol)`);
  // An escaped NUL, not an escaped backslash before the text "u0000".
  if (JSON_NUL.test(json)) throw new TypeError(`the payload of a ${input.type} job holds a NUL character (\\u0000), which PostgreSQL cannot store`);
  return json;
}

function enqueueRunAt(input: EnqueueInput): Date | null {
  if (input.runAt === undefined || input.runAt === null) return null;
  if (!(input.runAt instanceof Date) || Number.isNaN(input.runAt.getTime())) throw new TypeError(`runAt of a ${input.type} job is not a valid Date`);
  return input.runAt;
}

// The queue's insert without NOTIFY: the notify trigger stays quiet for the rest of the
// transaction (set_config is evaluated inside the insert, before the statement's trigger
// fires). A transaction that notifies holds a global lock through its commit, so
// notifying enqueuers commit one at a time; the caller decides when to wake the workers
// (one `pg_notify` after commit, say). The webhook's aiq_inbound_store (migration 0017)
// enqueues the same way, in SQL of its own.
const ENQUEUE_UNNOTIFIED_SQL = `
  insert into ai_jobs (type, payload, next_run_at, priority, max_attempts, ordering_key)
  select $1, $2::jsonb, coalesce($3::timestamptz, now()), coalesce($4::int, 0), coalesce($5::int, 3), $6
  from (select set_config('aiq.defer_notify', 'on', true)) as quiet
  returning id`;

/**
 * Enqueues one job without NOTIFY inside the transaction, so that concurrent enqueuing
 * transactions do not queue behind the notify lock at commit. Wake the workers yourself
 * (`select pg_notify('aiq_jobs', '')`), or let them find the job at their next poll.
 */
export async function jobEnqueueUnnotified(db: Queryable, input: EnqueueInput): Promise<string> {
  const result = await db.query<{ id: string }>(ENQUEUE_UNNOTIFIED_SQL, enqueueValues(input));
  return result.rows[0]!.id;
}

// One statement for the whole batch: arrays in, unnest to rows. `with ordinality` keeps
// insertion order, which is what ordering keys run by.
const ENQUEUE_MANY_SQL = `
  insert into ai_jobs (type, payload, next_run_at, priority, max_attempts, ordering_key)
  select type, payload::jsonb, coalesce(run_at, now()), coalesce(priority, 0), coalesce(max_attempts, 3), ordering_key
  from unnest($1::text[], $2::text[], $3::timestamptz[], $4::int[], $5::int[], $6::text[])
       with ordinality as input(type, payload, run_at, priority, max_attempts, ordering_key, position)
  order by position
  returning id`;

/** Enqueues many jobs in one statement (imports, benchmarks). Returns their ids in order. */
export async function jobEnqueueMany(db: Queryable, inputs: EnqueueInput[]): Promise<string[]> {
  if (inputs.length === 0) return [];
  const result = await db.query<{ id: string }>(ENQUEUE_MANY_SQL, [
    inputs.map(enqueueType),
    inputs.map(payloadJson),
    inputs.map(enqueueRunAt),
    inputs.map((i) => i.priority ?? null),
    inputs.map((i) => i.maxAttempts ?? null),
    inputs.map((i) => i.orderingKey ?? null),
  ]);
  return result.rows.map((r) => r.id);
}

// The claim through the SQL function (0001_queue.sql, by type since 0027), reading back only what a worker
// needs: at hundreds of rows per claim, decoding every bookkeeping column (six timestamps,
// the history) cost the worker about as much CPU as the claim cost Postgres.
const CLAIM_SQL = `
  select id, type, payload, priority, ordering_key, attempts, max_attempts, throttles, created_at
  from claim_ai_jobs($1, $2, $3, $4::text[])`;

/**
 * Claims up to `batchSize` due jobs for `workerId`, leased for `leaseSeconds`: only of
 * `types` when given (a worker's handlers), any type otherwise.
 */
export async function jobClaim(db: Queryable, batchSize: number, workerId: string, leaseSeconds: number, types?: readonly string[]): Promise<ClaimedJob[]> {
  const result = await db.query<ClaimedJobRow>(CLAIM_SQL, [batchSize, workerId, leaseSeconds, types ?? null]);
  return result.rows.map(claimedJobFromRow);
}

export interface Completion {
  id: string;
  /** The attempt number the worker ran: the fencing token together with the worker id. */
  attempt: number;
  result?: unknown;
}

// Many completions in one statement, fenced: only a row still processing, held by this
// worker, at the attempt it ran, is completed. A worker whose lease was reclaimed (and
// perhaps re-claimed by another, or by itself) therefore cannot overwrite the newer state.
// Shaped so that its plan cannot go wrong on a table whose statistics never keep up:
//   * The rows are found by primary key alone. "Processing" is tested as `locked_until is
//     not null` (the same thing, by the lease CHECK constraint) because a `status` test
//     lets the planner read an index of processing rows instead, through every dead entry
//     a drain leaves behind until vacuum (70,000 entries read for 500 rows, measured).
//     Heartbeat and release below do the same.
//   * Each row's attempts are looked up in one JSON object keyed by id (a binary search in
//     jsonb; a list, since a batch can hold a stale attempt's completion next to the
//     current one's), not matched by joining an unnest: with a stale row estimate the join became
//     a nested loop over the whole batch for every row (O(n²): 90 ms for 500 rows). Nor as
//     an `id/attempt = any(text[])` test: PostgreSQL hashes such a list only when it is a
//     constant, and a prepared statement's generic plan gets it as a parameter, so every
//     row was compared with every key (O(n²) again: in a drain, 45% of PostgreSQL's time
//     went to those text comparisons).
//   * Results ride along as one JSON object keyed by id/attempt (null when no job
//     returned anything, the common case), so a stale attempt's result can never be
//     written to the attempt that completes.
//   * The statement is a function (migration 0028) that always takes the generic plan:
//     planned for its given ids, a connection's first five runs (and every run behind a
//     pooler) read the whole table where it has no statistics yet.
const COMPLETE_MANY_SQL = `select completed_id as id, completed_ordering_key as ordering_key from complete_ai_jobs($1::uuid[], $2::jsonb, $3::jsonb, $4)`;

/**
 * jsonb and text columns refuse NUL characters and lone surrogates. One such string in a
 * handler's result failed the whole completion batch, which was then retried forever and
 * held up every later completion; they are replaced (U+FFFD) instead.
 */
function storableText(_key: string, value: unknown): unknown {
  return typeof value === 'string' ? storable(value) : value;
}

const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

function storable(text: string): string {
  return text.replace(UNSTORABLE, '\uFFFD');
}

/**
 * A handler's result as JSON. One that JSON cannot hold (a BigInt, a cycle) failed the
 * whole completion batch, which was then retried forever and held up every completion
 * after it; the job is done all the same, so its result says why it is missing instead.
 */
function resultJson(result: unknown): string {
  try {
    return JSON.stringify(result, storableText) ?? 'null';
  } catch (err) {
    return JSON.stringify({ unstorable: `the handler's result could not be stored as JSON: ${storable((err as Error).message)}` });
  }
}

/** Marks jobs done; returns the ids it completed (those missing had lost their lease). */
export async function jobCompleteMany(
  db: Queryable,
  workerId: string,
  completions: Completion[],
): Promise<Array<{ id: string; orderingKey: string | null }>> {
  if (completions.length === 0) return [];
  const key = (c: Completion) => `${c.id}/${c.attempt}`;
  const results = completions.filter((c) => c.result !== undefined);
  // Each result on its own: one that cannot be written as JSON must not fail the batch.
  const resultsJson = results.length > 0 ? `{${results.map((c) => `${JSON.stringify(key(c))}:${resultJson(c.result)}`).join(',')}}` : null;
  const attempts: Record<string, number[]> = {};
  for (const c of completions) (attempts[c.id] ??= []).push(c.attempt);
  const result = await db.query<{ id: string; ordering_key: string | null }>(COMPLETE_MANY_SQL, [
    completions.map((c) => c.id),
    JSON.stringify(attempts),
    resultsJson,
    workerId,
  ]);
  return result.rows.map((r) => ({ id: r.id, orderingKey: r.ordering_key }));
}

export interface FailureInput {
  id: string;
  attempt: number;
  workerId: string;
  error: string;
  durationMs: number;
  /** Fail now regardless of attempts left. */
  permanent: boolean;
  /** Seconds until the next attempt when one is left. */
  delaySeconds: number;
  /** Give the attempt back (throttling): it does not count towards max_attempts. */
  refund: boolean;
  /** Count it as a throttle (a refunded 429), which later throttles back off by. Default false. */
  throttled?: boolean;
}

// One failed attempt: back to pending after the delay, or failed when it was permanent or
// the last attempt. The attempt is appended to `errors` (the history an admin sees). Fenced
// like completion.
const FAIL_SQL = `
  update ai_jobs
  set status = case when $5 or (not $7 and attempts >= max_attempts) then 'failed' else 'pending' end,
      next_run_at = case when $5 or (not $7 and attempts >= max_attempts) then next_run_at
                         else now() + make_interval(secs => $6) end,
      finished_at = case when $5 or (not $7 and attempts >= max_attempts) then now() end,
      attempts = case when $7 then attempts - 1 else attempts end,
      throttles = case when $9 then throttles + 1 else throttles end,
      last_error = $3,
      errors = errors || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
        'attempt', attempts,
        'worker', locked_by,
        'started_at', attempted_at,
        'duration_ms', $4::int,
        'error', $3::text,
        'at', now(),
        'refunded', case when $7 then true end))),
      locked_until = null,
      updated_at = now()
  where id = $1 and attempts = $2 and locked_by = $8 and status = 'processing'
  returning status, next_run_at, ordering_key`;

/** Records a failed attempt. Returns the job's new state, or null when the lease was lost. */
export async function jobFail(
  db: Queryable,
  input: FailureInput,
): Promise<{ status: JobStatus; nextRunAt: Date; orderingKey: string | null } | null> {
  const result = await db.query<{ status: JobStatus; next_run_at: Date; ordering_key: string | null }>(FAIL_SQL, [
    input.id,
    input.attempt,
    storable(input.error),
    Math.round(input.durationMs),
    input.permanent,
    input.delaySeconds,
    input.refund,
    input.workerId,
    input.throttled ?? false,
  ]);
  const row = result.rows[0];
  return row ? { status: row.status, nextRunAt: row.next_run_at, orderingKey: row.ordering_key } : null;
}

// Extends the leases of the jobs this worker holds. The heartbeat's set (running and
// prefetched jobs) can overlap a completion of this worker's already under way: two
// multi-row updates locking shared rows in different orders deadlocked (seen in a drain
// of 150,000 jobs). Rows another statement has locked are skipped, not waited for; they
// are still reported as held when this worker held them, since that statement is ours
// (a completion, a failure, a handler's own heartbeat) or a reaper the next heartbeat sees.
// The lock tests ownership again: a completion (or a reaper) that commits after this
// statement's snapshot and before the lock leaves a row that is no longer processing, and
// `for update` then sees that newest version. Extending its lease would break the lease
// constraint and fail the whole heartbeat, leaving every other lease unextended.
const HEARTBEAT_SQL = `
  with mine as (
    select id from ai_jobs
    where id = any($1::uuid[]) and locked_by = $2 and locked_until is not null
  ), extended as (
    update ai_jobs
    set locked_until = now() + make_interval(secs => $3)
    where id in (
      select id from ai_jobs
      where id in (select id from mine) and locked_by = $2 and locked_until is not null
      for update skip locked
    )
    returning id
  )
  select id from mine`;

/** Extends the leases of jobs this worker holds; returns the ids it still holds. */
export async function jobHeartbeat(db: Queryable, workerId: string, ids: string[], leaseSeconds: number): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const result = await db.query<{ id: string }>(HEARTBEAT_SQL, [ids, workerId, leaseSeconds]);
  return new Set(result.rows.map((r) => r.id));
}

/**
 * Hands jobs back to pending without counting the attempt: jobs claimed but not started at
 * shutdown, and jobs interrupted by it. They run again at once, elsewhere or after restart.
 */
export async function jobRelease(db: Queryable, workerId: string, ids: string[]): Promise<number> {
  if (ids.length === 0) return 0;
  const result = await db.query(
    `update ai_jobs
     set status = 'pending', attempts = greatest(attempts - 1, 0), locked_until = null,
         next_run_at = now(), updated_at = now()
     where id = any($1::uuid[]) and locked_by = $2 and locked_until is not null`,
    [ids, workerId],
  );
  if (result.rowCount > 0) await db.query(`select pg_notify('aiq_jobs', '')`);
  return result.rowCount;
}

// Expired leases belong to workers that died (kill -9, lost machine) or stalled. The job
// goes back to pending for another attempt, or to failed when that was its last. Batched,
// and SKIP LOCKED so that several reapers never wait on each other. `which` picks the jobs
// and `why` (a format() pattern, %s the worker) is what their history records.
function reclaimSql(which: string, why: string): string {
  return `
  with expired as (
    select id from ai_jobs
    where status = 'processing' and ${which}
    order by locked_until
    limit $1
    for update skip locked
  )
  update ai_jobs j
  set status = case when j.attempts >= j.max_attempts then 'failed' else 'pending' end,
      finished_at = case when j.attempts >= j.max_attempts then now() end,
      next_run_at = now(),
      last_error = format('${why}', coalesce(j.locked_by, '?')),
      errors = j.errors || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempts,
        'worker', j.locked_by,
        'started_at', j.attempted_at,
        'duration_ms', null,
        'error', format('${why}', coalesce(j.locked_by, '?')),
        'at', now())),
      locked_until = null,
      updated_at = now()
  from expired
  where j.id = expired.id
  returning j.id, j.type, j.status`;
}

const RECLAIM_EXPIRED_SQL = reclaimSql('locked_until < now()', 'lease expired: worker %s stopped without finishing (killed, crashed or stalled)');

// Every job being worked on, whatever its lease: for a worker that knows it is the only one
// on this database (the embedded database, whose folder lock proves that the process which
// had it before is gone), so a killed process's jobs run again at once, not a lease later.
const RECLAIM_ORPHANED_SQL = reclaimSql('true', 'worker %s stopped without finishing: its process is gone (killed or crashed), found as the only worker of this database started');

export interface ReclaimedJob {
  id: string;
  type: string;
  status: JobStatus;
}

async function reclaim(db: Queryable, sql: string, limit: number): Promise<ReclaimedJob[]> {
  const result = await db.query<ReclaimedJob>(sql, [limit]);
  if (result.rows.some((r) => r.status === 'pending')) await db.query(`select pg_notify('aiq_jobs', '')`);
  return result.rows;
}

/** Reclaims up to `limit` jobs whose lease expired. */
export function jobReclaimExpired(db: Queryable, limit = 1000): Promise<ReclaimedJob[]> {
  return reclaim(db, RECLAIM_EXPIRED_SQL, limit);
}

/**
 * Reclaims up to `limit` jobs being worked on, leases or not. Only for a worker that is sure
 * no other one runs on this database: a live worker's job would run twice.
 */
export function jobReclaimOrphaned(db: Queryable, limit = 1000): Promise<ReclaimedJob[]> {
  return reclaim(db, RECLAIM_ORPHANED_SQL, limit);
}

// The wait is measured by the database, whose clock set next_run_at: a timestamp compared
// with the process clock fired early by as much as that clock ran ahead (and found nothing,
// again and again), or late by as much as it ran behind.
const NEXT_DUE_SQL = `
  select (extract(epoch from min(next_run_at) - now()) * 1000)::float8 as delay_ms
  from ai_jobs
  where status = 'pending' and next_run_at > now()`;

/** Milliseconds until the next pending job becomes due, by the database's clock; null when none is scheduled in the future. */
export async function jobNextDueInMs(db: Queryable): Promise<number | null> {
  const result = await db.query<{ delay_ms: number | null }>(NEXT_DUE_SQL);
  const delayMs = result.rows[0]?.delay_ms;
  return delayMs ?? null;
}

export async function jobGet(db: Queryable, id: string): Promise<Job | null> {
  if (!isUuid(id)) return null;
  const result = await db.query<JobRow>('select * from ai_jobs where id = $1', [id]);
  return result.rows[0] ? jobFromRow(result.rows[0]) : null;
}

export function isUuid(value: string): boolean {
  return /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(value);
}

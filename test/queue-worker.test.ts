// The worker runtime in-process against real databases: retries and backoff, permanent
// errors, throttling, time-outs, the pool (no batch barrier), ordering keys, wake-ups and
// graceful shutdown.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { openPostgres } from '../src/db/postgres.ts';
import type { Database } from '../src/db/types.ts';
import { createLogger } from '../src/logger.ts';
import {
  jobEnqueue,
  jobEnqueueMany,
  jobClaim,
  jobGet,
  jobRetry,
  PermanentJobError,
  RetryLaterError,
  Worker,
  type JobHandler,
  type WorkerOptions,
} from '../src/queue/index.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';
import { waitFor } from './helpers/processes.ts';

const anything = { safeParse: (input: unknown) => ({ success: true as const, data: input as any }) };
const logger = createLogger('silent');

function handler(type: string, run: JobHandler<any>['run']): JobHandler<any> {
  return { type, schema: anything, run };
}

test('worker options that cannot work are refused, naming the option; a time-out past what a timer holds means that long', () => {
  // Found by a queue probe: a lease of 0.5 s never claimed ("invalid input syntax for type
  // integer", again and again), concurrency 0 did nothing, and jobTimeoutMs: Infinity
  // aborted every job after 1 ms.
  const db = {} as Database;
  for (const [option, value] of [['leaseSeconds', 0.5], ['concurrency', 0], ['maxClaimBatch', -1], ['prefetch', 1.5], ['jobTimeoutMs', 0], ['pollIntervalMs', Number.NaN]] as const) {
    assert.throws(() => new Worker({ db, logger, handlers: [], [option]: value }), new RegExp(`Worker option ${option} must be`), option);
  }
  assert.doesNotThrow(() => new Worker({ db, logger, handlers: [], jobTimeoutMs: Infinity, shutdownGraceMs: 0 }));
});

test('an enqueue PostgreSQL would refuse in its own words is refused naming the field', async () => {
  // Found by a queue probe: "null value in column payload" for a function, "unsupported
  // Unicode escape sequence" for a NUL, a date parse error for an Invalid Date.
  const db = { query: async () => assert.fail('nothing reaches the database'), exec: async () => {} };
  const cases: Array<[Parameters<typeof jobEnqueue>[1], RegExp]> = [
    [{ type: 'x', payload: () => 1 }, /payload of a x job is not JSON \(a function or a symbol\)/],
    [{ type: 'x', payload: { n: 1n } }, /payload of a x job is not JSON: .*BigInt/],
    [{ type: 'x', payload: { text: 'a\u0000b' } }, /holds a NUL character/],
    [{ type: 'x', payload: {}, runAt: new Date('nope') }, /runAt of a x job is not a valid Date/],
    [{ type: '', payload: {} }, /type must be a non-empty string/],
  ];
  for (const [input, message] of cases) {
    await assert.rejects(jobEnqueue(db, input), message);
    await assert.rejects(jobEnqueueMany(db, [input]), message);
  }
  // The text "\u0000" (a backslash, then u0000) is no NUL.
  await assert.rejects(jobEnqueue(db, { type: 'x', payload: { text: '\\u0000' } }), /nothing reaches the database/);
});

test('a retry-after that is no number waits as backoff says; one past a week waits a week', () => {
  assert.equal(new RetryLaterError('429', { delayMs: Number.NaN }).delayMs, 0);
  assert.equal(new RetryLaterError('429', { delayMs: Infinity }).delayMs, 7 * 24 * 3600 * 1000);
  assert.equal(new RetryLaterError('429', { delayMs: 1e18 }).delayMs, 7 * 24 * 3600 * 1000);
  assert.equal(new RetryLaterError('429', { delayMs: -5 }).delayMs, 0);
  assert.equal(new RetryLaterError('429', { delayMs: 1500 }).delayMs, 1500);
});

for (const backend of BACKENDS) {
  describe(`worker on ${backend.name}`, () => {
    let t: TestDatabase;
    const workers: Worker[] = [];
    const startWorker = async (options: Omit<WorkerOptions, 'db' | 'logger'> & { db?: Database }) => {
      const worker = new Worker({ db: t.db, logger, pollIntervalMs: 60_000, ...options });
      workers.push(worker);
      await worker.start();
      return worker;
    };
    before(async () => {
      t = await backend.fresh();
    });
    after(async () => {
      await Promise.all(workers.map((w) => w.stop()));
      await t.close();
    });

    test('a failing handler walks pending → backoff → … → failed, recording every attempt', async () => {
      let calls = 0;
      const worker = await startWorker({ handlers: [handler('flaky', async () => { calls++; throw new Error(`boom ${calls}`); })] });
      const id = await jobEnqueue(t.db, { type: 'flaky', payload: {}, maxAttempts: 3 });
      const expectedDelays = [10, 20];
      for (const [index, delay] of expectedDelays.entries()) {
        await waitFor(async () => (await jobGet(t.db, id))!.errors.length === index + 1, `attempt ${index + 1}`);
        const job = (await jobGet(t.db, id))!;
        assert.equal(job.status, 'pending');
        assert.equal(job.lastError, `boom ${index + 1}`);
        const waitSeconds = (job.nextRunAt.getTime() - job.updatedAt.getTime()) / 1000;
        assert.ok(Math.abs(waitSeconds - delay) < 0.5, `attempt ${index + 1} waits ${delay} s (got ${waitSeconds})`);
        // Move the clock instead of sleeping: make the retry due now, then wake the worker.
        await t.db.query('update ai_jobs set next_run_at = now() where id = $1', [id]);
        worker.wake();
      }
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'failed', 'final failure');
      const job = (await jobGet(t.db, id))!;
      assert.equal(calls, 3);
      assert.equal(job.attempts, 3);
      assert.equal(job.lastError, 'boom 3');
      assert.deepEqual(job.errors.map((e) => [e.attempt, e.error, e.worker]), [[1, 'boom 1', worker.id], [2, 'boom 2', worker.id], [3, 'boom 3', worker.id]]);
      assert.ok(job.errors.every((e) => typeof e.duration_ms === 'number' && e.started_at));
      assert.ok(job.finishedAt);
      await worker.stop();
    });

    test('invalid payloads and permanent errors fail at once', async () => {
      const strict: JobHandler<{ n: number }> = {
        type: 'strict',
        schema: { safeParse: (input: any) => (typeof input?.n === 'number' ? { success: true, data: input } : { success: false, error: { message: 'n must be a number' } }) },
        run: async () => undefined,
      };
      const worker = await startWorker({ handlers: [strict, handler('fatal', async () => { throw new PermanentJobError('bad request: 400'); })] });
      const invalid = await jobEnqueue(t.db, { type: 'strict', payload: { n: 'x' } });
      const fatal = await jobEnqueue(t.db, { type: 'fatal', payload: {} });
      for (const [id, reason] of [[invalid, /invalid payload for strict: n must be a number/], [fatal, /bad request: 400/]] as const) {
        await waitFor(async () => (await jobGet(t.db, id))!.status === 'failed', `job ${id} failed`);
        const job = (await jobGet(t.db, id))!;
        assert.equal(job.attempts, 1, 'no retries for a permanent error');
        assert.match(job.lastError!, reason);
      }
      await worker.stop();
    });

    test('a worker claims only the types it has a handler for; the others wait for a worker that has one', async () => {
      // Found by a queue probe: a worker without the handler claimed the job and failed it
      // for good ("unknown job type"), as old workers would a new type in a rolling deploy.
      const ran: string[] = [];
      const old = await startWorker({ handlers: [handler('known', async ({ job }) => void ran.push(job.type))] });
      const known = await jobEnqueue(t.db, { type: 'known', payload: {} });
      const added = await jobEnqueue(t.db, { type: 'added_in_next_version', payload: {} });
      await waitFor(async () => (await jobGet(t.db, known))!.status === 'done', 'the known job');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const waiting = (await jobGet(t.db, added))!;
      assert.deepEqual([waiting.status, waiting.attempts], ['pending', 0], 'not claimed, no attempt spent');
      await old.stop();
      const next = await startWorker({ handlers: [handler('added_in_next_version', async ({ job }) => void ran.push(job.type))] });
      await waitFor(async () => (await jobGet(t.db, added))!.status === 'done', 'the new type, by a worker that has it');
      assert.deepEqual(ran, ['known', 'added_in_next_version']);
      await next.stop();
    });

    test('a throttled job waits the retry-after without spending an attempt', async () => {
      let calls = 0;
      const worker = await startWorker({
        handlers: [handler('throttled', async () => {
          calls++;
          if (calls <= 3) throw new RetryLaterError('429 from provider', { delayMs: 7000, countsAsAttempt: false });
          return { ok: true };
        })],
      });
      const id = await jobEnqueue(t.db, { type: 'throttled', payload: {}, maxAttempts: 2 });
      for (let n = 1; n <= 3; n++) {
        await waitFor(async () => (await jobGet(t.db, id))!.errors.length === n, `throttle ${n}`);
        const job = (await jobGet(t.db, id))!;
        assert.equal(job.status, 'pending');
        assert.equal(job.attempts, 0, 'the attempt was given back');
        const wait = (job.nextRunAt.getTime() - job.updatedAt.getTime()) / 1000;
        assert.ok(Math.abs(wait - 7) < 0.5, `honours retry-after (got ${wait})`);
        await t.db.query('update ai_jobs set next_run_at = now() where id = $1', [id]);
        worker.wake();
      }
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'done after three 429s');
      assert.equal((await jobGet(t.db, id))!.errors.filter((e) => e.refunded).length, 3);
      await worker.stop();
    });

    test('a job waiting for something its handler bounds keeps its attempt past the throttle window, and is no throttle', async () => {
      let calls = 0;
      const worker = await startWorker({
        throttleWindowMs: 0,
        handlers: [handler('waits', async () => {
          calls++;
          if (calls <= 2) throw new RetryLaterError('waiting for a confirmation', { delayMs: 60_000, waiting: true });
          throw new RetryLaterError('429 from provider', { delayMs: 60_000, countsAsAttempt: false });
        })],
      });
      const id = await jobEnqueue(t.db, { type: 'waits', payload: {}, maxAttempts: 1 });
      for (let n = 1; n <= 2; n++) {
        await waitFor(async () => (await jobGet(t.db, id))!.errors.length === n, `wait ${n}`);
        const job = (await jobGet(t.db, id))!;
        assert.deepEqual([job.status, job.attempts, job.throttles], ['pending', 0, 0], 'given back, not counted as a throttle');
        await t.db.query('update ai_jobs set next_run_at = now() where id = $1', [id]);
        worker.wake();
      }
      // A throttle past its window counts, as before: the job's one attempt is used up.
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'failed', 'the throttle past its window to count');
      await worker.stop();
    });

    test('a throttled job that asks for no wait (Retry-After: 0) still waits a second, not retried at once', async () => {
      const calls: number[] = [];
      const worker = await startWorker({
        handlers: [handler('throttled_now', async () => {
          calls.push(performance.now());
          throw new RetryLaterError('429 from provider, Retry-After: 0', { delayMs: 0, countsAsAttempt: false });
        })],
      });
      const id = await jobEnqueue(t.db, { type: 'throttled_now', payload: {}, maxAttempts: 2 });
      await waitFor(async () => calls.length >= 2, 'the second call');
      await worker.stop();
      // Without the floor the second call came as soon as the worker could claim the job again.
      const gap = calls[1]! - calls[0]!;
      assert.ok(gap >= 950, `the second call came ${gap.toFixed(0)} ms after the first`);
      const job = (await jobGet(t.db, id))!;
      assert.ok(job.errors.length >= 1 && job.errors.every((e) => e.refunded), 'each throttled attempt was given back');
    });

    test('a hanging handler times out, is aborted, and is retried', async () => {
      let aborted = 0;
      const worker = await startWorker({
        jobTimeoutMs: 300,
        handlers: [handler('hang', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => { aborted++; reject(signal.reason); })))],
      });
      const id = await jobEnqueue(t.db, { type: 'hang', payload: {} });
      await waitFor(async () => (await jobGet(t.db, id))!.errors.length === 1, 'time-out recorded');
      const job = (await jobGet(t.db, id))!;
      assert.equal(job.status, 'pending');
      assert.match(job.lastError!, /timed out after 300 ms/);
      assert.equal(aborted, 1);
      await worker.stop();
    });

    test('a handler that ignores its abort keeps its slot until it returns; no second run overlaps it', async () => {
      let live = 0;
      let mostLive = 0;
      const runs: Array<{ id: string; start: number; end?: number }> = [];
      const worker = await startWorker({
        concurrency: 2,
        jobTimeoutMs: 150,
        leaseSeconds: 30,
        backoff: { baseSeconds: 0, capSeconds: 0 },
        handlers: [
          handler('deaf', async ({ job }) => {
            const run: { id: string; start: number; end?: number } = { id: job.id, start: performance.now() };
            runs.push(run);
            mostLive = Math.max(mostLive, ++live);
            // Ignores the signal on purpose, as a careless handler (a sync loop, a client without abort) does.
            await new Promise((resolve) => setTimeout(resolve, 600));
            live--;
            run.end = performance.now();
            if (runs.filter((r) => r.id === job.id).length === 1) throw new Error('first run fails');
          }),
        ],
      });
      const ids = await jobEnqueueMany(t.db, Array.from({ length: 4 }, () => ({ type: 'deaf', payload: {}, maxAttempts: 3 })));
      await waitFor(async () => {
        const jobs = await Promise.all(ids.map((id) => jobGet(t.db, id)));
        return jobs.every((j) => j!.status === 'done');
      }, 'every job done on its second run', 30_000);
      assert.ok(mostLive <= 2, `at most concurrency (2) handlers at once, saw ${mostLive}`);
      for (const id of ids) {
        const own = runs.filter((r) => r.id === id).sort((a, b) => a.start - b.start);
        assert.equal(own.length, 2, 'failed once, then done');
        assert.ok(own[1]!.start >= own[0]!.end!, 'the retry started only after the timed-out run returned');
        const job = (await jobGet(t.db, id))!;
        assert.match(job.errors[0]!.error, /timed out after 150 ms \(then: first run fails\)/);
      }
      await worker.stop();
    });

    for (const concurrency of [2, 1]) test(`a timed-out run still going when an admin retries its job cannot complete the job under the new run (concurrency ${concurrency})`, async () => {
      // Found by a queue probe: the retry counts attempts from 0 again, so the old run's
      // (worker, attempt) fence matched the new run's, and the old run completed the job
      // while the new one was under way.
      const releases: Array<() => void> = [];
      const started: number[] = [];
      // With one slot the retried claim waits in the buffer until the old run returns (review).
      const worker = await startWorker({
        concurrency,
        jobTimeoutMs: 200,
        leaseSeconds: 1,
        handlers: [
          handler('deaf', async ({ job }) => {
            const run = started.push(job.attempts);
            // Ignores its signal; returns when the test says so.
            await new Promise<void>((resolve) => releases.push(resolve));
            return { from: `run ${run}` };
          }),
        ],
      });
      const id = await jobEnqueue(t.db, { type: 'deaf', payload: {}, maxAttempts: 1 });
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'failed', 'the lease to lapse and the job to fail', 15_000);
      assert.equal(await jobRetry(t.db, id), true);
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'processing', 'the retried job to be claimed', 15_000);
      if (concurrency > 1) await waitFor(() => started.length === 2, 'the retried run to start', 15_000);
      releases[0]!();
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal((await jobGet(t.db, id))!.status, 'processing', 'the old run did not complete it');
      await waitFor(() => started.length === 2, 'the retried run to start', 15_000);
      assert.deepEqual(started, [1, 1], 'both runs are attempt 1');
      releases[1]!();
      await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'the new run to complete it');
      assert.deepEqual((await jobGet(t.db, id))!.result, { from: 'run 2' });
      await worker.stop();
    });

    test('one slow job never holds back the others (a pool, not batches)', async () => {
      let release!: () => void;
      const slowGate = new Promise<void>((resolve) => (release = resolve));
      const worker = await startWorker({
        concurrency: 3,
        prefetch: 0,
        handlers: [handler('slow', () => slowGate), handler('quick', async () => undefined)],
      });
      const slowId = await jobEnqueue(t.db, { type: 'slow', payload: {} });
      await waitFor(() => worker.inFlight === 1, 'slow job started');
      await jobEnqueueMany(t.db, Array.from({ length: 30 }, () => ({ type: 'quick', payload: {} })));
      await waitFor(async () => (await t.db.query<{ n: number }>(`select count(*)::int as n from ai_jobs where type = 'quick' and status = 'done'`)).rows[0]!.n === 30, 'quick jobs done while the slow one runs');
      assert.equal((await jobGet(t.db, slowId))!.status, 'processing');
      release();
      await waitFor(async () => (await jobGet(t.db, slowId))!.status === 'done', 'slow job done');
      await worker.stop();
    });

    test('NOTIFY wakes an idle worker without waiting for the poll', async () => {
      const started: number[] = [];
      const worker = await startWorker({ handlers: [handler('ping', async () => { started.push(Date.now()); })] });
      await new Promise((resolve) => setTimeout(resolve, 100));
      const enqueuedAt = Date.now();
      await jobEnqueue(t.db, { type: 'ping', payload: {} });
      await waitFor(() => started.length === 1, 'picked up', 5000);
      assert.ok(started[0]! - enqueuedAt < 1000, `picked up in ${started[0]! - enqueuedAt} ms with a 60 s poll`);
      await worker.stop();
    });

    test('a job scheduled for later runs when it becomes due, without a poll', async () => {
      const ran: number[] = [];
      const worker = await startWorker({ handlers: [handler('later', async () => { ran.push(Date.now()); })] });
      const runAt = new Date(Date.now() + 400);
      await jobEnqueue(t.db, { type: 'later', payload: {}, runAt });
      await waitFor(() => ran.length === 1, 'ran when due', 5000);
      assert.ok(ran[0]! >= runAt.getTime() - 5, 'not before it was due');
      await worker.stop();
    });

    test('graceful shutdown lets running jobs finish, releases the rest, leaves nothing processing', async () => {
      const finished: number[] = [];
      const worker = await startWorker({
        concurrency: 2,
        prefetch: 4,
        shutdownGraceMs: 300,
        handlers: [
          handler('short', async ({ payload }) => { await new Promise((r) => setTimeout(r, 50)); finished.push(payload.n); }),
          handler('endless', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)))),
        ],
      });
      await jobEnqueue(t.db, { type: 'endless', payload: {} });
      await jobEnqueueMany(t.db, Array.from({ length: 6 }, (_, n) => ({ type: 'short', payload: { n } })));
      await waitFor(() => worker.inFlight === 2, 'two running');
      await worker.stop();
      const { rows } = await t.db.query<{ status: string; n: number }>(`select status, count(*)::int as n from ai_jobs where type in ('short', 'endless') group by status`);
      const byStatus = Object.fromEntries(rows.map((r) => [r.status, r.n]));
      assert.equal(byStatus.processing, undefined, 'nothing left processing');
      assert.equal((byStatus.done ?? 0) + (byStatus.pending ?? 0), 7);
      assert.equal(byStatus.done ?? 0, finished.length);
      const endless = await t.db.query<{ status: string; attempts: number }>(`select status, attempts from ai_jobs where type = 'endless'`);
      assert.deepEqual(endless.rows[0], { status: 'pending', attempts: 0 }, 'the interrupted job is back, its attempt not spent');
      await t.db.query(`delete from ai_jobs where type in ('short', 'endless')`);
    });

    test('stopping while a claim is under way leaves nothing processing', { skip: backend.name === 'pglite' && 'one session: a lock cannot hold a claim back' }, async () => {
      await jobEnqueueMany(t.db, Array.from({ length: 50 }, (_, n) => ({ type: 'parked', payload: { n } })));
      // Another session's lock holds the worker's first claim back until stop() has begun.
      const own = openPostgres({ connectionString: t.url!, poolSize: 4 });
      const holdClaims = new pg.Client({ connectionString: t.url! });
      await holdClaims.connect();
      await holdClaims.query('begin');
      await holdClaims.query('lock table ai_jobs in share row exclusive mode');
      const worker = new Worker({
        db: own,
        logger,
        pollIntervalMs: 60_000,
        concurrency: 1,
        shutdownGraceMs: 5_000,
        handlers: [handler('parked', () => new Promise((resolve) => setTimeout(resolve, 10_000)))],
      });
      await worker.start();
      setTimeout(() => void holdClaims.query('commit'), 300);
      await worker.stop();
      // As a process does on its way out: the pool goes once stop() returns.
      await own.close();
      await holdClaims.end();
      const { rows } = await t.db.query<{ n: number }>(`select count(*)::int as n from ai_jobs where type = 'parked' and status = 'processing'`);
      assert.equal(rows[0]!.n, 0, 'the claim under way handed its jobs back before stop() returned');
      await t.db.query(`delete from ai_jobs where type = 'parked'`);
    });

    test('a claim still under way when the grace period ends is waited for: its jobs go back, none stays processing', { skip: backend.name === 'pglite' && 'one session: a lock cannot hold a claim back' }, async () => {
      await jobEnqueueMany(t.db, Array.from({ length: 20 }, (_, n) => ({ type: 'late-claim', payload: { n } })));
      const own = openPostgres({ connectionString: t.url!, poolSize: 4 });
      const holdClaims = new pg.Client({ connectionString: t.url! });
      await holdClaims.connect();
      await holdClaims.query('begin');
      await holdClaims.query('lock table ai_jobs in share row exclusive mode');
      const worker = new Worker({ db: own, logger, pollIntervalMs: 60_000, concurrency: 10, shutdownGraceMs: 0, handlers: [handler('late-claim', async () => {})] });
      await worker.start();
      // The claim is held back well past the grace period (none).
      setTimeout(() => void holdClaims.query('commit'), 400);
      await worker.stop();
      await own.close();
      await holdClaims.end();
      const { rows } = await t.db.query<{ status: string; attempts: number; n: number }>(
        `select status, attempts, count(*)::int as n from ai_jobs where type = 'late-claim' group by status, attempts`,
      );
      assert.deepEqual(rows, [{ status: 'pending', attempts: 0, n: 20 }], 'every job back, no attempt spent');
      await t.db.query(`delete from ai_jobs where type = 'late-claim'`);
    });

    test('a grace period longer than the lease: leases are still extended, so no other worker runs the job again', async () => {
      const runs: string[] = [];
      const slow = (name: string) => handler('outlives-lease', async () => {
        runs.push(name);
        await new Promise((resolve) => setTimeout(resolve, 4_000));
      });
      const a = await startWorker({ workerId: 'A', leaseSeconds: 2, shutdownGraceMs: 8_000, handlers: [slow('A')] });
      const id = await jobEnqueue(t.db, { type: 'outlives-lease', payload: {} });
      await waitFor(() => runs.length === 1, 'A runs it');
      // B's reaper looks for expired leases every second while A shuts down.
      const b = await startWorker({ workerId: 'B', leaseSeconds: 2, pollIntervalMs: 200, handlers: [slow('B')] });
      await a.stop();
      await b.stop();
      assert.deepEqual(runs, ['A'], 'run once');
      const job = (await jobGet(t.db, id))!;
      assert.deepEqual([job.status, job.attempts], ['done', 1]);
    });

    test('a sole worker runs at once the jobs a killed process left processing; a worker that may share the database waits for their leases', async () => {
      // Its own database: a sole worker takes every processing job, other tests' too.
      const own = await backend.fresh();
      const started: Worker[] = [];
      try {
        const ran: string[] = [];
        const handlers = [handler('orphan', async ({ job }) => void ran.push(job.id)), handler('marker', async () => undefined)];
        const ids = await jobEnqueueMany(own.db, [
          { type: 'orphan', payload: {} },
          { type: 'orphan', payload: {} },
          { type: 'orphan', payload: {}, maxAttempts: 1 },
        ]);
        // A process claims them with an hour's lease and is killed: nothing settles them.
        assert.equal((await jobClaim(own.db, 10, 'gone', 3600)).length, 3);

        const shared = await startWorker({ db: own.db, pollIntervalMs: 100, workerId: 'shared', handlers });
        const marker = await jobEnqueue(own.db, { type: 'marker', payload: {} });
        await waitFor(async () => (await jobGet(own.db, marker))!.status === 'done', 'the shared worker runs other work');
        await shared.stop();
        const meanwhile = await Promise.all(ids.map((id) => jobGet(own.db, id)));
        assert.deepEqual(meanwhile.map((j) => j!.status), ['processing', 'processing', 'processing'], 'a lease not run out is left alone');
        assert.deepEqual(ran, []);

        const reclaimed: string[] = [];
        const sole = new Worker({ db: own.db, logger, pollIntervalMs: 100, sole: true, workerId: 'sole', handlers });
        sole.on('lease:reclaimed', (job) => reclaimed.push(job.id));
        started.push(sole);
        await sole.start();
        assert.deepEqual(reclaimed.sort(), [...ids].sort(), 'all three reclaimed before the start returned');
        await waitFor(async () => (await jobGet(own.db, ids[0]!))!.status === 'done' && (await jobGet(own.db, ids[1]!))!.status === 'done', 'both retried and done');
        const [first, second, last] = await Promise.all(ids.map((id) => jobGet(own.db, id)));
        for (const job of [first!, second!]) {
          assert.deepEqual([job.attempts, job.errors.length, job.errors[0]!.worker], [2, 1, 'gone']);
          assert.match(job.errors[0]!.error, /worker gone stopped without finishing: its process is gone/);
        }
        assert.deepEqual([last!.status, last!.attempts], ['failed', 1], 'its one attempt was spent: failed, visibly');
        assert.match(last!.lastError!, /worker gone stopped without finishing/);
        assert.deepEqual(ran.sort(), [ids[0], ids[1]].sort(), 'each retried job ran once');

        // Nothing claims while the reclaim runs, also when woken (NOTIFY, a poll, a caller):
        // a job claimed then would be taken back by that reclaim and run twice.
        const queries: string[] = [];
        let letReclaimFinish!: () => void;
        const reclaimHeld = new Promise<void>((resolve) => (letReclaimFinish = resolve));
        const watched: Database = Object.create(own.db);
        watched.query = async (text: string, values?: unknown[]) => {
          queries.push(text.includes('claim_ai_jobs') ? 'claim' : text.includes('with expired as') ? 'reclaim' : 'other');
          const result = await own.db.query(text, values);
          if (text.includes('with expired as') && queries.filter((q) => q === 'reclaim').length === 1) await reclaimHeld;
          return result as never;
        };
        const next = await jobEnqueue(own.db, { type: 'orphan', payload: {} });
        const early = new Worker({ db: watched, logger, pollIntervalMs: 100, sole: true, handlers });
        started.push(early);
        const starting = early.start();
        assert.equal(early.start(), starting, 'a second start() is the same start');
        await waitFor(() => queries.includes('reclaim'), 'the reclaim to run');
        early.wake();
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.deepEqual(queries.filter((q) => q === 'claim'), [], 'no claim while the reclaim is under way');
        letReclaimFinish();
        await starting;
        await waitFor(async () => (await jobGet(own.db, next))!.status === 'done', 'claimed after the start');
      } finally {
        await Promise.all(started.map((w) => w.stop()));
        await own.close();
      }
    });

    test('a result JSON cannot hold completes its job with the reason, and holds up no other completion', async () => {
      let runs = 0;
      const worker = await startWorker({
        concurrency: 4,
        handlers: [handler('odd-result', async ({ payload }) => { runs++; return payload.n === 0 ? { count: 1n } : { n: payload.n }; })],
      });
      const ids = await jobEnqueueMany(t.db, Array.from({ length: 4 }, (_, n) => ({ type: 'odd-result', payload: { n } })));
      await waitFor(async () => (await Promise.all(ids.map((id) => jobGet(t.db, id)))).every((j) => j!.status === 'done'), 'all four done');
      assert.equal(runs, 4, 'each ran once');
      const [odd, ...rest] = await Promise.all(ids.map((id) => jobGet(t.db, id)));
      assert.match((odd!.result as { unstorable: string }).unstorable, /could not be stored as JSON: .*BigInt/);
      assert.deepEqual(rest.map((j) => j!.result), [{ n: 1 }, { n: 2 }, { n: 3 }]);
      await worker.stop();
      await t.db.query(`delete from ai_jobs where type = 'odd-result'`);
    });

    test('with two claims in flight, new work announced during them is not lost', { skip: backend.name === 'pglite' && 'one session: claims do not overlap' }, async () => {
      // Claims run at once, but their results are handed back in the order the test picks.
      const held: Array<{ rows: number; release: () => void }> = [];
      const db: Database = Object.create(t.db);
      db.query = async (text: string, values?: unknown[]) => {
        const result = await t.db.query(text, values);
        if (text.includes('claim_ai_jobs')) await new Promise<void>((release) => held.push({ rows: result.rows.length, release }));
        return result as never;
      };
      let finishFirst!: () => void;
      const firstMayFinish = new Promise<void>((resolve) => (finishFirst = resolve));
      const worker = new Worker({
        db, logger, concurrency: 2, prefetch: 0, maxClaimBatch: 1, pollIntervalMs: 60_000,
        handlers: [handler('announced', async ({ payload }) => { if (payload.n === 1) await firstMayFinish; })],
      });
      workers.push(worker);
      try {
        // A claim takes any type: a job an earlier test left to retry later must not be due
        // in the middle of this one (on a loaded machine claim B found such a job).
        await t.db.query(`delete from ai_jobs where status = 'pending'`);
        await jobEnqueue(t.db, { type: 'announced', payload: { n: 1 } });
        await worker.start(); // claim A takes job 1
        await waitFor(() => held.length === 1, 'claim A');
        worker.wake(); // claim B finds nothing
        await waitFor(() => held.length === 2, 'claim B');
        assert.deepEqual(held.map((h) => h.rows), [1, 0]);
        const second = await jobEnqueue(t.db, { type: 'announced', payload: { n: 2 } }); // its NOTIFY arrives now
        await new Promise((resolve) => setTimeout(resolve, 100));
        held[0]!.release(); // A: job 1 starts; no room left for another claim
        await new Promise((resolve) => setTimeout(resolve, 50));
        held[1]!.release(); // B: short, but job 2 was announced after it was sent
        finishFirst();
        // The poll is a minute away: only the announcement can get job 2 claimed.
        const deadline = Date.now() + 5000;
        while ((await jobGet(t.db, second))!.status !== 'done' && Date.now() < deadline) {
          for (const h of held.splice(0)) h.release();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.equal((await jobGet(t.db, second))!.status, 'done');
      } finally {
        for (const h of held.splice(0)) h.release();
        await worker.stop();
        await t.db.query(`delete from ai_jobs where type = 'announced'`);
      }
    });

    test('jobs of one ordering key never overlap and run in insertion order; other keys run alongside', async () => {
      const log: Array<{ key: string; n: number; start: number; end: number }> = [];
      let running = 0;
      let maxParallel = 0;
      const worker = await startWorker({
        concurrency: 8,
        handlers: [handler('ordered', async ({ payload }) => {
          running++;
          maxParallel = Math.max(maxParallel, running);
          const start = performance.now();
          await new Promise((r) => setTimeout(r, 10));
          log.push({ key: payload.key, n: payload.n, start, end: performance.now() });
          running--;
        })],
      });
      const keys = ['a', 'b', 'c', 'd'];
      await jobEnqueueMany(t.db, Array.from({ length: 40 }, (_, i) => ({ type: 'ordered', payload: { key: keys[i % 4], n: i }, orderingKey: keys[i % 4] })));
      await waitFor(() => log.length === 40, 'all ordered jobs ran', 30_000);
      for (const key of keys) {
        const runs = log.filter((r) => r.key === key);
        assert.deepEqual(runs.map((r) => r.n), [...runs.map((r) => r.n)].sort((a, b) => a - b), `key ${key} in order`);
        for (let i = 1; i < runs.length; i++) assert.ok(runs[i]!.start >= runs[i - 1]!.end, `key ${key} never overlaps`);
      }
      if (backend.name === 'postgres') assert.ok(maxParallel > 1, 'different keys ran in parallel');
      await worker.stop();
    });
  });
}

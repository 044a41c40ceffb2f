// The claim statement against real databases: exactly-once claiming under concurrency,
// ordering keys, priorities, due times, and the fenced completion/failure statements.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openPostgres } from '../src/db/postgres.ts';
import { jobClaim, jobCompleteMany, jobEnqueue, jobEnqueueMany, jobFail, jobGet, jobHeartbeat, jobReclaimExpired } from '../src/queue/index.ts';
import { jobNextDueInMs } from '../src/queue/store.ts';
import type { Queryable } from '../src/db/types.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';

for (const backend of BACKENDS) {
  describe(`claim on ${backend.name}`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await backend.fresh();
    });
    after(() => t.close());

    test('a plain SQL insert enqueues a job and claim_ai_jobs(n) takes it as in the seed', async () => {
      await t.db.query(`insert into ai_jobs (type, payload) values ('plain', '{"x":1}')`);
      const { rows } = await t.db.query<{ type: string; status: string; attempts: number; locked_until: Date }>('select * from claim_ai_jobs(10)');
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.status, 'processing');
      assert.equal(rows[0]!.attempts, 1);
      assert.ok(rows[0]!.locked_until > new Date());
      await t.db.query(`delete from ai_jobs`);
    });

    /** Rows of `ai_jobs` read so far, by index or by scan, once `db`'s pending counts are written. */
    const rowsRead = async (db: Queryable) => {
      await db.query('select pg_stat_force_next_flush()');
      const { rows } = await t.db.query<{ n: string }>(`select coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0) as n from pg_stat_user_tables where relname = 'ai_jobs'`);
      return Number(rows[0]!.n);
    };

    test('a claim reads the jobs it takes, not every due job, also before the table has statistics', async () => {
      // Without statistics (a table just filled, autovacuum off) the planner read every due
      // job and sorted them at every claim: 20,000 rows for 10 (migration 0027).
      await t.db.query(`insert into ai_jobs (type, payload) select 'many', '{}' from generate_series(1, 20000)`);
      const before = await rowsRead(t.db);
      assert.equal((await jobClaim(t.db, 10, 'w1', 30, ['many'])).length, 10);
      const read = (await rowsRead(t.db)) - before;
      assert.ok(read < 1000, `rows read for a claim of 10 out of 20,000 due: ${read}`);
      await t.db.query(`delete from ai_jobs`);
    });

    test("a completion reads the jobs it completes, not the table, also in a connection's first runs before the table has statistics", async () => {
      // Planned for its given ids, as a prepared statement's first five runs on each
      // connection are (and every run where statements are not prepared), 500 completions
      // out of 20,000 jobs read the whole table (migration 0028).
      await t.db.query(`insert into ai_jobs (type, payload) select 'many', '{}' from generate_series(1, 20000)`);
      const running = await jobClaim(t.db, 500, 'w1', 60, ['many']);
      assert.equal(running.length, 500);
      const completer = t.url ? openPostgres({ connectionString: t.url, poolSize: 1 }) : t.db;
      try {
        const before = await rowsRead(completer);
        const completed = await jobCompleteMany(completer, 'w1', running.map((j) => ({ id: j.id, attempt: j.attempts })));
        const read = (await rowsRead(completer)) - before;
        assert.equal(completed.length, 500);
        assert.ok(read < 2000, `rows read for 500 completions out of 20,000 jobs: ${read}`);
      } finally {
        if (completer !== t.db) await completer.close();
        await t.db.query(`delete from ai_jobs`);
      }
    });

    test('claims due jobs only, by priority then next_run_at', async () => {
      await jobEnqueue(t.db, { type: 'a', payload: { n: 'late' }, runAt: new Date(Date.now() - 1000) });
      await jobEnqueue(t.db, { type: 'a', payload: { n: 'early' }, runAt: new Date(Date.now() - 5000) });
      await jobEnqueue(t.db, { type: 'a', payload: { n: 'urgent' }, priority: -1 });
      await jobEnqueue(t.db, { type: 'a', payload: { n: 'future' }, runAt: new Date(Date.now() + 60_000) });
      const first = await jobClaim(t.db, 1, 'w1', 30);
      const rest = await jobClaim(t.db, 10, 'w1', 30);
      assert.deepEqual([...first, ...rest].map((j) => (j.payload as { n: string }).n), ['urgent', 'early', 'late']);
      await t.db.query(`delete from ai_jobs`);
    });

    test('the wait for the next due job is measured by the database, in milliseconds', async () => {
      assert.equal(await jobNextDueInMs(t.db), null, 'nothing scheduled');
      await t.db.query(`insert into ai_jobs (type, payload, next_run_at) values ('later', '{}', now() + interval '90 seconds'), ('due', '{}', now() - interval '1 second')`);
      // Counted from the database's now(), whatever the clock of the process that asks.
      const delayMs = await jobNextDueInMs(t.db);
      assert.equal(typeof delayMs, 'number');
      assert.ok(delayMs! > 80_000 && delayMs! <= 90_000, `${delayMs} ms`);
      await t.db.query(`delete from ai_jobs`);
    });

    test('an ordering key runs one job at a time, in insertion order, even across a backoff', async () => {
      await jobEnqueueMany(t.db, [
        { type: 'k', payload: { n: 1 }, orderingKey: 'conv-1' },
        { type: 'k', payload: { n: 2 }, orderingKey: 'conv-1' },
        { type: 'k', payload: { n: 3 }, orderingKey: 'conv-2' },
      ]);
      const first = await jobClaim(t.db, 10, 'w1', 30);
      assert.deepEqual(first.map((j) => (j.payload as { n: number }).n).sort(), [1, 3]);
      const one = first.find((j) => (j.payload as { n: number }).n === 1)!;
      assert.equal((await jobClaim(t.db, 10, 'w1', 30)).length, 0, 'job 2 waits while job 1 runs');
      // Job 1 fails and waits out a backoff: job 2 must still wait, or order would break.
      await jobFail(t.db, { id: one.id, attempt: 1, workerId: 'w1', error: 'boom', durationMs: 5, permanent: false, delaySeconds: 0.5, refund: false });
      assert.equal((await jobClaim(t.db, 10, 'w1', 30)).length, 0, 'job 2 waits for job 1 to be retried');
      await t.db.query(`update ai_jobs set next_run_at = now() where id = $1`, [one.id]);
      const retried = await jobClaim(t.db, 10, 'w1', 30);
      assert.deepEqual(retried.map((j) => j.id), [one.id]);
      await jobCompleteMany(t.db, 'w1', [{ id: one.id, attempt: 2 }]);
      const second = await jobClaim(t.db, 10, 'w1', 30);
      assert.deepEqual(second.map((j) => (j.payload as { n: number }).n), [2]);
      await t.db.query(`delete from ai_jobs`);
    });

    test('completion and failure are fenced on the lease owner and attempt', async () => {
      const id = await jobEnqueue(t.db, { type: 'f', payload: {} });
      const [job] = await jobClaim(t.db, 1, 'w-old', 30);
      assert.equal(job!.id, id);
      // The lease runs out (the worker stalled) and another worker takes the job.
      await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [id]);
      const reclaimed = await jobReclaimExpired(t.db);
      assert.deepEqual(reclaimed.map((r) => r.status), ['pending']);
      const [again] = await jobClaim(t.db, 1, 'w-new', 30);
      assert.equal(again!.attempts, 2);
      // The stalled worker wakes up and tries to finish its attempt: refused.
      assert.deepEqual(await jobCompleteMany(t.db, 'w-old', [{ id, attempt: 1 }]), []);
      assert.equal(await jobFail(t.db, { id, attempt: 1, workerId: 'w-old', error: 'late', durationMs: 1, permanent: true, delaySeconds: 0, refund: false }), null);
      assert.equal((await jobGet(t.db, id))!.status, 'processing');
      assert.equal((await jobCompleteMany(t.db, 'w-new', [{ id, attempt: 2, result: { ok: true } }])).length, 1);
      const done = (await jobGet(t.db, id))!;
      assert.equal(done.status, 'done');
      assert.deepEqual(done.result, { ok: true });
      assert.match(done.errors[0]!.error, /lease expired: worker w-old/);
      await t.db.query(`delete from ai_jobs`);
    });

    test('a batched completion pairs every job with its own attempt and result', async () => {
      const [a, b, c] = await jobEnqueueMany(t.db, ['a', 'b', 'c'].map((name) => ({ type: 'f', payload: { name } })));
      assert.equal((await jobClaim(t.db, 3, 'w', 30)).length, 3);
      // The same worker loses the leases of a and b and claims them again: it now holds
      // their attempt 2 while their attempt 1 may still be reported.
      await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = any($1::uuid[])`, [[a, b]]);
      await jobReclaimExpired(t.db);
      assert.deepEqual((await jobClaim(t.db, 3, 'w', 30)).map((j) => j.attempts), [2, 2]);

      // One batch: a's stale attempt 1, b's current attempt 2 and its stale attempt 1 (last,
      // so a result map keyed by id alone would keep the stale result), c's attempt 1.
      const completed = await jobCompleteMany(t.db, 'w', [
        { id: a!, attempt: 1, result: { from: 'attempt 1' } },
        { id: b!, attempt: 2, result: { tokens: 12 } },
        { id: b!, attempt: 1, result: { from: 'stale attempt 1' } },
        { id: c!, attempt: 1 },
      ]);
      assert.deepEqual(completed.map((d) => d.id).sort(), [b, c].sort(), 'the stale attempt 1 of a must not complete its attempt 2');
      assert.equal((await jobGet(t.db, a!))!.status, 'processing');
      assert.deepEqual((await jobGet(t.db, b!))!.result, { tokens: 12 }, 'the result of the attempt that completed');
      assert.equal((await jobGet(t.db, c!))!.result, null);

      assert.equal((await jobCompleteMany(t.db, 'w', [{ id: a!, attempt: 2, result: { from: 'attempt 2' } }])).length, 1);
      assert.deepEqual((await jobGet(t.db, a!))!.result, { from: 'attempt 2' });
      await t.db.query(`delete from ai_jobs`);
    });

    test('a result or error with text Postgres cannot store does not hold up the batch', async () => {
      const [poisoned, plain, failing] = await jobEnqueueMany(t.db, ['p', 'q', 'r'].map((name) => ({ type: 'f', payload: { name } })));
      assert.equal((await jobClaim(t.db, 3, 'w', 30)).length, 3);
      const completed = await jobCompleteMany(t.db, 'w', [
        { id: poisoned!, attempt: 1, result: { text: 'nul \u0000 and a lone \ud800 surrogate' } },
        { id: plain!, attempt: 1, result: { ok: true } },
      ]);
      assert.equal(completed.length, 2);
      assert.deepEqual((await jobGet(t.db, poisoned!))!.result, { text: 'nul \ufffd and a lone \ufffd surrogate' });
      assert.deepEqual((await jobGet(t.db, plain!))!.result, { ok: true });
      const failed = await jobFail(t.db, { id: failing!, attempt: 1, workerId: 'w', error: 'bad \u0000 byte', durationMs: 1, permanent: true, delaySeconds: 0, refund: false });
      assert.equal(failed?.status, 'failed');
      assert.equal((await jobGet(t.db, failing!))!.lastError, 'bad \ufffd byte');
      await t.db.query(`delete from ai_jobs`);
    });

    test('a heartbeat extends only its own leases, and skips a row another statement holds', async () => {
      const [a, b] = await jobEnqueueMany(t.db, ['a', 'b'].map((name) => ({ type: 'f', payload: { name } })));
      assert.equal((await jobClaim(t.db, 2, 'w', 5)).length, 2);
      const leaseOf = async (id: string) => (await jobGet(t.db, id))!.lockedUntil!.getTime();
      const before = await leaseOf(a!);
      assert.deepEqual([...(await jobHeartbeat(t.db, 'w', [a!, b!], 600))].sort(), [a, b].sort());
      assert.ok((await leaseOf(a!)) - before > 500_000, 'extended to ten minutes');
      assert.equal((await jobHeartbeat(t.db, 'someone-else', [a!], 600)).size, 0);
      if (backend.name !== 'pglite') {
        // A completion of this worker is writing row b: the heartbeat neither waits for it
        // (that wait deadlocked against completions) nor reports b as lost.
        const other = await t.db.transaction(async (tx) => {
          await tx.query(`select 1 from ai_jobs where id = $1 for update`, [b]);
          return jobHeartbeat(t.db, 'w', [a!, b!], 900);
        });
        assert.deepEqual([...other].sort(), [a, b].sort());
      }
      await t.db.query(`delete from ai_jobs`);
    });

    test('an expired lease on the last attempt fails the job with the reason', async () => {
      const id = await jobEnqueue(t.db, { type: 'f', payload: {}, maxAttempts: 1 });
      await jobClaim(t.db, 1, 'w-dead', 30);
      await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [id]);
      await jobReclaimExpired(t.db);
      const job = (await jobGet(t.db, id))!;
      assert.equal(job.status, 'failed');
      assert.match(job.lastError!, /lease expired/);
      assert.ok(job.finishedAt);
    });

    test('the schema refuses illegal states', async () => {
      await assert.rejects(t.db.query(`insert into ai_jobs (type, payload, status) values ('x', '{}', 'running')`));
      await assert.rejects(t.db.query(`insert into ai_jobs (type, payload, status) values ('x', '{}', 'processing')`), /lease_only_while_processing/);
      await assert.rejects(t.db.query(`insert into ai_jobs (type, payload, max_attempts) values ('x', '{}', 0)`));
    });
  });
}

describe('concurrent claimers on the PostgreSQL server', () => {
  let t: TestDatabase;
  before(async () => {
    t = await freshServerDatabase();
  });
  after(() => t.close());

  test('eight connections claiming 3,000 jobs at once take every job exactly once', async () => {
    const total = 3000;
    await jobEnqueueMany(t.db, Array.from({ length: total }, (_, n) => ({ type: 'c', payload: { n } })));
    const claimers = Array.from({ length: 8 }, () => openPostgres({ connectionString: t.url!, poolSize: 1 }));
    try {
      const claimed = await Promise.all(
        claimers.map(async (db, index) => {
          const ids: string[] = [];
          for (;;) {
            const jobs = await jobClaim(db, 7, `claimer-${index}`, 30);
            if (jobs.length === 0) return ids;
            ids.push(...jobs.map((j) => j.id));
          }
        }),
      );
      const all = claimed.flat();
      assert.equal(all.length, total);
      assert.equal(new Set(all).size, total, 'no job was claimed twice');
      assert.ok(claimed.filter((ids) => ids.length > 0).length > 1, 'the work was shared');
    } finally {
      await Promise.all(claimers.map((db) => db.close()));
    }
  });

  test('heartbeats while the same jobs complete: no heartbeat fails, no finished job gets a lease', async () => {
    // A completion that commits after a heartbeat's snapshot but before it locks the row
    // leaves the heartbeat looking at a done row: extending that lease broke the "lease only
    // while processing" constraint and failed the whole heartbeat, so none of the worker's
    // leases were extended that round.
    const [completer, beater] = [1, 2].map(() => openPostgres({ connectionString: t.url!, poolSize: 1 }));
    try {
      const failures: string[] = [];
      let heartbeats = 0;
      for (let round = 0; round < 3; round++) {
        await jobEnqueueMany(t.db, Array.from({ length: 1000 }, (_, n) => ({ type: 'hb', payload: { n } })));
        const running = await jobClaim(t.db, 1000, 'w', 60);
        assert.equal(running.length, 1000);
        await Promise.all([
          (async () => {
            while (running.length > 0) await jobCompleteMany(completer, 'w', running.splice(0, 20).map((j) => ({ id: j.id, attempt: j.attempts })));
          })(),
          (async () => {
            while (running.length > 0) {
              heartbeats += 1;
              await jobHeartbeat(beater, 'w', running.map((j) => j.id), 60).catch((err: Error) => failures.push(err.message));
            }
          })(),
        ]);
      }
      assert.ok(heartbeats > 20, `heartbeats ran alongside the completions (${heartbeats})`);
      assert.deepEqual(failures, []);
      const { rows } = await t.db.query<{ count: number }>(`select count(*)::int as count from ai_jobs where type = 'hb' and status <> 'done'`);
      assert.equal(rows[0]!.count, 0);
    } finally {
      await Promise.all([completer!.close(), beater!.close()]);
      await t.db.query(`delete from ai_jobs where type = 'hb'`);
    }
  });
});

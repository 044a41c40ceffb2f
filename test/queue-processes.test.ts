// Real worker processes against the PostgreSQL server: three of them share a queue, and
// one is killed with SIGKILL in the middle of a job.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { jobClaim, jobCompleteMany, jobEnqueue, jobEnqueueMany, jobGet } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { ROOT, startTsProcess, waitFor, type Child } from './helpers/processes.ts';

const WORKER = 'test/helpers/worker-process.ts';

describe('worker processes', () => {
  let t: TestDatabase;
  const children: Child[] = [];
  before(async () => {
    t = await freshServerDatabase();
    await t.db.query(`create table if not exists test_runs (job_id uuid not null, worker text not null, at timestamptz not null default now())`);
  });
  after(async () => {
    for (const child of children) child.process.kill('SIGKILL');
    await t.close();
  });

  test('three worker processes drain 2,000 jobs, each run exactly once', async () => {
    const started = await Promise.all([1, 2, 3].map(() => startTsProcess(WORKER, { DATABASE_URL: t.url })));
    children.push(...started);
    const total = 2000;
    await jobEnqueueMany(t.db, Array.from({ length: total }, (_, n) => ({ type: 'count', payload: { n } })));
    await waitFor(async () => (await t.db.query<{ n: number }>(`select count(*)::int as n from ai_jobs where status = 'done'`)).rows[0]!.n === total, 'all jobs done', 60_000, 100);
    const runs = await t.db.query<{ runs: number; jobs: number; workers: number }>(
      `select count(*)::int as runs, count(distinct job_id)::int as jobs, count(distinct worker)::int as workers from test_runs`,
    );
    assert.equal(runs.rows[0]!.jobs, total);
    assert.equal(runs.rows[0]!.runs, total, 'no job ran twice');
    assert.equal(runs.rows[0]!.workers, 3, 'all three processes took part');
    for (const child of started) child.process.kill('SIGTERM');
    assert.deepEqual(await Promise.all(started.map((c) => c.exited)), [0, 0, 0], 'graceful exit');
    await t.db.query('delete from test_runs; delete from ai_jobs');
  });

  test('a worker whose clock runs 30 s ahead waits for a job due in 5 s as quietly as one whose clock is right', async () => {
    // The next-due timer compared next_run_at with the process clock: 30 s ahead, it fired at
    // once, claimed nothing and looked again, every 100 ms until the job was due.
    const right = await startTsProcess(WORKER, { DATABASE_URL: t.url });
    const ahead = await startTsProcess(WORKER, { DATABASE_URL: t.url, CLOCK_SKEW_MS: '30000', NODE_OPTIONS: `--import=${join(ROOT, 'test/helpers/clock-skew.mjs')}` });
    children.push(right, ahead);
    const id = await jobEnqueue(t.db, { type: 'count', payload: {}, runAt: new Date(Date.now() + 5000) });
    await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'the job done when due', 30_000, 100);
    for (const child of [right, ahead]) child.process.kill('SIGTERM');
    assert.deepEqual(await Promise.all([right.exited, ahead.exited]), [0, 0]);
    const [byRight, byAhead] = [right, ahead].map((c) => Number(/statements (\d+)/.exec(c.output())![1]));
    assert.ok(byAhead! <= 1.5 * byRight! + 5, `${byAhead} statements from the worker ahead, ${byRight} from the one on time`);
    await t.db.query('delete from test_runs; delete from ai_jobs');
  });

  test('kill -9 mid-job: the job is reclaimed after its lease and completes once; the dead worker cannot complete it', async () => {
    const victim = await startTsProcess(WORKER, { DATABASE_URL: t.url, JOB_LEASE_SECONDS: '30' });
    children.push(victim);
    const id = await jobEnqueue(t.db, { type: 'count', payload: { sleepMs: 120_000 } });
    await waitFor(async () => (await t.db.query('select 1 from test_runs where job_id = $1', [id])).rowCount === 1, 'job started in the victim');
    const held = (await jobGet(t.db, id))!;
    assert.equal(held.status, 'processing');
    victim.process.kill('SIGKILL');
    assert.equal(await victim.exited, 'SIGKILL');

    // Instead of waiting 30 s, let the lease run out now; a live worker reclaims and reruns it.
    await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [id]);
    await t.db.query(`update ai_jobs set payload = '{}' where id = $1`, [id]);
    const rescuer = await startTsProcess(WORKER, { DATABASE_URL: t.url });
    children.push(rescuer);
    await waitFor(async () => (await jobGet(t.db, id))!.status === 'done', 'job done by the rescuer', 30_000);
    const job = (await jobGet(t.db, id))!;
    assert.equal(job.attempts, 2);
    assert.notEqual(job.lockedBy, held.lockedBy);
    assert.match(job.errors[0]!.error, /lease expired/);
    const runs = await t.db.query<{ worker: string }>('select worker from test_runs where job_id = $1 order by at', [id]);
    assert.deepEqual(runs.rows.map((r) => r.worker), [held.lockedBy, job.lockedBy], 'one interrupted run, one complete run');

    // The killed worker's completion arriving late (a stalled process) is refused.
    assert.deepEqual(await jobCompleteMany(t.db, held.lockedBy!, [{ id, attempt: held.attempts }]), []);
    assert.equal((await jobGet(t.db, id))!.finishedAt!.getTime(), job.finishedAt!.getTime());
    rescuer.process.kill('SIGTERM');
    assert.equal(await rescuer.exited, 0);
  });

  test('SIGTERM with a job in flight releases it: nothing is left processing', async () => {
    const worker = await startTsProcess(WORKER, { DATABASE_URL: t.url, SHUTDOWN_GRACE_MS: '200' });
    children.push(worker);
    const id = await jobEnqueue(t.db, { type: 'count', payload: { sleepMs: 60_000 } });
    await waitFor(async () => (await t.db.query('select 1 from test_runs where job_id = $1', [id])).rowCount === 1, 'job started');
    worker.process.kill('SIGTERM');
    assert.equal(await worker.exited, 0);
    const job = (await jobGet(t.db, id))!;
    assert.equal(job.status, 'pending');
    assert.equal(job.lockedUntil, null);
    assert.equal((await jobClaim(t.db, 1, 'next', 30))[0]?.id, id, 'another worker can take it at once');
  });
});

// Recurring jobs and the retention purge they run: exactly one job per slot with three
// `aiq worker` processes racing, the backfill policies for missed slots, bad expressions
// refused with the reason, and retention that removes exactly what is older than the
// policy, in batches, while webhooks keep being acknowledged.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { retentionPurge } from '../src/jobs/retention.ts';
import { createLogger } from '../src/logger.ts';
import pg from 'pg';
import { jobCleanup, jobEnqueue, jobRetry, Scheduler, ScheduleInputError, scheduleEnable, scheduleList, scheduleSet, slotsDue } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp } from './helpers/messaging.ts';
import { ROOT, runAiq, waitFor } from './helpers/processes.ts';

let t: TestDatabase;
before(async () => {
  t = await freshServerDatabase();
});
after(async () => {
  await t.close();
});

test('three worker processes, one schedule: exactly one job per slot, no slot skipped', async () => {
  await scheduleSet(t.db, { name: 'tick', cron: '* * * * * *', type: 'tick_noop', backfill: 'none' });
  const env = { PATH: process.env.PATH!, DATABASE_URL: t.url!, AI_PROVIDER: 'local', LOG_LEVEL: 'error', WORKER_POLL_INTERVAL_MS: '200' };
  const workers: ChildProcess[] = Array.from({ length: 3 }, () => spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env, stdio: 'ignore' }));
  try {
    await waitFor(async () => (await t.db.query(`select 1 from ai_jobs where job_key like 'schedule:tick:%'`)).rowCount >= 5, 'five slots enqueued', 30_000, 100);
  } finally {
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map((w) => new Promise((resolve) => (w.exitCode !== null ? resolve(null) : w.once('exit', resolve)))));
  }
  const slots = (await t.db.query<{ key: string; n: number }>(`select job_key as key, count(*)::int as n from ai_jobs where job_key like 'schedule:tick:%' group by job_key order by job_key`)).rows;
  assert.ok(slots.every((s) => s.n === 1), 'one job per slot');
  const times = slots.map((s) => Date.parse(s.key.slice('schedule:tick:'.length)));
  for (let i = 1; i < times.length; i++) assert.equal(times[i]! - times[i - 1]!, 1000, `slot ${i} follows the one before by one second`);
  const [tick] = (await scheduleList(t.db)).filter((s) => s.name === 'tick');
  assert.equal(tick!.lastSlotAt?.getTime(), times.at(-1));
  assert.ok(tick!.lastJobId);
  await scheduleEnable(t.db, 'tick', false);
  // The workers declared the app's own schedule too.
  assert.ok((await scheduleList(t.db)).some((s) => s.name === 'retention' && s.type === 'retention_purge' && s.cron === '30 3 * * *'));
  // Without Twilio nothing has a delivery status to ask about (test/delivery-check.test.ts).
  assert.ok(!(await scheduleList(t.db)).some((s) => s.name === 'delivery-check'));
});

/** An `aiq worker` process whose clock is `skewMs` off the database's (test/helpers/clock-skew.mjs). */
function startSkewedWorker(skewMs: number): ChildProcess {
  const env = {
    PATH: process.env.PATH!,
    DATABASE_URL: t.url!,
    AI_PROVIDER: 'local',
    LOG_LEVEL: 'error',
    CLOCK_SKEW_MS: String(skewMs),
    NODE_OPTIONS: `--import=${join(ROOT, 'test/helpers/clock-skew.mjs')}`,
  };
  return spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env, stdio: 'ignore' });
}

/** SIGTERM; a worker still running 20 s later (a scheduler that never ends its tick) fails the test. */
async function stopWorker(worker: ChildProcess): Promise<void> {
  worker.kill('SIGTERM');
  try {
    await waitFor(() => worker.exitCode !== null || worker.signalCode !== null, 'the worker to stop on SIGTERM', 20_000, 50);
  } finally {
    worker.kill('SIGKILL');
  }
}

test('a worker whose clock is off by seconds enqueues every slot, at its time, without spinning', async () => {
  // Ahead by 6 s: judged by the process clock, the slot 6 s in the database's future was
  // enqueued early and the next one set 7 s on, so six slots in seven were never made (and
  // with a period above the 5 s grace, every slot looked missed).
  await scheduleSet(t.db, { name: 'ahead', cron: '* * * * * *', type: 'ahead_noop', backfill: 'none' });
  const ahead = startSkewedWorker(6000);
  try {
    await waitFor(async () => (await t.db.query(`select 1 from ai_jobs where job_key like 'schedule:ahead:%'`)).rowCount >= 4, 'four slots enqueued by a worker 6 s ahead', 40_000, 100);
  } finally {
    await stopWorker(ahead);
  }
  await scheduleEnable(t.db, 'ahead', false);
  const jobs = (await t.db.query<{ key: string; created_at: Date }>(`select job_key as key, created_at from ai_jobs where job_key like 'schedule:ahead:%' order by job_key`)).rows;
  const slots = jobs.map((j) => Date.parse(j.key.slice('schedule:ahead:'.length)));
  // One slot a second. A tick that a loaded machine delays past the next slot enqueues only
  // the latest (backfill 'none' skips a missed slot by design), so a gap of two or three
  // seconds can happen; the bug left six slots in seven out, gaps of seven seconds.
  const gaps = slots.slice(1).map((slot, i) => slot - slots[i]!);
  for (const [i, gap] of gaps.entries()) assert.ok([1000, 2000, 3000].includes(gap), `slot ${i + 1} follows the one before by ${gap} ms`);
  assert.equal([...gaps].sort((a, b) => a - b)[Math.floor(gaps.length / 2)], 1000, `most slots follow the one before by one second: ${gaps.join(', ')} ms`);
  for (const [i, job] of jobs.entries()) assert.ok(job.created_at.getTime() >= slots[i]!, `${job.key} enqueued at ${job.created_at.toISOString()}, not before its slot`);

  // Behind by 6 s: the row, due by the database's clock, was taken again at once, showed no
  // slot yet by the process clock and went back due, thousands of times a second, and the
  // worker's SIGTERM waited for that tick to end. Each take is an update of the row, counted
  // here: one per slot (its job and the next slot) when the database's clock decides.
  await t.db.exec(`
    create table behind_updates (at timestamptz not null default clock_timestamp());
    create function behind_updated() returns trigger language plpgsql as $$ begin insert into behind_updates default values; return null; end $$;
    create trigger behind_updated after update on ai_schedules for each row when (new.name = 'behind') execute function behind_updated();`);
  await scheduleSet(t.db, { name: 'behind', cron: '* * * * * *', type: 'behind_noop', backfill: 'none' });
  const behind = startSkewedWorker(-6000);
  try {
    await waitFor(async () => (await t.db.query(`select 1 from ai_jobs where job_key like 'schedule:behind:%'`)).rowCount >= 3, 'three slots enqueued by a worker 6 s behind', 40_000, 100);
  } finally {
    await stopWorker(behind);
    await t.db.exec(`drop trigger behind_updated on ai_schedules`);
  }
  await scheduleEnable(t.db, 'behind', false);
  const made = (await t.db.query(`select 1 from ai_jobs where job_key like 'schedule:behind:%'`)).rowCount;
  const takes = (await t.db.query(`select 1 from behind_updates`)).rowCount;
  assert.ok(takes <= 2 * made, `${takes} takes of the schedule for ${made} slots`);
});

test('missed slots follow the backfill policy: none, the last one, or all in the window', async () => {
  const now = new Date('2026-12-04T10:00:30Z');
  const base = { cron: '* * * * *', timeZone: 'UTC', backfillWindowSeconds: 3600, nextSlotAt: new Date('2026-12-04T09:50:00Z') };
  assert.deepEqual(slotsDue({ ...base, backfill: 'none' }, now, 5000).slots, []);
  assert.deepEqual(slotsDue({ ...base, backfill: 'last' }, now, 5000).slots, [new Date('2026-12-04T10:00:00Z')]);
  assert.equal(slotsDue({ ...base, backfill: 'all' }, now, 5000).slots.length, 11);
  assert.equal(slotsDue({ ...base, backfill: 'all', backfillWindowSeconds: 180 }, now, 5000).slots.length, 3, 'the window bounds a backfill');
  assert.deepEqual(slotsDue({ ...base, backfill: 'none' }, new Date('2026-12-04T10:00:02Z'), 5000).slots, [new Date('2026-12-04T10:00:00Z')], 'a slot due just now is not missed');
  assert.deepEqual(slotsDue({ ...base, backfill: 'all' }, now, 5000).next, new Date('2026-12-04T10:01:00Z'));
  // A window of 0 backfills nothing, but the slot due now still runs (found by a queue
  // probe: such a schedule never fired).
  const due = new Date('2026-12-04T10:00:00.300Z');
  for (const backfill of ['last', 'all'] as const) {
    assert.deepEqual(slotsDue({ ...base, backfill, backfillWindowSeconds: 0, nextSlotAt: new Date('2026-12-04T10:00:00Z') }, due, 5000).slots, [new Date('2026-12-04T10:00:00Z')], backfill);
  }
  // An every-second schedule after 26 hours down, with a day's window: more slots than one
  // backfill takes. The last is the latest, `all` the newest 10,000, oldest first.
  const busy = { cron: '* * * * * *', timeZone: 'UTC', backfillWindowSeconds: 86_400, nextSlotAt: new Date('2026-12-03T08:00:00Z') };
  assert.deepEqual(slotsDue({ ...busy, backfill: 'last' }, now, 5000).slots, [new Date('2026-12-04T10:00:30Z')]);
  const all = slotsDue({ ...busy, backfill: 'all' }, now, 5000).slots;
  assert.equal(all.length, 10_000);
  assert.deepEqual([all[0], all.at(-1)], [new Date(now.getTime() - 9_999_000), now]);

  // In the database: all missed slots once, and a second tick adds none. Not in the last
  // seconds of a minute: a new minute before the first tick would be a seventh slot due.
  await waitFor(() => new Date().getUTCSeconds() < 50, 'a minute with time left', 15_000);
  await scheduleSet(t.db, { name: 'missed', cron: '* * * * *', type: 'missed_noop', backfill: 'all', backfillWindowSeconds: 600 });
  await t.db.query(`update ai_schedules set next_slot_at = date_trunc('minute', now()) - interval '5 minutes' where name = 'missed'`);
  const scheduler = new Scheduler({ db: t.db, logger: createLogger('silent') });
  assert.equal(await scheduler.tick(), 6);
  assert.equal(await scheduler.tick(), 0);
  await scheduleEnable(t.db, 'missed', false);
});

test('a bad cron expression or time zone is refused with the reason; the CLI lists, disables and enables', async () => {
  await assert.rejects(scheduleSet(t.db, { name: 'bad', cron: '61 * * * *', type: 'x' }), (err: Error) => err instanceof ScheduleInputError && /cron "61 \* \* \* \*": Invalid value for minute: 61/.test(err.message));
  await assert.rejects(scheduleSet(t.db, { name: 'bad', cron: '0 3 * * *', timeZone: 'Mars/Base', type: 'x' }), /time zone "Mars\/Base" is not an IANA zone/);
  for (const window of [-5, Number.NaN, Infinity]) {
    await assert.rejects(scheduleSet(t.db, { name: 'bad', cron: '0 3 * * *', type: 'x', backfillWindowSeconds: window }), (err: Error) => err instanceof ScheduleInputError && /backfillWindowSeconds must be 0 or more seconds/.test(err.message));
  }
  await scheduleSet(t.db, { name: 'nightly', cron: '0 3 * * *', timeZone: 'Europe/Amsterdam', type: 'nightly_noop' });
  const env = { DATABASE_URL: t.url!, AI_PROVIDER: 'local', LOG_LEVEL: 'silent' };
  const listed = await runAiq(['schedules'], env);
  assert.equal(listed.code, 0, listed.out);
  assert.match(listed.out, /nightly\s+0 3 \* \* \*\s+Europe\/Amsterdam\s+nightly_noop\s+yes\s+last/);
  assert.equal((await runAiq(['schedules', '--disable', 'nightly'], env)).code, 0);
  assert.match((await runAiq(['schedules'], env)).out, /nightly\s+.*\s+no\s+/);
  const unknown = await runAiq(['schedules', '--enable', 'nope'], env);
  assert.equal(unknown.code, 2);
  assert.match(unknown.out, /no schedule named "nope"/);
  const badConfig = await runAiq(['worker'], { ...env, RETENTION_CRON: 'every night' });
  assert.equal(badConfig.code, 1);
  assert.match(badConfig.out, /RETENTION_CRON \/ RETENTION_TIME_ZONE: cron "every night"/);
});

test('retention removes exactly what is older than the policy, in batches, while webhooks are acknowledged', async () => {
  let twilio: FakeTwilio | undefined;
  const m = await startMessagingApp(messagingEnv(t.url, (twilio = await startFakeTwilio()).url));
  try {
    // 2,500 old messages in one old conversation and a recent one: the purge needs three batches.
    await t.db.query(`insert into contacts (whatsapp_number, updated_at) values ('+31600000001', now() - interval '400 days'), ('+31600000002', now())`);
    // A contact on two business numbers: the HR desk's conversation emptied long ago, the IT
    // desk's in use. The first goes; the contact, the second and its message stay.
    await t.db.query(`insert into contacts (whatsapp_number, updated_at, opted_out_at, opted_out_by) values ('+31600000004', now() - interval '400 days', now() - interval '500 days', 'contact')`);
    await t.db.query(`insert into conversations (contact_id, business_number, last_message_at)
      select id, number, at from contacts, (values ('+3120000001', now() - interval '400 days'), ('+3120000002', now())) as desks(number, at)
      where whatsapp_number = '+31600000004'`);
    await t.db.query(`insert into messages (conversation_id, source, body, twilio_sid, status, seq)
      select c.id, 'inbound', 'IT vraag', 'SMitdesk', 'received', 1
      from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31600000004' and c.business_number = '+3120000002'`);
    await t.db.query(`insert into conversations (contact_id, last_message_at) select id, now() - interval '400 days' from contacts where whatsapp_number = '+31600000001'`);
    await t.db.query(`insert into conversations (contact_id) select id from contacts where whatsapp_number = '+31600000002'`);
    await t.db.query(`insert into messages (conversation_id, source, body, twilio_sid, status, created_at, seq)
      select c.id, 'inbound', 'old ' || i, 'SMold' || i, 'received', now() - interval '400 days', i
      from conversations c join contacts k on k.id = c.contact_id, generate_series(1, 2500) i where k.whatsapp_number = '+31600000001'`);
    await t.db.query(`insert into messages (conversation_id, source, body, twilio_sid, status, created_at, seq)
      select c.id, 'inbound', 'recent', 'SMrecent', 'received', now() - interval '364 days', 1
      from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31600000002'`);
    await t.db.query(`insert into ai_jobs (type, payload, status, finished_at, attempts) values
      ('old_done', '{}', 'done', now() - interval '15 days', 1), ('new_done', '{}', 'done', now() - interval '13 days', 1),
      ('old_failed', '{}', 'failed', now() - interval '91 days', 1), ('new_failed', '{}', 'failed', now() - interval '89 days', 1)`);
    await t.db.query(`insert into audit_log (actor, action, result, at) values ('x', 'old', 'ok', now() - interval '731 days'), ('x', 'new', 'ok', now())`);
    // Imports: one finished long ago, one its process left running as long ago, one under way.
    await t.db.query(`insert into imports (filename, content, status, created_at, finished_at) values
      ('old done', 'Name,Phone', 'done', now() - interval '100 days', now() - interval '100 days'),
      ('old abandoned', 'Name,Phone', 'running', now() - interval '100 days', null),
      ('running now', 'Name,Phone', 'running', now(), null)`);

    const policy = { RETENTION_MESSAGES_DAYS: 365, JOB_RETENTION_DAYS: 14, RETENTION_JOBS_FAILED_DAYS: 90, RETENTION_USAGE_DAYS: 730, RETENTION_IMPORTS_DAYS: 90, RETENTION_AUDIT_DAYS: 730 };
    const webhooks = (async () => {
      const codes: number[] = [];
      for (let i = 0; i < 20; i++) codes.push((await injectSigned(m.app, '/webhooks/twilio/whatsapp', inboundParams(`live ${i}`, '+31600000003'))).statusCode);
      return codes;
    })();
    const [removed, codes] = await Promise.all([retentionPurge(t.db, policy), webhooks]);
    assert.deepEqual(codes, Array(20).fill(200), 'every webhook acknowledged meanwhile');
    assert.equal(removed.messages, 2500);
    assert.equal(removed['conversations without messages'], 2);
    assert.equal(removed['contacts without conversations'], 1);
    assert.equal(removed['done jobs'], 1);
    assert.equal(removed['failed jobs'], 1);
    assert.equal(removed['audit log'], 1);
    assert.equal(removed.imports, 2);
    assert.deepEqual((await t.db.query(`select filename from imports`)).rows, [{ filename: 'running now' }]);
    const left = (await t.db.query<{ body: string }>(`select body from messages where body in ('recent') or body like 'old %'`)).rows;
    assert.deepEqual(left, [{ body: 'recent' }]);
    assert.deepEqual((await t.db.query(`select type from ai_jobs where type in ('old_done', 'new_done', 'old_failed', 'new_failed') order by type`)).rows, [{ type: 'new_done' }, { type: 'new_failed' }]);
    assert.equal((await t.db.query(`select 1 from contacts where whatsapp_number = '+31600000001'`)).rowCount, 0, 'the emptied old conversation and its contact are gone');
    const twoDesks = await t.db.query<{ business_number: string; messages: number; opted_out_by: string }>(
      `select c.business_number, (select count(*)::int from messages m where m.conversation_id = c.id) as messages, k.opted_out_by
       from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+31600000004'`,
    );
    assert.deepEqual(twoDesks.rows, [{ business_number: '+3120000002', messages: 1, opted_out_by: 'contact' }], 'the desk in use, its message and the opt-out stay');
    assert.equal((await retentionPurge(t.db, policy)).messages, 0, 'a second run finds nothing');
  } finally {
    await m.close();
    await twilio?.close();
  }
});

test('jobs an admin retries while retention or aiq cleanup runs are skipped, not deleted once the retry commits', async () => {
  await t.db.query(`insert into ai_jobs (type, payload, status, finished_at, attempts, max_attempts) values
    ('retried_failed', '{}', 'failed', now() - interval '100 days', 3, 3), ('purged_failed', '{}', 'failed', now() - interval '100 days', 3, 3),
    ('retried_cancelled', '{}', 'cancelled', now() - interval '100 days', 0, 3)`);
  const ids = Object.fromEntries((await t.db.query<{ type: string; id: string }>(`select type, id from ai_jobs where type in ('retried_failed', 'purged_failed', 'retried_cancelled')`)).rows.map((r) => [r.type, r.id]));
  // The admin's retries, in a transaction not yet committed: their rows are locked.
  const admin = new pg.Client({ connectionString: t.url });
  await admin.connect();
  try {
    await admin.query('begin');
    assert.equal(await jobRetry(admin as never, ids.retried_failed!), true);
    assert.equal(await jobRetry(admin as never, ids.retried_cancelled!), true);
    /** Runs `work` until it ends or waits for the admin's row locks, then lets the retries commit. */
    const besideRetry = async <T>(work: Promise<T>): Promise<T> => {
      let ended = false;
      void work.finally(() => (ended = true)).catch(() => {});
      await waitFor(async () => ended || (await t.db.query(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).rowCount > 0, 'the purge to end or wait');
      await admin.query('commit');
      return work;
    };
    const policy = { RETENTION_MESSAGES_DAYS: 0, JOB_RETENTION_DAYS: 14, RETENTION_JOBS_FAILED_DAYS: 90, RETENTION_USAGE_DAYS: 0, RETENTION_IMPORTS_DAYS: 0, RETENTION_AUDIT_DAYS: 0 };
    const removed = await besideRetry(retentionPurge(t.db, policy));
    assert.equal(removed['failed jobs'], 1, 'only the job nobody retried');
    // aiq cleanup: the cancelled job cancelled again long ago, a done one beside it.
    await t.db.query(`update ai_jobs set status = 'cancelled', finished_at = now() - interval '100 days' where id = $1`, [ids.retried_cancelled]);
    await t.db.query(`insert into ai_jobs (type, payload, status, finished_at, attempts) values ('cleaned_done', '{}', 'done', now() - interval '100 days', 1)`);
    await admin.query('begin');
    assert.equal(await jobRetry(admin as never, ids.retried_cancelled!), true);
    assert.equal(await besideRetry(jobCleanup(t.db, 14)), 1, 'aiq cleanup: only the done job');
    const left = await t.db.query<{ type: string; status: string }>(`select type, status from ai_jobs where id = any($1::uuid[]) order by type`, [Object.values(ids)]);
    assert.deepEqual(left.rows, [{ type: 'retried_cancelled', status: 'pending' }, { type: 'retried_failed', status: 'pending' }]);

    // JOB_RETENTION_DAYS=0 keeps finished jobs forever: aiq cleanup deletes nothing then, and
    // refuses --days below 1 rather than deleting every finished job.
    await t.db.query(`insert into ai_jobs (type, payload, status, finished_at, attempts) values ('kept_done', '{}', 'done', now() - interval '100 days', 1)`);
    const env = { DATABASE_URL: t.url!, AI_PROVIDER: 'local', LOG_LEVEL: 'silent' };
    const kept = await runAiq(['cleanup'], { ...env, JOB_RETENTION_DAYS: '0' });
    assert.equal(kept.code, 0, kept.out);
    assert.match(kept.out, /JOB_RETENTION_DAYS is 0: finished jobs are kept forever; nothing deleted/);
    for (const days of ['0', '-1']) {
      const refused = await runAiq(['cleanup', `--days=${days}`], env);
      assert.equal(refused.code, 2, refused.out);
      assert.match(refused.out, /--days must be at least 1/);
    }
    assert.equal((await t.db.query(`select 1 from ai_jobs where type = 'kept_done'`)).rowCount, 1);
    assert.match((await runAiq(['cleanup', '--days', '30'], env)).out, /deleted 1 finished job older than 30 days/);
    // Changes made from the CLI are audited as the dashboard's and the API's are.
    const failed = await jobEnqueue(t.db, { type: 'cli_audited', payload: {} });
    await t.db.query(`update ai_jobs set status = 'failed', finished_at = now() where id = $1`, [failed]);
    assert.equal((await runAiq(['retry', failed], env)).code, 0);
    assert.equal((await runAiq(['cancel', failed], env)).code, 0);
    assert.equal((await runAiq(['retry', '--failed', '--type', 'nothing_failed'], env)).code, 0);
    const audit = await t.db.query<{ actor: string; action: string; target: string | null; result: string; details: Record<string, number> }>(
      `select actor, action, target, result, details from audit_log where actor like 'cli:%' and action in ('cleanup finished jobs', 'retry job', 'cancel job', 'retry failed jobs') order by id`,
    );
    assert.deepEqual(audit.rows.map((r) => [r.action, r.target, r.result]), [
      ['cleanup finished jobs', null, 'ok'],
      ['retry job', failed, 'ok'],
      ['cancel job', failed, 'ok'],
      ['retry failed jobs', 'nothing_failed', 'ok'],
    ]);
    assert.deepEqual(audit.rows[0]!.details, { days: 30, deleted: 1 });
  } finally {
    await admin.end();
    await t.db.query(`delete from ai_jobs where type like 'retried_%'`);
  }
});

test('the admin API lists schedules and disables or enables one, and the audit log records it', async () => {
  const { startAdminApp, TEST_ADMIN_TOKEN } = await import('./helpers/admin-app.ts');
  const admin = await startAdminApp({}, t);
  try {
    const headers = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    await scheduleSet(t.db, { name: 'api-listed', cron: '0 * * * *', type: 'x_noop' });
    const listed = await admin.app.inject({ method: 'GET', url: '/api/schedules', headers });
    assert.ok(listed.json().schedules.some((s: { name: string }) => s.name === 'api-listed'));
    const off = await admin.app.inject({ method: 'POST', url: '/api/schedules/api-listed/disable', headers });
    assert.deepEqual(off.json(), { name: 'api-listed', enabled: false });
    assert.equal((await admin.app.inject({ method: 'POST', url: '/api/schedules/nope/enable', headers })).statusCode, 404);
    await waitFor(async () => (await t.db.query(`select 1 from audit_log where action = 'POST /api/schedules/:name/:change'`)).rowCount === 2, 'two audit records');
    const audit = (await t.db.query<{ target: string; result: string }>(`select target, result from audit_log where action = 'POST /api/schedules/:name/:change' order by id`)).rows;
    assert.deepEqual(audit, [{ target: 'api-listed', result: 'ok' }, { target: 'nope', result: 'not_found' }]);
  } finally {
    await admin.close();
  }
});

// The admin JSON API over real HTTP (inject) on a real PostgreSQL database: every route
// refuses without the bearer token, answers bad input with 400 and a message, and its
// effects are checked in the database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { jobEnqueue, jobGet } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';

const auth = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

async function failedJob(t: AdminApp, type = 'autoreply', error = 'LLM unreachable: connect ECONNREFUSED'): Promise<string> {
  const id = await jobEnqueue(t.runtime.db, { type, payload: { messageId: 'm1' } });
  await t.runtime.db.query(
    `update ai_jobs set status = 'failed', attempts = 3, last_error = $2, finished_at = now(),
       errors = jsonb_build_array(jsonb_build_object('attempt', 3, 'worker', 'w1', 'started_at', now(), 'duration_ms', 12, 'error', $2::text, 'at', now()))
     where id = $1`,
    [id, error],
  );
  return id;
}

describe('admin API', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp();
  });
  after(() => t.close());

  const routes: Array<[string, string]> = [
    ['GET', '/api/stats'],
    ['GET', '/api/jobs'],
    ['GET', '/api/jobs/count'],
    ['GET', '/api/jobs/00000000-0000-4000-8000-000000000000'],
    ['POST', '/api/jobs/00000000-0000-4000-8000-000000000000/retry'],
    ['POST', '/api/jobs/00000000-0000-4000-8000-000000000000/cancel'],
    ['POST', '/api/jobs/retry-failed'],
  ];

  test('every route needs the bearer token', async () => {
    for (const [method, url] of routes) {
      for (const headers of [{}, { authorization: 'Bearer wrong-token-wrong' }, { authorization: TEST_ADMIN_TOKEN }]) {
        const response = await t.app.inject({ method: method as 'GET', url, headers, payload: method === 'POST' ? {} : undefined });
        assert.equal(response.statusCode, 401, `${method} ${url} with ${JSON.stringify(headers)}`);
        assert.match(response.json().error, /Authorization: Bearer/);
      }
    }
  });

  test('GET /api/stats counts by type and status', async () => {
    await failedJob(t, 'stats_type');
    const response = await t.app.inject({ url: '/api/stats', headers: auth });
    assert.equal(response.statusCode, 200);
    const body = response.json();
    assert.equal(body.counts.stats_type.failed, 1);
    assert.equal(body.lastHour.failed.length, 60);
    assert.ok(body.lastHour.failed.at(-1) >= 1, 'the failed job shows in the current minute');
  });

  test('GET /api/jobs filters, pages with a cursor, and rejects bad filters', async () => {
    for (let i = 0; i < 5; i++) await jobEnqueue(t.runtime.db, { type: 'paging', payload: { n: i, marker: 'needle' } });
    const first = await t.app.inject({ url: '/api/jobs?type=paging&limit=3', headers: auth });
    assert.equal(first.statusCode, 200);
    assert.equal(first.json().jobs.length, 3);
    assert.ok(first.json().nextCursor);
    const second = await t.app.inject({ url: `/api/jobs?type=paging&limit=3&after=${first.json().nextCursor}`, headers: auth });
    assert.equal(second.json().jobs.length, 2);
    assert.equal(second.json().nextCursor, null);
    const seen = new Set([...first.json().jobs, ...second.json().jobs].map((j: { id: string }) => j.id));
    assert.equal(seen.size, 5);

    const search = await t.app.inject({ url: '/api/jobs?q=needle', headers: auth });
    assert.equal(search.json().jobs.length, 5);

    for (const [url, message] of [
      ['/api/jobs?status=broken', /status/],
      ['/api/jobs?limit=0', /limit/],
      ['/api/jobs?limit=9999', /limit/],
      ['/api/jobs?after=not-a-cursor', /after: invalid page cursor/],
    ] as const) {
      const response = await t.app.inject({ url, headers: auth });
      assert.equal(response.statusCode, 400, url);
      assert.match(response.json().error, message, url);
    }
  });

  test('GET /api/jobs/count', async () => {
    await failedJob(t, 'count_type');
    await failedJob(t, 'count_type');
    const response = await t.app.inject({ url: '/api/jobs/count?type=count_type&status=failed', headers: auth });
    assert.deepEqual(response.json(), { count: 2 });
    assert.equal((await t.app.inject({ url: '/api/jobs/count?status=nope', headers: auth })).statusCode, 400);
  });

  test('GET /api/jobs/:id shows payload and attempts; 400 for a bad id, 404 for an unknown one', async () => {
    const id = await failedJob(t);
    const response = await t.app.inject({ url: `/api/jobs/${id}`, headers: auth });
    assert.equal(response.statusCode, 200);
    const job = response.json();
    assert.equal(job.status, 'failed');
    assert.deepEqual(job.payload, { messageId: 'm1' });
    assert.equal(job.errors[0].worker, 'w1');
    assert.equal((await t.app.inject({ url: '/api/jobs/abc', headers: auth })).statusCode, 400);
    const missing = await t.app.inject({ url: '/api/jobs/00000000-0000-4000-8000-000000000000', headers: auth });
    assert.equal(missing.statusCode, 404);
    assert.match(missing.json().error, /no job/);
  });

  test('POST /api/jobs/:id/retry puts a failed job back to pending; 409 when it is not failed', async () => {
    const id = await failedJob(t);
    const response = await t.app.inject({ method: 'POST', url: `/api/jobs/${id}/retry`, headers: auth });
    assert.equal(response.statusCode, 200);
    const job = (await jobGet(t.runtime.db, id))!;
    assert.equal(job.status, 'pending');
    assert.equal(job.attempts, 0);
    assert.equal(job.errors.length, 1, 'history is kept');
    const again = await t.app.inject({ method: 'POST', url: `/api/jobs/${id}/retry`, headers: auth });
    assert.equal(again.statusCode, 409);
    assert.match(again.json().error, /this one is pending/);
    assert.equal((await t.app.inject({ method: 'POST', url: '/api/jobs/nope/retry', headers: auth })).statusCode, 400);
    assert.equal((await t.app.inject({ method: 'POST', url: '/api/jobs/00000000-0000-4000-8000-000000000000/retry', headers: auth })).statusCode, 404);
  });

  test('POST /api/jobs/:id/cancel cancels a pending job; 409 otherwise', async () => {
    const id = await jobEnqueue(t.runtime.db, { type: 'cancel_me', payload: {}, runAt: new Date(Date.now() + 3600_000) });
    const response = await t.app.inject({ method: 'POST', url: `/api/jobs/${id}/cancel`, headers: auth });
    assert.equal(response.statusCode, 200);
    assert.equal((await jobGet(t.runtime.db, id))!.status, 'cancelled');
    const again = await t.app.inject({ method: 'POST', url: `/api/jobs/${id}/cancel`, headers: auth });
    assert.equal(again.statusCode, 409);
    assert.equal((await t.app.inject({ method: 'POST', url: '/api/jobs/00000000-0000-4000-8000-000000000000/cancel', headers: auth })).statusCode, 404);
  });

  test('POST /api/jobs/retry-failed counts with dryRun, then retries only the matching failed jobs', async () => {
    const a = await failedJob(t, 'bulk_type', 'timeout talking to the LLM');
    const b = await failedJob(t, 'bulk_type', 'timeout talking to the LLM');
    const other = await failedJob(t, 'bulk_type', 'bad payload');
    const dry = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload: { type: 'bulk_type', q: 'timeout', dryRun: true } });
    assert.deepEqual(dry.json(), { count: 2, retried: false });
    assert.equal((await jobGet(t.runtime.db, a))!.status, 'failed', 'dry run changes nothing');
    const run = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload: { type: 'bulk_type', q: 'timeout' } });
    assert.deepEqual(run.json(), { count: 2, retried: true });
    assert.equal((await jobGet(t.runtime.db, a))!.status, 'pending');
    assert.equal((await jobGet(t.runtime.db, b))!.status, 'pending');
    assert.equal((await jobGet(t.runtime.db, other))!.status, 'failed');

    for (const payload of [{ type: 5 }, { dryRun: 'yes' }, { status: 'done' }, { q: '' }]) {
      const response = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload });
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
      assert.ok(response.json().error.length > 0);
    }
    const notJson = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: { ...auth, 'content-type': 'application/json' }, payload: '{oops' });
    assert.equal(notJson.statusCode, 400);
  });
});

describe('admin API without ADMIN_TOKEN (loopback only)', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp({ ADMIN_TOKEN: '' });
  });
  after(() => t.close());

  test('is open', async () => {
    const response = await t.app.inject({ url: '/api/stats' });
    assert.equal(response.statusCode, 200);
  });
});

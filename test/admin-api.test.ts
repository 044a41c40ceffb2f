// The admin JSON API over real HTTP (inject) on a real PostgreSQL database: every route
// refuses without the bearer token, answers bad input with 400 and a message, and its
// effects are checked in the database.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { importPeopleExecute } from '../src/jobs/import-people.ts';
import { jobEnqueue, jobGet } from '../src/queue/index.ts';
import { startAdminApp, TEST_ADMIN_TOKEN, type AdminApp } from './helpers/admin-app.ts';

const auth = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
const NIL = '00000000-0000-4000-8000-000000000000';

/** The ids a list route gives one per page (limit=1) over `pages` pages, following nextCursor. */
async function idsPageByPage(t: AdminApp, path: string, key: 'conversations' | 'documents', pages: number): Promise<string[]> {
  const seen: string[] = [];
  let after = '';
  for (let page = 0; page < pages; page++) {
    const response = await t.app.inject({ url: `${path}?limit=1${after ? `&after=${after}` : ''}`, headers: auth });
    assert.equal(response.statusCode, 200, response.body);
    seen.push(...response.json()[key].map((row: { id: string }) => row.id));
    after = response.json().nextCursor;
  }
  return seen;
}

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
    // The first test sends dozens of wrong tokens on purpose; the limit has its own test.
    t = await startAdminApp({ AUTH_FAILURE_LIMIT: '10000' });
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
    ['GET', '/api/conversations'],
    ['GET', `/api/conversations/${NIL}`],
    ['POST', `/api/conversations/${NIL}/pause`],
    ['POST', `/api/conversations/${NIL}/messages`],
    ['POST', `/api/conversations/${NIL}/suggest`],
    ['GET', `/api/suggestions/${NIL}`],
    ['POST', `/api/suggestions/${NIL}/send`],
    ['POST', `/api/suggestions/${NIL}/discard`],
    ['POST', '/api/simulate'],
    ['GET', '/api/people'],
    ['GET', `/api/people/${NIL}`],
    ['GET', '/api/documents'],
    ['POST', '/api/documents'],
    ['GET', '/api/imports'],
    ['POST', '/api/imports'],
    ['GET', `/api/imports/${NIL}`],
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
    const id = await failedJob(t, 'stats_type');
    const response = await t.app.inject({ url: '/api/stats', headers: auth });
    assert.equal(response.statusCode, 200);
    const body = response.json();
    assert.equal(body.counts.stats_type.failed, 1);
    assert.equal(body.lastHour.failed.length, 60);
    // In its own minute: the last one, unless a minute ended since the job failed.
    const { rows } = await t.runtime.db.query<{ minute: Date }>(`select date_trunc('minute', finished_at) as minute from ai_jobs where id = $1`, [id]);
    const minute = body.lastHour.minutes.indexOf(new Date(rows[0]!.minute).toISOString());
    assert.ok(minute >= 0 && body.lastHour.failed[minute] >= 1, 'the failed job shows in its minute');
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
      // Shaped right, but a day and a year PostgreSQL does not have.
      [`/api/jobs?after=${Buffer.from(`2024-02-30T00:00:00Z|${NIL}`).toString('base64url')}`, /after: invalid page cursor/],
      [`/api/jobs?after=${Buffer.from(`0000-01-01T00:00:00Z|${NIL}`).toString('base64url')}`, /after: invalid page cursor/],
      ['/api/jobs?q=%00', /NUL character/],
      ['/api/jobs/count?type=%00', /NUL character/],
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

  test('an import whose job is cancelled before it ran says so, instead of waiting for good; a retry runs it', async () => {
    // The wrong file, or a complete list (prune) that is not: stopped before the worker takes it.
    const upload = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'wrong.csv', content: 'name,phone\nAnna,+31611111111\n', prune: true } });
    assert.equal(upload.statusCode, 202, upload.body);
    const { importId, jobId } = upload.json();
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth })).statusCode, 200);
    const cancelled = (await t.app.inject({ url: `/api/imports/${importId}`, headers: auth })).json();
    assert.equal(cancelled.status, 'failed', 'not pending (the dashboard showed it about to run, refreshing every second, for good)');
    assert.match(cancelled.error, /cancelled/);
    // Retried after all, it runs as any failed import does.
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/retry`, headers: auth })).statusCode, 200);
    await importPeopleExecute(t.runtime.db, importId);
    assert.equal((await t.app.inject({ url: `/api/imports/${importId}`, headers: auth })).json().status, 'done');
  });

  test('cancelling an import\'s job and failing its import are one: if the import cannot be ended, the job is not cancelled either', async () => {
    // A process killed between the two statements left the job cancelled and its import
    // 'pending' for good. Stood in for by the database refusing the import's update.
    const upload = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'half.csv', content: 'name,phone\nBram,+31622222222\n' } });
    assert.equal(upload.statusCode, 202, upload.body);
    const { importId, jobId } = upload.json();
    await t.runtime.db.exec(`
      create function refuse_import_failed() returns trigger language plpgsql as $$
      begin raise exception 'the process died here'; end $$;
      create trigger refuse_import_failed before update on imports for each row
        when (new.status = 'failed') execute function refuse_import_failed();`);
    try {
      const cancel = await t.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth });
      assert.equal(cancel.statusCode, 500);
      const job = (await t.app.inject({ url: `/api/jobs/${jobId}`, headers: auth })).json();
      assert.equal(job.status, 'pending', 'the cancel was rolled back with the import\'s update');
      assert.equal((await t.app.inject({ url: `/api/imports/${importId}`, headers: auth })).json().status, 'pending');
    } finally {
      await t.runtime.db.exec('drop trigger refuse_import_failed on imports; drop function refuse_import_failed();');
    }
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/jobs/${jobId}/cancel`, headers: auth })).statusCode, 200);
    assert.equal((await t.app.inject({ url: `/api/imports/${importId}`, headers: auth })).json().status, 'failed');
  });

  test('POST /api/jobs/retry-failed counts with dryRun, then retries only the matching failed jobs', async () => {
    const a = await failedJob(t, 'bulk_type', 'timeout talking to the LLM');
    const b = await failedJob(t, 'bulk_type', 'timeout talking to the LLM');
    const other = await failedJob(t, 'bulk_type', 'bad payload');
    const dry = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload: { type: 'bulk_type', q: 'timeout', dryRun: true } });
    const { failedBy, ...counted } = dry.json();
    assert.deepEqual(counted, { count: 2, retried: false });
    assert.match(failedBy, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    assert.equal((await jobGet(t.runtime.db, a))!.status, 'failed', 'dry run changes nothing');
    // One more fails after the count: a retry bounded by the count's failedBy leaves it.
    const later = await failedJob(t, 'bulk_type', 'timeout talking to the LLM');
    const run = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload: { type: 'bulk_type', q: 'timeout', failedBy } });
    assert.deepEqual(run.json(), { count: 2, retried: true });
    assert.equal((await jobGet(t.runtime.db, a))!.status, 'pending');
    assert.equal((await jobGet(t.runtime.db, b))!.status, 'pending');
    assert.equal((await jobGet(t.runtime.db, other))!.status, 'failed');
    assert.equal((await jobGet(t.runtime.db, later))!.status, 'failed');
    // Without a bound, all that match now.
    const unbounded = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload: { type: 'bulk_type', q: 'timeout' } });
    assert.deepEqual(unbounded.json(), { count: 1, retried: true });
    assert.equal((await jobGet(t.runtime.db, later))!.status, 'pending');

    for (const payload of [{ type: 5 }, { dryRun: 'yes' }, { status: 'done' }, { q: '' }, { failedBy: 'yesterday' }, { failedBy: '2026-02-30T10:00:00Z' }]) {
      const response = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: auth, payload });
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
      assert.ok(response.json().error.length > 0);
    }
    const notJson = await t.app.inject({ method: 'POST', url: '/api/jobs/retry-failed', headers: { ...auth, 'content-type': 'application/json' }, payload: '{oops' });
    assert.equal(notJson.statusCode, 400);
  });
});

describe('admin API: conversations, messages and suggestions', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp();
  });
  after(() => t.close());

  const simulate = async (body: string, from = '+31612345678') => {
    const response = await t.app.inject({ method: 'POST', url: '/api/simulate', headers: auth, payload: { from, body, name: 'Anna' } });
    assert.equal(response.statusCode, 201, response.body);
    return response.json() as { conversationId: string; messageId: string };
  };
  const suggestionFor = async (conversationId: string, messageId: string, body = 'We open at 9.') =>
    (
      await t.runtime.db.query<{ id: string }>(
        `insert into suggestions (conversation_id, message_id, body, provider, model) values ($1, $2, $3, 'local', 'test') returning id`,
        [conversationId, messageId, body],
      )
    ).rows[0]!.id;

  test('POST /api/simulate stores the message and its autoreply job in one go; bad input is 400', async () => {
    const { conversationId, messageId } = await simulate('Hoe laat open?', '+31600000001');
    const jobs = await t.runtime.db.query<{ type: string }>(`select type from ai_jobs where payload->>'messageId' = $1`, [messageId]);
    assert.deepEqual(jobs.rows.map((r) => r.type), ['autoreply']);
    const thread = await t.app.inject({ url: `/api/conversations/${conversationId}`, headers: auth });
    assert.equal(thread.json().messages[0].body, 'Hoe laat open?');
    for (const payload of [{ from: '0612', body: 'x' }, { from: '+31612345678', body: '   ' }, { from: '+31612345678' }]) {
      const response = await t.app.inject({ method: 'POST', url: '/api/simulate', headers: auth, payload });
      assert.equal(response.statusCode, 400, JSON.stringify(payload));
    }
  });

  test('GET /api/conversations lists latest first with markers, searches, and rejects a bad cursor', async () => {
    await simulate('first', '+31600000002');
    const second = await simulate('second', '+31600000003');
    const list = await t.app.inject({ url: '/api/conversations', headers: auth });
    assert.equal(list.statusCode, 200);
    const [newest] = list.json().conversations;
    assert.equal(newest.id, second.conversationId);
    assert.equal(newest.awaitingReply, true);
    const search = await t.app.inject({ url: '/api/conversations?q=600000002', headers: auth });
    assert.equal(search.json().conversations.length, 1);
    // As people write the number: nationally, with 00, spaced (found by a new-user probe:
    // none of these found it).
    // Copied from Twilio's console or log (whatsapp:+…), or with the trunk 0 after the country
    // code, as many Dutch people write it: found nothing (found by a WhatsApp probe).
    for (const written of ['0600000002', '0031 6 0000 0002', '+31 (0)6-0000 0002', 'whatsapp:+31600000002', '+31 06 0000 0002', '0031 06 00000002']) {
      const found = await t.app.inject({ url: `/api/conversations?q=${encodeURIComponent(written)}`, headers: auth });
      assert.deepEqual(found.json().conversations.map((c: { whatsappNumber: string }) => c.whatsappNumber), ['+31600000002'], written);
    }
    assert.equal((await t.app.inject({ url: '/api/conversations?after=zzz', headers: auth })).statusCode, 400);
    assert.equal((await t.app.inject({ url: '/api/conversations?limit=1000', headers: auth })).statusCode, 400);
  });

  test('GET /api/conversations pages through conversations active in the same millisecond without skipping one', async () => {
    // The cursor carried the time to the millisecond, PostgreSQL keeps microseconds: the
    // second of two conversations in one millisecond fell between two pages.
    const ids = [];
    for (const [from, at] of [['+31600000011', '2030-01-01T00:00:00.123400Z'], ['+31600000012', '2030-01-01T00:00:00.123300Z'], ['+31600000013', '2030-01-01T00:00:00.100000Z']] as const) {
      const { conversationId } = await simulate('same millisecond', from);
      await t.runtime.db.query('update conversations set last_message_at = $2 where id = $1', [conversationId, at]);
      ids.push(conversationId);
    }
    assert.deepEqual(await idsPageByPage(t, '/api/conversations', 'conversations', 3), ids);
  });

  test('GET /api/conversations/:id: 400 for a bad id, 404 for an unknown one', async () => {
    assert.equal((await t.app.inject({ url: '/api/conversations/nope', headers: auth })).statusCode, 400);
    assert.equal((await t.app.inject({ url: `/api/conversations/${NIL}`, headers: auth })).statusCode, 404);
  });

  test('POST /api/conversations/:id/pause switches the AI off and on', async () => {
    const { conversationId } = await simulate('pause me', '+31600000004');
    const off = await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/pause`, headers: auth, payload: { paused: true } });
    assert.deepEqual(off.json(), { id: conversationId, aiPaused: true });
    const row = await t.runtime.db.query<{ ai_paused: boolean }>('select ai_paused from conversations where id = $1', [conversationId]);
    assert.equal(row.rows[0]!.ai_paused, true);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/pause`, headers: auth, payload: { paused: 'yes' } })).statusCode, 400);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${NIL}/pause`, headers: auth, payload: { paused: false } })).statusCode, 404);
  });

  test('POST /api/conversations/:id/messages sends an admin reply through the outbox (log transport)', async () => {
    const { conversationId, messageId } = await simulate('Kan iemand me bellen?', '+31600000005');
    const response = await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: auth, payload: { body: 'Ik bel je zo.' } });
    assert.equal(response.statusCode, 201, response.body);
    assert.equal(response.json().outcome, 'sent');
    const stored = await t.runtime.db.query<{ source: string; status: string; reply_to_message_id: string }>(
      `select source, status, reply_to_message_id from messages where conversation_id = $1 and source = 'admin'`,
      [conversationId],
    );
    assert.deepEqual(stored.rows, [{ source: 'admin', status: 'logged', reply_to_message_id: messageId }]);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: auth, payload: { body: '' } })).statusCode, 400);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: auth, payload: { body: 'x'.repeat(5000) } })).statusCode, 400);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${NIL}/messages`, headers: auth, payload: { body: 'hi' } })).statusCode, 404);
  });

  test('POST /api/conversations/:id/suggest enqueues a suggest job for the newest inbound message', async () => {
    const { conversationId, messageId } = await simulate('Suggest something', '+31600000006');
    const response = await t.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/suggest`, headers: auth });
    assert.equal(response.statusCode, 202);
    const job = await jobGet(t.runtime.db, response.json().jobId);
    assert.equal(job!.type, 'suggest');
    assert.deepEqual(job!.payload, { conversationId, messageId });
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/conversations/${NIL}/suggest`, headers: auth })).statusCode, 404);
  });

  test('suggestions: send (edited), then 409 on a second send; discard; 404 unknown', async () => {
    const { conversationId, messageId } = await simulate('Wanneer open?', '+31600000007');
    const id = await suggestionFor(conversationId, messageId);
    const got = await t.app.inject({ url: `/api/suggestions/${id}`, headers: auth });
    assert.equal(got.json().status, 'pending');
    const sent = await t.app.inject({ method: 'POST', url: `/api/suggestions/${id}/send`, headers: auth, payload: { body: 'We open at 9:00.' } });
    assert.equal(sent.statusCode, 201, sent.body);
    assert.equal(sent.json().message.body, 'We open at 9:00.');
    const after = await t.app.inject({ url: `/api/suggestions/${id}`, headers: auth });
    assert.equal(after.json().status, 'sent');
    assert.equal(after.json().sentMessageId, sent.json().message.id);
    const twice = await t.app.inject({ method: 'POST', url: `/api/suggestions/${id}/send`, headers: auth, payload: {} });
    assert.equal(twice.statusCode, 409);
    const admins = await t.runtime.db.query(`select 1 from messages where conversation_id = $1 and source = 'admin'`, [conversationId]);
    assert.equal(admins.rowCount, 1, 'sent once');

    const other = await simulate('Nog een vraag', '+31600000008');
    const discardMe = await suggestionFor(other.conversationId, other.messageId);
    const discarded = await t.app.inject({ method: 'POST', url: `/api/suggestions/${discardMe}/discard`, headers: auth });
    assert.deepEqual(discarded.json(), { id: discardMe, status: 'discarded' });
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/suggestions/${discardMe}/discard`, headers: auth })).statusCode, 409);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/suggestions/${discardMe}/send`, headers: auth, payload: {} })).statusCode, 409);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/suggestions/${NIL}/send`, headers: auth, payload: {} })).statusCode, 404);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/suggestions/${NIL}/discard`, headers: auth })).statusCode, 404);
    assert.equal((await t.app.inject({ method: 'POST', url: `/api/suggestions/${id}/send`, headers: auth, payload: { body: 5 } })).statusCode, 400);
    assert.equal((await t.app.inject({ url: `/api/suggestions/bad`, headers: auth })).statusCode, 400);
  });
});

describe('admin API: people, documents and imports', () => {
  let t: AdminApp;
  before(async () => {
    t = await startAdminApp();
  });
  after(() => t.close());

  test('POST /api/documents saves, enqueues the embedding, and says unchanged the second time', async () => {
    const payload = { title: 'Opening hours', body: 'We are open from 9 to 17 on weekdays.', source: 'hours.md' };
    const first = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload });
    assert.equal(first.statusCode, 201, first.body);
    assert.equal(first.json().status, 'inserted');
    const jobs = await t.runtime.db.query(`select 1 from ai_jobs where type = 'embed_record' and payload->>'id' = $1`, [first.json().id]);
    assert.equal(jobs.rowCount, 1);
    const again = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload });
    assert.equal(again.json().status, 'unchanged');
    const list = await t.app.inject({ url: '/api/documents', headers: auth });
    assert.equal(list.json().documents[0].title, 'Opening hours');
    assert.equal(list.json().documents[0].embedded, false);
    // The same text with a browser form's line ends (\r\n) is the same document (found by a
    // new-user probe: it was stored with them, counted as changed and embedded again).
    const lines = { title: 'Lines', body: '# Lines\n\nOne.\nTwo.\n' };
    assert.equal((await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: lines })).json().status, 'inserted');
    const crlf = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: { ...lines, body: lines.body.replace(/\n/g, '\r\n') } });
    assert.equal(crlf.json().status, 'unchanged');
    const stored = await t.runtime.db.query<{ body: string }>(`select body from documents where title = 'Lines'`);
    assert.equal(stored.rows[0]!.body, lines.body);
    for (const bad of [{ title: '', body: 'x' }, { title: 'x', body: '  ' }, { title: 'x', body: 'y', extra: 1 }]) {
      assert.equal((await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: bad })).statusCode, 400, JSON.stringify(bad));
    }
    assert.equal((await t.app.inject({ url: '/api/documents?limit=0', headers: auth })).statusCode, 400);
    // A web page's source (a wiki's export) is refused with the reason, where its tags were
    // embedded and quoted in answers; Markdown with a few tags in it is a document.
    const page = '<div class="wiki-content"><h2 id="Verlof">Vakantiedagen</h2><p>Je hebt <strong>25</strong>&nbsp;vakantiedagen per jaar &amp; ze vervallen op 1&nbsp;juli.</p><ul><li>Aanvragen via <a href="https://hr.example.com/verlof">het HR-portaal</a></li></ul></div>';
    for (const body of [page, `<!DOCTYPE html>\n<html><body><p>Open from 9 to 17.</p></body></html>`]) {
      const html = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: { title: 'Wiki', body } });
      assert.equal(html.statusCode, 400, html.body);
      assert.match(html.json().error, /is HTML \(a web page's source\)/);
    }
    const markdown = { title: 'With tags', body: '# Parking\n\nThe garage opens at 7.<br>\nIt closes at 19.\n\n<details><summary>Bikes</summary>\n\nBikes go in the shed.\n</details>\n' };
    assert.equal((await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: markdown })).statusCode, 201);
    // Not JSON: 415, saying what is wanted, where a text/plain body was a 400 "expected object"
    // (found by a new-user probe).
    const text = await t.app.inject({ method: 'POST', url: '/api/documents', headers: { ...auth, 'content-type': 'text/plain' }, payload: 'Opening hours: 9 to 17' });
    assert.equal(text.statusCode, 415, text.body);
  });

  test('GET /api/documents searches title, source and tag and pages past the first page', async () => {
    // The list was the newest 500 at most, without search or pages: a larger knowledge base
    // had documents no list showed.
    const ids = [];
    for (const [title, tags, at] of [['Parking rules', ['facilities'], '2030-01-01T00:00:00.123400Z'], ['Leave policy', ['hr'], '2030-01-01T00:00:00.123300Z'], ['Expenses', ['hr', 'finance'], '2030-01-01T00:00:00.100000Z']] as const) {
      const saved = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: { title, body: `All about ${title.toLowerCase()}.`, tags: tags.join(','), source: `${title}.md` } });
      assert.ok(saved.statusCode < 300, saved.body);
      await t.runtime.db.query('update documents set updated_at = $2 where id = $1', [saved.json().id, at]);
      ids.push(saved.json().id);
    }
    assert.deepEqual(await idsPageByPage(t, '/api/documents', 'documents', 3), ids, 'newest first, one per page, none skipped in a shared millisecond');
    const titles = async (q: string) => (await t.app.inject({ url: `/api/documents?q=${encodeURIComponent(q)}`, headers: auth })).json().documents.map((d: { title: string }) => d.title);
    assert.deepEqual(await titles('HR'), ['Leave policy', 'Expenses'], 'by tag');
    assert.deepEqual(await titles('rules.md'), ['Parking rules'], 'by source');
    assert.deepEqual(await titles('100%'), [], 'a % is a character, not a wildcard');
    const bad = await t.app.inject({ url: '/api/documents?after=zzz', headers: auth });
    assert.equal(bad.statusCode, 400);
    assert.match(bad.json().error, /^after: invalid page cursor/);
    const login = await t.app.inject({ method: 'POST', url: '/admin/login', payload: { token: TEST_ADMIN_TOKEN, next: '/admin/documents' } });
    const cookie = String(login.headers['set-cookie']).split(';')[0]!;
    const page = await t.app.inject({ url: '/admin/documents?q=hr', headers: { cookie } });
    assert.equal(page.statusCode, 200);
    assert.ok(page.body.includes('Leave policy') && page.body.includes('Expenses') && !page.body.includes('Parking rules'), 'the dashboard searches too');
    assert.equal((await t.app.inject({ url: '/admin/documents?after=zzz', headers: { cookie } })).statusCode, 400);
  });

  test('two saves of one new title at once: both answered, one document, no 500', async () => {
    for (let i = 0; i < 5; i++) {
      const title = `Handboek ${i}`;
      const save = (days: number) => t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: { title, body: `# Verlof\nJe hebt ${days} vakantiedagen per jaar.` } });
      const answers = await Promise.all([save(25), save(30)]);
      assert.deepEqual(answers.map((a) => a.statusCode).sort(), [200, 201], answers.map((a) => a.body).join('\n'));
      const stored = await t.runtime.db.query<{ body: string }>('select body from documents where title = $1', [title]);
      assert.equal(stored.rowCount, 1);
    }
  });

  test('POST /api/imports stores the CSV and its job; GET shows progress; people are searchable after the run', async () => {
    const content = 'name,phone,email,department\nAnna de Vries,+31611111111,anna@example.com,Finance\nBroken,not-a-phone,,\n';
    const response = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'people.csv', content } });
    assert.equal(response.statusCode, 202, response.body);
    const { importId, jobId } = response.json();
    assert.equal((await jobGet(t.runtime.db, jobId))!.type, 'import_people');
    const pending = await t.app.inject({ url: `/api/imports/${importId}`, headers: auth });
    assert.equal(pending.json().status, 'pending');
    // Run the import here instead of starting a worker: the job's own function.
    const { importPeopleExecute } = await import('../src/jobs/import-people.ts');
    await importPeopleExecute(t.runtime.db, importId);
    const done = await t.app.inject({ url: `/api/imports/${importId}`, headers: auth });
    assert.equal(done.json().status, 'done');
    assert.equal(done.json().inserted, 1);
    assert.equal(done.json().rejected, 1);
    assert.equal(done.json().rowErrors[0].line, 3);
    const imports = await t.app.inject({ url: '/api/imports', headers: auth });
    assert.equal(imports.json().imports[0].id, importId);

    const people = await t.app.inject({ url: '/api/people?q=finance', headers: auth });
    assert.equal(people.json().people.length, 1);
    const byNumber = await t.app.inject({ url: `/api/people?q=${encodeURIComponent('06 1111 1111')}`, headers: auth });
    assert.deepEqual(byNumber.json().people.map((p: { name: string }) => p.name), ['Anna de Vries'], 'found by the number written nationally');
    // A record imported before the trunk 0 after the country code was dropped holds
    // +310611113333: "+31 06 …" found it by its digits, and so does the number as WhatsApp
    // writes it (the look-up by the number as held missed it).
    await t.runtime.db.query(`insert into people (name, phone, content_hash) values ('Oud Record', '+310611113333', 'x')`);
    for (const written of ['+31 06 1111 3333', '+31 6 1111 3333', '0611113333']) {
      const found = await t.app.inject({ url: `/api/people?q=${encodeURIComponent(written)}`, headers: auth });
      assert.deepEqual(found.json().people.map((p: { name: string }) => p.name), ['Oud Record'], written);
    }
    await t.runtime.db.query(`delete from people where phone = '+310611113333'`);
    const person = await t.app.inject({ url: `/api/people/${people.json().people[0].id}`, headers: auth });
    assert.equal(person.json().email, 'anna@example.com');
    assert.equal((await t.app.inject({ url: `/api/people/${NIL}`, headers: auth })).statusCode, 404);
    assert.equal((await t.app.inject({ url: '/api/people/nope', headers: auth })).statusCode, 400);
    assert.equal((await t.app.inject({ url: '/api/people?after=zzz', headers: auth })).statusCode, 400);
    // A cursor with a name and 36 dashes where the id goes; a NUL in a search or a body.
    assert.equal((await t.app.inject({ url: `/api/people?after=${Buffer.from(`x|${'-'.repeat(36)}`).toString('base64url')}`, headers: auth })).statusCode, 400);
    assert.equal((await t.app.inject({ url: '/api/people?q=%00', headers: auth })).statusCode, 400);
    const nul = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'a\u0000.csv', content: 'name,phone\nA,+31612345678' } });
    assert.equal(nul.statusCode, 400);
    assert.match(nul.json().error, /NUL character/);
    // A NUL in the file itself is the upload's to judge: a CSV row holding one is reported
    // with its line and the others import; a document holding one is binary.
    const nulRow = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'nul.csv', content: 'name,phone\nNul\u0000,+31633333333\nCas,+31644444444\n' } });
    assert.equal(nulRow.statusCode, 202, nulRow.body);
    await importPeopleExecute(t.runtime.db, nulRow.json().importId);
    const nulImported = (await t.app.inject({ url: `/api/imports/${nulRow.json().importId}`, headers: auth })).json();
    assert.deepEqual(nulImported.rowErrors.map((e: { line: number; reason: string }) => [e.line, e.reason]), [[2, 'the row holds NUL characters: save the file as UTF-8 CSV']]);
    assert.equal((await t.app.inject({ url: '/api/people?q=Cas', headers: auth })).json().people.length, 1);
    await t.runtime.db.query(`delete from people where name = 'Cas'`);
    const binary = await t.app.inject({ method: 'POST', url: '/api/documents', headers: auth, payload: { title: 'scan', body: '%PDF-1.4\u0000\u0000binary' } });
    assert.equal(binary.statusCode, 400);
    assert.match(binary.json().error, /document "scan" is not text \(binary content\)/);
    assert.equal((await t.app.inject({ url: `/api/imports/${NIL}`, headers: auth })).statusCode, 404);
    // A complete list: the API's prune flag removes the people not in it when the import runs.
    const complete = await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: { filename: 'all.csv', content: 'name,phone\nBea,+31622222222\n', prune: true } });
    assert.equal(complete.statusCode, 202, complete.body);
    await importPeopleExecute(t.runtime.db, complete.json().importId);
    const completed = (await t.app.inject({ url: `/api/imports/${complete.json().importId}`, headers: auth })).json();
    assert.deepEqual([completed.prune, completed.removed], [true, 1], 'Anna is not in the complete list');
    for (const bad of [{ filename: 'x.csv', content: '' }, { content: 'a,b' }, { filename: 'x.csv', content: 'name,phone', prune: 'yes' }]) {
      assert.equal((await t.app.inject({ method: 'POST', url: '/api/imports', headers: auth, payload: bad })).statusCode, 400, JSON.stringify(bad));
    }
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

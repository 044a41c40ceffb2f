// Replies through the outbox, end to end over real HTTP: signed webhook in, the real worker
// and autoreply job, a fake Twilio REST API out (with faults), and Twilio-style status
// callbacks back in. Real PostgreSQL. Nothing sleeps: waits are for states, and backoff or
// callback deadlines are moved by SQL.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { autoreplyEnqueue } from '../src/jobs/autoreply.ts';
import type { Job } from '../src/queue/index.ts';
import { jobGet, jobRetry } from '../src/queue/index.ts';
import { TEST_ADMIN_TOKEN } from './helpers/admin-app.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { FROM_NUMBER, inboundParams, messagingEnv, signedForm, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';

interface Row {
  id: string;
  status: string;
  twilio_sid: string | null;
  error_code: number | null;
  error_message: string | null;
  body: string;
  source: string;
  reply_to_message_id: string | null;
}

/** Posts an inbound message to the listening app as Twilio would; returns its message id. */
async function receive(m: MessagingApp, t: TestDatabase, body: string, from = '+31612345678'): Promise<string> {
  const params = inboundParams(body, from);
  const form = signedForm(`${m.url}${WHATSAPP}`, params);
  const response = await fetch(`${m.url}${WHATSAPP}`, { method: 'POST', headers: form.headers, body: form.payload });
  assert.equal(response.status, 200, await response.text());
  return (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0]!.id;
}

async function jobFor(t: TestDatabase, messageId: string): Promise<Job> {
  const { id } = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1 order by seq limit 1`, [messageId])).rows[0]!;
  return (await jobGet(t.db, id))!;
}

async function replyTo(t: TestDatabase, messageId: string): Promise<Row | undefined> {
  return (await t.db.query<Row>(`select * from messages where reply_to_message_id = $1 and source = 'ai'`, [messageId])).rows[0];
}

async function untilJob(t: TestDatabase, messageId: string, what: string, check: (job: Job) => boolean): Promise<Job> {
  let job: Job | undefined;
  await waitFor(async () => {
    job = await jobFor(t, messageId);
    return check(job);
  }, what, 20_000);
  return job!;
}

/** Lets a job that waits out a backoff or a confirmation delay run now. */
async function runNow(t: TestDatabase, jobId: string): Promise<void> {
  await t.db.query(`update ai_jobs set next_run_at = now() where id = $1 and status = 'pending'`, [jobId]);
}

/** Lets a pending job run now, on its last attempt (its others used up). */
async function lastAttemptNow(t: TestDatabase, jobId: string): Promise<void> {
  await t.db.query(`update ai_jobs set attempts = max_attempts - 1, next_run_at = now() where id = $1 and status = 'pending'`, [jobId]);
}

describe('reply delivery through the outbox', () => {
  let t: TestDatabase;
  let fake: FakeTwilio;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    fake = await startFakeTwilio();
    m = await startMessagingApp(messagingEnv(t.url, fake.url, { ADMIN_TOKEN: TEST_ADMIN_TOKEN }), { listen: true });
    await m.startWorker();
  });
  after(async () => {
    await m.close();
    await fake.close();
    await t.close();
  });
  beforeEach(() => {
    fake.reset();
    fake.statusCallbacks = false;
  });

  test('the fake Twilio receives From, To, Body and the StatusCallback; a status callback updates the message', async () => {
    const inbound = await receive(m, t, 'Wanneer is de vergadering?');
    const job = await untilJob(t, inbound, 'autoreply done', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1);
    const sent = fake.messages[0]!;
    const reply = (await replyTo(t, inbound))!;
    assert.equal(sent.from, FROM_NUMBER);
    assert.equal(sent.to, 'whatsapp:+31612345678');
    assert.equal(sent.body, reply.body);
    assert.ok(reply.body.length > 0);
    assert.equal(sent.statusCallback, `${m.url}/webhooks/twilio/status?messageId=${reply.id}`);
    assert.equal(fake.requests[0]!.authorized, true, 'Basic auth with the account SID and token');
    assert.equal(reply.status, 'queued');
    assert.equal(reply.twilio_sid, sent.sid);
    assert.equal((job.result as { sid: string }).sid, sent.sid);

    assert.equal(await fake.deliverStatus(sent.sid, 'sent'), 200);
    assert.equal(await fake.deliverStatus(sent.sid, 'delivered'), 200);
    assert.equal((await replyTo(t, inbound))!.status, 'delivered');

    // A retried job that finds its reply confirmed is a no-op.
    await autoreplyEnqueue(t.db, { messageId: inbound, conversationId: (job.payload as { conversationId: string }).conversationId });
    await waitFor(async () => (await t.db.query(`select 1 from ai_jobs where payload->>'messageId' = $1 and status = 'done'`, [inbound])).rowCount === 2, 'second job done');
    assert.equal(fake.messages.length, 1, 'not sent again');
  });

  test('callbacks sent by Twilio on its own (sent, delivered) reach the reply', async () => {
    fake.statusCallbacks = true;
    const inbound = await receive(m, t, 'Met callbacks');
    await waitFor(async () => (await replyTo(t, inbound))?.status === 'delivered', 'reply delivered by callback');
    // The fake records a callback once our answer to it has arrived, which may be just after,
    // and in either order: the two posts are 20 ms apart and on a busy machine the first
    // answer can come last (Twilio does not order its callbacks either).
    await waitFor(() => fake.callbacks.length === 2, 'both callbacks recorded');
    const answered = fake.callbacks.map((c) => [c.status, c.httpStatus]).sort(([a], [b]) => String(a).localeCompare(String(b)));
    assert.deepEqual(answered, [['delivered', 200], ['sent', 200]]);
  });

  test('429: nothing went out, the attempt is given back, and the next attempt sends once', async () => {
    fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests', retryAfterSeconds: 120 });
    const inbound = await receive(m, t, 'Druk?');
    const waiting = await untilJob(t, inbound, 'job throttled', (j) => j.status === 'pending' && j.errors.length === 1);
    assert.equal(waiting.attempts, 0, 'throttling does not use up an attempt');
    assert.ok(waiting.nextRunAt.getTime() > Date.now() + 100_000, 'waits for Retry-After');
    assert.match(waiting.lastError!, /HTTP 429/);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'send_failed');
    assert.equal(reply.error_code, 20429);
    assert.equal(fake.messages.length, 0);

    await runNow(t, waiting.id);
    await untilJob(t, inbound, 'job done after the throttle', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1);
    const sent = (await replyTo(t, inbound))!;
    assert.equal(sent.status, 'queued');
    assert.equal(sent.error_code, null, 'the passing error is cleared once sent');
  });

  // Found by a Twilio probe: a 429 with `Retry-After: 0` made the throttled job due at once,
  // without spending an attempt, so the worker sent to Twilio again and again as fast as it
  // could for the whole throttle window (15 minutes): a retry storm against a throttling API.
  test('429 with Retry-After: 0: not retried at once, again and again', async () => {
    fake.fault(...Array.from({ length: 50 }, () => ({ kind: 'http' as const, status: 429, code: 20429, message: 'Too Many Requests', retryAfterSeconds: 0 })));
    const inbound = await receive(m, t, 'Te druk?');
    await fake.waitForRequests(1);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const throttled = fake.requests.filter((r) => r.outcome === 'fault:http-429').length;
    assert.ok(throttled <= 2, `${throttled} sends to a throttling Twilio within 1.5 s`);
    fake.reset();
    await untilJob(t, inbound, 'job done once Twilio takes it', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1);
  });

  // A 429 without Retry-After (Twilio rarely sends one) waited a flat 5 s every time, so a
  // throttle that lasted minutes was hit every 5 s for the whole throttle window.
  test('429s without Retry-After: each waits twice as long as the one before (capped), none uses up an attempt', async () => {
    fake.fault(...Array.from({ length: 3 }, () => ({ kind: 'http' as const, status: 429, code: 20429, message: 'Too Many Requests' })));
    const inbound = await receive(m, t, 'Heel druk?');
    const waits: number[] = [];
    for (let n = 1; n <= 3; n++) {
      const job = await untilJob(t, inbound, `throttle ${n}`, (j) => j.status === 'pending' && j.errors.length === n);
      assert.equal(job.attempts, 0, 'throttling does not use up an attempt');
      waits.push(Math.round((job.nextRunAt.getTime() - job.updatedAt.getTime()) / 1000));
      await runNow(t, job.id);
    }
    // BACKOFF_BASE_SECONDS=5: 5, 10, 20 … up to BACKOFF_CAP_SECONDS.
    assert.deepEqual(waits, [5, 10, 20]);
    await untilJob(t, inbound, 'job done once Twilio takes it', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1);
  });

  test('a 500 is retried with backoff; the retry waits for a callback until the deadline, then the reply goes out once', async () => {
    fake.fault({ kind: 'http', status: 500, code: 20500, message: 'Internal Server Error' });
    const inbound = await receive(m, t, 'Storing?');
    const backingOff = await untilJob(t, inbound, 'job backing off', (j) => j.status === 'pending' && j.errors.length === 1);
    assert.equal(backingOff.attempts, 1);
    assert.match(backingOff.lastError!, /unavailable \(HTTP 500\)/);
    assert.equal((await replyTo(t, inbound))!.status, 'send_failed');
    // A 500 may come with a message Twilio stored: the retry waits (not using an attempt).
    await runNow(t, backingOff.id);
    const waiting = await untilJob(t, inbound, 'job waiting out the deadline', (j) => j.status === 'pending' && j.errors.length === 2);
    assert.match(waiting.lastError!, /refused with a 5xx.*not resending/);
    assert.equal(waiting.attempts, 1);
    assert.ok(waiting.nextRunAt.getTime() > Date.now() + 60_000, 'until the confirmation deadline');
    assert.equal(fake.messages.length, 0);
    // Meanwhile the conversation page shows the reply's text: not a "not sent" that an admin
    // would act on (answering it themselves) while the job waits because it may have gone.
    const shown = (await replyTo(t, inbound))!.error_message!;
    assert.doesNotMatch(shown, /^not sent/);
    assert.match(shown, /^may have been sent: Twilio is unavailable \(HTTP 500\)/);
    // Past the deadline Twilio's list lacks it: it never went, and goes now, once.
    await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
    await runNow(t, waiting.id);
    await untilJob(t, inbound, 'job done after the 500', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1);
  });

  // A 5xx used up the job's attempts: no retry asks Twilio's list or waits for its callback,
  // so the reply said "not sent" for good while the contact may have it (Twilio took it).
  test('a 5xx on the last attempt: the reply is flagged for a human, not left "not sent"', async () => {
    fake.fault({ kind: 'http', status: 500, code: 20500, message: 'Internal Server Error' });
    const inbound = await receive(m, t, 'Storing tot het eind?', '+31600000031');
    const backingOff = await untilJob(t, inbound, 'job backing off', (j) => j.status === 'pending' && j.errors.length === 1);
    // Its next attempt is its last; the first send is past its deadline and provably absent
    // from Twilio's list, so it is sent again, and Twilio takes it but answers a 502.
    await t.db.query(`update ai_jobs set max_attempts = 2 where id = $1`, [backingOff.id]);
    await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
    fake.listLagMs = 600_000;
    fake.fault({ kind: 'accept-then-http', status: 502, html: true });
    await runNow(t, backingOff.id);
    const failed = await untilJob(t, inbound, 'job failed on its last attempt', (j) => j.status === 'failed');
    assert.equal(fake.messages.length, 1, 'Twilio took it once');
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'flagged', `reply ${reply.status}: ${reply.error_message}`);
    assert.match(reply.error_message!, /flagged for a human.*Not resent/);
    assert.match(failed.lastError!, /flagged for a human/);
  });

  test('400 invalid number (21211): the job fails at once with Twilio’s code, the reply shows it', async () => {
    fake.fault({ kind: 'http', status: 400, code: 21211, message: "The 'To' number is not a valid phone number." });
    const inbound = await receive(m, t, 'Ongeldig');
    const failed = await untilJob(t, inbound, 'job failed', (j) => j.status === 'failed');
    assert.equal(failed.attempts, 1, 'no retries');
    assert.match(failed.lastError!, /Twilio error 21211/);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'failed');
    assert.equal(reply.error_code, 21211);
    assert.equal(fake.messages.length, 0);
  });

  // Twilio's window closed before ours: refused with a 400, nothing went out. Without a
  // template (none configured here) the reply is held as one outside the window is, for a
  // human; it used to fail as refused, which no restart could change.
  test('63016 at send, no template: the reply is held with the window reason, nothing sent', async () => {
    fake.fault({ kind: 'http', status: 400, code: 63016, message: 'Failed to send freeform message because you are outside the allowed window.' });
    const inbound = await receive(m, t, 'Te laat');
    const failed = await untilJob(t, inbound, 'job failed', (j) => j.status === 'failed');
    assert.match(failed.lastError!, /held, not sent: outside WhatsApp's 24-hour window/);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'held');
    assert.match(reply.error_message!, /no approved template is configured/);
    assert.equal(fake.messages.length, 0);
  });

  test('63016 reported later by status callback: the message says so', async () => {
    fake.statusCallbacks = true;
    fake.fault({ kind: 'fail-later', code: 63016 });
    const inbound = await receive(m, t, 'Later te laat');
    await waitFor(async () => (await replyTo(t, inbound))?.status === 'failed', 'reply failed by callback');
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.error_code, 63016);
    assert.match(reply.error_message!, /outside WhatsApp's 24-hour window: a free-form reply is impossible/);
    // The callback can come before the worker has recorded the send and completed the job.
    const job = await untilJob(t, inbound, 'job finished', (j) => j.status !== 'pending' && j.status !== 'processing');
    assert.equal(job.status, 'done', 'Twilio accepted it: the job is done, the message shows the failure');
    // Without a template nothing can reach the contact now: the job's second run leaves it.
    await waitFor(async () => (await t.db.query(`select 1 from ai_jobs where payload->>'messageId' = $1 and status = 'done'`, [inbound])).rowCount === 2, 'its second run done');
    assert.equal(fake.messages.length, 1, 'not sent again');
    assert.equal((await replyTo(t, inbound))!.status, 'failed');
  });

  test('connection cut after Twilio accepted: not resent; the status callback confirms it and the retry is a no-op', async () => {
    fake.fault({ kind: 'accept-then-drop' });
    const inbound = await receive(m, t, 'Verbinding weg');
    const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
    assert.match(waiting.lastError!, /not confirmed; waiting for Twilio's status callback, not resending/);
    assert.equal(waiting.attempts, 0, 'waiting is not the job’s fault');
    // Cancelling it now would leave the reply unconfirmed for good: refused.
    const cancel = await m.app.inject({ method: 'POST', url: `/api/jobs/${waiting.id}/cancel`, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    assert.equal(cancel.statusCode, 409, cancel.body);
    assert.match(JSON.parse(cancel.body).error, /may have reached Twilio and waits for its confirmation/);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'unconfirmed');
    assert.equal(reply.twilio_sid, null);
    assert.equal(fake.messages.length, 1);

    assert.equal(await fake.deliverStatus(fake.messages[0]!.sid, 'sent'), 200);
    const confirmed = (await replyTo(t, inbound))!;
    assert.equal(confirmed.status, 'sent');
    assert.equal(confirmed.twilio_sid, fake.messages[0]!.sid);
    // The callback made the waiting job due at once (it was set to wait minutes).
    assert.ok(waiting.nextRunAt.getTime() > Date.now() + 60_000);
    const done = await untilJob(t, inbound, 'job done', (j) => j.status === 'done');
    assert.equal((done.result as { resumed?: boolean }).resumed, true);
    assert.equal(fake.messages.length, 1, 'exactly one message went out');
  });

  test('a 502 after Twilio accepted: the job waiting to ask Twilio cannot be cancelled; its next run confirms the reply', async () => {
    fake.fault({ kind: 'accept-then-http', status: 502, message: 'Bad Gateway' });
    const inbound = await receive(m, t, 'Gateway weg');
    const retrying = await untilJob(t, inbound, 'job waiting to retry', (j) => j.status === 'pending' && j.errors.length === 1);
    const reply = (await t.db.query<Row & { maybe_sent: boolean }>(`select * from messages where reply_to_message_id = $1 and source = 'ai'`, [inbound])).rows[0]!;
    assert.deepEqual([reply.status, reply.maybe_sent], ['send_failed', true]);
    // Cancelled, nothing would ever ask Twilio about it: 'send_failed' for good, though the
    // contact has it (and an admin reading "not delivered" sends it again by hand).
    const cancel = await m.app.inject({ method: 'POST', url: `/api/jobs/${retrying.id}/cancel`, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } });
    assert.equal(cancel.statusCode, 409, cancel.body);
    assert.match(JSON.parse(cancel.body).error, /may have reached Twilio/);
    await runNow(t, retrying.id);
    const done = await untilJob(t, inbound, 'job done', (j) => j.status === 'done');
    assert.equal((done.result as { resumed?: boolean }).resumed, true);
    assert.equal((await replyTo(t, inbound))!.twilio_sid, fake.messages[0]!.sid);
    assert.equal(fake.messages.length, 1, 'exactly one message went out');
  });

  // An operator's overloaded scale run: one Messages list call that timed out (or answered
  // 5xx) past the deadline flagged the reply for a human and failed its job on its second
  // attempt of five. With attempts left the job now fails retryably, and its next attempt
  // asks the list again; only on the last one does a list that cannot be read flag it.
  test('past the deadline Twilio\'s list cannot be read: with attempts left the job retries and asks again; on the last attempt it flags', async () => {
    for (const send of ['cut off', '5xx'] as const) {
      fake.reset();
      fake.statusCallbacks = false;
      fake.fault(send === 'cut off' ? { kind: 'accept-then-drop' } : { kind: 'accept-then-http', status: 502, message: 'Bad Gateway' });
      const inbound = await receive(m, t, `Lijst onleesbaar (${send})`, send === 'cut off' ? '+31612340401' : '+31612340402');
      const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
      const before = waiting.attempts;
      await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
      fake.listFailures = 1;
      await runNow(t, waiting.id);
      const retrying = await untilJob(t, inbound, 'the run that found the list unreadable', (j) => j.errors.length === 2);
      assert.equal(retrying.status, 'pending', retrying.lastError ?? '');
      assert.equal(retrying.attempts, before + 1, 'the failed list call uses up an attempt');
      assert.match(retrying.lastError!, /Twilio's Messages list could not be read \(Twilio is unavailable \(HTTP 500\).*asking it again at the next attempt, not resending/);
      assert.notEqual((await replyTo(t, inbound))!.status, 'flagged');
      assert.equal(fake.requests.filter((r) => r.outcome === 'fault:list-500').length, 1);
      if (send === 'cut off') {
        // The next attempt reads the list: Twilio has it, confirmed; nothing for a human.
        await runNow(t, waiting.id);
        await untilJob(t, inbound, 'job done: confirmed by the list', (j) => j.status === 'done');
        const reply = (await replyTo(t, inbound))!;
        assert.equal(reply.twilio_sid, fake.messages[0]!.sid);
        assert.equal(reply.error_message, null);
      } else {
        // The list still cannot be read on the last attempt: now a human checks, told why.
        fake.listFailures = 1_000;
        await lastAttemptNow(t, waiting.id);
        const failed = await untilJob(t, inbound, 'job failed: flagged', (j) => j.status === 'failed');
        assert.match(failed.lastError!, /flagged for a human/);
        const reply = (await replyTo(t, inbound))!;
        assert.equal(reply.status, 'flagged');
        assert.match(reply.error_message!, /Twilio's Messages list could not be read/);
      }
      assert.equal(fake.messages.length, 1, 'sent once, never resent');
      fake.listFailures = 0;
    }
  });

  test('no confirmation within REPLY_CONFIRM_TIMEOUT_SECONDS and Twilio\'s list cannot tell on the job\'s last attempt: flagged for a human, never resent', async () => {
    fake.fault({ kind: 'accept-then-drop' });
    fake.listFailures = 1_000;
    const inbound = await receive(m, t, 'Niemand bevestigt');
    const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
    // Instead of waiting out the timeout: the send started long ago.
    await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
    await lastAttemptNow(t, waiting.id);
    const failed = await untilJob(t, inbound, 'job failed: flagged', (j) => j.status === 'failed');
    assert.match(failed.lastError!, /flagged for a human/);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.status, 'flagged');
    assert.match(reply.error_message!, /Not resent, to avoid a duplicate/);
    assert.equal(fake.messages.length, 1);
    fake.listFailures = 0;

    // Twilio's late word still confirms it, and takes the alarm back: the flag's text is
    // gone from the reply, the job's error says it was confirmed, and the job ends done
    // without sending anything again.
    assert.equal(await fake.deliverStatus(fake.messages[0]!.sid, 'delivered'), 200);
    const confirmed = (await replyTo(t, inbound))!;
    assert.equal(confirmed.status, 'delivered');
    assert.equal(confirmed.error_message, null);
    const settled = await untilJob(t, inbound, 'job done after the late confirmation', (j) => j.status === 'done');
    assert.match(settled.lastError!, /^confirmed after all: reply .* was flagged for a human, then Twilio's status callback reported it delivered/);
    assert.equal((settled.result as { resumed?: boolean }).resumed, true);
    assert.equal(fake.messages.length, 1, 'nothing was sent again');
    const attention = await t.db.query(`select 1 from messages where id = $1 and status in ('pending', 'send_failed', 'unconfirmed', 'flagged')`, [confirmed.id]);
    assert.equal(attention.rowCount, 0, 'no longer in the needs-attention view');
  });

  // "Restarting its job asks Twilio again", as the flag says: the restart used to repeat the
  // flag without asking, and nothing in the dashboard or the API could clear it (found by a
  // WhatsApp probe).
  test('a flagged reply whose job is restarted: confirmed if Twilio\'s list has it, sent once if Twilio provably has not', async () => {
    for (const twilioHasIt of [true, false]) {
      fake.reset();
      fake.statusCallbacks = false;
      fake.fault({ kind: 'accept-then-drop' });
      fake.listFailures = 1_000;
      const inbound = await receive(m, t, `Gemarkeerd ${twilioHasIt}`, twilioHasIt ? '+31612340201' : '+31612340202');
      const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
      await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
      await lastAttemptNow(t, waiting.id);
      const failed = await untilJob(t, inbound, 'job failed: flagged', (j) => j.status === 'failed');
      assert.match(failed.lastError!, /Restarting its job asks Twilio's Messages list again/);
      assert.equal((await replyTo(t, inbound))!.status, 'flagged');
      // Twilio answers its list again; without the first send on record, it never left.
      fake.listFailures = 0;
      if (!twilioHasIt) fake.messages.splice(0);
      assert.ok(await jobRetry(t.db, failed.id));
      const done = await untilJob(t, inbound, 'job done after the restart', (j) => j.status === 'done');
      const reply = (await replyTo(t, inbound))!;
      assert.notEqual(reply.status, 'flagged');
      assert.ok(reply.twilio_sid, 'confirmed with a SID');
      assert.equal(fake.messages.length, 1, twilioHasIt ? 'confirmed, not resent' : 'sent once');
      assert.equal(reply.twilio_sid, fake.messages[0]!.sid);
    }
  });

  test('a flagged reply whose question a later reply answered: its restarted job resends nothing, and the reply says what Twilio knows', async () => {
    for (const twilioCanSay of [false, true]) {
      fake.reset();
      fake.statusCallbacks = false;
      fake.fault({ kind: 'accept-then-drop' });
      fake.listFailures = 1_000;
      const phone = twilioCanSay ? '+31612340205' : '+31612340204';
      const first = await receive(m, t, `Eerste vraag ${twilioCanSay}`, phone);
      const waiting = await untilJob(t, first, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
      await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [first]);
      await lastAttemptNow(t, waiting.id);
      const failed = await untilJob(t, first, 'job failed: flagged', (j) => j.status === 'failed');
      const second = await receive(m, t, `Tweede vraag ${twilioCanSay}`, phone);
      await untilJob(t, second, 'the next reply', (j) => j.status === 'done');
      assert.equal(fake.messages.length, 2);
      if (twilioCanSay) {
        // Twilio's list answers, without the first send: it never left.
        fake.listFailures = 0;
        fake.messages.splice(0, 1);
      }
      assert.ok(await jobRetry(t.db, failed.id));
      const done = await untilJob(t, first, 'the restarted job done', (j) => j.status === 'done');
      assert.match(JSON.stringify(done.result), /answered since/);
      assert.equal(fake.messages.length, twilioCanSay ? 1 : 2, 'nothing resent');
      const reply = (await replyTo(t, first))!;
      if (twilioCanSay) {
        // Reviewer's finding: it stayed flagged, a problem no one could clear.
        assert.equal(reply.status, 'failed');
        assert.match(reply.error_message!, /^not sent \(Twilio has no record of it\): reply \S+ has answered the contact since; nothing left to do$/);
      } else {
        assert.equal(reply.status, 'flagged');
        assert.match(reply.error_message!, /has answered the contact since; whether this one reached them is unknown/);
      }
      fake.listFailures = 0;
    }
  });

  // A job restarted after the next reply covered its question sent the old answer after the
  // newer one (found by a WhatsApp probe).
  test('a refused reply whose job is restarted after a later reply answered the contact: not sent, the job ends saying so', async () => {
    fake.fault({ kind: 'http', status: 400, code: 63024, message: 'Invalid message recipient' });
    const first = await receive(m, t, 'Hoeveel vakantiedagen heb ik?', '+31612340203');
    const failed = await untilJob(t, first, 'job failed', (j) => j.status === 'failed');
    const second = await receive(m, t, 'Hallo? En mag ik ze meenemen?', '+31612340203');
    await untilJob(t, second, 'the next reply', (j) => j.status === 'done');
    assert.equal(fake.messages.length, 1, 'the next reply went out');
    assert.ok(await jobRetry(t.db, failed.id));
    const done = await untilJob(t, first, 'the restarted job done', (j) => j.status === 'done');
    assert.match(JSON.stringify(done.result), /answered since/);
    assert.equal(fake.messages.length, 1, 'the old answer did not follow the newer one');
    assert.equal((await replyTo(t, first))!.status, 'failed');
  });

  test('no confirmation within the deadline, but Twilio\'s Messages list has it: confirmed with its SID, not flagged, not resent', async () => {
    fake.fault({ kind: 'accept-then-drop' });
    const inbound = await receive(m, t, 'Twilio weet het');
    const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
    await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
    await runNow(t, waiting.id);
    const done = await untilJob(t, inbound, 'job done: reconciled', (j) => j.status === 'done');
    assert.equal((done.result as { resumed?: boolean }).resumed, true);
    const reply = (await replyTo(t, inbound))!;
    assert.equal(reply.twilio_sid, fake.messages[0]!.sid, 'the SID from Twilio\'s list');
    assert.equal(reply.status, 'queued');
    assert.equal(fake.messages.length, 1, 'nothing sent again');
    assert.ok(fake.requests.some((r) => r.method === 'GET' && r.outcome === 'list'), 'the Messages list was asked');
  });

  // A wait for Twilio's confirmation gave its attempt back only while the job was younger
  // than AI_THROTTLE_WINDOW_SECONDS (the window meant for 429s), so a job that had queued
  // or retried that long spent attempts on waiting, and on its last one its reply was
  // flagged at once and the job failed, while the confirmation was still on its way.
  test('waiting for the confirmation uses up no attempt however old the job, even on the last one; the deadline still ends it', async () => {
    for (const confirmed of [true, false]) {
      fake.reset();
      fake.statusCallbacks = false;
      fake.fault({ kind: 'accept-then-drop' });
      fake.listFailures = 1_000;
      const inbound = await receive(m, t, `Laatste poging ${confirmed}`, confirmed ? '+31612340301' : '+31612340302');
      const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
      // Past the throttle window, its other attempts used up: the next claim is the last one.
      await t.db.query(`update ai_jobs set created_at = now() - interval '1 day', attempts = max_attempts - 1, next_run_at = now() where id = $1`, [waiting.id]);
      const still = await untilJob(t, inbound, 'the last attempt, still waiting', (j) => j.errors.length === 2);
      assert.equal(still.status, 'pending', still.lastError ?? '');
      assert.equal(still.attempts, still.maxAttempts - 1, 'the wait gave the attempt back');
      assert.equal((await replyTo(t, inbound))!.status, 'unconfirmed');
      if (confirmed) {
        // The callback comes after all: confirmed, the job done, nothing resent.
        assert.equal(await fake.deliverStatus(fake.messages[0]!.sid, 'sent'), 200);
        await untilJob(t, inbound, 'job done', (j) => j.status === 'done');
        assert.equal((await replyTo(t, inbound))!.twilio_sid, fake.messages[0]!.sid);
      } else {
        // No callback by the deadline, and Twilio's list cannot tell: flagged, the job failed.
        await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
        await runNow(t, waiting.id);
        const failed = await untilJob(t, inbound, 'job failed: flagged', (j) => j.status === 'failed');
        assert.match(failed.lastError!, /flagged for a human/);
        assert.equal((await replyTo(t, inbound))!.status, 'flagged');
      }
      assert.equal(fake.messages.length, 1, 'sent once');
      fake.listFailures = 0;
    }
  });

  // What bounds the waits now that they use up no attempt: the resend of a reply Twilio's list
  // showed it never got counts its failed first send. A Twilio that keeps dropping sends it
  // never stores (a proxy that swallows them) would otherwise have the job wait, resend and
  // wait again for good, unseen.
  test('a resend of a reply Twilio never got that is cut off in turn uses up an attempt; on the last one it is flagged', async () => {
    // Every send is cut off and never reaches Twilio's log.
    const forget = (sent: { sid: string }) => fake.messages.splice(fake.messages.findIndex((x) => x.sid === sent.sid), 1);
    fake.on('accepted', forget);
    try {
      fake.fault({ kind: 'accept-then-drop' });
      const inbound = await receive(m, t, 'Nooit aangekomen');
      const waiting = await untilJob(t, inbound, 'job waiting for confirmation', (j) => j.status === 'pending' && j.errors.length === 1);
      assert.equal(waiting.attempts, 0);
      const pastDeadline = () => t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1`, [inbound]);
      await pastDeadline();
      fake.fault({ kind: 'accept-then-drop' });
      await runNow(t, waiting.id);
      const resent = await untilJob(t, inbound, 'resent, waiting again', (j) => j.errors.length === 2);
      assert.equal(resent.status, 'pending');
      assert.equal(resent.attempts, 1, 'the failed first send counts');
      assert.match(resent.lastError!, /resent: Twilio had no record of the first send/);

      await t.db.query('update ai_jobs set attempts = max_attempts - 1 where id = $1', [waiting.id]);
      await pastDeadline();
      fake.fault({ kind: 'accept-then-drop' });
      await runNow(t, waiting.id);
      const failed = await untilJob(t, inbound, 'job failed: flagged', (j) => j.status === 'failed');
      const reply = (await replyTo(t, inbound))!;
      assert.equal(reply.status, 'flagged');
      assert.match(reply.error_message!, /sent again after Twilio's Messages list showed no record of the first send, that send was cut off too/);
      assert.match(failed.lastError!, /flagged for a human/);
      assert.equal(fake.requests.filter((r) => r.method === 'POST' && r.outcome.startsWith('accepted')).length, 3, 'three sends, each after Twilio proved it had none');
    } finally {
      fake.off('accepted', forget);
    }
  });

  test('human takeover (ai_paused): the job stores and sends nothing', async () => {
    const contact = (await t.db.query<{ id: string }>(`insert into contacts (whatsapp_number) values ('+31600000007') returning id`)).rows[0]!;
    await t.db.query(`insert into conversations (contact_id, ai_paused) values ($1, true)`, [contact.id]);
    const inbound = await receive(m, t, 'Mens aan de lijn?', '+31600000007');
    const done = await untilJob(t, inbound, 'job done', (j) => j.status === 'done');
    assert.deepEqual(done.result, { skipped: 'ai_paused' });
    assert.equal(await replyTo(t, inbound), undefined);
    assert.equal(fake.messages.length, 0);
  });

  test('a pause and an admin reply after a failed send: the retry sends nothing, the AI reply is withheld with the reason', async () => {
    // 429: Twilio's word that nothing went out (after a 5xx the retry would first wait).
    fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
    const inbound = await receive(m, t, 'Mijn laptop is kapot', '+31600000008');
    const waiting = await untilJob(t, inbound, 'job backing off', (j) => j.status === 'pending' && j.errors.length === 1);
    assert.equal((await replyTo(t, inbound))!.status, 'send_failed');
    const { conversationId } = waiting.payload as { conversationId: string };
    // The admin takes over through the API: pause, then her own answer (sent at once).
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    assert.equal((await m.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/pause`, headers: admin, payload: { paused: true } })).statusCode, 200);
    assert.equal((await m.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: admin, payload: { body: 'Breng hem maar langs bij IT.' } })).statusCode, 201);

    await runNow(t, waiting.id);
    const done = await untilJob(t, inbound, 'job done after the takeover', (j) => j.status === 'done');
    assert.deepEqual(done.result, { skipped: 'ai_paused', resumed: true });
    assert.deepEqual(fake.messages.map((x) => x.body), ['Breng hem maar langs bij IT.'], 'the contact gets the human answer only');
    const withheld = (await replyTo(t, inbound))!;
    assert.equal(withheld.status, 'failed');
    assert.match(withheld.error_message!, /not sent: the conversation was paused for a human/);
  });
});

describe('one reply answers a burst; the conversation’s jobs run one after the other', () => {
  let t: TestDatabase;
  let fake: FakeTwilio;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    // A slow Twilio: two jobs running at once would overlap for sure, and the other messages
    // arrive while the first job waits (with room for a loaded machine, and for the 100 ms
    // polling of a run behind the pooler).
    fake = await startFakeTwilio({ responseDelayMs: 1000 });
    m = await startMessagingApp(messagingEnv(t.url, fake.url, { WORKER_CONCURRENCY: '10' }), { listen: true });
  });
  after(async () => {
    await m.close();
    await fake.close();
    await t.close();
  });

  test('two messages within a second in one conversation: their jobs run one after the other', async () => {
    await m.startWorker();
    const first = await receive(m, t, 'Eerste vraag');
    const second = await receive(m, t, 'En nog iets');
    const other = await receive(m, t, 'Ander gesprek', '+31687654321');
    const a = await untilJob(t, first, 'first done', (j) => j.status === 'done');
    const b = await untilJob(t, second, 'second done', (j) => j.status === 'done');
    const c = await untilJob(t, other, 'other done', (j) => j.status === 'done');
    // What makes the checks below mean something: both arrived while the first job ran.
    assert.ok(b.createdAt.getTime() < a.finishedAt!.getTime() && c.createdAt.getTime() < a.finishedAt!.getTime(), 'the others arrived while the first job ran');
    assert.ok(b.attemptedAt!.getTime() >= a.finishedAt!.getTime(), `second started ${b.attemptedAt!.toISOString()} before the first finished ${a.finishedAt!.toISOString()}`);
    // Another conversation is not held back by this one.
    assert.ok(c.attemptedAt!.getTime() < a.finishedAt!.getTime(), 'the other conversation ran alongside');
    // Whatever the second job decided (answer, or covered by the first reply), no reply went out twice.
    assert.ok(fake.sendCount({ to: 'whatsapp:+31612345678' }) <= 2);
    assert.deepEqual(fake.stats().duplicates, []);
  });

  test('two messages stored before any job ran: one reply answers both, the second job is a no-op', async () => {
    await t.db.exec('delete from ai_jobs; delete from messages;');
    fake.reset();
    // No worker takes them until both are stored: stop the running one.
    await m.close();
    m = await startMessagingApp(messagingEnv(t.url, fake.url), { listen: true });
    const first = await receive(m, t, 'Hallo', '+31611111111');
    const second = await receive(m, t, 'Is er iemand?', '+31611111111');
    await m.startWorker();
    await untilJob(t, first, 'first done', (j) => j.status === 'done');
    const b = await untilJob(t, second, 'second done', (j) => j.status === 'done');
    assert.equal((b.result as { skipped: string }).skipped, 'already_answered');
    assert.equal(fake.sendCount({ to: 'whatsapp:+31611111111' }), 1);
    assert.ok(await replyTo(t, first));
    assert.equal(await replyTo(t, second), undefined);
  });
});

describe('log transport (no Twilio credentials)', () => {
  test('replies are stored as logged and printed, not sent', async () => {
    const t = await freshServerDatabase();
    const env = messagingEnv(t.url, 'http://127.0.0.1:9');
    for (const name of ['TWILIO_ACCOUNT_SID', 'TWILIO_WHATSAPP_FROM', 'TWILIO_API_BASE_URL']) delete env[name];
    // The auth token alone still signs webhooks; without the rest there is no sending.
    const { TWILIO_AUTH_TOKEN: _token, ...withoutToken } = env;
    const dataDir = (await import('node:fs')).mkdtempSync(`${(await import('node:os')).tmpdir()}/aiq-log-`);
    const m = await startMessagingApp({ ...withoutToken, DATA_DIR: dataDir }, { listen: true });
    try {
      assert.equal(m.runtime.transport.kind, 'log');
      await m.startWorker();
      // Signed with the per-install development secret, as `aiq simulate` does.
      const { webhookSecret } = await import('../src/messaging/twilio.ts');
      const params = inboundParams('Zonder Twilio');
      const form = signedForm(`${m.url}${WHATSAPP}`, params, webhookSecret({ DATA_DIR: dataDir, TWILIO_AUTH_TOKEN: undefined }));
      assert.equal((await fetch(`${m.url}${WHATSAPP}`, { method: 'POST', headers: form.headers, body: form.payload })).status, 200);
      const inbound = (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0]!.id;
      await untilJob(t, inbound, 'job done', (j) => j.status === 'done');
      const reply = (await replyTo(t, inbound))!;
      assert.equal(reply.status, 'logged');
      assert.equal(reply.twilio_sid, null);
    } finally {
      await m.close();
      await t.close();
      (await import('node:fs')).rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

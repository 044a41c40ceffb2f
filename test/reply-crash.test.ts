// The hardest moment for exactly-once: a real `aiq worker` process is killed with SIGKILL
// after Twilio (the fake) accepted its send but before the worker could record the SID.
// The retried job must not send a second message; Twilio's status callback confirms it.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { jobGet, type Job } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, messagingEnv, signedForm, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { ROOT, waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';

describe('worker killed mid-send', () => {
  let t: TestDatabase;
  let fake: FakeTwilio;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    fake = await startFakeTwilio();
    // The webhooks (and the status callback) are served here; jobs run in the child first.
    m = await startMessagingApp(messagingEnv(t.url, fake.url), { listen: true });
  });
  after(async () => {
    await m.close();
    await fake.close();
    await t.close();
  });

  test('killed after Twilio accepted the send, before the reply was confirmed: the retried job does not send a second message', async () => {
    // Twilio takes the message and then never answers: the worker is stuck right after the send.
    fake.fault({ kind: 'accept-then-hang' });
    const env = messagingEnv(t.url, fake.url, { PUBLIC_URL: m.url, LOG_LEVEL: 'info', JOB_LEASE_SECONDS: '30' });
    const child = spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    const exited = new Promise<string | number>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code ?? -1)));
    const params = inboundParams('Komt dit één keer aan?');
    try {
      await waitFor(() => output.includes('worker started'), `the worker process to start:\n${output}`, 60_000);

      const form = signedForm(`${m.url}${WHATSAPP}`, params);
      assert.equal((await fetch(`${m.url}${WHATSAPP}`, { method: 'POST', headers: form.headers, body: form.payload })).status, 200);
      await fake.waitForAccepted(1);
      child.kill('SIGKILL');
      assert.equal(await exited, 'SIGKILL');
    } finally {
      child.kill('SIGKILL');
    }

    const inbound = (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0];
    assert.ok(inbound, 'the inbound message was stored');
    const job = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [inbound.id])).rows[0]!;
    const reply = async () =>
      (await t.db.query<{ id: string; status: string; twilio_sid: string | null }>(`select id, status, twilio_sid from messages where reply_to_message_id = $1 and source = 'ai'`, [inbound.id])).rows[0]!;
    assert.equal((await jobGet(t.db, job.id))!.status, 'processing', 'the dead worker still holds it');
    const pending = await reply();
    assert.equal(pending.status, 'pending');
    assert.equal(pending.twilio_sid, null);

    // Its lease runs out (moved by SQL, not waited for); a live worker reclaims and retries.
    await t.db.query(`update ai_jobs set locked_until = now() - interval '1 second' where id = $1`, [job.id]);
    await m.startWorker();
    let retried: Job | undefined;
    await waitFor(async () => {
      retried = (await jobGet(t.db, job.id))!;
      return retried.status === 'pending' && retried.errors.length === 2;
    }, 'the retried job to wait for confirmation', 30_000);
    assert.match(retried!.errors[0]!.error, /lease expired/);
    assert.match(retried!.lastError!, /waiting for Twilio's status callback, not resending/);
    assert.equal((await reply()).status, 'unconfirmed');
    assert.equal(fake.requests.length, 1, 'the retry did not even try to send');

    // Twilio reports the message it accepted; the callback URL names our reply.
    assert.equal(await fake.deliverStatus(fake.messages[0]!.sid, 'delivered'), 200);
    assert.deepEqual(await reply(), { id: pending.id, status: 'delivered', twilio_sid: fake.messages[0]!.sid });
    // The callback also makes the waiting job due at once: no waiting out the timeout.
    await waitFor(async () => (await jobGet(t.db, job.id))!.status === 'done', 'the job to finish as a no-op', 10_000);
    assert.equal(((await jobGet(t.db, job.id))!.result as { resumed?: boolean }).resumed, true);
    assert.equal(fake.sendCount(), 1, 'exactly one message reached Twilio');
  });
});

// A reply in parts through the whole app (webhook, worker, fake OpenAI, fake Twilio over real
// HTTP) whose part is cut off on the job's last attempt and confirmed by Twilio's list. The
// outbox's own answers to Twilio's less common answers are in outbox-store.test.ts. Every reply goes out exactly once or visibly not at all.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { waitFor } from './helpers/processes.ts';
import { jobGet } from '../src/queue/index.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';

// A wait for a part's confirmation keeps the job's attempt, on the last one too, until the
// part's deadline (test/outbox.test.ts); these move the deadline instead of waiting it out.
describe('a reply in parts on its last attempt', () => {
  const LONG = Array.from({ length: 3 }, (_, p) => `Paragraph ${p + 1}. ${'Over de regeling voor thuiswerken geldt dit. '.repeat(30).trim()}`).join('\n\n');
  let t: TestDatabase;
  let llm: FakeOpenAi;
  let fake: FakeTwilio;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    llm = await startFakeOpenAi({ reply: () => LONG });
    fake = await startFakeTwilio();
    m = await startMessagingApp(
      messagingEnv(t.url, fake.url, { AI_PROVIDER: 'openai', OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: llm.openaiBaseUrl, EMBEDDING_DIMENSIONS: '64', RAG_TOP_K: '0' }),
      { listen: true },
    );
  });
  after(async () => {
    await m?.close();
    await llm?.close();
    await fake?.close();
    await t?.close();
  });

  /** The reply job's id, once the webhook has stored `params`; and the inbound message's id. */
  async function jobOf(params: Record<string, string>): Promise<{ inbound: string; job: string }> {
    assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', params, { signedUrl: `${m.url}/webhooks/twilio/whatsapp` })).statusCode, 200);
    const inbound = (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0]!.id;
    const job = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [inbound])).rows[0]!.id;
    return { inbound, job };
  }

  /** Waits for the job's `n`th wait, then lets it run at once with the waiting part's deadline passed. */
  async function pastDeadline(ids: { inbound: string; job: string }, n: number): Promise<void> {
    await waitFor(async () => {
      const job = (await jobGet(t.db, ids.job))!;
      return job.status === 'pending' && job.errors.length === n;
    }, `wait ${n}`);
    assert.equal((await jobGet(t.db, ids.job))!.attempts, 0, 'the wait gave the last attempt back');
    await t.db.query(`update messages set send_started_at = now() - interval '1 hour' where reply_to_message_id = $1 and status in ('pending', 'unconfirmed')`, [ids.inbound]);
    await t.db.query(`update ai_jobs set next_run_at = now() where id = $1`, [ids.job]);
  }

  async function partsOf(inbound: string) {
    return (await t.db.query<{ part: number; status: string; twilio_sid: string | null }>(`select part, status, twilio_sid from messages where reply_to_message_id = $1 order by part`, [inbound])).rows;
  }

  // Found by a Twilio probe: on a job's last attempt a part still waiting for its confirmation
  // is flagged, and replyFlag first asks Twilio's list; when the list had it, the job ended done
  // with the parts after it never sent (a truncated answer, nothing flagged). Now only a resend
  // of a part Twilio never got is flagged at once on the last attempt; that path, here.
  test('a resent part cut off on the last attempt that Twilio\'s list confirms is followed by the rest of the reply, once each', async () => {
    fake.reset();
    const ids = await jobOf(inboundParams('Vertel alles over thuiswerken.', '+31622230001'));
    // Its last attempt, as after four failed ones. Part 1's first send is cut off and never
    // reaches Twilio's log; its resend is cut off after Twilio took it.
    await t.db.query('update ai_jobs set max_attempts = 1 where id = $1', [ids.job]);
    fake.once('accepted', (lost) => fake.messages.splice(fake.messages.indexOf(lost), 1));
    fake.fault({ kind: 'accept-then-drop' }, { kind: 'accept-then-drop' });
    const worker = await m.startWorker();
    try {
      await pastDeadline(ids, 1);
      await waitFor(async () => ['done', 'failed'].includes((await jobGet(t.db, ids.job))!.status), 'the reply job to end');
    } finally {
      await worker.stop();
    }
    const parts = await partsOf(ids.inbound);
    assert.equal(parts.length, 3);
    assert.deepEqual(parts.map((p) => p.twilio_sid !== null), [true, true, true], `every part confirmed: ${JSON.stringify(parts)}`);
    assert.deepEqual(fake.messages.map((x) => x.body.slice(-5)), ['(1/3)', '(2/3)', '(3/3)'], 'each part in Twilio\'s log once, in order');
    assert.equal((await jobGet(t.db, ids.job))!.status, 'done');
  });

  // Then the next part's send is cut off too, and no callback comes: on the last attempt it
  // waited (the job then failed, its wait no longer refunded) instead of being settled by
  // Twilio's list: the reply stayed unconfirmed and unflagged, its last part never sent.
  test('a later part cut off in turn on the last attempt is settled by Twilio\'s list as the first was', async () => {
    fake.reset();
    fake.statusCallbacks = false;
    const ids = await jobOf(inboundParams('Vertel nog eens alles over thuiswerken.', '+31622230002'));
    // Its last attempt, past the window in which a throttle costs no attempt.
    await t.db.query(`update ai_jobs set max_attempts = 1, created_at = now() - interval '1 day' where id = $1`, [ids.job]);
    fake.fault({ kind: 'accept-then-drop' }, { kind: 'accept-then-drop' });
    const worker = await m.startWorker();
    try {
      await pastDeadline(ids, 1);
      await pastDeadline(ids, 2);
      await waitFor(async () => ['done', 'failed'].includes((await jobGet(t.db, ids.job))!.status), 'the reply job to end');
    } finally {
      await worker.stop();
    }
    const parts = await partsOf(ids.inbound);
    assert.deepEqual(parts.map((p) => p.twilio_sid !== null), [true, true, true], `every part confirmed: ${JSON.stringify(parts)}`);
    assert.deepEqual(fake.messages.map((x) => x.body.slice(-5)), ['(1/3)', '(2/3)', '(3/3)'], 'each part sent once, in order');
    assert.equal((await jobGet(t.db, ids.job))!.status, 'done');
  });
});

// The outbox against Twilio's less common answers, over real HTTP to the fake Twilio: a send
// cut off and then confirmed at once, a 201 that is not JSON, and what each means for a reply
// in parts. Every reply goes out exactly once or visibly not at all.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { inboundStoreAndEnqueue } from '../src/jobs/autoreply.ts';
import { messageGet, messageStatusUpdate } from '../src/messaging/conversations.ts';
import { replyPartsForInbound, replyResume, replySend, type OutboxDeps } from '../src/messaging/outbox.ts';
import { TwilioTransport } from '../src/messaging/transport.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { waitFor } from './helpers/processes.ts';
import { jobGet } from '../src/queue/index.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messageSid, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';

const TO = 'whatsapp:+31612345678';

for (const backend of BACKENDS) {
  describe(`outbox and Twilio's odd answers on ${backend.name}`, () => {
    let t: TestDatabase;
    let fake: FakeTwilio;
    let deps: OutboxDeps;
    before(async () => {
      t = await backend.fresh();
      fake = await startFakeTwilio();
      deps = {
        db: t.db,
        transport: new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: fake.url }),
        confirmTimeoutSeconds: 300,
        statusCallbackUrl: (id) => `https://aiq.example.com/webhooks/twilio/status?messageId=${id}`,
      };
    });
    after(async () => {
      await fake.close();
      await t.close();
    });

    async function inbound(body: string): Promise<{ messageId: string; conversationId: string }> {
      return (await inboundStoreAndEnqueue(t.db, { whatsappNumber: '+31612345678', profileName: 'Anna', body, mediaUrls: [], twilioSid: messageSid() }))!;
    }

    // Found by a Twilio probe: replySend returned the first part's outcome whenever it was not
    // 'sent', so a first part confirmed by Twilio's list right after a cut connection (no
    // PUBLIC_URL) ended the job done with parts 2… left `unsent` for good: a truncated answer.
    test('a reply in parts whose first send was cut off and then confirmed by Twilio\'s list still sends the rest, once each', async () => {
      fake.reset();
      const blind: OutboxDeps = { ...deps, statusCallbackUrl: () => undefined };
      const m = await inbound('lange vraag');
      fake.fault({ kind: 'accept-then-drop' });
      const outcome = await replySend(blind, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['deel (1/3)', 'deel (2/3)', 'deel (3/3)'], contextUntilSeq: null }, TO);
      const parts = await replyPartsForInbound(t.db, m.messageId);
      assert.deepEqual(
        parts.map((p) => [p.body, p.twilioSid !== null]),
        [
          ['deel (1/3)', true],
          ['deel (2/3)', true],
          ['deel (3/3)', true],
        ],
        'every part confirmed',
      );
      assert.deepEqual(fake.messages.map((x) => x.body), ['deel (1/3)', 'deel (2/3)', 'deel (3/3)'], 'each part sent once, in order');
      assert.equal(outcome.kind, 'sent');
      assert.equal(outcome.reply.id, parts[2]!.id, 'the outcome is the last part');
    });

    // Found by a Twilio probe: a reply refused with a 5xx that went out all the same, then
    // confirmed by its status callback, read "delivered · not sent: Twilio is unavailable".
    test('a status callback for a reply recorded "not sent" replaces that verdict, error code and text', async () => {
      fake.reset();
      const m = await inbound('toch bezorgd');
      fake.fault({ kind: 'accept-then-http', status: 500, code: 20500, message: 'Internal Server Error' });
      const refused = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['bezorgd na een 500'], contextUntilSeq: null }, TO);
      assert.equal(refused.kind, 'retry');
      assert.match(refused.reply.errorMessage!, /^not sent: /);
      assert.ok(await messageStatusUpdate(t.db, { messageId: refused.reply.id, twilioSid: fake.messages[0]!.sid, status: 'delivered' }));
      const delivered = (await messageGet(t.db, refused.reply.id))!;
      assert.equal(delivered.status, 'delivered');
      assert.equal(delivered.errorMessage, null);
      assert.equal(delivered.errorCode, null);
    });

    test('a 201 whose body is not JSON is uncertain: waited for, never resent', async () => {
      fake.reset();
      const m = await inbound('kapot antwoord');
      fake.fault({ kind: 'accept-then-body', body: '<html>OK</html>', contentType: 'text/html' });
      const outcome = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['ontvangen?'], contextUntilSeq: null }, TO);
      assert.equal(outcome.kind, 'waiting');
      assert.equal(outcome.reply.status, 'unconfirmed');
      assert.equal(fake.sendCount({ body: 'ontvangen?' }), 1);
    });

    // Twilio's 5xx is not proof that nothing went out: a gateway that timed out waiting for
    // Twilio's answer (502/504), or a 500 raised after the message was stored. Without a
    // status callback to confirm it first, the retry resent it: the contact got it twice.
    test('a 5xx after Twilio accepted the message: the retry does not send it a second time', async () => {
      fake.reset();
      const blind: OutboxDeps = { ...deps, statusCallbackUrl: () => undefined };
      const m = await inbound('gateway');
      fake.fault({ kind: 'accept-then-http', status: 504, html: true });
      const first = await replySend(blind, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['één keer graag'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      const again = await replyResume(blind, (await replyPartsForInbound(t.db, m.messageId))[0]!, TO);
      assert.equal(fake.sendCount({ body: 'één keer graag' }), 1, 'sent exactly once');
      assert.equal(again.kind, 'already-sent');
      assert.equal(again.reply.twilioSid, fake.messages[0]!.sid);
      assert.equal(again.reply.errorMessage, null, 'no "not sent" left on a reply that went');

      // Twilio's own 500 after storing it, and a 500 that truly took nothing: once each.
      const n = await inbound('interne fout');
      fake.fault({ kind: 'accept-then-http', status: 500, code: 20500, message: 'Internal Server Error' });
      assert.equal((await replySend(blind, { conversationId: n.conversationId, replyToMessageId: n.messageId, parts: ['toch aangekomen'], contextUntilSeq: null }, TO)).kind, 'retry');
      assert.equal((await replyResume(blind, (await replyPartsForInbound(t.db, n.messageId))[0]!, TO)).kind, 'already-sent');
      const o = await inbound('echt niet');
      fake.fault({ kind: 'http', status: 500, code: 20500, message: 'Internal Server Error' });
      assert.equal((await replySend(blind, { conversationId: o.conversationId, replyToMessageId: o.messageId, parts: ['nu wel'], contextUntilSeq: null }, TO)).kind, 'retry');
      assert.equal((await replyResume(blind, (await replyPartsForInbound(t.db, o.messageId))[0]!, TO)).kind, 'sent');
      assert.equal(fake.sendCount({ body: 'toch aangekomen' }), 1);
      assert.equal(fake.sendCount({ body: 'nu wel' }), 1);
    });
  });
}

// Found by a Twilio probe: on a job's last attempt a part still waiting for its confirmation
// is flagged, and replyFlag first asks Twilio's list; when the list had it, the job ended done
// with the parts after it never sent (a truncated answer, nothing flagged).
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

  test('a cut-off part that Twilio\'s list confirms is followed by the rest of the reply, once each', async () => {
    const params = inboundParams('Vertel alles over thuiswerken.', '+31622230001');
    assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', params, { signedUrl: `${m.url}/webhooks/twilio/whatsapp` })).statusCode, 200);
    const inbound = (await t.db.query<{ id: string }>('select id from messages where twilio_sid = $1', [params.MessageSid])).rows[0]!.id;
    const job = (await t.db.query<{ id: string }>(`select id from ai_jobs where payload->>'messageId' = $1`, [inbound])).rows[0]!;
    // Its last attempt, as after four failed ones; part 1's answer is cut off after Twilio took it.
    await t.db.query('update ai_jobs set max_attempts = 1 where id = $1', [job.id]);
    fake.fault({ kind: 'accept-then-drop' });
    const worker = await m.startWorker();
    await waitFor(async () => ['done', 'failed'].includes((await jobGet(t.db, job.id))!.status), 'the reply job to end');
    await worker.stop();
    const parts = (await t.db.query<{ part: number; status: string; twilio_sid: string | null }>(`select part, status, twilio_sid from messages where reply_to_message_id = $1 order by part`, [inbound])).rows;
    assert.equal(parts.length, 3);
    assert.deepEqual(parts.map((p) => p.twilio_sid !== null), [true, true, true], `every part confirmed: ${JSON.stringify(parts)}`);
    assert.equal(fake.messages.length, 3, 'each part sent once');
    assert.deepEqual(fake.messages.map((x) => x.body.slice(-5)), ['(1/3)', '(2/3)', '(3/3)']);
    assert.equal((await jobGet(t.db, job.id))!.status, 'done');
  });
});

// Found by a Twilio probe: a 429 with `Retry-After: 0` made the throttled job due at once,
// without spending an attempt, so the worker sent to Twilio again and again as fast as it
// could for the whole throttle window (15 minutes): a retry storm against a throttling API.
describe('a 429 with Retry-After: 0', () => {
  let t: TestDatabase;
  let fake: FakeTwilio;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    fake = await startFakeTwilio();
    m = await startMessagingApp(messagingEnv(t.url, fake.url));
    await m.startWorker();
  });
  after(async () => {
    await m?.close();
    await fake?.close();
    await t?.close();
  });

  test('is not retried at once, again and again', async () => {
    fake.fault(...Array.from({ length: 50 }, () => ({ kind: 'http' as const, status: 429, code: 20429, message: 'Too Many Requests', retryAfterSeconds: 0 })));
    const response = await injectSigned(m.app, '/webhooks/twilio/whatsapp', inboundParams('Te druk?'));
    assert.equal(response.statusCode, 200);
    await fake.waitForRequests(1);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const throttled = fake.requests.filter((r) => r.outcome === 'fault:http-429').length;
    assert.ok(throttled <= 2, `${throttled} sends to a throttling Twilio within 1.5 s`);
  });
});

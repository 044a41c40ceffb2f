// A contact who swipes to reply quotes an earlier message; Twilio posts its SID as
// OriginalRepliedMessageSid. Through the real pipeline (webhook → worker → fake OpenAI):
// the model reads which message "Ja, klopt" answers, whose it was and what it said; a SID
// of another conversation shows nothing of it; the dashboard and the export show the quote.
// The store functions note the quote in the same statement, alone and in a batch, on both
// databases, and their versions without it still store for a rolling upgrade.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { inboundStoreAndEnqueue, inboundStoreManyAndEnqueue } from '../src/jobs/autoreply.ts';
import type { InboundMessageInput } from '../src/messaging/conversations.ts';
import { personExport } from '../src/privacy/export.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, fakeOpenAiEnv } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messageSid, messagingEnv, receiveAnswered, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';

const ANNA = '+31612340001';
const BRAM = '+31612340002';

describe('quoted replies through the pipeline', () => {
  let t: TestDatabase;
  let twilio: FakeTwilio;
  let openai: FakeOpenAi;
  let m: MessagingApp;
  before(async () => {
    [t, twilio] = await Promise.all([freshServerDatabase(), startFakeTwilio()]);
    openai = await startFakeOpenAi({ reply: (_body, n) => `Antwoord ${n}: wil je de aanvraag op 12 mei indienen?` });
    m = await startMessagingApp(messagingEnv(t.url, twilio.url, fakeOpenAiEnv(openai)));
    await m.startWorker();
  });
  after(async () => {
    await m.close();
    await Promise.all([t.close(), twilio.close(), openai.close()]);
  });

  /** The last chat request's last message: the turn the model answers. */
  const lastTurn = () => String(openai.chatRequests().at(-1)!.body.messages.at(-1).content);
  const aiReply = async (answered: Record<string, unknown>) =>
    (await t.db.query<{ twilio_sid: string; body: string }>('select twilio_sid, body from messages where id = $1', [answered.replyId])).rows[0]!;

  test("the model reads which message a quote answers: the assistant's, or the contact's own", async () => {
    const first = await receiveAnswered(m, inboundParams('Kan ik vrij nemen in mei?', ANNA));
    const reply = await aiReply(first);
    assert.ok(reply.twilio_sid, 'the reply has its Twilio SID');
    await receiveAnswered(m, inboundParams('En hoeveel dagen heb ik nog?', ANNA));

    const yes = inboundParams('Ja, klopt', ANNA, { OriginalRepliedMessageSid: reply.twilio_sid, OriginalRepliedMessageSender: 'whatsapp:+14155238886' });
    assert.ok((await receiveAnswered(m, yes)).replyId);
    assert.equal(lastTurn(), `[replying to the assistant's message: "${reply.body}"]\nJa, klopt`);
    const stored = await t.db.query<{ replied_to_sid: string }>('select replied_to_sid from messages where twilio_sid = $1', [yes.MessageSid]);
    assert.equal(stored.rows[0]!.replied_to_sid, reply.twilio_sid);

    const own = inboundParams('Die bedoel ik', ANNA, { OriginalRepliedMessageSid: yes.MessageSid! });
    assert.ok((await receiveAnswered(m, own)).replyId);
    assert.equal(lastTurn(), '[replying to their own message: "Ja, klopt"]\nDie bedoel ik');
  });

  test("a SID of another contact's conversation shows nothing of it; a malformed one is dropped, not the message", async () => {
    const secret = inboundParams('Mijn pincode is 4321', BRAM);
    await receiveAnswered(m, secret);
    const prying = inboundParams('Wat stond hier?', ANNA, { OriginalRepliedMessageSid: secret.MessageSid! });
    assert.ok((await receiveAnswered(m, prying)).replyId);
    assert.equal(lastTurn(), '[replying to an earlier message that is no longer available]\nWat stond hier?');
    assert.doesNotMatch(JSON.stringify(openai.chatRequests().at(-1)!.body), /4321/);

    const odd = inboundParams('Gewoon een vraag', ANNA, { OriginalRepliedMessageSid: 'not-a-sid' });
    assert.ok((await receiveAnswered(m, odd)).replyId, 'stored and answered');
    assert.equal(lastTurn(), 'Gewoon een vraag');
  });

  test('the dashboard shows the quote above the words; the export names the quoted message', async () => {
    const { rows } = await t.db.query<{ id: string }>(
      `select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = $1`,
      [ANNA],
    );
    const page = await m.app.inject({ url: `/admin/conversations/${rows[0]!.id}` });
    assert.equal(page.statusCode, 200);
    assert.match(page.body, /<span class="quote meta">↩ replying to the AI: &quot;Antwoord 1: wil je de aanvraag op 12 mei indienen\?&quot;<\/span><span class="body" dir="auto">Ja, klopt<\/span>/);
    assert.match(page.body, /↩ replying to their own message: &quot;Ja, klopt&quot;<\/span><span class="body" dir="auto">Die bedoel ik/);
    assert.match(page.body, /↩ replying to a message not in this conversation's history<\/span><span class="body" dir="auto">Wat stond hier\?/);

    const exported = await personExport(t.db, ANNA);
    const messages = exported!.conversations.flatMap((c) => c.messages);
    const yes = messages.find((x) => x.body === 'Ja, klopt')!;
    const quoted = messages.find((x) => x.id === (yes as { quotesMessageId?: string }).quotesMessageId);
    assert.equal(quoted?.source, 'ai', 'the quoted reply, by its id');
    const prying = messages.find((x) => x.body === 'Wat stond hier?')!;
    assert.equal('quotesMessageId' in prying, false, "another conversation's message is not named");
  });
});

for (const backend of BACKENDS) {
  describe(`storing a quote (${backend.name})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await backend.fresh();
    });
    after(() => t.close());

    const input = (from: string, repliedToSid?: string): InboundMessageInput => ({
      whatsappNumber: from,
      body: 'hallo',
      mediaUrls: [],
      twilioSid: messageSid(),
      ...(repliedToSid ? { repliedToSid } : {}),
    });
    const quoteOf = async (sid: string) => (await t.db.query<{ replied_to_sid: string | null }>('select replied_to_sid from messages where twilio_sid = $1', [sid])).rows[0]?.replied_to_sid;

    test('alone and in a batch, each message with its own quote; a redelivery changes nothing', async () => {
      const quotedA = messageSid();
      const quotedC = messageSid();
      const alone = input('+31600000001', quotedA);
      assert.ok(await inboundStoreAndEnqueue(t.db, alone));
      assert.equal(await quoteOf(alone.twilioSid), quotedA);

      const batch = [input('+31600000002', quotedC), input('+31600000003'), input('+31600000004', quotedA)];
      const stored = await inboundStoreManyAndEnqueue(t.db, batch);
      assert.equal(stored.filter(Boolean).length, 3);
      assert.deepEqual(await Promise.all(batch.map((b) => quoteOf(b.twilioSid))), [quotedC, null, quotedA]);

      // A batch where nothing quotes, and a redelivery within a batch.
      const plain = [input('+31600000005'), input('+31600000006')];
      await inboundStoreManyAndEnqueue(t.db, plain);
      assert.deepEqual(await Promise.all(plain.map((b) => quoteOf(b.twilioSid))), [null, null]);
      const again = await inboundStoreManyAndEnqueue(t.db, [{ ...batch[0]!, repliedToSid: messageSid() }, input('+31600000007', quotedC)]);
      assert.equal(again[0], null, 'the redelivery stores nothing');
      assert.equal(await quoteOf(batch[0]!.twilioSid), quotedC, 'and keeps the quote it came with');
    });

    test('the versions without the quote still store, for aiq serve of the previous version during a rolling upgrade', async () => {
      const one = messageSid();
      await t.db.query(`select * from aiq_inbound_store('+31600000011', null, 'oud', '{}'::text[], $1, 'autoreply', 3, null, null, '{}'::text[])`, [one]);
      const many = [messageSid(), messageSid()];
      await t.db.query(
        `select * from aiq_inbound_store_batch(array['+31600000012', '+31600000013'], array[null, null]::text[], array['a', 'b'], $1::text[],
           array[null, null]::text[], array[null, null]::text[], '{}'::int[], '{}'::text[], '{}'::text[], 'autoreply', 3)`,
        [many],
      );
      for (const sid of [one, ...many]) assert.equal(await quoteOf(sid), null);
      const jobs = await t.db.query<{ n: number }>(
        `select count(*)::int as n from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = any($1::text[])`,
        [[one, ...many]],
      );
      assert.equal(jobs.rows[0]!.n, 3, 'each with its job');
    });
  });
}

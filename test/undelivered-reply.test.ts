// A reply Twilio took and then reported `undelivered` (final: it never reached the phone; an
// invalid recipient's 63024, a phone off past the message's validity) answers nothing, as a
// `failed` one: the contact's question stays open. Over real HTTP: the webhook, the fake
// Twilio's status callback to the listening app, a real worker and the fake OpenAI, whose
// requests show what the next reply read.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { conversationList } from '../src/http/admin/conversation-queries.ts';
import { messageAnsweredBy } from '../src/messaging/conversations.ts';
import { jobGet } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const PHONE = '+31612360001';

let t: TestDatabase;
let llm: FakeOpenAi;
let twilioApi: FakeTwilio;
let m: MessagingApp;

before(async () => {
  t = await freshServerDatabase();
  llm = await startFakeOpenAi({ reply: () => 'Je hebt nog 12 vakantiedagen.' });
  // No automatic callbacks: the test posts the one Twilio sends for the first reply.
  twilioApi = await startFakeTwilio({ statusCallbacks: false });
  m = await startMessagingApp(
    messagingEnv(t.url, twilioApi.url, { AI_PROVIDER: 'openai', OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: llm.openaiBaseUrl, EMBEDDING_DIMENSIONS: '128' }),
    { listen: true },
  );
  await m.startWorker();
});
after(async () => {
  await m?.close();
  await llm?.close();
  await twilioApi?.close();
  await t?.close();
});

/** The contact writes; waits for the message's autoreply job to end. Returns its conversation and position. */
async function contactWrites(body: string): Promise<{ conversationId: string; seq: number }> {
  const params = inboundParams(body, PHONE);
  assert.equal((await injectSigned(m.app, WHATSAPP, params, { signedUrl: `${m.url}${WHATSAPP}` })).statusCode, 200);
  const row = await t.db.query<{ job_id: string; conversation_id: string; seq: string }>(
    `select j.id as job_id, i.conversation_id, i.seq from ai_jobs j join messages i on i.id = (j.payload->>'messageId')::uuid where i.twilio_sid = $1 and j.type = 'autoreply'`,
    [params.MessageSid],
  );
  const { job_id: jobId, conversation_id: conversationId, seq } = row.rows[0]!;
  await waitFor(async () => (await jobGet(t.db, jobId))?.status === 'done', `the reply to "${body}"`);
  return { conversationId, seq: Number(seq) };
}

const awaitingReply = async (conversationId: string) => (await conversationList(t.db, { limit: 100 })).conversations.find((c) => c.id === conversationId)?.awaitingReply;

test('an AI reply Twilio reports undelivered leaves the question awaiting a reply, and the next reply answers it', async () => {
  const question = await contactWrites('Hoeveel vakantiedagen heb ik nog?');
  const { conversationId } = question;
  const first = await t.db.query<{ id: string; twilio_sid: string }>(`select id, twilio_sid from messages where conversation_id = $1 and source = 'ai'`, [conversationId]);
  assert.equal(first.rows.length, 1);
  assert.equal(await awaitingReply(conversationId), false, 'answered, on its way');

  // WhatsApp could not deliver it (the phone was off past the message's validity period).
  assert.equal(await twilioApi.deliverStatus(first.rows[0]!.twilio_sid, 'sent'), 200);
  assert.equal(await twilioApi.deliverStatus(first.rows[0]!.twilio_sid, 'undelivered', 63024), 200);
  const stored = await t.db.query<{ status: string }>('select status from messages where id = $1', [first.rows[0]!.id]);
  assert.equal(stored.rows[0]!.status, 'undelivered');
  assert.equal(await messageAnsweredBy(t.db, conversationId, question.seq), null, 'nothing answered the question');
  assert.equal(await awaitingReply(conversationId), true, 'the conversation list shows it awaiting a reply');

  // The contact writes again: the reply reads the open question with the new message, and
  // is not shown the undelivered answer as said.
  const before = llm.chatRequests().length;
  const next = await contactWrites('Hallo? Ik hoor niets.');
  const chats = llm.chatRequests().slice(before);
  assert.equal(chats.length, 1);
  const turns = (chats[0]!.body.messages as { role: string; content: string }[]).slice(2);
  assert.deepEqual(turns, [
    { role: 'user', content: 'Hoeveel vakantiedagen heb ik nog?' },
    { role: 'user', content: 'Hallo? Ik hoor niets.' },
  ]);
  const second = await t.db.query<{ id: string; context_until_seq: string }>(`select id, context_until_seq from messages where conversation_id = $1 and source = 'ai' and id <> $2`, [conversationId, first.rows[0]!.id]);
  assert.equal(second.rows.length, 1);
  assert.equal(Number(second.rows[0]!.context_until_seq), next.seq);
  assert.equal(await messageAnsweredBy(t.db, conversationId, question.seq), second.rows[0]!.id, 'the new reply answers the open question');
  assert.equal(await awaitingReply(conversationId), false);
  assert.equal(twilioApi.messages.filter((x) => x.to === `whatsapp:${PHONE}`).length, 2, 'one send per reply');
});

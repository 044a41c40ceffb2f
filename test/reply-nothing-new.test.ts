// A WhatsApp message with no text and no media (a location pin, a contact card, a reaction:
// Twilio posts them with an empty Body) asks nothing: it gets no reply, and above all not a
// second answer to the question before it.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jobGet } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const ANNA = '+31612349999';
let t: TestDatabase;
let twilioApi: FakeTwilio;
let m: MessagingApp;

before(async () => {
  t = await freshServerDatabase();
  twilioApi = await startFakeTwilio();
  m = await startMessagingApp(messagingEnv(t.url, twilioApi.url));
  await m.startWorker();
});
after(async () => {
  await m?.close();
  await twilioApi?.close();
  await t?.close();
});

/** Posts an inbound message as Twilio does and waits for its autoreply job; returns the job's result. */
async function receive(params: Record<string, string>): Promise<Record<string, unknown>> {
  const response = await injectSigned(m.app, '/webhooks/twilio/whatsapp', params);
  assert.equal(response.statusCode, 200, response.body);
  const job = await t.db.query<{ id: string }>(
    `select j.id from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1 and j.type = 'autoreply'`,
    [params.MessageSid],
  );
  let result: Record<string, unknown> = {};
  await waitFor(async () => {
    const current = await jobGet(t.db, job.rows[0]!.id);
    result = (current?.result ?? {}) as Record<string, unknown>;
    return current?.status === 'done';
  }, 'the autoreply job');
  return result;
}

test('a location pin after a question gets no reply: the question is not answered twice', async () => {
  const question = await receive(inboundParams('Waar is het kantoor in Utrecht?', ANNA));
  assert.ok(question.replyId, 'the question is answered');
  const pin = await receive(inboundParams('', ANNA, { MessageType: 'location', Latitude: '52.0907', Longitude: '5.1214', Address: 'Utrecht' }));
  assert.deepEqual(pin, { skipped: 'nothing_to_answer', reason: 'no text and no media (a location, a contact card or a reaction?)' });
  assert.equal(twilioApi.messages.length, 1, 'one reply in all');
  // A question after it is answered as usual.
  assert.ok((await receive(inboundParams('En hoe laat gaat het open?', ANNA))).replyId);
  assert.equal(twilioApi.messages.length, 2);
});

// People write in bursts ("Hoi" / "ik heb een vraag" / "hoeveel vakantiedagen heb ik?"). A
// reply that starts at the first message answers only that one, and more replies follow
// (found by a WhatsApp probe). With REPLY_WAIT_SECONDS the reply waits until the contact
// has been quiet that long, and one reply answers the whole burst.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { jobStats } from '../src/queue/index.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

let t: TestDatabase;
let twilioApi: FakeTwilio;
let m: MessagingApp;

before(async () => {
  [t, twilioApi] = await Promise.all([freshServerDatabase(), startFakeTwilio()]);
  m = await startMessagingApp(messagingEnv(t.url, twilioApi.url, { REPLY_WAIT_SECONDS: '5' }));
  await m.startWorker();
});
after(async () => {
  await m.close();
  await Promise.all([t.close(), twilioApi.close()]);
});

const settled = () => waitFor(async () => {
  const { totals } = await jobStats(t.db);
  return totals.pending + totals.processing === 0;
}, 'the queue to settle');

test('a burst of three messages gets one reply, once the contact has been quiet for REPLY_WAIT_SECONDS', async () => {
  const from = '+31612340101';
  const burst = ['Hoi', 'ik heb een vraag', 'hoeveel vakantiedagen heb ik nog?'].map((body) => inboundParams(body, from));
  for (const [i, params] of burst.entries()) {
    if (i > 0) await new Promise((resolve) => setTimeout(resolve, 400));
    assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', params)).statusCode, 200);
  }
  await settled();
  assert.equal(twilioApi.messages.filter((x) => x.to === `whatsapp:${from}`).length, 1, 'one reply');
  const reply = await t.db.query<{ answers: string; waited_ms: number }>(
    `select q.body as answers, extract(epoch from r.created_at - last.created_at) * 1000 as waited_ms
     from messages r
     join messages q on q.conversation_id = r.conversation_id and q.source = 'inbound' and q.seq = r.context_until_seq
     cross join lateral (select created_at from messages where conversation_id = r.conversation_id and source = 'inbound' order by seq desc limit 1) last
     where r.source = 'ai' and q.body = any($1::text[])`,
    [burst.map((p) => p.Body)],
  );
  assert.equal(reply.rows.length, 1);
  assert.equal(reply.rows[0]!.answers, 'hoeveel vakantiedagen heb ik nog?', 'the reply read the whole burst');
  assert.ok(Number(reply.rows[0]!.waited_ms) >= 5000, `written after five seconds of quiet, not before: ${reply.rows[0]!.waited_ms} ms`);
  // The later jobs find their messages answered and end at once: they do not wait as well
  // (they did, holding their worker slots and delaying the conversation's next messages).
  const jobs = await t.db.query<{ result: { skipped?: string }; ran_ms: number }>(
    `select j.result, extract(epoch from j.finished_at - j.attempted_at) * 1000 as ran_ms
     from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = any($1::text[]) order by m.seq`,
    [burst.map((p) => p.MessageSid)],
  );
  assert.deepEqual(jobs.rows.slice(1).map((j) => j.result.skipped), ['already_answered', 'already_answered']);
  for (const job of jobs.rows.slice(1)) assert.ok(Number(job.ran_ms) < 5000, `an answered message's job did not wait: ${job.ran_ms} ms`);
});

test('a STOP in the middle of a burst ends the wait: confirmed at once, the question not answered', async () => {
  const from = '+31612340103';
  const question = inboundParams('Wanneer is de personeelsdag?', from);
  const stop = inboundParams('STOP', from);
  assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', question)).statusCode, 200);
  await new Promise((resolve) => setTimeout(resolve, 400));
  assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', stop)).statusCode, 200);
  await settled();
  const sent = twilioApi.messages.filter((x) => x.to === `whatsapp:${from}`);
  assert.equal(sent.length, 1, `only the confirmation: ${JSON.stringify(sent.map((x) => x.body))}`);
  const confirmation = await t.db.query<{ waited_ms: number }>(
    `select extract(epoch from r.created_at - q.created_at) * 1000 as waited_ms from messages r join messages q on q.id = r.reply_to_message_id where q.twilio_sid = $1`,
    [stop.MessageSid],
  );
  // The question's job looks every half second: well before its five seconds of quiet.
  assert.ok(Number(confirmation.rows[0]!.waited_ms) < 4000, `the STOP ended the question's wait: ${confirmation.rows[0]!.waited_ms} ms`);
  const job = await t.db.query<{ result: { skipped?: string } }>(`select j.result from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`, [question.MessageSid]);
  assert.equal(job.rows[0]!.result.skipped, 'opted_out');
});

test('a STOP is confirmed at once, without the wait', async () => {
  const from = '+31612340102';
  const stop = inboundParams('STOP', from);
  assert.equal((await injectSigned(m.app, '/webhooks/twilio/whatsapp', stop)).statusCode, 200);
  await waitFor(() => twilioApi.messages.some((x) => x.to === `whatsapp:${from}`), 'the confirmation');
  const confirmation = await t.db.query<{ waited_ms: number }>(
    `select extract(epoch from r.created_at - q.created_at) * 1000 as waited_ms from messages r join messages q on q.id = r.reply_to_message_id where q.twilio_sid = $1`,
    [stop.MessageSid],
  );
  assert.ok(Number(confirmation.rows[0]!.waited_ms) < 5000, `not held back by the wait: ${confirmation.rows[0]!.waited_ms} ms`);
});

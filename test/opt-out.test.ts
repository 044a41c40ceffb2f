// Opt-out over real HTTP and a real worker: STOP (or STOPPEN, UNSUBSCRIBE, ARRÊTER …, in any
// case, with punctuation) gets one confirmation and no AI reply, nor does the next message;
// an admin's message and a suggestion are refused with the reason; START resumes replies.
// Admins can record either change, it is counted in /metrics, and the dashboard shows it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadConfig } from '../src/config.ts';
import { inboundStoreAndEnqueue, inboundStoreManyAndEnqueue } from '../src/jobs/autoreply.ts';
import { personErase } from '../src/privacy/erasure.ts';
import { retentionPurge } from '../src/jobs/retention.ts';
import { BACKENDS } from './helpers/db.ts';
import { optChangeOf, optKeywordsOf } from '../src/messaging/opt-out.ts';
import { inboundParams, injectSigned, messageSid, messagingSuite, receiveAnswered } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const ANNA = '+31612345678';
// State-changing API calls carry a bearer token, any value without ADMIN_TOKEN (cross-site.ts).
const API = { authorization: 'Bearer local' };

const suite = messagingSuite();

/** Sends an inbound message and waits until its autoreply job is finished; returns the job's result. */
const receive = (body: string, from = ANNA) => receiveAnswered(suite.m, inboundParams(body, from));

function sentTo(phone: string): string[] {
  return suite.twilioApi.messages.filter((msg) => msg.to === `whatsapp:${phone}`).map((msg) => msg.body);
}

async function conversationOf(phone: string): Promise<string> {
  const row = await suite.t.db.query<{ id: string }>('select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = $1', [phone]);
  return row.rows[0]!.id;
}

test('keywords: the whole message, any case, punctuation around it; never a sentence that contains one', () => {
  const keywords = optKeywordsOf({ OPT_OUT_KEYWORDS: 'STOP,STOPPEN,AFMELDEN,UNSUBSCRIBE', OPT_IN_KEYWORDS: 'START' });
  for (const body of ['STOP', 'stop', ' Stop. ', 'stoppen!', 'Afmelden', 'unsubscribe 🙏']) assert.equal(optChangeOf(body, keywords), 'out', body);
  for (const body of ['START', 'start!']) assert.equal(optChangeOf(body, keywords), 'in', body);
  for (const body of ['stop met het beleid?', 'kan ik stoppen met werken', 'starten', '', '   ']) assert.equal(optChangeOf(body, keywords), null, body);
  // Said twice, or politely: still only the keyword (these got AI replies, found by a WhatsApp probe).
  for (const body of ['STOP STOP', 'Stop please', 'please stop!', 'stop aub', 'stop a.u.b.', 'Afmelden graag, bedankt', 'Afmelden, dank je wel!', 'STOP please STOP', 'unsubscribe now 🙏', "stop s'il vous plaît", 'stop muchas gracias', 'stop thank you very much']) {
    assert.equal(optChangeOf(body, keywords), 'out', body);
  }
  assert.equal(optChangeOf('start please', keywords), 'in');
  for (const body of ['please', 'Thank you', 'stop the music please', 'stop start', 'please stop sending me the schedule', 'you stop', 'nu stop met dat', 'ya']) assert.equal(optChangeOf(body, keywords), null, body);
  // Keywords of several words, or holding a courtesy themselves, count as written and repeated.
  const phrases = optKeywordsOf({ OPT_OUT_KEYWORDS: 'STOP NOW,OPT OUT', OPT_IN_KEYWORDS: 'THANK YOU' });
  for (const body of ['stop now', 'stop please now', 'opt out opt out', 'Opt out, please']) assert.equal(optChangeOf(body, phrases), 'out', body);
  assert.equal(optChangeOf('thank you', phrases), 'in');
  assert.equal(optChangeOf('opt out of what?', phrases), null);
  // Keywords in scripts with combining marks: a vowel sign belongs to its word; Arabic
  // vowel points, mostly left out in writing, do not make another word.
  const world = optKeywordsOf({ OPT_OUT_KEYWORDS: 'रोको,توقف', OPT_IN_KEYWORDS: 'शुरू' });
  for (const body of ['रोको', 'रोको।', 'توقف', 'توقّف', 'تَوَقَّفْ']) assert.equal(optChangeOf(body, world), 'out', body);
  assert.equal(optChangeOf('शुरू', world), 'in');
  for (const body of ['रुको', 'रोक', 'र क', 'شكرا']) assert.equal(optChangeOf(body, world), null, body);
  // An emoji as phones send it: many carry a variation selector (U+FE0F, a combining mark),
  // which stayed behind as a word of its own when the emoji went.
  for (const body of ['STOP❗️', 'STOP ‼️', '⛔️ STOP', 'stop ❤️', 'Stop ✋️ bedankt', 'stop\uFE0E', '☝️ stop ☝️']) assert.equal(optChangeOf(body, keywords), 'out', body);
  assert.equal(optChangeOf('START ✔️', keywords), 'in');
  assert.equal(optChangeOf('stop ❤️ met roken', keywords), null);
});

test('the default keywords: the stop words Twilio honours, and Dutch, German, French and Spanish ones, with or without accents; still never a sentence', () => {
  // Found in review: STOPP, ARRÊTER, "STOP ALL", CANCEL, END, QUIT (Twilio's own stop words)
  // got an AI answer, as the default knew only STOP, STOPPEN, AFMELDEN and UNSUBSCRIBE.
  const keywords = optKeywordsOf(loadConfig({}));
  for (const body of ['STOPALL', 'Stop all', 'cancel', 'End.', 'QUIT', 'opt-out', 'Revoke', 'uitschrijven aub', 'Stopp!', 'abmelden bitte', 'Arrêter', 'arreter', 'ARRÊT', 'désabonner svp', 'desinscrire', 'parar por favor']) {
    assert.equal(optChangeOf(body, keywords), 'out', body);
  }
  for (const body of ['START', 'unstop']) assert.equal(optChangeOf(body, keywords), 'in', body);
  for (const body of ['Can I stop my pension contributions?', 'when does my contract end?', 'I want to cancel my leave on Friday', 'quit smoking programme', 'yes', 'all', 'Baja']) {
    assert.equal(optChangeOf(body, keywords), null, body);
  }
});

test('STOP: one confirmation, no AI reply to it or to the next message; admin sends refused; START resumes', async () => {
  assert.equal((await receive('Hoeveel vakantiedagen heb ik?'))['status'], 'queued', 'a normal question is answered');
  assert.equal(sentTo(ANNA).length, 1);

  const stop = await receive('Stop.');
  assert.equal(stop['optChange'], 'out');
  const afterStop = sentTo(ANNA);
  assert.equal(afterStop.length, 2);
  assert.match(afterStop[1]!, /Je bent afgemeld .* Stuur START/s, 'the one confirmation');
  const contact = await suite.t.db.query<{ opted_out_at: Date | null; opted_out_by: string | null }>('select opted_out_at, opted_out_by from contacts where whatsapp_number = $1', [ANNA]);
  assert.ok(contact.rows[0]!.opted_out_at);
  assert.equal(contact.rows[0]!.opted_out_by, 'contact');

  assert.deepEqual(await receive('Hallo? Nog een vraag'), { skipped: 'opted_out' });
  assert.equal(sentTo(ANNA).length, 2, 'nothing sent to the next message');

  const conversationId = await conversationOf(ANNA);
  const refused = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/messages`, payload: { body: 'Even checken!' } });
  assert.equal(refused.statusCode, 409);
  assert.match(JSON.parse(refused.body).error, /not sent: the contact opted out \(they sent a stop keyword, .*\): nothing is sent to them until they send START/);
  // A suggestion may be drafted for the admin, never sent.
  const suggested = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/suggest` });
  assert.equal(suggested.statusCode, 202, suggested.body);
  let suggestionId = '';
  await waitFor(async () => {
    const row = await suite.t.db.query<{ id: string }>(`select id from suggestions where conversation_id = $1 and status = 'pending'`, [conversationId]);
    suggestionId = row.rows[0]?.id ?? '';
    return suggestionId !== '';
  }, 'the suggestion');
  const sendSuggestion = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/suggestions/${suggestionId}/send`, payload: {} });
  assert.equal(sendSuggestion.statusCode, 409);
  assert.match(JSON.parse(sendSuggestion.body).error, /opted out/);
  assert.equal(sentTo(ANNA).length, 2);
  const stillPending = await suite.t.db.query<{ status: string }>('select status from suggestions where id = $1', [suggestionId]);
  assert.equal(stillPending.rows[0]!.status, 'pending', 'the refusal changed nothing');

  const page = await suite.m.app.inject({ method: 'GET', url: `/admin/conversations/${conversationId}` });
  assert.match(page.body, /id="opt-out-state" data-opted-out="true"><span class="badge b-failed">opted out<\/span>/);
  const list = await suite.m.app.inject({ method: 'GET', url: '/admin/conversations' });
  assert.match(list.body, /opted out<\/span>/);
  const metrics = await suite.m.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(metrics.body, /aiq_whatsapp_opt_changes_total\{change="out",by="contact"\} 1/);
  assert.match(metrics.body, /aiq_whatsapp_contacts_opted_out 1/);
  // What aiq holds about them includes that they opted out.
  const exported = JSON.parse((await suite.m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(ANNA)}` })).body);
  assert.equal(exported.contact.optedOutBy, 'contact');
  assert.ok(exported.contact.optedOutAt);

  const start = await receive('START');
  assert.equal(start['optChange'], 'in');
  assert.match(sentTo(ANNA)[2]!, /weer aangemeld/);
  assert.equal((await receive('Wanneer krijg ik mijn salaris?'))['status'], 'queued', 'replies resume');
  assert.equal(sentTo(ANNA).length, 4);
});

test('a reply Twilio refused for now is not resent after STOP: its retry ends skipped, the confirmation goes out', async () => {
  const phone = '+31633334444';
  // 429: Twilio's word that nothing went out (a 5xx might have: its retry would wait).
  suite.twilioApi.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
  const question = inboundParams('Hoeveel vakantiedagen heb ik?', phone);
  assert.equal((await injectSigned(suite.m.app, WHATSAPP, question)).statusCode, 200);
  await waitFor(async () => suite.twilioApi.requests.some((r) => r.outcome === 'fault:http-429'), 'the refused send');
  // The STOP's job runs after the question's retry (one conversation, one ordering key).
  assert.equal((await receive('STOP', phone))['optChange'], 'out');
  const sent = sentTo(phone);
  assert.equal(sent.length, 1, `only the confirmation went out: ${JSON.stringify(sent)}`);
  assert.match(sent[0]!, /Je bent afgemeld/);
  const job = await suite.t.db.query<{ status: string; result: unknown; attempts: number }>(
    `select j.status, j.result, j.attempts from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [question.MessageSid],
  );
  // One attempt: a throttled one (429) is given back.
  assert.deepEqual(job.rows[0], { status: 'done', result: { skipped: 'opted_out', resumed: true }, attempts: 1 });
  const reply = await suite.t.db.query<{ status: string; error_message: string }>(
    `select r.status, r.error_message from messages r join messages q on q.id = r.reply_to_message_id where q.twilio_sid = $1`,
    [question.MessageSid],
  );
  assert.equal(reply.rows[0]!.status, 'failed');
  assert.match(reply.rows[0]!.error_message, /not sent: the contact opted out/);
});

test('a STOP confirmation Twilio refused for now is not sent after a START: its retry withholds it, the START is confirmed', async () => {
  const phone = '+31699998888';
  // 429: Twilio's word that nothing went out (a 5xx might have: its retry would wait).
  suite.twilioApi.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
  const stop = inboundParams('STOP', phone);
  assert.equal((await injectSigned(suite.m.app, WHATSAPP, stop)).statusCode, 200);
  const confirmation = `select r.status, r.error_message from messages r join messages q on q.id = r.reply_to_message_id where q.twilio_sid = $1`;
  await waitFor(async () => (await suite.t.db.query<{ status: string }>(confirmation, [stop.MessageSid])).rows[0]?.status === 'send_failed', 'the refused confirmation');
  // The START's job runs after the STOP's retry (one conversation, one ordering key).
  assert.equal((await receive('START', phone))['optChange'], 'in');
  const sent = sentTo(phone);
  assert.equal(sent.length, 1, `only the START's confirmation went out: ${JSON.stringify(sent)}`);
  assert.match(sent[0]!, /weer aangemeld/);
  const job = await suite.t.db.query<{ status: string; result: unknown }>(
    `select j.status, j.result from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
    [stop.MessageSid],
  );
  assert.deepEqual(job.rows[0], { status: 'done', result: { skipped: 'changed again since', resumed: true } });
  const stale = (await suite.t.db.query<{ status: string; error_message: string }>(confirmation, [stop.MessageSid])).rows[0]!;
  assert.equal(stale.status, 'failed');
  assert.match(stale.error_message, /not sent: the contact opted in again before this confirmation went out/);
});

test('an admin records an opt-out and an opt-in (asked by phone); both are audited and counted', async () => {
  const phone = '+31611112222';
  await receive('Hoi', phone);
  const conversationId = await conversationOf(phone);
  const out = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/opt-out` });
  assert.deepEqual(JSON.parse(out.body), { id: conversationId, optedOut: true, changed: true });
  assert.deepEqual(JSON.parse((await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/opt-out` })).body).changed, false, 'already out');
  assert.deepEqual(await receive('Nog een vraag', phone), { skipped: 'opted_out' });
  const reply = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/messages`, payload: { body: 'Hallo' } });
  assert.match(JSON.parse(reply.body).error, /an admin recorded their opt-out/);
  const back = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/opt-in` });
  assert.equal(JSON.parse(back.body).changed, true);
  const sent = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${conversationId}/messages`, payload: { body: 'Hallo' } });
  assert.equal(sent.statusCode, 201, sent.body);
  // Recorded once each response has gone out (so not necessarily in request order): wait for the three.
  const opts = `select action, target from audit_log where action like '%/opt-%' order by action desc`;
  await waitFor(async () => (await suite.t.db.query(opts)).rowCount === 3, 'three audit records');
  const audit = await suite.t.db.query<{ action: string; target: string }>(opts);
  assert.deepEqual(audit.rows.map((r) => r.action), ['POST /api/conversations/:id/opt-out', 'POST /api/conversations/:id/opt-out', 'POST /api/conversations/:id/opt-in']);
  assert.ok(audit.rows.every((r) => r.target === conversationId));
  const metrics = await suite.m.app.inject({ method: 'GET', url: '/metrics' });
  assert.match(metrics.body, /aiq_whatsapp_opt_changes_total\{change="out",by="admin"\} 1/);
  assert.match(metrics.body, /aiq_whatsapp_opt_changes_total\{change="in",by="admin"\} 1/);
});

test('a redelivered STOP changes nothing twice and confirms once; STOP then START at once sends no stale confirmation', async () => {
  // A number of its own: the test above leaves +31633334444 opted out with one confirmation
  // sent, so counting sends to it could pass before this STOP's job ran (or never, after).
  const phone = '+31677778888';
  const params = inboundParams('STOP', phone);
  for (let i = 0; i < 3; i++) assert.equal((await injectSigned(suite.m.app, WHATSAPP, params)).statusCode, 200);
  await waitFor(async () => {
    const jobs = await suite.t.db.query<{ status: string }>(
      `select j.status from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid where m.twilio_sid = $1`,
      [params.MessageSid],
    );
    return jobs.rows.length === 1 && jobs.rows[0]!.status === 'done';
  }, 'the STOP job (one for three deliveries)');
  assert.equal(sentTo(phone).length, 1, `one confirmation: ${JSON.stringify(sentTo(phone))}`);
  assert.match(sentTo(phone)[0]!, /Je bent afgemeld/);
  // STOP and START stored (as the webhook stores them) before either job runs: STOP's
  // confirmation would now be wrong.
  const other = '+31655556666';
  await suite.m.runtime.db.transaction(async (tx) => {
    for (const body of ['STOP', 'START'] as const) {
      await inboundStoreAndEnqueue(tx, { whatsappNumber: other, body, mediaUrls: [], twilioSid: messageSid(), optChange: body === 'STOP' ? 'out' : 'in' });
    }
  });
  await suite.m.runtime.db.query(`select pg_notify('aiq_jobs', '')`);
  await waitFor(async () => {
    const jobs = await suite.t.db.query<{ status: string }>(`select status from ai_jobs where type = 'autoreply' and ordering_key = $1`, [await conversationOf(other)]);
    return jobs.rows.length === 2 && jobs.rows.every((j) => j.status === 'done');
  }, 'both jobs');
  const contact = await suite.t.db.query<{ opted_out_at: Date | null }>('select opted_out_at from contacts where whatsapp_number = $1', [other]);
  assert.equal(contact.rows[0]!.opted_out_at, null, 'START came last: opted in');
  assert.ok(sentTo(other).every((body) => !/afgemeld/.test(body)), `no stale opt-out confirmation: ${JSON.stringify(sentTo(other))}`);
});

test('"Start" from a contact who never opted out is an ordinary message: answered, not confirmed as an opt-in', async () => {
  const phone = '+31644445555';
  const optIns = async () => Number(/aiq_whatsapp_opt_changes_total\{change="in",by="contact"\} (\d+)/.exec((await suite.m.app.inject({ method: 'GET', url: '/metrics' })).body)?.[1] ?? 0);
  const optInsBefore = await optIns();
  const greeting = await receive('Start', phone);
  assert.equal(await optIns(), optInsBefore, 'not counted as an opt-in');
  assert.equal(greeting['optChange'], undefined, JSON.stringify(greeting));
  assert.equal(greeting['status'], 'queued', 'the AI answers it');
  assert.equal(sentTo(phone).length, 1);
  assert.doesNotMatch(sentTo(phone)[0]!, /weer aangemeld/, 'no "subscribed again" for a contact who never left');
  const optedInAt = async () => JSON.parse((await suite.m.app.inject({ method: 'GET', url: `/api/privacy/export?phone=${encodeURIComponent(phone)}` })).body).contact.optedInAt;
  assert.equal(await optedInAt(), null);
  // After a STOP, the same word is the opt-in again.
  await receive('STOP', phone);
  const start = await receive('START', phone);
  assert.equal(start['optChange'], 'in');
  assert.match(sentTo(phone).at(-1)!, /weer aangemeld/);
  assert.ok(await optedInAt(), 'the export says when they came back');
  assert.equal(await optIns(), optInsBefore + 1);
});

test('a STOP to one business number silences the others too; a START to another resumes them all, each confirmation from the number written to', async () => {
  const ben = '+31612345699';
  const desk = 'whatsapp:+3197010000002';
  const toDesk = (body: string) => receiveAnswered(suite.m, inboundParams(body, ben, { To: desk }));
  const senders = () => suite.twilioApi.messages.filter((msg) => msg.to === `whatsapp:${ben}`).map((msg) => msg.from);
  assert.equal((await receive('Hoi', ben))['status'], 'queued');
  assert.equal((await toDesk('Mijn laptop is stuk'))['status'], 'queued');
  const [defaultSender, deskSender] = senders();
  assert.equal(deskSender, desk);
  assert.notEqual(defaultSender, desk);

  assert.equal((await receive('STOP', ben))['optChange'], 'out');
  assert.equal(senders()[2], defaultSender, 'confirmed from the number written to');
  assert.deepEqual(await toDesk('En mijn muis?'), { skipped: 'opted_out' }, 'the other desk is silent too (README: opt-out is the contact’s)');
  assert.equal(senders().length, 3);

  assert.equal((await toDesk('start'))['optChange'], 'in');
  assert.equal(senders()[3], desk);
  assert.equal((await receive('Nog een vraag', ben))['status'], 'queued', 'the first desk answers again');
  assert.equal(senders()[4], defaultSender);
});

test('a new default stop word over the webhook (ARRÊTER, CANCEL): opted out and confirmed, not answered by the AI; a sentence with "stop" is answered', async () => {
  const [pierre, carl, sam] = ['+33612345601', '+14155550101', '+31612345602'];
  for (const [body, from] of [['Arrêter', pierre], ['CANCEL', carl]] as const) {
    const result = await receive(body, from);
    assert.equal(result['optChange'], 'out', `${body}: ${JSON.stringify(result)}`);
    assert.equal(sentTo(from).length, 1);
    assert.match(sentTo(from)[0]!, /Je bent afgemeld/, 'the confirmation, no AI answer');
  }
  assert.equal((await receive('Kan ik stoppen met mijn pensioenregeling?', sam))['status'], 'queued');
  assert.equal((await receive('Stop me if I am wrong: is Friday a holiday?', sam))['status'], 'queued');
  assert.equal(sentTo(sam).length, 2, 'both answered');
});

test('a contact who sent STOP and then asked for erasure is still opted out when they write again: not answered until START', async () => {
  // Before, the erasure took the STOP with the conversation: "Hallo" was answered by the AI.
  const phone = '+31677778888';
  await receive('STOP', phone);
  assert.match(sentTo(phone).at(-1)!, /afgemeld/);
  const erased = await suite.m.app.inject({ method: 'POST', url: '/api/privacy/erase', headers: API, payload: { phone } });
  assert.equal(erased.statusCode, 200, erased.body);
  const sentBefore = sentTo(phone).length;

  assert.deepEqual(await receive('Hallo, ik heb een vraag over mijn contract', phone), { skipped: 'opted_out' });
  assert.equal(sentTo(phone).length, sentBefore, 'nothing sent');
  const refused = await suite.m.app.inject({ method: 'POST', headers: API, url: `/api/conversations/${await conversationOf(phone)}/messages`, payload: { body: 'Welkom terug!' } });
  assert.equal(refused.statusCode, 409, 'an admin message is refused too');
  assert.match(JSON.parse(refused.body).error, /opted out \(they sent a stop keyword/);

  const start = await receive('START', phone);
  assert.equal(start['optChange'], 'in');
  assert.match(sentTo(phone).at(-1)!, /weer aangemeld/);
  assert.equal((await receive('Wanneer krijg ik mijn salaris?', phone))['status'], 'queued', 'replies resume');
});

for (const backend of BACKENDS) {
  test(`${backend.name}: an erased contact's opt-out is carried to the contact a later message makes, by both store functions; a START as that first message opts them in; no opt-out, none carried`, async () => {
    const b = await backend.fresh();
    try {
      const [out1, out2, out3, stayedIn] = ['+31611000001', '+31611000002', '+31611000003', '+31611000004'];
      const store = (whatsappNumber: string, body: string, optChange?: 'out' | 'in') => inboundStoreAndEnqueue(b.db, { whatsappNumber, body, mediaUrls: [], twilioSid: messageSid(), optChange });
      for (const phone of [out1, out2, out3]) await store(phone, 'STOP', 'out');
      await store(stayedIn, 'Hallo');
      for (const phone of [out1, out2, out3, stayedIn]) assert.equal((await personErase(b.db, phone, 'test')).status, 'erased');
      const state = async (phone: string) =>
        (await b.db.query<{ opted_out_by: string | null; opted_in: boolean }>('select opted_out_by, opted_in_at is not null as opted_in from contacts where whatsapp_number = $1', [phone])).rows[0];

      await store(out1, 'Hallo');
      assert.deepEqual(await state(out1), { opted_out_by: 'contact', opted_in: false });
      await inboundStoreManyAndEnqueue(b.db, [
        { whatsappNumber: out2, body: 'Hallo', mediaUrls: [], twilioSid: messageSid() },
        { whatsappNumber: stayedIn, body: 'Hallo', mediaUrls: [], twilioSid: messageSid() },
      ]);
      assert.deepEqual(await state(out2), { opted_out_by: 'contact', opted_in: false }, 'the webhook batch');
      assert.deepEqual(await state(stayedIn), { opted_out_by: null, opted_in: false });

      const started = await store(out3, 'START', 'in');
      assert.deepEqual(await state(out3), { opted_out_by: null, opted_in: true });
      const job = await b.db.query<{ payload: { optIn?: boolean } }>(`select payload from ai_jobs where payload->>'messageId' = $1`, [started!.messageId]);
      assert.equal(job.rows[0]!.payload.optIn, true, 'confirmed as an opt-in');
      // Lifting the erasure (they are back on the staff list) is no opt-in.
      const lifted = '+31611000005';
      await store(lifted, 'STOP', 'out');
      assert.equal((await personErase(b.db, lifted, 'test')).status, 'erased');
      const { suppressionLift } = await import('../src/privacy/suppression.ts');
      assert.equal(await suppressionLift(b.db, lifted, 'test'), true);
      await store(lifted, 'Hallo');
      assert.deepEqual(await state(lifted), { opted_out_by: 'contact', opted_in: false });
      // The carried opt-out holds no number either.
      const held = JSON.stringify((await b.db.query('select * from erasure_suppressions')).rows);
      assert.ok(!held.includes('611000001'), held);
    } finally {
      await b.close();
    }
  });
}

for (const backend of BACKENDS) {
  test(`${backend.name}: an erased contact's opt-out goes to the contact made for their number, once: after their START, and the retention purge of that contact a year on, their next message is not opted out again`, async () => {
    const b = await backend.fresh();
    try {
      const phone = '+31611000006';
      const store = (body: string, optChange?: 'out' | 'in') => inboundStoreAndEnqueue(b.db, { whatsappNumber: phone, body, mediaUrls: [], twilioSid: messageSid(), optChange });
      const state = async () =>
        (await b.db.query<{ opted_out_by: string | null }>('select opted_out_by from contacts where whatsapp_number = $1', [phone])).rows[0];
      await store('STOP', 'out');
      assert.equal((await personErase(b.db, phone, 'test')).status, 'erased');
      await store('Hallo');
      assert.deepEqual(await state(), { opted_out_by: 'contact' }, 'carried');
      await store('START', 'in');
      assert.deepEqual(await state(), { opted_out_by: null });
      // A year of silence: the retention purge removes their messages, conversation and contact.
      await b.db.query(`update messages set created_at = now() - interval '400 days'`);
      await b.db.query(`update conversations set last_message_at = now() - interval '400 days'`);
      await b.db.query(`update contacts set updated_at = now() - interval '400 days'`);
      const removed = await retentionPurge(b.db, loadConfig({}));
      assert.equal(removed['contacts without conversations'], 1, JSON.stringify(removed));
      await store('Hallo, ik ben terug');
      // Before, the erasure's record still held the STOP they had ended with START: opted out again.
      assert.deepEqual(await state(), { opted_out_by: null });
    } finally {
      await b.close();
    }
  });
}

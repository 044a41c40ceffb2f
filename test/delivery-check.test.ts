// A reply whose status callbacks never came (aiq serve down when Twilio posted them) stayed
// `queued` for good, a failure WhatsApp reported later never seen. The delivery_check job asks
// Twilio (here the fake, over HTTP) about replies quiet for ten minutes, records what changed
// as a callback would, asks about one still on its way again only after an hour, and leaves
// one Twilio does not know. `aiq worker` schedules it when Twilio is configured.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { adminReplySend, outcomeText } from '../src/http/admin/conversation-actions.ts';
import { DELIVERY_CHECK, deliveryStatusRecord, type DeliveryCheckResult } from '../src/jobs/delivery-status.ts';
import { TwilioTransport } from '../src/messaging/transport.ts';
import { twilioErrorText } from '../src/messaging/twilio.ts';
import { jobEnqueue, jobGet, scheduleList } from '../src/queue/index.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN } from './helpers/fake-twilio.ts';
import { FROM_NUMBER, inboundParams, messagingSuite, receiveAnswered } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const s = messagingSuite();

/** Runs one delivery_check job through the worker; returns its result. */
async function checkRun(): Promise<DeliveryCheckResult> {
  const id = await jobEnqueue(s.t.db, { type: DELIVERY_CHECK, payload: {} });
  let job = await jobGet(s.t.db, id);
  await waitFor(async () => {
    job = await jobGet(s.t.db, id);
    return job?.status === 'done' || job?.status === 'failed';
  }, 'the delivery check');
  assert.equal(job!.status, 'done', job!.lastError ?? '');
  return job!.result as DeliveryCheckResult;
}

/** Answers a message from `phone`; returns the reply's id and Twilio SID (no status callback came). */
async function answered(phone: string, body: string): Promise<{ id: string; sid: string }> {
  await receiveAnswered(s.m, inboundParams(body, phone));
  const reply = await s.t.db.query<{ id: string; twilio_sid: string; status: string }>(
    `select r.id, r.twilio_sid, r.status from messages r join messages i on i.id = r.reply_to_message_id where i.body = $1 and r.source = 'ai'`,
    [body],
  );
  assert.equal(reply.rows[0]!.status, 'queued');
  return { id: reply.rows[0]!.id, sid: reply.rows[0]!.twilio_sid };
}

const quietFor = (id: string, minutes: number) => s.t.db.query(`update messages set status_updated_at = now() - make_interval(mins => $2) where id = $1`, [id, minutes]);
const asked = () => s.twilioApi.requests.filter((r) => r.outcome.startsWith('fetch')).length;
const stateOf = async (id: string) =>
  (await s.t.db.query<{ status: string; error_code: number | null; error_message: string | null }>('select status, error_code, error_message from messages where id = $1', [id])).rows[0]!;

describe('delivery check', () => {
  test('a reply WhatsApp refused after its callbacks were lost shows failed, with the reason, once quiet for ten minutes', async () => {
    const reply = await answered('+31612350001', 'Wanneer wordt het salaris betaald?');
    s.twilioApi.statusChange(reply.sid, 'undelivered', 63024);
    const early = await checkRun();
    assert.equal(early.asked, 0, 'a reply with recent news is not asked about');
    assert.equal(asked(), 0);
    assert.equal((await stateOf(reply.id)).status, 'queued');

    await quietFor(reply.id, 11);
    const result = await checkRun();
    assert.deepEqual({ asked: result.asked, updated: result.updated }, { asked: 1, updated: 1 });
    const state = await stateOf(reply.id);
    assert.equal(state.status, 'undelivered');
    assert.equal(state.error_code, 63024);
    assert.equal(state.error_message, twilioErrorText(63024, undefined));
  });

  test('one still on its way is asked again only after an hour; one Twilio does not know is left as it is', async () => {
    const travelling = await answered('+31612350002', 'Waar staat de printer?');
    const unknown = await answered('+31612350003', 'Wie is mijn leidinggevende?');
    s.twilioApi.statusChange(travelling.sid, 'sent');
    await s.t.db.query(`update messages set twilio_sid = $2 where id = $1`, [unknown.id, `SM${'0'.repeat(32)}`]);
    await quietFor(travelling.id, 11);
    await quietFor(unknown.id, 11);
    const before = asked();
    const first = await checkRun();
    assert.deepEqual(first, { asked: 2, updated: 1, unknownToTwilio: 1 });
    assert.equal(asked() - before, 2);
    assert.equal((await stateOf(travelling.id)).status, 'sent');
    assert.equal((await stateOf(unknown.id)).status, 'queued');

    // Still `sent` and quiet again: not asked within the hour.
    await quietFor(travelling.id, 11);
    const within = await checkRun();
    assert.equal(within.asked, 0);
    await s.t.db.query(`update messages set status_checked_at = now() - interval '61 minutes' where id = any($1::uuid[])`, [[travelling.id, unknown.id]]);
    s.twilioApi.statusChange(travelling.sid, 'read');
    const later = await checkRun();
    assert.deepEqual(later, { asked: 2, updated: 1, unknownToTwilio: 1 });
    assert.equal((await stateOf(travelling.id)).status, 'read');
  });

  // An admin's send cut off mid-way waits for a callback that, when Twilio never got it, does
  // not come; no job waits on it, so it stayed unconfirmed for good.
  test('an admin reply whose send was cut off is settled by Twilio\'s list after its deadline: confirmed, or failed as not sent', async () => {
    for (const twilioHasIt of [true, false]) {
      const phone = twilioHasIt ? '+31612350011' : '+31612350012';
      const reply = await answered(phone, `Vraag voor een mens ${twilioHasIt}`);
      const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [reply.id])).rows[0]!;
      const sent = await s.m.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: { authorization: 'Bearer local' }, payload: { body: `Ik kijk ernaar (${twilioHasIt})` } });
      assert.equal(sent.statusCode, 201, sent.body);
      const { message } = sent.json();
      // As a send cut off after Twilio took it leaves it (test/outbox.test.ts makes one): no
      // SID, waiting for a callback; with PUBLIC_URL unset here, the list would be asked at once.
      await s.t.db.query(`update messages set status = 'unconfirmed', twilio_sid = null where id = $1`, [message.id]);
      if (!twilioHasIt) s.twilioApi.messages.splice(s.twilioApi.messages.findIndex((m) => m.body === `Ik kijk ernaar (${twilioHasIt})`), 1);
      const early = await checkRun();
      assert.equal(early.adminConfirmed ?? 0, 0, 'not before the confirmation deadline');
      assert.equal((await stateOf(message.id)).status, 'unconfirmed');
      await s.t.db.query(`update messages set send_started_at = now() - interval '1 hour' where id = $1`, [message.id]);
      const settled = await checkRun();
      const state = await stateOf(message.id);
      if (twilioHasIt) {
        assert.equal(settled.adminConfirmed, 1);
        assert.equal(state.status, 'queued');
      } else {
        assert.equal(settled.adminNotSent, 1);
        assert.equal(state.status, 'failed');
        assert.match(state.error_message!, /^not sent: the send was interrupted and Twilio has no record of it/);
      }
      assert.equal(s.twilioApi.messages.filter((m) => m.body === `Ik kijk ernaar (${twilioHasIt})`).length, twilioHasIt ? 1 : 0, 'never resent');
      if (!twilioHasIt) {
        // Twilio's word still wins over our "not sent" (it had the message after all): a
        // callback that comes late moves it on and clears the verdict (found by a review).
        assert.ok(await deliveryStatusRecord(s.t.db, { messageId: message.id, twilioSid: `SM${'7'.repeat(32)}`, status: 'delivered' }));
        const late = await stateOf(message.id);
        assert.deepEqual({ status: late.status, error: late.error_message }, { status: 'delivered', error: null });
      }
    }
  });

  // Found by a Twilio probe: an admin reply refused with a 5xx that went out all the same was
  // "Not sent … Try again in a moment" in the dashboard and send_failed for good, while the
  // contact had it; sending it again sent it twice.
  test('an admin reply refused with a 5xx is settled by Twilio\'s list: confirmed if it went out all the same, else not sent; the notice does not say "try again"', async () => {
    for (const twilioHasIt of [true, false]) {
      const phone = twilioHasIt ? '+31612350021' : '+31612350022';
      const reply = await answered(phone, `Vraag na een 502 ${twilioHasIt}`);
      const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [reply.id])).rows[0]!;
      const body = `Antwoord na een 502 (${twilioHasIt})`;
      s.twilioApi.fault(twilioHasIt ? { kind: 'accept-then-http', status: 502, html: true } : { kind: 'http', status: 502, code: 20502 });
      // What the dashboard's reply form does, and the notice it shows after.
      const { message, outcome } = await adminReplySend(s.m.runtime, conversationId, body);
      const notice = outcomeText(outcome);
      assert.match(notice, /does not prove it was not sent/, `the notice: ${notice}`);
      assert.doesNotMatch(notice, /Try again in a moment/);
      const { id } = message;
      assert.equal((await stateOf(id)).status, 'send_failed');
      await s.t.db.query(`update messages set send_started_at = now() - interval '1 hour' where id = $1`, [id]);
      const settled = await checkRun();
      const state = await stateOf(id);
      if (twilioHasIt) {
        assert.equal(settled.adminConfirmed, 1);
        assert.deepEqual({ status: state.status, error: state.error_message }, { status: 'queued', error: null });
      } else {
        assert.equal(settled.adminNotSent, 1);
        assert.equal(state.status, 'failed');
      }
      assert.equal(s.twilioApi.sendCount({ body }), twilioHasIt ? 1 : 0, 'never resent');
    }
    // A 429 is Twilio's word that nothing was taken: not asked about.
    const throttled = await answered('+31612350023', 'Vraag na een 429');
    const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [throttled.id])).rows[0]!;
    s.twilioApi.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
    const sent = await s.m.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: { authorization: 'Bearer local' }, payload: { body: 'Na een 429' } });
    assert.equal(sent.json().outcome, 'retry');
    await s.t.db.query(`update messages set send_started_at = now() - interval '1 hour' where id = $1`, [sent.json().message.id]);
    const lists = s.twilioApi.requests.filter((r) => r.outcome === 'list').length;
    await checkRun();
    assert.equal(s.twilioApi.requests.filter((r) => r.outcome === 'list').length, lists);
    assert.equal((await stateOf(sent.json().message.id)).status, 'send_failed');
  });

  test('an admin reply sent as a template whose send was cut off is flagged for a human: Twilio\'s list cannot match a template', async () => {
    const reply = await answered('+31612350013', 'Vraag voor een sjabloon');
    const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [reply.id])).rows[0]!;
    const sent = await s.m.app.inject({ method: 'POST', url: `/api/conversations/${conversationId}/messages`, headers: { authorization: 'Bearer local' }, payload: { body: 'Sjabloon' } });
    const { message } = sent.json();
    await s.t.db.query(`update messages set status = 'unconfirmed', twilio_sid = null, template_sid = $2, send_started_at = now() - interval '1 hour' where id = $1`, [message.id, `HX${'a1'.repeat(16)}`]);
    const settled = await checkRun();
    assert.equal(settled.adminFlagged, 1);
    const state = await stateOf(message.id);
    assert.equal(state.status, 'flagged');
    assert.match(state.error_message!, /went as template HX\w+, which Twilio's Messages list cannot match/);
  });

  // The check asked Twilio's list about every admin reply refused with anything but a 429,
  // so one that provably never reached Twilio (no connection) was asked about too, and its
  // "not sent: Twilio API unreachable (ECONNREFUSED …)" replaced by the list's generic
  // "the send was interrupted and Twilio has no record of it".
  test('an admin reply whose send never reached Twilio (no connection) is not asked about: it keeps its reason', async () => {
    const reply = await answered('+31612350031', 'Vraag terwijl Twilio onbereikbaar is');
    const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [reply.id])).rows[0]!;
    // A port nothing listens on: the connection is refused before any byte leaves.
    const probe = createServer();
    const port = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as { port: number }).port)));
    await new Promise((resolve) => probe.close(resolve));
    const transport = new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: FROM_NUMBER, apiBaseUrl: `http://127.0.0.1:${port}` });
    const { message, outcome } = await adminReplySend({ ...s.m.runtime, transport }, conversationId, 'Antwoord dat nooit vertrok');
    assert.equal(outcome.kind, 'retry');
    assert.match(outcomeText(outcome), /^Not sent: .*Try again in a moment/);
    const refused = await stateOf(message.id);
    assert.equal(refused.status, 'send_failed');
    assert.match(refused.error_message!, /^not sent: Twilio API unreachable \(ECONNREFUSED\)/);
    await s.t.db.query(`update messages set send_started_at = now() - interval '1 hour' where id = $1`, [message.id]);
    const lists = s.twilioApi.requests.filter((r) => r.outcome === 'list').length;
    const settled = await checkRun();
    assert.equal(settled.adminNotSent ?? 0, 0);
    assert.equal(s.twilioApi.requests.filter((r) => r.outcome === 'list').length, lists, "Twilio's list was not asked");
    assert.deepEqual(await stateOf(message.id), refused, 'the reason the admin saw stays');
  });

  // Refused with a 5xx as a template, it was 'unknown' at every run (Twilio's list cannot
  // match a template) and stayed "not sent" for good, though it may have gone out.
  test('an admin reply sent as a template and refused with a 5xx is flagged for a human, not left unknown at every run', async () => {
    const reply = await answered('+31612350032', 'Vraag voor een sjabloon na een 502');
    const { conversation_id: conversationId } = (await s.t.db.query<{ conversation_id: string }>('select conversation_id from messages where id = $1', [reply.id])).rows[0]!;
    s.twilioApi.fault({ kind: 'http', status: 502, code: 20502 });
    const { message, outcome } = await adminReplySend(s.m.runtime, conversationId, 'Sjabloon na een 502');
    assert.equal(outcome.kind, 'retry');
    // As it is recorded when it went as the template (outside the 24-hour window).
    await s.t.db.query(`update messages set template_sid = $2, send_started_at = now() - interval '1 hour' where id = $1`, [message.id, `HX${'b2'.repeat(16)}`]);
    const settled = await checkRun();
    assert.equal(settled.adminFlagged, 1);
    const state = await stateOf(message.id);
    assert.equal(state.status, 'flagged');
    assert.match(state.error_message!, /HTTP 502/);
    assert.match(state.error_message!, /went as template HX\w+, which Twilio's Messages list cannot match/);
    assert.equal(s.twilioApi.sendCount({ body: 'Sjabloon na een 502' }), 0, 'never resent');
  });

  test('aiq worker schedules the check when Twilio is configured', async () => {
    const env = {
      PATH: process.env.PATH!,
      DATABASE_URL: s.t.url!,
      AI_PROVIDER: 'local',
      LOG_LEVEL: 'error',
      TWILIO_ACCOUNT_SID: FAKE_ACCOUNT_SID,
      TWILIO_AUTH_TOKEN: FAKE_AUTH_TOKEN,
      TWILIO_WHATSAPP_FROM: 'whatsapp:+14155238886',
      TWILIO_API_BASE_URL: s.twilioApi.url,
    };
    const worker = spawn(process.execPath, ['bin/aiq.js', 'worker'], { cwd: ROOT, env, stdio: 'ignore' });
    try {
      await waitFor(async () => (await scheduleList(s.t.db)).some((x) => x.name === 'delivery-check' && x.type === DELIVERY_CHECK && x.cron === '*/10 * * * *'), 'the delivery-check schedule');
    } finally {
      worker.kill('SIGTERM');
      await new Promise((resolve) => (worker.exitCode !== null ? resolve(null) : worker.once('exit', resolve)));
    }
  });
});

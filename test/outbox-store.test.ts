// The outbox protocol and the conversation store on both databases (PostgreSQL server and
// embedded PGlite): the same statements must hold the same guarantees on each. Sends go to
// the fake Twilio over real HTTP, with its faults: a send cut off and then confirmed at once,
// a 201 that is not JSON, a 5xx after the message was accepted.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { conversationList } from '../src/http/admin/conversation-queries.ts';
import { deliveryStatusRecord } from '../src/jobs/delivery-status.ts';
import { conversationThread, inboundReplyState, messageAnsweredBy, messageGet, messageListRecent, messageStatusUpdate, repliesSuperseded } from '../src/messaging/conversations.ts';
import { HumanTookOverError, OptedOutError, replyPartsForInbound, replyPartsResume, replyResume, replySend, replyWriteAdmin, type OutboxDeps } from '../src/messaging/outbox.ts';
import { TwilioTransport } from '../src/messaging/transport.ts';
import { BACKENDS, type TestDatabase } from './helpers/db.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { messageSid } from './helpers/messaging.ts';
import { inboundStoreAndEnqueue } from '../src/jobs/autoreply.ts';

const TO = 'whatsapp:+31612345678';

for (const backend of BACKENDS) {
  describe(`outbox on ${backend.name}`, () => {
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

    test('sent once and confirmed; sending again for the same inbound message resumes, never resends', async () => {
      fake.reset();
      const m = await inbound('eerste');
      const first = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['antwoord'], contextUntilSeq: 1 }, TO);
      assert.equal(first.kind, 'sent');
      assert.equal(first.reply.twilioSid, fake.messages[0]!.sid);
      const again = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['antwoord (opnieuw)'], contextUntilSeq: 1 }, TO);
      assert.equal(again.kind, 'already-sent');
      assert.equal(fake.messages.length, 1);
      // Racing attempts: still one row, one send.
      const m2 = await inbound('tweede');
      const raced = await Promise.all([1, 2, 3].map(() => replySend(deps, { conversationId: m2.conversationId, replyToMessageId: m2.messageId, parts: ['race'], contextUntilSeq: null }, TO)));
      assert.equal(raced.filter((o) => o.kind === 'sent').length, 1);
      assert.equal(fake.sendCount({ body: 'race' }), 1);
      assert.equal((await t.db.query(`select 1 from messages where reply_to_message_id = $1`, [m2.messageId])).rowCount, 1);
    });

    test('not sent (503): resume waits out the deadline, then sends it once; possibly sent (cut connection): waits, the callback confirms, the deadline flags', async () => {
      fake.reset();
      const a = await inbound('storing');
      fake.fault({ kind: 'http', status: 503, code: 20503 });
      const failed = await replySend(deps, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['na storing'], contextUntilSeq: null }, TO);
      assert.equal(failed.kind, 'retry');
      assert.equal(failed.reply.status, 'send_failed');
      // A 5xx does not prove nothing went out, and Twilio lists a message late: the retry
      // waits for a status callback until the deadline, sending nothing.
      const early = await replyResume(deps, (await replyPartsForInbound(t.db, a.messageId))[0]!, TO);
      assert.equal(early.kind, 'waiting');
      assert.ok(early.kind === 'waiting' && early.retryInMs > 290_000 && early.retryInMs <= 300_000);
      assert.equal(fake.sendCount({ body: 'na storing' }), 0);
      // Past it, Twilio's list still lacks it: it never went, and goes now, once.
      await t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where id = $1`, [failed.reply.id]);
      const resent = await replyResume(deps, (await messageGet(t.db, failed.reply.id))!, TO);
      assert.equal(resent.kind, 'sent');
      assert.equal(fake.sendCount({ body: 'na storing' }), 1);

      const b = await inbound('onzeker');
      fake.fault({ kind: 'accept-then-drop' });
      const uncertain = await replySend(deps, { conversationId: b.conversationId, replyToMessageId: b.messageId, parts: ['misschien'], contextUntilSeq: null }, TO);
      assert.equal(uncertain.kind, 'waiting');
      assert.equal(uncertain.reply.status, 'unconfirmed');
      assert.ok(uncertain.kind === 'waiting' && uncertain.retryInMs > 290_000 && uncertain.retryInMs <= 300_000);
      assert.equal((await replyResume(deps, uncertain.reply, TO)).kind, 'waiting', 'a retry keeps waiting, does not resend');
      const sid = fake.messages.at(-1)!.sid;
      const moved = await messageStatusUpdate(t.db, { messageId: uncertain.reply.id, twilioSid: sid, status: 'sent' });
      assert.equal(moved?.replyToMessageId, b.messageId);
      assert.equal((await replyResume(deps, (await messageGet(t.db, uncertain.reply.id))!, TO)).kind, 'already-sent');
      assert.equal(fake.sendCount({ body: 'misschien' }), 1);

      // Past the deadline without a callback: Twilio's Messages list decides.
      const c = await inbound('stil');
      fake.fault({ kind: 'accept-then-drop' });
      const silent = await replySend(deps, { conversationId: c.conversationId, replyToMessageId: c.messageId, parts: ['niemand hoort'], contextUntilSeq: null }, TO);
      assert.equal(silent.kind, 'waiting');
      await t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where id = $1`, [silent.reply.id]);
      fake.listFailures = 1;
      const flagged = await replyResume(deps, (await messageGet(t.db, silent.reply.id))!, TO);
      assert.equal(flagged.kind, 'flagged', 'Twilio could not tell: a human checks');
      assert.equal(flagged.reply.status, 'flagged');
      // Resumed again (its job restarted), Twilio's list answers and has it: confirmed, not resent.
      const again = await replyResume(deps, flagged.reply, TO);
      assert.equal(again.kind, 'already-sent');
      assert.equal(again.reply.twilioSid, fake.messages.find((m) => m.body === 'niemand hoort')!.sid);
      assert.equal(fake.sendCount({ body: 'niemand hoort' }), 1);

      const d = await inbound('gevonden');
      fake.fault({ kind: 'accept-then-drop' });
      const found = await replySend(deps, { conversationId: d.conversationId, replyToMessageId: d.messageId, parts: ['Twilio heeft het'], contextUntilSeq: null }, TO);
      await t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where id = $1`, [found.reply.id]);
      const reconciled = await replyResume(deps, (await messageGet(t.db, found.reply.id))!, TO);
      assert.equal(reconciled.kind, 'already-sent', 'Twilio has it: confirmed');
      assert.equal(reconciled.reply.twilioSid, fake.messages.at(-1)!.sid);
      assert.equal(fake.sendCount({ body: 'Twilio heeft het' }), 1);

      // A send that never reached Twilio (its sender died before the request left): Twilio's
      // list provably lacks it once the deadline passed, so it goes out now, once.
      const e = await inbound('nooit aangekomen');
      await t.db.query(
        `insert into messages (conversation_id, source, body, status, reply_to_message_id, send_started_at)
         values ($1, 'ai', 'nooit verstuurd', 'pending', $2, now() - interval '301 seconds')`,
        [e.conversationId, e.messageId],
      );
      const lost = (await replyPartsForInbound(t.db, e.messageId))[0]!;
      const resentNow = await replyResume(deps, lost, TO);
      assert.equal(resentNow.kind, 'sent');
      assert.equal(fake.sendCount({ body: 'nooit verstuurd' }), 1);
      assert.equal((await replyResume(deps, resentNow.reply, TO)).kind, 'already-sent');
      assert.equal(fake.sendCount({ body: 'nooit verstuurd' }), 1, 'exactly once');
    });

    test('two live runs of one job resume a reply Twilio never got: one resends it, the other waits; never two sends', async () => {
      // The first run lost its lease but is still going, the second took the job over: both
      // find the reply pending past its deadline and absent from Twilio's list. The list is
      // slow (200 ms), so both have asked it before either reclaims (through a pooler one run
      // could otherwise reclaim before the other tested the deadline); the resend is slow
      // (300 ms), so the second run reclaims while the first one's send is in flight.
      const slow = await startFakeTwilio({ responseDelayMs: 300, listDelayMs: 200 });
      try {
        const slowDeps: OutboxDeps = {
          ...deps,
          transport: new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: slow.url }),
        };
        const m = await inbound('twee pogingen');
        await t.db.query(
          `insert into messages (conversation_id, source, body, status, reply_to_message_id, send_started_at)
           values ($1, 'ai', 'één keer versturen', 'pending', $2, now() - interval '301 seconds')`,
          [m.conversationId, m.messageId],
        );
        const [part] = await replyPartsForInbound(t.db, m.messageId);
        const outcomes = await Promise.all([replyResume(slowDeps, part!, TO), replyResume(slowDeps, part!, TO)]);
        assert.equal(slow.requests.filter((r) => r.outcome === 'list').length, 2, 'both runs asked Twilio');
        assert.equal(slow.sendCount({ body: 'één keer versturen' }), 1, 'sent exactly once');
        assert.deepEqual(outcomes.map((o) => o.kind).sort(), ['sent', 'waiting']);
        const stored = (await messageGet(t.db, part!.id))!;
        assert.equal(stored.twilioSid, slow.messages[0]!.sid);
      } finally {
        await slow.close();
      }
    });

    test('a reply written before STOP and not sent yet never goes out after it; the STOP confirmation still does', async () => {
      fake.reset();
      const phone = '+31611122233';
      const to = `whatsapp:${phone}`;
      const from = async (body: string) => (await inboundStoreAndEnqueue(t.db, { whatsappNumber: phone, profileName: 'Piet', body, mediaUrls: [], twilioSid: messageSid() }))!;
      // A reply Twilio refused for now (429: Twilio's word that nothing went out), and a reply
      // in two parts whose second part was refused after the first went out.
      const single = await from('vraag');
      fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
      assert.equal((await replySend(deps, { conversationId: single.conversationId, replyToMessageId: single.messageId, parts: ['nog niet verstuurd'], contextUntilSeq: null }, to)).kind, 'retry');
      const split = await from('tweede vraag');
      fake.once('accepted', () => fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' }));
      assert.equal((await replySend(deps, { conversationId: split.conversationId, replyToMessageId: split.messageId, parts: ['deel een', 'deel twee'], contextUntilSeq: null }, to)).kind, 'retry');
      assert.equal(fake.sendCount({ body: 'deel een' }), 1);

      // The contact sends STOP (the webhook records it); the retries come after.
      await t.db.query(`update contacts set opted_out_at = now(), opted_out_by = 'contact' where whatsapp_number = $1`, [phone]);
      await assert.rejects(replyResume(deps, (await replyPartsForInbound(t.db, single.messageId))[0]!, to), OptedOutError);
      await assert.rejects(replyPartsResume(deps, await replyPartsForInbound(t.db, split.messageId), to), OptedOutError);
      assert.equal(fake.sendCount({ to }), 1, 'only the part that went out before STOP');
      const withheld = await t.db.query<{ body: string; status: string; error_message: string }>(
        `select body, status, error_message from messages where source = 'ai' and reply_to_message_id = any($1::uuid[]) and twilio_sid is null order by body`,
        [[single.messageId, split.messageId]],
      );
      assert.deepEqual(withheld.rows.map((r) => [r.body, r.status]), [['deel twee', 'failed'], ['nog niet verstuurd', 'failed']]);
      for (const row of withheld.rows) assert.match(row.error_message, /opted out/);

      // An admin's message written after the STOP is refused by the write itself.
      await assert.rejects(replyWriteAdmin(t.db, { conversationId: single.conversationId, replyToMessageId: single.messageId, body: 'van de beheerder' }), OptedOutError);
      assert.equal((await t.db.query(`select 1 from messages where source = 'admin' and conversation_id = $1`, [single.conversationId])).rowCount, 0);

      // The confirmation of that STOP is the one reply that still goes out, also on a retry.
      const stop = await from('STOP');
      fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
      const confirmation = { conversationId: stop.conversationId, replyToMessageId: stop.messageId, parts: ['Je bent afgemeld'], contextUntilSeq: null, confirms: 'out' as const };
      assert.equal((await replySend(deps, confirmation, to)).kind, 'retry');
      assert.equal((await replyPartsResume(deps, await replyPartsForInbound(t.db, stop.messageId), to, { confirms: 'out' })).kind, 'sent');
      assert.equal(fake.sendCount({ to, body: 'Je bent afgemeld' }), 1);
    });

    test('a human who takes over (pause, or an admin reply) stops the AI answer not yet written or sent; confirmations still go', async () => {
      fake.reset();
      const phone = '+31611122244';
      const to = `whatsapp:${phone}`;
      const from = async (body: string) => (await inboundStoreAndEnqueue(t.db, { whatsappNumber: phone, profileName: 'Kees', body, mediaUrls: [], twilioSid: messageSid() }))!;
      const answer = (m: { conversationId: string; messageId: string }, parts: string[]) =>
        replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts, contextUntilSeq: null }, to);

      // Written, then its send refused for now (429: nothing went out); and a two-part answer
      // whose second part was refused after the first went out.
      const single = await from('vraag een');
      fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
      assert.equal((await answer(single, ['AI: nog niet verstuurd'])).kind, 'retry');
      const split = await from('vraag twee');
      fake.once('accepted', () => fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' }));
      assert.equal((await answer(split, ['AI: deel een', 'AI: deel twee'])).kind, 'retry');
      // A message whose answer the model is still writing.
      const composing = await from('vraag drie');

      // The admin pauses the AI and answers herself.
      await t.db.query(`update conversations set ai_paused = true where id = $1`, [single.conversationId]);
      await replyWriteAdmin(t.db, { conversationId: single.conversationId, replyToMessageId: composing.messageId, body: 'Mens: ik help je' });

      await assert.rejects(answer(composing, ['AI: te laat']), (err: unknown) => err instanceof HumanTookOverError && err.reason === 'ai_paused');
      assert.deepEqual(await replyPartsForInbound(t.db, composing.messageId), [], 'nothing written');
      await assert.rejects(replyResume(deps, (await replyPartsForInbound(t.db, single.messageId))[0]!, to), HumanTookOverError);
      await assert.rejects(replyPartsResume(deps, await replyPartsForInbound(t.db, split.messageId), to), HumanTookOverError);
      assert.equal(fake.sendCount({ to }), 1, 'only the part that went out before the takeover');
      const withheld = await t.db.query<{ body: string; status: string; error_message: string }>(
        `select body, status, error_message from messages where source = 'ai' and conversation_id = $1 and twilio_sid is null order by body`,
        [single.conversationId],
      );
      assert.deepEqual(withheld.rows.map((r) => [r.body, r.status]), [['AI: deel twee', 'failed'], ['AI: nog niet verstuurd', 'failed']]);
      for (const row of withheld.rows) assert.match(row.error_message, /paused for a human/);

      // Not paused any more, but the admin's reply answered these messages: still not the AI's turn.
      await t.db.query(`update conversations set ai_paused = false where id = $1`, [single.conversationId]);
      const later = await from('vraag vier');
      await replyWriteAdmin(t.db, { conversationId: later.conversationId, replyToMessageId: later.messageId, body: 'Mens: ook dit' });
      await assert.rejects(answer(later, ['AI: dubbel']), (err: unknown) => err instanceof HumanTookOverError && err.reason === 'already_answered');
      // A newer message nobody answered yet is the AI's again.
      assert.equal((await answer(await from('vraag vijf'), ['AI: vijf'])).kind, 'sent');

      // The confirmation of an opt change is not the AI's answer: a pause does not stop it.
      await t.db.query(`update conversations set ai_paused = true where id = $1`, [single.conversationId]);
      const start = await from('START');
      assert.equal((await replySend(deps, { conversationId: start.conversationId, replyToMessageId: start.messageId, parts: ['Je bent weer aangemeld'], contextUntilSeq: null, confirms: 'in' }, to)).kind, 'sent');
      assert.deepEqual(fake.messages.filter((x) => x.to === to).map((x) => x.body), ['AI: deel een', 'AI: vijf', 'Je bent weer aangemeld']);
    });

    test('two attempts resume one refused reply while another conversation is paused: one sends it, the other is not told a human took over', async () => {
      fake.reset();
      const other = await inboundStoreAndEnqueue(t.db, { whatsappNumber: '+31611122266', profileName: 'Els', body: 'elders', mediaUrls: [], twilioSid: messageSid() });
      await t.db.query(`update conversations set ai_paused = true where id = $1`, [other!.conversationId]);
      const m = await inbound('opnieuw, twee pogingen');
      fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
      const first = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['eenmaal'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      const refused = (await replyPartsForInbound(t.db, m.messageId))[0]!;
      const outcomes = await Promise.all([replyResume(deps, refused, TO), replyResume(deps, refused, TO)]);
      assert.equal(outcomes.filter((o) => o.kind === 'sent').length, 1);
      assert.equal(fake.sendCount({ body: 'eenmaal' }), 1);
      await t.db.query(`update conversations set ai_paused = false where id = $1`, [other!.conversationId]);
    });

    test('a reply tried as the template and refused (429), resent free-form once the window reopened, is not recorded as a template', async () => {
      fake.reset();
      const template = { contentSid: `HX${'ab'.repeat(16)}`, variables: [{ key: '1', source: 'reply' as const }] };
      const withTemplate: OutboxDeps = { ...deps, sendAs: () => ({ template }) };
      const m = await inbound('na een dag');
      await t.db.query(`update conversations set last_inbound_at = now() - interval '25 hours' where id = $1`, [m.conversationId]);
      fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
      const first = await replySend(withTemplate, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['via het sjabloon'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      assert.equal((await messageGet(t.db, first.reply.id))!.templateSid, template.contentSid);
      // The contact writes again: the window is open, the retry goes free-form.
      await t.db.query(`update conversations set last_inbound_at = now() where id = $1`, [m.conversationId]);
      const retried = await replyResume(withTemplate, (await messageGet(t.db, first.reply.id))!, TO);
      assert.equal(retried.kind, 'sent');
      assert.equal(fake.messages.at(-1)!.contentSid, undefined);
      assert.equal((await messageGet(t.db, first.reply.id))!.templateSid, null, 'recorded as what went: free text');
    });

    test('without a status callback URL only Twilio\'s list can confirm a possibly-sent reply; when it cannot tell, flagged at once', async () => {
      fake.reset();
      const blind: OutboxDeps = { ...deps, statusCallbackUrl: () => undefined };
      const a = await inbound('zonder callback');
      fake.fault({ kind: 'accept-then-drop' });
      fake.listFailures = 1;
      const outcome = await replySend(blind, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['blind'], contextUntilSeq: null }, TO);
      assert.equal(outcome.kind, 'flagged');
      assert.equal(outcome.reply.status, 'flagged');
      assert.match(outcome.kind === 'flagged' ? outcome.reason : '', /PUBLIC_URL is not set/);
      assert.equal(fake.sendCount({ body: 'blind' }), 1);

      const b = await inbound('zonder callback, wel bekend');
      fake.fault({ kind: 'accept-then-drop' });
      const known = await replySend(blind, { conversationId: b.conversationId, replyToMessageId: b.messageId, parts: ['bekend bij Twilio'], contextUntilSeq: null }, TO);
      assert.equal(known.kind, 'already-sent', 'Twilio lists it: confirmed without waiting');
      assert.equal(fake.sendCount({ body: 'bekend bij Twilio' }), 1);
    });

    test('status updates only move forward; the guard sees replies by the positions their context covered, not their creation time', async () => {
      fake.reset();
      const a = await inbound('vraag 1');
      const sent = await replySend(deps, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['antwoord 1'], contextUntilSeq: (await messageGet(t.db, a.messageId))!.seq }, TO);
      const sid = sent.reply.twilioSid!;
      assert.ok(await messageStatusUpdate(t.db, { twilioSid: sid, status: 'delivered' }));
      assert.equal(await messageStatusUpdate(t.db, { twilioSid: sid, status: 'sent' }), null, 'backwards: ignored');
      assert.equal((await messageGet(t.db, sent.reply.id))!.status, 'delivered');
      assert.equal(await messageStatusUpdate(t.db, { twilioSid: messageSid(), status: 'sent' }), null, 'unknown SID: nothing');

      // A message that arrived after the reply's context was read is not covered by it…
      const b = await inbound('vraag 2');
      assert.equal(await messageAnsweredBy(t.db, b.conversationId, (await messageGet(t.db, b.messageId))!.seq!), null);
      // …one that the context included is.
      assert.equal(await messageAnsweredBy(t.db, a.conversationId, (await messageGet(t.db, a.messageId))!.seq!), sent.reply.id);
      const history = await messageListRecent(t.db, a.conversationId, 3);
      assert.deepEqual(history.slice(-3).map((m) => m.body), ['vraag 1', 'antwoord 1', 'vraag 2']);
    });

    test('the reply state carries the thread as conversationThread reads it, backlog included', async () => {
      // A contact of its own: an answered message and its reply (with citations), then
      // three unanswered ones, one with a photo.
      const store = (body: string, mediaUrls: string[] = []) => inboundStoreAndEnqueue(t.db, { whatsappNumber: '+31687654321', body, mediaUrls, twilioSid: messageSid() }).then((stored) => stored!);
      const a = await store('eerste vraag');
      const citations = { sources: [], relevance: 0.4, threshold: 0.15, noAnswer: false };
      const aSeq = (await messageGet(t.db, a.messageId))!.seq;
      await replySend(deps, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['eerste antwoord'], contextUntilSeq: aSeq, citations }, 'whatsapp:+31687654321');
      await store('tweede vraag');
      await store('met foto', ['https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM1/Media/ME1']);
      const last = await store('derde vraag');
      const lastSeq = (await messageGet(t.db, last.messageId))!.seq;

      for (const limit of [10, 2]) {
        const state = (await inboundReplyState(t.db, last.messageId, limit))!;
        const read = await conversationThread(t.db, last.conversationId, limit, lastSeq);
        // Dates, positions, media and citations come through the statement's JSON intact.
        assert.deepEqual(state.thread, read, `limit ${limit}`);
        assert.deepEqual(state.thread.earlier.map((m) => m.body), ['eerste vraag', 'eerste antwoord']);
        // Past the limit, the unanswered messages that end at the one being answered.
        assert.deepEqual(state.thread.unanswered.map((m) => m.body), limit === 10 ? ['tweede vraag', 'met foto', 'derde vraag'] : ['met foto', 'derde vraag']);
      }
      const read = (await inboundReplyState(t.db, last.messageId, 10))!.thread;
      assert.equal(read.answeredUpTo, aSeq);
      assert.ok(read.earlier.every((m) => m.createdAt instanceof Date && !Number.isNaN(m.createdAt.getTime())));
      assert.deepEqual(read.earlier[1]!.citations, citations);
      assert.equal(read.unanswered[1]!.mediaUrls.length, 1);
    });

    // `undelivered` is as final as `failed` (WhatsApp reports an invalid recipient's 63024, a
    // phone off past the validity period that way): the reply never reached the contact.
    // It counted as an answer: the list showed nothing awaiting a reply, and the next
    // reply's thread read the question as answered (and "answered for" an earlier refused one).
    test('a reply Twilio reported undelivered answers nothing: the question stays open, for the list and the next reply\'s thread', async () => {
      fake.reset();
      const phone = '+31687650001';
      const store = (body: string) => inboundStoreAndEnqueue(t.db, { whatsappNumber: phone, body, mediaUrls: [], twilioSid: messageSid() }).then((stored) => stored!);
      const refusedQuestion = await store('eerste vraag');
      const { conversationId } = refusedQuestion;
      const refusedSeq = (await messageGet(t.db, refusedQuestion.messageId))!.seq!;
      fake.fault({ kind: 'http', status: 400, code: 21211 });
      const refused = await replySend(deps, { conversationId, replyToMessageId: refusedQuestion.messageId, parts: ['eerste antwoord'], contextUntilSeq: refusedSeq }, `whatsapp:${phone}`);
      assert.equal(refused.reply.status, 'failed');
      const question = await store('tweede vraag');
      const seq = (await messageGet(t.db, question.messageId))!.seq!;
      const sent = await replySend(deps, { conversationId, replyToMessageId: question.messageId, parts: ['tweede antwoord'], contextUntilSeq: seq }, `whatsapp:${phone}`);
      assert.equal(sent.kind, 'sent');
      assert.ok(await messageAnsweredBy(t.db, conversationId, seq), 'on its way, it answers');

      assert.ok(await deliveryStatusRecord(t.db, { messageId: sent.reply.id, twilioSid: sent.reply.twilioSid!, status: 'undelivered', errorCode: 63024 }));
      assert.equal((await messageGet(t.db, sent.reply.id))!.status, 'undelivered');
      assert.equal(await messageAnsweredBy(t.db, conversationId, seq), null, 'undelivered, it answered nothing');
      const listed = (await conversationList(t.db, { limit: 100 })).conversations.find((c) => c.id === conversationId);
      assert.equal(listed?.awaitingReply, true, 'the list shows the conversation awaiting a reply');
      assert.equal((await repliesSuperseded(t.db, conversationId)).size, 0, 'nor did it answer for the refused reply');
      const next = await store('hallo?');
      const nextSeq = (await messageGet(t.db, next.messageId))!.seq!;
      const thread = await conversationThread(t.db, conversationId, 10, nextSeq);
      assert.equal(thread.answeredUpTo, 0);
      assert.deepEqual(thread.unanswered.map((m) => m.body), ['eerste vraag', 'tweede vraag', 'hallo?'], 'the next reply answers both open questions');
    });

    // Twilio's less common answers, found by a Twilio probe. replySend returned the first
    // part's outcome whenever it was not 'sent', so a first part confirmed by Twilio's list
    // right after a cut connection (no PUBLIC_URL) ended the job done with parts 2… left
    // `unsent` for good: a truncated answer.
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
      assert.match(refused.reply.errorMessage!, /^may have been sent: /);
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
      assert.equal((await replyResume(blind, (await replyPartsForInbound(t.db, o.messageId))[0]!, TO)).kind, 'waiting', 'absent from the list proves nothing yet');
      await t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where reply_to_message_id = $1`, [o.messageId]);
      assert.equal((await replyResume(blind, (await replyPartsForInbound(t.db, o.messageId))[0]!, TO)).kind, 'sent');
      assert.equal(fake.sendCount({ body: 'toch aangekomen' }), 1);
      assert.equal(fake.sendCount({ body: 'nu wel' }), 1);
    });

    // The retry used to resend a 5xx'd reply as soon as Twilio's list lacked it. Twilio lists a
    // message late, so one it took despite the 5xx, not listed yet, reached the contact twice.
    test('a 5xx for a message Twilio took and lists late: the retry waits and resends nothing; unknown past the deadline, it is flagged', async () => {
      fake.reset();
      fake.listLagMs = 600_000;
      const m = await inbound('laat in de lijst');
      fake.fault({ kind: 'accept-then-http', status: 502, html: true });
      const first = await replySend(deps, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['één keer, ook na een 502'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      const again = await replyResume(deps, (await replyPartsForInbound(t.db, m.messageId))[0]!, TO);
      assert.equal(again.kind, 'waiting');
      assert.match(again.kind === 'waiting' ? again.reason : '', /refused with a 5xx.*not resending/);
      assert.equal(fake.sendCount({ body: 'één keer, ook na een 502' }), 1, 'not resent');
      // Twilio's status callback confirms it; the next run finds it confirmed.
      assert.ok(await messageStatusUpdate(t.db, { messageId: first.reply.id, twilioSid: fake.messages[0]!.sid, status: 'sent' }));
      assert.equal((await replyResume(deps, (await messageGet(t.db, first.reply.id))!, TO)).kind, 'already-sent');
      assert.equal(fake.sendCount({ body: 'één keer, ook na een 502' }), 1);

      // No callback, and past the deadline Twilio's list cannot say: flagged, not resent.
      const n = await inbound('niemand weet het');
      fake.fault({ kind: 'accept-then-http', status: 500, code: 20500, message: 'Internal Server Error' });
      const second = await replySend(deps, { conversationId: n.conversationId, replyToMessageId: n.messageId, parts: ['misschien al weg'], contextUntilSeq: null }, TO);
      assert.equal(second.kind, 'retry');
      await t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where id = $1`, [second.reply.id]);
      fake.listFailures = 1;
      const flagged = await replyResume(deps, (await messageGet(t.db, second.reply.id))!, TO);
      assert.equal(flagged.kind, 'flagged');
      assert.equal(flagged.reply.status, 'flagged');
      assert.match(flagged.reply.errorMessage!, /answered its send with a 5xx.*Not resent, to avoid a duplicate/);
      assert.equal(fake.sendCount({ body: 'misschien al weg' }), 1);
      // Its job restarted once Twilio lists it: confirmed, still one message.
      fake.listLagMs = 0;
      const restarted = await replyResume(deps, flagged.reply, TO);
      assert.equal(restarted.kind, 'already-sent');
      assert.equal(fake.sendCount({ body: 'misschien al weg' }), 1);
    });

    test('without a status callback URL, a list that cannot be read is asked again while the caller has attempts left, never resending', async () => {
      fake.reset();
      const blind: OutboxDeps = { ...deps, statusCallbackUrl: () => undefined };
      const a = await inbound('zonder callback, lijst even weg');
      fake.fault({ kind: 'accept-then-drop' });
      fake.listFailures = 1;
      const first = await replySend(blind, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['nog eens vragen'], contextUntilSeq: null, attemptsLeft: true }, TO);
      assert.equal(first.kind, 'retry', 'not flagged: the next attempt asks again');
      assert.equal(first.kind === 'retry' && first.maybeSent, true, 'it may have gone: not to be read as "not sent"');
      assert.match(first.kind === 'retry' ? first.reason : '', /Twilio's Messages list could not be read .*asking it again at the next attempt, not resending/);
      assert.notEqual((await messageGet(t.db, first.reply.id))!.status, 'flagged');
      // The next attempt: Twilio's list answers and has it.
      const again = await replyResume(blind, (await messageGet(t.db, first.reply.id))!, TO, { attemptsLeft: true });
      assert.equal(again.kind, 'already-sent');
      assert.equal(again.reply.twilioSid, fake.messages[0]!.sid);
      assert.equal(fake.sendCount({ body: 'nog eens vragen' }), 1);
    });

    // The flag is what a human reads to decide what to check. It said "neither a status
    // callback nor its Messages list (which cannot match a template's text) could tell" of
    // plain replies whose list call had only failed, and nothing of the list for a send cut
    // off; a template's flag sent the human to restart a job that can never settle it.
    test('a flag names why Twilio\'s list could not tell: its call failed (a 5xx, a time-out), or the reply went as a template', async () => {
      fake.reset();
      const pastDeadline = (id: string) => t.db.query(`update messages set send_started_at = now() - interval '301 seconds' where id = $1`, [id]);
      // A 5xx'd plain reply, and the list answers a 500.
      const a = await inbound('lijst kapot');
      fake.fault({ kind: 'accept-then-http', status: 502, message: 'Bad Gateway' });
      const first = await replySend(deps, { conversationId: a.conversationId, replyToMessageId: a.messageId, parts: ['lijst onleesbaar'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      await pastDeadline(first.reply.id);
      fake.listFailures = 1;
      const listDown = await replyResume(deps, (await messageGet(t.db, first.reply.id))!, TO);
      assert.equal(listDown.kind, 'flagged');
      assert.match(listDown.reply.errorMessage!, /answered its send with a 5xx, no status callback came within 300 s, and Twilio's Messages list could not be read \(Twilio is unavailable \(HTTP 500\)/);
      assert.doesNotMatch(listDown.reply.errorMessage!, /template/);
      assert.match(listDown.reply.errorMessage!, /Restarting its job asks Twilio's Messages list again/);

      // A send cut off, and the list call times out.
      const impatient: OutboxDeps = {
        ...deps,
        transport: new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: fake.url, timeoutMs: 500 }),
      };
      const b = await inbound('lijst traag');
      fake.fault({ kind: 'accept-then-drop' });
      const cut = await replySend(impatient, { conversationId: b.conversationId, replyToMessageId: b.messageId, parts: ['lijst te traag'], contextUntilSeq: null }, TO);
      assert.equal(cut.kind, 'waiting');
      await pastDeadline(cut.reply.id);
      fake.listHangs = 1;
      const listSlow = await replyResume(impatient, (await messageGet(t.db, cut.reply.id))!, TO);
      assert.equal(listSlow.kind, 'flagged');
      assert.match(listSlow.reply.errorMessage!, /no confirmation came within 300 s \(its sender stopped mid-send or Twilio did not answer\), and Twilio's Messages list could not be read \(no answer: timeout of 500ms exceeded\)/);
      assert.doesNotMatch(listSlow.reply.errorMessage!, /template/);

      // A 5xx'd reply that went as the template (outside the window): the list never can tell.
      const template = { contentSid: `HX${'cd'.repeat(16)}`, variables: [{ key: '1', source: 'reply' as const }] };
      const withTemplate: OutboxDeps = { ...deps, sendAs: () => ({ template }) };
      const c = await inbound('sjabloon kwijt');
      await t.db.query(`update conversations set last_inbound_at = now() - interval '25 hours' where id = $1`, [c.conversationId]);
      fake.fault({ kind: 'accept-then-http', status: 502, message: 'Bad Gateway' });
      const asTemplate = await replySend(withTemplate, { conversationId: c.conversationId, replyToMessageId: c.messageId, parts: ['als sjabloon'], contextUntilSeq: null }, TO);
      assert.equal(asTemplate.kind, 'retry');
      await pastDeadline(asTemplate.reply.id);
      const unmatchable = await replyResume(withTemplate, (await messageGet(t.db, asTemplate.reply.id))!, TO);
      assert.equal(unmatchable.kind, 'flagged');
      assert.match(unmatchable.reply.errorMessage!, new RegExp(`no status callback came within 300 s, and it went as template ${template.contentSid}, whose text Twilio's Messages list cannot match`));
      assert.doesNotMatch(unmatchable.reply.errorMessage!, /could not be read|Restarting its job/);
      assert.match(unmatchable.reply.errorMessage!, /Check the Twilio console/);
      assert.equal(fake.messages.length, 3, 'each sent once, none resent');
    });

    // A rolling upgrade: a process of the version before migration 0031 records a 5xx with
    // its own statement, which names no maybe_sent. The new retry read maybe_sent false and
    // resent without asking Twilio's list, so a reply that went out reached the contact twice.
    test('a 5xx recorded by a process of the previous version is still asked about before a resend', async () => {
      fake.reset();
      const blind: OutboxDeps = { ...deps, statusCallbackUrl: () => undefined };
      const m = await inbound('oude worker');
      fake.fault({ kind: 'accept-then-http', status: 504, html: true });
      const first = await replySend(blind, { conversationId: m.conversationId, replyToMessageId: m.messageId, parts: ['één keer, ook tijdens een upgrade'], contextUntilSeq: null }, TO);
      assert.equal(first.kind, 'retry');
      // The same failure as the previous version wrote it: back to the send in flight, then
      // its REPLY_SEND_FAILED_SQL (af136bc) verbatim, with the text it gave a 504 (this
      // version says "may have been sent" instead, and sets maybe_sent itself).
      await t.db.query(`update messages set status = 'pending', error_code = null, error_message = null, maybe_sent = false where id = $1`, [first.reply.id]);
      await t.db.query(
        `update messages
  set status = $2, error_code = $3, error_message = $4, status_updated_at = now()
  where id = $1 and status in ('pending', 'unconfirmed')
  returning *`,
        [first.reply.id, 'send_failed', null, 'not sent: Twilio is unavailable (HTTP 504): <html><body><h1>504</h1></body></html>'],
      );
      const again = await replyResume(blind, (await messageGet(t.db, first.reply.id))!, TO);
      assert.equal(fake.sendCount({ body: 'één keer, ook tijdens een upgrade' }), 1, 'sent exactly once');
      assert.equal(again.kind, 'already-sent');
    });
  });
}

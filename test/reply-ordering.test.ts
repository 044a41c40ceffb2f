// A reply answers exactly what it read. Two webhooks of one contact committing in the other
// order than they started (two real server connections), and a burst longer than the
// history window, checked against the prompts the fake OpenAI received: every inbound
// message is in exactly one prompt's unanswered part, and none is marked answered unread.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { inboundStoreAndEnqueue } from '../src/jobs/autoreply.ts';
import { messageAnsweredBy } from '../src/messaging/conversations.ts';
import { WHATSAPP_WEBHOOK_PATH } from '../src/messaging/twilio.ts';
import type { Queryable } from '../src/db/types.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { startFakeOpenAi, type FakeOpenAi, type RecordedRequest } from './helpers/fake-openai.ts';
import { startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';
import { inboundParams, injectSigned, messageSid, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';
import { waitFor } from './helpers/processes.ts';

const HISTORY = 5;

/** The user messages after the last assistant message: what a prompt asked to answer. */
function unansweredPart(request: RecordedRequest): string[] {
  const turns = request.body.messages as Array<{ role: string; content: string }>;
  const pending: string[] = [];
  // turns[0] is the system message, turns[1] the reference data: the conversation follows.
  for (let i = turns.length - 1; i >= 2 && turns[i]!.role === 'user'; i--) pending.unshift(turns[i]!.content);
  return pending;
}

describe('reply ordering', () => {
  let t: TestDatabase;
  let llm: FakeOpenAi;
  let twilioApi: FakeTwilio;
  let m: MessagingApp;

  before(async () => {
    t = await freshServerDatabase();
    llm = await startFakeOpenAi({ reply: (_body, n) => `Answer ${n}.` });
    twilioApi = await startFakeTwilio();
    m = await startMessagingApp(
      messagingEnv(t.url, twilioApi.url, {
        AI_PROVIDER: 'openai',
        OPENAI_API_KEY: 'sk-test',
        OPENAI_BASE_URL: llm.openaiBaseUrl,
        EMBEDDING_DIMENSIONS: '64',
        RAG_TOP_K: '0',
        HISTORY_MESSAGES: String(HISTORY),
      }),
    );
  });
  after(async () => {
    await m.close();
    await llm.close();
    await twilioApi.close();
    await t.close();
  });

  async function jobOf(messageId: string) {
    const result = await t.db.query<{ status: string; result: Record<string, unknown> | null }>(`select status, result from ai_jobs where payload->>'messageId' = $1`, [messageId]);
    return result.rows[0]!;
  }

  test('a message committed after a later-started one read its reply is answered, not skipped', async () => {
    const first = new pg.Client({ connectionString: t.url });
    const second = new pg.Client({ connectionString: t.url });
    await first.connect();
    await second.connect();
    const phone = '+31611110001';
    try {
      // T1 starts first (its now(), hence created_at, is earlier) …
      await first.query('begin');
      await first.query('select 1');
      await new Promise((resolve) => setTimeout(resolve, 20));
      // … T2 stores the second message and commits,
      const m2 = await inboundStoreAndEnqueue(second as unknown as Queryable, { whatsappNumber: phone, body: 'second message, committed first', mediaUrls: [], twilioSid: messageSid() });
      assert.ok(m2);
      // a job reads and answers between the two commits,
      const worker = await m.startWorker();
      await waitFor(async () => (await jobOf(m2.messageId)).status === 'done', 'the reply to the second message');
      await worker.stop();
      // then T1 stores the first message and commits last.
      const m1 = await inboundStoreAndEnqueue(first as unknown as Queryable, { whatsappNumber: phone, body: 'first message, committed last', mediaUrls: [], twilioSid: messageSid() });
      await first.query('commit');
      assert.ok(m1);
      const created = await t.db.query<{ id: string; created_at: Date }>('select id, created_at from messages where id = any($1::uuid[])', [[m1.messageId, m2.messageId]]);
      const at = new Map(created.rows.map((r) => [r.id, r.created_at.getTime()]));
      assert.ok(at.get(m1.messageId)! < at.get(m2.messageId)!, 'the late message carries the earlier created_at: the case that fooled the old guard');

      const next = await m.startWorker();
      await waitFor(async () => (await jobOf(m1.messageId)).status === 'done', 'the reply to the first message');
      await next.stop();
      const job = await jobOf(m1.messageId);
      assert.equal(job.result?.skipped, undefined, `the late message was not taken as answered: ${JSON.stringify(job.result)}`);
      const prompts = llm.chatRequests().filter((r) => r.outcome === 200).map(unansweredPart);
      assert.deepEqual(prompts.slice(-2), [['second message, committed first'], ['first message, committed last']]);
      const conversation = m1.conversationId;
      const seq = await t.db.query<{ seq: string }>('select seq from messages where id = $1', [m1.messageId]);
      assert.ok(await messageAnsweredBy(t.db, conversation, Number(seq.rows[0]!.seq)));
      assert.equal(twilioApi.sendCount({ to: `whatsapp:${phone}` }), 2, 'two replies, one per prompt');
    } finally {
      await first.end();
      await second.end();
    }
  });

  test('a burst longer than the history window: every message in exactly one prompt, answered only after it was read', async () => {
    llm.reset();
    const phone = '+31611110002';
    const bodies = Array.from({ length: 23 }, (_, i) => `burst message ${i + 1} of 23`);
    // All stored before any worker runs: the first job sees the whole backlog.
    for (const body of bodies) {
      const response = await injectSigned(m.app, WHATSAPP_WEBHOOK_PATH, inboundParams(body, phone));
      assert.equal(response.statusCode, 200);
    }
    await m.startWorker();
    const ids = await t.db.query<{ id: string; body: string; seq: string; conversation_id: string }>(
      `select m.id, m.body, m.seq, m.conversation_id from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id
       where k.whatsapp_number = $1 and m.source = 'inbound' order by m.seq`,
      [phone],
    );
    assert.equal(ids.rowCount, bodies.length);
    for (const row of ids.rows) await waitFor(async () => ['done', 'failed'].includes((await jobOf(row.id)).status), `job of ${row.body}`);

    const prompts = llm.chatRequests().filter((r) => r.outcome === 200).map(unansweredPart);
    for (const body of bodies) {
      const readIn = prompts.filter((p) => p.includes(body)).length;
      assert.equal(readIn, 1, `"${body}" was in ${readIn} prompts' unanswered part`);
    }
    assert.ok(prompts.every((p) => p.length <= HISTORY), `no prompt answers more than ${HISTORY} messages: ${prompts.map((p) => p.length)}`);
    // The first job saw the whole backlog: five full prompts and one of three.
    assert.deepEqual(prompts.map((p) => p.length), [5, 5, 5, 5, 3]);
    for (const row of ids.rows) assert.ok(await messageAnsweredBy(t.db, row.conversation_id, Number(row.seq)), `${row.body} is answered`);
    assert.equal(twilioApi.sendCount({ to: `whatsapp:${phone}` }), prompts.length, 'one reply per prompt');
  });
});

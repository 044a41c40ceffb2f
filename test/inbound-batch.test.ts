// Group commit for the webhook: concurrent webhooks share a transaction, every answer waits
// for its own commit, redeliveries and positions behave as with one commit each, and a
// message that fails takes no other message of its batch down with it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { InboundBatcher } from '../src/jobs/inbound-batch.ts';
import type { Queryable } from '../src/db/types.ts';
import { BACKENDS, freshServerDatabase, type TestDatabase } from './helpers/db.ts';
import { inboundParams, injectSigned, messagingEnv, startMessagingApp, type MessagingApp } from './helpers/messaging.ts';

const WHATSAPP = '/webhooks/twilio/whatsapp';
const sender = (i: number) => `+3161555${String(i).padStart(4, '0')}`;

describe('group commit through the webhook (PostgreSQL server)', () => {
  let t: TestDatabase;
  let m: MessagingApp;
  before(async () => {
    t = await freshServerDatabase();
    m = await startMessagingApp(messagingEnv(t.url, 'http://127.0.0.1:9'));
  });
  after(async () => {
    await m.close();
    await t.close();
  });

  test('60 webhooks at once, some delivered twice: each stored once with its job, positions without gaps, fewer commits than messages', async () => {
    const posts = Array.from({ length: 50 }, (_, i) => inboundParams(`bericht ${i}`, sender(i % 10)));
    // Ten redeliveries of messages in the same burst.
    const all = [...posts, ...posts.slice(0, 10).map((p) => ({ ...p }))];
    const answers = await Promise.all(all.map((params) => injectSigned(m.app, WHATSAPP, params)));
    assert.deepEqual(new Set(answers.map((a) => a.statusCode)), new Set([200]));

    const { rows } = await t.db.query<{ messages: number; jobs: number; commits: number }>(`
      select (select count(*)::int from messages) as messages,
             (select count(*)::int from ai_jobs where type = 'autoreply') as jobs,
             (select count(distinct xmin::text)::int from messages) as commits`);
    assert.equal(rows[0]!.messages, 50);
    assert.equal(rows[0]!.jobs, 50);
    assert.ok(rows[0]!.commits < 50, `50 messages in ${rows[0]!.commits} transactions: concurrent webhooks share commits`);
    const positions = await t.db.query<{ seqs: number[]; inbound_seq: number }>(`
      select array_agg(m.seq::int order by m.seq) as seqs, max(c.inbound_seq)::int as inbound_seq
      from messages m join conversations c on c.id = m.conversation_id group by c.id`);
    assert.equal(positions.rows.length, 10);
    for (const row of positions.rows) assert.deepEqual(row.seqs, [1, 2, 3, 4, 5], 'each conversation numbered 1..5, no gaps, no repeats');
  });

  test('a message that fails in a shared batch fails alone: the others are stored and acknowledged', async () => {
    await t.db.exec(`
      create function test_refuse_poison() returns trigger language plpgsql as $$
      begin if new.body = 'poison' then raise exception 'refused by test'; end if; return new; end $$;
      create trigger test_refuse_poison before insert on messages for each row execute function test_refuse_poison();`);
    try {
      const posts = Array.from({ length: 30 }, (_, i) => inboundParams(i === 17 ? 'poison' : `gezond ${i}`, sender(100 + i)));
      const answers = await Promise.all(posts.map((params) => injectSigned(m.app, WHATSAPP, params)));
      assert.deepEqual(answers.map((a) => a.statusCode), posts.map((_, i) => (i === 17 ? 500 : 200)));
      const stored = await t.db.query<{ n: number }>(`select count(*)::int as n from messages where body like 'gezond %'`);
      assert.equal(stored.rows[0]!.n, 29);
      const poison = await t.db.query<{ n: number }>(`select count(*)::int as n from messages where body = 'poison'`);
      assert.equal(poison.rows[0]!.n, 0);
    } finally {
      await t.db.exec('drop trigger test_refuse_poison on messages; drop function test_refuse_poison();');
    }
  });
});

for (const backend of BACKENDS) {
  test(`messages of one conversation keep their order inside and across batches (${backend.name})`, async () => {
    const t = await backend.fresh();
    try {
      const batcher = new InboundBatcher(t.db);
      // Called in this order without waiting: the first two go alone, the rest gather into
      // batches that are reordered by contact for their locks, but never within one.
      const calls = Array.from({ length: 40 }, (_, i) => ({ from: sender(900 + (i % 3)), body: `${i}` }));
      const stored = await Promise.all(
        calls.map((c, i) => batcher.store({ whatsappNumber: c.from, profileName: 'Anna', body: c.body, mediaUrls: [], twilioSid: `SMorder${i}`, optChange: null, businessNumber: null })),
      );
      assert.ok(stored.every((s) => s !== null));
      const { rows } = await t.db.query<{ whatsapp_number: string; bodies: string[] }>(`
        select k.whatsapp_number, array_agg(m.body order by m.seq) as bodies
        from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id
        group by k.whatsapp_number order by k.whatsapp_number`);
      for (const row of rows) {
        const expected = calls.filter((c) => c.from === row.whatsapp_number).map((c) => c.body);
        assert.deepEqual(row.bodies, expected, `${row.whatsapp_number}: positions follow the order the messages came in`);
      }
      const commits = await t.db.query<{ n: number }>('select count(distinct xmin::text)::int as n from messages');
      assert.ok(commits.rows[0]!.n < 40, `40 messages in ${commits.rows[0]!.n} transactions`);
    } finally {
      await t.close();
    }
  });
}

// Two writers: while a contact's first message is still being written by one (a slow
// connection, say), the other finishes and takes the next batch. That batch must not hold
// the same contact's later message, or it can take the conversation's lock first.
test('a later message waits while the same contact\'s earlier one is still being written', async () => {
  const t = await freshServerDatabase();
  try {
    let delayed = false;
    const slowFirstStatement: Queryable = {
      async query(text, values) {
        if (!delayed) {
          delayed = true;
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        return t.db.query(text, values);
      },
      exec: (sql) => t.db.exec(sql),
    };
    const batcher = new InboundBatcher(slowFirstStatement);
    const message = (from: string, body: string, i: number) => ({ whatsappNumber: from, profileName: 'Anna', body, mediaUrls: [], twilioSid: `SMslow${i}`, optChange: null, businessNumber: null });
    const first = batcher.store(message(sender(950), 'first', 0));
    const other = batcher.store(message(sender(951), 'other', 1));
    await other;
    // The first is still being written: these gather into the next batch.
    const later = [batcher.store(message(sender(950), 'second', 2)), batcher.store(message(sender(952), 'unrelated', 3))];
    await Promise.all([first, ...later]);
    const { rows } = await t.db.query<{ bodies: string[] }>(`
      select array_agg(m.body order by m.seq) as bodies
      from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id
      where k.whatsapp_number = $1`, [sender(950)]);
    assert.deepEqual(rows[0]!.bodies, ['first', 'second']);
  } finally {
    await t.close();
  }
});

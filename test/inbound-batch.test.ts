// Group commit for the webhook: concurrent webhooks share a transaction, every answer waits
// for its own commit, redeliveries and positions behave as with one commit each, and a
// message that fails takes no other message of its batch down with it.
import assert from 'node:assert/strict';
import pg from 'pg';
import { after, before, describe, test } from 'node:test';
import { InboundBatcher } from '../src/jobs/inbound-batch.ts';
import { inboundStoreAndEnqueue, inboundStoreManyAndEnqueue } from '../src/jobs/autoreply.ts';
import type { InboundMessageInput } from '../src/messaging/conversations.ts';
import type { Queryable } from '../src/db/types.ts';
import { NOTIFY_CHANNEL } from '../src/queue/index.ts';
import { waitFor } from './helpers/processes.ts';
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
    // The first statement is held until the later messages are queued (not for a fixed time,
    // which a slow machine could outlast, leaving nothing to test).
    let delayed = false;
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((resolve) => (releaseFirst = resolve));
    const slowFirstStatement: Queryable = {
      async query(text, values) {
        if (!delayed) {
          delayed = true;
          await firstHeld;
        }
        return t.db.query(text, values);
      },
      exec: (sql) => t.db.exec(sql),
    };
    const batcher = new InboundBatcher(slowFirstStatement, { writers: 2 });
    const message = (from: string, body: string, i: number) => ({ whatsappNumber: from, profileName: 'Anna', body, mediaUrls: [], twilioSid: `SMslow${i}`, optChange: null, businessNumber: null });
    const first = batcher.store(message(sender(950), 'first', 0));
    const other = batcher.store(message(sender(951), 'other', 1));
    await other;
    // The first is still being written: these gather into the next batch.
    const later = [batcher.store(message(sender(950), 'second', 2)), batcher.store(message(sender(952), 'unrelated', 3))];
    await new Promise((resolve) => setTimeout(resolve, 50)); // the free writer takes what it may
    releaseFirst();
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

// Everything a stored message leaves behind, without ids and clocks: what must come out the
// same whether the messages were written one by one or as one batch.
async function storedState(db: Queryable): Promise<Record<string, Array<Record<string, unknown>>>> {
  const contacts = await db.query(`
    select whatsapp_number, profile_name, opted_out_at is not null as opted_out, opted_out_by from contacts order by whatsapp_number`);
  const conversations = await db.query(`
    select k.whatsapp_number, c.business_number, c.inbound_seq::int, c.last_inbound_at is not null as window_open
    from conversations c join contacts k on k.id = c.contact_id order by 1, 2`);
  const messages = await db.query(`
    select m.twilio_sid, m.body, m.media_urls, m.seq::int, m.status, m.source, k.whatsapp_number, c.business_number
    from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id order by m.twilio_sid`);
  const media = await db.query(`
    select m.twilio_sid, mm.position, mm.url, mm.content_type, mm.status
    from message_media mm join messages m on m.id = mm.message_id order by 1, 2`);
  const jobs = await db.query(`
    select m.twilio_sid, j.type, j.status, j.priority, j.max_attempts, j.attempts,
           j.ordering_key = m.conversation_id::text as keyed_by_conversation,
           j.payload - 'optIn' = jsonb_build_object('messageId', m.id, 'conversationId', m.conversation_id) as payload_matches,
           j.payload->'optIn' as opt_in
    from ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid order by 1`);
  return { contacts: contacts.rows, conversations: conversations.rows, messages: messages.rows, media: media.rows, jobs: jobs.rows };
}

for (const backend of BACKENDS) {
  test(`a batch stores exactly what the same messages stored one by one would (${backend.name})`, async () => {
    const message = (i: number, from: string, extra: Partial<InboundMessageInput> = {}): InboundMessageInput => ({
      whatsappNumber: from, profileName: `Name ${i}`, body: `body ${i}`, mediaUrls: [], twilioSid: `SMsame${String(i).padStart(3, '0')}`, optChange: null, businessNumber: null, ...extra,
    });
    // Stored before: an opted-out contact, and a message that is redelivered in the batch.
    const earlier = [
      message(1, sender(700), { optChange: 'out', body: 'STOP' }),
      message(2, sender(701)),
    ];
    // One batch: an opt-in, a start keyword from a contact who was not opted out, an
    // opt-out, a redelivery (its contact's new name must not be taken), media with and
    // without content types, a second business number, a new contact without a profile name.
    const batch = [
      message(3, sender(700), { optChange: 'in', body: 'START' }),
      message(8, sender(706), { optChange: 'in', body: 'Start' }),
      { ...message(2, sender(701)), profileName: 'Renamed by a redelivery' },
      message(4, sender(702), { optChange: 'out', body: 'stop' }),
      message(5, sender(703), { mediaUrls: ['https://api.twilio.com/a', 'https://api.twilio.com/b'], mediaContentTypes: ['audio/ogg'] }),
      message(6, sender(704), { businessNumber: '+31850000001' }),
      message(7, sender(705), { profileName: undefined }),
    ];
    const one = await backend.fresh();
    const set = await backend.fresh();
    try {
      for (const t of [one, set]) for (const m of earlier) await inboundStoreAndEnqueue(t.db, m);
      const oneByOne = [];
      for (const m of batch) oneByOne.push(await inboundStoreAndEnqueue(one.db, m));
      const together = await inboundStoreManyAndEnqueue(set.db, batch);
      assert.deepEqual(together.map((s) => s !== null), oneByOne.map((s) => s !== null), 'the same messages stored, the redelivery not');
      assert.equal(together[2], null);
      const state = await storedState(set.db);
      assert.deepEqual(state, await storedState(one.db));
      // A start keyword's job says whether it opted the contact in (autoreply.ts answers it otherwise).
      const optIn = Object.fromEntries(state['jobs']!.map((j) => [j['twilio_sid'], j['opt_in']]));
      assert.deepEqual([optIn['SMsame003'], optIn['SMsame008'], optIn['SMsame004'], optIn['SMsame005']], [true, false, null, null]);
      // The payloads name the stored rows.
      for (const [i, stored] of together.entries()) {
        if (!stored) continue;
        const { rows } = await set.db.query<{ twilio_sid: string; conversation_id: string }>('select twilio_sid, conversation_id from messages where id = $1', [stored.messageId]);
        assert.equal(rows[0]!.twilio_sid, batch[i]!.twilioSid);
        assert.equal(rows[0]!.conversation_id, stored.conversationId);
      }
    } finally {
      await one.close();
      await set.close();
    }
  });

  test(`storing wakes the workers when, and only when, the storing transaction commits (${backend.name})`, async () => {
    const t = await backend.fresh();
    let received = 0;
    const unlisten = await t.db.listen(NOTIFY_CHANNEL, () => received++);
    try {
      const input = (i: number): InboundMessageInput => ({ whatsappNumber: sender(900 + i), body: `${i}`, mediaUrls: [], twilioSid: `SMwake${i}`, optChange: null, businessNumber: null });
      const settle = () => new Promise((resolve) => setTimeout(resolve, 150));
      for (const store of [(tx: Queryable) => inboundStoreAndEnqueue(tx, input(1)), (tx: Queryable) => inboundStoreManyAndEnqueue(tx, [input(2), input(3)])]) {
        received = 0;
        await t.db.transaction(async (tx) => {
          await store(tx);
          await settle();
          assert.equal(received, 0, 'nobody is woken before the job is committed');
        });
        await waitFor(() => received > 0, 'the wake-up at commit', 5000);
        await settle();
        assert.equal(received, 1, 'one wake-up per store');
      }
      // A rolled-back store wakes nobody, whether it wrote one message or a batch.
      for (const store of [(tx: Queryable) => inboundStoreAndEnqueue(tx, input(4)), (tx: Queryable) => inboundStoreManyAndEnqueue(tx, [input(5), input(6)])]) {
        received = 0;
        await assert.rejects(
          t.db.transaction(async (tx) => {
            await store(tx);
            throw new Error('rolled back');
          }),
        );
        await settle();
        assert.equal(received, 0, 'a rolled-back store wakes nobody');
      }
      const { rows } = await t.db.query<{ n: number }>(`select count(*)::int as n from messages where twilio_sid in ('SMwake4', 'SMwake5', 'SMwake6')`);
      assert.equal(rows[0]!.n, 0, 'nothing of the rolled-back stores is kept');
    } finally {
      await unlisten();
      await t.close();
    }
  });

  test(`a batch holding two messages of one contact is refused whole, and the batcher never builds one (${backend.name})`, async () => {
    const t = await backend.fresh();
    try {
      const input = (i: number): InboundMessageInput => ({ whatsappNumber: sender(800), body: `${i}`, mediaUrls: [], twilioSid: `SMtwice${i}`, optChange: null, businessNumber: null });
      await assert.rejects(inboundStoreManyAndEnqueue(t.db, [input(1), input(2)]));
      const { rows } = await t.db.query<{ n: number }>('select count(*)::int as n from messages');
      assert.equal(rows[0]!.n, 0, 'nothing of the refused batch stored');
      const batcher = new InboundBatcher(t.db);
      const stored = await Promise.all([1, 2, 3, 4].map((i) => batcher.store(input(i))));
      assert.ok(stored.every((s) => s !== null));
      const seqs = await t.db.query<{ body: string; seq: number }>('select body, seq::int from messages order by seq');
      assert.deepEqual(seqs.rows.map((r) => [r.body, r.seq]), [['1', 1], ['2', 2], ['3', 3], ['4', 4]]);
    } finally {
      await t.close();
    }
  });
}

test('a START stored while a STOP of the same contact is still committing opts them back in, and its job says so', async () => {
  const t = await freshServerDatabase();
  const stopper = new pg.Client({ connectionString: t.directUrl });
  const starter = new pg.Client({ connectionString: t.directUrl });
  await stopper.connect();
  await starter.connect();
  const queryable = (client: pg.Client): Queryable => ({ query: (text: string, values?: unknown[]) => client.query(text, values) }) as unknown as Queryable;
  const message = (n: number, body: string, optChange: 'out' | 'in' | null): InboundMessageInput => ({
    whatsappNumber: sender(900), body, mediaUrls: [], twilioSid: `SMrace${n}`, optChange, businessNumber: null,
  });
  try {
    await inboundStoreAndEnqueue(t.db, message(0, 'hoi', null));
    // One store function, then the other: the START waits for the STOP's row lock either way.
    for (const [n, store] of [
      [1, (db: Queryable, m: InboundMessageInput) => inboundStoreAndEnqueue(db, m)],
      [3, (db: Queryable, m: InboundMessageInput) => inboundStoreManyAndEnqueue(db, [m, { ...m, whatsappNumber: sender(901), twilioSid: `${m.twilioSid}b` }])],
    ] as const) {
      await stopper.query('begin');
      await inboundStoreAndEnqueue(queryable(stopper), message(n, 'STOP', 'out'));
      const start = store(queryable(starter), message(n + 1, 'START', 'in'));
      await waitFor(async () => (await t.db.query(`select 1 from pg_locks where not granted`)).rowCount! > 0, 'the START waiting for the lock');
      await stopper.query('commit');
      await start;
      const state = await t.db.query<{ opted_out_at: Date | null; opt_in: boolean }>(
        `select k.opted_out_at, j.payload->'optIn' as opt_in from contacts k, ai_jobs j join messages m on m.id = (j.payload->>'messageId')::uuid
         where k.whatsapp_number = $1 and m.twilio_sid = $2`,
        [sender(900), `SMrace${n + 1}`],
      );
      assert.deepEqual(state.rows, [{ opted_out_at: null, opt_in: true }], `store ${n}: the START came after the STOP, so it opted them in`);
    }
  } finally {
    await stopper.end();
    await starter.end();
    await t.close();
  }
});

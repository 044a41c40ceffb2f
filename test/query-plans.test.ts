// The admin side's queries at an organisation's scale, judged by how many rows PostgreSQL
// visits (EXPLAIN ANALYZE) or how many times it reads a whole table (the transaction's own
// statistics), not by time: a query that walks a whole thread, or every thread,
// per row of its answer passes every functional test on small data and takes seconds on a
// real database. Data is generated in SQL, analysed, then the app's own functions run
// against it through a Queryable that also explains each statement.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import type { Database, Queryable } from '../src/db/types.ts';
import { conversationList } from '../src/http/admin/conversation-queries.ts';
import { repliesSuperseded } from '../src/messaging/conversations.ts';
import { personErase } from '../src/privacy/erasure.ts';
import { personExport } from '../src/privacy/export.ts';
import { freshServerDatabase, type TestDatabase } from './helpers/db.ts';

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}

interface Explained {
  sql: string;
  plan: PlanNode;
}

/** Runs `work` against `db`, with every statement it sends explained (analysed) too. */
async function explained(db: Queryable, work: (db: Queryable) => Promise<unknown>): Promise<Explained[]> {
  const plans: Explained[] = [];
  const explaining: Queryable = {
    async query(text, values) {
      const result = await db.query<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>(`explain (analyze, format json) ${text}`, values);
      plans.push({ sql: text, plan: result.rows[0]!['QUERY PLAN'][0]!.Plan });
      return db.query(text, values);
    },
    exec: (sql) => db.exec(sql),
  };
  await work(explaining);
  return plans;
}

function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

/**
 * The rows every node of the plan produced or discarded, over all its loops: what the query
 * cost in rows, whichever way the planner read them (an index scan repeated per outer row,
 * or one scan materialised and compared per outer row by a join filter).
 */
function rowsHandled(plan: PlanNode): number {
  return nodes(plan).reduce(
    (sum, n) =>
      sum + ((n['Actual Rows'] ?? 0) + (n['Rows Removed by Filter'] ?? 0) + (n['Rows Removed by Join Filter'] ?? 0) + (n['Rows Removed by Index Recheck'] ?? 0)) * (n['Actual Loops'] ?? 1),
    0,
  );
}

// 60 conversations of 20 messages, and one of 3,000 (1,500 questions, each answered) whose
// last 400 replies Twilio refused for now (send_failed: an outage), as the newest.
const CONVERSATIONS = 60;
const HOT_QUESTIONS = 1_500;
const HOT_FAILED = 400;

async function seed(db: Queryable): Promise<void> {
  await db.exec(`
    insert into contacts (whatsapp_number, profile_name)
    select '+1555' || lpad(g::text, 7, '0'), 'Person ' || g from generate_series(1, ${CONVERSATIONS + 1}) g;
    insert into conversations (contact_id, last_message_at, inbound_seq)
    select id, now() - (row_number() over (order by whatsapp_number desc)) * interval '1 minute',
           case when whatsapp_number = '+1555' || lpad('${CONVERSATIONS + 1}', 7, '0') then ${HOT_QUESTIONS} else 10 end
    from contacts;
    create temp table questions as
      select gen_random_uuid() as id, c.id as conversation_id, s as seq, c.inbound_seq as total,
             c.last_message_at - (c.inbound_seq - s + 1) * interval '1 minute' as at
      from conversations c, generate_series(1, c.inbound_seq) s;
    insert into messages (id, conversation_id, source, body, twilio_sid, status, seq, created_at)
    select id, conversation_id, 'inbound', 'question ' || seq, 'SMin' || replace(id::text, '-', ''), 'received', seq, at from questions;
    insert into messages (conversation_id, source, body, twilio_sid, status, reply_to_message_id, context_until_seq, created_at)
    select conversation_id, 'ai', 'answer ' || seq,
           case when seq > total - ${HOT_FAILED} and total = ${HOT_QUESTIONS} then null else 'SMout' || replace(gen_random_uuid()::text, '-', '') end,
           case when seq > total - ${HOT_FAILED} and total = ${HOT_QUESTIONS} then 'send_failed' else 'delivered' end,
           id, seq, at + interval '5 seconds'
    from questions;
    drop table questions;
    analyze contacts, conversations, messages, suggestions;`);
}

describe('query plans at scale', () => {
  let t: TestDatabase;
  before(async () => {
    t = await freshServerDatabase();
    await seed(t.db);
  });
  after(() => t?.close());

  test('the conversation list reads the problem replies of a long thread, not the thread once per problem reply', async () => {
    const statements = await explained(t.db, (db) => conversationList(db, { limit: 50 }));
    const page = await conversationList(t.db, { limit: 50 });
    assert.equal(page.conversations[0]!.problems, HOT_FAILED, 'the outage conversation shows its unanswered replies');
    assert.equal(page.conversations[1]!.problems, 0);
    assert.equal(statements.length, 1);
    // The page's 50 threads hold 3,000 + 49 × 20 messages; without the indexes of 0033 each
    // of the 400 problem replies was compared with the 1,500 replies of its thread (over
    // 400,000 rows). Now: the last message of each thread, its problem replies, one probe
    // each.
    const handled = rowsHandled(statements[0]!.plan);
    assert.ok(handled < 10_000, `rows handled: ${handled}`);
  });

  test("a long thread's page asks each problem reply once whether a later reply answered for it", async () => {
    const hot = await t.db.query<{ id: string }>('select id from conversations where inbound_seq = $1', [HOT_QUESTIONS]);
    const statements = await explained(t.db, (db) => repliesSuperseded(db, hot.rows[0]!.id));
    assert.equal((await repliesSuperseded(t.db, hot.rows[0]!.id)).size, 0, 'nothing answered for the outage replies');
    // With the conversation a constant, the planner compared every problem reply with every
    // answering reply of the thread (400 × 1,100: 440,000 rows); a probe per reply reads
    // the index entries at or past its position.
    const handled = rowsHandled(statements[0]!.plan);
    assert.ok(handled < 10_000, `rows handled: ${handled}`);
  });

  test("erasing a person deletes their messages without reading the whole table once per message", async () => {
    // A person with 150 questions answered, and a suggestion drafted for every inbound
    // message (suggest mode), then analysed as autovacuum would.
    await t.db.exec(`
      insert into contacts (whatsapp_number) values ('+15559990000');
      insert into conversations (contact_id, inbound_seq) select id, 150 from contacts where whatsapp_number = '+15559990000';
      insert into messages (conversation_id, source, body, twilio_sid, status, seq, created_at)
      select c.id, 'inbound', 'question ' || s, 'SMerase' || s, 'received', s, now() - interval '1 day' + s * interval '1 minute'
      from conversations c join contacts k on k.id = c.contact_id, generate_series(1, 150) s where k.whatsapp_number = '+15559990000';
      insert into messages (conversation_id, source, body, twilio_sid, status, reply_to_message_id, context_until_seq, created_at)
      select conversation_id, 'ai', 'answer', 'SMerased' || seq, 'delivered', id, seq, created_at + interval '5 seconds'
      from messages where twilio_sid like 'SMerase%' and source = 'inbound';
      insert into suggestions (conversation_id, message_id, body, status, provider, model, decided_at)
      select conversation_id, id, 'draft', 'discarded', 'fake', 'fake', now() from messages where source = 'inbound';
      analyze messages, suggestions;`);
    // One session, so that the transaction's own statistics (pg_stat_xact_user_tables) show
    // what the erasure read, the foreign keys' lookups included, before it commits.
    const client = new pg.Client({ connectionString: t.directUrl });
    await client.connect();
    let scans: Record<string, number> = {};
    const session: Database = {
      kind: 'pg',
      query: (text, values) => client.query(text, values) as never,
      exec: async (sql) => void (await client.query(sql)),
      async transaction(work) {
        await client.query('begin');
        try {
          const result = await work(session);
          const stats = await client.query<{ relname: string; seq_scan: string }>("select relname, seq_scan from pg_stat_xact_user_tables where relname in ('messages', 'suggestions')");
          scans = Object.fromEntries(stats.rows.map((r) => [r.relname, Number(r.seq_scan)]));
          await client.query('commit');
          return result;
        } catch (err) {
          await client.query('rollback');
          throw err;
        }
      },
      listen: () => Promise.reject(new Error('not used')),
      close: () => client.end(),
    } as Database;
    try {
      const outcome = await personErase(session, '+15559990000', 'test');
      assert.equal(outcome.status, 'erased');
      assert.equal(outcome.status === 'erased' && outcome.counts.messages, 300);
      // The error texts that may quote the number are searched by a scan, once per form of
      // the number; without 0033's indexes each of the 300 deleted messages cost a scan of
      // messages (clearing replies' reply_to_message_id) and of suggestions (sent_message_id).
      assert.ok(scans.messages! <= 5, `sequential scans of messages: ${scans.messages}`);
      assert.ok(scans.suggestions! <= 5, `sequential scans of suggestions: ${scans.suggestions}`);
    } finally {
      await client.end();
    }
  });

  test("a person's export finds the failure texts that name them without reading every message", async () => {
    await t.db.exec(`
      update messages set error_message = 'not sent: Twilio is unavailable (HTTP 503)' where status = 'send_failed';
      analyze messages;`);
    const statements = await explained(t.db, (db) => personExport(db, '+15550000001'));
    const searches = statements.filter((s) => s.sql.includes('from messages where error_message'));
    assert.ok(searches.length > 0, 'the export searched the failure texts');
    // 400 texts among 3,000+ messages: read through 0033's index of the messages that have
    // one, not by a scan of the table for each written form of the number.
    for (const search of searches) {
      const scans = nodes(search.plan).filter((n) => n['Relation Name'] === 'messages').map((n) => n['Node Type']);
      assert.ok(!scans.includes('Seq Scan'), `messages read by: ${scans.join(', ')}`);
    }
  });

  // A contact whose number WhatsApp cannot reach: every reply comes back undelivered, each a
  // problem reply that answers nothing. Through 0033's index, which held undelivered replies,
  // each one's "answered since?" probe read every later one and discarded it (400 × 400 / 2).
  test("a thread of undelivered replies asks each one whether a later reply answered for it without reading the others", async () => {
    await t.db.exec(`
      insert into contacts (whatsapp_number, profile_name) values ('+15559999999', 'Unreachable');
      insert into conversations (contact_id, last_message_at, inbound_seq)
      select id, now() - interval '1 day', ${HOT_FAILED} from contacts where whatsapp_number = '+15559999999';
      create temp table questions as
        select gen_random_uuid() as id, c.id as conversation_id, s as seq, c.last_message_at - (${HOT_FAILED} - s + 1) * interval '1 minute' as at
        from conversations c join contacts k on k.id = c.contact_id, generate_series(1, ${HOT_FAILED}) s
        where k.whatsapp_number = '+15559999999';
      insert into messages (id, conversation_id, source, body, twilio_sid, status, seq, created_at)
      select id, conversation_id, 'inbound', 'question ' || seq, 'SMin' || replace(id::text, '-', ''), 'received', seq, at from questions;
      insert into messages (conversation_id, source, body, twilio_sid, status, error_code, reply_to_message_id, context_until_seq, created_at)
      select conversation_id, 'ai', 'answer ' || seq, 'SMout' || replace(gen_random_uuid()::text, '-', ''), 'undelivered', 63024, id, seq, at + interval '5 seconds'
      from questions;
      drop table questions;
      analyze messages;`);
    const unreachable = await t.db.query<{ id: string }>(`select c.id from conversations c join contacts k on k.id = c.contact_id where k.whatsapp_number = '+15559999999'`);
    const statements = await explained(t.db, (db) => repliesSuperseded(db, unreachable.rows[0]!.id));
    assert.equal((await repliesSuperseded(t.db, unreachable.rows[0]!.id)).size, 0, 'no reply answered for them');
    const handled = rowsHandled(statements[0]!.plan);
    assert.ok(handled < 10_000, `rows handled: ${handled}`);
  });
});

// History for the benchmarks that should not run on an empty database (issue #18): a
// migrated aiq database as it looks after months of use, with `count` stored messages,
// answered and finished, spread over many contacts. Set-based SQL (generate_series), a few
// statements: a million messages take under a minute, not the hours a million webhooks would.
import pg from 'pg';

export interface PrefillSummary {
  contacts: number;
  conversations: number;
  /** Inbound plus outbound: `count` rounded down to an even number. */
  messages: number;
  /** Finished (`done`) autoreply jobs, one per inbound message. */
  jobs: number;
  ms: number;
}

/** How the prefilled rows look, for the benchmarks that build on them. */
export const PREFILL = {
  /** Contact i (0-based) is whatsapp:+3161 followed by i in 7 digits. */
  numberOf: (contact: number) => `+3161${String(contact).padStart(7, '0')}`,
  /** Contacts (one conversation each, with the default business number) unless told otherwise. */
  conversations: 20_000,
  /** The messages span this many days before the prefill, evenly. */
  days: 90,
} as const;

// $1 pairs (inbound message + its AI reply), $2 conversations (≤ pairs), $3 the first
// message's time, $4 seconds between two inbound messages. Pair k belongs to conversation
// k % $2 and is its inbound message number k / $2 + 1 (conversations.inbound_seq is the
// last of them), so the webhook's next message takes the next position as it would in use.
// Ids are md5-derived version-4 uuids: as spread as gen_random_uuid() in the indexes (the
// ids of an install from before time-ordered ids, 0016), valid where the app checks them
// (job payloads are validated as RFC 9562 uuids), and computable
// from k, so replies and jobs reference their message without a join. Twilio SIDs start with
// SMf (inbound) and SMe (replies): never one the webhook benchmark posts (SM000…).
/** SQL for a version-4 uuid derived from `key` (an SQL text expression): md5's bits, version and variant set. */
const uuidOf = (key: string) => `overlay(overlay(md5(${key}) placing '4' from 13) placing '8' from 17)::uuid`;

const CONTACTS_SQL = `
  insert into contacts (id, whatsapp_number, profile_name, created_at, updated_at)
  select ${uuidOf("'aiq-prefill-contact-' || c")}, '+3161' || lpad(c::text, 7, '0'), 'Prefill ' || c, $1::timestamptz, $1::timestamptz
  from generate_series(0, $2::int - 1) as c`;

const CONVERSATIONS_SQL = `
  insert into conversations (id, contact_id, inbound_seq, last_message_at, last_inbound_at, created_at)
  select ${uuidOf("'aiq-prefill-conversation-' || c")}, ${uuidOf("'aiq-prefill-contact-' || c")}, n.inbound,
         $3::timestamptz + make_interval(secs => n.last_k * $4::float8 + 2), $3::timestamptz + make_interval(secs => n.last_k * $4::float8),
         $3::timestamptz
  from generate_series(0, $2::int - 1) as c,
       lateral (select ($1::int - 1 - c) / $2::int + 1 as inbound,
                       c + (($1::int - 1 - c) / $2::int) * $2::int as last_k) as n`;

// Inbound message k, then its reply (i = 2k, 2k + 1): the heap holds them in time order,
// interleaved as the webhook and the worker would have written them.
const MESSAGES_SQL = `
  insert into messages (id, conversation_id, source, body, twilio_sid, status, seq, reply_to_message_id,
                        context_until_seq, send_started_at, status_updated_at, created_at)
  select case when reply then ${uuidOf("'aiq-prefill-reply-' || k")} else ${uuidOf("'aiq-prefill-inbound-' || k")} end,
         ${uuidOf("'aiq-prefill-conversation-' || (k % $2::int)")},
         case when reply then 'ai' else 'inbound' end,
         case when reply
           then 'Thanks for your message ' || k || '. Here is what the handbook says about it, in a few sentences, as a reply would: opening hours, who to ask, and where to find the form.'
           else 'Prefilled question ' || k || ': when is the office open and who do I ask about leave?' end,
         case when reply then 'SMe' else 'SMf' end || lpad(to_hex(k), 31, '0'),
         case when reply then 'delivered' else 'received' end,
         case when reply then null else k / $2::int + 1 end,
         case when reply then ${uuidOf("'aiq-prefill-inbound-' || k")} end,
         case when reply then k / $2::int + 1 end,
         case when reply then at + interval '2 seconds' end,
         at + case when reply then interval '4 seconds' else interval '0' end,
         at + case when reply then interval '2 seconds' else interval '0' end
  from generate_series(0, 2 * $1::bigint - 1) as i,
       lateral (select i / 2 as k, i % 2 = 1 as reply) as r,
       lateral (select $3::timestamptz + make_interval(secs => r.k * $4::float8) as at) as t`;

// The autoreply job of inbound message k, finished: the columns the queue's insert, claim and
// completion would have left (0001_queue.sql's checks: done has finished_at, no lease).
const JOBS_SQL = `
  insert into ai_jobs (type, payload, status, priority, ordering_key, attempts, max_attempts, next_run_at,
                       result, locked_by, attempted_at, created_at, updated_at, finished_at)
  select 'autoreply',
         jsonb_build_object('messageId', ${uuidOf("'aiq-prefill-inbound-' || k")}, 'conversationId', conversation),
         'done', 0, conversation::text, 1, 5, at,
         jsonb_build_object('replyId', ${uuidOf("'aiq-prefill-reply-' || k")}, 'status', 'queued', 'sid', 'SMe' || lpad(to_hex(k), 31, '0')),
         'prefill', at + interval '10 milliseconds', at, at + interval '3 seconds', at + interval '3 seconds'
  from generate_series(0, $1::bigint - 1) as k,
       lateral (select ${uuidOf("'aiq-prefill-conversation-' || (k % $2::int)")} as conversation,
                       $3::timestamptz + make_interval(secs => k * $4::float8) as at) as t`;

/**
 * Fills a freshly migrated aiq database (migrate(openPostgres(…)) as bench/webhook.ts does,
 * no messages yet) with `count` stored messages: count / 2 inbound messages, each answered
 * by a delivered AI reply and with its `done` autoreply job, round-robin over 20,000
 * contacts (fewer when there are fewer inbound messages; options.conversations to choose),
 * each with one conversation, over the last 90 days. Contact i is PREFILL.numberOf(i),
 * +31610000000 on: the webhook benchmark's 1,000 senders are among them and write into
 * conversations with history; the pipeline benchmark's senders (+3162…) are not. Then `vacuum
 * analyze` and a checkpoint, as a server that grew these rows over months would be: its
 * autovacuum would have vacuumed and analyzed the tables (visibility map, hint bits,
 * planner statistics) and its checkpoints would have written them out long ago, so the
 * measured run pays for neither. The checkpoint is skipped for a role not allowed to run it.
 */
export async function prefillMessages(url: string, count: number, options: { conversations?: number } = {}): Promise<PrefillSummary> {
  const started = Date.now();
  const pairs = Math.floor(count / 2);
  const conversations = Math.max(1, Math.min(options.conversations ?? PREFILL.conversations, pairs));
  if (pairs === 0) return { contacts: 0, conversations: 0, messages: 0, jobs: 0, ms: 0 };
  if (conversations > 10_000_000) throw new Error('prefillMessages: at most 10,000,000 conversations (7-digit numbers)');
  const first = new Date(Date.now() - PREFILL.days * 86_400_000);
  // The last reply is 5 s before now at the latest: nothing is dated in the future.
  const step = (PREFILL.days * 86_400 - 5) / pairs;
  const superuser = await withClient(url, async (client) => {
    const used = await client.query<{ used: boolean }>('select exists (select 1 from messages) or exists (select 1 from contacts) as used');
    if (used.rows[0]!.used) throw new Error('prefillMessages: the database already has messages or contacts; prefill a fresh one');
    return (await client.query<{ su: boolean }>('select rolsuper as su from pg_roles where rolname = current_user')).rows[0]?.su === true;
  });
  const load = (sql: string, values: unknown[]) =>
    withClient(url, async (client) => {
      await client.query('begin');
      // generate_series materialises its rows: in memory rather than in a temporary file.
      await client.query(`set local work_mem = '64MB'`);
      // The rows reference each other correctly by construction (ids computed from k), so a
      // superuser loads them as a restore would, without the per-row foreign-key triggers:
      // they were half the messages insert's time. This also skips the statement-level
      // NOTIFY of ai_jobs (no worker listens) and nothing else: the schema has no other
      // triggers these inserts would fire.
      if (superuser) await client.query(`set local session_replication_role = replica`);
      await client.query(sql, values);
      await client.query('commit');
    });
  await load(CONTACTS_SQL, [first, conversations]);
  await load(CONVERSATIONS_SQL, [pairs, conversations, first, step]);
  // Messages and jobs reference each other only inside the payload: loaded side by side,
  // each in its own transaction (a failed prefill leaves a database to drop, not to use).
  await Promise.all([load(MESSAGES_SQL, [pairs, conversations, first, step]), load(JOBS_SQL, [pairs, conversations, first, step])]);
  const vacuum = (tables: string) =>
    withClient(url, async (client) => {
      await client.query(`set maintenance_work_mem = '256MB'`);
      await client.query(`vacuum analyze ${tables}`);
    });
  await Promise.all([vacuum('messages'), vacuum('ai_jobs, contacts, conversations')]);
  await withClient(url, (client) =>
    client.query('checkpoint').catch((err: { code?: string }) => {
      if (err.code !== '42501') throw err; // insufficient_privilege: needs superuser or pg_checkpoint
    }),
  );
  return { contacts: conversations, conversations, messages: 2 * pairs, jobs: pairs, ms: Date.now() - started };
}

async function withClient<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'aiq-bench-prefill' });
  await client.connect();
  try {
    return await work(client);
  } finally {
    // A failed statement leaves its transaction open: ending the connection rolls it back.
    await client.end();
  }
}

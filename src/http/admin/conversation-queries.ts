// The inbox query the conversation list needs and messaging/ does not have: conversations
// newest first with their last message and markers (outbound problems, pending
// suggestions, waiting for a reply). Keyset-paged on (last_message_at, id), the time to the
// microsecond (a cursor cut to the millisecond skipped conversations active in the same one).
import { escapeLike } from '../../db/like.ts';
import type { Queryable } from '../../db/types.ts';
import { phoneSearchOf } from '../../knowledge/people.ts';
import { answeredSinceSql, answeredUpToSql, UNDELIVERED_REPLY_STATUSES_SQL } from '../../messaging/conversations.ts';
import { cursorTimeSql, timeCursorDecode, timeCursorEncode } from '../../queue/index.ts';

export interface ConversationSummary {
  id: string;
  whatsappNumber: string;
  profileName: string | null;
  /** The business number written to; null: the default sender. */
  businessNumber: string | null;
  aiPaused: boolean;
  /** The contact opted out: nothing is sent to them. */
  optedOut: boolean;
  lastMessageAt: Date;
  lastBody: string | null;
  lastSource: 'inbound' | 'ai' | 'admin' | null;
  /**
   * A message of the contact's with something to answer (text or media) that no reply has
   * answered yet: not a reaction after the answer, but a question that came in while the
   * admin wrote theirs, or one whose reply never reached the contact.
   */
  awaitingReply: boolean;
  /**
   * Replies that failed, were refused, or are flagged for a human, and that no later reply
   * has answered for (a superseded one keeps its status in the thread, with nothing to do).
   */
  problems: number;
  pendingSuggestions: number;
}

// The markers are per-row subqueries over a page of at most 100 conversations, each on the
// (conversation_id, …) indexes; `$3` searches number and name. A reply that did not go out
// counts until a later reply answers what it answered (answeredSinceSql): then the contact
// has had their answer and the badge would only send an admin to a conversation to find
// nothing to do. That question is a lateral `limit 1`, one probe of messages_answering_idx
// per problem reply (migration 0033): as a `not exists` the planner may instead read the
// thread's answering replies once and compare each problem reply with all of them.
// Awaiting a reply: an inbound message past the highest position any reply answered (as
// the reply job's thread reads it: one entry of messages_answering_idx) that holds
// something to answer, found through messages_inbound_seq_idx. "The newest message is the
// contact's" said so of a reaction after the answer (no text, nothing to answer), and not
// of a question an admin's reply written on an older page left open.
const LIST_SQL = `
  select c.id, k.whatsapp_number, k.profile_name, c.business_number, c.ai_paused, k.opted_out_at is not null as opted_out, c.last_message_at,
         ${cursorTimeSql('c.last_message_at')} as cursor_at, last.body as last_body, last.source as last_source,
         (select count(*) from messages m
          left join lateral (${answeredSinceSql('m')} limit 1) answered on true
          where m.conversation_id = c.id and m.source <> 'inbound'
            and m.status in ${UNDELIVERED_REPLY_STATUSES_SQL}
            and answered.id is null)::int as problems,
         (select count(*) from suggestions s where s.conversation_id = c.id and s.status = 'pending')::int as pending_suggestions,
         exists (select 1 from messages i
                 where i.conversation_id = c.id and i.source = 'inbound'
                   and i.seq > (${answeredUpToSql('c.id')})
                   and (i.body ~ '\\S' or cardinality(i.media_urls) > 0)) as awaiting_reply
  from conversations c
  join contacts k on k.id = c.contact_id
  left join lateral (
    select body, source from messages m where m.conversation_id = c.id order by created_at desc, id desc limit 1
  ) last on true
  where ($1::timestamptz is null or (c.last_message_at, c.id) < ($1, $2::uuid))
    and ($3::text is null or k.whatsapp_number like '%' || $3 || '%' or k.profile_name ilike '%' || $3 || '%'
         or k.whatsapp_number like any($6::text[]))
    and ($5::text is null or ($5 = 'default' and c.business_number is null) or c.business_number = $5)
  order by c.last_message_at desc, c.id desc
  limit $4`;

export interface ConversationPage {
  conversations: ConversationSummary[];
  nextCursor: string | null;
}

/**
 * Conversations, latest activity first; `number` keeps those on one business number
 * (`default`: the default sender's).
 */
export async function conversationList(db: Queryable, options: { search?: string; after?: string; limit?: number; number?: string } = {}): Promise<ConversationPage> {
  const limit = Math.min(Math.max(options.limit ?? 50, 1), 100);
  const cursor = timeCursorDecode(options.after);
  const search = options.search ? escapeLike(options.search) : null;
  const result = await db.query<{
    id: string;
    whatsapp_number: string;
    profile_name: string | null;
    business_number: string | null;
    ai_paused: boolean;
    opted_out: boolean;
    last_message_at: Date;
    cursor_at: string;
    last_body: string | null;
    last_source: ConversationSummary['lastSource'];
    problems: number;
    pending_suggestions: number;
    awaiting_reply: boolean;
  }>(LIST_SQL, [cursor?.time ?? null, cursor?.id ?? null, search, limit + 1, options.number ?? null, options.search ? phoneSearchOf(options.search) : null]);
  const conversations = result.rows.slice(0, limit).map((r) => ({
    id: r.id,
    whatsappNumber: r.whatsapp_number,
    profileName: r.profile_name,
    businessNumber: r.business_number,
    aiPaused: r.ai_paused,
    optedOut: r.opted_out,
    lastMessageAt: r.last_message_at,
    lastBody: r.last_body,
    lastSource: r.last_source,
    awaitingReply: r.awaiting_reply,
    problems: r.problems,
    pendingSuggestions: r.pending_suggestions,
  }));
  const last = result.rows[limit - 1];
  const nextCursor = result.rows.length > limit && last ? timeCursorEncode(last.cursor_at, last.id) : null;
  return { conversations, nextCursor };
}

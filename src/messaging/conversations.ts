// The conversation store: contacts, conversations and their messages, read and written with
// static parameterised SQL. Functions are noun-verb and take any Queryable, so the webhook
// runs them inside its one transaction. The reply outbox's statements live in outbox.ts.
// Knows nothing of HTTP, Twilio's wire format or the queue.
import type { Queryable } from '../db/types.ts';

export type MessageSource = 'inbound' | 'ai' | 'admin';

/** Twilio's delivery statuses, as status callbacks report them. */
export const TWILIO_STATUSES = ['accepted', 'scheduled', 'queued', 'sending', 'sent', 'delivered', 'read', 'undelivered', 'failed', 'canceled'] as const;
export type TwilioStatus = (typeof TWILIO_STATUSES)[number];

/** Our outbox states (see 0002_messaging.sql, 0008_reply_parts.sql), plus `received` for inbound messages. */
export type MessageStatus = 'received' | 'unsent' | 'pending' | 'send_failed' | 'unconfirmed' | 'flagged' | 'held' | 'logged' | TwilioStatus;

/** A contact's WhatsApp thread, with the contact's number and name. */
export interface Conversation {
  id: string;
  contactId: string;
  /** E.164, e.g. +31612345678. */
  whatsappNumber: string;
  profileName: string | null;
  /** The business number the contact wrote to (E.164); null: the default sender. */
  businessNumber: string | null;
  aiPaused: boolean;
  /** Set while the contact is opted out (opt-out.ts); by their keyword or an admin. */
  optedOutAt: Date | null;
  optedOutBy: 'contact' | 'admin' | null;
  /** The contact's last message: WhatsApp's 24-hour window for free-form replies runs from it. */
  lastInboundAt: Date | null;
  lastMessageAt: Date;
  createdAt: Date;
}

/** One message in or out; outbound ones are also the reply outbox (see outbox.ts). */
export interface Message {
  id: string;
  conversationId: string;
  source: MessageSource;
  direction: 'inbound' | 'outbound';
  body: string;
  mediaUrls: string[];
  twilioSid: string | null;
  status: MessageStatus;
  errorCode: number | null;
  errorMessage: string | null;
  /**
   * A failed send (`send_failed`) that Twilio answered with a 5xx: it may have gone out all
   * the same, so Twilio's list is asked before anything else (SendError.maybeSent).
   */
  maybeSent: boolean;
  replyToMessageId: string | null;
  /** Inbound: the Twilio SID of the message it quotes (a swipe-to-reply), if any; see quotes.ts. */
  repliedToSid: string | null;
  /** Inbound: its position in the conversation, in the order messages became visible. */
  seq: number | null;
  /** Replies: the highest inbound position they answered (see 0006_inbound_sequence.sql). */
  contextUntilSeq: number | null;
  /** A reply split to fit the channel: this is part `part` of `parts` (1 of 1 otherwise). */
  part: number;
  parts: number;
  /** AI replies (first part): what the reply drew on. */
  citations: Citations | null;
  /** Sent as this approved template (outside the 24-hour window), else null. */
  templateSid: string | null;
  sendStartedAt: Date | null;
  statusUpdatedAt: Date;
  createdAt: Date;
}

/**
 * A reply's sources: the chunks its prompt carried, as they were (chunks are replaced when
 * their document changes), with the relevance that let them in, or the "I don't know" path
 * when nothing reached the threshold. Stored with the reply and shown in the dashboard.
 */
export interface Citations {
  sources: Array<{ chunkId: string; documentId: string; title: string; headingPath: string[]; score: number; relevance: number }>;
  /** The best chunk's relevance and the threshold it was held against. */
  relevance: number;
  threshold: number;
  /** Nothing was relevant enough: the reply was told to say it does not know. */
  noAnswer: boolean;
}

interface MessageRow {
  id: string;
  conversation_id: string;
  source: MessageSource;
  direction: 'inbound' | 'outbound';
  body: string;
  media_urls: string[];
  twilio_sid: string | null;
  status: MessageStatus;
  error_code: number | null;
  error_message: string | null;
  maybe_sent?: boolean;
  reply_to_message_id: string | null;
  replied_to_sid?: string | null;
  seq: string | null;
  context_until_seq: string | null;
  part: number;
  parts: number;
  citations: Citations | null;
  template_sid: string | null;
  send_started_at: Date | null;
  status_updated_at: Date;
  created_at: Date;
}

/** Maps a `messages` row (select *) to a Message. */
export function messageFromRow(row: MessageRow): Message {
  return {
    id: row.id,
    conversationId: row.conversation_id,
    source: row.source,
    direction: row.direction,
    body: row.body,
    mediaUrls: row.media_urls ?? [],
    twilioSid: row.twilio_sid,
    status: row.status,
    errorCode: row.error_code,
    errorMessage: row.error_message,
    maybeSent: row.maybe_sent ?? false,
    replyToMessageId: row.reply_to_message_id,
    repliedToSid: row.replied_to_sid ?? null,
    // bigint arrives as text from node-postgres; positions stay far below 2^53.
    seq: row.seq === null ? null : Number(row.seq),
    contextUntilSeq: row.context_until_seq === null ? null : Number(row.context_until_seq),
    part: row.part,
    parts: row.parts,
    citations: row.citations ?? null,
    templateSid: row.template_sid ?? null,
    sendStartedAt: row.send_started_at,
    statusUpdatedAt: row.status_updated_at,
    createdAt: row.created_at,
  };
}

/** An inbound WhatsApp message as the webhook receives it (stored by jobs/autoreply.ts). */
export interface InboundMessageInput {
  /** E.164 without the `whatsapp:` prefix. */
  whatsappNumber: string;
  profileName?: string;
  body: string;
  mediaUrls: string[];
  /** MediaContentTypeN, in the order of `mediaUrls`. */
  mediaContentTypes?: string[];
  twilioSid: string;
  /** The message is an opt-out or opt-in keyword: recorded on the contact as it is stored. */
  optChange?: 'out' | 'in' | null;
  /** The business number it was sent to (profiles.conversationNumber); null: the default sender. */
  businessNumber?: string | null;
  /** The message it quotes (OriginalRepliedMessageSid), if any. */
  repliedToSid?: string | null;
}

const CONVERSATION_COLUMNS = `
  c.id as conversation_id, c.contact_id, k.whatsapp_number, k.profile_name, c.business_number, c.ai_paused,
  k.opted_out_at, k.opted_out_by, c.last_inbound_at, c.last_message_at, c.created_at as conversation_created_at`;

const CONVERSATION_SQL = `
  select ${CONVERSATION_COLUMNS}
  from conversations c
  join contacts k on k.id = c.contact_id
  where c.id = $1`;

interface ConversationRow {
  conversation_id: string;
  contact_id: string;
  whatsapp_number: string;
  profile_name: string | null;
  business_number: string | null;
  ai_paused: boolean;
  opted_out_at: Date | null;
  opted_out_by: 'contact' | 'admin' | null;
  last_inbound_at: Date | null;
  last_message_at: Date;
  conversation_created_at: Date;
}

function conversationFromRow(row: ConversationRow): Conversation {
  return {
    id: row.conversation_id,
    contactId: row.contact_id,
    whatsappNumber: row.whatsapp_number,
    profileName: row.profile_name,
    businessNumber: row.business_number,
    aiPaused: row.ai_paused,
    optedOutAt: row.opted_out_at,
    optedOutBy: row.opted_out_by,
    lastInboundAt: row.last_inbound_at,
    lastMessageAt: row.last_message_at,
    createdAt: row.conversation_created_at,
  };
}

/** A conversation with its contact's number and name, or null. */
export async function conversationGet(db: Queryable, id: string): Promise<Conversation | null> {
  const result = await db.query<ConversationRow>(CONVERSATION_SQL, [id]);
  const row = result.rows[0];
  return row ? conversationFromRow(row) : null;
}

/**
 * Replies that answer nothing, as SQL: refused by Twilio or the API (failed), taken by
 * Twilio and then reported not delivered (undelivered: final, as failed is; WhatsApp reports
 * a closed window's 63016, an invalid recipient's 63024 or a phone off past the message's
 * validity that way), not sent for now (send_failed), or held outside the 24-hour window,
 * never handed to Twilio. The contact's question stays open, so the next reply answers it,
 * and none of them is shown to the model as said (reply-context.ts, historyOf).
 */
// messages_answering_idx (migration 0034) holds the replies outside this list: a change here
// needs a migration that rebuilds it, or "answered since" reads whole threads again (a status
// taken out of the list), or reads and discards every reply of an added one past its position.
const ANSWERS_NOTHING_SQL = `('failed', 'undelivered', 'send_failed', 'held')`;

/**
 * Whether the reply (or part) `m` (an alias, or the table's name) answers what it covered:
 * it is not undelivered itself, nor a part still `unsent` behind an undelivered earlier
 * part of its reply (held outside the window, refused): a later part never goes out before
 * an earlier one, so it would never reach the contact either.
 */
export const answersSomethingSql = (m: string) => `(${m}.status not in ${ANSWERS_NOTHING_SQL}
  and not (${m}.status = 'unsent' and exists (
    select 1 from messages earlier_part
    where earlier_part.conversation_id = ${m}.conversation_id and earlier_part.source = ${m}.source
      and earlier_part.reply_to_message_id = ${m}.reply_to_message_id and earlier_part.parts = ${m}.parts
      and earlier_part.part < ${m}.part and earlier_part.status in ${ANSWERS_NOTHING_SQL})))`;

/**
 * A later reply of the conversation answers all that the reply (or part) `m` answered: its
 * context reaches as far. The next reply answers a question a held one left open (README:
 * the 24-hour window), so the held one is superseded: never to be sent, nothing to act on.
 * The reply's own parts do not count: a first part that went out before the window closed
 * on the second is half the answer, not another one. Nor does a reply written before it:
 * an admin's follow-up to a question the AI had answered already says something more, and
 * when it does not go out, that is still for the admin to know (it counted as answered for
 * by the very answer it followed).
 */
export const answeredSinceSql = (m: string) => `
  select a.id from messages a
  where a.conversation_id = ${m}.conversation_id and a.source <> 'inbound'
    and not coalesce(a.source = ${m}.source and a.reply_to_message_id = ${m}.reply_to_message_id, a.id = ${m}.id)
    and ${answersSomethingSql('a')} and a.context_until_seq >= ${m}.context_until_seq
    and a.created_at > ${m}.created_at`;

// The seed's done-is-noop guard, made exact: a reply whose context covered this message's
// position answers it (an AI reply: it was in the prompt; an admin reply: it was visible
// when the admin wrote). Positions, unlike created_at, follow commit order. A fragment, so
// that inboundReplyState asks the same question inside its one statement.
const answeringReplySql = (conversationId: string, seq: string) => `
  select a.id from messages a
  where a.conversation_id = ${conversationId} and a.source <> 'inbound'
    and ${answersSomethingSql('a')}
    and a.context_until_seq >= ${seq}
  order by a.created_at desc
  limit 1`;
const ANSWERED_SQL = answeringReplySql('$1', '$2');

/** What a reply reads of its conversation (conversationThread). */
export interface ConversationThread {
  /** The highest inbound position a reply of this conversation answered (0: none yet). */
  answeredUpTo: number;
  /** The conversation before the unanswered messages: replies and answered inbound messages, oldest first. */
  earlier: Message[];
  /** Unanswered inbound messages, oldest first. */
  unanswered: Message[];
}

/**
 * The highest inbound position any reply of the conversation that may have reached the
 * contact answered (0: none), as `n`: the reply job's thread and the list's "awaiting reply".
 */
export const answeredUpToSql = (conversationId: string) => `
  select coalesce(max(a.context_until_seq), 0)::int8 as n from messages a
  where a.conversation_id = ${conversationId} and a.source <> 'inbound' and ${answersSomethingSql('a')}`;

// The thread a reply reads, in one round trip:
//   * answered up to: the highest position any reply that may have reached the contact
//     answered (replies Twilio refused, or that never left, answered nothing);
//   * earlier: the newest $2 replies and answered inbound messages, through the
//     (conversation_id, created_at) index;
//   * unanswered: the first $2 inbound messages after that position, through
//     messages_inbound_seq_idx.
// Three statements before, one round trip each. A fragment, so that inboundReplyState
// reads the same thread inside its one statement.
const threadSql = (conversationId: string, limit: string) => `
  with up_to as (${answeredUpToSql(conversationId)})
  select 'earlier' as thread_part, up_to.n as answered_up_to, e.*
  from up_to cross join lateral (
    select * from messages
    where conversation_id = ${conversationId} and (source <> 'inbound' or seq <= up_to.n)
    order by created_at desc, id desc
    limit ${limit}
  ) e
  union all
  select 'unanswered', up_to.n, u.*
  from up_to cross join lateral (
    select * from messages
    where conversation_id = ${conversationId} and source = 'inbound' and seq > up_to.n
    order by seq
    limit ${limit}
  ) u`;
const THREAD_SQL = threadSql('$1', '$2');

type ThreadRow = MessageRow & { thread_part: 'earlier' | 'unanswered'; answered_up_to: string };
/** A thread row as json_agg gives it: timestamps as text. */
type ThreadJson = Omit<ThreadRow, 'send_started_at' | 'status_updated_at' | 'created_at'> & { send_started_at: string | null; status_updated_at: string; created_at: string };

/** The row node-postgres would have given (timestamps as Dates); the rest reads the same from JSON. */
const threadRowFromJson = (r: ThreadJson): ThreadRow => ({
  ...r,
  send_started_at: r.send_started_at === null ? null : new Date(r.send_started_at),
  status_updated_at: new Date(r.status_updated_at),
  created_at: new Date(r.created_at),
});

/** What a reply job checks before it composes anything (inboundReplyState). */
export interface InboundReplyState {
  inbound: Message;
  conversation: Conversation;
  /** An AI reply to this message was written by an earlier attempt (outbox.replyPartsForInbound). */
  replyWritten: boolean;
  /** The reply that already answers it (the done-is-noop guard), if any. */
  answeredBy: string | null;
  /** The conversation has media not processed yet (media-store.mediaPending). */
  mediaPending: boolean;
  /** The thread a reply would read now (conversationThread), read in the same statement. */
  thread: ConversationThread;
}

// Everything a reply job decides on before it composes, in one round trip: the message, its
// conversation, whether a reply to it was written already, whether a reply answers it (as
// ANSWERED_SQL), whether media wait to be processed (through the partial index of pending
// media), and the thread the reply would read (as THREAD_SQL, its rows as JSON). Two
// statements before, and seven at first (measured with the pipeline bench: each statement is a
// round trip and a socket write on both sides, and when a burst's first replies compete
// with its intake for the CPU, each such step waits behind every other reply's).
const INBOUND_REPLY_STATE_SQL = `
  select m.*, ${CONVERSATION_COLUMNS},
    exists (select 1 from messages r where r.reply_to_message_id = m.id and r.source = 'ai') as reply_written,
    (${answeringReplySql('m.conversation_id', 'm.seq')}) as answered_by,
    exists (select 1 from message_media mm join messages x on x.id = mm.message_id
            where mm.status = 'pending' and x.conversation_id = m.conversation_id) as media_pending,
    (select json_agg(t) from (${threadSql('m.conversation_id', '$2')}) t) as thread
  from messages m
  join conversations c on c.id = m.conversation_id
  join contacts k on k.id = c.contact_id
  where m.id = $1`;

// The newest inbound message's age by the database's clock (the one that stamped it),
// through messages_inbound_seq_idx, and whether the contact opted out or a human took over
// since (what a reply waiting for quiet stops waiting for).
const INBOUND_QUIET_SQL = `
  select (extract(epoch from now() - m.created_at) * 1000)::float8 as quiet_ms,
         k.opted_out_at is not null or c.ai_paused as interrupted
  from messages m
  join conversations c on c.id = m.conversation_id
  join contacts k on k.id = c.contact_id
  where m.conversation_id = $1 and m.source = 'inbound'
  order by m.seq desc limit 1`;

/** Milliseconds since the contact's newest message in this conversation (Infinity: none), and whether a reply would now be skipped (opted out, paused). */
export async function inboundQuiet(db: Queryable, conversationId: string): Promise<{ quietMs: number; interrupted: boolean }> {
  const { rows } = await db.query<{ quiet_ms: number; interrupted: boolean }>(INBOUND_QUIET_SQL, [conversationId]);
  return rows[0] ? { quietMs: Number(rows[0].quiet_ms), interrupted: rows[0].interrupted } : { quietMs: Infinity, interrupted: false };
}

/**
 * The state a reply to `messageId` starts from, with the thread it would read (up to
 * `threadLimit` messages each side, as conversationThread), or null when there is no such message.
 */
export async function inboundReplyState(db: Queryable, messageId: string, threadLimit: number): Promise<InboundReplyState | null> {
  const result = await db.query<MessageRow & ConversationRow & { reply_written: boolean; answered_by: string | null; media_pending: boolean; thread: ThreadJson[] | null }>(
    INBOUND_REPLY_STATE_SQL,
    [messageId, threadLimit],
  );
  const row = result.rows[0];
  if (!row) return null;
  const inbound = messageFromRow(row);
  return {
    inbound,
    conversation: conversationFromRow(row),
    replyWritten: row.reply_written,
    // A reply only answers an inbound message (which has a position).
    answeredBy: row.seq === null ? null : row.answered_by,
    mediaPending: row.media_pending,
    thread: await threadOf(db, inbound.conversationId, threadLimit, (row.thread ?? []).map(threadRowFromJson), inbound.seq),
  };
}

/** Human takeover: while paused, autoreply sends nothing in this conversation. True if it exists. */
export async function conversationAiPausedSet(db: Queryable, id: string, paused: boolean): Promise<boolean> {
  const result = await db.query('update conversations set ai_paused = $2 where id = $1', [id, paused]);
  return result.rowCount > 0;
}

/** One message by id, or null. */
export async function messageGet(db: Queryable, id: string): Promise<Message | null> {
  const result = await db.query<MessageRow>('select * from messages where id = $1', [id]);
  return result.rows[0] ? messageFromRow(result.rows[0]) : null;
}

// Newest first through the (conversation_id, created_at) index, then put back in order.
const RECENT_SQL = `
  select * from (
    select * from messages where conversation_id = $1 order by created_at desc, id desc limit $2
  ) recent
  order by created_at, id`;

/** The last `limit` messages of a conversation, oldest first (the context an answer reads). */
export async function messageListRecent(db: Queryable, conversationId: string, limit: number): Promise<Message[]> {
  const result = await db.query<MessageRow>(RECENT_SQL, [conversationId, limit]);
  return result.rows.map(messageFromRow);
}

/**
 * Reply statuses that mean it did not reach the contact, or may not have: a human may act.
 * messages_undelivered_idx (migration 0033) holds exactly these: change both together.
 */
export const UNDELIVERED_REPLY_STATUSES_SQL = `('failed', 'undelivered', 'send_failed', 'flagged', 'held', 'unconfirmed')`;

// One probe of messages_answering_idx per problem reply, as a lateral `limit 1`: written as
// `exists`, with the conversation a constant, the planner read the thread's answering
// replies once and compared each problem reply with all of them (1,400 send_failed replies
// of a 20,000-message thread: 12 million comparisons, 2.8 s for the page).
const SUPERSEDED_SQL = `
  select m.id from messages m
  cross join lateral (${answeredSinceSql('m')} limit 1) answered
  where m.conversation_id = $1 and m.source <> 'inbound' and m.status in ${UNDELIVERED_REPLY_STATUSES_SQL}`;

/**
 * The conversation's replies that did not reach the contact (or may not have) and that a
 * later reply has answered for (answeredSinceSql): they keep their status, with nothing
 * left to do.
 */
export async function repliesSuperseded(db: Queryable, conversationId: string): Promise<Set<string>> {
  const result = await db.query<{ id: string }>(SUPERSEDED_SQL, [conversationId]);
  return new Set(result.rows.map((r) => r.id));
}

/** The reply that already answers the inbound message at position `seq`, if any. */
export async function messageAnsweredBy(db: Queryable, conversationId: string, seq: number): Promise<string | null> {
  const result = await db.query<{ id: string }>(ANSWERED_SQL, [conversationId, seq]);
  return result.rows[0]?.id ?? null;
}

// After a backlog longer than the limit, the unanswered messages that end at a given one.
const UNANSWERED_ENDING_AT_SQL = `
  select * from (
    select * from messages
    where conversation_id = $1 and source = 'inbound' and seq > $2 and seq <= $4
    order by seq desc
    limit $3
  ) window_end
  order by seq`;

const byTime = (a: Message, b: Message) => a.createdAt.getTime() - b.createdAt.getTime() || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/**
 * The thread a reply to the inbound message at position `mustInclude` reads: up to `limit`
 * unanswered inbound messages, normally the oldest `limit`, which contain it; after a
 * backlog longer than `limit` (earlier jobs failed or were cancelled, and show it) the
 * `limit` ending at it; and up to `limit` messages before them.
 */
export async function conversationThread(db: Queryable, conversationId: string, limit: number, mustInclude?: number | null): Promise<ConversationThread> {
  const result = await db.query<ThreadRow>(THREAD_SQL, [conversationId, limit]);
  return threadOf(db, conversationId, limit, result.rows, mustInclude);
}

/** The thread from THREAD_SQL's rows; reads the backlog's end when they miss `mustInclude`. */
async function threadOf(db: Queryable, conversationId: string, limit: number, rows: ThreadRow[], mustInclude?: number | null): Promise<ConversationThread> {
  const answeredUpTo = Number(rows[0]?.answered_up_to ?? 0);
  const earlier = rows.filter((r) => r.thread_part === 'earlier').map(messageFromRow).sort(byTime);
  let unanswered = rows.filter((r) => r.thread_part === 'unanswered').map(messageFromRow).sort((a, b) => a.seq! - b.seq!);
  const last = unanswered[unanswered.length - 1];
  if (mustInclude != null && last && last.seq! < mustInclude) {
    const ending = await db.query<MessageRow>(UNANSWERED_ENDING_AT_SQL, [conversationId, answeredUpTo, limit, mustInclude]);
    unanswered = ending.rows.map(messageFromRow);
  }
  return { answeredUpTo, earlier, unanswered };
}

/** One Twilio status callback. */
export interface StatusUpdate {
  /** Our message id, from the status callback URL; absent for callbacks we did not address. */
  messageId?: string;
  twilioSid: string;
  status: TwilioStatus;
  errorCode?: number;
  errorMessage?: string;
}

// A status callback. Found by our id (the callback URL carries it, so a reply whose SID we
// never learned, because its sender died right after Twilio took it, is confirmed here) or
// by SID. Only forward: Twilio's callbacks may arrive out of order, and any word from Twilio
// outranks our outbox states (message_status_rank). The SID, once known, never changes.
// A reply flagged for a human that Twilio now reports loses the flag's text: it was no
// alarm after all (`was_flagged` tells the caller, read from the row before the update).
// So does one recorded "not sent" (a 5xx after which the message went out all the same),
// with its error code: "delivered · not sent: Twilio is unavailable" said both. And any
// reply Twilio had not named yet (no SID): its code and text were ours or an earlier send's
// (a 63016 on the free-form send a template replaces), as REPLY_CONFIRM_SQL (outbox.ts)
// drops them when Twilio's answer comes first; a callback may come before that answer.
const STATUS_UPDATE_SQL = `
  update messages m
  set status = $3,
      twilio_sid = $2,
      error_code = coalesce($4, case when m.status = 'send_failed' or m.twilio_sid is null then null else m.error_code end),
      error_message = coalesce($5, case when m.status in ('flagged', 'send_failed') or m.twilio_sid is null then null else m.error_message end),
      status_updated_at = now()
  from (select id, status = 'flagged' as was_flagged from messages
        where (id = $1::uuid or twilio_sid = $2) and source <> 'inbound') before
  where m.id = before.id
    and (m.twilio_sid is null or m.twilio_sid = $2)
    -- Without a SID the status is our own verdict ("not sent" included): any word from
    -- Twilio outranks it, as Twilio has the message after all.
    and message_status_rank($3) > case when m.twilio_sid is null then 0 else message_status_rank(m.status) end
    -- A template is never refused for the window (Twilio's 63016): a 63016 for a reply on
    -- its way as one is a late word on the free-form send it replaces
    -- (outbox.ts, REPLY_RESEND_AS_TEMPLATE_SQL).
    and not (m.twilio_sid is null and m.template_sid is not null and $4 is not distinct from 63016)
  returning m.id, m.source, m.conversation_id, m.reply_to_message_id, m.template_sid, before.was_flagged`;

/** Applies a delivery status. Returns the message it moved forward, or null when none moved. */
export async function messageStatusUpdate(
  db: Queryable,
  update: StatusUpdate,
): Promise<{ id: string; source: MessageSource; conversationId: string; replyToMessageId: string | null; templateSid: string | null; wasFlagged: boolean } | null> {
  const result = await db.query<{ id: string; source: MessageSource; conversation_id: string; reply_to_message_id: string | null; template_sid: string | null; was_flagged: boolean }>(STATUS_UPDATE_SQL, [
    update.messageId ?? null,
    update.twilioSid,
    update.status,
    update.errorCode ?? null,
    update.errorMessage ?? null,
  ]);
  const row = result.rows[0];
  return row ? { id: row.id, source: row.source, conversationId: row.conversation_id, replyToMessageId: row.reply_to_message_id, templateSid: row.template_sid, wasFlagged: row.was_flagged } : null;
}

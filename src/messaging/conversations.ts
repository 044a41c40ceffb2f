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
  replyToMessageId: string | null;
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
  reply_to_message_id: string | null;
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
    replyToMessageId: row.reply_to_message_id,
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
}

const CONVERSATION_SQL = `
  select c.id, c.contact_id, k.whatsapp_number, k.profile_name, c.business_number, c.ai_paused, k.opted_out_at, k.opted_out_by, c.last_inbound_at,
         c.last_message_at, c.created_at
  from conversations c
  join contacts k on k.id = c.contact_id
  where c.id = $1`;

/** A conversation with its contact's number and name, or null. */
export async function conversationGet(db: Queryable, id: string): Promise<Conversation | null> {
  const result = await db.query<{
    id: string;
    contact_id: string;
    whatsapp_number: string;
    profile_name: string | null;
    business_number: string | null;
    ai_paused: boolean;
    opted_out_at: Date | null;
    opted_out_by: 'contact' | 'admin' | null;
    last_inbound_at: Date | null;
    last_message_at: Date;
    created_at: Date;
  }>(CONVERSATION_SQL, [id]);
  const row = result.rows[0];
  if (!row) return null;
  return {
    id: row.id,
    contactId: row.contact_id,
    whatsappNumber: row.whatsapp_number,
    profileName: row.profile_name,
    businessNumber: row.business_number,
    aiPaused: row.ai_paused,
    optedOutAt: row.opted_out_at,
    optedOutBy: row.opted_out_by,
    lastInboundAt: row.last_inbound_at,
    lastMessageAt: row.last_message_at,
    createdAt: row.created_at,
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

// Replies that count as answers: any that may have reached the contact. Replies Twilio
// refused, or that never left (send_failed), answered nothing.
const ANSWERED_UP_TO_SQL = `
  select coalesce(max(context_until_seq), 0)::int8 as up_to from messages
  where conversation_id = $1 and source <> 'inbound' and status not in ('failed', 'send_failed')`;

/** The highest inbound position a reply of this conversation answered (0: none yet). */
export async function inboundAnsweredUpTo(db: Queryable, conversationId: string): Promise<number> {
  const result = await db.query<{ up_to: string }>(ANSWERED_UP_TO_SQL, [conversationId]);
  return Number(result.rows[0]?.up_to ?? 0);
}

// The seed's done-is-noop guard, made exact: a reply whose context covered this message's
// position answers it (an AI reply: it was in the prompt; an admin reply: it was visible
// when the admin wrote). Positions, unlike created_at, follow commit order.
const ANSWERED_SQL = `
  select id from messages
  where conversation_id = $1 and source <> 'inbound'
    and status not in ('failed', 'send_failed')
    and context_until_seq >= $2
  order by created_at desc
  limit 1`;

/** The reply that already answers the inbound message at position `seq`, if any. */
export async function messageAnsweredBy(db: Queryable, conversationId: string, seq: number): Promise<string | null> {
  const result = await db.query<{ id: string }>(ANSWERED_SQL, [conversationId, seq]);
  return result.rows[0]?.id ?? null;
}

// Unanswered inbound messages in position order, through messages_inbound_seq_idx. The
// bounds select a window: positions after `after` up to `until` (null: no upper bound).
const UNANSWERED_FIRST_SQL = `
  select * from messages
  where conversation_id = $1 and source = 'inbound' and seq > $2
  order by seq
  limit $3`;
const UNANSWERED_ENDING_AT_SQL = `
  select * from (
    select * from messages
    where conversation_id = $1 and source = 'inbound' and seq > $2 and seq <= $4
    order by seq desc
    limit $3
  ) window_end
  order by seq`;

/**
 * Up to `limit` unanswered inbound messages (positions after `answeredUpTo`), oldest first,
 * always including the one at position `mustInclude` when given: normally the oldest
 * `limit`, which contain it; after a backlog longer than `limit` (earlier jobs failed or
 * were cancelled, and show it) the `limit` ending at it.
 */
export async function inboundUnanswered(db: Queryable, conversationId: string, answeredUpTo: number, limit: number, mustInclude?: number): Promise<Message[]> {
  const first = await db.query<MessageRow>(UNANSWERED_FIRST_SQL, [conversationId, answeredUpTo, limit]);
  const last = first.rows[first.rows.length - 1];
  if (mustInclude === undefined || !last || Number(last.seq) >= mustInclude) return first.rows.map(messageFromRow);
  const ending = await db.query<MessageRow>(UNANSWERED_ENDING_AT_SQL, [conversationId, answeredUpTo, limit, mustInclude]);
  return ending.rows.map(messageFromRow);
}

// The conversation before the unanswered messages: replies, and inbound messages already
// answered, newest `limit` of them, put back in order.
const EARLIER_SQL = `
  select * from (
    select * from messages
    where conversation_id = $1 and (source <> 'inbound' or seq <= $2)
    order by created_at desc, id desc
    limit $3
  ) earlier
  order by created_at, id`;

/** The last `limit` messages that are not unanswered inbound ones, oldest first. */
export async function messageListAnswered(db: Queryable, conversationId: string, answeredUpTo: number, limit: number): Promise<Message[]> {
  const result = await db.query<MessageRow>(EARLIER_SQL, [conversationId, answeredUpTo, limit]);
  return result.rows.map(messageFromRow);
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
const STATUS_UPDATE_SQL = `
  update messages m
  set status = $3,
      twilio_sid = $2,
      error_code = coalesce($4, m.error_code),
      error_message = coalesce($5, case when m.status = 'flagged' then null else m.error_message end),
      status_updated_at = now()
  from (select id, status = 'flagged' as was_flagged from messages
        where (id = $1::uuid or twilio_sid = $2) and source <> 'inbound') before
  where m.id = before.id
    and (m.twilio_sid is null or m.twilio_sid = $2)
    and message_status_rank($3) > message_status_rank(m.status)
  returning m.id, m.source, m.conversation_id, m.reply_to_message_id, before.was_flagged`;

/** Applies a delivery status. Returns the message it moved forward, or null when none moved. */
export async function messageStatusUpdate(
  db: Queryable,
  update: StatusUpdate,
): Promise<{ id: string; source: MessageSource; conversationId: string; replyToMessageId: string | null; wasFlagged: boolean } | null> {
  const result = await db.query<{ id: string; source: MessageSource; conversation_id: string; reply_to_message_id: string | null; was_flagged: boolean }>(STATUS_UPDATE_SQL, [
    update.messageId ?? null,
    update.twilioSid,
    update.status,
    update.errorCode ?? null,
    update.errorMessage ?? null,
  ]);
  const row = result.rows[0];
  return row ? { id: row.id, source: row.source, conversationId: row.conversation_id, replyToMessageId: row.reply_to_message_id, wasFlagged: row.was_flagged } : null;
}

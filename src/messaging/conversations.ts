// The conversation store: contacts, conversations and their messages, read and written with
// static parameterised SQL. Functions are noun-verb and take any Queryable, so the webhook
// runs them inside its one transaction. The reply outbox's statements live in outbox.ts.
// Knows nothing of HTTP, Twilio's wire format or the queue.
import type { Queryable } from '../db/types.ts';

export type MessageSource = 'inbound' | 'ai' | 'admin';

/** Twilio's delivery statuses, as status callbacks report them. */
export const TWILIO_STATUSES = ['accepted', 'scheduled', 'queued', 'sending', 'sent', 'delivered', 'read', 'undelivered', 'failed', 'canceled'] as const;
export type TwilioStatus = (typeof TWILIO_STATUSES)[number];

/** Our outbox states (see 0002_messaging.sql), plus `received` for inbound messages. */
export type MessageStatus = 'received' | 'pending' | 'send_failed' | 'unconfirmed' | 'flagged' | 'logged' | TwilioStatus;

/** A contact's WhatsApp thread, with the contact's number and name. */
export interface Conversation {
  id: string;
  contactId: string;
  /** E.164, e.g. +31612345678. */
  whatsappNumber: string;
  profileName: string | null;
  aiPaused: boolean;
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
  contextUntil: Date | null;
  sendStartedAt: Date | null;
  statusUpdatedAt: Date;
  createdAt: Date;
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
  context_until: Date | null;
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
    contextUntil: row.context_until,
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
  twilioSid: string;
}

const CONVERSATION_SQL = `
  select c.id, c.contact_id, k.whatsapp_number, k.profile_name, c.ai_paused, c.last_message_at, c.created_at
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
    ai_paused: boolean;
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
    aiPaused: row.ai_paused,
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

/** When the newest inbound message of a conversation arrived (null: none yet). */
export async function inboundLatestAt(db: Queryable, conversationId: string): Promise<Date | null> {
  const result = await db.query<{ at: Date | null }>(
    `select max(created_at) as at from messages where conversation_id = $1 and source = 'inbound'`,
    [conversationId],
  );
  return result.rows[0]?.at ?? null;
}

// The seed's done-is-noop guard, made exact: an AI reply whose context already included
// this message (context_until), or any admin reply written after it, answers it. Replies
// that Twilio refused do not count: nothing reached the contact.
const ANSWERED_SQL = `
  select id from messages
  where conversation_id = $1
    and status not in ('failed', 'send_failed')
    and ((source = 'ai' and context_until >= $2) or (source = 'admin' and created_at > $2))
  order by created_at desc
  limit 1`;

/** The reply that already answers an inbound message received at `receivedAt`, if any. */
export async function messageAnsweredBy(db: Queryable, conversationId: string, receivedAt: Date): Promise<string | null> {
  const result = await db.query<{ id: string }>(ANSWERED_SQL, [conversationId, receivedAt]);
  return result.rows[0]?.id ?? null;
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
const STATUS_UPDATE_SQL = `
  update messages
  set status = $3,
      twilio_sid = $2,
      error_code = coalesce($4, error_code),
      error_message = coalesce($5, error_message),
      status_updated_at = now()
  where (id = $1::uuid or twilio_sid = $2)
    and source <> 'inbound'
    and (twilio_sid is null or twilio_sid = $2)
    and message_status_rank($3) > message_status_rank(status)
  returning id, source, conversation_id, reply_to_message_id`;

/** Applies a delivery status. Returns the message it moved forward, or null when none moved. */
export async function messageStatusUpdate(
  db: Queryable,
  update: StatusUpdate,
): Promise<{ id: string; source: MessageSource; conversationId: string; replyToMessageId: string | null } | null> {
  const result = await db.query<{ id: string; source: MessageSource; conversation_id: string; reply_to_message_id: string | null }>(STATUS_UPDATE_SQL, [
    update.messageId ?? null,
    update.twilioSid,
    update.status,
    update.errorCode ?? null,
    update.errorMessage ?? null,
  ]);
  const row = result.rows[0];
  return row ? { id: row.id, source: row.source, conversationId: row.conversation_id, replyToMessageId: row.reply_to_message_id } : null;
}

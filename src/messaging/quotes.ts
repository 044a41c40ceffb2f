// Quoted messages. A contact who swipes to reply quotes an earlier message ("Ja, klopt"
// under the assistant's "Wil je de aanvraag op 12 mei?"); Twilio sends its SID, stored as
// `messages.replied_to_sid` (migrations/0026_quoted_replies.sql). The quoted message is
// looked up among the same conversation's messages only: a SID from elsewhere shows
// nothing of elsewhere.
import type { Queryable } from '../db/types.ts';
import type { Message, MessageSource } from './conversations.ts';

/** What a quote shows of the message it quotes. */
export interface QuotedMessage {
  source: MessageSource;
  body: string;
  /** Its media files. */
  media: number;
}

const QUOTED_SQL = `
  select twilio_sid, source, body, coalesce(cardinality(media_urls), 0) as media
  from messages
  where conversation_id = $1 and twilio_sid = any($2::text[])`;

/**
 * The messages that `messages` quote, by SID; a quoted SID missing from the map is not (or
 * no longer) a message of this conversation. No query when none quotes anything.
 */
export async function quotedMessages(db: Queryable, conversationId: string, messages: Message[]): Promise<Map<string, QuotedMessage>> {
  const sids = [...new Set(messages.map((m) => m.repliedToSid).filter((sid): sid is string => sid !== null))];
  if (sids.length === 0) return new Map();
  const { rows } = await db.query<{ twilio_sid: string; source: MessageSource; body: string; media: number }>(QUOTED_SQL, [conversationId, sids]);
  return new Map(rows.map((r) => [r.twilio_sid, { source: r.source, body: r.body, media: Number(r.media) }]));
}

// Enough of the quoted message to tell which one it was; the whole of it is in the thread.
const QUOTE_MAX_CHARS = 200;

/** The quoted message's words on one line, cut to QUOTE_MAX_CHARS; "an attachment" when it had only media. */
export function quotedExcerpt(quoted: QuotedMessage): string {
  const words = quoted.body.replace(/\s+/g, ' ').trim();
  if (!words) return quoted.media > 0 ? 'an attachment' : 'an empty message';
  return words.length > QUOTE_MAX_CHARS ? `"${words.slice(0, QUOTE_MAX_CHARS)}…"` : `"${words}"`;
}

/** Whose the quoted message was, as the model sees turns (admin replies are the assistant's too) or as an admin does. */
export function quotedWhose(quoted: QuotedMessage, reader: 'model' | 'admin'): string {
  if (quoted.source === 'inbound') return 'their own message';
  if (reader === 'model') return "the assistant's message";
  return quoted.source === 'ai' ? 'the AI' : 'an admin';
}

/**
 * The line the model reads before a quoting message: whose message it answers and what it
 * said, or that it is not available (removed by retention, or not of this conversation).
 */
export function quoteLine(quoted: QuotedMessage | undefined): string {
  if (!quoted) return '[replying to an earlier message that is no longer available]';
  return `[replying to ${quotedWhose(quoted, 'model')}: ${quotedExcerpt(quoted)}]`;
}

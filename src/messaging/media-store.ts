// The stored media of inbound messages (0014_media.sql): what is waiting to be processed,
// what a reply reads about each file, and the file itself for the dashboard.
import type { Queryable } from '../db/types.ts';
import { mediaKind } from './media.ts';

export type MediaStatus = 'pending' | 'stored' | 'too_large' | 'refused' | 'failed';

export interface MediaInfo {
  id: string;
  messageId: string;
  position: number;
  contentType: string;
  kind: 'audio' | 'image' | 'other';
  status: MediaStatus;
  size: number | null;
  transcript: string | null;
  note: string | null;
}

interface MediaRow {
  id: string;
  message_id: string;
  position: number;
  content_type: string;
  status: MediaStatus;
  size: number | null;
  transcript: string | null;
  note: string | null;
}

function infoOf(r: MediaRow): MediaInfo {
  return { id: r.id, messageId: r.message_id, position: r.position, contentType: r.content_type, kind: mediaKind(r.content_type), status: r.status, size: r.size, transcript: r.transcript, note: r.note };
}

const INFO_COLUMNS = 'id, message_id, position, content_type, status, size, transcript, note';

/** The media of these messages (no bytes), by message id, in order. */
export async function mediaOfMessages(db: Queryable, messageIds: string[]): Promise<Map<string, MediaInfo[]>> {
  const byMessage = new Map<string, MediaInfo[]>();
  if (messageIds.length === 0) return byMessage;
  const result = await db.query<MediaRow>(`select ${INFO_COLUMNS} from message_media where message_id = any($1::uuid[]) order by message_id, position`, [messageIds]);
  for (const row of result.rows) {
    const list = byMessage.get(row.message_id) ?? [];
    list.push(infoOf(row));
    byMessage.set(row.message_id, list);
  }
  return byMessage;
}

/** A conversation's media not processed yet, oldest message first. */
export async function mediaPending(db: Queryable, conversationId: string): Promise<Array<{ id: string; messageId: string; url: string; contentType: string }>> {
  const result = await db.query<{ id: string; message_id: string; url: string; content_type: string }>(
    `select mm.id, mm.message_id, mm.url, mm.content_type
     from message_media mm join messages m on m.id = mm.message_id
     where mm.status = 'pending' and m.conversation_id = $1
     order by m.seq, mm.position`,
    [conversationId],
  );
  return result.rows.map((r) => ({ id: r.id, messageId: r.message_id, url: r.url, contentType: r.content_type }));
}

/** Records what processing found; only over `pending`, so a racing attempt's result stands. */
export async function mediaRecord(
  db: Queryable,
  id: string,
  outcome: { status: Exclude<MediaStatus, 'pending'>; bytes?: Uint8Array; transcript?: string | null; note?: string | null },
): Promise<boolean> {
  const result = await db.query(
    `update message_media
     set status = $2, bytes = $3, size = $4, transcript = $5, note = $6, processed_at = now()
     where id = $1 and status = 'pending'`,
    [id, outcome.status, outcome.bytes ?? null, outcome.bytes?.length ?? null, outcome.transcript ?? null, outcome.note ?? null],
  );
  return result.rowCount > 0;
}

/** One stored file with its type, for the dashboard; null when absent or not stored. */
export async function mediaFile(db: Queryable, id: string): Promise<{ contentType: string; bytes: Buffer } | null> {
  const result = await db.query<{ content_type: string; bytes: Buffer | Uint8Array | null }>(`select content_type, bytes from message_media where id = $1 and status = 'stored'`, [id]);
  const row = result.rows[0];
  return row?.bytes ? { contentType: row.content_type, bytes: Buffer.from(row.bytes) } : null;
}

/**
 * How a message's media reads in the conversation the model sees (`vision`: photos are
 * attached). Why a file could not be read (our checks, Twilio's or the transcriber's
 * answer) is for the dashboard, not the prompt: the model would repeat it to the contact.
 */
export function mediaText(media: MediaInfo, vision = false): string {
  if (media.status === 'pending') return '[an attachment that is still being processed]';
  if (media.status === 'too_large') return '[an attachment too large to open]';
  if (media.status !== 'stored') return '[an attachment that could not be opened]';
  if (media.kind === 'audio') return media.transcript ? `[voice note] ${media.transcript}` : '[a voice note the assistant could not hear]';
  if (media.kind === 'image') return vision ? '[a photo, attached]' : '[an image the assistant cannot see]';
  return `[an attachment (${media.contentType || 'unknown type'}) the assistant cannot read]`;
}

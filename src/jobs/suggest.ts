// The `suggest` job and the suggestions it leaves: the same context and model call as
// autoreply, but the draft is stored for an admin instead of sent. One suggestion per
// inbound message (a retry stores nothing new). Sending one is the admin side's business:
// it writes an `admin` message through the outbox and marks the suggestion sent, in one
// transaction (`suggestionMarkSent`).
import { z } from 'zod';
import type { TokenUsage } from '../ai/types.ts';
import type { Queryable } from '../db/types.ts';
import { answeredSinceSql, conversationThread, inboundReplyState, type Citations, type ConversationThread, type Message } from '../messaging/conversations.ts';
import { mediaProcessForReply, type MediaDeps } from './media-process.ts';
import { jobEnqueue, PermanentJobError, type JobHandler } from '../queue/index.ts';
import { replyDraft, type ReplyDeps } from './reply-context.ts';

export const SUGGEST = 'suggest';

const payloadSchema = z.object({ conversationId: z.uuid(), messageId: z.uuid() });
export type SuggestPayload = z.infer<typeof payloadSchema>;

export type SuggestionStatus = 'pending' | 'sent' | 'discarded';

export interface Suggestion {
  id: string;
  conversationId: string;
  messageId: string;
  body: string;
  status: SuggestionStatus;
  sentMessageId: string | null;
  provider: string;
  model: string;
  usage: TokenUsage;
  /** What the draft drew on (null for suggestions from before citations). */
  citations: Citations | null;
  /** The highest inbound position the draft's prompt held (null: drafted before this was kept). */
  contextUntilSeq: number | null;
  createdAt: Date;
  decidedAt: Date | null;
  /**
   * A pending suggestion whose question a reply has answered since it was drafted: that
   * reply's id (suggestionAnsweredSince). Sending it would give the contact a second answer.
   */
  answeredBy: string | null;
  /**
   * The status of the admin message it was sent as, and its error (why it was held or
   * refused): for a pending suggestion, of its last send, which did not go (suggestionReopen).
   */
  sentMessageStatus: string | null;
  sentMessageError: string | null;
}

interface SuggestionRow {
  id: string;
  conversation_id: string;
  message_id: string;
  body: string;
  status: SuggestionStatus;
  sent_message_id: string | null;
  provider: string;
  model: string;
  usage: TokenUsage;
  citations: Citations | null;
  context_until_seq: string | number | null;
  created_at: Date;
  decided_at: Date | null;
  answered_by: string | null;
  sent_message_status: string | null;
  sent_message_error: string | null;
}

function suggestionFromRow(r: SuggestionRow): Suggestion {
  return {
    id: r.id, conversationId: r.conversation_id, messageId: r.message_id, body: r.body, status: r.status,
    sentMessageId: r.sent_message_id, provider: r.provider, model: r.model, usage: r.usage, citations: r.citations ?? null, contextUntilSeq: r.context_until_seq === null ? null : Number(r.context_until_seq), createdAt: r.created_at, decidedAt: r.decided_at, answeredBy: r.answered_by ?? null,
    sentMessageStatus: r.sent_message_status ?? null, sentMessageError: r.sent_message_error ?? null,
  };
}

/**
 * The reply that has answered, since suggestion `s` (an alias) was drafted, all it would
 * answer sent now: up to `position`. The outbox's own "answered since" (answeredSinceSql),
 * with the draft in the place of a reply that never went: a later reply that reached the
 * contact (or may have: an AI's, an admin's, another suggestion sent) and whose context
 * reaches as far. A reply written before the draft does not count: an admin may ask for
 * another answer to a question answered already. Null `position` (a draft from before
 * positions were kept) finds nothing.
 */
const suggestionAnsweredSinceSql = (s: string, position: string) => `
  select answered.id from (
    select ${s}.conversation_id, 'suggestion'::text as source, ${s}.message_id as reply_to_message_id, ${s}.id,
      ${position} as context_until_seq, ${s}.created_at
  ) draft
  cross join lateral (${answeredSinceSql('draft')} order by a.created_at limit 1) answered`;

// Every read of a suggestion says whether it is outdated (sent as drafted, at its own
// position), and how the message it was sent as went.
const SUGGESTION_SELECT = `
  select s.*, case when s.status = 'pending' then (${suggestionAnsweredSinceSql('s', 's.context_until_seq')}) end as answered_by,
    sent.status as sent_message_status, sent.error_message as sent_message_error
  from suggestions s left join messages sent on sent.id = s.sent_message_id`;

// Before a send, at the position the send would answer (an edited draft: what the page showed).
const SUGGESTION_ANSWERED_SINCE_SQL = `
  select m.id, m.source from suggestions s
  cross join lateral (${suggestionAnsweredSinceSql('s', '$2::int8')}) since
  join messages m on m.id = since.id
  where s.id = $1`;

/** The reply that has answered since suggestion `id` was drafted all it answers up to `position`, or null. */
export async function suggestionAnsweredSince(db: Queryable, id: string, position: number | null): Promise<{ id: string; source: Message['source'] } | null> {
  const result = await db.query<{ id: string; source: Message['source'] }>(SUGGESTION_ANSWERED_SINCE_SQL, [id, position]);
  return result.rows[0] ?? null;
}

/** Asks for a suggestion on an inbound message; ordered with the conversation's other jobs. */
export function suggestEnqueue(tx: Queryable, payload: SuggestPayload): Promise<string> {
  return jobEnqueue(tx, { type: SUGGEST, payload, orderingKey: payload.conversationId });
}

/** One suggestion by id, or null. */
export async function suggestionGet(db: Queryable, id: string): Promise<Suggestion | null> {
  const result = await db.query<SuggestionRow>(`${SUGGESTION_SELECT} where s.id = $1`, [id]);
  return result.rows[0] ? suggestionFromRow(result.rows[0]) : null;
}

/** A conversation's suggestions, newest first. */
export async function suggestionList(db: Queryable, conversationId: string, limit = 50): Promise<Suggestion[]> {
  const result = await db.query<SuggestionRow>(
    `${SUGGESTION_SELECT} where s.conversation_id = $1 order by s.created_at desc limit $2`,
    [conversationId, limit],
  );
  return result.rows.map(suggestionFromRow);
}

/**
 * Marks a pending suggestion sent as admin message `sentMessageId`. Returns the suggestion,
 * or null when it was not pending (already sent or discarded: the caller must roll back
 * its message, so a double click sends once).
 */
export async function suggestionMarkSent(tx: Queryable, id: string, sentMessageId: string): Promise<Suggestion | null> {
  const result = await tx.query<SuggestionRow>(
    `update suggestions set status = 'sent', sent_message_id = $2, decided_at = now()
     where id = $1 and status = 'pending' returning *, null as answered_by, null as sent_message_status, null as sent_message_error`,
    [id, sentMessageId],
  );
  return result.rows[0] ? suggestionFromRow(result.rows[0]) : null;
}

/**
 * A suggestion whose send provably reached no one (held outside the 24-hour window, refused
 * by Twilio) is pending again: marked sent, it left the page though the contact got nothing,
 * and the admin had only the thread's held message to find it by. It keeps that message
 * (sent_message_id), so the page and the API say why, until it is sent again. Only from
 * that very send: not after a second send or a discard since.
 */
export async function suggestionReopen(db: Queryable, id: string, sentMessageId: string): Promise<boolean> {
  const result = await db.query(
    `update suggestions set status = 'pending', decided_at = null
     where id = $1 and status = 'sent' and sent_message_id = $2`,
    [id, sentMessageId],
  );
  return result.rowCount > 0;
}

/** Discards a pending suggestion. False when it was not pending. */
export async function suggestionDiscard(db: Queryable, id: string): Promise<boolean> {
  const result = await db.query(`update suggestions set status = 'discarded', decided_at = now() where id = $1 and status = 'pending'`, [id]);
  return result.rowCount > 0;
}

/**
 * The thread for a draft of another answer to a message a reply answered already: the
 * message as the question, and what came before it. Without this the model saw the thread
 * end in our own reply, with no question to answer (the offline model said it found
 * nothing, next to the sources it had found).
 */
function answeringAgain(thread: ConversationThread, message: Message): ConversationThread {
  const at = thread.earlier.findIndex((m) => m.id === message.id);
  if (at >= 0) return { ...thread, earlier: thread.earlier.slice(0, at), unanswered: [thread.earlier[at]!] };
  return { ...thread, earlier: thread.earlier.filter((m) => m.createdAt < message.createdAt), unanswered: [message] };
}

/** The suggest handler: drafts like autoreply, stores the draft, sends nothing. */
export function suggestHandler(depsFor: (businessNumber: string | null) => ReplyDeps, media: MediaDeps): JobHandler<SuggestPayload> {
  const deps = depsFor(null);
  return {
    type: SUGGEST,
    schema: payloadSchema,
    async run({ job, payload, signal }) {
      // A discarded draft does not count: the admin asked for another.
      const existing = await deps.db.query<{ id: string }>(`select id from suggestions where message_id = $1 and status <> 'discarded'`, [payload.messageId]);
      if (existing.rows[0]) return { skipped: 'a suggestion for this message exists', suggestionId: existing.rows[0].id };
      const state = await inboundReplyState(deps.db, payload.messageId, deps.historyLimit);
      if (!state || state.inbound.conversationId !== payload.conversationId) {
        throw new PermanentJobError(`message ${payload.messageId} is not in conversation ${payload.conversationId}`);
      }
      const { inbound: message, conversation } = state;
      if (message.source !== 'inbound') throw new PermanentJobError(`message ${payload.messageId} is not an inbound message`);

      // The draft's time is when its thread was read, not when the model's answer came back:
      // a reply written while the model drafted (seconds) is one the draft never saw, and
      // must count as written since (suggestionAnsweredSinceSql compares with created_at).
      const readAt = (await deps.db.query<{ at: Date }>('select clock_timestamp() as at')).rows[0]!.at;
      // Read again when files were processed just now (their transcripts are in it then).
      const processed =
        (await mediaProcessForReply(media, state, { finalAttempt: job.attempts >= job.maxAttempts, purpose: 'suggest', signal })) ??
        (await conversationThread(deps.db, conversation.id, deps.historyLimit, message.seq));
      const thread = processed.unanswered.length > 0 ? processed : answeringAgain(processed, message);
      const draft = await replyDraft(depsFor(conversation.businessNumber), { conversationId: conversation.id, senderPhone: conversation.whatsappNumber, purpose: 'suggest', inbound: message, thread }, signal);
      // A racing duplicate job may have stored one meanwhile: keep the first. It answers what
      // its prompt held, and at least its own message (already answered, it held none).
      const inserted = await deps.db.query<{ id: string }>(
        `insert into suggestions (conversation_id, message_id, body, provider, model, usage, citations, context_until_seq, created_at)
         values ($1, $2, $3, $4, $5, $6::jsonb, $7::jsonb, $8, $9)
         on conflict (message_id) where status <> 'discarded' do nothing
         returning id`,
        [conversation.id, message.id, draft.text, draft.provider, draft.model, JSON.stringify(draft.usage), JSON.stringify(draft.citations), Math.max(draft.contextUntilSeq ?? 0, message.seq ?? 0), readAt],
      );
      return {
        suggestionId: inserted.rows[0]?.id ?? null,
        provider: draft.provider,
        model: draft.model,
        usage: draft.usage,
        knowledge: draft.citations.sources.map((s) => s.chunkId),
      };
    },
  };
}

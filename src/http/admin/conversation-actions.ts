// What an admin does in a conversation, shared by the dashboard and the API: reply as a
// human, send (or edit and send) an AI suggestion, ask the AI for one, and simulate an
// inbound message when the transport is `log`. Built on messaging/ and jobs/ functions;
// replies go through the outbox like the AI's, so delivery status is tracked the same way.
import { randomBytes } from 'node:crypto';
import { inboundStoreAndEnqueue, outboxDepsOf } from '../../jobs/autoreply.ts';
import { suggestEnqueue, suggestionAnsweredSince, suggestionGet, suggestionMarkSent, suggestionReopen } from '../../jobs/suggest.ts';
import { conversationGet, type Conversation, type Message } from '../../messaging/conversations.ts';
import { optChangeOf, optChangeRecorded, optedOutReason, optKeywordsOf, optOutSetByAdmin, optOutStateOf, type OptChange } from '../../messaging/opt-out.ts';
import { OptedOutError, replyDispatch, replyWriteAdmin, type ReplyOutcome } from '../../messaging/outbox.ts';
import type { Queryable } from '../../db/types.ts';
import type { Runtime } from '../../runtime.ts';

/** Refused for a reason the admin can act on (shown as the page's problem, or a 4xx). */
export class ActionError extends Error {
  constructor(
    readonly statusCode: 404 | 409 | 400,
    message: string,
  ) {
    super(message);
  }
}


/** The newest inbound message, or the newest up to position `seen` (what the admin's page showed). */
async function latestInboundId(db: Queryable, conversationId: string, seen?: number): Promise<string | null> {
  const result = await db.query<{ id: string }>(
    `select id from messages where conversation_id = $1 and source = 'inbound' and ($2::int8 is null or seq <= $2) order by seq desc limit 1`,
    [conversationId, seen ?? null],
  );
  return result.rows[0]?.id ?? null;
}

/** One line on how a send went, for the notice after the action. */
export function outcomeText(outcome: ReplyOutcome): string {
  switch (outcome.kind) {
    case 'sent':
    case 'already-sent':
      return `Sent (${outcome.reply.status}).`;
    case 'waiting':
      return 'Handed to Twilio; waiting for its confirmation.';
    case 'flagged':
      return `Flagged: ${outcome.reason}`;
    case 'held':
      return `Not sent: ${outcome.reason}`;
    case 'rejected':
      return `Twilio refused it: ${outcome.reason}`;
    case 'retry':
      // A 5xx may come with a message that went out all the same: sending again at once
      // would send it twice. The delivery check settles it by Twilio's list.
      if (outcome.maybeSent) {
        return `Twilio answered with an error (${outcome.reason}), which does not prove it was not sent. Look at this conversation again before sending it again: the message shows as sent once Twilio confirms it (at once with a status callback, else within about 15 minutes), or as "not sent" once Twilio's list proves it never went out.`;
      }
      return `Not sent: ${outcome.reason}. Try again in a moment.`;
  }
}

/** Nothing goes to a contact who opted out: refused with the reason, before anything is stored. */
async function checkNotOptedOut(runtime: Runtime, conversation: Conversation): Promise<void> {
  const state = await optOutStateOf(runtime.db, conversation.id);
  if (state?.optedOutAt) throw new ActionError(409, `not sent: ${optedOutReason(state)}`);
}

/** The write found the contact opted out after all (a STOP since the check): the same refusal. */
function refusedIfOptedOut(runtime: Runtime, conversation: Conversation): (err: unknown) => Promise<never> {
  return async (err) => {
    if (!(err instanceof OptedOutError)) throw err;
    await checkNotOptedOut(runtime, conversation);
    throw new ActionError(409, 'not sent: the contact opted out and back in just now; send it again');
  };
}

/** An admin records that the contact opted out or back in (asked by phone, a mistake); audited like every admin action. */
export async function optOutRecord(runtime: Runtime, conversationId: string, change: OptChange): Promise<{ changed: boolean }> {
  if (!(await conversationGet(runtime.db, conversationId))) throw new ActionError(404, 'no conversation with this id');
  const changed = await optOutSetByAdmin(runtime.db, conversationId, change);
  if (changed) runtime.metrics.observeOptChange(change, 'admin');
  return { changed };
}

/** A human's reply is one WhatsApp message: over the limit it is refused before anything is stored. */
function checkReplyLength(runtime: Runtime, body: string): void {
  const max = runtime.config.REPLY_MAX_CHARS;
  if (body.length > max) {
    throw new ActionError(400, `the reply is ${body.length} characters; one WhatsApp message takes at most ${max} (REPLY_MAX_CHARS): shorten it`);
  }
}

/**
 * Sends an admin's own reply now (written to the outbox first, then handed to the
 * transport), answering the newest inbound message: with `seen`, the newest the admin's
 * page showed (position), so that a question that came in while they wrote stays open
 * (for the AI, or the admin's next reply) instead of counting as answered.
 */
export async function adminReplySend(runtime: Runtime, conversationId: string, body: string, seen?: number): Promise<{ message: Message; outcome: ReplyOutcome }> {
  const conversation = await conversationGet(runtime.db, conversationId);
  if (!conversation) throw new ActionError(404, 'no conversation with this id');
  checkReplyLength(runtime, body);
  await checkNotOptedOut(runtime, conversation);
  const replyToMessageId = await latestInboundId(runtime.db, conversationId, seen);
  const reply = await replyWriteAdmin(runtime.db, { conversationId, replyToMessageId, body, contextUntilSeq: seen }).catch(refusedIfOptedOut(runtime, conversation));
  const outcome = await replyDispatch(outboxDepsOf(runtime), reply, `whatsapp:${conversation.whatsappNumber}`);
  return { message: outcome.reply, outcome };
}

/**
 * Sends a pending suggestion, as written or edited, as an admin message. The message and
 * the suggestion's `sent` mark are one transaction, so a double click sends once; a send
 * held, refused or not taken (a 429) puts it back to pending (suggestionReopen). `seen` is the newest inbound
 * position the admin's page showed (adminReplySend). A suggestion
 * whose question a reply has answered since it was drafted is refused (409) unless
 * `sendAnyway`: the contact would get a second, stale answer.
 */
export async function suggestionSend(runtime: Runtime, suggestionId: string, editedBody?: string, seen?: number, sendAnyway = false): Promise<{ message: Message; outcome: ReplyOutcome }> {
  const suggestion = await suggestionGet(runtime.db, suggestionId);
  if (!suggestion) throw new ActionError(404, 'no suggestion with this id');
  if (suggestion.status !== 'pending') throw new ActionError(409, `this suggestion was ${suggestion.status} already`);
  checkReplyLength(runtime, editedBody ?? suggestion.body);
  const conversation = await conversationGet(runtime.db, suggestion.conversationId);
  if (!conversation) throw new ActionError(404, 'the conversation of this suggestion is gone');
  await checkNotOptedOut(runtime, conversation);
  const reply = await runtime.db.transaction(async (tx) => {
    // As drafted, it answers what the draft's prompt held, not a question that came in
    // after it; edited, what the admin saw when writing: what their page showed (the thread
    // is not refreshed under an admin editing the draft), else everything stored by then.
    const asDrafted = editedBody === undefined || editedBody.trim() === suggestion.body.trim();
    const contextUntilSeq = asDrafted ? suggestion.contextUntilSeq : seen;
    // Outdated when a reply since has answered all this one would answer: as drafted, the
    // draft's question; edited, what the page showed (a newer question the admin saw and
    // answers in their edit is still open). Right before the write: only a reply committed
    // between these two statements can slip past it.
    const answered = sendAnyway ? null : await suggestionAnsweredSince(tx, suggestion.id, contextUntilSeq ?? suggestion.contextUntilSeq);
    if (answered) {
      const who = answered.source === 'ai' ? "the AI's reply" : "an admin's reply";
      throw new ActionError(409, `not sent: this suggestion is outdated, ${who} ${answered.id} has answered the contact's question since it was drafted, and sending it would give them a second answer; discard it, or confirm to send it anyway`);
    }
    const written = await replyWriteAdmin(tx, { conversationId: conversation.id, replyToMessageId: suggestion.messageId, body: editedBody ?? suggestion.body, contextUntilSeq });
    if (!(await suggestionMarkSent(tx, suggestion.id, written.id))) throw new ActionError(409, 'this suggestion was sent or discarded meanwhile');
    return written;
  }).catch(refusedIfOptedOut(runtime, conversation));
  const outcome = await replyDispatch(outboxDepsOf(runtime), reply, `whatsapp:${conversation.whatsappNumber}`);
  // Held, refused, or never taken (a 429, no connection: `send_failed` and not maybe sent,
  // which nothing resends for an admin), nothing reached the contact: the suggestion is not
  // sent, and stays on the page with why. Not after a 5xx or a cut-off send, which may have
  // gone out.
  const wentNowhere = outcome.kind === 'held' || outcome.kind === 'rejected' || (outcome.kind === 'retry' && outcome.reply.status === 'send_failed' && !outcome.reply.maybeSent);
  if (wentNowhere) await suggestionReopen(runtime.db, suggestion.id, reply.id);
  return { message: outcome.reply, outcome };
}

/** Asks the AI for a draft on the newest inbound message (the `suggest` job). */
export async function suggestionRequest(runtime: Runtime, conversationId: string): Promise<string> {
  const messageId = await latestInboundId(runtime.db, conversationId);
  if (!messageId) throw new ActionError(409, 'this conversation has no inbound message to answer');
  return suggestEnqueue(runtime.db, { conversationId, messageId });
}

/**
 * Stores an inbound message as the webhook would (the same statement: message and job
 * together, the workers woken at commit), for trying the loop without Twilio. Only
 * offered with the `log` transport.
 */
export async function inboundSimulate(runtime: Runtime, input: { from: string; body: string; profileName?: string }): Promise<{ conversationId: string; messageId: string }> {
  if (runtime.transport.kind !== 'log') throw new ActionError(409, 'simulating is only for the log transport: with Twilio configured, send a real WhatsApp message');
  // A name names a new contact only: trying a message as an existing one must not rename it.
  const known = await runtime.db.query('select 1 from contacts where whatsapp_number = $1', [input.from]);
  const optChange = optChangeOf(input.body, optKeywordsOf(runtime.config));
  const stored = await inboundStoreAndEnqueue(runtime.db, {
    whatsappNumber: input.from,
    profileName: known.rowCount > 0 ? undefined : input.profileName,
    body: input.body,
    optChange,
    mediaUrls: [],
    // A SID in Twilio's shape that Twilio never issues (SM + 32 hex), unique per message.
    twilioSid: `SM${randomBytes(16).toString('hex')}`,
  });
  if (!stored) throw new Error('simulated message was not stored');
  const recorded = await optChangeRecorded(runtime.db, optChange, stored.messageId);
  if (recorded) runtime.metrics.observeOptChange(recorded, 'contact');
  return stored;
}

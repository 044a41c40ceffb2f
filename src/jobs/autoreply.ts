// The `autoreply` job: answer one inbound WhatsApp message, through the outbox, at most
// once. Joins the queue to messaging: outbox outcomes become job results or job errors
// (retry, retry later, fail at once). What the reply says is composeReply's business.
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { Queryable } from '../db/types.ts';
import { inboundQuiet, inboundReplyState, type InboundMessageInput, type InboundReplyState } from '../messaging/conversations.ts';
import { ReplyWithheldError, replyFlag, replyPartsForInbound, replyPartsResume, replySend, type OutboxDeps, type ReplyOutcome } from '../messaging/outbox.ts';
import { replyParts } from '../messaging/reply-parts.ts';
import { statusCallbackUrl } from '../messaging/twilio.ts';
import { jobEnqueue, jobRetry, NOTIFY_CHANNEL, PermanentJobError, RetryLaterError, type JobHandler } from '../queue/index.ts';
import { maskPhone } from '../logger.ts';
import { optChangeOf, optKeywordsOf } from '../messaging/opt-out.ts';
import type { Runtime } from '../runtime.ts';
import { composeReply } from './reply-text.ts';
import type { ReplyDeps } from './reply-context.ts';
import { mediaDepsOf, mediaProcessForReply } from './media-process.ts';

/** The job type. */
export const AUTOREPLY = 'autoreply';

const payloadSchema = z.object({
  messageId: z.uuid(),
  conversationId: z.uuid(),
  /**
   * A start keyword's job only: whether it opted the contact back in (false: they were not
   * opted out, and it is an ordinary message). Set by the store statement
   * (migrations/0023_start_when_not_opted_out.sql); jobs written before it have none.
   */
  optIn: z.boolean().optional(),
});
export type AutoreplyPayload = z.infer<typeof payloadSchema>;

// Five attempts, not the queue's default three: with the default backoff that rides out
// about 2.5 minutes of a flapping LLM or Twilio (10 + 20 + 40 + 80 s), and a late reply is
// still worth more to the person waiting than a failed one. Throttling (429) costs none.
const AUTOREPLY_MAX_ATTEMPTS = 5;

/**
 * Enqueues the reply to a stored inbound message, in the caller's transaction. The ordering
 * key is the conversation (shared with suggest), so two quick messages are answered in order.
 */
export function autoreplyEnqueue(tx: Queryable, payload: AutoreplyPayload): Promise<string> {
  return jobEnqueue(tx, { type: AUTOREPLY, payload, orderingKey: payload.conversationId, maxAttempts: AUTOREPLY_MAX_ATTEMPTS });
}

// The store statements below wake the workers themselves: a NOTIFY in the statement's own
// transaction, which PostgreSQL delivers when it commits (and drops if it rolls back).
// It used to be a statement of its own after commit, sent at most one at a time, because a
// transaction that notifies holds a global lock through its commit: notifying transactions
// commit one at a time. But the webhook's writes already commit one at a time (one writer,
// inbound-batch.ts), and the separate NOTIFY took the same lock, as a transaction more per
// batch. In one statement: 11% more webhooks a second, 12% less PostgreSQL CPU and 17% less
// of serve's per webhook (interleaved runs of the webhook bench). With several `aiq serve`
// processes their batches' commits take turns on that lock, as their NOTIFYs did.
// pg_notify in FROM is called once per statement, not per row (and PostgreSQL folds equal
// notifications of one transaction anyway).
const WAKE_WORKERS = (channel: string) => `pg_notify(${channel}, '') as wake_workers`;

// The webhook's whole write in one statement, so one round trip and no explicit
// transaction: aiq_inbound_store (migrations/0017_inbound_store_function.sql) upserts the
// contact (recording an opt-out or opt-in keyword) and its conversation with the business
// number written to (opening the 24-hour window), inserts the message and its media and
// enqueues its job (quietly: the job insert's own trigger does not notify), and the same
// statement notifies the workers (WAKE_WORKERS above). A redelivered MessageSid
// inserts no message, hence no job, and returns no row; its contact and conversation are
// left untouched too. The conversation upsert takes the next inbound position under the
// conversation row's lock, held until commit: positions become visible in order
// (0006_inbound_sequence.sql). A function, because PL/pgSQL keeps its plan for the session:
// planning the five-part statement cost as much as running it. The version called here
// (0026_quoted_replies.sql) also notes the message a contact quoted, if any.
const INBOUND_STORE_AND_ENQUEUE_SQL = `
  select stored_message_id as message_id, stored_conversation_id as conversation_id
  from aiq_inbound_store($1, $2, $3, $4::text[], $5, $6, $7, $8, $9, $10::text[], $11),
       ${WAKE_WORKERS('$12')}`;

/** MediaContentTypeN for each MediaUrlN, '' where Twilio sent none. */
const mediaTypesOf = (input: InboundMessageInput) => input.mediaUrls.map((_, i) => input.mediaContentTypes?.[i] ?? '');

/**
 * Stores an inbound message with its contact and conversation and enqueues its autoreply,
 * atomically in one statement that also wakes the workers; null for a redelivered MessageSid.
 */
export async function inboundStoreAndEnqueue(db: Queryable, input: InboundMessageInput): Promise<AutoreplyPayload | null> {
  const result = await db.query<{ message_id: string; conversation_id: string }>(INBOUND_STORE_AND_ENQUEUE_SQL, [
    input.whatsappNumber,
    input.profileName ?? null,
    input.body,
    input.mediaUrls,
    input.twilioSid,
    AUTOREPLY,
    AUTOREPLY_MAX_ATTEMPTS,
    input.optChange ?? null,
    input.businessNumber ?? null,
    mediaTypesOf(input),
    input.repliedToSid ?? null,
    NOTIFY_CHANNEL,
  ]);
  const row = result.rows[0];
  return row ? { messageId: row.message_id, conversationId: row.conversation_id } : null;
}


// Several webhooks' messages in one call and one commit (group commit: inbound-batch.ts),
// each part of the store once for all of them (0020_inbound_store_set.sql).
const INBOUND_STORE_MANY_SQL = `
  select item, stored_message_id as message_id, stored_conversation_id as conversation_id
  from aiq_inbound_store_batch($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::int[], $8::text[], $9::text[], $10, $11, $12::text[]),
       ${WAKE_WORKERS('$13')}`;

/**
 * Stores inbound messages of different contacts, each as inboundStoreAndEnqueue would, all
 * in one statement (so all or none); per message its payload, or null for a redelivered
 * MessageSid. Two messages of one contact make it fail: write those one by one.
 */
export async function inboundStoreManyAndEnqueue(db: Queryable, inputs: InboundMessageInput[]): Promise<Array<AutoreplyPayload | null>> {
  // Media files flattened, each with its message's position (1-based).
  const media = inputs.flatMap((input, i) => {
    const types = mediaTypesOf(input);
    return input.mediaUrls.map((url, n) => ({ item: i + 1, url, type: types[n]! }));
  });
  const result = await db.query<{ item: number; message_id: string; conversation_id: string }>(INBOUND_STORE_MANY_SQL, [
    inputs.map((input) => input.whatsappNumber),
    inputs.map((input) => input.profileName ?? null),
    inputs.map((input) => input.body),
    inputs.map((input) => input.twilioSid),
    inputs.map((input) => input.optChange ?? null),
    inputs.map((input) => input.businessNumber ?? null),
    media.map((m) => m.item),
    media.map((m) => m.url),
    media.map((m) => m.type),
    AUTOREPLY,
    AUTOREPLY_MAX_ATTEMPTS,
    // Null when none quotes a message: the function then skips noting quotes.
    inputs.some((input) => input.repliedToSid) ? inputs.map((input) => input.repliedToSid ?? null) : null,
    NOTIFY_CHANNEL,
  ]);
  const stored: Array<AutoreplyPayload | null> = inputs.map(() => null);
  for (const row of result.rows) stored[row.item - 1] = { messageId: row.message_id, conversationId: row.conversation_id };
  return stored;
}

// A status callback just confirmed a reply: its job may be waiting for exactly that (after
// a crash mid-send), and holds back the conversation's later jobs meanwhile. Make it due
// now and wake the workers. Found through the ordering-key index; matches nothing when the
// job finished long ago, which is the usual case.
const AUTOREPLY_WAKE_SQL = `
  with woken as (
    update ai_jobs set next_run_at = now(), updated_at = now()
    where ordering_key = $1 and status = 'pending' and type = 'autoreply'
      and payload->>'messageId' = $2 and next_run_at > now()
    returning id
  )
  select pg_notify($3, '') from woken limit 1`;

/** Runs the autoreply job of `inboundMessageId` now if it is waiting for its reply's confirmation. */
export async function autoreplyWake(db: Queryable, conversationId: string, inboundMessageId: string): Promise<boolean> {
  const result = await db.query(AUTOREPLY_WAKE_SQL, [conversationId, inboundMessageId, NOTIFY_CHANNEL]);
  return result.rows.length > 0;
}

// A reply flagged for a human (its job failed saying so) that Twilio's status callback then
// confirmed was no alarm: the job's error says so, and the job runs once more. That run
// finds the reply confirmed and ends done, resending nothing; for a reply split into parts
// it sends the parts that were waiting behind the flagged one.
const AUTOREPLY_CONFIRMED_LATE_SQL = `
  update ai_jobs set last_error = $3, updated_at = now()
  where ordering_key = $1 and type = 'autoreply' and status = 'failed' and payload->>'messageId' = $2
  returning id`;

/** Takes back the alarm on the failed job of `inboundMessageId` after its flagged reply was confirmed. */
export async function autoreplyConfirmedLate(db: Queryable, conversationId: string, inboundMessageId: string, replyId: string, status: string): Promise<boolean> {
  const text = `confirmed after all: reply ${replyId} was flagged for a human, then Twilio's status callback reported it ${status} at ${new Date().toISOString()}; finishing the job (nothing is resent)`;
  const result = await db.query<{ id: string }>(AUTOREPLY_CONFIRMED_LATE_SQL, [conversationId, inboundMessageId, text]);
  const id = result.rows[0]?.id;
  return id !== undefined && (await jobRetry(db, id));
}

// The payload the message's first job had (a start keyword's optIn included), for one more run.
const AUTOREPLY_PAYLOAD_SQL = `
  select payload from ai_jobs
  where ordering_key = $1 and type = 'autoreply' and payload->>'messageId' = $2
  order by seq limit 1`;

/**
 * Runs the autoreply of `inboundMessageId` once more, after the conversation's jobs queued
 * so far: its reply, written already, is resumed (nothing confirmed is sent again).
 */
export async function autoreplyRerun(db: Queryable, conversationId: string, inboundMessageId: string): Promise<string> {
  const first = await db.query<{ payload: AutoreplyPayload }>(AUTOREPLY_PAYLOAD_SQL, [conversationId, inboundMessageId]);
  return autoreplyEnqueue(db, first.rows[0]?.payload ?? { messageId: inboundMessageId, conversationId });
}

/** What the outbox needs from a runtime; the AI's replies and the admin's go through the same. */
export function outboxDepsOf(runtime: Runtime): OutboxDeps {
  return {
    db: runtime.db,
    transport: runtime.transport,
    confirmTimeoutSeconds: runtime.config.REPLY_CONFIRM_TIMEOUT_SECONDS,
    sendAs: (businessNumber) => {
      const profile = runtime.profiles.of(businessNumber);
      return { from: runtime.profiles.senderOf(businessNumber), template: profile.template };
    },
    statusCallbackUrl: (messageId) => statusCallbackUrl(runtime.config.PUBLIC_URL, messageId),
  };
}

// Why a resend cut off on the job's last attempt is flagged at once (the loop in the handler).
const RESENT_CUT_OFF = "it was sent again after Twilio's Messages list showed no record of the first send, that send was cut off too, and the job has no attempt left";
// Why a send Twilio answered with a 5xx on the job's last attempt is flagged at once: no
// retry is left to ask Twilio's list past the deadline or to wait for the status callback.
const LAST_ATTEMPT_5XX = "Twilio answered its send with a 5xx, which does not prove it was not sent, and the job has no attempt left to wait for its status callback or ask Twilio's list again";

// The next look comes just after the deadline, so that it decides (confirmed or flagged)
// instead of waiting once more.
const WAIT_SLACK_MS = 1000;

/** Why a new reply is not written for this state, or null: the guards read with the conversation just now (checked again right before sending). */
function newReplySkipped(state: InboundReplyState): Record<string, unknown> | null {
  if (state.conversation.optedOutAt) return { skipped: 'opted_out' };
  // Human takeover: an admin answers; the AI neither sends nor resends anything here.
  if (state.conversation.aiPaused) return { skipped: 'ai_paused' };
  // The seed's done-is-noop guard: a reply already covered this message.
  if (state.answeredBy) return { skipped: 'already_answered', by: state.answeredBy };
  // A contact card or a reaction comes with no text and no media (a location is stored as
  // its text: webhooks.ts): the model would see nothing new and answer the question before it again.
  if (state.thread.unanswered.length > 0 && state.thread.unanswered.every((m) => !m.body.trim() && m.mediaUrls.length === 0)) {
    return { skipped: 'nothing_to_answer', reason: 'no text and no media (a contact card or a reaction?)' };
  }
  return null;
}

// REPLY_WAIT_SECONDS: people write in bursts ("Hoi" / "ik heb een vraag" / "hoeveel
// vakantiedagen heb ik?"), and a reply that starts at the first message answers only that
// one, then another follows for the rest. Waiting until the conversation has been quiet
// that long lets the first job's reply answer them all (the later jobs find their messages
// answered and end at once). A contact who keeps writing is answered after at most four
// times the wait, and never later than half the job's timeout; a STOP or a human taking
// over ends the wait at once. The job holds its worker slot meanwhile, not a database
// connection. Only a first attempt waits: a retry answers what is there.
const REPLY_WAIT_LONGEST = 4;
// How often a waiting reply looks again (one indexed read): how late a STOP ends its wait.
const REPLY_WAIT_LOOK_MS = 500;

/** Waits until the contact's newest message is `waitMs` old, at most `longestMs` in all; true when it waited. */
async function quietWait(db: Queryable, conversationId: string, waitMs: number, longestMs: number, signal: AbortSignal): Promise<boolean> {
  const until = Date.now() + longestMs;
  let waited = false;
  for (;;) {
    const { quietMs, interrupted } = await inboundQuiet(db, conversationId);
    const left = Math.min(waitMs - quietMs, until - Date.now());
    if (interrupted || left <= 0) return waited;
    await sleep(Math.min(left, REPLY_WAIT_LOOK_MS), undefined, { signal });
    waited = true;
  }
}

/**
 * The handler: done-is-noop guard, human takeover, then the reply through the outbox.
 * Outcomes map to job errors in `resultOf`.
 */
export function autoreplyHandler(runtime: Runtime, depsFor: (businessNumber: string | null) => ReplyDeps): JobHandler<AutoreplyPayload> {
  const deps = outboxDepsOf(runtime);
  const optKeywords = optKeywordsOf(runtime.config);
  const media = mediaDepsOf(runtime);
  const confirmation = { out: runtime.config.OPT_OUT_REPLY.trim(), in: runtime.config.OPT_IN_REPLY.trim() };
  const replyWaitMs = runtime.config.REPLY_WAIT_SECONDS * 1000;
  const replyWaitLongestMs = Math.min(REPLY_WAIT_LONGEST * replyWaitMs, runtime.config.JOB_TIMEOUT_MS / 2);

  return {
    type: AUTOREPLY,
    schema: payloadSchema,
    async run({ job, payload, signal, logger }) {
      // The message, its conversation and what the guards below need, in one read.
      const readState = async () => {
        const read = await inboundReplyState(runtime.db, payload.messageId, runtime.config.HISTORY_MESSAGES);
        if (!read || read.inbound.source !== 'inbound' || read.inbound.conversationId !== payload.conversationId) {
          throw new PermanentJobError(`no inbound message ${payload.messageId} in conversation ${payload.conversationId}`);
        }
        return read;
      };
      let state = await readState();
      const { inbound } = state;
      // Whether a failure now is retried: Twilio's list that cannot be read is then asked
      // again at the next attempt instead of flagging the reply (ResumeOptions.attemptsLeft).
      const attemptsLeft = job.attempts < job.maxAttempts;
      const to = `whatsapp:${state.conversation.whatsappNumber}`;
      const keyword = optChangeOf(inbound.body, optKeywords);
      // "Start" from a contact who was not opted out changed nothing: answered as any message.
      const optChange = keyword === 'in' && payload.optIn === false ? null : keyword;

      let outcome: ReplyOutcome;
      let meta: Record<string, unknown> | undefined;
      const existing = state.replyWritten ? await replyPartsForInbound(runtime.db, inbound.id) : [];
      if (existing.length > 0) {
        // A retry: this message's reply was written by an earlier attempt; go on from there.
        // A STOP since then stops what has not gone out yet, and so does a human's takeover (a
        // pause, an admin's reply): the outbox records it as withheld.
        try {
          outcome = await replyPartsResume(deps, existing, to, { confirms: optChange ?? undefined, attemptsLeft });
        } catch (err) {
          if (err instanceof ReplyWithheldError) return { skipped: err.reason, resumed: true };
          throw err;
        }
      } else if (optChange) {
        // A stop or start keyword (recorded on the contact by the webhook): one confirmation,
        // unless switched off, or the contact changed their mind again since.
        if ((state.conversation.optedOutAt !== null) !== (optChange === 'out')) return { optChange, skipped: 'changed again since' };
        if (!confirmation[optChange]) return { optChange, confirmation: 'off' };
        meta = { optChange };
        try {
          outcome = await replySend(deps, { conversationId: state.conversation.id, replyToMessageId: inbound.id, parts: [confirmation[optChange]], contextUntilSeq: inbound.seq, confirms: optChange, attemptsLeft }, to);
        } catch (err) {
          // Changed again between the read above and the write: nothing to confirm.
          if (err instanceof ReplyWithheldError) return { optChange, skipped: err.reason };
          throw err;
        }
      } else {
        const mediaOptions = { finalAttempt: job.attempts >= job.maxAttempts, purpose: 'autoreply', signal } as const;
        // A message the AI does not answer is still read by a person: the admin who took
        // over, or who answered it already. Its voice notes and photos are fetched (and
        // transcribed) all the same; the thread showed them as being fetched for good.
        const skip = async (skipped: Record<string, unknown>) => {
          await mediaProcessForReply(media, state, mediaOptions);
          return skipped;
        };
        const skipped = newReplySkipped(state);
        if (skipped) return await skip(skipped);
        // A first attempt reads the thread once the contact has stopped typing, so that one
        // reply answers their burst; what it waited for is checked again.
        if (replyWaitMs > 0 && job.attempts <= 1 && (await quietWait(runtime.db, state.conversation.id, replyWaitMs, replyWaitLongestMs, signal))) {
          state = await readState();
          const skippedSince = newReplySkipped(state);
          if (skippedSince) return await skip(skippedSince);
        }
        const { conversation } = state;
        // Voice notes and photos first: the reply reads their transcripts (media-process.ts).
        const thread = await mediaProcessForReply(media, state, mediaOptions);
        const composed = await composeReply(depsFor, conversation, inbound, signal, thread);
        meta = composed.meta;
        const parts = replyParts(composed.body, runtime.config.REPLY_MAX_CHARS, runtime.config.REPLY_OVERFLOW);
        meta = { ...meta, ...(parts.length > 1 ? { parts: parts.length } : {}) };
        try {
          outcome = await replySend(deps, { conversationId: conversation.id, replyToMessageId: inbound.id, parts, contextUntilSeq: composed.contextUntilSeq, citations: composed.citations, attemptsLeft }, to);
        } catch (err) {
          // The contact sent STOP, or a human took over, while the reply was being composed:
          // nothing was written or sent.
          if (err instanceof ReplyWithheldError) return { skipped: err.reason, ...meta };
          throw err;
        }
      }
      // A wait keeps the job's attempt (resultOf), bounded by the reply's confirmation deadline,
      // except one for a resend of a reply Twilio never got: its first send failed, which
      // counts (so that a Twilio that keeps dropping sends it never stores ends the job). With
      // no attempt left that would leave the reply unconfirmed and unflagged: flag now.
      // Harmless if Twilio's callback still comes: it outranks `flagged` and confirms it.
      // A send Twilio answered with a 5xx on the last attempt is flagged too: it may have gone
      // out, and left `send_failed` behind a failed job it said "not sent" for good.
      // A loop: Twilio's list may confirm it, and the next part, sent now, be resent in turn.
      while (job.attempts >= job.maxAttempts && ((outcome.kind === 'waiting' && outcome.resent) || (outcome.kind === 'retry' && outcome.maybeSent))) {
        outcome = await replyFlag(deps, outcome.reply, outcome.kind === 'retry' ? LAST_ATTEMPT_5XX : RESENT_CUT_OFF, to);
        // Twilio's list had it after all: the parts after it are due now, in order.
        if (outcome.kind === 'already-sent' && outcome.reply.part < outcome.reply.parts) {
          try {
            outcome = await replyPartsResume(deps, await replyPartsForInbound(runtime.db, inbound.id), to, { confirms: optChange ?? undefined });
          } catch (err) {
            if (err instanceof ReplyWithheldError) return { skipped: err.reason, resumed: true, ...meta };
            throw err;
          }
        }
      }
      if (outcome.kind === 'waiting') logger.warn({ replyId: outcome.reply.id, retryInMs: outcome.retryInMs }, 'reply not confirmed yet: waiting for the status callback');
      if (outcome.kind === 'sent') {
        // Without Twilio the reply went to the log transport: "sent" would contradict its line.
        const what = outcome.reply.status === 'logged' ? 'reply done: logged, not sent' : 'reply sent';
        logger.info({ to: maskPhone(to), replyId: outcome.reply.id, sid: outcome.reply.twilioSid, status: outcome.reply.status, parts: outcome.reply.parts }, what);
      }
      return { ...resultOf(outcome), ...meta };
    },
  };
}

/** Success is a small result; everything else is the job error that says what comes next. */
function resultOf(outcome: ReplyOutcome): Record<string, unknown> {
  switch (outcome.kind) {
    case 'sent':
    case 'already-sent':
      return { replyId: outcome.reply.id, status: outcome.reply.status, sid: outcome.reply.twilioSid, ...(outcome.kind === 'already-sent' ? { resumed: true } : {}) };
    case 'waiting':
      // Not the job's fault, so the wait does not use up an attempt, however old the job: the
      // reply's confirmation deadline bounds it (then confirmed, resent or flagged). The resend
      // of a reply Twilio never got counts its failed first send, as a 5xx would have.
      if (outcome.resent) throw new RetryLaterError(`${outcome.reason} (resent: Twilio had no record of the first send)`, { delayMs: outcome.retryInMs + WAIT_SLACK_MS });
      throw new RetryLaterError(outcome.reason, { delayMs: outcome.retryInMs + WAIT_SLACK_MS, waiting: true });
    case 'flagged':
    case 'held':
      throw new PermanentJobError(outcome.reason);
    case 'rejected':
      throw new PermanentJobError(`reply ${outcome.reply.id} refused by Twilio: ${outcome.reason}`);
    case 'retry':
      if (outcome.throttled) {
        // Without Twilio's Retry-After the worker backs off, longer at each throttle in a row.
        throw new RetryLaterError(`reply ${outcome.reply.id} ${outcome.reason}`, { delayMs: outcome.retryAfterMs, countsAsAttempt: false });
      }
      throw new Error(`reply ${outcome.reply.id} ${outcome.reason}`);
  }
}

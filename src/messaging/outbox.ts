// The reply outbox: a reply goes out exactly once, or visibly not at all. Written before the
// send (unique per answered inbound message and part), confirmed with Twilio's SID after; a
// retry never resends one that may be out, it waits for the status callback and then flags
// it for a human. A reply split into parts sends them in order, each the same way.
// Knows the transport and the database, not the queue: callers map outcomes to job errors.
import type { Queryable } from '../db/types.ts';
import { answeredSinceSql, answersSomethingSql, messageFromRow, messageGet, type Message } from './conversations.ts';
import { SendError, type Transport } from './transport.ts';
import { OUTSIDE_SESSION_WINDOW } from './twilio.ts';
import { heldReason, templateFill, windowOpenSql, type ReplyTemplate } from './window.ts';

/** What a delivery attempt came to. */
export type ReplyOutcome =
  /** Handed to Twilio (or printed) just now. */
  | { kind: 'sent'; reply: Message }
  /** An earlier attempt's reply is confirmed: nothing to do. */
  | { kind: 'already-sent'; reply: Message }
  /**
   * It may have gone out and is not confirmed yet: look again after `retryInMs`, never resend.
   * `resent`: this send is the resend of a reply Twilio's list showed it never got, so the
   * first send failed (as a 5xx that proves it would have): the one wait a caller counts.
   */
  | { kind: 'waiting'; reply: Message; retryInMs: number; reason: string; resent?: boolean }
  /** Not confirmed in time: a human must check whether it arrived. */
  | { kind: 'flagged'; reply: Message; reason: string }
  /** Twilio refused it for good (4xx): `reason` says why, with Twilio's code. */
  | { kind: 'rejected'; reply: Message; code?: number; reason: string }
  /**
   * Nothing went out (429, 5xx, unreachable): send again, after `retryAfterMs` when given.
   * `maybeSent`: Twilio answered a 5xx, which does not prove that (a retry asks its list
   * first): SendError.maybeSent, recorded on the reply as `maybe_sent`.
   * Also: whether it went out is still unknown because Twilio's Messages list could not be
   * read (a time-out, a 5xx) and the caller has attempts left (ResumeOptions.attemptsLeft):
   * try again later, which asks the list again and never resends what may be out.
   */
  | { kind: 'retry'; reply: Message; reason: string; throttled: boolean; retryAfterMs?: number; maybeSent?: boolean }
  /** Outside the 24-hour window without a usable template: written, never sent; a human decides. */
  | { kind: 'held'; reply: Message; reason: string };

/** A reply was not written, or not sent, and must not be: `reason` says why, as a job result's `skipped`. */
export class ReplyWithheldError extends Error {
  constructor(
    readonly reason: 'opted_out' | 'changed again since' | 'answered since' | keyof typeof TAKEOVER_TEXT,
    message: string,
  ) {
    super(message);
  }
}

/** A held reply, retried, is not sent: a later reply has answered what it answered. */
export class AnsweredSinceError extends ReplyWithheldError {
  constructor(message: string) {
    super('answered since', message);
  }
}

/** The contact opted out before the reply was written or sent. */
export class OptedOutError extends ReplyWithheldError {
  constructor(message: string) {
    super('opted_out', message);
  }
}

/** The confirmation of a STOP (START) was not written, or not sent: the contact opted in (out) again first. */
export class OptChangedAgainError extends ReplyWithheldError {
  constructor(message: string) {
    super('changed again since', message);
  }
}

/**
 * The AI's answer was not written, or not sent, because a human took over first: the
 * conversation was paused for a human (`ai_paused`), or an admin's reply already answered
 * the message (`already_answered`).
 */
export class HumanTookOverError extends ReplyWithheldError {}

const TAKEOVER_TEXT = {
  ai_paused: 'the conversation was paused for a human',
  already_answered: "an admin's reply answered the message",
} as const;

/** What the outbox works with; autoreply and the dashboard build one from the runtime. */
export interface OutboxDeps {
  db: Queryable;
  transport: Transport;
  /** How long an unconfirmed reply waits for Twilio's status callback before it is flagged. */
  confirmTimeoutSeconds: number;
  /** The status callback URL for a reply, or undefined when Twilio cannot reach us. */
  statusCallbackUrl(messageId: string): string | undefined;
  /**
   * Per business number: the sender replies leave from (undefined: the transport's own) and
   * the approved template they go as outside the 24-hour window (null: such replies are held).
   * Absent: the default sender and no template.
   */
  sendAs?(businessNumber: string | null): { from?: string; template: ReplyTemplate | null };
}

/** A human's reply: any number per inbound message, one WhatsApp message each. */
export interface NewAdminReply {
  conversationId: string;
  /** The inbound message answered (the newest, or the one a suggestion was drafted for). */
  replyToMessageId: string | null;
  body: string;
  /**
   * The highest inbound position it answers: a suggestion sent as drafted answers what its
   * draft's prompt held, a reply from the dashboard what its page showed. Unset: every
   * message stored when it is written. Never more than that.
   */
  contextUntilSeq?: number | null;
}

/** The AI reply to an inbound message, its parts in order; empty if none was ever written. */
export async function replyPartsForInbound(db: Queryable, inboundMessageId: string): Promise<Message[]> {
  const result = await db.query(`select * from messages where reply_to_message_id = $1 and source = 'ai' order by part`, [inboundMessageId]);
  return result.rows.map((row) => messageFromRow(row as never));
}

// The test every statement that writes or starts a send makes in SQL, so that a STOP
// committed just before it stops it: the conversation's contact has not opted out.
const CONTACT_NOT_OPTED_OUT = (conversationId: string) => `
  not exists (
    select 1 from conversations c join contacts k on k.id = c.contact_id
    where c.id = ${conversationId} and k.opted_out_at is not null)`;

// What the contact's opt-out allows a reply: the confirmation of an opt-out goes only while
// the contact is still out (a START since makes it stale); anything else only while they
// are not. `confirmsOptOut` is a boolean parameter, never null: "confirms an opt-out" must
// differ from "not opted out".
const OPT_OUT_ALLOWS = (confirmsOptOut: string, conversationId: string) => `
  (${confirmsOptOut}::boolean <> ${CONTACT_NOT_OPTED_OUT(conversationId)})`;

// The test every statement that writes or starts a send of the AI's answer to the inbound
// message at position `seq` makes in SQL: no human has taken the conversation over, i.e. it
// is not paused for a human and no admin reply (sent, or on its way) answered that message.
// Read by the statement itself, not when the job began: an admin who pauses and answers
// while the model is still writing, or while a failed send waits for its retry, would
// otherwise get the AI's answer after their own.
// Its aliases (p, a) are its own, so that it reads the same inside any outer statement.
const NO_HUMAN_TOOK_OVER = (conversationId: string, seq: string) => `
  not exists (select 1 from conversations p where p.id = ${conversationId} and p.ai_paused)
  and not ${ADMIN_ANSWERED(conversationId, seq)}`;

/** An admin reply (sent, or on its way) answered the conversation's inbound message at `seq`. */
const ADMIN_ANSWERED = (conversationId: string, seq: string) => `
  exists (
    select 1 from messages a
    where a.conversation_id = ${conversationId} and a.source = 'admin'
      and ${answersSomethingSql('a')} and a.context_until_seq >= ${seq})`;

// An admin reply, written before sending, in `pending`, with the send's start time. It
// answers every inbound message visible as it is written (the done-is-noop guard), or up to
// $4 (a suggestion sent as drafted answers what its draft covered; a dashboard reply what
// its page showed: a question that came in while the admin typed stays open for the AI).
// least() passes over a null $4, and a $4 past the newest message claims no more.
const ADMIN_REPLY_INSERT_SQL = `
  with reply as (
    insert into messages (conversation_id, source, body, status, reply_to_message_id, context_until_seq, send_started_at)
    select $1, 'admin', $2, 'pending', $3, least($4::int8, (select inbound_seq from conversations where id = $1)), now()
    where ${CONTACT_NOT_OPTED_OUT('$1')}
    returning *
  ), touched as (
    update conversations set last_message_at = now()
    where id = $1 and exists (select 1 from reply)
  )
  select * from reply`;

// An AI reply's parts, all written in one statement before the first is sent: a retry
// finds the same parts, and racing attempts cannot both write them (the unique index on
// (reply_to_message_id, part) makes the insert the claim, as for one part). The first part
// is written claimed, in `pending` with its send's start time, and comes back with what its
// send depends on (SEND_CONTEXT_SQL): writing it `unsent` and claiming it in a second
// statement cost a round trip and a commit per reply and closed no window, since the send
// starts right after either commit and a crash in between leaves `pending` both ways. The
// later parts wait in `unsent` for their turn. Nothing is written for a contact who opted
// out meanwhile (a STOP while the reply was composed), and when $7 says this is the
// confirmation of an opt-out, nothing unless the contact is still out (OPT_OUT_ALLOWS); nor
// when a human took over meanwhile, unless $8 says this confirms an opt-out or opt-in (not
// the AI's answer, so a takeover does not stop it).
const REPLY_PARTS_INSERT_SQL = `
  with reply as (
    insert into messages (conversation_id, source, body, status, send_started_at,
                          reply_to_message_id, context_until_seq, part, parts, citations)
    select $1, 'ai', p.body,
           case when p.part = 1 then 'pending' else 'unsent' end,
           case when p.part = 1 then now() end,
           $2, $3, p.part::int, $5, case when p.part = 1 then $6::jsonb end
    from unnest($4::text[]) with ordinality as p(body, part)
    where ${OPT_OUT_ALLOWS('$7', '$1')}
      and ($8::boolean or ${NO_HUMAN_TOOK_OVER('$1', '(select i.seq from messages i where i.id = $2)')})
    on conflict (reply_to_message_id, part) where source = 'ai' do nothing
    returning *
  ), touched as (
    update conversations set last_message_at = now()
    where id = $1 and exists (select 1 from reply)
  )
  select reply.*, c.last_inbound_at as send_last_inbound_at, ${windowOpenSql('c.last_inbound_at')} as send_window_open, k.profile_name as send_profile_name, c.business_number as send_business_number
  from reply
  join conversations c on c.id = reply.conversation_id
  join contacts k on k.id = c.contact_id
  order by reply.part`;

// Every statement that starts a send of a reply written earlier (its next part, a resend)
// takes it only while its contact has not opted out and, for the AI's answer, no human has
// taken over, as the insert above writes it only then: a STOP, a pause or an admin's reply
// between a reply's write and a later send stops that send too. `confirmsOptOut` says the
// reply is the confirmation of an opt-out, which goes out only while the contact is still
// out (a START since would make it stale); `confirms` that it confirms an opt change, which
// a human's takeover does not stop.
const MAY_SEND = (confirmsOptOut: string, confirms: string) => `(
  ${OPT_OUT_ALLOWS(confirmsOptOut, 'messages.conversation_id')}
  and (${confirms}::boolean or messages.source <> 'ai'
       or ${NO_HUMAN_TOOK_OVER('messages.conversation_id', '(select i.seq from messages i where i.id = messages.reply_to_message_id)')}))`;

// A part's turn: from `unsent` to `pending`, with the send's start time. Conditional, so of
// two attempts only one sends it. Returns what the send depends on too (SEND_CONTEXT_SQL),
// read in the same statement: one round trip less per reply.
const REPLY_PART_CLAIM_SQL = `
  with claimed as (
    update messages set status = 'pending', send_started_at = now(), status_updated_at = now()
    where id = $1 and status = 'unsent' and ${MAY_SEND('$2', '$3')}
    returning *
  )
  select claimed.*, c.last_inbound_at as send_last_inbound_at, ${windowOpenSql('c.last_inbound_at')} as send_window_open, k.profile_name as send_profile_name, c.business_number as send_business_number
  from claimed
  join conversations c on c.id = claimed.conversation_id
  join contacts k on k.id = c.contact_id`;

/** A part just claimed for sending, with what its send depends on (REPLY_PARTS_INSERT_SQL, REPLY_PART_CLAIM_SQL). */
interface ClaimedRow {
  send_last_inbound_at: Date | null;
  send_window_open: boolean;
  send_profile_name: string | null;
  send_business_number: string | null;
}

function sendContextFromRow(row: ClaimedRow): SendContextRow {
  return { last_inbound_at: row.send_last_inbound_at, window_open: row.send_window_open, profile_name: row.send_profile_name, business_number: row.send_business_number };
}

/**
 * Writes an admin reply in `pending`, before anything is sent; pass a transaction to write
 * it together with other state (a suggestion marked sent). Send it with `replyDispatch`
 * after commit.
 */
export async function replyWriteAdmin(db: Queryable, input: NewAdminReply): Promise<Message> {
  const inserted = await db.query(ADMIN_REPLY_INSERT_SQL, [input.conversationId, input.body, input.replyToMessageId, input.contextUntilSeq ?? null]);
  // Tested in the write itself, not only before it: a STOP between the two stops it too.
  if (!inserted.rows[0]) throw new OptedOutError(`the contact opted out before the message to conversation ${input.conversationId} was written`);
  return messageFromRow(inserted.rows[0] as never);
}

/** An AI reply to write and send: its text as the parts to send, in order (one when it fits). */
export interface NewAiReply extends ResumeOptions {
  conversationId: string;
  /** The inbound message answered: at most one AI reply (set of parts) per message. */
  replyToMessageId: string;
  parts: string[];
  /** The highest inbound position the reply's prompt contained (the done-is-noop guard). */
  contextUntilSeq?: number | null;
  /** What the reply drew on (stored with its first part, for the dashboard). */
  citations?: unknown;
  /**
   * The opt change this reply confirms, if it is a confirmation: that of an opt-out is the
   * one reply that goes to a contact who opted out; neither is the AI's answer, so a
   * human's takeover does not stop it.
   */
  confirms?: 'out' | 'in';
}

/** The send statements' parameters for what a reply confirms (MAY_SEND). */
function confirmsParams(confirms: 'out' | 'in' | undefined): [confirmsOptOut: boolean, confirmsOptChange: boolean] {
  return [confirms === 'out', confirms !== undefined];
}

/**
 * Writes an AI reply's parts and sends them to `to` (`whatsapp:+…`) in order. When a racing
 * attempt wrote them already, continues with those instead: no part is ever sent twice.
 * Throws OptedOutError, having written nothing, when the contact opted out meanwhile.
 */
export async function replySend(deps: OutboxDeps, input: NewAiReply, to: string): Promise<ReplyOutcome> {
  if (input.parts.length === 0) throw new Error('a reply needs at least one part');
  const written = await deps.db.query<ClaimedRow>(REPLY_PARTS_INSERT_SQL, [
    input.conversationId,
    input.replyToMessageId,
    input.contextUntilSeq ?? null,
    input.parts,
    input.parts.length,
    input.citations === undefined ? null : JSON.stringify(input.citations),
    ...confirmsParams(input.confirms),
  ]);
  const [first, ...later] = written.rows;
  if (first) {
    // Written just now, the first part claimed by this attempt: send it, then the rest in turn.
    const outcome = await replyDispatch(deps, messageFromRow(first as never), to, sendContextFromRow(first), input);
    // Confirmed counts as much as sent: a send cut off and then confirmed at once (Twilio's
    // list, or a status callback that raced in) is `already-sent`, and its later parts are due.
    if ((outcome.kind !== 'sent' && outcome.kind !== 'already-sent') || later.length === 0) return outcome;
    const rest = await replyPartsResume(deps, later.map((row) => messageFromRow(row as never)), to, input);
    return rest.kind === 'already-sent' ? { kind: 'sent', reply: rest.reply } : rest;
  }
  // A racing attempt wrote them first: go on with what it wrote.
  const parts = await replyPartsForInbound(deps.db, input.replyToMessageId);
  if (parts.length === 0) {
    const { optedOutAt, takeover } = await withheldStateOf(deps.db, input.conversationId, input.confirms ? null : input.replyToMessageId);
    if (input.confirms) {
      if ((optedOutAt !== null) !== (input.confirms === 'out')) throw new OptChangedAgainError(`not written: the contact opted ${input.confirms === 'out' ? 'in' : 'out'} again before the confirmation of ${input.replyToMessageId} was`);
    } else if (optedOutAt) throw new OptedOutError(`the contact opted out before the reply to ${input.replyToMessageId} was written`);
    if (takeover) throw new HumanTookOverError(takeover, `not written: ${TAKEOVER_TEXT[takeover]} before the reply to ${input.replyToMessageId} was`);
    throw new Error(`reply to ${input.replyToMessageId} neither written nor found`);
  }
  return replyPartsResume(deps, parts, to, input);
}

/** How a reply written earlier may be resumed. */
export interface ResumeOptions {
  /** The opt change the reply confirms (NewAiReply.confirms). */
  confirms?: 'out' | 'in';
  /**
   * The caller runs again if this attempt fails (a job with attempts left): a Twilio Messages
   * list that could not be read (a time-out, a 5xx, no connection) is then asked again on the
   * next attempt (a `retry` outcome) instead of the reply being flagged for a human. Unset: the
   * reply is flagged, as there is no next attempt to ask with.
   */
  attemptsLeft?: boolean;
}

/**
 * Continues with a reply's parts, in order: confirmed parts are passed, an `unsent` part is
 * claimed and sent, any other goes through `replyResume` (wait for the callback, flag, or
 * resend what provably did not go out). Stops at the first part not confirmed: a later part
 * never goes out before an earlier one, and the retry picks up from there.
 */
export async function replyPartsResume(deps: OutboxDeps, parts: Message[], to: string, options: ResumeOptions = {}): Promise<ReplyOutcome> {
  let last: Message | undefined;
  let sentNow = false;
  for (const part of parts) {
    let outcome: ReplyOutcome;
    if (part.status === 'unsent') {
      const claimed = await deps.db.query<ClaimedRow>(REPLY_PART_CLAIM_SQL, [part.id, ...confirmsParams(options.confirms)]);
      const row = claimed.rows[0];
      if (row) {
        outcome = await replyDispatch(deps, messageFromRow(row as never), to, sendContextFromRow(row), options);
      } else {
        const current = (await messageGet(deps.db, part.id)) ?? part;
        // Still unsent: nobody else took it, an opt-out or a human's takeover stopped it.
        if (current.status === 'unsent') await refuseIfWithheld(deps, current, options);
        outcome = await replyResume(deps, current, to, options);
      }
    } else {
      outcome = await replyResume(deps, part, to, options);
    }
    if (outcome.kind === 'sent') sentNow = true;
    else if (outcome.kind !== 'already-sent') return outcome;
    last = outcome.reply;
  }
  return { kind: sentNow ? 'sent' : 'already-sent', reply: last! };
}

// Takes a reply that is known not to have gone out (send_failed, or failed without a SID:
// refused by the API) back to pending for a new send. Conditional, so only one attempt wins.
// Not once a later reply has answered what it answers: a job restarted after the next reply
// covered its question would send a stale answer after the newer one.
const REPLY_RECLAIM_SQL = `
  update messages
  set status = 'pending', send_started_at = now(), status_updated_at = now()
  where id = $1
    and (status = 'send_failed' or (status = 'failed' and twilio_sid is null))
    and not exists (${answeredSinceSql('messages')})
    and ${MAY_SEND('$2', '$3')}
  returning *`;

// A held reply never reached Twilio. Retried (a human acting on the held reason), it goes
// back to pending for replyDispatch to decide again with the window and the template as they
// are now: sent if the contact has written since or a template is configured, held again
// with the current reason if neither. Not once a later reply has answered what it answers:
// the contact would get a stale answer after the newer one. A 63016 it was held after is
// cleared: the window is decided again (the contact may have written since).
const REPLY_UNHOLD_SQL = `
  update messages
  set status = 'pending', error_code = null, error_message = null, send_started_at = now(), status_updated_at = now()
  where id = $1 and status = 'held'
    and not exists (${answeredSinceSql('messages')})
    and ${MAY_SEND('$2', '$3')}
  returning *`;

const REPLY_ANSWERED_SINCE_SQL = `
  select answered.id from messages held, lateral (${answeredSinceSql('held')} order by a.created_at limit 1) answered
  where held.id = $1`;

// What the reply says once a later one has answered for it: its old reason ("A human must
// decide …") would still ask for someone to act. A flagged one that Twilio's list showed
// never left becomes `failed`, as a refused one is.
const REPLY_SUPERSEDED_SQL = `
  update messages set status = coalesce($3, status), error_message = $2, status_updated_at = now()
  where id = $1 and twilio_sid is null`;

/** Words every text refuseIfAnsweredSince records holds: the dashboard then adds nothing. */
export const ANSWERED_SINCE_TEXT = 'has answered the contact since';

/**
 * Throws AnsweredSinceError when a later reply has answered what `reply` (never sent)
 * answers, having recorded that on the reply.
 */
async function refuseIfAnsweredSince(deps: OutboxDeps, reply: Message, twilioHasNoRecord = false): Promise<void> {
  const answeredBy = (await deps.db.query<{ id: string }>(REPLY_ANSWERED_SINCE_SQL, [reply.id])).rows[0]?.id;
  if (!answeredBy) return;
  const since = `reply ${answeredBy} ${ANSWERED_SINCE_TEXT}`;
  const flaggedUnknown = reply.status === 'flagged' && !twilioHasNoRecord;
  // A flagged reply Twilio cannot account for may have reached them: that stays unknown.
  const text = flaggedUnknown
    ? `${since}; whether this one reached them is unknown (Twilio could not say); nothing left to do`
    : reply.status === 'flagged'
      ? `not sent (Twilio has no record of it): ${since}; nothing left to do`
      : `not sent: ${since} this one was ${reply.status === 'held' ? 'held' : 'left unsent'}; nothing left to do`;
  await deps.db.query(REPLY_SUPERSEDED_SQL, [reply.id, text, reply.status === 'flagged' && !flaggedUnknown ? 'failed' : null]);
  throw new AnsweredSinceError(text);
}

// A reply (or part) that never went out and may not now, its contact having opted out or a
// human having taken over: failed, with the reason, instead of waiting in a state that
// promises a send. Only from states in which no send is under way.
const REPLY_WITHHOLD_SQL = `
  update messages set status = 'failed', error_message = $2, status_updated_at = now()
  where id = $1 and twilio_sid is null and status in ('unsent', 'send_failed', 'failed')
  returning *`;

/**
 * After a send statement matched nothing: when the contact opted out (and the reply is not
 * the confirmation of that), records the reply as withheld and throws OptedOutError; when
 * a human took over from the AI (and the reply is the AI's answer), records it as withheld
 * and throws HumanTookOverError.
 */
async function refuseIfWithheld(deps: OutboxDeps, reply: Message, options: ResumeOptions): Promise<void> {
  // A human's takeover stops the AI's answer only, not an admin's message or a confirmation.
  const answers = reply.source === 'ai' && !options.confirms ? reply.replyToMessageId : null;
  const { optedOutAt, takeover } = await withheldStateOf(deps.db, reply.conversationId, answers);
  if (options.confirms) {
    // A confirmation goes only while the contact's state is what it confirms.
    if ((optedOutAt !== null) === (options.confirms === 'out')) return;
    const reason = `not sent: the contact opted ${options.confirms === 'out' ? 'in' : 'out'} again before this confirmation went out`;
    await deps.db.query(REPLY_WITHHOLD_SQL, [reply.id, reason]);
    throw new OptChangedAgainError(`reply ${reply.id} ${reason}`);
  }
  if (optedOutAt) {
    const reason = `not sent: the contact opted out at ${optedOutAt.toISOString()}, before this reply went out`;
    await deps.db.query(REPLY_WITHHOLD_SQL, [reply.id, reason]);
    throw new OptedOutError(`reply ${reply.id} ${reason}`);
  }
  if (!takeover) return;
  const reason = `not sent: ${TAKEOVER_TEXT[takeover]} before this reply went out`;
  await deps.db.query(REPLY_WITHHOLD_SQL, [reply.id, reason]);
  throw new HumanTookOverError(takeover, `reply ${reply.id} ${reason}`);
}

// Why a reply may not go out, in one read: the contact's opt-out, and for the AI's answer to
// inbound message $2 (null: not the AI's answer) why NO_HUMAN_TOOK_OVER fails, if it does.
const WITHHELD_STATE_SQL = `
  select k.opted_out_at,
         case when i.id is null then null
              when c.ai_paused then 'ai_paused'
              when ${ADMIN_ANSWERED('c.id', 'i.seq')} then 'already_answered' end as takeover
  from conversations c
  join contacts k on k.id = c.contact_id
  left join messages i on i.id = $2 and i.conversation_id = c.id
  where c.id = $1`;

async function withheldStateOf(db: Queryable, conversationId: string, inboundId: string | null): Promise<{ optedOutAt: Date | null; takeover: keyof typeof TAKEOVER_TEXT | null }> {
  const result = await db.query<{ opted_out_at: Date | null; takeover: keyof typeof TAKEOVER_TEXT | null }>(WITHHELD_STATE_SQL, [conversationId, inboundId]);
  const row = result.rows[0];
  return { optedOutAt: row?.opted_out_at ?? null, takeover: row?.takeover ?? null };
}

// A pending reply whose send may have reached Twilio: wait for the callback until the
// deadline, then flag it. One statement, so a callback landing meanwhile (which moves the
// status on) simply makes it match nothing, and the caller reads the new state.
const REPLY_AWAIT_SQL = `
  update messages
  set status = case when coalesce(send_started_at, created_at) + make_interval(secs => $2) <= now()
                    then 'flagged' else 'unconfirmed' end,
      error_message = case when coalesce(send_started_at, created_at) + make_interval(secs => $2) <= now()
                           then $3 else error_message end,
      status_updated_at = now()
  where id = $1 and status in ('pending', 'unconfirmed')
  returning *,
    greatest(0, extract(epoch from coalesce(send_started_at, created_at) + make_interval(secs => $2) - now()) * 1000)::float8 as remaining_ms`;

// Flags now, deadline or not (no attempts left to wait with, or nothing can confirm it).
// Also a send refused with a 5xx that may have gone out (`maybe_sent`) once nothing can tell.
const REPLY_FLAG_SQL = `
  update messages
  set status = 'flagged', error_message = $2, status_updated_at = now()
  where id = $1 and (status in ('pending', 'unconfirmed') or (status = 'send_failed' and maybe_sent))
  returning *`;

/**
 * Continues with an existing reply, the retry path: confirmed → nothing to do; known not
 * sent → send it; possibly sent → wait for the status callback, then flag. Never sends a
 * reply that might have gone out already.
 */
export async function replyResume(deps: OutboxDeps, reply: Message, to: string, options: ResumeOptions = {}): Promise<ReplyOutcome> {
  // Each step is a conditional update; if a status callback or another attempt moved the
  // reply meanwhile, read it again and decide anew (a few rounds settle it).
  let windowResendTried = false;
  for (let round = 0; round < 3; round++) {
    if (!windowResendTried && refusedForWindow(reply)) {
      windowResendTried = true;
      const resent = await resendAsTemplate(deps, reply, to, options);
      if (resent) return resent;
      reply = (await messageGet(deps.db, reply.id)) ?? reply;
      continue;
    }
    if (isConfirmed(reply)) return { kind: 'already-sent', reply };
    switch (reply.status) {
      case 'flagged': {
        // A human restarted the job: Twilio's list is asked again. It has the reply → confirmed;
        // it provably has not → the reply never left, and goes now (unless a later reply has
        // answered the contact since); Twilio still cannot say → flagged, as before.
        const listed = await twilioListed(deps, reply, to);
        if (listedFound(listed)) return listed;
        if (listed === 'absent') {
          const reclaimed = await deps.db.query(REPLY_RECLAIM_ABSENT_SQL, [reply.id, deps.confirmTimeoutSeconds, ...confirmsParams(options.confirms)]);
          if (reclaimed.rows[0]) return resendAbsent(deps, messageFromRow(reclaimed.rows[0] as never), to, options);
        }
        const current = (await messageGet(deps.db, reply.id)) ?? reply;
        if (current.status !== 'flagged') break;
        // An empty list proves nothing before the deadline (Twilio lists a message late).
        const deadlinePassed = (await deps.db.query<{ passed: boolean }>(REPLY_DEADLINE_SQL, [reply.id, deps.confirmTimeoutSeconds])).rows[0]?.passed ?? false;
        await refuseIfAnsweredSince(deps, current, listed === 'absent' && deadlinePassed);
        return { kind: 'flagged', reply: current, reason: current.errorMessage ?? flagReason(current, deps.confirmTimeoutSeconds) };
      }
      case 'held':
      case 'send_failed':
      case 'failed': {
        // A send refused with a 5xx may have gone out all the same (a gateway that timed out
        // on Twilio's answer, a 500 raised after the message was stored): as uncertain as a
        // send cut off mid-request, and decided the same way. Twilio's list is asked first: it
        // has it → confirmed, not sent twice. Otherwise, before the confirmation deadline, wait
        // (Twilio lists a message late, and its status callback confirms one it took); after
        // it, absence proves it never went → resent below, and a list that cannot say (or a
        // template, whose text it cannot match) → flagged, never resent (a list that could
        // not be read is asked again at the job's next attempt, if it has one). Not after a 429
        // (Twilio documents it as not processed) nor a send that never reached Twilio (no
        // connection): `maybe_sent`, decided where the send failed.
        if (reply.status === 'send_failed' && reply.maybeSent) {
          const listed = await twilioListed(deps, reply, to);
          if (listedFound(listed)) return listed;
          const deadline = (await deps.db.query<{ passed: boolean; remaining_ms: number }>(REPLY_DEADLINE_SQL, [reply.id, deps.confirmTimeoutSeconds])).rows[0];
          if (deadline && !deadline.passed) {
            return {
              kind: 'waiting',
              reply,
              retryInMs: Math.ceil(deadline.remaining_ms),
              reason: `reply ${reply.id} was refused with a 5xx, which does not prove Twilio did not send it, and its Messages list does not show it yet; waiting for Twilio's status callback until the confirmation deadline, not resending`,
            };
          }
          if (listed !== 'absent') {
            if (listed.unreadable && options.attemptsLeft) return listUnreadableRetry(reply, listed);
            return replyFlag(deps, reply, `Twilio answered its send with a 5xx, no status callback came within ${deps.confirmTimeoutSeconds} s, and ${listed.why}`);
          }
        }
        // Never reached Twilio: back to pending if it may go now (a held one is decided again
        // by replyDispatch), else withheld or answered since, or re-read and decided anew.
        const reclaim = reply.status === 'held' ? REPLY_UNHOLD_SQL : REPLY_RECLAIM_SQL;
        const claimed = await deps.db.query(reclaim, [reply.id, ...confirmsParams(options.confirms)]);
        if (claimed.rows[0]) return replyDispatch(deps, messageFromRow(claimed.rows[0] as never), to, undefined, options);
        await refuseIfWithheld(deps, reply, options);
        await refuseIfAnsweredSince(deps, reply);
        break;
      }
      case 'pending':
      case 'unconfirmed': {
        // Without a status callback URL (no PUBLIC_URL) nothing can confirm it: waiting would
        // only hold back the conversation's later replies. Ask Twilio, else hand it to a human.
        const noCallback = deps.statusCallbackUrl(reply.id) === undefined;
        const deadlinePassed = (await deps.db.query<{ passed: boolean }>(REPLY_DEADLINE_SQL, [reply.id, deps.confirmTimeoutSeconds])).rows[0]?.passed ?? false;
        // What Twilio's list said, when it was asked and could not tell: the flag names it.
        let unknown: ListUnknown | undefined;
        if (noCallback || deadlinePassed) {
          const reconciled = await replyReconcile(deps, reply, to, deadlinePassed, options);
          if (reconciled && reconciled.kind !== 'unknown') return reconciled;
          unknown = reconciled ?? undefined;
        }
        // A list call that failed once is no reason to call a human while the job can ask again.
        if (unknown?.unreadable && options.attemptsLeft) return listUnreadableRetry(reply, unknown);
        if (noCallback) {
          const list = unknown?.why ?? "its Messages list does not show it yet (Twilio lists a message late, so that proves nothing)";
          return replyFlag(deps, reply, `Twilio has no status callback URL to confirm it (PUBLIC_URL is not set), and ${list}`);
        }
        const why = unknown && `no confirmation came within ${deps.confirmTimeoutSeconds} s (its sender stopped mid-send or Twilio did not answer), and ${unknown.why}`;
        const awaited = await deps.db.query<{ remaining_ms: number }>(REPLY_AWAIT_SQL, [reply.id, deps.confirmTimeoutSeconds, flagReason(reply, deps.confirmTimeoutSeconds, why)]);
        const row = awaited.rows[0];
        if (row) {
          const current = messageFromRow(row as never);
          if (current.status === 'flagged') return { kind: 'flagged', reply: current, reason: current.errorMessage! };
          return {
            kind: 'waiting',
            reply: current,
            retryInMs: Math.ceil(row.remaining_ms),
            reason: `reply ${reply.id} may have reached Twilio but is not confirmed; waiting for Twilio's status callback, not resending`,
          };
        }
        break;
      }
      default:
        throw new Error(`reply ${reply.id} has status "${reply.status}", which the outbox does not handle`);
    }
    const reread = await messageGet(deps.db, reply.id);
    if (!reread) throw new Error(`reply ${reply.id} disappeared`);
    reply = reread;
  }
  throw new Error(`reply ${reply.id} kept changing state (now "${reply.status}"); trying again later`);
}

/**
 * A free-form reply Twilio took and then failed with 63016 (its status callback, or the
 * delivery check): its window had closed before ours. Twilio reports that as `failed` or as
 * `undelivered`; both are final, so the text provably never reached the contact: it may go
 * once more, as the template.
 */
function refusedForWindow(reply: Message): boolean {
  return (reply.status === 'failed' || reply.status === 'undelivered') && reply.errorCode === OUTSIDE_SESSION_WINDOW && reply.twilioSid !== null && reply.templateSid === null;
}

// The free-form send Twilio failed with 63016 is given up for a new send, by one attempt:
// the row leaves `failed` or `undelivered` (and the failed SID, named in its text), so no
// other run takes it again, and keeps the code, which makes the send form take the window
// as closed. Not once a later reply has answered what it answered, nor after a STOP or a
// human's takeover.
const REPLY_RESEND_AS_TEMPLATE_SQL = `
  update messages
  set status = 'pending', twilio_sid = null, send_started_at = now(), status_updated_at = now(),
      error_message = 'sent again as the template: Twilio failed the free-form send ' || twilio_sid || ' with 63016 (its 24-hour window had closed before ours)'
  where id = $1 and status in ('failed', 'undelivered') and error_code = $2 and twilio_sid = $3 and template_sid is null
    and not exists (${answeredSinceSql('messages')})
    and ${MAY_SEND('$4', '$5')}
  returning *`;

/**
 * Sends a reply refused for the window (refusedForWindow) again as its number's template;
 * null when there is none (it stays as Twilio's 63016 left it) or another run took it.
 * Throws as refuseIfWithheld and refuseIfAnsweredSince do when it may not go now.
 */
async function resendAsTemplate(deps: OutboxDeps, reply: Message, to: string, options: ResumeOptions): Promise<ReplyOutcome | null> {
  if (!(await sendContextOf(deps, reply.conversationId)).template) return null;
  const claimed = await deps.db.query(REPLY_RESEND_AS_TEMPLATE_SQL, [reply.id, OUTSIDE_SESSION_WINDOW, reply.twilioSid, ...confirmsParams(options.confirms)]);
  if (claimed.rows[0]) return replyDispatch(deps, messageFromRow(claimed.rows[0] as never), to, undefined, options);
  await refuseIfWithheld(deps, reply, options);
  await refuseIfAnsweredSince(deps, reply);
  return null;
}

/**
 * Flags a possibly-sent reply at once, not waiting out the deadline: the job has no
 * attempts left to wait with, or nothing could confirm it. `why` replaces the usual reason.
 */
export async function replyFlag(deps: OutboxDeps, reply: Message, why?: string, to?: string): Promise<ReplyOutcome> {
  // Twilio's own list may show it went out: then there is nothing for a human to check. When
  // it cannot say, the reason tells why (it could not be read, or the reply is a template).
  if (to) {
    const reconciled = await replyReconcile(deps, reply, to, false);
    if (reconciled?.kind === 'unknown') why = why ? `${why}, and ${reconciled.why}` : `no confirmation came, and ${reconciled.why}`;
    else if (reconciled) return reconciled;
  }
  const reason = flagReason(reply, deps.confirmTimeoutSeconds, why);
  const flagged = await deps.db.query(REPLY_FLAG_SQL, [reply.id, reason]);
  if (flagged.rows[0]) return { kind: 'flagged', reply: messageFromRow(flagged.rows[0] as never), reason };
  const current = await messageGet(deps.db, reply.id);
  if (current && isConfirmed(current)) return { kind: 'already-sent', reply: current };
  return { kind: 'flagged', reply: current ?? reply, reason: current?.errorMessage ?? reason };
}

// Whether the reply's confirmation deadline has passed, and how long until it does, by the
// database's clock (as the await statement judges it).
const REPLY_DEADLINE_SQL = `
  select coalesce(send_started_at, created_at) + make_interval(secs => $2) <= now() as passed,
         greatest(0, extract(epoch from coalesce(send_started_at, created_at) + make_interval(secs => $2) - now()) * 1000)::float8 as remaining_ms
  from messages where id = $1`;

// A reply Twilio provably does not have goes back to pending for a new send, by one attempt.
// The deadline is tested here again, not only before Twilio's list was asked: the new state
// (pending, no SID) still matches the status test, and only the reset send_started_at keeps
// a second run that saw the same empty list from sending it once more while this send is
// under way (or after it ended uncertain).
const REPLY_RECLAIM_ABSENT_SQL = `
  update messages
  set status = 'pending', send_started_at = now(), status_updated_at = now(),
      error_message = 'resent: Twilio had no record of the first send (its Messages list)'
  where id = $1 and status in ('pending', 'unconfirmed', 'flagged') and twilio_sid is null
    and coalesce(send_started_at, created_at) + make_interval(secs => $2) <= now()
    and not exists (${answeredSinceSql('messages')})
    and ${MAY_SEND('$3', '$4')}
  returning *`;

// Twilio's clock and ours, and the time between our send and Twilio's record of it.
const RECONCILE_SLACK_MS = 60_000;

/**
 * Before a possibly-sent reply is left to a human, asks Twilio's Messages resource what it
 * holds for the contact since the send began, and matches the reply by its text (Twilio's
 * list does not show the status callback URL that carries our id). Found and not yet
 * claimed by another of our messages → confirmed with Twilio's SID and status. Not found
 * while `absenceProves` (the confirmation deadline passed, so Twilio had long enough to
 * list it) → it never went out: sent now. Twilio cannot say (its list could not be read, or
 * the reply went as a template, whose text is not ours) → why (ListUnknown); absence proves
 * nothing yet → null. The caller flags on either.
 */
export async function replyReconcile(deps: OutboxDeps, reply: Message, to: string, absenceProves: boolean, options: ResumeOptions = {}): Promise<ReplyOutcome | ListUnknown | null> {
  const listed = await twilioListed(deps, reply, to);
  if (listed !== 'absent') return listed;
  if (!absenceProves) return null;
  // Not after an opt-out: then it stays unresent, and is flagged for a human like any reply
  // whose confirmation did not come.
  const reclaimed = await deps.db.query(REPLY_RECLAIM_ABSENT_SQL, [reply.id, deps.confirmTimeoutSeconds, ...confirmsParams(options.confirms)]);
  return reclaimed.rows[0] ? resendAbsent(deps, messageFromRow(reclaimed.rows[0] as never), to, options) : null;
}

/** Sends again a reply Twilio's list showed it never got (reclaimed by REPLY_RECLAIM_ABSENT_SQL); a wait for it is `resent`. */
async function resendAbsent(deps: OutboxDeps, reply: Message, to: string, options: ResumeOptions): Promise<ReplyOutcome> {
  const outcome = await replyDispatch(deps, reply, to, undefined, options);
  return outcome.kind === 'waiting' ? { ...outcome, resent: true } : outcome;
}

/**
 * Twilio's Messages list could not say whether a reply went out. `why` says so for the human
 * who may have to check: its call failed (a time-out, a 5xx, no connection), or it never can
 * (the reply went as a template, whose text is not ours to match, or the transport keeps no
 * list).
 */
export interface ListUnknown {
  kind: 'unknown';
  why: string;
  /** The call failed: asking again may answer (ResumeOptions.attemptsLeft). */
  unreadable: boolean;
}

/**
 * A possibly-sent reply whose Twilio list could not be read, left for the caller's next
 * attempt to ask again. `maybeSent`: whoever reads the outcome must not take it for one that
 * went nowhere (a `retry` without it tells an admin "not sent, try again").
 */
function listUnreadableRetry(reply: Message, unknown: ListUnknown): ReplyOutcome {
  return {
    kind: 'retry',
    reply,
    reason: `may have reached Twilio and is not confirmed, and ${unknown.why}; asking it again at the next attempt, not resending`,
    throttled: false,
    maybeSent: true,
  };
}

/** Twilio's list had the reply: confirmed (twilioListed's answer, not `absent` nor unknown). */
function listedFound(listed: ReplyOutcome | ListUnknown | 'absent'): listed is ReplyOutcome {
  return listed !== 'absent' && listed.kind !== 'unknown';
}

/**
 * What Twilio's Messages list says of a reply: it has it (confirmed now with Twilio's SID and
 * status), it has not ('absent'), or it cannot say (ListUnknown, with why).
 */
async function twilioListed(deps: OutboxDeps, reply: Message, to: string): Promise<ReplyOutcome | 'absent' | ListUnknown> {
  if (reply.templateSid) return { kind: 'unknown', why: `it went as template ${reply.templateSid}, whose text Twilio's Messages list cannot match`, unreadable: false };
  if (!deps.transport.sentTo) return { kind: 'unknown', why: 'the transport keeps no Messages list to ask', unreadable: false };
  let listed;
  try {
    listed = await deps.transport.sentTo(to, new Date((reply.sendStartedAt ?? reply.createdAt).getTime() - RECONCILE_SLACK_MS), (await sendContextOf(deps, reply.conversationId)).from);
  } catch (err) {
    return { kind: 'unknown', why: `Twilio's Messages list could not be read (${listFailureText(err)})`, unreadable: true };
  }
  for (const candidate of listed.filter((m) => m.body === reply.body)) {
    const claimed = await deps.db.query('select 1 from messages where twilio_sid = $1', [candidate.sid]);
    if (claimed.rowCount > 0) continue;
    const confirmed = await deps.db.query(REPLY_CONFIRM_SQL, [reply.id, candidate.sid, candidate.status]);
    return { kind: 'already-sent', reply: messageFromRow(confirmed.rows[0] as never) };
  }
  return 'absent';
}

/** A failed Messages list call in words: Twilio's error, or what became of the call. */
function listFailureText(err: unknown): string {
  if (!(err instanceof SendError)) return err instanceof Error ? err.message : String(err);
  // The transport words its errors for a send ("it may have been accepted", "throttled the
  // send"): of a list call, only what became of the call counts.
  if (err.kind === 'uncertain') return `no answer: ${err.cause instanceof Error ? err.cause.message : err.message}`;
  if (err.kind === 'throttled') return 'Twilio throttled the request (HTTP 429)';
  return err.message;
}

// An admin's reply that provably never reached Twilio: failed, visibly, for the admin to send
// again if it still matters. Not resent by itself: the admin may have written again meanwhile.
const ADMIN_REPLY_ABSENT_SQL = `
  update messages set status = 'failed', status_updated_at = now(),
         error_message = 'not sent: the send was interrupted and Twilio has no record of it (its Messages list); send it again if it still matters'
  where id = $1 and source = 'admin' and status in ('pending', 'unconfirmed', 'send_failed') and twilio_sid is null
  returning *`;

// An admin's reply sent as a template that may have reached Twilio (cut off, or refused with
// a 5xx), flagged for a human: Twilio's list cannot match a template's text.
const ADMIN_REPLY_FLAG_SQL = `
  update messages set status = 'flagged', error_message = $2, status_updated_at = now()
  where id = $1 and source = 'admin' and status in ('pending', 'unconfirmed', 'send_failed') and twilio_sid is null
  returning *`;

/**
 * Settles an admin's reply that may have reached Twilio unconfirmed: its send ended
 * uncertain (a cut connection) and no status callback came, or Twilio refused it with a 5xx
 * (`maybe_sent`). No job waits on it, so the delivery check asks Twilio's list once the
 * confirmation deadline has passed. It has it → confirmed; it has not → failed, "not sent";
 * it cannot say → left as it is, to be asked again; sent as a template → flagged for a human.
 */
export async function adminReplySettle(deps: OutboxDeps, reply: Message, to: string): Promise<'confirmed' | 'not sent' | 'flagged' | 'unknown'> {
  // A template's text is not ours, so Twilio's list cannot be matched: a human checks. Asking
  // again could never settle it (a 5xx one stayed "not sent" at every run, maybe sent).
  if (reply.templateSid) {
    const how =
      reply.status === 'send_failed'
        ? `Twilio answered its send with an error that does not prove it was not sent (${reply.errorMessage ?? 'a 5xx'})`
        : `its send was cut off, no confirmation came within ${deps.confirmTimeoutSeconds} s`;
    const reason = `reply ${reply.id} flagged for a human: ${how}, and it went as template ${reply.templateSid}, which Twilio's Messages list cannot match. Check the Twilio console for a message to this contact; send again if it did not arrive.`;
    return (await deps.db.query(ADMIN_REPLY_FLAG_SQL, [reply.id, reason])).rowCount > 0 ? 'flagged' : 'unknown';
  }
  const listed = await twilioListed(deps, reply, to);
  if (listed !== 'absent') return listedFound(listed) ? 'confirmed' : 'unknown';
  return (await deps.db.query(ADMIN_REPLY_ABSENT_SQL, [reply.id])).rowCount > 0 ? 'not sent' : 'unknown';
}

/** Confirmed: Twilio gave it a SID (by answer or status callback), or the log printed it. */
export function isConfirmed(reply: Message): boolean {
  return reply.twilioSid !== null || reply.status === 'logged';
}

// Twilio's answer, recorded with its SID. A status callback may have come first (it carries
// our id): keep whichever status is further along, and the error only if Twilio reported one.
// Without a SID yet, the status is our own verdict, which Twilio's answer replaces.
const REPLY_CONFIRM_SQL = `
  update messages
  set twilio_sid = coalesce($2, twilio_sid),
      status = case when twilio_sid is not null and message_status_rank(status) >= message_status_rank($3) and message_status_rank(status) > 0
                    then status else $3 end,
      error_code = case when twilio_sid is not null and message_status_rank(status) > 0 then error_code end,
      error_message = case when twilio_sid is not null and message_status_rank(status) > 0 then error_message end,
      status_updated_at = now()
  where id = $1
  returning *`;

// A failed send, with what Twilio said, and whether that leaves it possibly sent (a 5xx:
// $5). From `pending`, or `unconfirmed` when a racing attempt (a worker whose lease was
// taken over) saw the send in flight and started waiting for it. Never over a confirmed
// status: Twilio's word wins.
const REPLY_SEND_FAILED_SQL = `
  update messages
  set status = $2, error_code = $3, error_message = $4, maybe_sent = $5, status_updated_at = now()
  where id = $1 and status in ('pending', 'unconfirmed')
  returning *`;

/**
 * Sends a reply the caller holds in `pending` (just written by `replyWrite`, or reclaimed),
 * and records Twilio's answer. Never call it for a reply found pending by someone else:
 * that one may be out already (use `replyResume`).
 */
export async function replyDispatch(deps: OutboxDeps, reply: Message, to: string, context?: SendContextRow, options: ResumeOptions = {}): Promise<ReplyOutcome> {
  const form = await sendForm(deps, reply, context);
  if ('held' in form) {
    const held = await deps.db.query(REPLY_HOLD_SQL, [reply.id, form.held]);
    return { kind: 'held', reply: held.rows[0] ? messageFromRow(held.rows[0] as never) : reply, reason: form.held };
  }
  let sent;
  try {
    sent = await deps.transport.send({ to, from: form.from, body: reply.body, template: form.template, statusCallbackUrl: deps.statusCallbackUrl(reply.id) });
  } catch (err) {
    const error = err instanceof SendError ? err : new SendError('uncertain', err instanceof Error ? err.message : String(err), { cause: err });
    if (error.kind === 'uncertain') {
      // It may be on its way: the retry path waits for the callback instead of resending.
      return replyResume(deps, reply, to, options);
    }
    if (error.kind === 'rejected' && error.code === OUTSIDE_SESSION_WINDOW && !form.template) {
      // Twilio's window ended before ours (its clock ahead, or a job that ran at 23:59:59):
      // a 400, so nothing went out, and the reply is still this attempt's to send. Marked
      // with Twilio's code, sendForm takes the window as closed: the template goes now, or
      // the reply is held with the window's reason. Once: a template is never refused so.
      const marked = await deps.db.query(REPLY_WINDOW_CLOSED_SQL, [reply.id, OUTSIDE_SESSION_WINDOW, error.message, ...confirmsParams(options.confirms)]);
      if (marked.rows[0]) return replyDispatch(deps, messageFromRow(marked.rows[0] as never), to, undefined, options);
    }
    const status = error.kind === 'rejected' ? 'failed' : 'send_failed';
    const maybeSent = error.maybeSent;
    // What the dashboard shows until it is settled: after a 5xx not "not sent", which an admin
    // would act on (answering themselves) while the retry waits because it may have gone.
    const message =
      error.kind === 'rejected'
        ? error.message
        : maybeSent
          ? `may have been sent: ${error.message}`
          : `not sent: ${error.message}`;
    const updated = await deps.db.query(REPLY_SEND_FAILED_SQL, [reply.id, status, error.code ?? null, message, maybeSent]);
    if (!updated.rows[0]) {
      const current = await messageGet(deps.db, reply.id);
      if (current && isConfirmed(current)) return { kind: 'already-sent', reply: current };
    }
    const current = updated.rows[0] ? messageFromRow(updated.rows[0] as never) : reply;
    if (error.kind === 'rejected') return { kind: 'rejected', reply: current, code: error.code, reason: error.message };
    return { kind: 'retry', reply: current, reason: error.message, throttled: error.kind === 'throttled', retryAfterMs: error.details.retryAfterMs, ...(maybeSent ? { maybeSent } : {}) };
  }
  const confirmed = await deps.db.query(REPLY_CONFIRM_SQL, [reply.id, sent.sid, sent.status]);
  return { kind: 'sent', reply: messageFromRow(confirmed.rows[0] as never) };
}

// A free-form send Twilio refused with 63016 (a 400: it took nothing), still this attempt's:
// it stays pending, marked with the code, for the template (or the hold) to follow at once.
// Not after a STOP or a human's takeover since the send began: that is a new send.
const REPLY_WINDOW_CLOSED_SQL = `
  update messages set error_code = $2, error_message = $3, status_updated_at = now()
  where id = $1 and status in ('pending', 'unconfirmed') and twilio_sid is null
    and ${MAY_SEND('$4', '$5')}
  returning *`;

// When the contact last wrote (the window), their WhatsApp name (a template variable) and
// the business number they wrote to (the sender, and its profile's template).
const SEND_CONTEXT_SQL = `
  select c.last_inbound_at, ${windowOpenSql('c.last_inbound_at')} as window_open, k.profile_name, c.business_number
  from conversations c join contacts k on k.id = c.contact_id
  where c.id = $1`;

const REPLY_HOLD_SQL = `
  update messages set status = 'held', error_message = $2, status_updated_at = now()
  where id = $1 and status in ('pending', 'unconfirmed')
  returning *`;

type SendForm = { from?: string; template?: { contentSid: string; variables: Record<string, string> } } | { held: string };

/**
 * How a reply may go out now, from the number its conversation is on: free-form inside the
 * 24-hour window; outside it as that number's template (recorded on the message), or not
 * at all (held, with the reason).
 */
interface SendContextRow {
  last_inbound_at: Date | null;
  /** Inside the 24-hour window by the database's clock (windowOpenSql). */
  window_open: boolean;
  profile_name: string | null;
  business_number: string | null;
}

/** What a send from this conversation depends on: the conversation row (read now unless given), its sender and template. */
async function sendContextOf(deps: OutboxDeps, conversationId: string, known?: SendContextRow) {
  const row = known ?? (await deps.db.query<SendContextRow>(SEND_CONTEXT_SQL, [conversationId])).rows[0];
  return { row, ...(deps.sendAs?.(row?.business_number ?? null) ?? { template: null }) };
}

async function sendForm(deps: OutboxDeps, reply: Message, context?: SendContextRow): Promise<SendForm> {
  const { row, from, template } = await sendContextOf(deps, reply.conversationId, context);
  const lastInboundAt = row?.last_inbound_at ?? null;
  // Twilio's 63016 on this reply outranks our clock: its window has closed.
  if (row?.window_open && reply.errorCode !== OUTSIDE_SESSION_WINDOW) {
    await templateRecord(deps, reply, null);
    return { from };
  }
  const writtenBy = reply.source === 'ai' ? 'ai' : 'admin';
  if (!template) return { held: heldReason(lastInboundAt, 'no approved template is configured to stand in for replies', false, writtenBy) };
  const filled = templateFill(template, { name: row?.profile_name ?? null, reply: reply.body });
  if ('missing' in filled) return { held: heldReason(lastInboundAt, filled.missing, true, writtenBy) };
  await templateRecord(deps, reply, template.contentSid);
  return { from, template: { contentSid: template.contentSid, variables: filled.variables } };
}

/**
 * Records the template a send goes as (null: free text), before it goes, when that differs
 * from what the reply holds: an earlier attempt that went as a template and provably did
 * not go out (a 503) left its SID, and the record (and the Twilio-list check, which skips
 * templates) must say what this send is.
 */
async function templateRecord(deps: OutboxDeps, reply: Message, templateSid: string | null): Promise<void> {
  if (reply.templateSid !== templateSid) await deps.db.query('update messages set template_sid = $2 where id = $1', [reply.id, templateSid]);
}

function flagReason(reply: Message, timeoutSeconds: number, why?: string): string {
  const cause = why ?? `no confirmation came within ${timeoutSeconds} s (its sender stopped mid-send or Twilio did not answer)`;
  // A template's text is not ours: Twilio's list can never settle it, so a restart would not either.
  const next = reply.templateSid
    ? 'Check the Twilio console for a message to this contact; send it again if it did not arrive.'
    : "Restarting its job asks Twilio's Messages list again: confirmed if Twilio has it, sent once if Twilio provably has not.";
  return `reply ${reply.id} flagged for a human: it may have reached Twilio, but ${cause}. Not resent, to avoid a duplicate. ${next}`;
}

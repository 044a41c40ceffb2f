// Twilio's delivery status of what we sent, recorded: from its status callback
// (src/http/webhooks.ts), or, for a reply whose callbacks never came, asked of Twilio by the
// `delivery_check` job. Twilio posts a status callback once (a retry only when it could not
// connect at all), so one that came while `aiq serve` was down or unreachable is gone, and
// the reply stayed `queued` or `sent` for good: a reply WhatsApp refused afterwards looked
// on its way, its failure seen by no one. The `delivery-check` schedule runs the job every
// ten minutes while Twilio is configured (src/main.ts).
import { z } from 'zod';
import type { Queryable } from '../db/types.ts';
import { TWILIO_STATUSES, messageFromRow, messageStatusUpdate, type TwilioStatus } from '../messaging/conversations.ts';
import { adminReplySettle, type OutboxDeps } from '../messaging/outbox.ts';
import { SendError } from '../messaging/transport.ts';
import { OUTSIDE_SESSION_WINDOW, twilioErrorText } from '../messaging/twilio.ts';
import type { JobHandler } from '../queue/index.ts';
import { autoreplyConfirmedLate, autoreplyRerun, autoreplyWake } from './autoreply.ts';

export const DELIVERY_CHECK = 'delivery_check';
export const DELIVERY_CHECK_CRON = '*/10 * * * *';

const knownStatus = z.enum(TWILIO_STATUSES);

/** A delivery status as Twilio reports it, by callback or when asked. */
export interface DeliveryStatus {
  /** Our message id, when Twilio's callback URL carries it. */
  messageId?: string;
  twilioSid: string;
  status: TwilioStatus;
  errorCode?: number;
  /** Twilio's own text for the error, if any. */
  errorMessage?: string;
}

/**
 * Records a delivery status (never moving a message back: src/messaging/conversations.ts)
 * and tells the reply's job: it may be waiting for this confirmation, or have flagged a reply
 * that has now arrived after all. True when the message moved forward.
 */
export async function deliveryStatusRecord(db: Queryable, delivery: DeliveryStatus): Promise<boolean> {
  const failed = delivery.status === 'failed' || delivery.status === 'undelivered';
  const updated = await messageStatusUpdate(db, {
    messageId: delivery.messageId,
    twilioSid: delivery.twilioSid,
    status: delivery.status,
    errorCode: delivery.errorCode,
    errorMessage: failed || delivery.errorCode ? twilioErrorText(delivery.errorCode, delivery.errorMessage) : undefined,
  });
  if (!updated) return false;
  if (updated.source === 'ai' && updated.replyToMessageId) {
    if (updated.wasFlagged && !failed) await autoreplyConfirmedLate(db, updated.conversationId, updated.replyToMessageId, updated.id, delivery.status);
    // A free-form reply failed for the window (Twilio's closed before ours): it never reached
    // the contact. The job, long done, runs again: it sends it as the number's template, if
    // there is one (outbox.ts, resendAsTemplate), and otherwise leaves it failed.
    else if (failed && delivery.errorCode === OUTSIDE_SESSION_WINDOW && updated.templateSid === null) await autoreplyRerun(db, updated.conversationId, updated.replyToMessageId);
    else await autoreplyWake(db, updated.conversationId, updated.replyToMessageId);
  }
  return true;
}

// A callback normally comes within seconds; a reply with no news for this long is asked about.
const QUIET_MINUTES = 10;
// Asked again at most this often while Twilio still says it is on its way: WhatsApp keeps a
// message `sent` until the phone is on again, which may take days.
const ASK_AGAIN_MINUTES = 60;
// Older replies are left as they are: WhatsApp has given up delivering them by then.
const MAX_AGE_DAYS = 3;
// Replies asked about per run, the least recently asked first: a run stays short, and
// Twilio's API allows many more requests than this.
const PER_RUN = 200;

const DUE_SQL = `
  select id, twilio_sid from messages
  where status in ('accepted', 'scheduled', 'queued', 'sending', 'sent') and twilio_sid is not null
    and status_updated_at < now() - make_interval(mins => $1)
    and (status_checked_at is null or status_checked_at < now() - make_interval(mins => $2))
    and created_at > now() - make_interval(days => $3)
  order by status_checked_at nulls first, status_updated_at
  limit $4`;

const ASKED_SQL = `update messages set status_checked_at = now() where id = any($1::uuid[])`;

// An admin's reply whose send ended uncertain and that no callback confirmed by its deadline
// (REPLY_CONFIRM_TIMEOUT_SECONDS): no job waits on it, so it would stay unconfirmed for good.
// Also one refused with a 5xx (`maybe_sent`: it may come with a message that went out all
// the same): it said "not sent" for good while the contact had it. Not one that provably
// never reached Twilio (a 429, no connection): it keeps the reason the admin saw. Through
// the outbox's index of open sends.
const ADMIN_UNCONFIRMED_SQL = `
  select m.*, k.whatsapp_number as contact_number
  from messages m
  join conversations c on c.id = m.conversation_id
  join contacts k on k.id = c.contact_id
  where (m.status in ('pending', 'unconfirmed') or (m.status = 'send_failed' and m.maybe_sent))
    and m.source = 'admin' and m.twilio_sid is null
    and coalesce(m.send_started_at, m.created_at) + make_interval(secs => $1) < now()
    and m.created_at > now() - make_interval(days => $2)
    and (m.status_checked_at is null or m.status_checked_at < now() - make_interval(mins => $3))
  order by m.status_checked_at nulls first, m.created_at
  limit $4`;

export interface DeliveryCheckResult {
  asked: number;
  /** Replies whose status moved (a callback that never came). */
  updated: number;
  /** SIDs Twilio does not know (deleted from its log, or another account's). */
  unknownToTwilio: number;
  /** Admin replies whose send ended uncertain, settled by Twilio's list: confirmed, or not sent. */
  adminConfirmed?: number;
  adminNotSent?: number;
  /** Admin replies sent as a template that may have gone out, which Twilio's list cannot match: flagged for a human. */
  adminFlagged?: number;
  /** Set when Twilio asked us to slow down: the rest waits for the next run. */
  stopped?: string;
}

/** Asks Twilio about the replies due (DUE_SQL, ADMIN_UNCONFIRMED_SQL) and records what changed. */
export async function deliveryCheck(outbox: OutboxDeps, signal?: AbortSignal): Promise<DeliveryCheckResult> {
  const { db, transport } = outbox;
  const result: DeliveryCheckResult = { asked: 0, updated: 0, unknownToTwilio: 0 };
  if (!transport.messageState) return result;
  await adminRepliesSettle(outbox, result, signal);
  const due = await db.query<{ id: string; twilio_sid: string }>(DUE_SQL, [QUIET_MINUTES, ASK_AGAIN_MINUTES, MAX_AGE_DAYS, PER_RUN]);
  const asked: string[] = [];
  let refused: { count: number; first: SendError } | undefined;
  try {
    for (const row of due.rows) {
      if (signal?.aborted) break;
      let state;
      try {
        state = await transport.messageState(row.twilio_sid);
      } catch (err) {
        if (!(err instanceof SendError)) throw err;
        if (err.kind === 'throttled') {
          result.stopped = `Twilio asked to slow down (${err.message}); the rest waits for the next run`;
          break;
        }
        // Twilio refused this one question (a 4xx): the others may still be answered.
        if (err.kind !== 'rejected') throw err;
        refused = { count: (refused?.count ?? 0) + 1, first: refused?.first ?? err };
        asked.push(row.id);
        continue;
      }
      asked.push(row.id);
      if (!state) {
        result.unknownToTwilio += 1;
        continue;
      }
      const status = knownStatus.safeParse(state.status);
      // A status Twilio added after this was written tells us nothing we can record.
      if (!status.success) continue;
      const moved = await deliveryStatusRecord(db, {
        messageId: row.id,
        twilioSid: row.twilio_sid,
        status: status.data,
        errorCode: state.errorCode ?? undefined,
        errorMessage: state.errorMessage ?? undefined,
      });
      if (moved) result.updated += 1;
    }
  } finally {
    result.asked = asked.length;
    if (asked.length > 0) await db.query(ASKED_SQL, [asked]);
  }
  // Every question refused (wrong credentials, an account closed): the job fails, visibly.
  if (refused && refused.count === result.asked) {
    throw new Error(`Twilio refused every status question (${refused.count}): ${refused.first.message}`);
  }
  return result;
}

/** Settles the admin replies left unconfirmed (ADMIN_UNCONFIRMED_SQL), counting into `result`. */
async function adminRepliesSettle(outbox: OutboxDeps, result: DeliveryCheckResult, signal?: AbortSignal): Promise<void> {
  const { rows } = await outbox.db.query<Record<string, unknown> & { id: string; contact_number: string }>(ADMIN_UNCONFIRMED_SQL, [
    outbox.confirmTimeoutSeconds,
    MAX_AGE_DAYS,
    ASK_AGAIN_MINUTES,
    PER_RUN,
  ]);
  if (rows.length === 0) return;
  const asked: string[] = [];
  try {
    for (const row of rows) {
      if (signal?.aborted) break;
      const settled = await adminReplySettle(outbox, messageFromRow(row as never), `whatsapp:${row.contact_number}`);
      asked.push(row.id);
      if (settled === 'confirmed') result.adminConfirmed = (result.adminConfirmed ?? 0) + 1;
      if (settled === 'not sent') result.adminNotSent = (result.adminNotSent ?? 0) + 1;
      if (settled === 'flagged') result.adminFlagged = (result.adminFlagged ?? 0) + 1;
    }
  } finally {
    if (asked.length > 0) await outbox.db.query(ASKED_SQL, [asked]);
  }
}

export function deliveryCheckHandler(outbox: OutboxDeps): JobHandler<Record<string, never>> {
  return {
    type: DELIVERY_CHECK,
    schema: z.object({}).passthrough() as never,
    async run({ signal }) {
      return deliveryCheck(outbox, signal);
    },
  };
}

// Cancelling a job from the dashboard, the API or the CLI, with the one case the queue
// cannot know about: an autoreply job that is pending because it waits for Twilio's status
// callback on a reply that may have gone out (or holds its later parts unsent), or to ask
// Twilio's list about a send refused with a 5xx (`maybe_sent`: it may have gone out all the
// same). Only its next run confirms, flags or sends them; cancelled, the reply would stay
// `unconfirmed` or `send_failed` for good, neither sent exactly once nor flagged for a human
// (and an admin reading "not delivered" would send it again). Such a job is not cancelled.
// An import's job cancelled before it ran ends its import too: it would say 'pending' for good.
import type { Database } from '../db/types.ts';
import { importFail } from '../knowledge/csv-import.ts';
import { isUuid, jobCancel, jobGet } from '../queue/index.ts';
import { AUTOREPLY } from './autoreply.ts';
import { IMPORT_PEOPLE } from './import-people.ts';

const IMPORT_CANCELLED = 'cancelled by an admin before it ran: nothing was imported or removed. Retry its job to run it after all, or upload the file again.';

export const REPLY_IN_FLIGHT =
  "this job's reply may have reached Twilio and waits for its confirmation (or has parts still to send): cancelling would leave it unconfirmed for good. Let the job run: it confirms the reply, or flags it for a human when no confirmation comes.";

const REPLY_IN_FLIGHT_SQL = `
  select exists (
    select 1
    from ai_jobs j
    join messages r on r.reply_to_message_id = (j.payload->>'messageId')::uuid and r.source = 'ai'
    where j.id = $1 and j.type = $2 and j.status = 'pending'
      and (r.status in ('pending', 'unconfirmed', 'unsent') or (r.status = 'send_failed' and r.maybe_sent))
  ) as in_flight`;

/** Cancels a pending job, unless it is an autoreply whose reply is in flight. */
export async function jobCancelChecked(db: Database, id: string): Promise<'cancelled' | 'not_pending' | 'reply_in_flight'> {
  if (!isUuid(id)) return 'not_pending';
  const { rows } = await db.query<{ in_flight: boolean }>(REPLY_IN_FLIGHT_SQL, [id, AUTOREPLY]);
  if (rows[0]?.in_flight) return 'reply_in_flight';
  // One transaction: a process killed between the two would leave the import 'pending' for
  // good behind a cancelled job.
  return db.transaction(async (tx) => {
    if (!(await jobCancel(tx, id))) return 'not_pending';
    const job = await jobGet(tx, id);
    const importId = job?.type === IMPORT_PEOPLE ? (job.payload as { importId?: unknown }).importId : undefined;
    if (typeof importId === 'string' && isUuid(importId)) await importFail(tx, importId, IMPORT_CANCELLED);
    return 'cancelled';
  });
}

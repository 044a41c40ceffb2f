// Recurring jobs: schedules (a cron expression in a time zone, parsed by croner) stored in
// ai_schedules, and the Scheduler every worker process runs. A due schedule is taken with
// FOR UPDATE SKIP LOCKED, its slots are enqueued with a job key unique to the slot
// (`schedule:<name>:<slot>`, as graphile-worker's crontab does), and its next slot is
// stored, all in one transaction: exactly one job per slot however many workers race.
// Slots are judged by the database's clock, never the process's: the row is picked by
// `next_slot_at <= now()`, and a process clock a few seconds off would skip every slot
// (ahead, past the grace) or take the row again and again until it caught up (behind).
import { Cron } from 'croner';
import type { Database, Queryable } from '../db/types.ts';
import type { Logger } from './types.ts';

export type BackfillPolicy = 'none' | 'last' | 'all';

export interface ScheduleInput {
  name: string;
  cron: string;
  timeZone?: string;
  type: string;
  payload?: unknown;
  backfill?: BackfillPolicy;
  /** How far back `all` (and `last`) reach for missed slots; default one day. */
  backfillWindowSeconds?: number;
}

export interface Schedule {
  name: string;
  cron: string;
  timeZone: string;
  type: string;
  payload: unknown;
  enabled: boolean;
  backfill: BackfillPolicy;
  backfillWindowSeconds: number;
  nextSlotAt: Date;
  lastSlotAt: Date | null;
  lastJobId: string | null;
}

/** A cron expression or time zone that does not parse; the message says which and why. */
export class ScheduleInputError extends Error {
  override name = 'ScheduleInputError';
}

/** Checks the expression and zone; throws ScheduleInputError naming the problem. */
export function cronOf(expression: string, timeZone = 'UTC'): Cron {
  let cron: Cron;
  try {
    cron = new Cron(expression, { timezone: timeZone, paused: true });
  } catch (err) {
    throw new ScheduleInputError(`cron "${expression}": ${(err as Error).message.replace(/^CronPattern: /, '')}`);
  }
  try {
    cron.nextRun();
  } catch {
    throw new ScheduleInputError(`time zone "${timeZone}" is not an IANA zone (e.g. Europe/Amsterdam)`);
  }
  return cron;
}

/** The first slot strictly after `after`. */
function slotAfter(cron: Cron, after: Date): Date {
  const next = cron.nextRun(after);
  if (!next) throw new ScheduleInputError('the cron expression has no future slot');
  return next;
}

interface ScheduleRow {
  name: string;
  cron: string;
  time_zone: string;
  type: string;
  payload: unknown;
  enabled: boolean;
  backfill: BackfillPolicy;
  backfill_window_seconds: number;
  next_slot_at: Date;
  last_slot_at: Date | null;
  last_job_id: string | null;
}

const COLUMNS = `name, cron, time_zone, type, payload, enabled, backfill,
  extract(epoch from backfill_window)::int as backfill_window_seconds, next_slot_at, last_slot_at, last_job_id`;

function scheduleFromRow(row: ScheduleRow): Schedule {
  return {
    name: row.name,
    cron: row.cron,
    timeZone: row.time_zone,
    type: row.type,
    payload: row.payload,
    enabled: row.enabled,
    backfill: row.backfill,
    backfillWindowSeconds: row.backfill_window_seconds,
    nextSlotAt: row.next_slot_at,
    lastSlotAt: row.last_slot_at,
    lastJobId: row.last_job_id,
  };
}

// Creates or updates a schedule. A changed expression or zone starts counting from now; an
// unchanged one keeps its place, so re-declaring schedules at every start moves nothing.
// `enabled` is the operator's and is never touched here.
const SCHEDULE_SET_SQL = `
  insert into ai_schedules (name, cron, time_zone, type, payload, backfill, backfill_window, next_slot_at)
  values ($1, $2, $3, $4, $5::jsonb, $6, make_interval(secs => $7), $8)
  on conflict (name) do update set
    type = excluded.type, payload = excluded.payload, backfill = excluded.backfill,
    backfill_window = excluded.backfill_window,
    next_slot_at = case when (ai_schedules.cron, ai_schedules.time_zone) = (excluded.cron, excluded.time_zone)
                        then ai_schedules.next_slot_at else excluded.next_slot_at end,
    cron = excluded.cron, time_zone = excluded.time_zone, updated_at = now()
  returning ${COLUMNS}`;

export async function scheduleSet(db: Queryable, input: ScheduleInput): Promise<Schedule> {
  const timeZone = input.timeZone ?? 'UTC';
  const cron = cronOf(input.cron, timeZone);
  const window = input.backfillWindowSeconds;
  if (window !== undefined && !(Number.isFinite(window) && window >= 0)) {
    throw new ScheduleInputError(`backfillWindowSeconds must be 0 or more seconds, not ${window}`);
  }
  const { now } = (await db.query<{ now: Date }>('select now()')).rows[0]!;
  const { rows } = await db.query<ScheduleRow>(SCHEDULE_SET_SQL, [
    input.name,
    input.cron,
    timeZone,
    input.type,
    JSON.stringify(input.payload ?? {}),
    input.backfill ?? 'last',
    input.backfillWindowSeconds ?? 86_400,
    slotAfter(cron, now),
  ]);
  return scheduleFromRow(rows[0]!);
}

export async function scheduleList(db: Queryable): Promise<Schedule[]> {
  const { rows } = await db.query<ScheduleRow>(`select ${COLUMNS} from ai_schedules order by name`);
  return rows.map(scheduleFromRow);
}

/** Enables or disables; a re-enabled schedule starts from its next slot after now (no flood of missed ones). False when there is no such schedule. */
export async function scheduleEnable(db: Queryable, name: string, enabled: boolean): Promise<boolean> {
  const current = (await db.query<ScheduleRow & { now: Date }>(`select ${COLUMNS}, now() from ai_schedules where name = $1`, [name])).rows[0];
  if (!current) return false;
  const next = enabled && !current.enabled ? slotAfter(cronOf(current.cron, current.time_zone), current.now) : current.next_slot_at;
  await db.query('update ai_schedules set enabled = $2, next_slot_at = $3, updated_at = now() where name = $1', [name, enabled, next]);
  return true;
}

export async function scheduleRemove(db: Queryable, name: string): Promise<boolean> {
  return (await db.query('delete from ai_schedules where name = $1', [name])).rowCount > 0;
}

// The slot's job: the job key makes a second insert for the same slot a no-op.
const SLOT_ENQUEUE_SQL = `
  insert into ai_jobs (type, payload, job_key)
  values ($1, $2::jsonb, $3)
  on conflict (job_key) where job_key is not null do nothing
  returning id`;

/**
 * The slots to enqueue for a schedule due at `now`, by its backfill policy: `none` only a
 * slot that is not older than `graceMs` (it is due now, not missed), `last` the latest
 * slot, `all` every slot in the window, oldest first.
 */
export function slotsDue(schedule: Pick<Schedule, 'cron' | 'timeZone' | 'backfill' | 'backfillWindowSeconds' | 'nextSlotAt'>, now: Date, graceMs: number): { slots: Date[]; next: Date } {
  const cron = cronOf(schedule.cron, schedule.timeZone);
  const next = slotAfter(cron, now);
  // Slots not yet enqueued (from nextSlotAt) and inside the backfill window, which never
  // shuts out the slot due now: a window of 0 left an every-second schedule never firing.
  const from = Math.max(schedule.nextSlotAt.getTime(), now.getTime() - Math.max(schedule.backfillWindowSeconds * 1000, graceMs));
  if (schedule.backfill !== 'all') {
    // The latest slot at or before now, found directly: counting up to it from `from` took
    // 86,400 steps for an every-second schedule after a day's stop (and stopped at a cap).
    const latest = cron.previousRuns(1, new Date(now.getTime() + 1))[0];
    if (!latest || latest.getTime() < from) return { slots: [], next };
    if (schedule.backfill === 'none' && now.getTime() - latest.getTime() > graceMs) return { slots: [], next };
    return { slots: [latest], next };
  }
  const due: Date[] = [];
  for (let slot = slotAfter(cron, new Date(from - 1)); slot.getTime() <= now.getTime(); slot = slotAfter(cron, slot)) {
    due.push(slot);
    // More than MAX_BACKFILL in the window (an every-second schedule after a long stop):
    // the newest MAX_BACKFILL of them, oldest first, rather than the oldest.
    if (due.length > MAX_BACKFILL) return { slots: cron.previousRuns(MAX_BACKFILL, new Date(now.getTime() + 1)).reverse(), next };
  }
  return { slots: due, next };
}

/** The most slots one backfill enqueues. */
const MAX_BACKFILL = 10_000;

export interface SchedulerOptions {
  db: Database;
  logger: Logger;
  /** How often to look for due schedules; default 1000 ms. A slot is enqueued within this. */
  tickMs?: number;
}

/** Looks for due schedules every tick; any number of these may run, one per worker process. */
export class Scheduler {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private readonly tickMs: number;

  constructor(private readonly options: SchedulerOptions) {
    this.tickMs = options.tickMs ?? 1000;
  }

  start(): void {
    this.timer ??= setInterval(() => void this.tick(), this.tickMs);
    void this.tick();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Enqueues every due schedule's slots; returns how many jobs it created. */
  async tick(): Promise<number> {
    if (this.running) return 0;
    let created = 0;
    this.running = (async () => {
      for (;;) {
        // One schedule per transaction, skipping those another worker holds right now. The
        // slots are chosen at the `now()` that found the row due (the module's opening note).
        const done = await this.options.db.transaction(async (tx) => {
          const row = (await tx.query<ScheduleRow & { now: Date }>(
            `select ${COLUMNS}, now() from ai_schedules where enabled and next_slot_at <= now()
             order by next_slot_at limit 1 for update skip locked`,
          )).rows[0];
          if (!row) return true;
          const schedule = scheduleFromRow(row);
          let lastJobId = schedule.lastJobId;
          let lastSlot = schedule.lastSlotAt;
          let next: Date;
          try {
            const due = slotsDue(schedule, row.now, this.tickMs * 5);
            next = due.next;
            for (const slot of due.slots) {
              const job = (await tx.query<{ id: string }>(SLOT_ENQUEUE_SQL, [schedule.type, JSON.stringify(schedule.payload), `schedule:${schedule.name}:${slot.toISOString()}`])).rows[0];
              if (job) {
                created++;
                lastJobId = job.id;
              }
              lastSlot = slot;
            }
          } catch (err) {
            // A schedule that no longer parses stops here, visibly, instead of every tick.
            this.options.logger.error({ schedule: schedule.name, error: (err as Error).message }, 'schedule disabled: it does not parse');
            await tx.query('update ai_schedules set enabled = false, updated_at = now() where name = $1', [schedule.name]);
            return false;
          }
          await tx.query('update ai_schedules set next_slot_at = $2, last_slot_at = $3, last_job_id = $4, updated_at = now() where name = $1', [schedule.name, next, lastSlot, lastJobId]);
          return false;
        });
        if (done) return;
      }
    })().catch((err: Error) => this.options.logger.warn({ error: err.message }, 'schedule tick failed; next tick retries'));
    await this.running;
    this.running = undefined;
    return created;
  }
}

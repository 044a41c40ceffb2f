// The `retention_purge` job: removes what is older than the retention policy, one kind of
// data at a time, in batches of BATCH rows, each its own short statement, so no lock is held
// for long and webhooks keep being acknowledged meanwhile. Its result says what it removed,
// per kind; the schedule `retention` runs it daily (src/main.ts).
import { z } from 'zod';
import type { Env } from '../config.ts';
import type { Queryable } from '../db/types.ts';
import type { JobHandler } from '../queue/index.ts';

export const RETENTION_PURGE = 'retention_purge';
const BATCH = 1000;

type Policy = Pick<
  Env,
  'RETENTION_MESSAGES_DAYS' | 'JOB_RETENTION_DAYS' | 'RETENTION_JOBS_FAILED_DAYS' | 'RETENTION_USAGE_DAYS' | 'RETENTION_IMPORTS_DAYS' | 'RETENTION_AUDIT_DAYS'
>;

function finishedJobsDelete(status: 'done' | 'failed' | 'cancelled'): string {
  return `delete from ai_jobs
          where id in (
            select id from ai_jobs
            where status = '${status}' and finished_at < now() - $1::float8 * interval '1 day'
            limit ${BATCH}
            for update skip locked)`;
}

// Each deletes at most BATCH rows older than $1 days, by the index on its time column where
// there is one. Conversations go when their messages have gone and they are as old, and
// then their contact once it has no conversation left (a number with nothing left to talk
// about is personal data too); never a contact with a conversation on another business
// number that is still in use. The age is tested again on the row being deleted: a message
// arriving meanwhile moves it on (last_message_at, updated_at) under that row's lock, and
// PostgreSQL re-tests a row's own columns after waiting for such a lock, not the subquery.
const PURGES: Array<{ kind: string; days: keyof Policy; sql: string }> = [
  { kind: 'messages', days: 'RETENTION_MESSAGES_DAYS', sql: `delete from messages where id in (select id from messages where created_at < now() - $1::float8 * interval '1 day' limit ${BATCH})` },
  {
    kind: 'conversations without messages',
    days: 'RETENTION_MESSAGES_DAYS',
    sql: `delete from conversations c
          where c.id in (
            select old.id from conversations old
            where old.last_message_at < now() - $1::float8 * interval '1 day'
              and not exists (select 1 from messages m where m.conversation_id = old.id)
            limit ${BATCH})
            and c.last_message_at < now() - $1::float8 * interval '1 day'`,
  },
  {
    kind: 'contacts without conversations',
    days: 'RETENTION_MESSAGES_DAYS',
    sql: `delete from contacts k
          where k.id in (
            select old.id from contacts old
            where old.updated_at < now() - $1::float8 * interval '1 day'
              and not exists (select 1 from conversations c where c.contact_id = old.id)
            limit ${BATCH})
            and k.updated_at < now() - $1::float8 * interval '1 day'`,
  },
  // Jobs: rows another transaction holds are skipped, not waited for. A job an admin is
  // retrying (failed → pending) would otherwise be deleted once the retry committed, on the
  // subquery's word, and a bulk retry and the purge could deadlock on each other's rows.
  { kind: 'done jobs', days: 'JOB_RETENTION_DAYS', sql: finishedJobsDelete('done') },
  { kind: 'failed jobs', days: 'RETENTION_JOBS_FAILED_DAYS', sql: finishedJobsDelete('failed') },
  { kind: 'cancelled jobs', days: 'JOB_RETENTION_DAYS', sql: finishedJobsDelete('cancelled') },
  { kind: 'ai usage', days: 'RETENTION_USAGE_DAYS', sql: `delete from ai_usage where id in (select id from ai_usage where created_at < now() - $1::float8 * interval '1 day' limit ${BATCH})` },
  // Finished imports, and ones left unfinished as long (a process that died mid-import):
  // their stored upload is a staff list all the same.
  {
    kind: 'imports',
    days: 'RETENTION_IMPORTS_DAYS',
    sql: `delete from imports where id in (
            select id from imports
            where coalesce(finished_at, created_at) < now() - $1::float8 * interval '1 day'
            limit ${BATCH})
            and coalesce(finished_at, created_at) < now() - $1::float8 * interval '1 day'`,
  },
  { kind: 'audit log', days: 'RETENTION_AUDIT_DAYS', sql: `delete from audit_log where id in (select id from audit_log where at < now() - $1::float8 * interval '1 day' limit ${BATCH})` },
];

/** The policy as the dashboard and README show it: days per kind, 0 = kept forever. */
export function retentionPolicy(config: Policy): Record<string, number> {
  return Object.fromEntries(PURGES.map((p) => [p.kind, config[p.days]]));
}

export async function retentionPurge(db: Queryable, config: Policy, signal?: AbortSignal): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const purge of PURGES) {
    const days = config[purge.days];
    removed[purge.kind] = 0;
    if (days === 0) continue;
    for (;;) {
      signal?.throwIfAborted();
      const { rowCount } = await db.query(purge.sql, [days]);
      removed[purge.kind] += rowCount;
      if (rowCount < BATCH) break;
    }
  }
  return removed;
}

export function retentionPurgeHandler(deps: { db: Queryable; config: Policy }): JobHandler<Record<string, never>> {
  return {
    type: RETENTION_PURGE,
    schema: z.object({}).passthrough() as never,
    async run({ signal }) {
      return { removed: await retentionPurge(deps.db, deps.config, signal), policyDays: retentionPolicy(deps.config) };
    },
  };
}

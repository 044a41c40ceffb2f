// The audit log: one row per admin action, written in the action's own transaction where
// there is one, so an action and its record commit together. Callers pass ids and counts,
// never personal data.
import { escapeLike } from '../db/like.ts';
import type { Queryable } from '../db/types.ts';

export type AuditResult = 'ok' | 'refused' | 'not_found' | 'failed';

export interface AuditEntry {
  /** Who: `session:<id prefix>`, `token`, `open` (loopback, no token), `cli:<user>`. */
  actor: string;
  action: string;
  target?: string | null;
  result: AuditResult;
  details?: Record<string, unknown>;
}

export interface AuditRow extends Required<Omit<AuditEntry, 'details'>> {
  id: number;
  at: Date;
  details: Record<string, unknown>;
}

export async function auditRecord(db: Queryable, entry: AuditEntry): Promise<void> {
  await db.query('insert into audit_log (actor, action, target, result, details) values ($1, $2, $3, $4, $5::jsonb)', [
    entry.actor,
    entry.action,
    entry.target ?? null,
    entry.result,
    JSON.stringify(entry.details ?? {}),
  ]);
}

/** Newest first; `action` matches any part of the action ("retry", "POST /api/jobs"). */
export async function auditList(db: Queryable, options: { action?: string; result?: AuditResult; limit?: number } = {}): Promise<AuditRow[]> {
  const { rows } = await db.query<AuditRow>(
    `select id, at, actor, action, target, result, details from audit_log
     where ($1::text is null or action ilike '%' || $1 || '%') and ($2::text is null or result = $2)
     order by at desc, id desc limit $3`,
    [options.action ? escapeLike(options.action) : null, options.result ?? null, options.limit ?? 200],
  );
  return rows;
}

// Every admin action in the audit log, recorded where all of them pass: a hook on the
// answers to state-changing requests under /api and /admin that the admin gate let through
// (retry, cancel, bulk retry, send, edit or discard a suggestion, pause or resume the AI,
// replies, simulate, imports, documents, login and failed login, forms refused for their CSRF
// token). What a gate refused, and the login limiter's 429s, are not recorded: anyone can
// send those as fast as they like. It records the route pattern, the target id and the
// outcome, never a body: the log holds no personal data. Erasure and export record themselves,
// with their counts.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Database } from '../db/types.ts';
import { auditRecord, type AuditResult } from '../privacy/audit.ts';
import { AdminAuth, wasAdmitted } from './auth.ts';

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const SELF_RECORDING = new Set(['/api/privacy/erase', '/admin/conversations/:id/forget']);

/** A dashboard session as the audit log names it: by a prefix of its id, never the whole. */
export const dashboardActor = (sid: string): string => `dashboard:${sid.slice(0, 8)}`;

/**
 * Who: a dashboard session (by a prefix of its id), or the API's caller, whose token the gate
 * checked (any bearer in open mode); `dashboard:none` is a login attempt.
 */
function actorOf(request: FastifyRequest, auth: AdminAuth): string {
  const session = auth.sessionOf(request);
  if (session) return dashboardActor(session.sid);
  // By the route: the raw URL may spell it /%61pi/….
  if (request.routeOptions.url?.startsWith('/api')) return auth.open ? 'api:open' : 'api:token';
  return 'dashboard:none';
}

function resultOf(status: number, location: string): AuditResult {
  if (status >= 500) return 'failed';
  if (status === 404) return 'not_found';
  if (status >= 400) return 'refused';
  // A dashboard form that failed redirects back with the problem.
  return location.includes('problem=') ? 'refused' : 'ok';
}

export function auditTrail(app: FastifyInstance, db: Database, auth: AdminAuth): void {
  // When the answer is sent, before it goes out: an onResponse hook runs only once it has
  // gone out, and never when the client hung up first (a script's time-out, a closed tab, or
  // on purpose), while the action was done all the same.
  app.addHook('onSend', async (request, reply) => {
    const route = request.routeOptions.url;
    if (!STATE_CHANGING.has(request.method) || !route || SELF_RECORDING.has(route)) return;
    if (!wasAdmitted(request) || reply.statusCode === 429) return;
    const params = request.params as { id?: unknown; name?: unknown } | undefined;
    await auditRecord(db, {
      actor: actorOf(request, auth),
      action: `${request.method} ${route}`,
      target: typeof params?.id === 'string' ? params.id.slice(0, 100) : typeof params?.name === 'string' ? params.name.slice(0, 100) : null,
      result: resultOf(reply.statusCode, String(reply.getHeader('location') ?? '')),
      details: { status: reply.statusCode },
    }).catch((err: Error) => request.log.error({ err: err.message }, 'audit record not written'));
  });
}

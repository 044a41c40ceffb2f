// What to do when PostgreSQL cannot be reached or refuses us, in the words of the setting
// that leads there: `aiq doctor`'s hint lines, and the one line every other command prints
// (cli.ts) instead of a bare "connect ECONNREFUSED 127.0.0.1:5432".
import { parse as parseConnectionString } from 'pg-connection-string';

// How the network and PostgreSQL say that the server is not there, or not that address.
const NOT_THERE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'ETIMEDOUT', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);

/** Where a connection URL leads, as pg reads it: host:port, or a Unix socket's folder. */
export function hostOf(url: string): string {
  const { host, port } = parseConnectionString(url);
  return host?.startsWith('/') ? `the socket in ${host}` : `${host ?? 'localhost'}${port ? `:${port}` : ''}`;
}

/**
 * The fix for an error connecting to the database of `url` (the value of `variable`), or
 * undefined when the error is not about reaching or logging in to it.
 */
export function connectionHint(err: unknown, url: string, variable = 'DATABASE_URL'): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (typeof code !== 'string') return undefined;
  const where = parseConnectionString(url);
  if (code === '28P01' || code === '28000') return `check the user and password in ${variable} (user "${where.user ?? ''}")`;
  if (code === '3D000') return `create the database first (createdb ${where.database ?? ''}) or fix its name in ${variable}`;
  if (NOT_THERE.has(code)) return `is PostgreSQL (or the pooler) running and reachable at ${hostOf(url)}?`;
  return undefined;
}

// Errors of the database layer that callers tell apart, in a module that loads no driver.

/** The embedded database's folder is held by another running process. */
export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError';
  constructor(
    message: string,
    /** The folder whose lock is held. */
    readonly dir: string,
  ) {
    super(message);
  }
}

// Postgres answers these while it starts, stops or restarts, or while it is unreachable.
// 08P01: how PgBouncer refuses clients while its server is unreachable or restarting
// ("server login has been failing, try again later", for server_login_retry seconds).
const NOT_REACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P02', '57P03', '08P01']);
// node-postgres reports a connection lost mid-statement, or a pooled connection that died
// before its next statement, with these messages and no code.
const CONNECTION_LOST_MESSAGES = new Set(['Connection terminated unexpectedly', 'Client has encountered a connection error and is not queryable']);

/** The server is restarting, not up yet, or dropped the connection: worth trying again. */
export function isDatabaseUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' ? NOT_REACHABLE_CODES.has(code) : CONNECTION_LOST_MESSAGES.has(err.message);
}

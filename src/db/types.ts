// The database seam: one small interface that both node-postgres and embedded PGlite
// implement, so nothing above src/db/ knows which one runs. Kept free of driver imports.

/** Anything that runs a parameterised statement: the database itself or an open transaction. */
export interface Queryable {
  query<Row = Record<string, unknown>>(text: string, values?: unknown[]): Promise<{ rows: Row[]; rowCount: number }>;
  /** Runs a script of several statements without parameters (migrations). */
  exec(sql: string): Promise<void>;
}

/**
 * NOTIFY cannot reach this process (a transaction-mode pooler without a direct connection):
 * callers fall back to polling.
 */
export class NotificationsUnavailableError extends Error {
  override name = 'NotificationsUnavailableError';
}

export interface Database extends Queryable {
  /** `pg` for a PostgreSQL server, `pglite` for the embedded database. */
  readonly kind: 'pg' | 'pglite';
  /** Runs `work` in one transaction: committed when it resolves, rolled back when it throws. */
  transaction<T>(work: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Subscribes to NOTIFY on a channel. The returned function unsubscribes. On a server
   * connection that drops, the listener reconnects by itself and calls `onReconnect`, so the
   * caller can poll for anything it missed meanwhile. Throws NotificationsUnavailableError
   * where notifications cannot arrive at all.
   */
  listen(channel: string, onNotify: (payload: string) => void, onReconnect?: () => void): Promise<() => Promise<void>>;
  /**
   * The embedded database only: a consistent copy of the whole data folder (a gzipped tar
   * that `pgliteRestore` loads), taken after a checkpoint in one turn of the session.
   */
  backup?(): Promise<Blob>;
  /**
   * The embedded database only: rewrites `tables` without the row versions deleted or
   * replaced in them, and drops the write-ahead log that still held those, so that neither
   * the data folder nor a backup taken from now on holds them (what an erasure removed).
   * Requests wait meanwhile. A PostgreSQL server has no such call: its backups are logical
   * (pg_dump) or the provider's, with their own retention.
   */
  purgeDeleted?(tables: readonly string[]): Promise<void>;
  /**
   * The embedded database only: records that `tables` are to be purged, before the rows go,
   * so that a purge a crash or a full disk stops is done when the database is next opened;
   * purgeDeleted clears it. Returns whether a purge was pending already. `null` clears what
   * this process recorded, when nothing was deleted after all.
   */
  purgePending?(tables: readonly string[] | null): boolean;
  close(): Promise<void>;
}

// node-postgres behind the Database interface: a pool for statements and transactions, and
// one dedicated connection for LISTEN that reconnects with backoff after Postgres restarts.
import pg from 'pg';
import { poolerProbe, type PoolerProbe } from './pooler.ts';
import { isStaleResultType, PreparedStatements, type PreparedStatementsMode } from './prepared.ts';
import { NotificationsUnavailableError, type Database, type Queryable } from './types.ts';

// Return bigint counts as numbers: our counters stay far below 2^53.
pg.types.setTypeParser(20, (value) => Number(value));

export interface PostgresOptions {
  connectionString: string;
  /**
   * A connection that bypasses the pooler, for LISTEN (DATABASE_DIRECT_URL). Without it,
   * LISTEN uses `connectionString` unless that goes through a transaction-mode pooler,
   * where a listening session would be handed to other clients: then there is none.
   */
  directConnectionString?: string;
  poolSize?: number;
  applicationName?: string;
  /**
   * Named prepared statements (src/db/prepared.ts): 'auto' (the default) uses them when
   * `connectionString` reaches PostgreSQL itself, with no pooler or proxy in between.
   */
  preparedStatements?: PreparedStatementsMode;
  onError?: (err: Error) => void;
}

export function openPostgres(options: PostgresOptions): Database {
  const pool = new pg.Pool({
    connectionString: options.connectionString,
    max: options.poolSize ?? 10,
    application_name: options.applicationName ?? 'aiq',
    // Dead connections (Postgres restarted) must not hang a worker forever.
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  // An idle client that loses its server emits on the pool; without a handler Node exits.
  pool.on('error', (err) => options.onError?.(err));
  // A client that is not idle has no listener of the pool's: one checked out for a
  // transaction, or one being handed from a finished query to a waiting transaction (the
  // parser can read a FATAL after the last reply before that transaction's promise resumes).
  // An 'error' event with no listener ends the process, so every client keeps one for life;
  // the statement that next runs on a dead connection fails, and that is where it is handled.
  pool.on('connect', (client) => client.on('error', () => {}));
  const listeners: Array<() => Promise<void>> = [];
  // One probe of the connection string answers LISTEN's question and this one; one that
  // failed (a database still starting) is asked again next time.
  let probing: Promise<PoolerProbe> | undefined;
  const probe = () =>
    (probing ??= poolerProbe(options.connectionString).catch((err: unknown) => {
      probing = undefined;
      throw err;
    }));
  const prepared = new PreparedStatements(options.preparedStatements ?? 'auto', async () => (await probe()).direct);

  const query: Queryable['query'] = async (text, values) => {
    const statement = prepared.statement(text, values as unknown[] | undefined);
    const result = await pool.query(statement).catch((err: unknown) => {
      if (!prepared.failed(statement, err)) throw err;
      return pool.query(text, values as unknown[]);
    });
    return { rows: result.rows, rowCount: result.rowCount ?? 0 };
  };

  return {
    kind: 'pg',
    query,
    async exec(sql) {
      await pool.query(sql);
    },
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('begin');
        const tx: Queryable = {
          async query(text, values) {
            const statement = prepared.statement(text, values as unknown[] | undefined);
            // Inside a transaction a failed statement cannot run again: the caller retries.
            const result = await client.query(statement).catch((err: unknown) => {
              prepared.failed(statement, err);
              throw err;
            });
            return { rows: result.rows, rowCount: result.rowCount ?? 0 };
          },
          async exec(sql) {
            await client.query(sql);
          },
        };
        const value = await work(tx);
        await client.query('commit');
        client.release();
        return value;
      } catch (err) {
        // A broken connection cannot be rolled back; destroy it instead of returning it. So
        // is one holding a prepared statement whose result columns changed under it.
        const rolledBack = await client.query('rollback').then(() => true, () => false);
        client.release(rolledBack && !isStaleResultType(err) ? undefined : true);
        throw err;
      }
    },
    async listen(channel, onNotify, onReconnect) {
      // A database that is not reachable yet (restarting) counts as direct: LISTEN keeps retrying.
      const pooled = await probe().then((found) => found.mode === 'transaction', () => false);
      if (!options.directConnectionString && pooled) {
        throw new NotificationsUnavailableError('DATABASE_URL goes through a transaction-mode pooler and DATABASE_DIRECT_URL is not set, so NOTIFY cannot reach this process');
      }
      const stop = await listenWithReconnect(
        { ...options, connectionString: options.directConnectionString ?? options.connectionString },
        channel,
        onNotify,
        onReconnect,
      );
      listeners.push(stop);
      return async () => {
        listeners.splice(listeners.indexOf(stop), 1);
        await stop();
      };
    },
    async close() {
      await Promise.all(listeners.splice(0).map((stop) => stop()));
      await pool.end();
    },
  };
}

async function listenWithReconnect(
  options: PostgresOptions,
  channel: string,
  onNotify: (payload: string) => void,
  onReconnect?: () => void,
): Promise<() => Promise<void>> {
  let client: pg.Client | undefined;
  let stopped = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let failures = 0;

  const connect = async (): Promise<void> => {
    const next = new pg.Client({
      connectionString: options.connectionString,
      application_name: `${options.applicationName ?? 'aiq'}:listen`,
      keepAlive: true,
    });
    next.on('notification', (msg) => {
      if (msg.channel === channel) onNotify(msg.payload ?? '');
    });
    next.on('error', (err) => {
      options.onError?.(err);
      scheduleReconnect();
    });
    next.on('end', () => scheduleReconnect());
    try {
      await next.connect();
      // Channel names are identifiers, not values: quote them as such.
      await next.query(`listen ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      // A client that never connected must not later tear down the one that replaces it;
      // its late 'error' events are swallowed rather than left unhandled (fatal).
      next.removeAllListeners();
      next.on('error', () => {});
      next.end().catch(() => {});
      throw err;
    }
    client = next;
    failures = 0;
  };

  const scheduleReconnect = () => {
    if (stopped || retryTimer) return;
    const dead = client;
    client = undefined;
    dead?.removeAllListeners('end');
    dead?.end().catch(() => {});
    const delay = Math.min(100 * 2 ** failures, 5000);
    failures += 1;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect().then(
        () => onReconnect?.(),
        (err: Error) => {
          options.onError?.(err);
          scheduleReconnect();
        },
      );
    }, delay);
    retryTimer.unref();
  };

  // LISTEN only hints at new work (workers poll too), so a database that is not reachable
  // at start-up (restarting) must not fail the caller: keep trying in the background.
  await connect().catch((err: Error) => {
    options.onError?.(err);
    scheduleReconnect();
  });
  return async () => {
    stopped = true;
    if (retryTimer) clearTimeout(retryTimer);
    const current = client;
    client = undefined;
    if (current) {
      current.removeAllListeners('end');
      await current.end().catch(() => {});
    }
  };
}

// Whether a connection string reaches PostgreSQL directly or through a connection pooler
// (PgBouncer, Supabase's pooler, RDS Proxy …), and in which mode, found by asking it.
//
// Two sessions each ask for their server process id. Directly, and through a session-mode
// pooler, every session has a server process of its own, so the ids differ. A transaction-
// mode pooler hands the server connection back after each statement and gives the second
// session the one the first just released (PgBouncer reuses the most recent), so the ids are
// equal. A session-mode pooler or proxy shows itself another way: the server's own port is
// not the port we dialled.
import type { Socket } from 'node:net';
import pg from 'pg';

export type PoolerMode = 'direct' | 'transaction' | 'session';

export interface PoolerProbe {
  mode: PoolerMode;
  /** The server's own port, as it reports it. */
  serverPort: number | null;
  /** The port we connected to. */
  dialledPort: number;
  /**
   * Nothing sits between us and PostgreSQL: over TCP the server sees our socket's own port
   * (a pooler, proxy or NAT in between shows it theirs), which holds even while other
   * sessions are busy and can fool the two-session test; over a Unix socket, where the
   * server sees no port, no transaction-mode pooler.
   */
  direct: boolean;
}

export async function poolerProbe(connectionString: string): Promise<PoolerProbe> {
  const first = new pg.Client({ connectionString, application_name: 'aiq:probe', connectionTimeoutMillis: 10_000 });
  const second = new pg.Client({ connectionString, application_name: 'aiq:probe', connectionTimeoutMillis: 10_000 });
  // A server that goes away meanwhile (a restart) makes an idle client emit 'error'; without
  // a listener that would end the process. The probe's own queries fail and say why.
  for (const client of [first, second]) client.on('error', () => {});
  try {
    await first.connect();
    await second.connect();
    const ask = `select pg_backend_pid() as pid, inet_server_port() as port, inet_client_port() as client_port`;
    type Answer = { pid: number; port: number | null; client_port: number | null };
    const a = (await first.query<Answer>(ask)).rows[0]!;
    const b = (await second.query<Answer>(ask)).rows[0]!;
    const url = new URL(connectionString);
    const dialledPort = Number(url.port || 5432);
    const mode: PoolerMode = a.pid === b.pid ? 'transaction' : a.port !== null && a.port !== dialledPort && url.hostname !== '' ? 'session' : 'direct';
    const ours = (first.connection.stream as Partial<Socket>).localPort;
    const sameSocket = a.client_port !== null && ours !== undefined ? a.client_port === ours : null;
    return { mode, serverPort: a.port, dialledPort, direct: sameSocket ?? mode !== 'transaction' };
  } finally {
    await Promise.all([first.end().catch(() => {}), second.end().catch(() => {})]);
  }
}

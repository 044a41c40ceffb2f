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
    const ask = `select pg_backend_pid() as pid, inet_server_port() as port`;
    const a = (await first.query<{ pid: number; port: number | null }>(ask)).rows[0]!;
    const b = (await second.query<{ pid: number; port: number | null }>(ask)).rows[0]!;
    const url = new URL(connectionString);
    const dialledPort = Number(url.port || 5432);
    const mode: PoolerMode = a.pid === b.pid ? 'transaction' : a.port !== null && a.port !== dialledPort && url.hostname !== '' ? 'session' : 'direct';
    return { mode, serverPort: a.port, dialledPort };
  } finally {
    await Promise.all([first.end().catch(() => {}), second.end().catch(() => {})]);
  }
}

/**
 * Whether nothing sits between us and PostgreSQL, told for certain over TCP and even while
 * other sessions are busy (which can fool the two-session probe above): the server sees the
 * port our socket has. A pooler, proxy or NAT in between shows the server its own socket.
 * Over a Unix socket the server sees no port; the probe above decides there.
 */
export async function reachesServerDirectly(connectionString: string): Promise<boolean> {
  const client = new pg.Client({ connectionString, application_name: 'aiq:probe', connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  try {
    await client.connect();
    const { rows } = await client.query<{ port: number | null }>('select inet_client_port() as port');
    const ours = (client.connection.stream as Partial<Socket>).localPort;
    if (rows[0]!.port !== null && ours !== undefined) return rows[0]!.port === ours;
  } finally {
    await client.end().catch(() => {});
  }
  return (await poolerProbe(connectionString)).mode !== 'transaction';
}

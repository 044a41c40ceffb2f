// Whether a connection string reaches PostgreSQL directly or through a connection pooler
// (PgBouncer, Supabase's pooler, RDS Proxy …), and in which mode, found by asking it.
//
// Direct is only what is proven: over TCP the server sees our socket's own address and port
// as its client's, and was reached on the port we dialled (a pooler, proxy or NAT in between
// shows its own; the port alone is not enough: a pooler's own connection to the server can
// get the same ephemeral port number as ours to the pooler, seen once in CI); over a Unix socket the server
// sees a Unix-socket client and listens on the very socket we dialled. Anything else sits
// behind a pooler or proxy, and the question is whether our session keeps its server
// session, which is what LISTEN needs: a notification sent from a second session reaches a
// first one that listens, or it does not (transaction mode hands the listening server
// session to others between statements). Server process ids only short-cut that: two of
// our sessions that share one, or one of ours whose id changes, are transaction mode;
// different ids prove nothing (round robin, other clients' traffic).
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import pg from 'pg';
import type { Queryable } from './types.ts';

export type PoolerMode = 'direct' | 'transaction' | 'session';

export interface PoolerProbe {
  mode: PoolerMode;
  /** The server's own port, as it reports it. */
  serverPort: number | null;
  /** The port we connected to. */
  dialledPort: number;
  /** Nothing sits between us and PostgreSQL (mode 'direct'): safe for named prepared statements. */
  direct: boolean;
  /** Which database on which running server answered (IDENTITY_SQL). */
  identity: string;
}

/**
 * The database and the server run that answer a connection: equal through a pooler and
 * past it when both reach the same database. A server's start time tells two servers (a
 * replica, another cluster) apart where their database names agree; it is written in UTC,
 * whatever the session's TimeZone (a pooler's database entry may set one).
 */
const IDENTITY_SQL = `select format('database "%s" on the server started %s UTC', current_database(),
  to_char(pg_postmaster_start_time() at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')) as identity`;

/** Which database on which running server a connection reaches (see PoolerProbe.identity). */
export async function databaseIdentity(on: Queryable): Promise<string> {
  return (await on.query<{ identity: string }>(IDENTITY_SQL)).rows[0]!.identity;
}

/**
 * Why DATABASE_DIRECT_URL (reaching `past`) is not the database DATABASE_URL reaches
 * (`through`), or null when it is: another database there would be migrated, and LISTEN
 * there would hear nothing.
 */
export function directElsewhere(through: string, past: string): string | null {
  return through === past ? null : `DATABASE_DIRECT_URL reaches ${past}, but DATABASE_URL reaches ${through}: both must reach the same database`;
}

/** How long a notification may take to come back through a session-mode pooler. */
const NOTIFY_WAIT_MS = 1000;

interface ServerFacts {
  identity: string;
  pid: number;
  port: number;
  client_addr: string | null;
  client_port: number | null;
  server_port: number | null;
  socket_dirs: string;
}

const FACTS_SQL = `
  select (${IDENTITY_SQL}) as identity, pg_backend_pid() as pid, current_setting('port')::int as port,
         host(inet_client_addr()) as client_addr, inet_client_port() as client_port, inet_server_port() as server_port,
         current_setting('unix_socket_directories') as socket_dirs`;

export async function poolerProbe(connectionString: string): Promise<PoolerProbe> {
  const clients: pg.Client[] = [];
  const connect = async () => {
    const client = new pg.Client({ connectionString, application_name: 'aiq:probe', connectionTimeoutMillis: 10_000 });
    // A server that goes away meanwhile (a restart) makes an idle client emit 'error'; without
    // a listener that would end the process. The probe's own queries fail and say why.
    client.on('error', () => {});
    clients.push(client);
    await client.connect();
    return client;
  };
  try {
    const first = await connect();
    const facts = (await first.query<ServerFacts>(FACTS_SQL)).rows[0]!;
    const found = (mode: PoolerMode): PoolerProbe => ({ mode, serverPort: facts.port, dialledPort: first.port, direct: mode === 'direct', identity: facts.identity });
    if (reachesServer(first, facts)) return found('direct');
    return found((await sessionsPersist(first, facts.pid, connect)) ? 'session' : 'transaction');
  } finally {
    await Promise.all(clients.map((client) => client.end().catch(() => {})));
  }
}

/** The server itself answered: it sees our socket, or listens on the Unix socket we dialled. */
function reachesServer(client: pg.Client, facts: ServerFacts): boolean {
  const ours = client.connection.stream as Partial<Socket>;
  if (!client.host.startsWith('/')) return seesOurSocket({ address: ours.localAddress, port: ours.localPort, dialledPort: client.port }, facts);
  const dirs = facts.socket_dirs.split(',').map((dir) => dir.trim().replace(/\/+$/, ''));
  return facts.client_port === null && facts.port === client.port && dirs.includes(client.host.replace(/\/+$/, ''));
}

/**
 * Over TCP: the server's client is our socket (address and port), and it was reached on the
 * port we dialled. Each part alone has been seen to match through a pooler: PgBouncer and
 * the server on one host, its connection to the server by chance on our port number.
 */
export function seesOurSocket(
  ours: { address: string | undefined; port: number | undefined; dialledPort: number },
  facts: Pick<ServerFacts, 'client_addr' | 'client_port' | 'server_port'>,
): boolean {
  return facts.client_port !== null && facts.client_port === ours.port && facts.server_port === ours.dialledPort && sameAddress(facts.client_addr, ours.address);
}

/** An IPv4 client of a dual-stack socket shows as ::ffff:a.b.c.d on one side and a.b.c.d on the other. */
function sameAddress(a: string | null, b: string | undefined): boolean {
  const plain = (address: string) => address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '').toLowerCase();
  return a !== null && b !== undefined && plain(a) === plain(b);
}

/** A notification from a second session reaches the first, listening one: its server session is its own. */
async function sessionsPersist(first: pg.Client, firstPid: number, connect: () => Promise<pg.Client>): Promise<boolean> {
  // A channel of its own: behind a transaction-mode pooler the LISTEN stays on a pooled
  // server session, where nothing but this probe ever notifies it.
  const channel = `aiq_probe_${randomBytes(6).toString('hex')}`;
  let heard!: () => void;
  const notified = new Promise<void>((resolve) => (heard = resolve));
  first.on('notification', (msg) => msg.channel === channel && heard());
  const pidOf = async (client: pg.Client) => (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  await first.query(`listen ${pg.escapeIdentifier(channel)}`);
  const second = await connect();
  // The server session the first one used, now another's, or the first one's session moved.
  if ((await pidOf(second)) === firstPid || (await pidOf(first)) !== firstPid) return false;
  await second.query('select pg_notify($1, $2)', [channel, '']);
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), NOTIFY_WAIT_MS)));
  try {
    return await Promise.race([notified.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

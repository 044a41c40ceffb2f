// Serves the running embedded database over the PostgreSQL wire protocol on a Unix socket in
// the data folder, named as PostgreSQL names its own (`.s.PGSQL.5432`): `aiq stats`, `aiq
// enqueue` … and `psql -h <absolute DATA_DIR> -U postgres` reach the process that owns the folder
// instead of being refused by its lock.
//
// Why not @electric-sql/pglite-socket: its queue orders socket clients among themselves but
// takes only PGlite's per-message lock, so a client's statement can run inside the app's own
// open transaction (and the app's inside the client's). Here every message runs in the
// client's turn on the SessionGate the app also takes. The framing is PostgreSQL's: a
// startup packet (length, protocol), then messages of a type byte and a length.
import { chmodSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import type { PGlite } from '@electric-sql/pglite';
import type { SessionGate } from './session-gate.ts';

export const SOCKET_FILE = '.s.PGSQL.5432';
/** sun_path holds 108 bytes on Linux, 104 on macOS. */
const MAX_SOCKET_PATH = 103;

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const TERMINATE = 0x58; // 'X'
const SYNC = new Uint8Array([0x53, 0, 0, 0, 4]); // 'S', length 4
const READY_FOR_QUERY_IDLE = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]); // 'Z', length 5, 'I'

export interface SocketServer {
  path: string;
  close(): Promise<void>;
}

export function socketPathFor(dataDir: string): string {
  return join(dataDir, SOCKET_FILE);
}

/**
 * Listens on `<dataDir>/.s.PGSQL.5432`; undefined when the path is too long for a socket.
 * `sessionSettings` is the SQL that sets the app's own settings, applied again after each
 * client leaves.
 */
export async function servePgliteSocket(db: PGlite, gate: SessionGate, dataDir: string, sessionSettings: string, onError: (err: Error) => void): Promise<SocketServer | undefined> {
  const path = socketPathFor(dataDir);
  if (Buffer.byteLength(path) > MAX_SOCKET_PATH) return undefined;
  // We hold the folder's lock, so a socket file here was left by a killed owner.
  rmSync(path, { force: true });
  const clients = new Set<Socket>();
  const server: Server = createServer((socket) => {
    clients.add(socket);
    socket.once('close', () => clients.delete(socket));
    serveClient(socket, db, gate, sessionSettings, onError);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // The owner only: the socket opens every row in the database, with no password.
  chmodSync(path, 0o600);
  return {
    path,
    async close() {
      for (const socket of clients) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(path, { force: true });
    },
  };
}

function serveClient(socket: Socket, db: PGlite, gate: SessionGate, sessionSettings: string, onError: (err: Error) => void): void {
  let buffer = Buffer.alloc(0);
  let started = false;
  let endTurn: (() => void) | undefined;
  let closed = false;
  // Messages run one after another, in the order the client sent them.
  let queue: Promise<void> = Promise.resolve();
  const later = (step: () => Promise<void>) => {
    queue = queue.then(step).catch((err: Error) => {
      onError(err);
      socket.destroy();
    });
  };

  const run = async (message: Uint8Array) => {
    if (closed) return;
    endTurn ??= await gate.acquire();
    if (closed) return finishTurn();
    if (started && message[0] === TERMINATE) {
      socket.end();
      return finishTurn();
    }
    let tail = Buffer.alloc(0);
    await db.runExclusive(() =>
      db.execProtocolRawStream(message, {
        onRawData(data) {
          // A copy: `data` is a view into PGlite's memory, which it overwrites with the next
          // part of the answer, while a busy socket keeps what it was given to write later
          // (a large result reached the client corrupted: found by an operations probe).
          if (!socket.destroyed) socket.write(Buffer.from(data));
          tail = Buffer.concat([tail, data]).subarray(-READY_FOR_QUERY_IDLE.length);
        },
      }),
    );
    // ReadyForQuery, idle: the client is between transactions, so others may have a turn.
    if (tail.equals(READY_FOR_QUERY_IDLE)) {
      endTurn();
      endTurn = undefined;
    }
  };

  /**
   * Ends the turn of a client that left: its open transaction is rolled back, and what it SET
   * is undone (the session is the app's too: a psql's search_path or time zone would stay).
   * Also a client that left idle, outside its turn, so the turn is taken if need be.
   */
  const finishTurn = async () => {
    if (!started || db.closed) return endTurn?.();
    endTurn ??= await gate.acquire();
    try {
      if (db.closed) return;
      await db.runExclusive(() => db.execProtocolRaw(SYNC));
      if (db.isInTransaction()) await db.runExclusive(() => db.execProtocolRaw(simpleQuery('rollback')));
      await db.runExclusive(() => db.execProtocolRaw(simpleQuery(`reset all; ${sessionSettings}`)));
    } finally {
      endTurn();
      endTurn = undefined;
    }
  };

  socket.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const message = nextMessage();
      if (!message) break;
      later(() => run(message));
    }
  });
  socket.on('error', () => socket.destroy());
  socket.once('close', () => {
    closed = true;
    later(finishTurn);
  });

  /** The next complete message in the buffer; answers SSL and GSS requests itself. */
  function nextMessage(): Uint8Array | undefined {
    for (;;) {
      if (!started) {
        if (buffer.length < 8) return undefined;
        const length = buffer.readInt32BE(0);
        if (buffer.length < length) return undefined;
        const code = buffer.readInt32BE(4);
        const packet = buffer.subarray(0, length);
        buffer = buffer.subarray(length);
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
          socket.write('N'); // no encryption on a local socket; the client goes on in plain
          continue;
        }
        if (code === CANCEL_REQUEST) {
          socket.end(); // cancelling another client's statement is not supported
          return undefined;
        }
        started = true;
        return new Uint8Array(packet);
      }
      if (buffer.length < 5) return undefined;
      const length = 1 + buffer.readInt32BE(1);
      if (buffer.length < length) return undefined;
      const message = new Uint8Array(buffer.subarray(0, length));
      buffer = buffer.subarray(length);
      return message;
    }
  }
}

function simpleQuery(sql: string): Uint8Array {
  const text = Buffer.from(`${sql}\0`);
  const message = Buffer.alloc(5 + text.length);
  message[0] = 0x51; // 'Q'
  message.writeInt32BE(4 + text.length, 1);
  text.copy(message, 5);
  return new Uint8Array(message);
}

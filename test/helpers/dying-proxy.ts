// A TCP proxy in front of the real PostgreSQL whose first connection dies the way a fast
// shutdown kills it: right after the reply to its first statement, a FATAL in the same
// write, then the hang-up. Every later connection is forwarded untouched (all of them with
// `{ firstDies: false }`: a plain forwarder, as a proxy or NAT between us and the server).
import net from 'node:net';

export interface DyingProxy {
  /** The database URL through the proxy. */
  url: string;
  close(): void;
}

export async function dyingProxy(databaseUrl: string, { firstDies = true } = {}): Promise<DyingProxy> {
  const target = new URL(databaseUrl);
  let armed = firstDies;
  const proxy = net.createServer((downstream) => {
    const upstream = net.connect(Number(target.port || 5432), target.hostname);
    downstream.pipe(upstream);
    const dieAfterFirstStatement = armed;
    armed = false;
    let readyForQuery = 0;
    let pending = Buffer.alloc(0);
    upstream.on('data', (chunk: Buffer) => {
      if (!dieAfterFirstStatement) return void downstream.write(chunk);
      pending = Buffer.concat([pending, chunk]);
      // Forward whole messages; after the second ReadyForQuery (start-up, then the first
      // statement) append the FATAL in the same write and hang up.
      let offset = 0;
      while (pending.length - offset >= 5) {
        const length = pending.readInt32BE(offset + 1);
        if (pending.length - offset < 1 + length) break;
        const type = String.fromCharCode(pending[offset]!);
        offset += 1 + length;
        if (type === 'Z' && ++readyForQuery === 2) {
          downstream.end(Buffer.concat([pending.subarray(0, offset), fatalMessage('57P01', 'terminating connection due to administrator command')]));
          upstream.destroy();
          return;
        }
      }
      downstream.write(pending.subarray(0, offset));
      pending = pending.subarray(offset);
    });
    upstream.on('error', () => downstream.destroy());
    downstream.on('error', () => upstream.destroy());
    upstream.on('close', () => downstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const url = new URL(databaseUrl);
  url.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
  return { url: url.toString(), close: () => proxy.close() };
}

function fatalMessage(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const header = Buffer.alloc(5);
  header.write('E', 0);
  header.writeInt32BE(4 + fields.length, 1);
  return Buffer.concat([header, fields]);
}

// How the benchmark's stand-alone apps (bench/floors/, bench/peers/) run: spawned as a
// process of their own, listening where PORT and HOST say, and leaving cleanly when the
// benchmark stops them.
import type { FastifyInstance } from 'fastify';

/** Listens on PORT (any free one) at HOST (127.0.0.1); on SIGTERM or SIGINT closes the app, then `release`, and exits 0. */
export async function listenUntilStopped(app: FastifyInstance, release: () => Promise<void> = async () => {}): Promise<void> {
  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await app.close();
    await release();
    process.exit(0);
  };
  process.on('SIGTERM', () => void close());
  process.on('SIGINT', () => void close());
  await app.listen({ port: Number(process.env.PORT ?? 0), host: process.env.HOST ?? '127.0.0.1' });
}

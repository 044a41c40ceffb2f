// The child side of the IPC channel: the config from argv, messages to and from the parent,
// and a failure report that ends the process.
import type { Message } from '../lib/child.ts';

export function config<T>(): T {
  return JSON.parse(process.argv[2] ?? '{}') as T;
}

export function send(message: Message): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (err) => (err ? reject(err) : resolve())));
}

export function nextMessage(type: string): Promise<Message> {
  return new Promise((resolve) => {
    const onMessage = (msg: Message) => {
      if (msg.type !== type) return;
      process.off('message', onMessage);
      resolve(msg);
    };
    process.on('message', onMessage);
  });
}

export function fail(err: unknown): never {
  const message = err instanceof Error ? err.stack ?? err.message : String(err);
  console.error(message);
  void send({ type: 'error', message }).finally(() => process.exit(1));
  setTimeout(() => process.exit(1), 1000).unref();
  throw err;
}

// Where a running `aiq start` on the embedded database answers HTTP, written into its data
// folder (owner-only), so a command that talks to the running process (`aiq backup`,
// `aiq simulate`) finds it without being told HOST and PORT. Removed at shutdown; a file left by a killed
// process is never read, because the folder's lock is then free and the command opens it.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Env } from './config.ts';

const ADDRESS_FILE = 'aiq.address';

export function runningAddressWrite(dataDir: string, url: string): void {
  writeFileSync(join(dataDir, ADDRESS_FILE), url, { mode: 0o600 });
}

export function runningAddressRemove(dataDir: string): void {
  rmSync(join(dataDir, ADDRESS_FILE), { force: true });
}

export function runningAddressRead(dataDir: string): string | undefined {
  try {
    return readFileSync(join(dataDir, ADDRESS_FILE), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/**
 * The URL of the local aiq, reachable from this machine: on the embedded database the
 * address the running `aiq start` wrote (a PORT set when it started, not in this shell),
 * else this shell's HOST and PORT. A server bound to every interface is reached on loopback.
 */
export function localServerUrl(config: Env): string {
  const written = config.DATABASE_URL ? undefined : runningAddressRead(config.DATA_DIR);
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  return (written ?? `http://${host}:${config.PORT}`).replace('://0.0.0.0:', '://127.0.0.1:').replace('://[::]:', '://[::1]:');
}

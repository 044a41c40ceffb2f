// Where the CLI reaches the local aiq over HTTP (`aiq simulate`, `aiq backup` of a running
// embedded database).
import type { Env } from '../config.ts';
import { dataDirHeld } from '../db/data-dir-lock.ts';
import { runningAddressRead } from '../running-address.ts';

/**
 * The URL of the local aiq, reachable from this machine: on the embedded database, while a
 * live `aiq start` holds the folder, the address it wrote (it may have started with a PORT
 * this shell does not have); else this shell's HOST and PORT. A server bound to every
 * interface is reached on loopback.
 */
export function localServerUrl(config: Env): string {
  const written = config.DATABASE_URL || !dataDirHeld(config.DATA_DIR) ? undefined : runningAddressRead(config.DATA_DIR);
  const host = config.HOST.includes(':') ? `[${config.HOST}]` : config.HOST;
  return (written ?? `http://${host}:${config.PORT}`).replace('://0.0.0.0:', '://127.0.0.1:').replace('://[::]:', '://[::1]:');
}

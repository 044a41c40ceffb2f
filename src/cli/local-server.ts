// Where the CLI reaches the local aiq over HTTP (`aiq simulate`; `aiq backup` and `aiq
// forget` of a running embedded database).
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

/**
 * A request to the admin API of the aiq that holds the embedded database, with this shell's
 * ADMIN_TOKEN (`local` in open mode). Throws, prefixed with `failed` ("nothing erased: "),
 * when it does not answer or refuses the token; any other answer is the caller's to read.
 */
export async function runningServerRequest(config: Env, path: string, init: RequestInit = {}, failed = ''): Promise<{ url: string; response: Response }> {
  const url = `${localServerUrl(config)}${path}`;
  let response: Response;
  try {
    response = await fetch(url, { ...init, headers: { ...(init.headers as Record<string, string> | undefined), authorization: `Bearer ${config.ADMIN_TOKEN ?? 'local'}` } });
  } catch (err) {
    throw new Error(`${failed}the embedded database is held by a running aiq, and its API at ${url} did not answer (${(err as Error).message}): is it still starting? Run this with the same ADMIN_TOKEN as the server`);
  }
  if (response.status === 401) throw new Error(`${failed}the running aiq at ${url} refused this command's ADMIN_TOKEN: run it with the server's ADMIN_TOKEN in this shell (or its .env)`);
  return { url, response };
}

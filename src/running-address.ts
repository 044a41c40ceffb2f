// Where a running `aiq start` on the embedded database answers HTTP, written into its data
// folder (owner-only), so a command that talks to the running process (`aiq backup`,
// `aiq simulate`) finds it without being told HOST and PORT. Removed at shutdown; a file left
// by a killed process is read only while a live process holds the folder's lock
// (src/cli/local-server.ts), which the restarted one overwrites.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

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


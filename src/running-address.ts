// Where a running `aiq start` on the embedded database answers HTTP, written into its data
// folder (owner-only), so a command that needs the running process itself (`aiq backup`)
// finds it without being told HOST and PORT. Removed at shutdown; a file left by a killed
// process is never read, because the folder's lock is then free and the command opens it.
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

// What `aiq forget` and `aiq export` do (src/cli/privacy-commands.ts declares them).
import { closeSync, fchmodSync, fstatSync, openSync, writeFileSync } from 'node:fs';
import { createInterface } from 'node:readline/promises';
import { z } from 'zod';
import type { Env } from '../config.ts';
import { auditRecord } from '../privacy/audit.ts';
import { erasurePhone, ErasureInputError, personErase, type ErasureCounts, type ErasureOutcome } from '../privacy/erasure.ts';
import { documentsNamingText } from '../privacy/documents-about.ts';
import { personExport } from '../privacy/export.ts';
import { suppressionLift } from '../privacy/suppression.ts';
import { dataDirHeld } from '../db/data-dir-lock.ts';
import { cliActor, refuseMissingEmbedded, UsageError, withRuntime, type CommandInput } from './command.ts';
import { runningServerRequest } from './local-server.ts';


function phoneOf(positionals: string[], command: string): string {
  const [raw] = positionals;
  if (!raw) throw new UsageError(`${command} needs a phone number, e.g. aiq ${command} +31612345678`);
  try {
    return erasurePhone(raw);
  } catch (err) {
    if (err instanceof ErasureInputError) throw new UsageError(err.message);
    throw err;
  }
}

/** The argument as an email address (`aiq forget --lift`), or null when it holds no @. */
function emailOf(raw: string | undefined): string | null {
  if (!raw?.includes('@')) return null;
  const email = raw.trim().toLowerCase();
  if (!z.email().safeParse(email).success) throw new UsageError(`"${raw}" is neither a phone number in international form (e.g. +31612345678) nor an email address`);
  return email;
}

export async function forget({ values, positionals }: CommandInput, config: Env): Promise<number> {
  // A lift takes an email address too: an import names it when a row's address matched an
  // erasure under another number, which lifting by the row's number does not find.
  const liftEmail = values.lift ? emailOf(positionals[0]) : null;
  const phone = liftEmail ?? phoneOf(positionals, 'forget');
  // Opened, a folder without a database (DATA_DIR not the server's: another working folder, its
  // .env not read) got an empty one, and the answer was "nothing is held for" the person.
  refuseMissingEmbedded(config, 'nothing erased');
  if (values.lift) return liftErasure(config, phone);
  if (!values.yes) {
    if (!process.stdin.isTTY) throw new UsageError('forget erases for good: pass --yes to confirm when not at a terminal');
    const prompt = createInterface({ input: process.stdin, output: process.stdout });
    try {
      const answer = await prompt.question(`Erase everything aiq holds about ${phone}? This cannot be undone. Type "yes": `);
      if (answer.trim().toLowerCase() !== 'yes') {
        console.log('nothing erased');
        return 1;
      }
    } finally {
      prompt.close();
    }
  }
  const outcome = !config.DATABASE_URL && dataDirHeld(config.DATA_DIR)
    ? await eraseThroughRunningServer(config, phone)
    : await withRuntime(config, (rt) => personErase(rt.db, phone, cliActor()));
  if (outcome.status === 'busy') {
    console.error(`aiq: nothing erased: ${outcome.reason}`);
    return 1;
  }
  const documents = documentsNamingText(outcome.documentsNamingThem);
  if (outcome.status === 'not_found') {
    console.error(`aiq: nothing is held for ${phone}: no contact, no person, no line of a stored upload with that number (already erased, or a typo?)`);
    if (documents) console.error(`aiq: ${documents}`);
    return 1;
  }
  const c = outcome.counts;
  console.log(
    `erased ${phone}: ${c.contacts} contact, ${c.people} person record, ${c.conversations} conversation(s), ${c.messages} message(s), ` +
      `${c.jobs} job(s); ${c.importsScrubbed} stored upload(s) and ${c.textsScrubbed} other text(s) scrubbed. The audit log records the erasure, not the data.`,
  );
  if (documents) console.log(documents);
  if (outcome.purgeFailed) console.error(`aiq: warning: ${outcome.purgeFailed}`);
  return 0;
}

/** `aiq forget --lift`: the erasure record goes, so the next sync or import may bring them back. `phone`: or an email address. */
async function liftErasure(config: Env, phone: string): Promise<number> {
  const lifted = await withRuntime(config, (rt) => rt.db.transaction((tx) => suppressionLift(tx, phone, cliActor())));
  if (!lifted) {
    console.error(`aiq: no erasure of ${phone} is recorded: nothing to lift`);
    return 1;
  }
  console.log(`lifted the erasure of ${phone}: the next people sync or import that lists them brings them back`);
  return 0;
}

/**
 * The erasure as the running aiq that holds the embedded database does it (its admin API, as
 * `aiq backup` goes): this command would reach the database through that aiq's socket, where
 * the files cannot be written anew without the deleted rows, so the folder and every backup
 * taken afterwards still held the person. The audit log records it as the API's.
 */
async function eraseThroughRunningServer(config: Env, phone: string): Promise<ErasureOutcome> {
  const { url, response } = await runningServerRequest(
    config,
    '/api/privacy/erase',
    { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ phone }) },
    'nothing erased: ',
  );
  const answer = (await response.json().catch(() => ({}))) as { counts?: ErasureCounts; documentsNamingThem?: Array<{ id: string; title: string }>; warning?: string; error?: string };
  const documentsNamingThem = answer.documentsNamingThem ?? [];
  if (response.ok && answer.counts) return { status: 'erased', counts: answer.counts, documentsNamingThem, ...(answer.warning ? { purgeFailed: answer.warning } : {}) };
  if (response.status === 404) return { status: 'not_found', documentsNamingThem };
  if (response.status === 409) return { status: 'busy', reason: (answer.error ?? '').replace(/^nothing erased: /, '') };
  throw new Error(`nothing erased: the running aiq at ${url} answered ${response.status}: ${(answer.error ?? '').slice(0, 200)}`);
}

export async function exportPerson({ values, positionals }: CommandInput, config: Env): Promise<number> {
  const phone = phoneOf(positionals, 'export');
  refuseMissingEmbedded(config, 'nothing exported');
  return withRuntime(config, async (rt) => {
    const document = await personExport(rt.db, phone);
    await auditRecord(rt.db, { actor: cliActor(), action: 'export', result: document ? 'ok' : 'not_found' });
    if (!document) {
      console.error(`aiq: nothing is held for ${phone}: no contact, no person, no line of a stored upload with that number`);
      return 1;
    }
    const json = `${JSON.stringify(document, null, 2)}\n`;
    if (typeof values.output === 'string') {
      // Owner-only before a byte is written: `mode` applies only to a file that open creates.
      // A regular file only: --output /dev/stdout (or /dev/null, as root) is not ours to change.
      const fd = openSync(values.output, 'w', 0o600);
      try {
        if (fstatSync(fd).isFile()) fchmodSync(fd, 0o600);
        writeFileSync(fd, json);
      } finally {
        closeSync(fd);
      }
      console.log(`wrote everything held about ${phone} to ${values.output}`);
    } else process.stdout.write(json);
    return 0;
  });
}

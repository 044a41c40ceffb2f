// The `people_sync` job: fetches the employee list from PEOPLE_SYNC_URL (a CSV, or a JSON
// array of objects) and runs it through the same import as an uploaded CSV, with its per-row
// errors and idempotence (an unchanged person is not written again). A source that is down
// retries with backoff; one that answers garbage fails with the reason. Either way nothing
// is imported from it, and the people from the last good sync stay as they are.
import { z } from 'zod';
import type { Env } from '../config.ts';
import type { Database } from '../db/types.ts';
import { PermanentJobError, type JobHandler } from '../queue/index.ts';
import { importPeopleExecute } from './import-people.ts';
import { importCreate, importFail, type ImportCounts, type ImportPruneOutcome, type ImportSkipped } from '../knowledge/csv-import.ts';
import { textDecode } from '../knowledge/text-encoding.ts';

export const PEOPLE_SYNC = 'people_sync';
const FETCH_TIMEOUT_MS = 30_000;

export interface PeopleSyncConfig {
  url: string;
  token?: string;
  maxBytes: number;
  /** The source is the complete list: people not in it are removed (never more than half at once). */
  prune?: boolean;
}

export function peopleSyncConfigOf(config: Pick<Env, 'PEOPLE_SYNC_URL' | 'PEOPLE_SYNC_TOKEN' | 'PEOPLE_SYNC_MAX_BYTES' | 'PEOPLE_SYNC_PRUNE'>): PeopleSyncConfig | undefined {
  return config.PEOPLE_SYNC_URL
    ? { url: config.PEOPLE_SYNC_URL, token: config.PEOPLE_SYNC_TOKEN, maxBytes: config.PEOPLE_SYNC_MAX_BYTES, prune: config.PEOPLE_SYNC_PRUNE }
    : undefined;
}

/** A JSON array of flat objects as CSV: the header is every key, in order of first use. */
export function jsonPeopleToCsv(records: unknown): string {
  if (!Array.isArray(records) || !records.every((r) => r !== null && typeof r === 'object' && !Array.isArray(r))) {
    throw new PermanentJobError('people sync: the source answered JSON that is not an array of objects');
  }
  const keys = [...new Set(records.flatMap((r) => Object.keys(r as object)))];
  const cell = (value: unknown) => {
    const text = value === null || value === undefined ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
    return /[",\n\r]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
  };
  return [keys.map(cell).join(','), ...records.map((r) => keys.map((k) => cell((r as Record<string, unknown>)[k])).join(','))].join('\n');
}

async function fetchSource(config: PeopleSyncConfig, signal: AbortSignal): Promise<{ text: string; json: boolean }> {
  const where = new URL(config.url).host;
  let response: Response;
  try {
    response = await fetch(config.url, {
      headers: { accept: 'text/csv, application/json', ...(config.token ? { authorization: `Bearer ${config.token}` } : {}) },
      // A redirect could lead anywhere: the configured address is the only one we ask.
      redirect: 'error',
      signal: AbortSignal.any([signal, AbortSignal.timeout(FETCH_TIMEOUT_MS)]),
    });
  } catch (err) {
    throw new Error(`people sync: ${where} did not answer (${(err as Error).message})`);
  }
  if (response.status >= 500 || response.status === 429) throw new Error(`people sync: ${where} answered ${response.status}; trying again later`);
  if (!response.ok) throw new PermanentJobError(`people sync: ${where} answered ${response.status} ${response.statusText}`);
  if (Number(response.headers.get('content-length') ?? 0) > config.maxBytes) throw new PermanentJobError(`people sync: the source is larger than ${config.maxBytes} bytes`);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of response.body ?? []) {
    size += chunk.length;
    if (size > config.maxBytes) throw new PermanentJobError(`people sync: the source is larger than ${config.maxBytes} bytes`);
    chunks.push(chunk);
  }
  // Read as an upload is (text-encoding.ts): HR systems and spreadsheets export
  // Windows-1252 or UTF-16 as often as UTF-8, whose decoder turned accented names into
  // U+FFFD and a UTF-16 list into NULs between letters. A charset the source names counts.
  const charset = /;\s*charset="?([\w.:-]+)/i.exec(response.headers.get('content-type') ?? '')?.[1];
  const text = textDecode(Buffer.concat(chunks), charset);
  return { text, json: /json/.test(response.headers.get('content-type') ?? '') || /^\s*[[{]/.test(text) };
}

export async function peopleSync(db: Database, config: PeopleSyncConfig, signal: AbortSignal): Promise<{ importId: string } & ImportCounts & ImportSkipped & Partial<ImportPruneOutcome>> {
  const source = await fetchSource(config, signal);
  let csv = source.text;
  if (source.json) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(source.text);
    } catch {
      throw new PermanentJobError('people sync: the source answered something that is neither a CSV nor valid JSON');
    }
    csv = jsonPeopleToCsv(parsed);
  }
  if (!csv.trim()) throw new PermanentJobError('people sync: the source answered an empty list; nothing changed');
  const importId = await importCreate(db, { filename: `sync from ${new URL(config.url).host}`, content: Buffer.from(csv, 'utf8'), prune: config.prune });
  try {
    // Unattended: a source that answers half a list must not remove the other half.
    const counts = await importPeopleExecute(db, importId, { signal, pruneAtMostHalf: true });
    return { importId, ...counts };
  } catch (err) {
    // This import is this attempt's own (a retry fetches afresh and makes another): ended
    // as failed, not left running, so that retention removes the staff list it holds.
    await importFail(db, importId, `the sync stopped: ${(err as Error).message}`).catch(() => {});
    throw err;
  }
}

export function peopleSyncHandler(deps: { db: Database; config: PeopleSyncConfig | undefined }): JobHandler<Record<string, never>> {
  return {
    type: PEOPLE_SYNC,
    schema: z.object({}).passthrough() as never,
    async run({ signal }) {
      if (!deps.config) throw new PermanentJobError('people sync: PEOPLE_SYNC_URL is not set');
      return peopleSync(deps.db, deps.config, signal);
    },
  };
}

// What the knowledge commands do, loaded only when one of them runs (src/cli/knowledge-commands.ts
// declares them): the app's knowledge modules are not loaded for `aiq --help` or `aiq stats`.
import { readFileSync, statSync, openSync, readSync, closeSync } from 'node:fs';
import { textDecode } from '../knowledge/text-encoding.ts';
import { auditRecord } from '../privacy/audit.ts';
import { documentRemove } from '../knowledge/documents.ts';
import { basename, extname, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Env } from '../config.ts';
import type { Database } from '../db/types.ts';
import { embeddingSpaceOf, type AiProvider } from '../ai/types.ts';
import { documentAdd, embedRecord } from '../jobs/embed-record.ts';
import { importPeopleExecute } from '../jobs/import-people.ts';
import { aboveHeaderNote, importCreate, importFail, importGet, type PersonField } from '../knowledge/csv-import.ts';
import { chunkRelevance, knowledgeRetrieve, retrievalSettingsOf } from '../ai/rag.ts';
import { chunkLocation, chunkSettingsOf, DocumentContentError } from '../knowledge/chunking.ts';
import { QUESTION_MAX_CHARS, type SearchMode } from '../knowledge/search.ts';
import { describeSpace, vectorMarkAllStale, vectorSpaceCheck, vectorSpaceSwitch, vectorStaleCount, vectorStaleList, vectorSwitchPlan } from '../knowledge/vectors.ts';
import { DEFAULT_BACKOFF, RetryLaterError, throttleDelaySeconds } from '../queue/index.ts';
import { cliActor, UsageError, withRuntime, type CommandInput } from './command.ts';
import { FIELDS } from './knowledge-commands.ts';

const SEARCH_MODES: SearchMode[] = ['hybrid', 'vector', 'lexical'];

/** Row errors printed in the summary; the rest stay on the import record. */
const SHOWN_ERRORS = 20;
/** Throttled (429) calls during reembed wait and retry this many times per record. */
const THROTTLE_RETRIES = 5;


/** A one-line progress display on stderr when it is a terminal; silent otherwise. */
class Progress {
  private readonly started = performance.now();
  private lastDraw = 0;
  private readonly tty = process.stderr.isTTY === true;

  constructor(private readonly unit: string) {}

  update(done: number, total?: number): void {
    if (!this.tty) return;
    const now = performance.now();
    if (now - this.lastDraw < 100) return;
    this.lastDraw = now;
    const seconds = (now - this.started) / 1000;
    const rate = seconds > 0 ? done / seconds : 0;
    let line = `${done.toLocaleString('en')} ${this.unit}`;
    if (total && total > 0) {
      const eta = rate > 0 ? Math.max(0, (total - done) / rate) : 0;
      line += ` of ~${Math.max(total, done).toLocaleString('en')} (${Math.min(100, Math.round((done / total) * 100))}%), ETA ${formatSeconds(eta)}`;
    }
    line += `, ${Math.round(rate).toLocaleString('en')}/s`;
    process.stderr.write(`\r\x1b[2K${line}`);
  }

  done(): number {
    if (this.tty) process.stderr.write('\r\x1b[2K');
    return (performance.now() - this.started) / 1000;
  }
}

function formatSeconds(seconds: number): string {
  if (seconds < 60) return `${Math.round(seconds)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.round(seconds % 60)).padStart(2, '0')}s`;
}

/** Rows in a CSV, estimated from the size and the average line length of its first 64 KB. */
function estimateRows(path: string): number | undefined {
  const size = statSync(path).size;
  const fd = openSync(path, 'r');
  try {
    const head = Buffer.alloc(Math.min(size, 64 * 1024));
    readSync(fd, head, 0, head.length, 0);
    const lines = head.toString('utf8').split('\n').length - 1;
    return lines > 1 ? Math.round((size / head.length) * lines) - 1 : undefined;
  } finally {
    closeSync(fd);
  }
}

function headerMapOf(values: string[] | undefined): Record<string, PersonField> | undefined {
  if (!values || values.length === 0) return undefined;
  const map: Record<string, PersonField> = {};
  for (const entry of values) {
    const at = entry.lastIndexOf('=');
    const header = entry.slice(0, at).trim();
    const field = entry.slice(at + 1).trim() as PersonField;
    if (at <= 0 || !FIELDS.includes(field)) throw new UsageError(`--map wants "Header=field" with field one of ${FIELDS.join(', ')}; got "${entry}"`);
    map[header] = field;
  }
  return map;
}

/**
 * Says what `reembed --switch` drops and redoes, and asks on a terminal; elsewhere only
 * --yes goes ahead. `current`: the stored space is the configured one already.
 */
async function confirmSwitch(db: Database, ai: AiProvider, yes: boolean): Promise<'go' | 'current' | 'declined'> {
  const plan = await vectorSwitchPlan(db);
  const target = embeddingSpaceOf(ai);
  if (plan.stored && describeSpace(plan.stored) === describeSpace({ ...target, storage: plan.stored.storage })) {
    console.log(`the stored embedding space is ${describeSpace(plan.stored)} already: nothing to switch; embedding what is stale`);
    return 'current';
  }
  console.log(
    `This drops ${plan.embedded} stored embedding${plan.embedded === 1 ? '' : 's'}` +
      `${plan.stored ? ` (${describeSpace(plan.stored)})` : ''} and re-embeds all ${plan.records} record${plan.records === 1 ? '' : 's'} ` +
      `(documents) with ${describeSpace(target)}. Retrieval answers from fewer documents until it is done.`,
  );
  if (yes) return 'go';
  if (!process.stdin.isTTY) throw new UsageError('reembed --switch drops every embedding: pass --yes to confirm when not at a terminal');
  const prompt = createInterface({ input: process.stdin, output: process.stdout });
  try {
    const answer = await prompt.question('Type "yes" to switch: ');
    if (answer.trim().toLowerCase() === 'yes') return 'go';
  } finally {
    prompt.close();
  }
  console.log('not switched: nothing was changed');
  return 'declined';
}

async function reembedAll(db: Database, ai: AiProvider, all: boolean): Promise<number> {
  if (all) await vectorMarkAllStale(db);
  const total = await vectorStaleCount(db);
  const progress = new Progress('records embedded');
  const tally = { embedded: 0, unchanged: 0, missing: 0, superseded: 0, skipped: 0, failed: 0 };
  const failures: string[] = [];
  let cursor: string | undefined;
  let done = 0;
  for (;;) {
    const page = await vectorStaleList(db, 100, cursor);
    if (page.length === 0) break;
    cursor = page[page.length - 1]!.cursor;
    for (const record of page) {
      for (let attempt = 0; ; attempt++) {
        try {
          const outcome = await embedRecord(db, ai, record, { purpose: 'reembed' });
          tally[outcome.status] += 1;
          break;
        } catch (err) {
          if (err instanceof RetryLaterError && attempt < THROTTLE_RETRIES) {
            // The provider's retry-after, else the queue's backoff for a throttle (5, 10, 20 … s):
            // a 429 without one asks no delay of its own (aiErrorMap).
            await new Promise((r) => setTimeout(r, throttleDelaySeconds(attempt, DEFAULT_BACKOFF, err.delayMs) * 1000));
            continue;
          }
          tally.failed += 1;
          failures.push(`${record.table} ${record.id}: ${(err as Error).message}`);
          break;
        }
      }
      done += 1;
      progress.update(done, total);
    }
  }
  const seconds = progress.done();
  console.log(
    `reembed with ${ai.name} ${ai.embeddingModel} (${ai.dimensions} dimensions): ${tally.embedded} embedded, ` +
      `${tally.unchanged} already current, ${tally.superseded} changed meanwhile (queued again), ${tally.missing} gone, ${tally.failed} failed, in ${seconds.toFixed(1)} s`,
  );
  for (const line of failures.slice(0, SHOWN_ERRORS)) console.log(`  failed: ${line}`);
  return tally.failed > 0 ? 1 : 0;
}

export async function addDocument({ values, positionals }: CommandInput, config: Env): Promise<number | void> {
  const [file] = positionals;
  if (!file) throw new UsageError('add-document needs a file, e.g. aiq add-document handbook.md --title "Employee handbook"');
  let body: string;
  try {
    // Latin-1 (Windows-1252) and UTF-16 files too, not only UTF-8 (text-encoding.ts).
    body = textDecode(readFileSync(file));
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const title = typeof values.title === 'string' && values.title.trim() ? values.title.trim() : basename(file, extname(file));
  let saved;
  try {
    const tags = values.tag as string[] | undefined;
    saved = await withRuntime(config, (rt) => documentAdd(rt.db, { title, body, source: basename(file), tags }, chunkSettingsOf(config)));
  } catch (err) {
    // Empty, binary, or headings only: say so about the file, no stack trace.
    if (err instanceof DocumentContentError) throw new UsageError(`${file}: ${err.message}`);
    throw err;
  }
  const what =
    saved.status !== 'unchanged'
      ? `${saved.status}: ${saved.chunks} chunks, embedding queued for the worker`
      : saved.embedQueued
        ? 'unchanged (same content), but not embedded and nothing queued for it: embedding queued for the worker'
        : 'unchanged (same content): nothing to do';
  console.log(`"${title}" ${what} (${saved.id})`);
}

export async function removeDocument({ positionals }: CommandInput, config: Env): Promise<number> {
  const title = positionals.join(' ').trim();
  if (!title) throw new UsageError('remove-document needs the title, e.g. aiq remove-document "Employee handbook 2025"');
  const removed = await withRuntime(config, async (rt) => {
    const gone = await documentRemove(rt.db, { title });
    // Irreversible: recorded as the dashboard's and the API's removals are.
    await auditRecord(rt.db, { actor: cliActor(), action: 'remove document', target: gone?.id ?? null, result: gone ? 'ok' : 'not_found' });
    return gone;
  });
  if (!removed) {
    console.error(`aiq: no document is titled "${title}" (titles are exact; GET /api/documents or the dashboard lists them)`);
    return 1;
  }
  console.log(`"${removed.title}" removed, with its chunks (${removed.id})`);
  return 0;
}

export async function importPeople({ values, positionals }: CommandInput, config: Env): Promise<number | void> {
  const [file] = positionals;
  if (!file) throw new UsageError('import-people needs a CSV file, e.g. aiq import-people people.csv');
  const path = resolve(file);
  let isFolder;
  try {
    isFolder = statSync(path).isDirectory();
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  // A folder is a mistake; a pipe (/dev/stdin, <(curl …)) is read like a file.
  if (isFolder) throw new UsageError(`${file} is a folder: give the CSV file itself`);
  const headerMap = headerMapOf(values.map as string[] | undefined);
  const estimate = estimateRows(path);
  return withRuntime(config, async (rt) => {
    const importId = await importCreate(rt.db, { filename: basename(file), path, prune: values.prune === true });
    const progress = new Progress('rows');
    try {
      await importPeopleExecute(rt.db, importId, { headerMap, onProgress: (c) => progress.update(c.rowsRead, estimate) });
    } catch (err) {
      // Nothing runs it again here (no job, no retry): an import left `running` would hold
      // the file's rows as "under way" forever. A file error was recorded already.
      await importFail(rt.db, importId, (err as Error).message);
      throw err;
    } finally {
      progress.done();
    }
    const record = (await importGet(rt.db, importId))!;
    console.log(
      `imported ${record.rowsRead} rows from ${record.filename}: ${record.inserted} new, ${record.updated} updated, ` +
        `${record.unchanged} unchanged, ${record.rejected} rejected${record.erasedSkipped ? `, ${record.erasedSkipped} skipped as erased` : ''} (import ${importId})`,
    );
    if (record.headerLine > 1) console.log(`  ${aboveHeaderNote(record.headerLine)}`);
    for (const error of record.rowErrors.slice(0, SHOWN_ERRORS)) console.log(`  line ${error.line}: ${error.reason}`);
    if (record.rejected + record.erasedSkipped > SHOWN_ERRORS) console.log(`  … and ${record.rejected + record.erasedSkipped - SHOWN_ERRORS} more rows not imported`);
    if (record.pruneNote) {
      console.error(`--prune: ${record.pruneNote}`);
      return 1;
    }
    if (record.prune) console.log(`removed ${record.removed} ${record.removed === 1 ? 'person' : 'people'} not in the file`);
    return 0;
  });
}

export async function reembed({ values }: CommandInput, config: Env): Promise<number | void> {
  if (values.yes && !values.switch) throw new UsageError('--yes only confirms --switch');
  return withRuntime(config, async (rt) => {
    if (values.switch) {
      const confirmed = await confirmSwitch(rt.db, rt.ai, values.yes === true);
      if (confirmed !== 'go') return confirmed === 'current' ? reembedAll(rt.db, rt.ai, false) : 1;
      const { previous } = await vectorSpaceSwitch(rt.db, embeddingSpaceOf(rt.ai));
      console.log(`switched the embedding space${previous ? ` from ${describeSpace(previous)}` : ''} to ${describeSpace(embeddingSpaceOf(rt.ai))}`);
    } else {
      await vectorSpaceCheck(rt.db, embeddingSpaceOf(rt.ai));
    }
    return reembedAll(rt.db, rt.ai, values.all === true);
  });
}

export async function search({ values, positionals }: CommandInput, config: Env): Promise<number | void> {
  const question = positionals.join(' ').trim();
  if (!question) throw new UsageError('search needs a question, e.g. aiq search "how many holidays do I have?"');
  const k = values.k === undefined ? config.RAG_TOP_K : Number(values.k);
  if (!Number.isInteger(k) || k < 1 || k > 50) throw new UsageError(`--k must be a whole number from 1 to 50 (got "${String(values.k)}")`);
  const mode = (values.mode ?? config.RAG_MODE) as string;
  if (!SEARCH_MODES.includes(mode as SearchMode)) throw new UsageError(`--mode must be one of ${SEARCH_MODES.join(', ')} (got "${mode}")`);
  const found = await withRuntime(config, (rt) => knowledgeRetrieve(rt.db, rt.ai, question, { ...retrievalSettingsOf(config, rt.ai), topK: k, mode: mode as SearchMode }));
  if (values.json) {
    console.log(JSON.stringify({ question, mode, relevance: found.relevance, noAnswer: found.noAnswer, truncated: found.truncated, expansions: found.expansions, hits: found.hits.map((h) => ({ ...h, relevance: chunkRelevance(h) })) }, null, 2));
    return;
  }
  if (found.expansions.length > 0) console.log(`also searched for (synonyms): ${found.expansions.join(', ')}`);
  if (found.truncated) console.log(`(the question is longer than ${QUESTION_MAX_CHARS} characters: searched by its start)`);
  if (found.hits.length === 0) console.log('nothing found: the knowledge base has no chunk that matches (add documents with `aiq add-document`)');
  found.hits.forEach((h, i) => {
    const ranks = `vector #${h.vectorRank ?? '–'}, lexical #${h.lexicalRank ?? '–'}`;
    const similarity =
      h.similarity === null ? 'not embedded yet' : `similarity ${h.similarity.toFixed(3)}${h.similarityUnstored ? ' (not embedded yet: computed for this question)' : ''}`;
    console.log(`${i + 1}. ${chunkLocation(h.title, h.headingPath)}`);
    console.log(`   score ${h.score.toFixed(4)} (${ranks}) · relevance ${chunkRelevance(h).toFixed(2)} · ${similarity}`);
    console.log(`   ${h.content.replace(/\s+/g, ' ').slice(0, 160)}${h.content.length > 160 ? '…' : ''}`);
  });
  if (found.hits.length > 0 && found.noAnswer) console.log(`best relevance ${found.relevance.toFixed(2)} is below the threshold ${found.threshold.toFixed(2)}: a reply would say it does not know`);
}

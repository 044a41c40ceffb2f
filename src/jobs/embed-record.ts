// The `embed_record` job: (re)embeds one document's chunks with the configured provider.
// Idempotent: a record whose content hash equals the hash it was last embedded at is
// skipped, and a record that changed while it was being embedded is left to the newer job.
import { z } from 'zod';
import type { Database, Queryable } from '../db/types.ts';
import type { AiProvider, CallOptions, TokenUsage } from '../ai/types.ts';
import { NO_USAGE, embeddingSpaceOf, usageAdd } from '../ai/types.ts';
import { aiWithUsageRecorded } from '../ai/usage.ts';
import { chunkEmbeddingText } from '../knowledge/chunking.ts';
import type { ChunkSettings } from '../knowledge/chunking.ts';
import { documentGetForEmbedding, documentRechunk, documentSave, documentsChunkedOtherwise, type DocumentSaveInput, type DocumentSaveOutcome } from '../knowledge/documents.ts';
import { documentEmbeddingSet, vectorSpaceCheck } from '../knowledge/vectors.ts';
import { jobEnqueueMany, type JobHandler } from '../queue/index.ts';

export const EMBED_RECORD = 'embed_record';

// 'people' only in jobs queued before people stopped being embedded (0011_retrieval.sql).
const payloadSchema = z.object({ table: z.enum(['people', 'documents']), id: z.uuid() });
export type EmbedRecordPayload = z.infer<typeof payloadSchema>;

/** Texts per embeddings request: providers cap the batch (OpenAI at 2048 inputs). */
const EMBED_BATCH = 64;

export interface EmbedOutcome {
  table: 'people' | 'documents';
  id: string;
  /**
   * embedded; unchanged (hash already embedded); missing (deleted); superseded (changed
   * meanwhile); skipped (a person, from a job queued before people stopped being embedded).
   */
  status: 'embedded' | 'unchanged' | 'missing' | 'superseded' | 'skipped';
  model?: string;
  usage: TokenUsage;
}

/** Enqueues one embed_record job per id, in the caller's transaction. */
export function embedRecordEnqueue(tx: Queryable, ids: string[]): Promise<string[]> {
  return jobEnqueueMany(
    tx,
    ids.map((id) => ({ type: EMBED_RECORD, payload: { table: 'documents', id } })),
  );
}

// Documents whose embedding is missing or stale and that no embed job is waiting for: after
// a switch of the offline embeddings, or a job that failed for good (a quota, a long outage).
const DOCUMENTS_UNQUEUED_STALE_SQL = `
  select d.id from documents d
  where d.embedded_hash is distinct from d.content_hash
    and not exists (
      select 1 from ai_jobs j
      where j.type = '${EMBED_RECORD}' and j.status in ('pending', 'processing') and j.payload->>'id' = d.id::text
    )`;

/**
 * Saves a document and enqueues its embedding, in one transaction: when it is new or
 * changed, and when it is unchanged but not embedded with nothing queued for it (its job
 * failed for good or was cancelled). Adding it again is what an admin does about a document
 * shown "waiting for embedding"; it queued nothing, and the document waited for good (until
 * a worker's next start). `embedQueued` says whether a job was queued.
 */
export function documentAdd(db: Database, input: DocumentSaveInput, settings: ChunkSettings): Promise<DocumentSaveOutcome & { embedQueued: boolean }> {
  return db.transaction(async (tx) => {
    const outcome = await documentSave(tx, input, settings);
    const embed = outcome.status !== 'unchanged' || (await tx.query(`${DOCUMENTS_UNQUEUED_STALE_SQL} and d.id = $1`, [outcome.id])).rowCount > 0;
    if (embed) await embedRecordEnqueue(tx, [outcome.id]);
    return { ...outcome, embedQueued: embed };
  });
}

/**
 * Cuts again every document cut with another rule or other settings (after an upgrade, or
 * a change of CHUNK_*), each in its own transaction with its embedding job. Run by workers
 * at start; racing workers skip each other's documents. Returns how many it cut.
 */
export async function documentsRechunkStale(db: Database, settings: ChunkSettings): Promise<number> {
  let done = 0;
  for (;;) {
    const ids = await documentsChunkedOtherwise(db, settings);
    let cut = 0;
    for (const id of ids) {
      const changed = await db.transaction(async (tx) => {
        if (!(await documentRechunk(tx, id, settings))) return false;
        await embedRecordEnqueue(tx, [id]);
        return true;
      });
      if (changed) cut += 1;
    }
    done += cut;
    // A page where nothing could be cut is another worker's (locked): leave it to that one.
    if (ids.length === 0 || cut === 0) return done;
  }
}

/** Queues the embedding of every stale document nothing is queued for; returns how many. */
export async function documentsEmbedStale(db: Database): Promise<number> {
  return db.transaction(async (tx) => {
    const stale = await tx.query<{ id: string }>(DOCUMENTS_UNQUEUED_STALE_SQL);
    if (stale.rows.length > 0) await embedRecordEnqueue(tx, stale.rows.map((r) => r.id));
    return stale.rows.length;
  });
}

/** Embeds one record now (the job, and `aiq reembed`). */
export async function embedRecord(
  db: Database,
  provider: AiProvider,
  payload: EmbedRecordPayload,
  options: CallOptions & { purpose?: 'embed_record' | 'reembed' } = {},
): Promise<EmbedOutcome> {
  const { table, id } = payload;
  if (table === 'people') return { table, id, status: 'skipped', usage: NO_USAGE };
  const space = embeddingSpaceOf(provider);
  await vectorSpaceCheck(db, space);
  const ai = aiWithUsageRecorded(provider, db, options.purpose ?? 'embed_record', id);
  const doc = await documentGetForEmbedding(db, id);
  if (!doc) return { table, id, status: 'missing', usage: NO_USAGE };
  if (doc.embeddedHash === doc.contentHash) return { table, id, status: 'unchanged', usage: NO_USAGE };
  // Chunks are new on every change of content or cut, and a switch drops every vector: some
  // with a vector and some without are an earlier attempt's progress, stored batch by batch
  // (a 429 or a time-out half-way through a long handbook), and only the rest is embedded.
  // Begun again from the start, an attempt per quota window redid the same first batches,
  // paid for them again, and never reached the end. All with a vector (`aiq reembed --all`)
  // are all redone.
  const rest = doc.chunks.filter((c) => !c.embedded);
  const todo = rest.length > 0 ? rest : doc.chunks;
  const chunkIds = doc.chunks.map((c) => c.id);
  let usage = NO_USAGE;
  let model = ai.embeddingModel;
  try {
    for (let i = 0; i === 0 || i < todo.length; i += EMBED_BATCH) {
      const slice = todo.slice(i, i + EMBED_BATCH);
      const result = slice.length > 0 ? await ai.embed(slice.map((c) => chunkEmbeddingText(doc.title, c.headingPath, c.content)), options) : null;
      const vectors = slice.map((chunk, j) => ({ id: chunk.id, vector: result!.vectors[j]! }));
      if (result) {
        usage = usageAdd(usage, result.usage);
        model = result.model;
      }
      const last = i + EMBED_BATCH >= todo.length;
      const stored = await documentEmbeddingSet(db, id, doc.contentHash, vectors, space, last ? { chunkIds } : null);
      if (!stored) return { table, id, status: 'superseded', model, usage };
    }
  } finally {
    // Every batch's tokens in one statement, also when a later batch failed.
    await ai.flush();
  }
  return { table, id, status: 'embedded', model, usage };
}

/** The embed_record handler for the worker. */
export function embedRecordHandler(deps: { db: Database; ai: AiProvider }): JobHandler<EmbedRecordPayload> {
  return {
    type: EMBED_RECORD,
    schema: payloadSchema,
    run: ({ payload, signal }) => embedRecord(deps.db, deps.ai, payload, { signal }),
  };
}

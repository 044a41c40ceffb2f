// The `embed_record` job: (re)embeds one person or document with the configured provider.
// Idempotent: a record whose content hash equals the hash it was last embedded at is
// skipped, and a record that changed while it was being embedded is left to the newer job.
import { z } from 'zod';
import type { Database, Queryable } from '../db/types.ts';
import type { AiProvider, CallOptions, TokenUsage } from '../ai/types.ts';
import { NO_USAGE, embeddingSpaceOf, usageAdd } from '../ai/types.ts';
import { aiWithUsageRecorded } from '../ai/usage.ts';
import { chunkEmbeddingText, documentGetForEmbedding } from '../knowledge/documents.ts';
import { personGet, personText } from '../knowledge/people.ts';
import { documentEmbeddingSet, personEmbeddingSet, vectorSpaceCheck } from '../knowledge/vectors.ts';
import { jobEnqueueMany, type JobHandler } from '../queue/index.ts';

export const EMBED_RECORD = 'embed_record';

const payloadSchema = z.object({ table: z.enum(['people', 'documents']), id: z.uuid() });
export type EmbedRecordPayload = z.infer<typeof payloadSchema>;

/** Texts per embeddings request: providers cap the batch (OpenAI at 2048 inputs). */
const EMBED_BATCH = 64;

export interface EmbedOutcome {
  table: 'people' | 'documents';
  id: string;
  /** embedded; unchanged (hash already embedded); missing (deleted); superseded (changed meanwhile). */
  status: 'embedded' | 'unchanged' | 'missing' | 'superseded';
  model?: string;
  usage: TokenUsage;
}

/** Enqueues one embed_record job per id, in the caller's transaction. */
export function embedRecordEnqueue(tx: Queryable, table: 'people' | 'documents', ids: string[]): Promise<string[]> {
  return jobEnqueueMany(
    tx,
    ids.map((id) => ({ type: EMBED_RECORD, payload: { table, id } })),
  );
}

/** Embeds one record now (the job, and `aiq reembed`). */
export async function embedRecord(
  db: Database,
  provider: AiProvider,
  payload: EmbedRecordPayload,
  options: CallOptions & { purpose?: 'embed_record' | 'reembed' } = {},
): Promise<EmbedOutcome> {
  const { table, id } = payload;
  await vectorSpaceCheck(db, embeddingSpaceOf(provider));
  const ai = aiWithUsageRecorded(provider, db, options.purpose ?? 'embed_record', id);
  if (table === 'people') {
    const person = await personGet(db, id);
    if (!person) return { table, id, status: 'missing', usage: NO_USAGE };
    if (person.embeddedHash === person.contentHash) return { table, id, status: 'unchanged', usage: NO_USAGE };
    const result = await ai.embed([personText(person)], options);
    const stored = await personEmbeddingSet(db, id, result.vectors[0]!, person.contentHash);
    return { table, id, status: stored ? 'embedded' : 'superseded', model: result.model, usage: result.usage };
  }
  const doc = await documentGetForEmbedding(db, id);
  if (!doc) return { table, id, status: 'missing', usage: NO_USAGE };
  if (doc.embeddedHash === doc.contentHash) return { table, id, status: 'unchanged', usage: NO_USAGE };
  let usage = NO_USAGE;
  let model = ai.embeddingModel;
  const vectors: Array<{ id: string; vector: number[] }> = [];
  for (let i = 0; i < doc.chunks.length; i += EMBED_BATCH) {
    const slice = doc.chunks.slice(i, i + EMBED_BATCH);
    const result = await ai.embed(slice.map((c) => chunkEmbeddingText(doc.title, c.content)), options);
    slice.forEach((chunk, j) => vectors.push({ id: chunk.id, vector: result.vectors[j]! }));
    usage = usageAdd(usage, result.usage);
    model = result.model;
  }
  const stored = await documentEmbeddingSet(db, id, doc.contentHash, vectors);
  return { table, id, status: stored ? 'embedded' : 'superseded', model, usage };
}

/** The embed_record handler for the worker. */
export function embedRecordHandler(deps: { db: Database; ai: AiProvider }): JobHandler<EmbedRecordPayload> {
  return {
    type: EMBED_RECORD,
    schema: payloadSchema,
    run: ({ payload, signal }) => embedRecord(deps.db, deps.ai, payload, { signal }),
  };
}

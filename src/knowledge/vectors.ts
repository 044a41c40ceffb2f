// Embedding storage: pgvector (`vector(N)`, HNSW, `<=>`) where the extension exists, else
// `real[]` with the `<=>` operator from 0003_knowledge.sql. Builds the columns once for a
// fresh database, refuses to mix vectors of another provider/model/dimension, rebuilds only
// when asked (`aiq reembed --switch`), and runs the nearest-neighbour queries. Every query
// text is the same on both storages: `aiq_vector()` converts a real[] parameter to whatever
// the column holds. Knows nothing of providers or jobs.
import type { Database, Queryable } from '../db/types.ts';

export type VectorStorage = 'pgvector' | 'real[]';

/** What produced the vectors; vectors of different spaces must never be compared. */
export interface VectorSpace {
  provider: string;
  model: string;
  dimensions: number;
}

export type StoredVectorSpace = VectorSpace & { storage: VectorStorage };

/** The stored space against the configured one, as a process finds it at start. */
export type VectorSpaceState =
  | { status: 'ready'; space: StoredVectorSpace; created: boolean }
  | { status: 'mismatch'; stored: StoredVectorSpace; configured: VectorSpace; reason: string };

/** pgvector's HNSW index takes at most 2000 dimensions; beyond that queries scan. */
const HNSW_MAX_DIMENSIONS = 2000;
// Any constant will do; this one is ours alone ('aiq:vectors').
const VECTOR_LOCK_KEY = 727_003;

/** Retrieval or embedding refused: the stored embeddings were made in another space. */
export class VectorSpaceMismatchError extends Error {
  override name = 'VectorSpaceMismatchError';
}

export function describeSpace(space: VectorSpace & { storage?: VectorStorage }): string {
  return `${space.provider}/${space.model}/${space.dimensions}${space.storage ? ` (${space.storage})` : ''}`;
}

function mismatchReason(stored: StoredVectorSpace, configured: VectorSpace): string {
  return (
    `embedding space mismatch: the stored embeddings are ${describeSpace(stored)}, this process is configured for ` +
    `${describeSpace(configured)}. Retrieval and embedding are paused; fix the AI settings, or switch the knowledge base ` +
    'to the new space with `aiq reembed --switch` (drops and rebuilds every embedding).'
  );
}

function sameSpace(stored: StoredVectorSpace, configured: VectorSpace): boolean {
  return stored.provider === configured.provider && stored.model === configured.model && stored.dimensions === configured.dimensions;
}

function checkDimensions(space: VectorSpace): void {
  if (!Number.isInteger(space.dimensions) || space.dimensions < 1 || space.dimensions > 16_000) {
    throw new Error(`embedding dimension must be a whole number from 1 to 16000, got ${space.dimensions}`);
  }
}

/**
 * What every process does at start: compares the stored space with the configured one and
 * never changes existing embeddings. Only a database that has no space yet (nothing
 * embedded, no columns) gets its columns built here — there is nothing to lose — under an
 * advisory lock, so processes starting together build them once.
 */
export async function vectorSpaceOpen(db: Database, configured: VectorSpace): Promise<VectorSpaceState> {
  checkDimensions(configured);
  const stored = await vectorSettingsGet(db);
  if (stored) return stateOf(stored, configured);
  const storage = await vectorStorageDetect(db);
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [VECTOR_LOCK_KEY]);
    const raced = await vectorSettingsGet(tx);
    if (raced) return stateOf(raced, configured);
    await vectorColumnsBuild(tx, storage, configured);
    return { status: 'ready' as const, space: { storage, ...configured }, created: true };
  });
}

function stateOf(stored: StoredVectorSpace, configured: VectorSpace): VectorSpaceState {
  if (sameSpace(stored, configured)) return { status: 'ready', space: stored, created: false };
  return { status: 'mismatch', stored, configured, reason: mismatchReason(stored, configured) };
}

/**
 * Throws VectorSpaceMismatchError unless the stored space is `configured`. Read on every use
 * (one primary-key row), so a process notices `aiq reembed --switch` run elsewhere.
 */
export async function vectorSpaceCheck(db: Queryable, configured: VectorSpace): Promise<void> {
  const stored = await vectorSettingsGet(db);
  if (!stored) throw new VectorSpaceMismatchError('no embedding space yet: start aiq once (`aiq start`, `serve` or `worker`) to create it');
  if (!sameSpace(stored, configured)) throw new VectorSpaceMismatchError(mismatchReason(stored, configured));
}

/**
 * Takes `configured` as the space when the stored one holds no embedding at all: there is
 * nothing to drop, so nothing for `aiq reembed --switch` to ask about. For the sole process
 * on the embedded database only (main.ts): a first `npm start` records the offline space,
 * and setting OPENAI_API_KEY afterwards paused every reply on an empty knowledge base. On a
 * shared server a process of another configuration (a `serve` tier without AI credentials)
 * must not take the space from the workers, so there a mismatch stays a mismatch.
 */
export async function vectorSpaceAdoptWhenEmpty(db: Database, configured: VectorSpace): Promise<{ adopted: boolean; previous: StoredVectorSpace | null }> {
  checkDimensions(configured);
  const storage = await vectorStorageDetect(db);
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [VECTOR_LOCK_KEY]);
    const previous = await vectorSettingsGet(tx);
    if (previous && sameSpace(previous, configured)) return { adopted: false, previous };
    if (await vectorEmbeddingsStored(tx)) return { adopted: false, previous };
    await vectorColumnsBuild(tx, storage, configured);
    return { adopted: true, previous };
  });
}

/** Whether any chunk holds an embedding (one made by an attempt cut short counts too). */
export async function vectorEmbeddingsStored(db: Queryable): Promise<boolean> {
  return (await db.query<{ any: boolean }>('select exists (select 1 from document_chunks where embedding is not null) as any')).rows[0]!.any;
}

/** What `aiq reembed --switch` will drop and redo, for its confirmation prompt. */
export async function vectorSwitchPlan(db: Queryable): Promise<{ stored: StoredVectorSpace | null; embedded: number; records: number }> {
  const counts = await db.query<{ embedded: number; records: number }>(
    `select (select count(*) from documents where embedded_hash is not null)::int as embedded,
            (select count(*) from documents)::int as records`,
  );
  return { stored: await vectorSettingsGet(db), ...counts.rows[0]! };
}

/**
 * The explicit switch (`aiq reembed --switch`, confirmed by the operator): drops every
 * embedding, rebuilds the columns for `space` and marks every record stale. Destroys
 * derived data only; the records themselves stay. A no-op when the space is current.
 */
export async function vectorSpaceSwitch(db: Database, space: VectorSpace): Promise<{ switched: boolean; previous: StoredVectorSpace | null }> {
  checkDimensions(space);
  const storage = await vectorStorageDetect(db);
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [VECTOR_LOCK_KEY]);
    const previous = await vectorSettingsGet(tx);
    if (previous && previous.storage === storage && sameSpace(previous, space)) return { switched: false, previous };
    await vectorColumnsBuild(tx, storage, space);
    await tx.query('update documents set embedded_hash = null, embedded_at = null where embedded_hash is not null');
    return { switched: true, previous };
  });
}

async function vectorColumnsBuild(tx: Queryable, storage: VectorStorage, space: VectorSpace): Promise<void> {
  await tx.exec(columnsDdl(storage, space.dimensions));
  await tx.query(
    `insert into knowledge_vector_settings (id, storage, provider, model, dimensions)
     values (1, $1, $2, $3, $4)
     on conflict (id) do update
     set storage = excluded.storage, provider = excluded.provider, model = excluded.model,
         dimensions = excluded.dimensions, updated_at = now()`,
    [storage, space.provider, space.model, space.dimensions],
  );
}

/**
 * pgvector when the server offers it and we may install it, else real[]. Detected through
 * pg_available_extensions, so a server without the package never sees a failing CREATE.
 */
export async function vectorStorageDetect(db: Database): Promise<VectorStorage> {
  const available = await db.query<{ installed: boolean }>(
    `select installed_version is not null as installed from pg_available_extensions where name = 'vector'`,
  );
  const row = available.rows[0];
  if (!row) return 'real[]';
  if (row.installed) return 'pgvector';
  try {
    await db.exec('create extension if not exists vector');
    return 'pgvector';
  } catch {
    // Offered but not ours to install (a managed server without the privilege): fall back.
    return 'real[]';
  }
}

/** What the embedding columns were last built for, or null before the first start. */
export async function vectorSettingsGet(db: Queryable): Promise<StoredVectorSpace | null> {
  const result = await db.query<{ storage: VectorStorage; provider: string; model: string; dimensions: number }>(
    'select storage, provider, model, dimensions from knowledge_vector_settings where id = 1',
  );
  return result.rows[0] ?? null;
}

/**
 * The DDL for one storage and size. DDL takes no parameters, so the dimension is written
 * into the text; it is a validated integer, never user text.
 */
function columnsDdl(storage: VectorStorage, dimensions: number): string {
  const n = Math.trunc(dimensions);
  const type = storage === 'pgvector' ? `vector(${n})` : 'real[]';
  // real[] has no typmod: a check keeps every stored vector the configured length.
  const check = storage === 'pgvector' ? '' : ` check (array_length(embedding, 1) = ${n})`;
  const convert = storage === 'pgvector' ? `v::vector(${n})` : 'v';
  const indexes =
    storage === 'pgvector' && n <= HNSW_MAX_DIMENSIONS
      ? 'create index document_chunks_embedding_idx on document_chunks using hnsw (embedding vector_cosine_ops);'
      : '';
  return `
    alter table document_chunks drop column if exists embedding;
    alter table document_chunks add column embedding ${type}${check};
    ${indexes}
    create or replace function aiq_vector(v real[]) returns ${type}
      language sql immutable strict parallel safe as $$ select ${convert} $$;`;
}

/**
 * Stores embeddings of a document's chunks, made in `space`, in one transaction; with
 * `complete` (the ids of every chunk the embedding read, all now embedded) it also marks the
 * document embedded at `hash`. False (nothing stored) when the document changed or was cut
 * again meanwhile, or the knowledge base was switched to another space since they were made.
 * Stored a batch at a time, so that an attempt cut short (a 429 half-way through a long
 * handbook) keeps what it paid for and the next one goes on from there.
 */
export async function documentEmbeddingSet(
  db: Database,
  documentId: string,
  hash: string,
  chunks: Array<{ id: string; vector: number[] }>,
  space: VectorSpace,
  complete: { chunkIds: string[] } | null = { chunkIds: chunks.map((c) => c.id) },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    // A switch (`aiq reembed --switch`) that committed while these vectors were being made
    // would take them into the new space and mark the document done: the old model's vectors,
    // never redone. The switch holds this lock exclusively; stores share it, and then see
    // the space as it is.
    await tx.query('select pg_advisory_xact_lock_shared($1)', [VECTOR_LOCK_KEY]);
    const stored = await vectorSettingsGet(tx);
    if (!stored || !sameSpace(stored, space)) return false;
    // Lock the document first: a concurrent re-chunk cannot swap the chunks under us.
    const current = await tx.query('select 1 from documents where id = $1 and content_hash = $2 for update', [documentId, hash]);
    if (current.rowCount === 0) return false;
    // A re-cut with other chunk settings keeps the content hash but replaces every chunk:
    // vectors of chunks that are gone would store nothing, and the document would be marked
    // embedded with none. The re-cut queued its own job for the new chunks.
    const ids = complete?.chunkIds ?? chunks.map((c) => c.id);
    const { rows } = await tx.query<{ total: number; known: number }>(
      'select count(*)::int as total, (count(*) filter (where id = any($2::uuid[])))::int as known from document_chunks where document_id = $1',
      [documentId, ids],
    );
    if (rows[0]!.known !== ids.length || (complete && rows[0]!.total !== ids.length)) return false;
    for (const chunk of chunks) {
      await tx.query('update document_chunks set embedding = aiq_vector($2::real[]) where id = $1 and document_id = $3', [chunk.id, chunk.vector, documentId]);
    }
    if (complete) await tx.query('update documents set embedded_hash = $2, embedded_at = now() where id = $1', [documentId, hash]);
    return true;
  });
}

export interface StaleRecord {
  table: 'documents';
  id: string;
  /** Keyset cursor: pass the last one back as `after` for the next page. */
  cursor: string;
}

// Keyset paging on (created_at, id) so that a record that fails to embed is passed over
// rather than returned forever.
const STALE_LIST_SQL = `
  select * from (
    select 'documents' as table, id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '/' || id as cursor
    from documents where embedded_hash is distinct from content_hash
  ) stale
  where $2::text is null or cursor > $2
  order by cursor
  limit $1`;

/** Records whose embedding is missing or stale, oldest first, a page at a time (for `aiq reembed`). */
export async function vectorStaleList(db: Queryable, limit: number, after?: string): Promise<StaleRecord[]> {
  const result = await db.query<StaleRecord>(STALE_LIST_SQL, [limit, after ?? null]);
  return result.rows;
}

/** How many records need embedding (for progress). */
export async function vectorStaleCount(db: Queryable): Promise<number> {
  const result = await db.query<{ count: number }>(
    'select count(*)::int as count from documents where embedded_hash is distinct from content_hash',
  );
  return result.rows[0]?.count ?? 0;
}

/** Marks every embedding stale (`aiq reembed --all`: after a model update under the same name). */
export async function vectorMarkAllStale(db: Queryable): Promise<void> {
  await db.query('update documents set embedded_hash = null where embedded_hash is not null');
}

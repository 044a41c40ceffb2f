// Embedding storage: pgvector (`vector(N)`, HNSW, `<=>`) where the extension exists, else
// `real[]` with the `<=>` operator from 0003_knowledge.sql. Builds the columns at start for
// the configured provider/model/dimension, detects a change, and runs the nearest-neighbour
// queries. Every query text is the same on both storages: `aiq_vector()` converts a
// real[] parameter to whatever the column holds. Knows nothing of providers or jobs.
import type { Database, Queryable } from '../db/types.ts';

export type VectorStorage = 'pgvector' | 'real[]';

/** What produced the vectors; vectors of different spaces must never be compared. */
export interface VectorSpace {
  provider: string;
  model: string;
  dimensions: number;
}

export interface VectorStoreState extends VectorSpace {
  storage: VectorStorage;
  /** True when this start (re)built the columns: every record needs embedding again. */
  rebuilt: boolean;
  /** The space the old embeddings were made in, when `rebuilt` replaced one. */
  previous?: VectorSpace & { storage: VectorStorage };
}

/** pgvector's HNSW index takes at most 2000 dimensions; beyond that queries scan. */
const HNSW_MAX_DIMENSIONS = 2000;
// Any constant will do; this one is ours alone ('aiq:vectors').
const VECTOR_LOCK_KEY = 727_003;

/**
 * Makes sure the embedding columns fit `space`, idempotently. Run at every start, under an
 * advisory lock so processes starting together do not race. A different provider, model
 * or dimension drops the old embeddings (derived data) and marks every record stale; `aiq
 * reembed` then rebuilds them.
 */
export async function vectorStoreEnsure(db: Database, space: VectorSpace): Promise<VectorStoreState> {
  if (!Number.isInteger(space.dimensions) || space.dimensions < 1 || space.dimensions > 16_000) {
    throw new Error(`embedding dimension must be a whole number from 1 to 16000, got ${space.dimensions}`);
  }
  const storage = await vectorStorageDetect(db);
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [VECTOR_LOCK_KEY]);
    const current = await vectorSettingsGet(tx);
    const columns = await tx.query<{ table_name: string }>(
      `select table_name from information_schema.columns
       where table_schema = current_schema() and column_name = 'embedding'
         and table_name in ('people', 'document_chunks')`,
    );
    const same =
      current !== null &&
      current.storage === storage &&
      current.provider === space.provider &&
      current.model === space.model &&
      current.dimensions === space.dimensions &&
      columns.rowCount === 2;
    if (same) return { storage, ...space, rebuilt: false };

    await tx.exec(columnsDdl(storage, space.dimensions));
    await tx.query('update people set embedded_hash = null, embedded_at = null where embedded_hash is not null');
    await tx.query('update documents set embedded_hash = null, embedded_at = null where embedded_hash is not null');
    await tx.query(
      `insert into knowledge_vector_settings (id, storage, provider, model, dimensions)
       values (1, $1, $2, $3, $4)
       on conflict (id) do update
       set storage = excluded.storage, provider = excluded.provider, model = excluded.model,
           dimensions = excluded.dimensions, updated_at = now()`,
      [storage, space.provider, space.model, space.dimensions],
    );
    return { storage, ...space, rebuilt: true, previous: current ?? undefined };
  });
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
export async function vectorSettingsGet(db: Queryable): Promise<(VectorSpace & { storage: VectorStorage }) | null> {
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
      ? `create index people_embedding_idx on people using hnsw (embedding vector_cosine_ops);
         create index document_chunks_embedding_idx on document_chunks using hnsw (embedding vector_cosine_ops);`
      : '';
  return `
    alter table people drop column if exists embedding;
    alter table document_chunks drop column if exists embedding;
    alter table people add column embedding ${type}${check};
    alter table document_chunks add column embedding ${type}${check};
    ${indexes}
    create or replace function aiq_vector(v real[]) returns ${type}
      language sql immutable strict parallel safe as $$ select ${convert} $$;`;
}

export interface ChunkMatch {
  id: string;
  documentId: string;
  title: string;
  content: string;
  distance: number;
}

// Order by the bare `embedding <=> value`, so pgvector's HNSW index can serve it.
const CHUNKS_NEAREST_SQL = `
  select c.id, c.document_id, d.title, c.content, (c.embedding <=> aiq_vector($1::real[]))::float8 as distance
  from document_chunks c
  join documents d on d.id = c.document_id
  where c.embedding is not null
  order by c.embedding <=> aiq_vector($1::real[])
  limit $2`;

/** The `limit` document chunks nearest to `vector` by cosine distance. */
export async function chunkNearest(db: Queryable, vector: number[], limit: number): Promise<ChunkMatch[]> {
  if (limit <= 0) return [];
  const result = await db.query<{ id: string; document_id: string; title: string; content: string; distance: number }>(CHUNKS_NEAREST_SQL, [
    vector,
    limit,
  ]);
  return result.rows.map((r) => ({ id: r.id, documentId: r.document_id, title: r.title, content: r.content, distance: r.distance }));
}

/**
 * Stores a person's embedding, made from the content whose hash is `hash`. Fenced on the
 * hash: if the record changed while we embedded, nothing is written (a newer job follows).
 */
export async function personEmbeddingSet(db: Queryable, id: string, vector: number[], hash: string): Promise<boolean> {
  const result = await db.query(
    `update people set embedding = aiq_vector($2::real[]), embedded_hash = $3, embedded_at = now()
     where id = $1 and content_hash = $3`,
    [id, vector, hash],
  );
  return result.rowCount > 0;
}

/** Stores the chunks' embeddings and marks the document embedded at `hash`, in one transaction. */
export async function documentEmbeddingSet(
  db: Database,
  documentId: string,
  hash: string,
  chunks: Array<{ id: string; vector: number[] }>,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    // Lock the document first: a concurrent re-chunk cannot swap the chunks under us.
    const current = await tx.query('select 1 from documents where id = $1 and content_hash = $2 for update', [documentId, hash]);
    if (current.rowCount === 0) return false;
    for (const chunk of chunks) {
      await tx.query('update document_chunks set embedding = aiq_vector($2::real[]) where id = $1 and document_id = $3', [chunk.id, chunk.vector, documentId]);
    }
    await tx.query('update documents set embedded_hash = $2, embedded_at = now() where id = $1', [documentId, hash]);
    return true;
  });
}

export interface StaleRecord {
  table: 'people' | 'documents';
  id: string;
  /** Keyset cursor: pass the last one back as `after` for the next page. */
  cursor: string;
}

// Keyset paging on (created_at, id) so that a record that fails to embed is passed over
// rather than returned forever.
const STALE_LIST_SQL = `
  select * from (
    select 'people' as table, id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '/' || id as cursor
    from people where embedded_hash is distinct from content_hash
    union all
    select 'documents', id, to_char(created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') || '/' || id
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
    `select ((select count(*) from people where embedded_hash is distinct from content_hash)
           + (select count(*) from documents where embedded_hash is distinct from content_hash))::int as count`,
  );
  return result.rows[0]?.count ?? 0;
}

/** Marks every embedding stale (`aiq reembed --all`: after a model update under the same name). */
export async function vectorMarkAllStale(db: Queryable): Promise<void> {
  await db.query('update people set embedded_hash = null where embedded_hash is not null');
  await db.query('update documents set embedded_hash = null where embedded_hash is not null');
}

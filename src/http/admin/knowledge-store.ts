// The knowledge reads and writes the admin side needs beyond knowledge/ and jobs/: people
// search, the document list (searched, paged, with embedding state), the import list (with
// progress), and the two writes, "add a document" and "import a CSV", each one transaction
// with its job, so the job exists exactly when the data does.
import { escapeLike } from '../../db/like.ts';
import type { Queryable } from '../../db/types.ts';
import { documentAdd } from '../../jobs/embed-record.ts';
import { importPeopleEnqueue } from '../../jobs/import-people.ts';
import { chunkSettingsOf } from '../../knowledge/chunking.ts';
import type { DocumentSaveOutcome } from '../../knowledge/documents.ts';
import { phoneSearchOf } from '../../knowledge/people.ts';
import type { Runtime } from '../../runtime.ts';
import { cursorTimeSql, timeCursorDecode, timeCursorEncode } from '../../queue/index.ts';

export interface PersonSummary {
  id: string;
  name: string;
  phone: string;
  email: string | null;
  department: string | null;
  role: string | null;
}

// Alphabetical, keyset-paged on (name, id); the search looks in every column people type.
const PEOPLE_SQL = `
  select id, name, phone, email, department, role
  from people
  where ($1::text is null
         or name ilike '%' || $1 || '%' or phone like '%' || $1 || '%' or email ilike '%' || $1 || '%'
         or department ilike '%' || $1 || '%' or role ilike '%' || $1 || '%' or phone like any($5::text[]))
    and ($2::text is null or (name, id) > ($2, $3::uuid))
  order by name, id
  limit $4`;

/** People matching a search (name, phone, email, department, role), by name. */
export async function personSearch(db: Queryable, options: { search?: string; after?: { name: string; id: string }; limit?: number } = {}): Promise<PersonSummary[]> {
  const result = await db.query<PersonSummary>(PEOPLE_SQL, [
    options.search ? escapeLike(options.search) : null,
    options.after?.name ?? null,
    options.after?.id ?? null,
    Math.min(Math.max(options.limit ?? 100, 1), 500),
    options.search ? phoneSearchOf(options.search) : null,
  ]);
  return result.rows;
}

export interface DocumentSummary {
  id: string;
  title: string;
  source: string | null;
  characters: number;
  tags: string[];
  chunks: number;
  embedded: boolean;
  embeddedAt: Date | null;
  updatedAt: Date;
}

export interface DocumentPage {
  documents: DocumentSummary[];
  /** Pass as `after` for the next page; null on the last page. */
  nextCursor: string | null;
}

// Most recently changed first, keyset-paged on (updated_at, id), the time to the microsecond
// (timeCursorEncode); the search ($1, a LIKE pattern's inside) looks in title, source and tags.
const DOCUMENTS_SQL = `
  select d.id, d.title, d.source, length(d.body) as characters, d.tags,
         (select count(*) from document_chunks c where c.document_id = d.id)::int as chunks,
         d.embedded_hash is not distinct from d.content_hash as embedded,
         d.embedded_at as "embeddedAt", d.updated_at as "updatedAt", ${cursorTimeSql('d.updated_at')} as cursor_at
  from documents d
  where ($1::text is null or d.title ilike '%' || $1 || '%' or d.source ilike '%' || $1 || '%'
         or exists (select from unnest(d.tags) tag where tag ilike '%' || $1 || '%'))
    and ($2::timestamptz is null or (d.updated_at, d.id) < ($2, $3::uuid))
  order by d.updated_at desc, d.id desc
  limit $4`;

/**
 * A page of documents, most recently changed first, with their embedding state. `after`:
 * a nextCursor this gave (a RangeError for anything else).
 */
export async function documentList(db: Queryable, options: { search?: string; after?: string; limit?: number } = {}): Promise<DocumentPage> {
  const limit = Math.min(Math.max(options.limit ?? 100, 1), 500);
  const cursor = timeCursorDecode(options.after);
  const { rows } = await db.query<DocumentSummary & { cursor_at: string }>(DOCUMENTS_SQL, [
    options.search ? escapeLike(options.search) : null,
    cursor?.time ?? null,
    cursor?.id ?? null,
    limit + 1,
  ]);
  const documents = rows.slice(0, limit).map(({ cursor_at: _, ...document }) => document);
  const last = rows[limit - 1];
  return { documents, nextCursor: rows.length > limit && last ? timeCursorEncode(last.cursor_at, last.id) : null };
}

export interface DocumentChunks {
  id: string;
  title: string;
  source: string | null;
  embedded: boolean;
  updatedAt: Date;
  chunks: Array<{ id: string; position: number; headingPath: string[]; content: string }>;
}

/** One document with its chunks in order (the page citations link to); null when gone. */
export async function documentWithChunks(db: Queryable, id: string): Promise<DocumentChunks | null> {
  const doc = await db.query<Omit<DocumentChunks, 'chunks'>>(
    `select id, title, source, embedded_hash is not distinct from content_hash as embedded, updated_at as "updatedAt"
     from documents where id = $1`,
    [id],
  );
  if (!doc.rows[0]) return null;
  const chunks = await db.query<DocumentChunks['chunks'][number]>(
    'select id, position, heading_path as "headingPath", content from document_chunks where document_id = $1 order by position',
    [id],
  );
  return { ...doc.rows[0], chunks: chunks.rows };
}

export interface ImportSummary {
  id: string;
  filename: string;
  status: 'pending' | 'running' | 'done' | 'failed';
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
  error: string | null;
  createdAt: Date;
  finishedAt: Date | null;
}

const IMPORTS_SQL = `
  select id, filename, status, rows_read as "rowsRead", inserted, updated, unchanged, rejected, error,
         created_at as "createdAt", finished_at as "finishedAt"
  from imports
  order by created_at desc
  limit $1`;

/** The latest imports, newest first (imports_created_idx). */
export async function importList(db: Queryable, limit = 50): Promise<ImportSummary[]> {
  const result = await db.query<ImportSummary>(IMPORTS_SQL, [limit]);
  return result.rows;
}

/** Saves a document with the configured chunking and enqueues its embedding (see jobs/embed-record.ts). */
export function documentAddConfigured(runtime: Runtime, input: { title: string; body: string; source?: string; tags?: string[] }): Promise<DocumentSaveOutcome & { embedQueued: boolean }> {
  return documentAdd(runtime.db, input, chunkSettingsOf(runtime.config));
}

/** Stores an uploaded CSV and enqueues its import job, in one transaction. */
export async function importUpload(runtime: Runtime, input: { filename: string; content: string; prune?: boolean }): Promise<{ importId: string; jobId: string }> {
  return runtime.db.transaction((tx) => importPeopleEnqueue(tx, { filename: input.filename, content: Buffer.from(input.content, 'utf8'), prune: input.prune }));
}

// Documents of the knowledge base and their chunks. Saving a document replaces its chunks
// (with their full-text entries) when its content changed and does nothing when it did
// not; how text is cut is chunking.ts. Knows nothing of embeddings providers or jobs (the
// caller enqueues the embedding).
import { createHash } from 'node:crypto';
import type { Queryable } from '../db/types.ts';
import { chunkingSignature, DEFAULT_CHUNK_SETTINGS, documentContentCheck, DocumentContentError, type ChunkSettings } from './chunking.ts';

/** A title as stored and looked up: trimmed, accents composed (NFC). */
function titleOf(title: string): string {
  return title.trim().normalize('NFC');
}

/** sha256 of title and body: equal content, equal hash (an unchanged save does nothing). */
export function documentContentHash(title: string, body: string): string {
  return createHash('sha256').update(JSON.stringify([title, body])).digest('hex');
}

const HTML_PAGE = /^\s*<(?:!doctype\s+html|html|head|body)[\s>]/i;
const HTML_MARKUP = /<\/?[a-z][a-z0-9]*(?:\s[^<>]*)?\/?>|&(?:nbsp|amp|lt|gt|quot|#\d+);/gi;

/**
 * A web page's source (a saved .html file, a wiki's export): it begins as a page does, or
 * markup is more than a fifth of its text. A Markdown file with a few tags (<br>, <details>)
 * is not. Saved, it was chunked and embedded tags and all, and an answer quoted
 * `<p>Je hebt <strong>25</strong>&nbsp;vakantiedagen` (found by an import probe).
 */
function looksLikeHtml(body: string): boolean {
  if (HTML_PAGE.test(body)) return true;
  let tags = 0;
  let markup = 0;
  for (const match of body.matchAll(HTML_MARKUP)) {
    tags += 1;
    markup += match[0].length;
  }
  return tags >= 10 && markup * 5 > body.replace(/\s+/g, '').length;
}

export interface DocumentSaveInput {
  title: string;
  body: string;
  source?: string | null;
  /** Which assistant profiles may use it (profiles.ts documentTags); saved as given, even when the text is unchanged. */
  tags?: string[];
}

/** Tags as stored: trimmed, lower case, no empties or repeats, sorted. */
export function documentTagsOf(tags: readonly string[] | undefined): string[] {
  return [...new Set((tags ?? []).map((t) => t.trim().toLowerCase()).filter(Boolean))].sort();
}

export interface DocumentSaveOutcome {
  id: string;
  status: 'inserted' | 'updated' | 'unchanged';
  chunks: number;
}

/**
 * The longest document saved: a 500-page handbook. Its chunks are written in the save's
 * transaction and embedded by one job; a 20 MB text (20,000 chunks) held the embedded
 * database for minutes, and webhooks waited past Twilio's time-out. Longer goes in parts.
 */
export const DOCUMENT_MAX_CHARS = 1_000_000;

/**
 * Saves a document by title: new → inserted with its chunks; same title with other content
 * → body replaced and chunks rebuilt (their embeddings with them); same content cut the
 * same way → nothing. Refuses (DocumentContentError) what has nothing to answer from, or
 * is longer than DOCUMENT_MAX_CHARS. Run
 * it in the transaction that also enqueues the embedding.
 */
export async function documentSave(tx: Queryable, input: DocumentSaveInput, settings: ChunkSettings = DEFAULT_CHUNK_SETTINGS): Promise<DocumentSaveOutcome> {
  const title = titleOf(input.title);
  if (!title) throw new DocumentContentError('a document needs a title');
  // Line ends as \n whatever wrote them: a browser's form sends a textarea's as \r\n, so the
  // same file pasted in the dashboard and added by `aiq add-document` counted as changed
  // and was embedded again (found by a new-user probe). Accents composed (NFC), as questions
  // type them: text from a Mac or a PDF export writes "é" as e and a combining accent, and
  // its words were indexed as other words than the question's ("congés" never found).
  const body = input.body.replace(/\r\n?/g, '\n').normalize('NFC');
  if (body.length > DOCUMENT_MAX_CHARS) {
    throw new DocumentContentError(`document "${title}" is ${body.length.toLocaleString('en')} characters, more than ${DOCUMENT_MAX_CHARS.toLocaleString('en')}: add it in parts (a chapter each)`);
  }
  if (looksLikeHtml(body)) {
    throw new DocumentContentError(
      `document "${title}" is HTML (a web page's source): its tags and entities would be searched and quoted in replies; copy the page's text from the browser, or save it as plain text or Markdown`,
    );
  }
  const chunks = documentContentCheck(title, body, settings);
  const hash = documentContentHash(title, body);
  const chunking = chunkingSignature(settings);
  // Two saves of one title serialise instead of both inserting: a row lock alone takes
  // nothing while the title is new (the second insert then broke the unique title, a 500
  // with its content lost), so the title's own lock is taken first, until commit.
  await tx.query(`select pg_advisory_xact_lock(hashtextextended('aiq.document:' || $1, 0))`, [title]);
  // Compared composed, so a title saved before titles were is still the same document (the
  // one saved composed first, should both be there).
  const existing = await tx.query<{ id: string; content_hash: string; chunking: string | null }>(
    'select id, content_hash, chunking from documents where normalize(title, NFC) = $1 order by title = $1 desc, id limit 1 for update',
    [title],
  );
  const found = existing.rows[0];
  const tags = documentTagsOf(input.tags);
  if (found && found.content_hash === hash && found.chunking === chunking) {
    if (input.tags !== undefined) await tx.query('update documents set tags = $2 where id = $1 and tags <> $2', [found.id, tags]);
    const count = await tx.query<{ n: number }>('select count(*)::int as n from document_chunks where document_id = $1', [found.id]);
    return { id: found.id, status: 'unchanged', chunks: count.rows[0]?.n ?? 0 };
  }
  let id: string;
  if (found) {
    id = found.id;
    await tx.query(
      `update documents set title = $6, body = $2, source = $3, content_hash = $4, embedded_hash = null, embedded_at = null, updated_at = now(),
              tags = coalesce($5, tags)
       where id = $1`,
      [id, body, input.source ?? null, hash, input.tags === undefined ? null : tags, title],
    );
  } else {
    const inserted = await tx.query<{ id: string }>(
      'insert into documents (title, body, source, content_hash, tags) values ($1, $2, $3, $4, $5) returning id',
      [title, body, input.source ?? null, hash, tags],
    );
    id = inserted.rows[0]!.id;
  }
  await chunksReplace(tx, id, title, chunks, chunking);
  return { id, status: found ? 'updated' : 'inserted', chunks: chunks.length };
}

// Each chunk with its full-text entry (aiq_chunk_search_vector, 0011_retrieval.sql).
const CHUNKS_INSERT_SQL = `
  insert into document_chunks (document_id, position, heading_path, content, search_vector)
  select $1, c.position - 1, c.heading_path, c.content, aiq_chunk_search_vector($2, c.heading_path, c.content)
  from (
    select array(select jsonb_array_elements_text(item->'headingPath')) as heading_path, item->>'content' as content, position
    from jsonb_array_elements($3::jsonb) with ordinality as chunk(item, position)
  ) c`;

/** Replaces a document's chunks in the caller's transaction: readers see the old set or the new one, never both. */
async function chunksReplace(tx: Queryable, documentId: string, title: string, chunks: Array<{ headingPath: string[]; content: string }>, chunking: string): Promise<void> {
  await tx.query('delete from document_chunks where document_id = $1', [documentId]);
  await tx.query(CHUNKS_INSERT_SQL, [documentId, title, JSON.stringify(chunks)]);
  await tx.query('update documents set chunking = $2 where id = $1', [documentId, chunking]);
}

/**
 * Removes a document and its chunks (and their vectors): a retired policy must stop being
 * answerable. An embedding job still queued for it finds it gone and ends. Returns its
 * title, or null when there is no such document.
 */
export async function documentRemove(db: Queryable, by: { id: string } | { title: string }): Promise<{ id: string; title: string } | null> {
  const { rows } = await db.query<{ id: string; title: string }>(
    'id' in by ? 'delete from documents where id = $1 returning id, title' : 'delete from documents where normalize(title, NFC) = $1 returning id, title',
    ['id' in by ? by.id : titleOf(by.title)],
  );
  return rows[0] ?? null;
}

/** Documents cut with another rule or other settings than `settings` (or before 0011), a page at a time. */
export async function documentsChunkedOtherwise(db: Queryable, settings: ChunkSettings, limit = 100): Promise<string[]> {
  const result = await db.query<{ id: string }>('select id from documents where chunking is distinct from $1 order by id limit $2', [chunkingSignature(settings), limit]);
  return result.rows.map((r) => r.id);
}

/**
 * Cuts one document again with `settings`, in the caller's transaction; its embedding is
 * then stale (enqueue it). False when it is gone, already cut so, or locked by a racing
 * process that is doing the same.
 */
export async function documentRechunk(tx: Queryable, id: string, settings: ChunkSettings): Promise<boolean> {
  const chunking = chunkingSignature(settings);
  const found = await tx.query<{ title: string; body: string }>(
    'select title, body from documents where id = $1 and chunking is distinct from $2 for update skip locked',
    [id, chunking],
  );
  const doc = found.rows[0];
  if (!doc) return false;
  let chunks;
  try {
    chunks = documentContentCheck(doc.title, doc.body, settings);
  } catch (err) {
    if (!(err instanceof DocumentContentError)) throw err;
    // Stored before the check existed (headings only): keep it whole as one chunk rather than lose it.
    chunks = [{ headingPath: [], content: doc.body.trim() }];
  }
  await tx.query('update documents set embedded_hash = null, embedded_at = null, updated_at = now() where id = $1', [id]);
  await chunksReplace(tx, id, doc.title, chunks, chunking);
  return true;
}

export interface DocumentForEmbedding {
  id: string;
  title: string;
  contentHash: string;
  embeddedHash: string | null;
  /** `embedded`: the chunk has a vector (an earlier attempt's, or the last embedding's). */
  chunks: Array<{ id: string; headingPath: string[]; content: string; embedded: boolean }>;
}

/** A document's hashes and chunks in order, for embedding; null when it is gone. */
export async function documentGetForEmbedding(db: Queryable, id: string): Promise<DocumentForEmbedding | null> {
  const doc = await db.query<{ id: string; title: string; content_hash: string; embedded_hash: string | null }>(
    'select id, title, content_hash, embedded_hash from documents where id = $1',
    [id],
  );
  const row = doc.rows[0];
  if (!row) return null;
  const chunks = await db.query<{ id: string; headingPath: string[]; content: string; embedded: boolean }>(
    'select id, heading_path as "headingPath", content, embedding is not null as embedded from document_chunks where document_id = $1 order by position',
    [id],
  );
  return { id: row.id, title: row.title, contentHash: row.content_hash, embeddedHash: row.embedded_hash, chunks: chunks.rows };
}

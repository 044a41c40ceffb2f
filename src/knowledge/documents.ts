// Documents of the knowledge base and how they are cut into chunks for retrieval. Saving a
// document replaces its chunks when its content changed and does nothing when it did not.
// Knows nothing of embeddings providers or jobs (the caller enqueues the embedding).
import { createHash } from 'node:crypto';
import type { Queryable } from '../db/types.ts';

/** Longest chunk, in characters (~300 tokens: small enough to rank, big enough to answer). */
export const CHUNK_MAX_CHARS = 1200;

/**
 * The chunking rule:
 * 1. Line endings are normalised and the text is split into paragraphs at blank lines.
 * 2. A Markdown heading (`# …`) always starts a new chunk, so sections do not mix.
 * 3. Consecutive paragraphs are packed into one chunk while it stays within `maxChars`.
 * 4. A paragraph longer than `maxChars` is split at sentence ends; a sentence longer than
 *    that at spaces; a run without spaces at `maxChars` exactly.
 * There is no overlap between chunks: a chunk holds whole paragraphs, and the document
 * title is embedded with every chunk (see `chunkEmbeddingText`), which gives each chunk
 * the context an overlap would.
 */
export function documentChunk(body: string, maxChars = CHUNK_MAX_CHARS): string[] {
  const paragraphs = body
    .replace(/\r\n?/g, '\n')
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter(Boolean);
  const chunks: string[] = [];
  let current = '';
  const flush = () => {
    if (current) chunks.push(current);
    current = '';
  };
  for (const paragraph of paragraphs) {
    if (/^#{1,6}\s/.test(paragraph)) flush();
    for (const piece of splitLong(paragraph, maxChars)) {
      if (current && current.length + 2 + piece.length > maxChars) flush();
      current = current ? `${current}\n\n${piece}` : piece;
    }
  }
  flush();
  return chunks;
}

/** Pieces of at most `maxChars`: whole sentences where possible, then words, then a hard cut. */
function splitLong(text: string, maxChars: number): string[] {
  if (text.length <= maxChars) return [text];
  const pieces: string[] = [];
  let current = '';
  const units = text.split(/(?<=[.!?])\s+/).flatMap((sentence) => (sentence.length <= maxChars ? [sentence] : sentence.split(/\s+/)));
  for (const unit of units.flatMap((u) => hardCut(u, maxChars))) {
    if (current && current.length + 1 + unit.length > maxChars) {
      pieces.push(current);
      current = '';
    }
    current = current ? `${current} ${unit}` : unit;
  }
  if (current) pieces.push(current);
  return pieces;
}

function hardCut(text: string, maxChars: number): string[] {
  const parts: string[] = [];
  for (let i = 0; i < text.length; i += maxChars) parts.push(text.slice(i, i + maxChars));
  return parts;
}

/** What is embedded for a chunk: the title gives every chunk its document's topic. */
export function chunkEmbeddingText(title: string, content: string): string {
  return `${title}\n\n${content}`;
}

/** sha256 of title and body: equal content, equal hash (an unchanged save does nothing). */
export function documentContentHash(title: string, body: string): string {
  return createHash('sha256').update(JSON.stringify([title, body])).digest('hex');
}

export interface DocumentSaveInput {
  title: string;
  body: string;
  source?: string | null;
}

export interface DocumentSaveOutcome {
  id: string;
  status: 'inserted' | 'updated' | 'unchanged';
  chunks: number;
}

/**
 * Saves a document by title: new → inserted with its chunks; same title with other content
 * → body replaced and chunks rebuilt (their embeddings with them); same content → nothing.
 * Run it in the transaction that also enqueues the embedding.
 */
export async function documentSave(tx: Queryable, input: DocumentSaveInput): Promise<DocumentSaveOutcome> {
  const title = input.title.trim();
  if (!title) throw new Error('a document needs a title');
  if (!input.body.trim()) throw new Error(`document "${title}" is empty`);
  const hash = documentContentHash(title, input.body);
  // Lock by title so that two saves of one title serialise instead of both inserting.
  const existing = await tx.query<{ id: string; content_hash: string }>('select id, content_hash from documents where title = $1 for update', [title]);
  const found = existing.rows[0];
  if (found && found.content_hash === hash) {
    const count = await tx.query<{ n: number }>('select count(*)::int as n from document_chunks where document_id = $1', [found.id]);
    return { id: found.id, status: 'unchanged', chunks: count.rows[0]?.n ?? 0 };
  }
  let id: string;
  if (found) {
    id = found.id;
    await tx.query(
      `update documents set body = $2, source = $3, content_hash = $4, embedded_hash = null, embedded_at = null, updated_at = now()
       where id = $1`,
      [id, input.body, input.source ?? null, hash],
    );
    await tx.query('delete from document_chunks where document_id = $1', [id]);
  } else {
    const inserted = await tx.query<{ id: string }>(
      'insert into documents (title, body, source, content_hash) values ($1, $2, $3, $4) returning id',
      [title, input.body, input.source ?? null, hash],
    );
    id = inserted.rows[0]!.id;
  }
  const chunks = documentChunk(input.body);
  await tx.query(
    `insert into document_chunks (document_id, position, content)
     select $1, position - 1, content from unnest($2::text[]) with ordinality as c(content, position)`,
    [id, chunks],
  );
  return { id, status: found ? 'updated' : 'inserted', chunks: chunks.length };
}

export interface DocumentForEmbedding {
  id: string;
  title: string;
  contentHash: string;
  embeddedHash: string | null;
  chunks: Array<{ id: string; content: string }>;
}

/** A document's hashes and chunks in order, for embedding; null when it is gone. */
export async function documentGetForEmbedding(db: Queryable, id: string): Promise<DocumentForEmbedding | null> {
  const doc = await db.query<{ id: string; title: string; content_hash: string; embedded_hash: string | null }>(
    'select id, title, content_hash, embedded_hash from documents where id = $1',
    [id],
  );
  const row = doc.rows[0];
  if (!row) return null;
  const chunks = await db.query<{ id: string; content: string }>('select id, content from document_chunks where document_id = $1 order by position', [id]);
  return { id: row.id, title: row.title, contentHash: row.content_hash, embeddedHash: row.embedded_hash, chunks: chunks.rows };
}

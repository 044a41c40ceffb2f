// How a document is cut into chunks for retrieval. Section-aware: a Markdown heading starts
// a section, every chunk carries the path of headings above it (document title › heading ›
// subheading), and a heading is never a chunk of its own. Pure functions over text.

/** Chunk size and overlap (CHUNK_MAX_CHARS, CHUNK_OVERLAP_CHARS). */
export interface ChunkSettings {
  /** Longest chunk, in characters (~300 tokens at the default: small enough to rank, big enough to answer). */
  maxChars: number;
  /** How much of the previous chunk of the same section starts the next, in whole sentences. */
  overlapChars: number;
}

export const DEFAULT_CHUNK_SETTINGS: ChunkSettings = { maxChars: 1200, overlapChars: 200 };

export function chunkSettingsOf(config: { CHUNK_MAX_CHARS: number; CHUNK_OVERLAP_CHARS: number }): ChunkSettings {
  return { maxChars: config.CHUNK_MAX_CHARS, overlapChars: config.CHUNK_OVERLAP_CHARS };
}

// Bumped whenever the rule below changes: documents cut by another version are cut again at
// start (documentsRechunkStale), so every chunk follows the current rule.
const CHUNKER_VERSION = 2;

/** What a document's chunks were cut with, stored with it; another value means cut it again. */
export function chunkingSignature(settings: ChunkSettings): string {
  return `v${CHUNKER_VERSION}/${settings.maxChars}/${settings.overlapChars}`;
}

export interface Chunk {
  /** The headings above the text, outermost first (the document title not included). */
  headingPath: string[];
  /** Text only: the headings are in `headingPath`. */
  content: string;
}

/** The document cannot be chunked: it is empty, binary, or has headings and no text. */
export class DocumentContentError extends Error {
  override name = 'DocumentContentError';
}

const HEADING = /^(#{1,6})\s+(.*?)\s*#*\s*$/;
const FENCE = /^\s*(```|~~~)/;

/**
 * The chunking rule:
 * 1. Line endings are normalised; a Markdown heading (`#`…`######`, outside code fences)
 *    starts a new section whose heading path is the headings above it. A top heading equal
 *    to the document title is the title, not a section.
 * 2. A section's text is split into paragraphs at blank lines, and consecutive paragraphs
 *    are packed into one chunk while it stays within `maxChars`. Sections never share a
 *    chunk, and a heading with no text under it (before its subheadings) makes no chunk:
 *    it lives on in its subsections' paths.
 * 3. A paragraph longer than `maxChars` is split at sentence ends into pieces of at most
 *    `maxChars - overlapChars` (room for the overlap); a sentence longer than that at
 *    spaces; a run without spaces at that length exactly.
 * 4. When a section needs several chunks, each after the first begins with the last whole
 *    sentences of the one before, up to `overlapChars`, so an answer cut at a chunk border
 *    is still whole in one of them.
 * The heading path goes with every chunk into its embedding, its full-text entry and the
 * prompt, which gives each chunk the context of where it stands.
 */
export function documentChunk(title: string, body: string, settings: ChunkSettings = DEFAULT_CHUNK_SETTINGS): Chunk[] {
  const chunks: Chunk[] = [];
  for (const section of documentSections(title, body)) {
    for (const content of packSection(section.paragraphs, settings)) chunks.push({ headingPath: section.headingPath, content });
  }
  return chunks;
}

interface Section {
  headingPath: string[];
  paragraphs: string[];
}

function documentSections(title: string, body: string): Section[] {
  const sections: Section[] = [];
  const path: Array<{ level: number; text: string }> = [];
  let lines: string[] = [];
  let inFence = false;
  let first = true;
  const flush = () => {
    const paragraphs = lines
      .join('\n')
      .split(/\n\s*\n/)
      .map((p) => p.trim())
      .filter(Boolean);
    if (paragraphs.length > 0) sections.push({ headingPath: path.map((h) => h.text), paragraphs });
    lines = [];
  };
  for (const line of body.replace(/\r\n?/g, '\n').split('\n')) {
    if (FENCE.test(line)) inFence = !inFence;
    const heading = inFence ? null : HEADING.exec(line);
    if (!heading) {
      if (line.trim()) first = false;
      lines.push(line);
      continue;
    }
    flush();
    const level = heading[1]!.length;
    const text = heading[2]!.trim();
    // "# Handbook" opening the document "Handbook" names the document; it is not a section.
    const isTitle = first && level === 1 && text.toLowerCase() === title.trim().toLowerCase();
    first = false;
    if (isTitle || !text) continue;
    while (path.length > 0 && path[path.length - 1]!.level >= level) path.pop();
    path.push({ level, text });
  }
  flush();
  return sections;
}

function packSection(paragraphs: string[], settings: ChunkSettings): string[] {
  const chunks: string[] = [];
  let current = '';
  // Pieces of a long paragraph leave room for the overlap that will precede them.
  const pieceMax = settings.maxChars - settings.overlapChars;
  for (const paragraph of paragraphs) {
    for (const piece of splitLong(paragraph, paragraph.length <= settings.maxChars ? settings.maxChars : pieceMax)) {
      if (current && current.length + 2 + piece.length > settings.maxChars) {
        chunks.push(current);
        const overlap = tailSentences(current, Math.min(settings.overlapChars, settings.maxChars - piece.length - 2));
        current = overlap;
      }
      current = current ? `${current}\n\n${piece}` : piece;
    }
  }
  if (current) chunks.push(current);
  return chunks;
}

/** The last whole sentences of `text` that fit in `maxChars` (empty when none fits). */
function tailSentences(text: string, maxChars: number): string {
  if (maxChars <= 0) return '';
  const sentences = text.split(/(?<=[.!?])\s+/);
  let tail = '';
  for (let i = sentences.length - 1; i >= 0; i--) {
    const next = tail ? `${sentences[i]} ${tail}` : sentences[i]!;
    if (next.length > maxChars) break;
    tail = next;
  }
  return tail;
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

/** Where a chunk stands, as people read it: "Handbook › Leave › Holidays". */
export function chunkLocation(title: string, headingPath: readonly string[]): string {
  return [title, ...headingPath].join(' › ');
}

/** What is embedded for a chunk: its location, then its text. */
export function chunkEmbeddingText(title: string, headingPath: readonly string[], content: string): string {
  return `${chunkLocation(title, headingPath)}\n\n${content}`;
}

/**
 * Refuses what is not a text document, with the reason: nothing but whitespace, binary
 * content (a NUL byte, or bytes that were not UTF-8), or headings without any text.
 */
export function documentContentCheck(title: string, body: string, settings: ChunkSettings = DEFAULT_CHUNK_SETTINGS): Chunk[] {
  if (!body.trim()) throw new DocumentContentError(`document "${title}" is empty`);
  // A NUL byte, or many replacement characters (bytes that were not UTF-8) or control
  // characters (bytes read as Windows-1252), means a binary file (PDF, Word, an image): its
  // bytes would be indexed as gibberish.
  const replaced = body.match(/\uFFFD/g)?.length ?? 0;
  const controls = body.match(/[\u0001-\u0008\u000B\u000E-\u001F\u007F]/g)?.length ?? 0;
  if (body.includes('\u0000') || replaced > Math.max(3, body.length / 100) || controls > Math.max(3, body.length / 100)) {
    throw new DocumentContentError(`document "${title}" is not text (binary content): convert it to plain text or Markdown first`);
  }
  const chunks = documentChunk(title, body, settings);
  if (chunks.length === 0) throw new DocumentContentError(`document "${title}" has headings but no text under them: nothing to answer from`);
  return chunks;
}

// Query expansion with synonym groups. Employees ask in their own words and often in the
// other language of a bilingual office ("declareren" for a section called "Expense claims",
// "oma is overleden" for "Bijzonder verlof" that says "overlijden van een grootouder"):
// full-text search cannot match what shares no word, and the offline embeddings only
// measure shared words too. A synonym group lists words and phrases that mean the same for
// search; a question that mentions one member is searched with the others as well, at a
// lower weight (search.ts). Only the question is expanded, never the stored chunks, so a
// changed list needs no re-indexing. Pure functions, plus one memoized file read.
import { readFileSync } from 'node:fs';
import { BUILTIN_SYNONYMS } from './synonyms-builtin.ts';

interface Term {
  /** The words of the phrase, folded (lower case, no accents). */
  words: string[];
  /** The last word matches any word that starts with it (written `declar*`). */
  prefix: boolean;
  /** How it is added to a question: the phrase as written, without the `*`. */
  text: string;
  group: number;
}

export interface Synonyms {
  /** Exact terms by their first word. */
  byFirstWord: Map<string, Term[]>;
  /** One-word prefix terms (`declar*`): few, so scanned. */
  prefixes: Term[];
  /** The groups, each a list of its members; a term's `group` is its index here. */
  members: Term[][];
}

/** A synonym list that cannot be read or parsed; the message names the file and line. */
export class SynonymsError extends Error {
  override name = 'SynonymsError';
}

/** Lower-case words with accents removed, so "privé" meets "prive" and "Wi-Fi" meets "wi fi". */
export function foldedWords(text: string): string[] {
  return text.normalize('NFKD').replace(/\p{M}/gu, '').toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

const MIN_PREFIX_CHARS = 4;

/**
 * Parses a synonym list: one group per line, members separated by commas; `#` starts a
 * comment; a member ending in `*` matches every word that starts with it (at least four
 * letters before the `*`, and only as the last word of a phrase).
 */
export function synonymsParse(text: string, source = 'synonyms', into: Synonyms = synonymsEmpty()): Synonyms {
  text.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.replace(/#.*$/, '').trim();
    if (!line) return;
    const where = `${source} line ${index + 1}`;
    const members = line.split(',').map((m) => m.trim()).filter(Boolean);
    if (members.length < 2) throw new SynonymsError(`${where}: a group needs at least two members separated by commas (got "${line}")`);
    const group = into.members.length;
    const terms = members.map((member): Term => {
      const prefix = member.endsWith('*');
      const written = prefix ? member.slice(0, -1).trim() : member;
      const words = foldedWords(written);
      if (words.length === 0) throw new SynonymsError(`${where}: "${member}" has no letters or digits`);
      if (prefix && words.at(-1)!.length < MIN_PREFIX_CHARS) {
        throw new SynonymsError(`${where}: "${member}": a prefix needs at least ${MIN_PREFIX_CHARS} letters before the *`);
      }
      return { words, prefix, text: written, group };
    });
    into.members.push(terms);
    for (const term of terms) {
      if (term.prefix && term.words.length === 1) into.prefixes.push(term);
      else {
        const list = into.byFirstWord.get(term.words[0]!) ?? [];
        list.push(term);
        into.byFirstWord.set(term.words[0]!, list);
      }
    }
  });
  return into;
}

export function synonymsEmpty(): Synonyms {
  return { byFirstWord: new Map(), prefixes: [], members: [] };
}

function wordMatches(term: Term, index: number, word: string | undefined): boolean {
  if (word === undefined) return false;
  const want = term.words[index]!;
  return term.prefix && index === term.words.length - 1 ? word.startsWith(want) : word === want;
}

/** `term` matches the question's words from `start` on. */
function matchesAt(term: Term, words: string[], start: number): boolean {
  return term.words.every((_, i) => wordMatches(term, i, words[start + i]));
}

/**
 * What `question` is also searched with: the other members of every group one of whose
 * members it mentions, each once, leaving out those it already says. Empty when none.
 */
export function synonymsExpand(synonyms: Synonyms, question: string): string[] {
  if (synonyms.members.length === 0) return [];
  const words = foldedWords(question);
  const matched = new Map<number, Set<Term>>();
  const note = (term: Term) => {
    const set = matched.get(term.group) ?? new Set<Term>();
    set.add(term);
    matched.set(term.group, set);
  };
  for (let start = 0; start < words.length; start++) {
    for (const term of synonyms.byFirstWord.get(words[start]!) ?? []) if (matchesAt(term, words, start)) note(term);
    for (const term of synonyms.prefixes) if (words[start]!.startsWith(term.words[0]!)) note(term);
  }
  const said = new Set(words);
  const added: string[] = [];
  const seen = new Set<string>();
  for (const [group, terms] of matched) {
    for (const member of synonyms.members[group]!) {
      if (terms.has(member)) continue;
      const key = member.words.join(' ');
      if (seen.has(key) || (member.words.length === 1 && said.has(key))) continue;
      seen.add(key);
      added.push(member.text);
    }
  }
  return added;
}

const loaded = new Map<string, Synonyms>();

/**
 * The groups retrieval expands questions with: the built-in Dutch/English workplace list
 * (RAG_BUILTIN_SYNONYMS) and the organisation's own file (RAG_SYNONYMS_FILE), read once per
 * process. Throws naming the variable when the file is missing or wrong.
 */
export function synonymsOf(config: { RAG_BUILTIN_SYNONYMS: boolean; RAG_SYNONYMS_FILE?: string | undefined }): Synonyms {
  const key = `${config.RAG_BUILTIN_SYNONYMS}\0${config.RAG_SYNONYMS_FILE ?? ''}`;
  const cached = loaded.get(key);
  if (cached) return cached;
  const synonyms = synonymsEmpty();
  if (config.RAG_BUILTIN_SYNONYMS) synonymsParse(BUILTIN_SYNONYMS, 'built-in synonyms', synonyms);
  const file = config.RAG_SYNONYMS_FILE;
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new SynonymsError(`RAG_SYNONYMS_FILE: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
    try {
      synonymsParse(text, file, synonyms);
    } catch (err) {
      throw new SynonymsError(`RAG_SYNONYMS_FILE: ${(err as Error).message}`);
    }
  }
  loaded.set(key, synonyms);
  return synonyms;
}

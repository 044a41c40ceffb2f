// Retrieval over document chunks: vector search (cosine distance, on either vector store),
// PostgreSQL full-text search (an OR of the question's lexemes, ranked by BM25), and both
// fused by reciprocal rank fusion. One statement per search, so it costs one round
// trip, also through a transaction pooler. Knows nothing of providers or prompts.
import type { Database, Queryable } from '../db/types.ts';

export type SearchMode = 'hybrid' | 'vector' | 'lexical';

export interface SearchOptions {
  /** How many chunks to return. */
  limit: number;
  mode: SearchMode;
  /** RRF's k: a chunk at rank r on one side adds weight ÷ (k + r). 60 is the paper's value. */
  rrfK: number;
  vectorWeight: number;
  lexicalWeight: number;
  /** Only chunks of documents with one of these tags; null or absent: every document. */
  documentTags?: string[] | null;
  /**
   * The embedding space `vector` belongs to. When given, the search first checks that the
   * stored chunks were embedded in it (as vectorSpaceCheck does, in the same statement)
   * and throws SearchSpaceMismatchError, having compared nothing, when they were not.
   */
  space?: { provider: string; model: string; dimensions: number } | null;
  /**
   * More words to search the full text with (synonyms.ts): their terms count with
   * `expansionWeight` (0–1) in the ranking, the question's own terms with 1.
   */
  expansions?: string[];
  expansionWeight?: number;
}

/** The chunks were embedded in another space than the question (the caller says which). */
export class SearchSpaceMismatchError extends Error {}

export interface SearchHit {
  id: string;
  documentId: string;
  title: string;
  headingPath: string[];
  content: string;
  /** The fused score: the sum over both sides of weight ÷ (k + rank). */
  score: number;
  /** Place among the nearest by vector (1 = nearest), or null when not among the candidates. */
  vectorRank: number | null;
  /** Place among the full-text matches, or null when not among them. */
  lexicalRank: number | null;
  /** Cosine similarity to the question (1 − distance), or null when the chunk has no embedding yet. */
  similarity: number | null;
  /** True when `similarity` was computed for this question because no embedding is stored yet (rag.ts). */
  similarityUnstored?: boolean;
  /** The share of the question's search terms (stemmed, stopwords left out) found in the chunk, 0–1. */
  coverage: number;
}

/** A question longer than this is searched by its first QUESTION_MAX_CHARS characters. */
export const QUESTION_MAX_CHARS = 4000;

// Each side contributes up to twice the chunks asked for (at least this many) to the fusion.
// Short lists, because in reciprocal rank fusion any chunk on both lists outscores one
// that is first on a single list: with 50 candidates a side, chunks that were mediocre on
// both sides crowded out the exact match (the evaluation: hybrid recall@5 0.73 with 50,
// 0.76 with 10).
const MIN_CANDIDATES = 10;

// The lexical side: the question's lexemes (stemmed, stopwords out) as one OR query
// (plainto_tsquery ANDs them, which a chatty WhatsApp question would never match whole),
// terms of 4+ letters as prefixes so that Dutch compounds match ("vakantie" finds
// "vakantiedagen"). Added to them, at weight $13 in the ranking: the lexemes of the
// expansions ($12, synonyms.ts) and, of a 8+ letter lexeme, the parts (4+ letters, cut at
// any point) that some chunk has as a whole lexeme, one GIN lookup each, so a compound the
// text never uses is found by its words that it does ("werklaptop": "werk", "laptop").
// The GIN index finds the chunks with any term; they are ranked by BM25
// (k1 = 1.2, b = 0.75; a term in the title or headings counts twice), because ts_rank has
// no inverse document frequency: "kantoor" would weigh as much as "HR-12" (the evaluation:
// recall@5 0.71 with ts_rank, 0.76 with BM25). Ranks on each side by row_number over the
// side's own order; the fusion as a full join, so a chunk found by one side only counts
// too. The vector side orders by the bare `embedding <=> value`, so pgvector's HNSW index
// can serve it; a side whose weight is 0 is skipped as a whole by its one-time filter.
// The space check comes first, as a one-time filter on both sides: a stale space compares
// nothing (a vector of another size would even fail on pgvector), and the one row always
// returned says whether it held, so that a search with no hits needs no second statement.
const searchSql = (nearestOrder: string) => `
  with space as (
    select $9::text is null or exists (
      select 1 from knowledge_vector_settings where id = 1 and provider = $9 and model = $10 and dimensions = $11
    ) as ok
  ), asked as (
    select l as term
    from unnest(tsvector_to_array(to_tsvector(aiq_text_search_config(), $2))) as l
    where l ~ '^[[:alnum:]_-]+$'
  ), compound_parts as (
    select distinct p.part as term
    from asked a
    cross join lateral generate_series(4, length(a.term) - 4) as i
    cross join lateral (values (left(a.term, i)), (substr(a.term, i + 1))) as p(part)
    where $13::float8 > 0 and length(a.term) >= 8
      and exists (select 1 from document_chunks c where c.search_vector @@ to_tsquery('simple', '''' || p.part || ''''))
  ), expanded as (
    select l as term
    from unnest(tsvector_to_array(to_tsvector(aiq_text_search_config(), $12))) as l
    where $13::float8 > 0 and l ~ '^[[:alnum:]_-]+$'
    union
    select term from compound_parts
  ), question_terms as (
    select term, 1::float8 as weight from asked
    union all
    select term, $13::float8 from expanded where term not in (select term from asked)
  ), question as (
    select coalesce(to_tsquery('simple', string_agg(case when length(term) >= 4 then '''' || term || ''':*' else '''' || term || '''' end, ' | ')), ''::tsquery) as terms,
           (select coalesce(array_agg(term), '{}') from asked) as lexemes
    from question_terms
  ), vector_hits as (
    select id, row_number() over (order by distance, id) as rank
    from (
      select c.id, c.embedding <=> aiq_vector($1::real[]) as distance
      from document_chunks c
      where $4::float8 > 0 and (select ok from space) and c.embedding is not null
        and ($8::text[] is null or c.document_id in (select id from documents where tags && $8::text[]))
      order by ${nearestOrder}
      limit $3
    ) nearest
  ), matched as (
    select c.id, q.term, q.weight, max(length(c.search_vector))::float8 as len,
           sum((select sum(case when w = 'A' then 2 else 1 end) from unnest(v.weights) as w))::float8 as tf
    from document_chunks c
    cross join question
    cross join question_terms q
    cross join lateral unnest(c.search_vector) as v
    where $5::float8 > 0 and (select ok from space) and numnode(question.terms) > 0 and c.search_vector @@ question.terms
      and ($8::text[] is null or c.document_id in (select id from documents where tags && $8::text[]))
      and (v.lexeme = q.term or (length(q.term) >= 4 and starts_with(v.lexeme, q.term)))
    group by c.id, q.term, q.weight
  ), corpus as (
    select count(*)::float8 as n, coalesce(avg(length(search_vector)), 1)::float8 as avglen
    from document_chunks where $5::float8 > 0
  ), term_chunks as (
    select term, count(*)::float8 as n from matched group by term
  ), lexical_hits as (
    select id, row_number() over (order by score desc, id) as rank
    from (
      select m.id, sum(m.weight * ln(1 + (corpus.n - t.n + 0.5) / (t.n + 0.5)) * m.tf * 2.2 / (m.tf + 1.2 * (0.25 + 0.75 * m.len / corpus.avglen))) as score
      from matched m
      join term_chunks t on t.term = m.term
      cross join corpus
      group by m.id
      order by score desc, m.id
      limit $3
    ) best
  ), fused as (
    select coalesce(v.id, l.id) as id, v.rank as vector_rank, l.rank as lexical_rank,
           coalesce($4::float8 / ($6::float8 + v.rank), 0) + coalesce($5::float8 / ($6::float8 + l.rank), 0) as score
    from vector_hits v
    full join lexical_hits l on l.id = v.id
  )
  select space.ok as space_ok, hit.*
  from space
  left join lateral (
    select c.id, c.document_id, d.title, c.heading_path, c.content,
           f.score, f.vector_rank, f.lexical_rank,
           1 - (c.embedding <=> aiq_vector($1::real[]))::float8 as similarity,
           coalesce((select count(*) from unnest(question.lexemes) as l(lexeme) where l.lexeme = any(tsvector_to_array(c.search_vector)))::float8
                    / nullif(cardinality(question.lexemes), 0), 0) as coverage
    from fused f
    join document_chunks c on c.id = f.id
    join documents d on d.id = c.document_id
    cross join question
    order by f.score desc, f.vector_rank nulls last, f.lexical_rank nulls last
    limit $7
  ) hit on true`;

// The nearest chunks: through the HNSW index (pgvector) when every document may answer. For
// a profile's tags, exactly: the index returns its ~40 nearest of all chunks and the tag
// filter comes after, so a desk whose documents are a small share got few or none of its
// own (measured: 6 hits for 8 questions where an exact scan gives 40). A desk's chunks are
// few, and "+ 0" keeps the planner off the index.
const SEARCH_SQL = searchSql('c.embedding <=> aiq_vector($1::real[])');
const SEARCH_TAGGED_SQL = searchSql('(c.embedding <=> aiq_vector($1::real[])) + 0');

interface SearchRow {
  space_ok: boolean;
  /** Null in the one row of a search that found nothing. */
  id: string | null;
  document_id: string;
  title: string;
  heading_path: string[];
  content: string;
  score: number;
  vector_rank: string | number | null;
  lexical_rank: string | number | null;
  similarity: number | null;
  coverage: number;
}

/** The chunks that best answer `question`, best first; `vector` is the question's embedding. */
export async function chunkSearch(db: Queryable, question: string, vector: number[], options: SearchOptions): Promise<SearchHit[]> {
  if (options.limit <= 0) return [];
  const vectorWeight = options.mode === 'lexical' ? 0 : options.vectorWeight;
  const lexicalWeight = options.mode === 'vector' ? 0 : options.lexicalWeight;
  // Expansions serve the full-text side only: none when it is skipped.
  const expansionWeight = lexicalWeight > 0 ? options.expansionWeight ?? 0 : 0;
  const candidates = Math.max(MIN_CANDIDATES, options.limit * 2);
  const result = await db.query<SearchRow>(options.documentTags ? SEARCH_TAGGED_SQL : SEARCH_SQL, [
    vector,
    question.slice(0, QUESTION_MAX_CHARS),
    candidates,
    vectorWeight,
    lexicalWeight,
    options.rrfK,
    options.limit,
    options.documentTags ?? null,
    options.space?.provider ?? null,
    options.space?.model ?? null,
    options.space?.dimensions ?? null,
    (options.expansions ?? []).join(', ').slice(0, QUESTION_MAX_CHARS),
    expansionWeight,
  ]);
  if (result.rows[0]?.space_ok === false) throw new SearchSpaceMismatchError('the stored chunks were embedded in another space');
  return result.rows.filter((r) => r.id !== null).map((r) => ({
    id: r.id!,
    documentId: r.document_id,
    title: r.title,
    headingPath: r.heading_path,
    content: r.content,
    score: Number(r.score),
    vectorRank: r.vector_rank === null ? null : Number(r.vector_rank),
    lexicalRank: r.lexical_rank === null ? null : Number(r.lexical_rank),
    similarity: r.similarity === null ? null : Number(r.similarity),
    coverage: Number(r.coverage),
  }));
}

/** The configured text-search configuration does not exist in this database. */
export class TextSearchConfigError extends Error {
  override name = 'TextSearchConfigError';
}

// Any constant will do; this one is ours alone ('aiq:text search').
const TEXT_SEARCH_LOCK_KEY = 727_004;

/** Whether the database has the text-search configuration `config` (start and doctor ask). */
export async function textSearchConfigKnown(db: Queryable, config: string): Promise<boolean> {
  const known = await db.query('select 1 from pg_ts_config where cfgname = $1', [config]);
  return known.rowCount > 0;
}

/**
 * Makes `config` (a PostgreSQL text-search configuration: dutch, simple, english …) the one
 * full-text entries are built and searched with. When it differs from the current one, the
 * function aiq_text_search_config() is replaced and every chunk's entry rebuilt, in one
 * transaction (derived data: nothing is lost). Returns whether it changed anything.
 */
export async function textSearchConfigSet(db: Database, config: string): Promise<boolean> {
  if (!(await textSearchConfigKnown(db, config))) throw new TextSearchConfigError(`text-search configuration "${config}" does not exist in this database (try dutch, english or simple)`);
  const current = await db.query<{ name: string }>('select aiq_text_search_config()::text as name');
  if (current.rows[0]?.name === config) return false;
  return db.transaction(async (tx) => {
    await tx.query('select pg_advisory_xact_lock($1)', [TEXT_SEARCH_LOCK_KEY]);
    const raced = await tx.query<{ name: string }>('select aiq_text_search_config()::text as name');
    if (raced.rows[0]?.name === config) return false;
    // DDL takes no parameters; the name was just found in pg_ts_config, so it is a plain word.
    await tx.exec(`create or replace function aiq_text_search_config() returns regconfig
      language sql stable parallel safe as $$ select ${quoteLiteral(config)}::regconfig $$`);
    await tx.query(`
      update document_chunks c set search_vector = aiq_chunk_search_vector(d.title, c.heading_path, c.content)
      from documents d
      where d.id = c.document_id`);
    return true;
  });
}

function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}

// Knowledge documents that name a person by their number or email: a "who does what" page,
// an on-call list. They are the organisation's own texts, written and kept by people, and a
// line taken out of one can change what the rest says, so erasure does not edit them: it
// names them, for the admin to edit or remove (which re-indexes them), and export hands
// over their lines about the person.
import type { Queryable } from '../db/types.ts';
import { emailPattern, nationalPartOf, phoneDigitForms, WRITTEN_NUMBER } from './written-forms.ts';

export interface DocumentAboutPerson {
  id: string;
  title: string;
  /** The lines of the document that name the person, as written. */
  lines: string[];
}

/**
 * Whether a line of running text names the person: their number in any of its written forms
 * (phoneDigitForms, with what people put between digits), or their email (emailPattern). A
 * number may run into a neighbouring one ("kamer 2.14 06 1234 5678"), so every contiguous
 * run of its digit groups is tried, each only as long as the longest form.
 */
export function proseNamesPerson(line: string, phone: string, email: string | null): boolean {
  const forms = phoneDigitForms(phone);
  const longest = Math.max(...[...forms].map((form) => form.length));
  for (const [run] of line.matchAll(WRITTEN_NUMBER)) {
    const groups = run.split(/[^0-9]+/).filter(Boolean);
    for (let from = 0; from < groups.length; from++) {
      let written = '';
      for (let to = from; to < groups.length && written.length < longest; to++) {
        written += groups[to];
        if (forms.has(written)) return true;
      }
    }
  }
  return email !== null && new RegExp(emailPattern(email), 'i').test(line);
}

/**
 * The documents with a line that names the person (proseNamesPerson), with those lines: a
 * superset found in SQL first (the national digits, which every written form holds, anywhere
 * in the body, or the email), then line by line.
 */
export async function documentsAboutPerson(db: Queryable, phone: string, email: string | null): Promise<DocumentAboutPerson[]> {
  const { rows } = await db.query<{ id: string; title: string; body: string }>(
    `select id, title, body from documents
     where regexp_replace(body, '[^0-9]', '', 'g') like '%' || $1 || '%'
        or ($2::text is not null and position(lower($2) in lower(body)) > 0)
     order by title`,
    [nationalPartOf(phone), email],
  );
  return rows
    .map(({ id, title, body }) => ({ id, title, lines: body.split(/\r?\n/).filter((line) => proseNamesPerson(line, phone, email)) }))
    .filter((document) => document.lines.length > 0);
}

/**
 * What an admin is told about documents that still name an erased person ('' when none do):
 * their titles, the first `upTo` of them.
 */
export function documentsNamingText(documents: Array<{ title: string }>, upTo = Infinity): string {
  if (documents.length === 0) return '';
  const more = documents.length > upTo ? ` and ${documents.length - upTo} more` : '';
  const titles = documents.slice(0, upTo).map((d) => `"${d.title}"`).join(', ') + more;
  return `${documents.length} knowledge document(s) still name this number or email: ${titles}. Documents are not edited by an erasure: replace each without those lines (add it again under the same title) or remove it.`;
}

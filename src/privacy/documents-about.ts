// Knowledge documents that name a person by their number or email: a "who does what" page,
// an on-call list. They are the organisation's own texts, written and kept by people, and a
// line taken out of one can change what the rest says, so erasure does not edit them: it
// names them, for the admin to edit or remove (which re-indexes them), and export hands
// over their lines about the person.
import type { Queryable } from '../db/types.ts';
import { digitsArePhone, nationalPartOf } from './phone-forms.ts';

export interface DocumentAboutPerson {
  id: string;
  title: string;
  /** The lines of the document that name the person, as written. */
  lines: string[];
}

// A number as people write it in running text: digits with spaces, dots, dashes, slashes or
// brackets between them, perhaps after a +. It may run into a neighbouring number
// ("kamer 2.14 06 1234 5678"), so its groups are tried in every contiguous run.
const WRITTEN_NUMBER = /\+?[0-9][0-9 ()./-]*[0-9]/g;

/** Whether a line of running text names the person: their number in any usual spelling, or their email as a whole address. */
export function proseNamesPerson(line: string, phone: string, email: string | null): boolean {
  for (const [run] of line.matchAll(WRITTEN_NUMBER)) {
    const groups = run.split(/[^0-9]+/).filter(Boolean);
    for (let from = 0; from < groups.length; from++) {
      let written = '';
      for (let to = from; to < groups.length; to++) {
        written += groups[to];
        if (digitsArePhone(written, phone)) return true;
      }
    }
  }
  if (email === null) return false;
  const address = email.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  // Not inside a longer address (marjo@ for jo@); a full stop that ends the sentence may follow.
  return new RegExp(`(?<![a-z0-9._%+-])${address}(?![a-z0-9-]|\\.[a-z0-9])`, 'i').test(line);
}

/**
 * The documents with a line that names the person (proseNamesPerson), with those lines: a
 * superset found in SQL first (the national digits anywhere in the body, or the email), then
 * line by line.
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

/** What an admin is told about documents that still name an erased person; '' when none do. */
export function documentsNamingText(documents: Array<{ title: string }>): string {
  if (documents.length === 0) return '';
  const titles = documents.map((d) => `"${d.title}"`).join(', ');
  return `${documents.length} knowledge document(s) still name this number or email: ${titles}. Documents are not edited by an erasure: replace each without those lines (add it again under the same title) or remove it.`;
}

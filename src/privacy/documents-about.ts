// Knowledge documents that name a person by their number or email: a "who does what" page,
// an on-call list. They are the organisation's own texts, written and kept by people, and a
// line taken out of one can change what the rest says, so erasure does not edit them: it
// names them, for the admin to edit or remove (which re-indexes them), and export hands
// over their lines about the person.
import type { Queryable } from '../db/types.ts';
import { nationalPartOf, personMatcher } from './written-forms.ts';

export interface DocumentAboutPerson {
  id: string;
  title: string;
  /** The lines of the document that name the person, as written. */
  lines: string[];
}

/**
 * The documents with a line that names the person (personMatcher's prose), with those lines: a
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
  const names = personMatcher(phone, email);
  return rows
    .map(({ id, title, body }) => ({ id, title, lines: body.split(/\r?\n/).filter(names.prose) }))
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

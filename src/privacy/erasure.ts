// Erasing a person on request (GDPR art. 17): their contact, conversations, messages,
// suggestions, person record and its embedding, the jobs about them (their payloads, results
// and errors), their lines in stored CSV uploads and any error text that names their number,
// in one transaction with an audit record that says how much was erased, not whose.
// Knowledge documents that name them are named in the outcome, not edited
// (documents-about.ts says why).
//
// Safe while a job for them runs: its job row is gone, so its fenced completion changes
// nothing, and a reply it tries to store fails on the deleted conversation; nothing is
// re-created afterwards. A message that arrives later from the same number is a new contact,
// opted out if this one was. It leaves a record that holds no personal data (suppression.ts:
// keyed hashes of the number and the email address, and the opt-out), so that no people
// sync or import brings them back and a STOP outlives the erasure.
import type { Database, Queryable } from '../db/types.ts';
import { phoneToE164, phoneWithTrunkZero, phoneWrittenE164 } from '../knowledge/people.ts';
import { auditRecord } from './audit.ts';
import { suppressionRecord, type ErasedOptOut } from './suppression.ts';
import { documentsAboutPerson } from './documents-about.ts';
import { emailPattern, nationalPartOf, personMatcher, spelledNumberPattern } from './written-forms.ts';
import { csvLayoutOf } from '../knowledge/csv-import.ts';
import { textDecode } from '../knowledge/text-encoding.ts';

export class ErasureInputError extends Error {
  override name = 'ErasureInputError';
}

/** The erasure cannot run now (the reason says until when); nothing was erased. */
class ErasureBusyError extends Error {
  override name = 'ErasureBusyError';
}

export interface ErasureCounts {
  contacts: number;
  people: number;
  conversations: number;
  messages: number;
  jobs: number;
  importsScrubbed: number;
  textsScrubbed: number;
}

/**
 * `busy`: refused for now (ErasureBusyError's reason), nothing erased. `documentsNamingThem`:
 * knowledge documents that still name them (documents-about.ts), for the admin to edit.
 */
export type ErasureOutcome =
  | { status: 'erased'; counts: ErasureCounts; documentsNamingThem: Array<{ id: string; title: string }>; purgeFailed?: string }
  | { status: 'not_found'; documentsNamingThem: Array<{ id: string; title: string }> }
  | { status: 'busy'; reason: string };

/** The number in E.164, or an ErasureInputError that says what is wrong with it. */
export function erasurePhone(raw: string): string {
  const phone = phoneWrittenE164(raw);
  if (!phone) throw new ErasureInputError(`"${raw}" is not a phone number in international form (e.g. +31612345678)`);
  return phone;
}

/**
 * Every form the number is held under: as typed, as WhatsApp and the people table write it
 * now (+31612345678), and as a person record imported before the trunk 0 after the country
 * code was dropped holds it (+310612345678), whichever way it was typed. "+31 06 …" looked
 * up only as typed missed the person's WhatsApp contact (export said nothing was held,
 * erasure "not found"); "+31 6 …" missed such a person record, which kept their name and
 * email after the erasure.
 */
export function erasurePhones(raw: string): string[] {
  const written = erasurePhone(raw);
  const current = phoneToE164(raw) ?? written;
  return [...new Set([written, current, phoneWithTrunkZero(current) ?? written])];
}

/**
 * The jobs about a person, by what they are about: their conversations ($1: ordering key or
 * payload), their messages ($2), or their person record ($3). Erasure deletes them; export
 * lists them.
 */
export const JOBS_ABOUT_PERSON = `
  ordering_key = any($1::text[])
  or payload->>'conversationId' = any($1::text[])
  or payload->>'messageId' = any($2::text[])
  or (payload->>'table' = 'people' and payload->>'id' = $3::text)`;

const JOBS_DELETE_SQL = `delete from ai_jobs where ${JOBS_ABOUT_PERSON} returning id`;

// Any other text that names the number ($1) or quotes their email ($2; a pattern that
// matches nothing when there is none): a Twilio error in another job's history or on
// another contact's reply, an import's row error. Its national part (nationalPartOf) gives
// way to a marker, written as people write numbers (spelledNumberPattern), which covers
// "+31612345678", "0612345678" and "06 1234 5678" alike, and so does the address. Export
// hands over what these conditions find.
const naming = (column: string) => `${column} ~ $1 or ${column} ~* $2`;
export const JOB_TEXTS_NAMING_PERSON = ['last_error', 'errors::text', 'result::text', 'payload::text'].map(naming).join(' or ');
export const IMPORT_TEXTS_NAMING_PERSON = ['row_errors::text', 'error'].map(naming).join(' or ');
export const MESSAGE_ERRORS_NAMING_PERSON = naming('error_message');
const scrubbed = (expr: string) => `regexp_replace(regexp_replace(${expr}, $1, '[erased]', 'g'), $2, '[erased]', 'gi')`;
const TEXTS_SCRUB_SQL = `
  with jobs as (
    update ai_jobs set last_error = ${scrubbed('last_error')},
                       errors = ${scrubbed('errors::text')}::jsonb,
                       result = ${scrubbed('result::text')}::jsonb,
                       payload = ${scrubbed('payload::text')}::jsonb
    where ${JOB_TEXTS_NAMING_PERSON}
    returning 1
  ), imports as (
    update imports set row_errors = ${scrubbed('row_errors::text')}::jsonb,
                       error = ${scrubbed('error')}
    where ${IMPORT_TEXTS_NAMING_PERSON}
    returning 1
  ), message_errors as (
    update messages set error_message = ${scrubbed('error_message')}
    where ${MESSAGE_ERRORS_NAMING_PERSON}
    returning 1
  )
  select (select count(*) from jobs)::int + (select count(*) from imports)::int + (select count(*) from message_errors)::int as n`;

/**
 * An upload's lines, byte for byte: decoded as latin1, which maps every byte to one
 * character and back, so an upload in any encoding (UTF-8, Excel's Windows-1252 or UTF-16,
 * a stray NUL) is matched and rewritten without harm to its other lines.
 */
function uploadLines(content: Uint8Array): string[] {
  // PGlite hands bytea over as a Uint8Array, node-postgres as a Buffer.
  return Buffer.from(content.buffer, content.byteOffset, content.byteLength).toString('latin1').split('\n');
}

/**
 * An empty line in place of one of uploadLines, in its encoding: in UTF-16 (or UTF-16 read
 * as UTF-8) a line between two LF bytes holds the NUL that pairs with one of them, which
 * keeps the characters after it aligned; a CRLF file keeps its CR.
 */
function blankLine(line: string): string {
  if (line.startsWith('\0')) return '\0';
  return line.endsWith('\r') ? '\r' : '';
}

/**
 * A line of uploadLines as text, to match and to show: UTF-8 without NULs. A UTF-16 file
 * read as UTF-8 by its sender (a people sync did until it decoded its source, an API client
 * may) holds a NUL between every two ASCII characters, its digits and addresses only whole
 * without them.
 */
const uploadLineText = (line: string): string => Buffer.from(line, 'latin1').toString('utf8').replaceAll('\0', '').replace(/\r$/, '');

/**
 * The text of each of uploadLines, decoded as the import decodes the file (text-encoding.ts):
 * the Windows-1252 that Excel saves in Western Europe, or UTF-16, whose names were handed over
 * with U+FFFD for every accent when each line was read as UTF-8. Line by line (uploadLineText)
 * where the decoded text has other line breaks than the bytes (a UTF-16 character with a 0x0A
 * byte in it).
 */
function uploadTexts(content: Uint8Array, lines: string[]): string[] {
  const decoded = textDecode(content).split('\n');
  if (decoded.length !== lines.length) return lines.map(uploadLineText);
  return decoded.map((text) => text.replaceAll('\0', '').replace(/\r$/, ''));
}

/**
 * The rows of an upload as the import numbers them (csv-import.ts: the header is row 1), each
 * with its lines (0-based indexes into `texts`, uploadTexts'): a record whose quoted cell
 * holds line breaks (an address, as Google Contacts and Outlook write one) is one row over
 * several lines, Excel's `sep=` line above the header is no row, and an empty line is one.
 * Going by lines, an erasure left the rest of such a record (their address) in the upload,
 * and export and erasure took the row error of another row for theirs (a line number is a
 * row number only until the first such record or `sep=` line).
 */
function uploadRows(texts: string[]): Array<{ row: number; lines: number[] }> {
  // Without a byte order mark (as UTF-8 reads a UTF-16 one: two U+FFFD), as the import reads it.
  const { delimiter, separatorLine } = csvLayoutOf(texts.map((text, i) => (i === 0 ? text.replace(/^(\ufeff|\ufffd\ufffd)/, '') : text)));
  const rows: Array<{ row: number; lines: number[] }> = [];
  let open: { row: number; lines: number[] } | null = null;
  for (let i = separatorLine ? 1 : 0; i < texts.length; i++) {
    const quoted = open !== null;
    if (open) open.lines.push(i);
    else rows.push((open = { row: rows.length + 1, lines: [i] }));
    if (!quoteOpenAtEnd(texts[i]!, quoted, delimiter)) open = null;
  }
  // A quote never closed (a broken file): the import could not read past it, and it is no
  // record of anyone's. Line by line, so that no one's row takes the lines below it along.
  if (open && open.lines.length > 1) rows.splice(rows.length - 1, 1, ...open.lines.map((line, n) => ({ row: open!.row + n, lines: [line] })));
  return rows;
}

/**
 * Whether a quoted cell goes on past the end of this line, as csv-parse reads it: a quote
 * opens a cell only at its start (after leading spaces: ltrim), "" inside is one quote, and
 * a quote elsewhere is kept as written (relax_quotes).
 */
function quoteOpenAtEnd(line: string, inQuotes: boolean, delimiter: string): boolean {
  let quoted = inQuotes;
  let cellStart = !inQuotes;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quoted) {
      if (c === '"' && line[i + 1] === '"') i++;
      else if (c === '"') quoted = false;
    } else if (c === delimiter) cellStart = true;
    else if (cellStart && c === '"') {
      quoted = true;
      cellStart = false;
    } else if (!(cellStart && (c === ' ' || c === '\t'))) cellStart = false;
  }
  return quoted;
}

/**
 * Stored uploads with a row about the person, with their import's status, their lines
 * (uploadLines) and their texts (uploadTexts), which of those (1-based) are the person's rows' (`about`) and those rows'
 * numbers as the import gave them (`rows`, what row errors name): a cheap test in SQL on the
 * bytes first (escape-encoded, so no upload's encoding can fail it, its NULs dropped as
 * uploadTexts drops them; a superset), then personMatcher's cells line by line, a row
 * being theirs when one of its lines is (uploadRows). `lock` takes the rows (erasure).
 */
export async function uploadsAboutPerson(db: Queryable, phone: string, email: string | null, lock = false): Promise<Array<{ id: string; status: string; lines: string[]; texts: string[]; about: number[]; rows: Array<{ row: number; lines: number[] }> }>> {
  // Of the digits test: encode's octal escapes (\ooo: a NUL, any byte of a non-ASCII
  // character, such as the no-break space Word puts in "06 1234 5678") are dropped whole, so
  // their digits cannot split the number's; an escaped backslash (\\) is dropped whole first,
  // so that it cannot pass for the start of one.
  const { rows } = await db.query<{ id: string; status: string; content: Uint8Array }>(
    `select id, status, content from imports where content is not null
       and (regexp_replace(encode(content, 'escape'), '\\\\\\\\|\\\\[0-7]{3}|[^0-9\n]', '', 'g') like '%' || $1 || '%'
            or ($2::text is not null and position(lower(encode(convert_to($2, 'UTF8'), 'escape'))
                                                  in lower(regexp_replace(encode(content, 'escape'), '\\\\000', '', 'g'))) > 0))
     ${lock ? 'for update' : ''}`,
    [nationalPartOf(phone), email],
  );
  const names = personMatcher(phone, email);
  return rows
    .map(({ id, status, content }) => {
      const lines = uploadLines(content);
      const texts = uploadTexts(content, lines);
      const theirs = uploadRows(texts).filter((row) => row.lines.some((i) => names.cells(texts[i]!)));
      return { id, status, lines, texts, about: theirs.flatMap((row) => row.lines.map((i) => i + 1)), rows: theirs };
    })
    .filter((upload) => upload.about.length > 0);
}

/** The documents as an erasure names them: which, not their lines. */
const titlesOf = (documents: Array<{ id: string; title: string }>) => documents.map(({ id, title }) => ({ id, title }));

// An erasure crosses the rows a running reply holds (its job, its conversation): PostgreSQL
// may pick the erasure as a deadlock's victim. It is one transaction, so it runs again.
const RETRYABLE = new Set(['40P01', '40001']);

// What an erasure deletes or rewrites rows of: on the embedded database these are written
// anew without the old row versions afterwards (Database.purgeDeleted), so that a backup
// taken after the erasure does not hold the person (found by a personal-data probe: the
// rows were deleted, their bytes still in the files and the log that a backup copies).
const ERASURE_TABLES = ['contacts', 'conversations', 'messages', 'message_media', 'suggestions', 'people', 'ai_jobs', 'imports', 'ai_usage'] as const;

export async function personErase(db: Database, rawPhone: string, actor: string): Promise<ErasureOutcome> {
  const phones = erasurePhones(rawPhone);
  // Recorded before the rows go: a process killed between the erasure and its purge (or in
  // it) purges when it next opens the database (found by an operations probe).
  const pendingBefore = db.purgePending?.(ERASURE_TABLES) ?? false;
  const outcome = await eraseWithRetries(db, phones, actor).catch((err: unknown) => {
    if (!pendingBefore) db.purgePending?.(null);
    throw err;
  });
  if (outcome.status !== 'erased' || !db.purgeDeleted) {
    if (!pendingBefore) db.purgePending?.(null);
    return outcome;
  }
  try {
    await db.purgeDeleted(ERASURE_TABLES);
    return outcome;
  } catch (err) {
    return { ...outcome, purgeFailed: `the database files could not be rewritten without the deleted rows (${(err as Error).message}), so a backup taken now may still hold them: aiq rewrites them when it next starts (make room on the disk first)` };
  }
}

async function eraseWithRetries(db: Database, phones: string[], actor: string): Promise<ErasureOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await eraseOnce(db, phones, actor);
    } catch (err) {
      if (err instanceof ErasureBusyError) return { status: 'busy', reason: err.message };
      if (attempt >= 5 || !RETRYABLE.has((err as { code?: string }).code ?? '')) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

async function eraseOnce(db: Database, phones: string[], actor: string): Promise<ErasureOutcome> {
  return db.transaction(async (tx) => {
    // Each form the number is held under (erasurePhones), in one transaction, one audit record.
    const counts: ErasureCounts = { contacts: 0, people: 0, conversations: 0, messages: 0, jobs: 0, importsScrubbed: 0, textsScrubbed: 0 };
    const documents = new Map<string, { id: string; title: string }>();
    const emails: string[] = [];
    // undefined: no contact erased (an earlier erasure's opt-out stands).
    let optOut: ErasedOptOut | null | undefined;
    for (const phone of phones) {
      const erased = await eraseForm(tx, phone);
      for (const key of Object.keys(counts) as Array<keyof ErasureCounts>) counts[key] += erased.counts[key];
      for (const document of erased.documents) documents.set(document.id, document);
      if (erased.email) emails.push(erased.email);
      if (erased.optOut !== undefined) optOut = optOut ?? erased.optOut;
    }
    // Without a contact or a person record their number can still be held: a line of a
    // stored upload whose row was refused, an error text that quotes it.
    if (counts.contacts + counts.people + counts.importsScrubbed + counts.textsScrubbed === 0) {
      await auditRecord(tx, { actor, action: 'erase', result: 'not_found', details: { documentsNamingThem: documents.size } });
      return { status: 'not_found', documentsNamingThem: titlesOf([...documents.values()]) } as const;
    }
    // The person's email is gone with their record: its hash is kept so that a list which
    // still has them under another number is recognised too.
    await suppressionRecord(tx, phones[0]!, emails, optOut);
    await auditRecord(tx, { actor, action: 'erase', result: 'ok', details: { ...counts, documentsNamingThem: documents.size } });
    return { status: 'erased', counts, documentsNamingThem: titlesOf([...documents.values()]) } as const;
  });
}

/** Erases what is held under one form of the number, inside the caller's transaction. */
async function eraseForm(tx: Queryable, phone: string): Promise<{ counts: ErasureCounts; documents: Array<{ id: string; title: string }>; email: string | null; optOut?: ErasedOptOut | null }> {
  // Row locks first: a webhook for this number waits, then finds no contact and makes a new one.
  const contact = (await tx.query<{ id: string; opted_out_at: Date | null; opted_out_by: 'contact' | 'admin' | null }>(
    'select id, opted_out_at, opted_out_by from contacts where whatsapp_number = $1 for update', [phone])).rows[0];
  const person = (await tx.query<{ id: string; name: string; email: string | null }>('select id, name, email from people where phone = $1 for update', [phone])).rows[0];
  const conversations = contact ? (await tx.query<{ id: string }>('select id from conversations where contact_id = $1', [contact.id])).rows.map((r) => r.id) : [];
  const messages = (await tx.query<{ id: string }>('select id from messages where conversation_id = any($1::uuid[])', [conversations])).rows.map((r) => r.id);
  const jobs = await tx.query(JOBS_DELETE_SQL, [conversations, messages, person?.id ?? null]);
  // Usage rows stay for the cost figures; their link to the erased rows goes.
  await tx.query('update ai_usage set subject_id = null where subject_id = any($1::uuid[])', [[...messages, ...(person ? [person.id] : [])]]);
  if (contact) await tx.query('delete from contacts where id = $1', [contact.id]); // cascades: conversations, messages, suggestions
  if (person) await tx.query('delete from people where id = $1', [person.id]);
  const importsScrubbed = await uploadsScrub(tx, phone, person?.email ?? null);
  const textsScrubbed = (await tx.query<{ n: number }>(TEXTS_SCRUB_SQL, [spelledNumberPattern(nationalPartOf(phone)), emailPattern(person?.email ?? null)])).rows[0]!.n;
  const documents = await documentsAboutPerson(tx, phone, person?.email ?? null);
  return {
    counts: {
      contacts: contact ? 1 : 0,
      people: person ? 1 : 0,
      conversations: conversations.length,
      messages: messages.length,
      jobs: jobs.rowCount,
      importsScrubbed,
      textsScrubbed,
    },
    documents: titlesOf(documents),
    email: person?.email ?? null,
    // Kept by the erasure's record (suppression.ts): a contact who wrote STOP stays opted out.
    ...(contact ? { optOut: contact.opted_out_at ? { optedOutAt: contact.opted_out_at, optedOutBy: contact.opted_out_by ?? 'contact' } : null } : {}),
  };
}

/**
 * An upload's lines (uploadLines) with `rows` (uploadRows') blanked: each becomes one empty
 * line, which the import skips, so the rows after it keep the numbers their row errors name.
 */
function rowsBlanked(lines: string[], rows: Array<{ lines: number[] }>): string[] {
  const firstLines = new Set(rows.map((row) => row.lines[0]!));
  const theirs = new Set(rows.flatMap((row) => row.lines));
  return lines.flatMap((line, i) => (firstLines.has(i) ? [blankLine(line)] : theirs.has(i) ? [] : [line]));
}

/**
 * Blanks rows (by the numbers the import gave them) in an upload kept in the database, as an
 * erasure blanks a person's: an import calls it for the rows it skipped as erased, once it
 * has read the whole upload (it reads it in slices by offset). Row errors are left as they are.
 */
export async function uploadRowsBlank(tx: Queryable, importId: string, rowNumbers: number[]): Promise<void> {
  if (rowNumbers.length === 0) return;
  const content = (await tx.query<{ content: Uint8Array | null }>('select content from imports where id = $1 for update', [importId])).rows[0]?.content;
  // A file the worker read from disk is not kept here.
  if (!content) return;
  const lines = uploadLines(content);
  const wanted = new Set(rowNumbers);
  const rows = uploadRows(uploadTexts(content, lines)).filter((row) => wanted.has(row.row));
  await tx.query('update imports set content = $2 where id = $1', [importId, Buffer.from(rowsBlanked(lines, rows).join('\n'), 'latin1')]);
}

/**
 * Removes the person's lines (uploadsAboutPerson) from CSV uploads kept in the database. An
 * import reading such an upload is refused: it reads the bytes in slices by offset, so it
 * would bring back the lines it read already and misread the rest. The row locks make an
 * import about to start wait for this erasure, and then read the upload without them.
 */
async function uploadsScrub(tx: Queryable, phone: string, email: string | null): Promise<number> {
  const rows = await uploadsAboutPerson(tx, phone, email, true);
  if (rows.some((row) => row.status === 'running')) {
    throw new ErasureBusyError("an import of a file that names this person is running: erase once it has finished (the dashboard's Imports page shows it)");
  }
  for (const upload of rows) {
    const kept = rowsBlanked(upload.lines, upload.rows);
    // The row errors of their rows go with them (a rejected address, a name): export hands
    // those over as theirs.
    await tx.query(
      `update imports set content = $2,
         row_errors = (select coalesce(jsonb_agg(e order by n), '[]') from jsonb_array_elements(row_errors) with ordinality as r(e, n)
                       where not coalesce((e->>'line')::int = any($3::int[]), false))
       where id = $1`,
      [upload.id, Buffer.from(kept.join('\n'), 'latin1'), upload.rows.map((row) => row.row)],
    );
  }
  return rows.length;
}

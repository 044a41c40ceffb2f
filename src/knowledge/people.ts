// The people table (employees the assistant talks to): phone normalisation to E.164, the
// content hash that makes re-imports no-ops, batch upserts by phone, look-ups, and how a
// record reads as text (for prompts). Knows nothing of CSV or providers.
import { createHash } from 'node:crypto';
import { phoneSearchDigits } from '../db/like.ts';
import type { Queryable } from '../db/types.ts';
import { emailsReplaced } from '../logger.ts';

export interface PersonInput {
  name: string;
  /** E.164 (see `phoneToE164`). */
  phone: string;
  email?: string | null;
  department?: string | null;
  role?: string | null;
  attributes?: Record<string, string>;
}

export interface Person extends Required<Omit<PersonInput, 'attributes'>> {
  id: string;
  attributes: Record<string, string>;
  contentHash: string;
}

/**
 * Normalises a phone number to E.164 (`+` and 7–15 digits, no leading zero), or returns
 * null. Accepts the usual ways of writing one: spaces, dashes, dots, brackets, an `00`
 * international prefix, a `whatsapp:` prefix and a Dutch-style `(0)` after the country
 * code. A national number without a country code is refused rather than guessed.
 */
export function phoneToE164(raw: string): string | null {
  const e164 = phoneWrittenE164(raw);
  return e164 && withoutTrunkZero(e164);
}

/**
 * The number as written, in E.164, keeping a trunk 0 after the country code: erasure and
 * export look a number up as the operator types it, so a record imported before that 0 was
 * dropped (+310612345678) can still be found, and erased, by it.
 */
export function phoneWrittenE164(raw: string): string | null {
  // Invisible marks are no part of a number: a number copied from WhatsApp, Outlook or
  // Teams comes between direction marks (U+202A … U+202C), and a word processor types
  // its own hyphens and dashes. Kept, they refused a number that looks right on screen.
  let text = raw
    .replace(/\p{Cf}/gu, '')
    .replace(/[\u2010-\u2015\u2212]/g, '-')
    .trim()
    .replace(/^whatsapp:/i, '');
  text = text.replace(/\(0\)/g, '');
  if (!/^[+\d][\d\s().\-/]*$/.test(text)) return null;
  let digits = text.replace(/[^\d+]/g, '');
  if (digits.startsWith('00')) digits = `+${digits.slice(2)}`;
  return /^\+[1-9]\d{6,14}$/.test(digits) ? digits : null;
}

/**
 * A search box's text as the digit runs to look for in a stored number (contacts and people
 * hold E.164), for `like any`: a number in international form as it is held (the trunk 0
 * after the country code dropped, a `whatsapp:` prefix as Twilio's console shows it), and as
 * a person record imported before that 0 was dropped holds it (+310612345678, which "+31 06
 * …" found before); else as phoneSearchDigits reads it (national forms, parts of a number);
 * null for text that is no number.
 */
export function phoneSearchOf(search: string): string[] | null {
  const e164 = phoneToE164(search);
  if (!e164) {
    const digits = phoneSearchDigits(search);
    return digits ? [`%${digits}%`] : null;
  }
  const withZero = phoneWithTrunkZero(e164);
  return [e164, ...(withZero ? [withZero] : [])].map((form) => `%${form.slice(1)}%`);
}

// Country codes of two digits (ITU E.164); 1 and 7 have one; every other has three.
const TWO_DIGIT_CODES = new Set('20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 60 61 62 63 64 65 66 81 82 84 86 90 91 92 93 94 95 98'.split(' '));
// Where a national number itself begins with 0 (Italy's landlines, Côte d'Ivoire, Benin, …).
const ZERO_KEPT = new Set(['39', '225', '229', '241', '242', '378', '379']);

/** How many of an international number's digits (no +) are its country code. */
export function countryCodeLength(digits: string): number {
  return digits[0] === '1' || digits[0] === '7' ? 1 : TWO_DIGIT_CODES.has(digits.slice(0, 2)) ? 2 : 3;
}

/**
 * "+31 06 12345678" (the national trunk 0 written after the country code) is +31612345678:
 * as written it matches no WhatsApp sender, so the person's record would never be found.
 */
function withoutTrunkZero(e164: string): string {
  const digits = e164.slice(1);
  const codeLength = countryCodeLength(digits);
  const code = digits.slice(0, codeLength);
  if (digits[codeLength] !== '0' || ZERO_KEPT.has(code)) return e164;
  return `+${code}${digits.slice(codeLength + 1)}`;
}

/**
 * The form an import before the trunk 0 was dropped stored an E.164 number under
 * (+31612345678 as +310612345678), or null where there is none (a country whose numbers
 * begin with their 0, a number that already does, or one that would be too long).
 */
export function phoneWithTrunkZero(e164: string): string | null {
  const digits = e164.slice(1);
  const codeLength = countryCodeLength(digits);
  const code = digits.slice(0, codeLength);
  if (digits[codeLength] === '0' || ZERO_KEPT.has(code) || digits.length >= 15) return null;
  return `+${code}0${digits.slice(codeLength)}`;
}

/** sha256 over the fields that make up the record, keys sorted: equal content, equal hash. */
export function personContentHash(person: PersonInput): string {
  const attributes = Object.fromEntries(Object.entries(person.attributes ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  const canonical = JSON.stringify([person.name, person.phone, person.email ?? null, person.department ?? null, person.role ?? null, attributes]);
  return createHash('sha256').update(canonical).digest('hex');
}

/** The record as lines of `Field: value` (what the prompt shows). */
export function personText(person: PersonInput, fields: readonly PersonTextField[] = PERSON_TEXT_FIELDS): string {
  const shown = new Set(fields);
  const lines: string[] = [];
  if (shown.has('name')) lines.push(`Name: ${person.name}`);
  if (shown.has('phone')) lines.push(`Phone: ${person.phone}`);
  if (shown.has('email') && person.email) lines.push(`Email: ${person.email}`);
  if (shown.has('department') && person.department) lines.push(`Department: ${person.department}`);
  if (shown.has('role') && person.role) lines.push(`Role: ${person.role}`);
  if (shown.has('attributes')) {
    for (const [key, value] of Object.entries(person.attributes ?? {})) {
      // An email address or a phone number in a further column ("Privé mobiel", a note
      // that gives one) is left out unless its kind is shown: "not email or phone" held only
      // for the named columns (found by a personal-data probe; in review, with words around
      // them too). The rest of the column stays; one that held nothing else goes.
      const shownValue = contactDetailsHidden(value ?? '', { email: shown.has('email'), phone: shown.has('phone') });
      if (shownValue) lines.push(`${key}: ${shownValue}`);
    }
  }
  return lines.join('\n');
}

// A date, or nine digits or more in a run with the spaces, dashes, dots and brackets numbers
// are written with ("06-1234 5678", "31612345678" as a spreadsheet keeps it, "+31 (0)6 …"):
// the dates stay, the runs are numbers.
const DATE_OR_DIGIT_RUN = /(\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}(?!\d))|\+?\d(?:[\s().\-\u00a0]{0,2}\d){8,}/g;

/** `value` with its email addresses and phone numbers left out, as `shows` asks; '' when nothing else was in it. */
function contactDetailsHidden(value: string, shows: { email: boolean; phone: boolean }): string {
  let hidden = value;
  if (!shows.email) hidden = emailsReplaced(hidden, () => '[email]');
  if (!shows.phone) hidden = hidden.replace(DATE_OR_DIGIT_RUN, (run, date: string | undefined) => date ?? '[phone number]');
  return /^[\s[\]();,.:\-]*(?:(?:email|phone number)[\s[\]();,.:\-]*)*$/.test(hidden) ? '' : hidden.trim();
}

/** The parts of a person record `personText` can show (PROMPT_PERSON_FIELDS picks for prompts). */
export const PERSON_TEXT_FIELDS = ['name', 'phone', 'email', 'department', 'role', 'attributes'] as const;
export type PersonTextField = (typeof PERSON_TEXT_FIELDS)[number];

export interface UpsertOutcome {
  inserted: string[];
  updated: string[];
  unchanged: number;
}

// One statement per batch. A row whose content hash is unchanged is not touched at all
// (the WHERE on DO UPDATE), so re-importing a file writes nothing and enqueues nothing.
// `xmax = 0` tells a fresh insert from an update of an existing row.
const UPSERT_SQL = `
  insert into people (name, phone, email, department, role, attributes, content_hash)
  select * from unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[], $7::text[])
  on conflict (phone) do update
  set name = excluded.name, email = excluded.email, department = excluded.department, role = excluded.role,
      attributes = excluded.attributes, content_hash = excluded.content_hash, updated_at = now()
  where people.content_hash is distinct from excluded.content_hash
  returning id, (xmax = 0) as inserted`;

/**
 * What a partial source (a CSV with some columns) carries: the optional fields and the
 * attribute names it has columns for. A stored person keeps every other field and attribute;
 * an empty cell in a column the source has clears that one.
 */
export interface PersonColumns {
  fields: ReadonlyArray<'email' | 'department' | 'role'>;
  attributes: readonly string[];
}

/** How column names compare, headers and stored attributes alike: without case, spaces or punctuation. */
export function columnNameKey(name: string): string {
  return name.toLowerCase().replace(/[^\p{L}\p{N}]/gu, '');
}

/** `people` with what `columns` leaves out taken from the stored records of the same phones. */
async function withStoredFields(db: Queryable, people: PersonInput[], columns: PersonColumns): Promise<PersonInput[]> {
  const { rows } = await db.query<Pick<PersonRow, 'phone' | 'email' | 'department' | 'role' | 'attributes'>>(
    'select phone, email, department, role, attributes from people where phone = any($1::text[])',
    [people.map((p) => p.phone)],
  );
  const stored = new Map(rows.map((row) => [row.phone, row]));
  const carried = new Set<string>(columns.fields);
  // A column names the stored attribute however its header is cased or spaced this time
  // ("Locatie" then "locatie", compared as headers are): kept under the old spelling, the
  // old value stayed beside the new one, and replies read both.
  const replaced = new Set(columns.attributes.map(columnNameKey));
  return people.map((person) => {
    const before = stored.get(person.phone);
    if (!before) return person;
    const kept = (field: 'email' | 'department' | 'role') => (carried.has(field) ? (person[field] ?? null) : before[field]);
    const attributes = Object.fromEntries(Object.entries(before.attributes ?? {}).filter(([name]) => !replaced.has(columnNameKey(name))));
    return { ...person, email: kept('email'), department: kept('department'), role: kept('role'), attributes: { ...attributes, ...person.attributes } };
  });
}

/**
 * Inserts or updates people by phone. Phones must be distinct within one call. Without
 * `columns` each record is replaced whole; with it, what the source has no column for is kept.
 */
export async function personUpsertMany(db: Queryable, input: PersonInput[], columns?: PersonColumns): Promise<UpsertOutcome> {
  if (input.length === 0) return { inserted: [], updated: [], unchanged: 0 };
  const people = columns ? await withStoredFields(db, input, columns) : input;
  const result = await db.query<{ id: string; inserted: boolean }>(UPSERT_SQL, [
    people.map((p) => p.name),
    people.map((p) => p.phone),
    people.map((p) => p.email ?? null),
    people.map((p) => p.department ?? null),
    people.map((p) => p.role ?? null),
    people.map((p) => JSON.stringify(p.attributes ?? {})),
    people.map((p) => personContentHash(p)),
  ]);
  const inserted = result.rows.filter((r) => r.inserted).map((r) => r.id);
  const updated = result.rows.filter((r) => !r.inserted).map((r) => r.id);
  return { inserted, updated, unchanged: people.length - result.rows.length };
}

interface PersonRow {
  id: string;
  name: string;
  phone: string;
  email: string | null;
  department: string | null;
  role: string | null;
  attributes: Record<string, string>;
  content_hash: string;
}

const PERSON_COLUMNS = 'id, name, phone, email, department, role, attributes, content_hash';

function personFromRow(row: PersonRow): Person {
  return {
    id: row.id,
    name: row.name,
    phone: row.phone,
    email: row.email,
    department: row.department,
    role: row.role,
    attributes: row.attributes ?? {},
    contentHash: row.content_hash,
  };
}

/** One person by id, or null. */
export async function personGet(db: Queryable, id: string): Promise<Person | null> {
  const result = await db.query<PersonRow>(`select ${PERSON_COLUMNS} from people where id = $1`, [id]);
  return result.rows[0] ? personFromRow(result.rows[0]) : null;
}

/** The person with this phone; `phone` may be in any form `phoneToE164` accepts. */
export async function personGetByPhone(db: Queryable, phone: string): Promise<Person | null> {
  const e164 = phoneToE164(phone);
  if (!e164) return null;
  const result = await db.query<PersonRow>(`select ${PERSON_COLUMNS} from people where phone = $1`, [e164]);
  return result.rows[0] ? personFromRow(result.rows[0]) : null;
}

// Importing people from CSV: the file is parsed as a stream (csv-parse), headers are mapped
// to fields, each row is validated (zod; phone to E.164), valid rows are upserted by phone in
// batches, and rejected rows are kept with their line numbers in the `imports` record.
// Memory stays bounded: one batch of rows plus one number per distinct phone seen.
// Knows nothing of the queue: the caller says what to do with new or changed people.
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { CsvError, parse } from 'csv-parse';
import { z } from 'zod';
import type { Database, Queryable } from '../db/types.ts';
import { suppressedAmong, suppressedReason } from '../privacy/suppression.ts';
import { uploadRowsBlank } from '../privacy/erasure.ts';
import { columnNameKey, personUpsertMany, phoneToE164, type PersonColumns, type PersonInput } from './people.ts';
import { textStreamDecoder } from './text-encoding.ts';
import { auditRecord } from '../privacy/audit.ts';
import { maskPhone } from '../logger.ts';

export type PersonField = 'name' | 'phone' | 'email' | 'department' | 'role';

/** A part of the name in a column of its own; the parts make the name in this order. */
type NamePart = 'firstName' | 'middleName' | 'lastName';
const NAME_PARTS: readonly NamePart[] = ['firstName', 'middleName', 'lastName'];

/**
 * Header names understood without configuration, compared as columnNameKey makes them
 * (`E-mail`, `Phone number`, `Mobiel nummer` …) and, failing that, without their accents
 * (`Téléphone`, as `Telephone` when an export lost them). English, Dutch (with Belgium's
 * `GSM`), French (Belgium's francophone exports) and German: the dashboard and the API take
 * no mapping, so a header not here cannot be imported from them without editing the file.
 * Any other column becomes a free attribute under its own header.
 */
export const HEADER_ALIASES: Record<string, PersonField> = {
  name: 'name', fullname: 'name', naam: 'name', employee: 'name', volledigenaam: 'name', naammedewerker: 'name',
  phone: 'phone', phonenumber: 'phone', mobile: 'phone', mobilephone: 'phone', mobilenumber: 'phone', cellphone: 'phone',
  telephone: 'phone', tel: 'phone', telefoon: 'phone', telefoonnummer: 'phone', mobiel: 'phone', whatsapp: 'phone', whatsappnummer: 'phone',
  mobielnummer: 'phone', mobieltelefoon: 'phone', mobieletelefoon: 'phone', mobieltelefoonnummer: 'phone', mobielenummer: 'phone', gsm: 'phone', gsmnummer: 'phone',
  telefon: 'phone', telefonnummer: 'phone', handy: 'phone', handynummer: 'phone', mobil: 'phone', mobilnummer: 'phone', mobiltelefon: 'phone',
  email: 'email', emailaddress: 'email', mail: 'email', emailadres: 'email', emailadresse: 'email',
  department: 'department', dept: 'department', afdeling: 'department', team: 'department', abteilung: 'department',
  role: 'role', title: 'role', jobtitle: 'role', functie: 'role', position: 'role', rol: 'role', functietitel: 'role', funktion: 'role',
  // French; "Nom" beside "Prénom" is the family name (nameIsFamilyName), as "Naam" beside "Voornaam".
  nom: 'name', nomcomplet: 'name', nometprenom: 'name', prenometnom: 'name',
  portable: 'phone', telephonemobile: 'phone', telephoneportable: 'phone', numerodetelephone: 'phone', numerogsm: 'phone', numerodegsm: 'phone', numerodeportable: 'phone',
  courriel: 'email', adressecourriel: 'email', adresseemail: 'email', adressemail: 'email', adresseelectronique: 'email',
  departement: 'department', service: 'department', fonction: 'role',
  // Google Contacts: "Organization 1 - Title" (older exports), "Organization Title" (newer).
  organization1title: 'role', organizationtitle: 'role', organization1department: 'department', organizationdepartment: 'department',
};

/**
 * Headers of a part of the name, as Excel lists, Outlook ("First Name", "Middle Name", "Last
 * Name"; in Dutch "Middelste naam", in German "Weitere Vornamen"), Google Contacts ("Given
 * Name", "Additional Name", "Family Name"; newer exports as Outlook) and Dutch, Belgian,
 * French and German HR systems ("Voornaam", "Tussenvoegsel"/"Voorvoegsel",
 * "Achternaam"/"Familienaam"; "Prénom", "Nom de famille"; "Vorname", "Nachname") write them.
 * The middle part goes between: "Jan" "van der" "Berg". A suffix (Outlook's "Suffix",
 * Google's "Name Suffix": Jr., MSc) is no part: like the title before the name (Dr.), which
 * no one is addressed by either, it stays an attribute of the record.
 */
const NAME_PART_ALIASES: Record<string, NamePart> = {
  firstname: 'firstName', givenname: 'firstName', forename: 'firstName', voornaam: 'firstName', roepnaam: 'firstName', vorname: 'firstName',
  voornamen: 'firstName', prenom: 'firstName',
  middlename: 'middleName', additionalname: 'middleName', middelstenaam: 'middleName', tussenvoegsel: 'middleName', tussenvoegsels: 'middleName',
  voorvoegsel: 'middleName', weiterevornamen: 'middleName', namensvorsatz: 'middleName',
  lastname: 'lastName', surname: 'lastName', familyname: 'lastName', achternaam: 'lastName', familienaam: 'lastName', nachname: 'lastName', familienname: 'lastName',
  nomdefamille: 'lastName',
};

/** Phone headers that name a mobile number, preferred to a landline's beside them; also a Google Contacts number's type. */
const MOBILE_HEADERS = new Set([
  'mobile', 'mobilephone', 'mobilenumber', 'cellphone', 'mobiel', 'mobieletelefoon', 'whatsapp', 'whatsappnummer', 'mobielnummer', 'mobieltelefoon', 'mobieltelefoonnummer',
  'mobielenummer', 'gsm', 'gsmnummer', 'handy', 'handynummer', 'mobil', 'mobilnummer', 'mobiltelefon',
  'portable', 'telephonemobile', 'telephoneportable', 'numerogsm', 'numerodegsm', 'numerodeportable', 'cell', 'workmobile',
]);

/**
 * Aliases that yield to another column of the same field, which then leaves them an
 * attribute: they were added after files holding both had imported ("Functie" and "Rol",
 * "Team" and "Abteilung": the role and the department, the other an attribute). Ranked
 * alike, such a file failed as a whole with "both map to role", in the dashboard and the
 * API with no mapping to give. Outlook's export has "Title" (Mr., Dr.) beside "Job Title",
 * and HR systems "Roepnaam" (the name used) beside "Voornaam" (the official one). The French
 * aliases and Google's are here for the same reason (a Flemish file with "Naam" and "Nom",
 * "GSM" and "Portable" imported before they were known), and so is a header that is an alias
 * only once its accents are taken off ("Téléphone" beside "Telefoon").
 */
const YIELDING_HEADERS = new Set([
  'naammedewerker', 'telefon', 'telefonnummer', 'emailadresse', 'abteilung', 'rol', 'functietitel', 'funktion', 'title', 'roepnaam',
  'nom', 'nomcomplet', 'nometprenom', 'prenometnom', 'prenom', 'nomdefamille', 'portable', 'telephonemobile', 'telephoneportable', 'numerodetelephone',
  'numerogsm', 'numerodegsm', 'numerodeportable', 'courriel', 'adressecourriel', 'adresseemail', 'adressemail', 'adresseelectronique', 'departement',
  'fonction', 'organization1title', 'organizationtitle', 'organization1department', 'organizationdepartment',
]);

/**
 * Columns that fill their field only where no other column does (they yield to the
 * yielding ones too). "Service" is the department in Belgian French, and below
 * "Département" where a file has both; in an English file it may be anything. "Voornamen"
 * (all official given names, as Dutch HR systems export them) is the first name only
 * without "Voornaam" or "Roepnaam", the name a person goes by. Google Contacts' numbered
 * columns (LISTED_HEADER) rank here too.
 */
const LAST_RESORT_HEADERS = new Set(['service', 'voornamen']);

/**
 * Google Contacts' numbered columns: "Phone 1 - Type" (older exports; "Phone 1 - Label" in
 * newer ones) beside "Phone 1 - Value", "Phone 2 - …", and "E-mail 1 - …" alike. Together
 * they fill the field (listedChoice says which value); a Value cell may hold several,
 * joined by " ::: ". They fill it only where no other column does: one that names the
 * number ("Mobile", "WhatsApp") added beside them is the one meant.
 */
const LISTED_HEADER = /^(phone|email)(\d+)(type|label|value)$/;

/** A header's key without its accents ("téléphone" → "telephone"), as exports that lose them write it. */
function foldAccents(key: string): string {
  return key.normalize('NFD').replace(/\p{M}/gu, '');
}

const BATCH_SIZE = 1000;
/** Row errors kept on the import record; the `rejected` count stays exact beyond it. */
const MAX_STORED_ROW_ERRORS = 1000;
// The masked numbers a complete list's audit entry names (the count is exact).
const AUDITED_REMOVALS = 100;
/** Bytes read per statement from an uploaded file stored in the database. */
const STORED_SLICE_BYTES = 1 << 20;

const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? null : v.trim()));

/**
 * What is wrong with an address, without quoting it: a row error is kept with the import
 * (the file's line says whose it is), and an erasure cannot find an address that was never
 * stored as anyone's, so the row error does not hold it.
 */
function emailFault(address: string): string {
  const at = address.split('@').length - 1;
  if (at === 0) return ' (it has no @)';
  if (at > 1) return ' (it has more than one @)';
  if (/\s/.test(address)) return ' (it holds a space)';
  const [local, domain] = address.split('@') as [string, string];
  if (!local) return ' (nothing before the @)';
  if (!domain.includes('.') || domain.endsWith('.')) return ' (the part after the @ is not a domain)';
  return '';
}

/**
 * Where a country's numbers all have one length, a number of another length is a typing
 * or spreadsheet error (a digit lost, a ".0" a number format added): stored, it matches no
 * WhatsApp sender and the person is silently never recognised. The Netherlands: 9 digits
 * after +31 (mobiles, landlines, 085/088), 11 for 097 (machine and business numbers);
 * Belgium: 8 (landlines) or 9 (mobiles).
 */
function nationalLengthFault(e164: string): string | null {
  const national = (code: string) => (e164.startsWith(`+${code}`) ? e164.slice(1 + code.length) : null);
  const nl = national('31');
  if (nl !== null && nl.length !== (nl.startsWith('97') ? 11 : 9)) return `has ${nl.length} digits after +31; a Dutch number has ${nl.startsWith('97') ? 11 : 9} (a digit missing or one too many?)`;
  const be = national('32');
  if (be !== null && be.length !== 8 && be.length !== 9) return `has ${be.length} digits after +32; a Belgian number has 8 or 9 (a digit missing or one too many?)`;
  return null;
}

/**
 * What a spreadsheet did to a number typed as +31612345678 or 0612345678, which it reads
 * as a number: the + or the 0 is gone; in a narrow column, or saved so, it is 3,16123E+10
 * and digits are gone too. Said as such, the row error tells the admin what to fix in the sheet.
 */
function spreadsheetFault(value: string): string | null {
  if (/^\d+([.,]\d+)?E\+?\d+$/i.test(value)) return 'is in scientific notation, as a spreadsheet shows a long number (its last digits are lost): format the column as text, type the numbers with their +, and export again';
  // Which it lost, the + before a country code or the 0 before a national number, the
  // digits do not tell (31612345678 is Dutch, 612345678 a Dutch mobile without its 0).
  if (/^[1-9]\d{5,14}$/.test(value)) return 'has neither a + nor a leading 0 (a spreadsheet drops both from a number): write it with its country code (e.g. +31612345678) in a column formatted as text';
  return null;
}

const rowSchema = z.object({
  name: z.string().trim().min(1, 'name is empty'),
  phone: z.string().transform((value, ctx) => {
    const e164 = phoneToE164(value);
    if (!e164) {
      ctx.addIssue({ code: 'custom', message: `phone "${value}" ${spreadsheetFault(value.trim()) ?? 'is not an international number (E.164 with country code, e.g. +31612345678)'}` });
      return z.NEVER;
    }
    const fault = nationalLengthFault(e164);
    if (fault) {
      ctx.addIssue({ code: 'custom', message: `phone "${value}" ${fault}` });
      return z.NEVER;
    }
    return e164;
  }),
  // Lower-cased: mail systems treat addresses case-insensitively, and equal rows must hash equal.
  email: optionalText.transform((v) => v?.toLowerCase() ?? null).pipe(z.email({ error: (issue) => `email is not a valid address${emailFault(String(issue.input))}` }).nullable()),
  department: optionalText,
  role: optionalText,
});

export interface RowError {
  line: number;
  reason: string;
}

export interface ImportCounts {
  rowsRead: number;
  inserted: number;
  updated: number;
  unchanged: number;
  rejected: number;
}

/** Rows skipped because their person was erased (privacy/suppression.ts); present when any were. */
export interface ImportSkipped {
  erasedSkipped?: number;
}

/** What a complete list's import removed (ImportRecord.prune), or why it removed no one. */
export interface ImportPruneOutcome {
  removed: number;
  pruneNote: string | null;
}

export interface ImportRunOptions {
  /** Explicit header → field mapping, for headers the aliases do not know. */
  headerMap?: Record<string, PersonField>;
  /** Called after each batch (progress display, lease heartbeat). */
  onProgress?(counts: ImportCounts): void | Promise<void>;
  signal?: AbortSignal;
  batchSize?: number;
  /**
   * For a complete list that no one looks at before it applies (the scheduled sync): remove
   * no one when that would remove more than half of the people (a source that answered a
   * first page, or one department, looks like a list of leavers).
   */
  pruneAtMostHalf?: boolean;
}

/** A problem with the file as a whole (no phone column, broken quoting): the import fails. */
export class ImportFileError extends Error {
  override name = 'ImportFileError';
}

// --- the imports table ------------------------------------------------------------------

export interface ImportRecord extends ImportCounts, ImportPruneOutcome {
  /** Rows skipped because their person was erased (each in rowErrors too). */
  erasedSkipped: number;
  id: string;
  filename: string;
  path: string | null;
  status: 'pending' | 'running' | 'done' | 'failed';
  rowErrors: RowError[];
  error: string | null;
  /** The file is the complete list: people not in it are removed when it ends. */
  prune: boolean;
  /** The header's line: above it, a title (skipped) or people's rows (row errors). */
  headerLine: number;
}

/** What an import whose header was not on line 1 says of the lines above it (CLI, dashboard). */
export function aboveHeaderNote(headerLine: number): string {
  const above = headerLine === 2 ? 'line 1 above it was' : `lines 1-${headerLine - 1} above it were`;
  return `the header is on line ${headerLine}: ${above} taken for a title and not imported (a row there with a phone number or an email address is listed as rejected)`;
}

/** Records an import of a file the worker can read at `path`, or of uploaded `content`. */
export async function importCreate(tx: Queryable, input: { filename: string; path?: string; content?: Uint8Array; prune?: boolean }): Promise<string> {
  if ((input.path === undefined) === (input.content === undefined)) throw new Error('an import needs either a path or the file content');
  const result = await tx.query<{ id: string }>('insert into imports (filename, path, content, prune) values ($1, $2, $3, $4) returning id', [
    input.filename,
    input.path ?? null,
    input.content ?? null,
    input.prune ?? false,
  ]);
  return result.rows[0]!.id;
}

/** An import with its counters and stored row errors, or null. */
export async function importGet(db: Queryable, id: string): Promise<ImportRecord | null> {
  const result = await db.query<{
    id: string; filename: string; path: string | null; status: ImportRecord['status']; rows_read: number; inserted: number;
    updated: number; unchanged: number; rejected: number; row_errors: RowError[]; error: string | null;
    prune: boolean; removed: number; prune_note: string | null; header_line: number; erased_skipped: number;
  }>(
    `select id, filename, path, status, rows_read, inserted, updated, unchanged, rejected, row_errors, error, prune, removed, prune_note, header_line, erased_skipped
     from imports where id = $1`,
    [id],
  );
  const r = result.rows[0];
  if (!r) return null;
  return {
    id: r.id, filename: r.filename, path: r.path, status: r.status, rowsRead: r.rows_read, inserted: r.inserted, updated: r.updated,
    unchanged: r.unchanged, rejected: r.rejected, rowErrors: r.row_errors, error: r.error,
    prune: r.prune, removed: r.removed, pruneNote: r.prune_note, headerLine: r.header_line, erasedSkipped: r.erased_skipped,
  };
}

/** Marks an import failed with the reason (a broken file, a retry that gave up). */
export async function importFail(db: Queryable, id: string, error: string): Promise<void> {
  await db.query(`update imports set status = 'failed', error = $2, finished_at = now() where id = $1 and status <> 'done'`, [id, error]);
}

/** The file's bytes as a stream: from disk, or in slices from the database (never whole). */
function importSource(db: Queryable, record: { id: string; path: string | null }): AsyncIterable<Uint8Array> {
  if (record.path) return createReadStream(record.path);
  return (async function* () {
    for (let offset = 1; ; offset += STORED_SLICE_BYTES) {
      const slice = await db.query<{ part: Uint8Array }>('select substring(content from $2 for $3) as part from imports where id = $1', [
        record.id,
        offset,
        STORED_SLICE_BYTES,
      ]);
      const part = slice.rows[0]?.part;
      if (!part || part.length === 0) return;
      yield part;
      if (part.length < STORED_SLICE_BYTES) return;
    }
  })();
}

// --- the import itself ------------------------------------------------------------------

/**
 * Runs an import to the end and returns its counts. Each batch commits on its own with its
 * counters, so progress is visible while it runs and a crash loses at most one batch; a
 * re-run (same file) then finds the committed rows unchanged. Counters describe this run.
 */
export async function importPeopleRun(db: Database, importId: string, options: ImportRunOptions): Promise<ImportCounts & ImportSkipped & Partial<ImportPruneOutcome>> {
  const started = await db.query<{ id: string; path: string | null; prune: boolean }>(
    `update imports
     set status = 'running', started_at = now(), finished_at = null, error = null,
         rows_read = 0, inserted = 0, updated = 0, unchanged = 0, rejected = 0, row_errors = '[]', removed = 0, prune_note = null, header_line = 1,
         erased_skipped = 0
     where id = $1 and status <> 'done'
     returning id, path, prune`,
    [importId],
  );
  const record = started.rows[0];
  if (!record) {
    const existing = await importGet(db, importId);
    if (!existing) throw new ImportFileError(`import ${importId} does not exist`);
    return existing;
  }

  const counts: ImportCounts = { rowsRead: 0, inserted: 0, updated: 0, unchanged: 0, rejected: 0 };
  const batchSize = options.batchSize ?? BATCH_SIZE;
  // Phone (its digits as a number: at most 15, exact in a double) → line of first sight.
  const seen = new Map<number, number>();
  let storedErrors = 0;
  let batch: PersonInput[] = [];
  let batchLines: number[] = [];
  let errors: RowError[] = [];
  let erasedSkipped = 0;
  // The rows skipped as erased: blanked in a stored upload once it has been read (below).
  const erasedLines: number[] = [];

  const flush = async () => {
    // People erased (aiq forget) are not brought back by a list that still has them
    // (privacy/suppression.ts): each such row is reported, and counted apart from the
    // rejected, which would hold up a complete list's prune.
    const suppressed = await suppressedAmong(db, batch);
    const skipped = [...suppressed].map(([i, why]) => ({ line: batchLines[i]!, reason: suppressedReason(why) }));
    const rows = batch.filter((_, i) => !suppressed.has(i));
    erasedSkipped += skipped.length;
    erasedLines.push(...skipped.map((row) => row.line));
    errors = [...errors, ...skipped].sort((a, b) => a.line - b.line);
    const rejectedNow = errors.length - skipped.length;
    const rowErrors = errors.slice(0, Math.max(0, MAX_STORED_ROW_ERRORS - storedErrors));
    batch = [];
    batchLines = [];
    errors = [];
    storedErrors += rowErrors.length;
    await db.transaction(async (tx) => {
      // A file without, say, an email column leaves the stored emails alone.
      const outcome = await personUpsertMany(tx, rows, header && columnsOf(header));
      counts.inserted += outcome.inserted.length;
      counts.updated += outcome.updated.length;
      counts.unchanged += outcome.unchanged;
      counts.rejected += rejectedNow;
      await tx.query(
        `update imports
         set rows_read = $2, inserted = $3, updated = $4, unchanged = $5, rejected = $6, row_errors = row_errors || $7::jsonb, erased_skipped = $8
         where id = $1`,
        [importId, counts.rowsRead, counts.inserted, counts.updated, counts.unchanged, counts.rejected, JSON.stringify(rowErrors), erasedSkipped],
      );
    });
    await options.onProgress?.({ ...counts });
  };

  let header: HeaderPlan | undefined;
  // The rows read while looking for the header (at most HEADER_SEARCH_ROWS).
  const aboveHeader: NotAHeader[] = [];
  try {
    const parser = await csvRecords(importSource(db, record), (line, reason) => {
      counts.rowsRead += 1;
      errors.push({ line, reason });
    });
    for await (const cells of parser) {
      const { line } = cells;
      if (options.signal?.aborted) throw options.signal.reason ?? new Error('import aborted');
      if (!header) {
        const plan = headerPlan(cells, options.headerMap);
        if ('missing' in plan) {
          aboveHeader.push({ line, cells, ...plan });
          if (aboveHeader.length >= HEADER_SEARCH_ROWS) throw headerMissingError(aboveHeader);
          continue;
        }
        header = plan;
        if (line > 1) await db.query('update imports set header_line = $2 where id = $1', [importId, line]);
        // A title above the header is skipped; a row that holds a phone number or an email
        // address is a person's, and is reported, not dropped (nor taken for a leaver).
        for (const above of aboveHeader) {
          if (!looksLikePersonRow(above.cells)) continue;
          counts.rowsRead += 1;
          errors.push({ line: above.line, reason: `above the header (line ${line}): not imported; a person's row belongs below the column names` });
        }
        continue;
      }
      counts.rowsRead += 1;
      // Not text (a file in another encoding than it says): refused without quoting it, as
      // PostgreSQL stores no NUL.
      const row = cells.some((cell) => cell.includes('\u0000')) ? { line, reason: 'the row holds NUL characters: save the file as UTF-8 CSV' } : rowFrom(cells, header, line);
      if ('reason' in row) errors.push(row);
      else {
        const key = Number(row.person.phone.slice(1));
        const first = seen.get(key);
        if (first !== undefined) errors.push({ line, reason: `duplicate: phone ${row.person.phone} already appears on line ${first}` });
        else {
          seen.set(key, line);
          batch.push(row.person);
          batchLines.push(line);
        }
      }
      if (batch.length + errors.length >= batchSize) await flush();
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (err instanceof CsvError) throw new ImportFileError(`the file is not valid CSV: ${err.message}`, { cause: err });
    if (code === 'ENOENT' || code === 'EACCES' || code === 'EISDIR') throw new ImportFileError(`cannot read the file: ${(err as Error).message}`, { cause: err });
    throw err;
  }
  if (!header) {
    if (aboveHeader.length > 0) throw headerMissingError(aboveHeader);
    throw new ImportFileError('the file is empty: expected a header line with at least a name and a phone column');
  }
  await flush();
  const skipped = erasedSkipped > 0 ? { erasedSkipped } : {};
  // An upload is kept (RETENTION_IMPORTS_DAYS): the erased people's rows in it are blanked as
  // their erasure blanked them, in the transaction that ends the import. Not per batch: the
  // file is read in slices by offset, which a shorter content would shift under the reader.
  if (!record.prune) {
    await db.transaction(async (tx) => {
      await uploadRowsBlank(tx, importId, erasedLines);
      await tx.query(`update imports set status = 'done', finished_at = now() where id = $1`, [importId]);
    });
    return { ...counts, ...skipped };
  }
  const phones = [...seen.keys()].map((digits) => `+${digits}`);
  const pruned = await db.transaction(async (tx) => {
    await uploadRowsBlank(tx, importId, erasedLines);
    return importPrune(tx, importId, phones, counts.rejected, options.pruneAtMostHalf === true);
  });
  return { ...counts, ...skipped, ...pruned };
}

/**
 * Ends a complete list's import: removes the people whose phone it does not hold, in the
 * transaction that marks it done (all or nothing), and audits it. Only people who were
 * there when the import started: one added meanwhile (another import, the API) was not
 * the file's to judge. Removes no one when a row was rejected (the person on it would be
 * taken for a leaver), when no row was read, or, with `atMostHalf`, when more than half of
 * the people there before would go; the note says which.
 */
async function importPrune(tx: Queryable, importId: string, phones: string[], rejected: number, atMostHalf: boolean): Promise<ImportPruneOutcome> {
  const { rows } = await tx.query<{ people: number; missing: number }>(
    `select count(*)::int as people, count(*) filter (where not (p.phone = any($1::text[])))::int as missing
     from people p, imports i
     where i.id = $2 and p.created_at < i.started_at`,
    [phones, importId],
  );
  const { people, missing } = rows[0]!;
  let pruneNote: string | null = null;
  if (rejected > 0) pruneNote = `no one removed: ${rejected} row${rejected === 1 ? ' was' : 's were'} rejected, and the people on them would have been taken for leavers; correct the rows and import again`;
  else if (phones.length === 0) pruneNote = 'no one removed: the file holds no one';
  else if (atMostHalf && missing * 2 > people) pruneNote = `no one removed: it would remove ${missing} of ${people} people, more than half; is the source complete?`;
  let removed = 0;
  if (pruneNote === null && missing > 0) {
    const gone = await tx.query<{ phone: string }>(
      `delete from people p using imports i
       where i.id = $2 and p.created_at < i.started_at and not (p.phone = any($1::text[]))
       returning p.phone`,
      [phones, importId],
    );
    removed = gone.rows.length;
    // Masked, as in the logs: enough to answer "was this number removed?", not a copy of the list.
    const shown = gone.rows.slice(0, AUDITED_REMOVALS).map((r) => maskPhone(r.phone));
    await auditRecord(tx, { actor: `import:${importId}`, action: 'people removed: not in a complete list', target: importId, result: 'ok', details: { removed, phones: shown } });
  }
  await tx.query(`update imports set status = 'done', finished_at = now(), removed = $2, prune_note = $3 where id = $1`, [importId, removed, pruneNote]);
  return { removed, pruneNote };
}

/** A Google Contacts column of a numbered phone or e-mail (LISTED_HEADER) that fills its field. */
interface ListedColumn {
  listed: 'phone' | 'email';
  slot: number;
  part: 'type' | 'value';
  header: string;
}

interface HeaderPlan {
  /**
   * Per column: the field it fills, the part of the name it holds, its place among Google's
   * numbered phones or e-mails, or the attribute name it becomes.
   */
  columns: Array<{ field: PersonField } | { namePart: NamePart; header: string } | ListedColumn | { attribute: string }>;
  /**
   * With a first-name column but no last-name one, the name column holds the family name
   * ("Name" and "Vorname", "Naam" and "Voornaam", as German and Dutch HR exports write them).
   */
  nameIsFamilyName: boolean;
  width: number;
}

/**
 * The optional fields and attributes a file has columns for (personUpsertMany keeps the
 * rest). A name part's header counts as an attribute's: a file that imported before the
 * parts were recognised kept "Voornaam" as an attribute, which the name now holds.
 */
function columnsOf(plan: HeaderPlan): PersonColumns {
  const fields = plan.columns.flatMap((c): PersonColumns['fields'] => {
    const field = 'field' in c ? c.field : 'listed' in c ? c.listed : null;
    return field === 'email' || field === 'department' || field === 'role' ? [field] : [];
  });
  // A numbered column not chosen for a row is that row's attribute (listedChoice).
  const attributes = plan.columns.flatMap((c) => ('attribute' in c ? [c.attribute] : 'namePart' in c || 'listed' in c ? [c.header] : []));
  return { fields, attributes };
}

const ROLE_NAMES: Record<PersonField | NamePart, string> = {
  name: 'name', phone: 'phone', email: 'email', department: 'department', role: 'role', firstName: 'first name', middleName: 'middle name', lastName: 'last name',
};

/**
 * Rows looked at for the header. Excel exports and report generators often put a title above
 * it (a name, a date, a blank row: "Personeelslijst december 2026" in A1, the column names in
 * row 3); the header is the first row that names a name and a phone column, words no title
 * holds. It is found, not refused: the dashboard and the API take no options, and an HR admin
 * who opens the file sees the title and the header as Excel shows them. What was skipped is
 * said (the import's header line), and a row above it that looks like a person's is a row
 * error, never dropped. Ten rows, so that a file without a header fails at once.
 */
const HEADER_SEARCH_ROWS = 10;

/** A cell that is an email address or a phone number (nine digits or more; a date has eight). */
function looksLikePersonRow(cells: string[]): boolean {
  return cells.some((cell) => /^[^\s@]+@[^\s@]+$/.test(cell) || (/^\+?[\d\s().\-/]+$/.test(cell) && cell.replace(/\D/g, '').length >= 9));
}

/**
 * The header plan of a row, or how many of its cells name a known column when it is not a
 * header (no name or no phone column). A row that names one column twice is a header with
 * that fault, and fails the import.
 */
function headerPlan(cells: string[], explicit: Record<string, PersonField> = {}): HeaderPlan | Omit<NotAHeader, 'line' | 'cells'> {
  // A header cell names an attribute, stored as a JSON key: PostgreSQL stores no NUL there.
  if (cells.some((cell) => cell.includes('\u0000'))) throw new ImportFileError('the header line holds NUL characters: save the file as UTF-8 CSV');
  const explicitNormalised = new Map(Object.entries(explicit).map(([k, v]) => [columnNameKey(k), v]));
  // Which column fills a field that two could fill: one mapped explicitly, then for the
  // phone a mobile one (HR systems export a landline beside it: "Telefoon" and "Mobiel",
  // "Telefon" and "Handy"; WhatsApp is on the mobile), then any but a yielding one
  // (YIELDING_HEADERS; half a rank down, so that a yielding mobile still beats a landline),
  // which leaves the other an attribute, then a last resort (LAST_RESORT_HEADERS).
  const candidates = cells.map((cell) => {
    const key = columnNameKey(cell);
    const mapped = explicitNormalised.get(key);
    if (mapped) return { field: mapped, rank: 2, listed: null };
    const listed = LISTED_HEADER.exec(key);
    // A Type or Label column is no candidate of its own: it goes with its Value column.
    if (listed) return listed[3] === 'value' ? { field: listed[1] as 'phone' | 'email', rank: -1, listed } : undefined;
    // Without accents only where the header as written is no alias: one that is an alias
    // only so is new to the table, and yields.
    const folded = foldAccents(key);
    const alias = (k: string) => HEADER_ALIASES[k] ?? NAME_PART_ALIASES[k];
    const field = alias(key) ?? alias(folded);
    if (!field) return undefined;
    const aliasKey = alias(key) ? key : folded;
    if (LAST_RESORT_HEADERS.has(aliasKey)) return { field, rank: -1, listed: null };
    const yielding = YIELDING_HEADERS.has(aliasKey) || aliasKey !== key;
    return { field, rank: (field === 'phone' && MOBILE_HEADERS.has(aliasKey) ? 1 : 0) - (yielding ? 0.5 : 0), listed: null };
  });
  const best = new Map<PersonField | NamePart, number>();
  for (const c of candidates) if (c) best.set(c.field, Math.max(best.get(c.field) ?? -Infinity, c.rank));
  // The fields Google's numbered columns fill, which several Value columns fill together.
  const listedFields = new Set(candidates.flatMap((c) => (c?.listed && c.rank === best.get(c.field) ? [c.field] : [])));
  const taken = new Map<PersonField | NamePart, string>();
  const columns = cells.map((cell, index): HeaderPlan['columns'][number] => {
    const listed = LISTED_HEADER.exec(columnNameKey(cell));
    const listedField = listed?.[1] as 'phone' | 'email' | undefined;
    const candidate = candidates[index];
    if (listed && listedField && listedFields.has(listedField) && (candidate === undefined || candidate.listed)) {
      if (!taken.has(listedField)) taken.set(listedField, cell);
      return { listed: listedField, slot: Number(listed[2]), part: listed[3] === 'value' ? 'value' : 'type', header: cell.trim() };
    }
    if (!candidate || candidate.rank < best.get(candidate.field)!) return { attribute: cell.trim() || `column ${index + 1}` };
    const { field } = candidate;
    if (taken.has(field)) throw new ImportFileError(`columns "${taken.get(field)}" and "${cell}" both map to ${ROLE_NAMES[field]}: rename one or map it explicitly`);
    taken.set(field, cell);
    return (NAME_PARTS as readonly string[]).includes(field) ? { namePart: field as NamePart, header: cell.trim() } : { field: field as PersonField };
  });
  // A name from its parts needs a first or a last name; a middle one alone is not a name.
  const named = taken.has('name') || taken.has('firstName') || taken.has('lastName');
  const missing = (['name', 'phone'] as const).filter((f) => (f === 'name' ? !named : !taken.has(f)));
  if (missing.length > 0) return { missing, recognised: candidates.filter(Boolean).length };
  return { columns, nameIsFamilyName: taken.has('name') && taken.has('firstName') && !taken.has('lastName'), width: cells.length };
}

/** A row read while looking for the header, with what it lacks to be one. */
interface NotAHeader {
  line: number;
  cells: string[];
  missing: Array<'name' | 'phone'>;
  /** How many of its cells name a known column. */
  recognised: number;
}

/**
 * Why no header was found in the rows read: told of the row most like one (the most known
 * column names; the first on a tie), below whatever title stood above it.
 */
function headerMissingError(rows: NotAHeader[]): ImportFileError {
  const best = rows.reduce((a, b) => (b.recognised > a.recognised ? b : a));
  const first = best === rows[0];
  // A line with a number or an address in it is a person, not a header: quoted, it would go
  // wherever the error goes (the log, the job's history), where an erasure of that person
  // cannot find their name or what else the row says.
  const looksLikeData = best.cells.some((cell) => /@|\d[\d\s().-]{5,}\d/.test(cell));
  const found = looksLikeData
    ? `${first ? 'the first line' : `line ${best.line}`} holds a phone number or an email address, so it looks like a person, not a header (not quoted here: it is personal data); add a header line`
    : `found: ${best.cells.map((c) => `"${c}"`).join(', ')}; name the columns`;
  const where = first ? 'the header' : `the header (line ${best.line}, below what looks like a title)`;
  return new ImportFileError(
    `${where} has no ${best.missing.join(' or ')} column (${found}), e.g. name (or first name and last name), phone, email, department, role; or rename the column, or map it with \`aiq import-people <file> --map "Header=${best.missing[0]}"\``,
  );
}

/**
 * A row's name: the name column where it is filled, else its parts joined ("Jan" "van der"
 * "Berg"). Where the name column holds the family name (plan.nameIsFamilyName), the first
 * name goes before it, unless the row's name cell already holds it (a list that gives the
 * whole name there, or "Berg, Jan").
 */
function nameOf(fields: Partial<Record<PersonField, string>>, parts: Partial<Record<NamePart, string>>, plan: HeaderPlan): string {
  const full = (fields.name ?? '').trim();
  const [first, middle, last] = NAME_PARTS.map((part) => (parts[part] ?? '').trim());
  const joined = (...words: string[]) => words.filter((w) => w !== '').join(' ');
  if (!plan.nameIsFamilyName) return full || joined(first!, middle!, last!);
  const words = (text: string) => ` ${text.toLowerCase().replace(/[\s,]+/g, ' ')} `;
  return first && !words(full).includes(words(first)) ? joined(first, middle!, full) : full || joined(first!, middle!);
}

/** A Google Contacts phone or e-mail slot of a row: "Phone 2 - Type" and "Phone 2 - Value". */
interface ListedSlot {
  type: string;
  typeHeader: string | null;
  value: string;
  valueHeader: string | null;
}

/** Mobile numbers by their digits: the Netherlands' 06, Belgium's 045-049, Germany's 015-017, France's 06 and 07. */
const MOBILE_NUMBER = /^\+(316|324[5-9]|491[5-7]|33[67])/;

/**
 * Which of a row's Google Contacts numbers is the person's WhatsApp number (or which address
 * is their e-mail), and what stays of the others as attributes under their own headers.
 *
 * A phone: one typed as a mobile ("Mobile", "* Mobile" as Google marks the primary one,
 * a label of the user's own: "Mobiel", "GSM", "Handy", "WhatsApp"), the primary first; else
 * one whose digits are a Dutch, Belgian, German or French mobile's (a mobile saved as "Work"
 * or "Other"); else the first. WhatsApp runs on a mobile, and a person recognised by a
 * landline is never recognised; where nothing tells (two landlines, or foreign numbers), the
 * first is the one its owner put first, and the others stay beside it in the record, so no
 * number is lost. A row is not refused for that: refused, a complete list removes no one.
 * An address: the primary ("* Work"), else the first.
 *
 * A slot that held only the value chosen is the field and is not repeated as an attribute;
 * one that held more keeps the rest (joined as Google joins them).
 */
function listedChoice(field: 'phone' | 'email', slots: ListedSlot[]): { value: string | null; attributes: Record<string, string> } {
  const entries = slots.flatMap((slot) => {
    const types = slot.type.split(':::').map((t) => t.trim());
    const values = slot.value.split(':::').map((v) => v.trim());
    // One type for the slot's values, or one each.
    return values.flatMap((value, i) => (value === '' ? [] : [{ slot, value, type: types.length === values.length ? types[i]! : types[0]! }]));
  });
  const primary = (e: (typeof entries)[number]) => e.type.startsWith('*');
  const mobile = (e: (typeof entries)[number]) => MOBILE_HEADERS.has(columnNameKey(e.type));
  const chosen =
    field === 'phone'
      ? (entries.find((e) => mobile(e) && primary(e)) ?? entries.find(mobile) ?? entries.find((e) => MOBILE_NUMBER.test(phoneToE164(e.value) ?? '')) ?? entries[0])
      : (entries.find(primary) ?? entries[0]);
  const attributes: Record<string, string> = {};
  for (const slot of slots) {
    const rest = entries.filter((e) => e.slot === slot && e !== chosen);
    if (rest.length === 0) continue;
    // The types of the values kept: one for all, or one each.
    const types = new Set(rest.map((e) => e.type));
    const type = types.size === 1 ? [...types][0]! : rest.map((e) => e.type).join(' ::: ');
    if (slot.typeHeader && type !== '') attributes[slot.typeHeader] = type;
    if (slot.valueHeader) attributes[slot.valueHeader] = rest.map((e) => e.value).join(' ::: ');
  }
  return { value: chosen?.value ?? null, attributes };
}

// A record's cell holds a short fact. Every reply's prompt carries the sender's record, and
// an offline answer quotes it: one 5 MB cell went out as a reply of 3,151 messages.
const MAX_CELL_CHARS = 1000;

function rowFrom(cells: string[], plan: HeaderPlan, line: number): { person: PersonInput } | RowError {
  // Fewer cells: trailing empty columns left out, as hand-written files do. More: something
  // would be lost (an unquoted comma, a shifted row), so the row is refused.
  if (cells.length > plan.width) return { line, reason: `expected ${plan.width} columns, found ${cells.length} (a comma in an unquoted value?)` };
  const long = cells.findIndex((cell) => cell.length > MAX_CELL_CHARS);
  if (long >= 0) {
    const column = plan.columns[long]!;
    const name = 'field' in column ? column.field : 'namePart' in column || 'listed' in column ? column.header : column.attribute;
    return { line, reason: `${name} holds ${cells[long]!.length} characters, more than ${MAX_CELL_CHARS}: a record holds short facts; put long texts in a knowledge document` };
  }
  const fields: Partial<Record<PersonField, string>> = {};
  const parts: Partial<Record<NamePart, string>> = {};
  const attributes: Record<string, string> = {};
  const listed = { phone: new Map<number, ListedSlot>(), email: new Map<number, ListedSlot>() };
  plan.columns.forEach((column, i) => {
    const value = cells[i] ?? '';
    if ('field' in column) fields[column.field] = value;
    else if ('namePart' in column) parts[column.namePart] = value;
    else if ('listed' in column) {
      const slots = listed[column.listed];
      const slot = slots.get(column.slot) ?? { type: '', typeHeader: null, value: '', valueHeader: null };
      if (column.part === 'type') Object.assign(slot, { type: value, typeHeader: column.header });
      else Object.assign(slot, { value, valueHeader: column.header });
      slots.set(column.slot, slot);
    } else if (value.trim() !== '') attributes[column.attribute] = value.trim();
  });
  for (const field of ['phone', 'email'] as const) {
    if (listed[field].size === 0) continue;
    const choice = listedChoice(field, [...listed[field].entries()].sort(([a], [b]) => a - b).map(([, slot]) => slot));
    if (choice.value === null && field === 'phone') {
      const headers = [...listed.phone.values()].flatMap((slot) => (slot.valueHeader ? [`"${slot.valueHeader}"`] : []));
      return { line, reason: `no phone number (${headers.join(', ')} ${headers.length === 1 ? 'is' : 'are'} empty)` };
    }
    fields[field] = choice.value ?? '';
    Object.assign(attributes, choice.attributes);
  }
  fields.name = nameOf(fields, parts, plan);
  const parsed = rowSchema.safeParse(fields);
  if (!parsed.success) return { line, reason: parsed.error.issues.map((i) => i.message).join('; ') };
  return { person: { ...parsed.data, attributes } };
}

/** Text read, at most, before the delimiter is sniffed (more holds no header). */
const SNIFF_CHARS = 64 * 1024;

// Excel's `sep=;` line names the delimiter (some HR systems write it so that Excel opens the
// file in any locale). Excel shows the header as row 1 beneath it, and so do we. Taken for
// the header, it failed the import ("found: sep=").
const SEPARATOR_LINE = /^"?sep=(.)"?\s*$/i;

/**
 * How a file's first lines (up to HEADER_SEARCH_ROWS, without a byte order mark) say it is
 * laid out: its delimiter, named by a `sep=` line or sniffed from the first line that holds
 * one of them, which a title above the header ("Personeelslijst december 2026") does not
 * (',' was taken for a file of ';'); and whether that `sep=` line is there, above row 1.
 * Erasure reads stored uploads by the same rows (src/privacy/erasure.ts).
 */
export function csvLayoutOf(lines: string[]): { delimiter: string; separatorLine: boolean } {
  const separator = SEPARATOR_LINE.exec(lines[0] ?? '');
  if (separator) return { delimiter: separator[1]!, separatorLine: true };
  const sniffed = lines.slice(0, HEADER_SEARCH_ROWS).find((line) => /[,;\t]/.test(line)) ?? lines[0] ?? '';
  return { delimiter: [',', ';', '\t'].map((d) => ({ d, n: sniffed.split(d).length })).sort((a, b) => b.n - a.n)[0]!.d, separatorLine: false };
}

/** A record's cells, with its line as a spreadsheet numbers it (the header is line 1). */
type CsvRow = string[] & { line: number };

/**
 * The records of a csv-parse stream over the source, decoded as textStreamDecoder says,
 * delimiter sniffed from the first line (`,`, `;` or tab: spreadsheets in many locales write
 * `;`). A quote inside an unquoted value is kept as written (Jan "Johnny" Smit). A record the
 * parser cannot read goes to `onSkip` with its line, and the rest of the file is read on.
 *
 * Lines are counted as a spreadsheet shows rows: a cell that holds line breaks (an address
 * in quotes) is one row, not several, so every row after it keeps the number the admin sees.
 * csv-parse counts text lines where a record ends, and counts a CRLF inside quotes as two;
 * the text reaches it with CRLF as LF (a cell's line breaks are stored as LF), and the line
 * breaks inside the cells read so far are taken off its count.
 */
async function csvRecords(source: AsyncIterable<Uint8Array>, onSkip: (line: number, reason: string) => void): Promise<AsyncIterable<CsvRow>> {
  const iterator = source[Symbol.asyncIterator]();
  const decoder = textStreamDecoder();
  // The delimiter is sniffed from the first line that holds one of them, which a title above
  // the header ("Personeelslijst december 2026") does not: ',' was taken for a file of ';'.
  // Read up to that line's end, HEADER_SEARCH_ROWS lines, the file's end or 64 KB of text: a
  // pipe's first chunk is what has come, a few bytes from a slow source, and the delimiter
  // sniffed from "Na" was none (the header one column, the import failed).
  let firstText = '';
  let ended = false;
  // Lines ended by an LF (a CR at the end may have its LF in the next chunk), or by the file's end.
  const lines = () => (ended ? firstText.split(/\r?\n/) : firstText.split(/\r?\n/).slice(0, -1)).slice(0, HEADER_SEARCH_ROWS);
  const delimitedLine = () => lines().find((line) => /[,;\t]/.test(line));
  while (!ended && !delimitedLine() && lines().length < HEADER_SEARCH_ROWS && firstText.length < SNIFF_CHARS) {
    const next = await iterator.next();
    // At the file's end, what the decoder holds back: from the first byte that is not ASCII
    // it holds up to 64 KB until it can tell the encoding, so a smaller file with one before
    // its header's first delimiter ("Prénom;Nom") gave "Pr" to sniff, and ';' was taken for ','.
    if (next.done) {
      ended = true;
      firstText += decoder.end();
    } else firstText += decoder.write(next.value);
  }
  const firstLine = firstText.split(/\r?\n/, 1)[0] ?? '';
  const { delimiter, separatorLine } = csvLayoutOf(lines().length > 0 ? lines() : [firstLine]);
  // Line breaks inside the cells of the records read so far: csv-parse counts them as lines.
  let breaksInCells = 0;
  const parser = parse({
    delimiter,
    skip_empty_lines: true,
    relax_column_count: true,
    relax_quotes: true,
    // Leading spaces only: csv-parse's rtrim, after a closing quote followed by anything but
    // spaces ("Bram" x), skipped that record and then dropped the rest of the file without a
    // word. Without it such a value is kept as written, and cells are trimmed below.
    ltrim: true,
    skip_records_with_error: true,
    on_skip: (err) => {
      // Its own "at line N" counts text lines: the row's line is reported beside it.
      if (err) onSkip(Number(err.lines) - breaksInCells, `not readable as CSV: ${err.message.replace(/,? at line \d+/, '')}`);
      return undefined;
    },
    // In the parser's order (on_skip above sees the count of every record before it).
    on_record: (record, info) => {
      const cells = record.map((cell) => {
        breaksInCells += cell.match(/[\r\n]/g)?.length ?? 0;
        return cellValue(cell);
      });
      // A spreadsheet's blank rows come as ",,,,," (";;;;;"): skipped like empty lines, not
      // reported as rows without a name.
      if (cells.every((cell) => cell === '')) return null;
      return Object.assign(cells, { line: info.lines - breaksInCells });
    },
  });
  // A chunk that ends in CR holds it back: the LF that may follow comes in the next one.
  let heldCr = '';
  const lf = (text: string, last = false) => {
    const joined = heldCr + text;
    heldCr = !last && joined.endsWith('\r') ? '\r' : '';
    return (heldCr ? joined.slice(0, -1) : joined).replaceAll('\r\n', '\n');
  };
  const input = Readable.from(
    (async function* () {
      // Without the `sep=` line: csv-parse numbers the header 1, as Excel does beneath it.
      const text = separatorLine ? firstText.slice(firstLine.length).replace(/^\r?\n/, '') : firstText;
      if (text) yield lf(text);
      for (;;) {
        const next = await iterator.next();
        if (next.done) break;
        const text = lf(decoder.write(next.value));
        if (text) yield text;
      }
      const rest = lf(ended ? '' : decoder.end(), true);
      if (rest) yield rest;
    })(),
    { objectMode: false },
  );
  input.on('error', (err) => parser.destroy(err));
  input.pipe(parser);
  return parser as AsyncIterable<CsvRow>;
}

/**
 * A cell trimmed. A quoted value followed by spaces ("Smit, Eva" ,) comes from csv-parse
 * with its quotes when it trims no trailing spaces itself: they are taken off here, as the
 * parser would have taken them off without the spaces.
 */
function cellValue(cell: string): string {
  const trimmed = cell.trim();
  return /^"[\s\S]*"\s+$/.test(cell) && trimmed.length >= 2 ? trimmed.slice(1, -1) : trimmed;
}

// Everything aiq holds about one person (GDPR art. 15, 20), as one JSON document: their
// WhatsApp contact, their person record (without the embedding, which is derived data),
// every conversation with its messages and suggestions, the jobs about them, their lines
// and row errors in stored CSV uploads, the texts of other jobs that name their number (what
// erasure removes or scrubs, the export hands over first), and the lines of knowledge
// documents that name them.
import type { Queryable } from '../db/types.ts';
import { erasurePhones, IMPORT_TEXTS_NAMING_PERSON, JOB_TEXTS_NAMING_PERSON, JOBS_ABOUT_PERSON, MESSAGE_ERRORS_NAMING_PERSON, uploadsAboutPerson } from './erasure.ts';
import { emailPattern, nationalPartOf, personMatcher, spelledNumberPattern } from './written-forms.ts';
import { documentsAboutPerson, type DocumentAboutPerson } from './documents-about.ts';

export interface PersonExport {
  exportedAt: string;
  phone: string;
  contact: { profileName: string | null; optedOutAt: Date | null; optedOutBy: string | null; optedInAt: Date | null; createdAt: Date; updatedAt: Date } | null;
  person: { name: string; email: string | null; department: string | null; role: string | null; attributes: unknown; createdAt: Date; updatedAt: Date } | null;
  conversations: Array<{
    id: string;
    /** The business number written to; null: the default sender. */
    businessNumber: string | null;
    createdAt: Date;
    lastMessageAt: Date;
    aiPaused: boolean;
    messages: Array<{
      id: string;
      at: Date;
      source: string;
      direction: string;
      body: string;
      mediaUrls: string[];
      status: string;
      /** Why a reply failed or was held, as Twilio or aiq said. */
      errorCode: number | null;
      errorMessage: string | null;
      /** Their files as held (not the bytes: those are in the dashboard), with transcripts. */
      media: Array<{ contentType: string; status: string; size: number | null; transcript: string | null }>;
    }>;
    suggestions: Array<{ id: string; at: Date; body: string; status: string }>;
  }>;
  jobs: Array<{ id: string; type: string; status: string; createdAt: Date; finishedAt: Date | null; lastError: string | null; errors: unknown; result: unknown }>;
  /**
   * Texts of other jobs that name their number or email (a Twilio error quoting it in
   * another conversation's reply, say): only those texts, not the rest of a job about
   * someone else.
   */
  mentions: Array<{ jobId: string; type: string; createdAt: Date; texts: string[] }>;
  /** Why another contact's message failed, where that names them (Twilio's words): only the text. */
  messageErrors: Array<{ messageId: string; createdAt: Date; text: string }>;
  /**
   * Stored CSV uploads (people imports and syncs) with lines, row errors or an error about
   * them; `error` is the import's own error where it names them.
   */
  imports: Array<{ id: string; filename: string; createdAt: Date; lines: string[]; rowErrors: Array<{ line: number; reason: string }>; error: string | null }>;
  /** Knowledge documents with lines that name them by number or email, with those lines. */
  documents: DocumentAboutPerson[];
}

/**
 * Null when aiq holds nothing for the number. Looked up under every form it is held under
 * (erasurePhones: as typed, and as WhatsApp writes it), as erasure does.
 */
export async function personExport(db: Queryable, rawPhone: string): Promise<PersonExport | null> {
  const phones = erasurePhones(rawPhone);
  const found: PersonExport[] = [];
  for (const phone of phones) {
    const document = await exportForm(db, phone);
    if (document) found.push(document);
  }
  if (found.length === 0) return null;
  return found.reduce((merged, more) => ({ ...merged, phone: phones[0]!, ...mergedForms(merged, more) }));
}

/** Two forms' exports as one: their records, and the rest without what both found. */
function mergedForms(a: PersonExport, b: PersonExport): Omit<PersonExport, 'exportedAt' | 'phone'> {
  const union = <T>(left: T[], right: T[], key: (item: T) => string) => {
    const seen = new Set(left.map(key));
    return [...left, ...right.filter((item) => !seen.has(key(item)))];
  };
  const conversations = union(a.conversations, b.conversations, (c) => c.id);
  const jobs = union(a.jobs, b.jobs, (j) => j.id);
  // As for one form: a job or message that is theirs is not also a mention of them.
  const jobIds = new Set(jobs.map((j) => j.id));
  const ownMessages = new Set(conversations.flatMap((c) => c.messages.map((m) => m.id)));
  return {
    contact: a.contact ?? b.contact,
    person: a.person ?? b.person,
    conversations,
    jobs,
    mentions: union(a.mentions, b.mentions, (j) => j.jobId).filter((j) => !jobIds.has(j.jobId)),
    messageErrors: union(a.messageErrors, b.messageErrors, (m) => m.messageId).filter((m) => !ownMessages.has(m.messageId)),
    imports: union(a.imports, b.imports, (i) => i.id),
    documents: union(a.documents, b.documents, (d) => d.id),
  };
}

/** What is held under one form of the number, or null. */
async function exportForm(db: Queryable, phone: string): Promise<PersonExport | null> {
  const contact = (await db.query<{ id: string; profile_name: string | null; opted_out_at: Date | null; opted_out_by: string | null; opted_in_at: Date | null; created_at: Date; updated_at: Date }>(
    'select id, profile_name, opted_out_at, opted_out_by, opted_in_at, created_at, updated_at from contacts where whatsapp_number = $1',
    [phone],
  )).rows[0];
  const person = (await db.query<{ id: string; name: string; email: string | null; department: string | null; role: string | null; attributes: unknown; created_at: Date; updated_at: Date }>(
    'select id, name, email, department, role, attributes, created_at, updated_at from people where phone = $1',
    [phone],
  )).rows[0];
  const documents = await documentsAboutPerson(db, phone, person?.email ?? null);
  // Without a contact or a person record, a stored upload can still hold their line.
  const them = namingOf(phone, person?.email ?? null);
  const imports = await importsAboutPerson(db, them);
  const naming = await jobsNamingPerson(db, them);
  const messageErrors = await messageErrorsNamingPerson(db, them);
  if (!contact && !person && documents.length === 0 && imports.length === 0 && naming.length === 0 && messageErrors.length === 0) return null;

  const conversations = contact
    ? (await db.query<{ id: string; business_number: string | null; created_at: Date; last_message_at: Date; ai_paused: boolean }>(
        'select id, business_number, created_at, last_message_at, ai_paused from conversations where contact_id = $1 order by created_at',
        [contact.id],
      )).rows
    : [];
  const ids = conversations.map((c) => c.id);
  // A message that quotes another (a swipe-to-reply) names the quoted one by its id here.
  const messages = (await db.query<{ id: string; conversation_id: string; created_at: Date; source: string; direction: string; body: string; media_urls: string[]; status: string; error_code: number | null; error_message: string | null; quotes_message_id: string | null }>(
    `select m.id, m.conversation_id, m.created_at, m.source, m.direction, m.body, m.media_urls, m.status, m.error_code, m.error_message,
            (select q.id from messages q where q.conversation_id = m.conversation_id and q.twilio_sid = m.replied_to_sid) as quotes_message_id
     from messages m
     where m.conversation_id = any($1::uuid[]) order by m.created_at, m.id`,
    [ids],
  )).rows;
  const media = (await db.query<{ message_id: string; content_type: string; status: string; size: number | null; transcript: string | null }>(
    'select message_id, content_type, status, size, transcript from message_media where message_id = any($1::uuid[]) order by message_id, position',
    [messages.map((m) => m.id)],
  )).rows;
  const suggestions = (await db.query<{ id: string; conversation_id: string; created_at: Date; body: string; status: string }>(
    'select id, conversation_id, created_at, body, status from suggestions where conversation_id = any($1::uuid[]) order by created_at',
    [ids],
  )).rows;
  const jobs = (await db.query<{ id: string; type: string; status: string; created_at: Date; finished_at: Date | null; last_error: string | null; errors: unknown; result: unknown }>(
    `select id, type, status, created_at, finished_at, last_error, errors, result from ai_jobs where ${JOBS_ABOUT_PERSON} order by created_at`,
    [ids, messages.map((m) => m.id), person?.id ?? null],
  )).rows;

  const jobIds = new Set(jobs.map((j) => j.id));
  // Their own messages' failures are in their conversations already.
  const ownMessages = new Set(messages.map((m) => m.id));
  return {
    exportedAt: new Date().toISOString(),
    phone,
    contact: contact
      ? { profileName: contact.profile_name, optedOutAt: contact.opted_out_at, optedOutBy: contact.opted_out_by, optedInAt: contact.opted_in_at, createdAt: contact.created_at, updatedAt: contact.updated_at }
      : null,
    person: person
      ? { name: person.name, email: person.email, department: person.department, role: person.role, attributes: person.attributes, createdAt: person.created_at, updatedAt: person.updated_at }
      : null,
    conversations: conversations.map((c) => ({
      id: c.id,
      businessNumber: c.business_number,
      createdAt: c.created_at,
      lastMessageAt: c.last_message_at,
      aiPaused: c.ai_paused,
      messages: messages
        .filter((m) => m.conversation_id === c.id)
        .map((m) => ({
          id: m.id,
          at: m.created_at,
          source: m.source,
          direction: m.direction,
          body: m.body,
          mediaUrls: m.media_urls,
          status: m.status,
          errorCode: m.error_code,
          errorMessage: m.error_message,
          ...(m.quotes_message_id ? { quotesMessageId: m.quotes_message_id } : {}),
          media: media
            .filter((f) => f.message_id === m.id)
            .map((f) => ({ contentType: f.content_type, status: f.status, size: f.size, transcript: f.transcript })),
        })),
      suggestions: suggestions.filter((s) => s.conversation_id === c.id).map((s) => ({ id: s.id, at: s.created_at, body: s.body, status: s.status })),
    })),
    jobs: jobs.map((j) => ({ id: j.id, type: j.type, status: j.status, createdAt: j.created_at, finishedAt: j.finished_at, lastError: j.last_error, errors: j.errors, result: j.result })),
    mentions: naming.filter((j) => !jobIds.has(j.jobId)),
    messageErrors: messageErrors.filter((m) => !ownMessages.has(m.messageId)),
    imports,
    documents,
  };
}

/**
 * How texts name the person, built once for every part of the export: the SQL patterns
 * (their national digits anywhere, their email; as erasure scrubs them), a superset, and
 * the matcher that decides what is handed over (+33612345678 holds the digits of
 * +31612345678 and is someone else).
 */
interface Naming {
  phone: string;
  email: string | null;
  /** $1 and $2 of the *_NAMING_PERSON conditions. */
  patterns: [string, string];
  names: ReturnType<typeof personMatcher>;
}

function namingOf(phone: string, email: string | null): Naming {
  return { phone, email, patterns: [spelledNumberPattern(nationalPartOf(phone)), emailPattern(email)], names: personMatcher(phone, email) };
}

/**
 * The person's lines in stored uploads (as erasure finds them: uploadsAboutPerson) and the row
 * errors that quote their number or email, or report one of those lines.
 */
async function importsAboutPerson(db: Queryable, { phone, email, patterns, names }: Naming): Promise<PersonExport['imports']> {
  // The uploads' bytes are read and matched once, by uploadsAboutPerson; here only the rest of the row.
  const uploads = new Map((await uploadsAboutPerson(db, phone, email)).map((u) => [u.id, u]));
  const { rows } = await db.query<{ id: string; filename: string; created_at: Date; row_errors: Array<{ line: number; reason: string }>; error: string | null }>(
    `select id, filename, created_at, row_errors, error from imports
     where id = any($3::uuid[]) or ${IMPORT_TEXTS_NAMING_PERSON}
     order by created_at`,
    [...patterns, [...uploads.keys()]],
  );
  return rows.map((row) => {
    const upload = uploads.get(row.id);
    // Row errors name the import's rows, which are not the file's lines (uploadsAboutPerson).
    const theirRows = new Set(upload?.rows.map((r) => r.row) ?? []);
    return {
      id: row.id,
      filename: row.filename,
      createdAt: row.created_at,
      lines: (upload?.about ?? []).map((n) => upload!.texts[n - 1]!),
      rowErrors: row.row_errors.filter((e) => theirRows.has(e.line) || names.prose(e.reason)),
      error: row.error !== null && names.prose(row.error) ? row.error : null,
    };
  }).filter((entry) => entry.lines.length + entry.rowErrors.length > 0 || entry.error !== null);
}

/** Jobs whose texts name the number or email (as erasure finds them to scrub), with those texts. */
async function jobsNamingPerson(db: Queryable, { patterns, names }: Naming): Promise<PersonExport['mentions']> {
  const { rows } = await db.query<{ id: string; type: string; created_at: Date; last_error: string | null; errors: unknown; result: unknown; payload: unknown }>(
    `select id, type, created_at, last_error, errors, result, payload from ai_jobs where ${JOB_TEXTS_NAMING_PERSON} order by created_at`,
    patterns,
  );
  return rows
    .map((row) => ({
      jobId: row.id,
      type: row.type,
      createdAt: row.created_at,
      texts: [...new Set([row.last_error, row.errors, row.result, row.payload].flatMap(stringsIn))].filter((text) => names.prose(text)),
    }))
    .filter((job) => job.texts.length > 0);
}

/** Messages whose failure text names the number or email (as erasure finds them to scrub). */
async function messageErrorsNamingPerson(db: Queryable, { patterns, names }: Naming): Promise<PersonExport['messageErrors']> {
  const { rows } = await db.query<{ id: string; created_at: Date; error_message: string }>(
    `select id, created_at, error_message from messages where ${MESSAGE_ERRORS_NAMING_PERSON} order by created_at`,
    patterns,
  );
  return rows.filter((row) => names.prose(row.error_message)).map((row) => ({ messageId: row.id, createdAt: row.created_at, text: row.error_message }));
}

/** The strings in a JSON value, however deep (its numbers written out). */
function stringsIn(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (typeof value === 'number') return [String(value)];
  if (value === null || typeof value !== 'object') return [];
  return Object.values(value).flatMap(stringsIn);
}

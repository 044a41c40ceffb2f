// What the admin side accepts, shared by the dashboard's forms and the JSON API so that both
// check input the same way: filters, reply and simulate bodies, uploads, ids, page cursors.
// zod schemas and small codecs only; no routes, no markup.
import { z } from 'zod';
import { isIsoTime, isUuid, JOB_STATUSES, type JobFilter } from '../../queue/index.ts';
import type { PersonSummary } from './knowledge-store.ts';

/** A route's `:id`, which is always a uuid. */
export const IdParams = z.object({ id: z.uuid('must be a uuid') });

/**
 * A business number filter (`?number=`) with its + put back: written as README shows it
 * (`?number=+3197…`, not `%2B`), the query string's + arrives as a space; some leave it out.
 */
export const plusRestored = (value: unknown): unknown => (typeof value === 'string' && /^ ?[1-9][0-9]{5,14}$/.test(value) ? `+${value.trimStart()}` : value);

// Empty form fields mean "not set", as a query string without them would.
const blank = (v: unknown) => (typeof v === 'string' && v.trim() === '' ? undefined : v);
export const optional = <T extends z.ZodType>(schema: T) => z.preprocess(blank, schema.optional());

/** The job filter as it appears in query strings and forms. */
export const JobFilterQuery = z.object({
  status: optional(z.enum(JOB_STATUSES)),
  type: optional(z.string().trim().max(200)),
  q: optional(z.string().trim().max(200)),
});

/** A bulk retry's bound: the time its confirmation counted the jobs (jobRetryCount). */
export const RetryBound = z.string().refine(isIsoTime, 'must be the failedBy time the count gave');

/** The dashboard's "retry all N failed jobs" form: the filter and when N was counted. */
export const RetryFailedForm = JobFilterQuery.extend({ failedBy: optional(RetryBound) });

export function toJobFilter(query: z.infer<typeof JobFilterQuery>): JobFilter {
  return { status: query.status, type: query.type, search: query.q };
}

// A sanity cap only: the channel's limit (REPLY_MAX_CHARS) is checked where the reply is sent.
// `seen`: the newest inbound position the admin's page showed (the dashboard's forms carry
// it), so that the reply answers what the admin read, not what came in while they wrote.
export const ReplyBody = z.object({
  body: z.string().trim().min(1, 'write a message first').max(20_000, 'at most 20000 characters'),
  // Blank or null is no position (coerced, either would read as 0: a reply answering nothing).
  seen: z.preprocess((v) => (v === '' || v === null ? undefined : v), z.coerce.number().int().min(0).optional()),
});

export const SimulateBody = z.object({
  from: z.string().trim().regex(/^\+[1-9][0-9]{5,14}$/, 'the number must look like +31612345678'),
  name: z.string().trim().max(100).optional(),
  body: z.string().trim().min(1, 'write a message first').max(4096),
});

/** Uploaded documents and CSV files travel as form fields; far above the webhook limit. */
export const UPLOAD_BODY_LIMIT = 20 * 1024 * 1024;

/**
 * The route options of an upload: its size limit, and the field that carries the file. The
 * app-wide refusal of NUL characters (app.ts) leaves that field to the route, which knows
 * better: a document holding one is binary and refused with that reason, and a CSV row
 * holding one is reported with its line number while the other rows import.
 */
export const uploadRoute = (fileField: 'body' | 'content') => ({ bodyLimit: UPLOAD_BODY_LIMIT, config: { fileField } });

export const DocumentBody = z.object({
  title: z.string().trim().min(1, 'give the document a title').max(300),
  body: z.string().refine((v) => v.trim() !== '', 'the document is empty: paste text or choose a file'),
  source: z.string().trim().max(300).optional(),
  // An array from the API, comma-separated text from the dashboard's form. A blank form
  // field keeps a replaced document's tags (re-uploading a handbook must not take it away
  // from the desk whose profile uses its tag); the API's [] clears them.
  tags: z
    .union([
      z.array(z.string().trim().min(1).max(50)).max(20),
      z.string().max(1000).transform((text) => {
        const tags = text.split(',').map((t) => t.trim()).filter(Boolean);
        return tags.length > 0 ? tags : undefined;
      }),
    ])
    .optional(),
});

export const ImportBody = z.object({
  filename: z.string().trim().min(1, 'name the file').max(300),
  content: z.string().refine((v) => v.trim() !== '', 'the CSV is empty: choose a file or paste its rows'),
  /** The file is the complete list: people not in it are removed. A form's checkbox sends "on". */
  prune: z
    .union([z.boolean(), z.literal('on')])
    .optional()
    .transform((v) => v === true || v === 'on'),
});

/** The people cursor: the last row's (name, id). */
export function peopleCursorDecode(after: string | undefined): { name: string; id: string } | undefined {
  if (!after) return undefined;
  const text = Buffer.from(after, 'base64url').toString();
  const split = text.lastIndexOf('|');
  const id = text.slice(split + 1);
  if (split < 0 || !isUuid(id)) throw new RangeError('invalid page cursor');
  return { name: text.slice(0, split), id };
}

export function peopleCursorEncode(last: PersonSummary): string {
  return Buffer.from(`${last.name}|${last.id}`).toString('base64url');
}

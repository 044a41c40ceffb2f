// Erasure that sticks: an erased person is not brought back by the next people sync or a
// CSV import that still lists them. An erasure leaves a suppression record holding keyed
// hashes (HMAC-SHA256, this installation's key: migrations/0035_erasure_suppressions.sql)
// of their number and email address, and no personal data in the clear: the hashes name no
// one without the key, and cannot be reversed by hashing every number without it. An
// import skips a row whose number or address matches; an admin lifts the record for
// someone who comes back with their consent (`aiq forget --lift`, POST /api/privacy/lift).
import { createHmac } from 'node:crypto';
import type { Queryable } from '../db/types.ts';
import { phoneToE164 } from '../knowledge/people.ts';
import { auditRecord } from './audit.ts';

export interface SuppressionKey {
  phone(e164: string): string;
  email(address: string): string;
}

/** The installation's key, read once per use (an erasure, an import batch). */
export async function suppressionKey(db: Queryable): Promise<SuppressionKey> {
  const secret = (await db.query<{ secret: string }>(`select secret from installation_secrets where name = 'erasure_suppression'`)).rows[0]?.secret;
  if (!secret) throw new Error('the installation key for erasure records is missing (installation_secrets): run the migrations');
  const key = Buffer.from(secret, 'hex');
  const hash = (text: string) => createHmac('sha256', key).update(text).digest('hex');
  // A kind prefix, so a number and an address can never share a hash.
  return { phone: (e164) => hash(`phone:${e164}`), email: (address) => hash(`email:${address.trim().toLowerCase()}`) };
}

/** The opt-out an erased contact had (STOP, or an admin's record), kept by the erasure. */
export interface ErasedOptOut {
  optedOutAt: Date;
  optedOutBy: 'contact' | 'admin';
}

/**
 * Records an erasure of the number `phone` (in any form erasurePhones knows; the record
 * holds the form imports and WhatsApp write, phoneToE164's) and of `emails`, inside the
 * erasure's transaction. `optOut`: the erased contact's opt-out, which the contact a later
 * message makes starts with (migrations/0035: a contact who wrote STOP stays opted out
 * until START, also across an erasure); null when it had a contact that was not opted
 * out, undefined when it had no contact (an earlier record's opt-out stands). Erasing the
 * same number again keeps its record, dated anew and in force again.
 */
export async function suppressionRecord(tx: Queryable, phone: string, emails: string[], optOut: ErasedOptOut | null | undefined): Promise<void> {
  const key = await suppressionKey(tx);
  const email = emails.find((address) => address.trim() !== '');
  await tx.query(
    `insert into erasure_suppressions (phone_hash, email_hash, opted_out_at, opted_out_by) values ($1, $2, $3, $4)
     on conflict (phone_hash) do update
       set email_hash = coalesce(excluded.email_hash, erasure_suppressions.email_hash), erased_at = now(), lifted_at = null,
           opted_out_at = case when $5 then excluded.opted_out_at else erasure_suppressions.opted_out_at end,
           opted_out_by = case when $5 then excluded.opted_out_by else erasure_suppressions.opted_out_by end`,
    [key.phone(phoneToE164(phone) ?? phone), email ? key.email(email) : null, optOut?.optedOutAt ?? null, optOut?.optedOutBy ?? null, optOut !== undefined],
  );
}

/** Why an import skipped a row: when its person was erased, and what of the row matched (the number first). */
export interface Suppressed {
  erasedAt: Date;
  matched: 'phone' | 'email';
}

/**
 * Of `people` (index → number and address), the ones an erasure suppresses, with when they
 * were erased: one query for a whole import batch.
 */
export async function suppressedAmong(db: Queryable, people: Array<{ phone: string; email?: string | null }>): Promise<Map<number, Suppressed>> {
  const found = new Map<number, Suppressed>();
  if (people.length === 0) return found;
  // Nothing erased yet (the usual case): no hashing at all.
  if ((await db.query('select 1 from erasure_suppressions where lifted_at is null limit 1')).rows.length === 0) return found;
  const key = await suppressionKey(db);
  const phones = people.map((p) => key.phone(p.phone));
  const emails = people.map((p) => (p.email ? key.email(p.email) : null));
  const { rows } = await db.query<{ phone_hash: string; email_hash: string | null; erased_at: Date }>(
    `select phone_hash, email_hash, erased_at from erasure_suppressions
     where lifted_at is null and (phone_hash = any($1::text[]) or email_hash = any($2::text[]))`,
    [phones, emails.filter((e): e is string => e !== null)],
  );
  // By hash: the number first (one record each), else the first record with the address.
  const byPhone = new Map(rows.map((row) => [row.phone_hash, row.erased_at]));
  const byEmail = new Map<string, Date>();
  for (const row of rows) if (row.email_hash !== null && !byEmail.has(row.email_hash)) byEmail.set(row.email_hash, row.erased_at);
  people.forEach((_, i) => {
    const byNumber = byPhone.get(phones[i]!);
    const byAddress = emails[i] === null ? undefined : byEmail.get(emails[i]!);
    if (byNumber) found.set(i, { erasedAt: byNumber, matched: 'phone' });
    else if (byAddress) found.set(i, { erasedAt: byAddress, matched: 'email' });
  });
  return found;
}

/**
 * What an import's row error says of a person it skipped: what matched, and the lift that
 * works for it (their number and address are in the row itself, never in the error). An
 * address under another number is lifted by the address: by the row's number, "no erasure
 * recorded".
 */
export function suppressedReason({ erasedAt, matched }: Suppressed): string {
  const what = matched === 'phone' ? { matches: 'its number', arg: '<their number>' } : { matches: 'its email address (under another number)', arg: '<their email address>' };
  return `skipped: erased on ${erasedAt.toISOString().slice(0, 10)} (aiq forget), ${what.matches} matches; if they came back and consent, lift it with \`aiq forget --lift ${what.arg}\` and import again`;
}

/**
 * Lifts the erasure record of a number, or the records of an email address (one that holds
 * an @: an import skips a row whose address matches under another number, and the row
 * error says to lift it so), for someone who comes back with their consent: the next sync
 * or import brings them in again. An opt-out it kept stays (consent to be on the staff list
 * is not consent to messages; only START or an admin's opt-in ends it), so such a record is
 * marked lifted rather than removed. Audited. False when there was none.
 */
export async function suppressionLift(db: Queryable, phoneOrEmail: string, actor: string): Promise<boolean> {
  const key = await suppressionKey(db);
  const byEmail = phoneOrEmail.includes('@');
  const column = byEmail ? 'email_hash' : 'phone_hash';
  const hash = byEmail ? key.email(phoneOrEmail) : key.phone(phoneToE164(phoneOrEmail) ?? phoneOrEmail);
  const result = await db.query(`update erasure_suppressions set lifted_at = now() where ${column} = $1 and lifted_at is null`, [hash]);
  // Nothing left to keep of a record without an opt-out.
  await db.query(`delete from erasure_suppressions where ${column} = $1 and opted_out_at is null`, [hash]);
  const lifted = result.rowCount > 0;
  await auditRecord(db, { actor, action: 'erasure lifted', result: lifted ? 'ok' : 'not_found' });
  return lifted;
}

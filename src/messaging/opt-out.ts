// Opt-out on WhatsApp: a message that is only a stop keyword (STOP, UNSUBSCRIBE, STOPPEN,
// ARRÊTER … by default: config.ts) opts the contact out, a start keyword (START) opts them back in.
// While opted out nothing is sent to them: no AI reply, no suggestion, no admin message.
// The webhook records the change in the statement that stores the message; admins can
// record it too (a request by phone, a mistake). Knows nothing of jobs or HTTP.
import type { Queryable } from '../db/types.ts';

export type OptChange = 'out' | 'in';

export interface OptKeywords {
  out: ReadonlySet<string>;
  in: ReadonlySet<string>;
  /** Every word a keyword message can hold: the keywords' and the courtesies'. */
  words: ReadonlySet<string>;
}

/**
 * Keywords as configured: comma-separated, compared without case or surrounding punctuation;
 * each also without the courtesies it holds ("STOP NOW" as STOP), worked out once here, not
 * for every message.
 */
export function optKeywordsOf(config: { OPT_OUT_KEYWORDS: string; OPT_IN_KEYWORDS: string }): OptKeywords {
  const set = (list: string) => new Set(list.split(',').map(normalise).flatMap((keyword) => [keyword, withoutCourtesies(keyword)]).filter(Boolean));
  const out = set(config.OPT_OUT_KEYWORDS);
  const optIn = set(config.OPT_IN_KEYWORDS);
  const words = new Set([...out, ...optIn, ...COURTESIES].flatMap((phrase) => phrase.split(' ')));
  return { out, in: optIn, words };
}

// "Stop.", " stop! ", "STOP 🙏" all mean STOP; "stop met roken?" does not. Combining marks
// are part of a word (a Devanagari vowel sign: "रोको" is not "रुको"), except the vowel
// points Arabic and Hebrew writers mostly leave out: "توقّف" is "توقف", and the variation
// selectors that only say how to draw the character before them: phones send "STOP❗️" and
// "⛔️ STOP" with one (U+FE0F), which stayed behind as a word when the emoji went.
function normalise(text: string): string {
  return text
    .normalize('NFKC')
    .replace(/[\u064B-\u065F\u0670\u0591-\u05BD\u05BF\u05C1\u05C2\u05C4\u05C5\u05C7]/g, '')
    .replace(/[\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/gu, '')
    .replace(/[^\p{L}\p{M}\p{N}\s]/gu, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .toUpperCase();
}

// What people put around a keyword without changing what it asks ("stop please", "STOP
// STOP", "stop a.u.b.", "afmelden, dank je wel"): please, now and thanks in English, Dutch,
// German, French and Spanish, as normalise leaves them. Anything else makes it a sentence,
// answered as any message.
const COURTESIES = [
  'THANK YOU VERY MUCH', 'THANK YOU', 'THANK U', 'THANKS', 'THX', 'TY', 'PLEASE', 'PLS', 'PLZ', 'NOW',
  'DANK JE WEL', 'DANK U WEL', 'DANKJEWEL', 'DANK JE', 'DANK U', 'BEDANKT', 'A U B', 'AUB', 'ALSJEBLIEFT', 'ALSTUBLIEFT', 'GRAAG', 'NU',
  'VIELEN DANK', 'DANKE', 'BITTE', 'JETZT',
  'S IL VOUS PLAÎT', 'S IL VOUS PLAIT', 'S IL TE PLAÎT', 'S IL TE PLAIT', 'SVP', 'MERCI', 'MAINTENANT',
  'MUCHAS GRACIAS', 'GRACIAS', 'POR FAVOR', 'YA',
];
const COURTESY = new RegExp(`(?<=^| )(?:${COURTESIES.join('|')})(?= |$)`, 'g');
const withoutCourtesies = (text: string): string => text.replace(COURTESY, ' ').replace(/\s+/g, ' ').trim();

/** `text` is `keyword`, said once or more ("STOP STOP", "OPT OUT OPT OUT"). */
function saysOnly(text: string, keyword: string): boolean {
  if (!keyword || !text) return false;
  const words = text.split(' ');
  const size = keyword.split(' ').length;
  if (words.length % size !== 0) return false;
  for (let at = 0; at < words.length; at += size) if (words.slice(at, at + size).join(' ') !== keyword) return false;
  return true;
}

/**
 * The change a message asks for: only a message that is a keyword and nothing else, said
 * once or more, perhaps with courtesies around it (COURTESIES; a keyword that holds one
 * itself, "STOP NOW", still counts as written).
 */
export function optChangeOf(body: string, keywords: OptKeywords): OptChange | null {
  const text = normalise(body);
  if (!text) return null;
  // A word that no keyword or courtesy holds makes it a sentence: most messages stop here,
  // without the courtesies' pattern and a pass per keyword (a few % of the webhook's CPU).
  if (!text.split(' ').every((word) => keywords.words.has(word))) return null;
  const bare = withoutCourtesies(text);
  for (const change of ['out', 'in'] as const) {
    for (const keyword of keywords[change]) if (saysOnly(text, keyword) || saysOnly(bare, keyword)) return change;
  }
  return null;
}

export interface OptOutState {
  optedOutAt: Date | null;
  optedOutBy: 'contact' | 'admin' | null;
}

/** A conversation's contact's opt-out state, read now (null: no such conversation). */
export async function optOutStateOf(db: Queryable, conversationId: string): Promise<OptOutState | null> {
  const result = await db.query<{ opted_out_at: Date | null; opted_out_by: 'contact' | 'admin' | null }>(
    `select k.opted_out_at, k.opted_out_by from conversations c join contacts k on k.id = c.contact_id where c.id = $1`,
    [conversationId],
  );
  const row = result.rows[0];
  return row ? { optedOutAt: row.opted_out_at, optedOutBy: row.opted_out_by } : null;
}

/**
 * An admin records an opt-out or opt-in for a conversation's contact. Returns whether the
 * state changed (false when it already was so, or there is no such conversation).
 */
export async function optOutSetByAdmin(db: Queryable, conversationId: string, change: OptChange): Promise<boolean> {
  const result = await db.query(
    `update contacts k
     set opted_out_at = case when $2 = 'out' then now() end,
         opted_out_by = case when $2 = 'out' then 'admin' end,
         updated_at = now()
     from conversations c
     where c.id = $1 and k.id = c.contact_id and (k.opted_out_at is null) = ($2 = 'out')`,
    [conversationId, change],
  );
  return result.rowCount > 0;
}

/**
 * The change a stored keyword message made: a stop keyword always records one; a start
 * keyword only when the contact was opted out (else null: "Start" as a greeting). The store
 * statement sets the contact's opted_in_at to its own time when it opts them in
 * (migrations/0023_start_when_not_opted_out.sql), which is the message's time too.
 */
export async function optChangeRecorded(db: Queryable, change: OptChange | null, messageId: string): Promise<OptChange | null> {
  if (change !== 'in') return change;
  const result = await db.query<{ changed: boolean }>(
    `select k.opted_in_at is not distinct from m.created_at as changed
     from messages m join conversations c on c.id = m.conversation_id join contacts k on k.id = c.contact_id
     where m.id = $1`,
    [messageId],
  );
  return result.rows[0]?.changed === true ? 'in' : null;
}

/** Why nothing may be sent to an opted-out contact, for refusals and job results. */
export function optedOutReason(state: OptOutState): string {
  const by = state.optedOutBy === 'admin' ? 'an admin recorded their opt-out' : 'they sent a stop keyword';
  return `the contact opted out (${by}, ${state.optedOutAt?.toISOString()}): nothing is sent to them until they send START or an admin records that they opted in again`;
}

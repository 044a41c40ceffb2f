// How people write a phone number or an email address, for finding a person in text others
// wrote: an error message, a CSV cell, a line of a document. Numbers are E.164 ("+31612345678").
import { countryCodeLength } from '../knowledge/people.ts';

/** The national significant number: without country code or trunk prefix ("612345678"). */
export function nationalPartOf(phone: string): string {
  const digits = phone.replace(/\D/g, '');
  return digits.slice(countryCodeLength(digits));
}

// What people put between the digits of a number: spaces (no-break ones from a word
// processor too), dots, slashes, brackets, hyphens and dashes.
const BETWEEN_DIGITS = ' \u00a0\u202f()./\u2010-\u2015-';

/**
 * A regular expression (JavaScript's and PostgreSQL's) for the digits of `national` with
 * what people put between them ("6 1234 5678", "6-12345678", "(6) 12.34"): at most two
 * characters of BETWEEN_DIGITS between two digits. Never a quote, comma or backslash, so a
 * match in JSON text stays inside one string and the text stays JSON.
 */
export function spelledNumberPattern(national: string): string {
  return national.replace(/\D/g, '').split('').join(`[${BETWEEN_DIGITS}]{0,2}`);
}

/** A number as written in running text: digits with BETWEEN_DIGITS between them, perhaps after a +. */
const WRITTEN_NUMBER = new RegExp(`\\+?[0-9][0-9${BETWEEN_DIGITS}]*[0-9]`, 'g');

/**
 * The digits `phone` is written with: in international form (with or without +), with 00,
 * national with the trunk 0 ("0612345678"), and national without it, as in countries that
 * have none ("2125551234" in the US, "3471234567" in Italy) or by people who leave it out
 * (8 digits or more: shorter ones would be some other number's end).
 */
function phoneDigitForms(phone: string): Set<string> {
  const digits = phone.replace(/\D/g, '');
  const national = nationalPartOf(phone);
  const forms = new Set([digits, `00${digits}`, `0${national}`]);
  if (national.length >= 8) forms.add(national);
  return forms;
}

/**
 * A regular expression (JavaScript's and PostgreSQL's, case-insensitive) for `email` as a
 * whole address: not inside a longer one (marjo@corp.nl for jo@corp.nl) and not continued
 * (jo@corp.nl.eu), where a full stop that ends a sentence may follow. Its characters are
 * escaped; without an email it matches nothing.
 */
export function emailPattern(email: string | null): string {
  if (!email) return 'a^';
  return `(?<![a-z0-9._%+-])${email.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![a-z0-9-]|\\.[a-z0-9])`;
}

/**
 * Whether a line names a person, by their number (phoneDigitForms) or their email as a whole
 * address (emailPattern), with the forms and the pattern built once for all the lines of a
 * file. Give the email in the encoding the lines are read in.
 */
export function personMatcher(phone: string, email: string | null) {
  const forms = phoneDigitForms(phone);
  const longest = Math.max(...[...forms].map((form) => form.length));
  const address = email === null ? null : new RegExp(emailPattern(email), 'i');
  const namesEmail = (line: string) => address !== null && address.test(line);
  return {
    /** A CSV line: one of its cells is their number (+15612345678 is not +31612345678), or it holds their email. */
    cells: (line: string): boolean => line.split(/[,;\t|]/).some((cell) => forms.has(cell.replace(/\D/g, ''))) || namesEmail(line),
    /**
     * Running text: a number may run into a neighbouring one ("kamer 2.14 06 1234 5678"), so
     * every contiguous run of its digit groups is tried, each only as long as the longest form.
     */
    prose(line: string): boolean {
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
      return namesEmail(line);
    },
  };
}

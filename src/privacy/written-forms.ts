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
export const WRITTEN_NUMBER = new RegExp(`\\+?[0-9][0-9${BETWEEN_DIGITS}]*[0-9]`, 'g');

/**
 * The digits `phone` is written with: in international form (with or without +), with 00,
 * national with the trunk 0 ("0612345678"), and national without it, as in countries that
 * have none ("2125551234" in the US, "3471234567" in Italy) or by people who leave it out
 * (8 digits or more: shorter ones would be some other number's end).
 */
export function phoneDigitForms(phone: string): Set<string> {
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

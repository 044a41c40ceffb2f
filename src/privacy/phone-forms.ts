// How people write a phone number, for finding a person's number in text they wrote: an
// error message, a CSV cell, a line of a document. Numbers are E.164 ("+31612345678").

/** The national significant number: the last 9 digits, without trunk or country prefix. */
export const nationalPartOf = (phone: string): string => phone.slice(-9);

/**
 * A regular expression for the digits of `national` with what people put between them
 * ("6 1234 5678", "6-12345678", "(6) 12.34"): at most two spaces, dots, dashes, slashes or
 * brackets between two digits. Never a quote, comma or backslash, so a match in JSON text
 * stays inside one string and the text stays JSON. Digits only go in: nothing to escape.
 */
export function spelledNumberPattern(national: string): string {
  return national.replace(/\D/g, '').split('').join('[ ()./-]{0,2}');
}

/**
 * Whether `written` (digits only) is `phone`: in international form, with 00, or in national
 * form with a trunk 0 (the country code, 1-3 digits, left out: "0612345678").
 */
export function digitsArePhone(written: string, phone: string): boolean {
  const digits = phone.replace(/\D/g, '');
  if (written === digits || written === `00${digits}`) return true;
  const national = written.slice(1);
  return written.startsWith('0') && !written.startsWith('00') && national.length >= 6 && digits.endsWith(national) && digits.length - national.length <= 3;
}

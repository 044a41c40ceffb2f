// LIKE and ILIKE treat `%`, `_` and `\` in the pattern as syntax; a search box must not.

/** The text with LIKE's wildcards escaped (backslash is the default escape character). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

/**
 * A search that is a phone number as people write it, as the digits to look for in an
 * E.164 number: "+31 6 1234 5678", "0031 6…" and "06-1234 5678" all find +31612345678
 * (the trunk 0 and the 00 dropped, "(0)" too); null for anything else (fewer than six
 * digits, or letters). Searching by the number as stored found only "+31612345678" or
 * a run of its digits (found by a new-user probe).
 */
export function phoneSearchDigits(search: string): string | null {
  if (!/^[+\d\s().\-\u00a0]+$/.test(search)) return null;
  const digits = search.replace(/\(0\)/g, '').replace(/\D/g, '');
  if (digits.length < 6) return null;
  return digits.replace(/^00/, '').replace(/^0/, '');
}

// LIKE and ILIKE treat `%`, `_` and `\` in the pattern as syntax; a search box must not.

/** The text with LIKE's wildcards escaped (backslash is the default escape character). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}

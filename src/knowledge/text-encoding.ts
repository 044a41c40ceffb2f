// Files as people save them. A byte-order mark says the encoding (UTF-8, or UTF-16 as
// Excel's "Unicode text" writes it); otherwise UTF-8 when the bytes are valid UTF-8, and else
// Windows-1252, which is what Excel and Notepad in Western European locales save. Used by
// the CSV import (streamed) and `aiq add-document`; the dashboard applies the same rule in
// the browser (src/http/dashboard/app.js).

export type TextEncoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'windows-1252';

/** The encoding a byte-order mark at the start names, or null when there is none. */
function markedEncodingOf(head: Uint8Array): TextEncoding | null {
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) return 'utf-8';
  if (head[0] === 0xff && head[1] === 0xfe) return 'utf-16le';
  if (head[0] === 0xfe && head[1] === 0xff) return 'utf-16be';
  return null;
}

/** The encoding of a file from its first bytes (a sample of tens of kilobytes is plenty). */
export function textEncodingOf(head: Uint8Array): TextEncoding {
  const marked = markedEncodingOf(head);
  if (marked) return marked;
  try {
    // `stream`: a character cut at the end of the sample is not an error.
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
    return 'utf-8';
  } catch {
    return 'windows-1252';
  }
}

/**
 * A whole file's text (a byte-order mark is dropped): decoded as its byte-order mark says,
 * else as `charset` says (what a source declares: HTTP's Content-Type charset) when that is
 * a label TextDecoder knows and the bytes are valid in it, else as textEncodingOf reads the
 * bytes. Servers often declare UTF-8 for any CSV: a Windows-1252 file so declared is read
 * as Windows-1252, not with its accented letters turned into U+FFFD.
 */
export function textDecode(bytes: Uint8Array, charset?: string): string {
  if (charset && !markedEncodingOf(bytes)) {
    try {
      return new TextDecoder(charset, { fatal: true }).decode(bytes);
    } catch {
      // A label no decoder has, or bytes that are not in it: read by the bytes.
    }
  }
  return new TextDecoder(textEncodingOf(bytes)).decode(bytes);
}

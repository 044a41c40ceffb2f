// Files as people save them. A byte-order mark says the encoding (UTF-8, or UTF-16 as
// Excel's "Unicode text" writes it); otherwise UTF-8 when the bytes are valid UTF-8, and else
// Windows-1252, which is what Excel and Notepad in Western European locales save. Used by
// the CSV import (streamed) and `aiq add-document`; the dashboard applies the same rule in
// the browser (src/http/dashboard/app.js).

export type TextEncoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'windows-1252';

const startsWithUtf8Mark = (bytes: Uint8Array): boolean => bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;

/** The encoding of a file from its first bytes (a sample of tens of kilobytes is plenty). */
export function textEncodingOf(head: Uint8Array): TextEncoding {
  if (startsWithUtf8Mark(head)) return 'utf-8';
  if (head[0] === 0xff && head[1] === 0xfe) return 'utf-16le';
  if (head[0] === 0xfe && head[1] === 0xff) return 'utf-16be';
  try {
    // `stream`: a character cut at the end of the sample is not an error.
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: true });
    return 'utf-8';
  } catch {
    return 'windows-1252';
  }
}

/**
 * A whole file's text (a byte-order mark is dropped): decoded as its byte-order mark says;
 * else as UTF-8 when the bytes are UTF-8, whatever a source declares (servers label UTF-8
 * files ISO-8859-1 by default as often as they label Windows-1252 ones UTF-8, and no other
 * encoding's text is valid UTF-8 by chance); else as `charset` says (what a source declares:
 * HTTP's Content-Type charset) when TextDecoder knows it and the bytes fit it (and for a
 * declared UTF-16 without a mark); else as Windows-1252.
 */
export function textDecode(bytes: Uint8Array, charset?: string): string {
  const encoding = textEncodingOf(bytes);
  // UTF-16 without a mark is valid UTF-8 (a NUL beside each ASCII letter): only the
  // declaration tells.
  const unmarkedWide = encoding === 'utf-8' && /^\s*utf-?16/i.test(charset ?? '') && !startsWithUtf8Mark(bytes);
  if (charset && (encoding === 'windows-1252' || unmarkedWide)) {
    try {
      return new TextDecoder(charset, { fatal: true }).decode(bytes);
    } catch {
      // A label no decoder has, or bytes that are not in it: read by the bytes.
    }
  }
  return new TextDecoder(encoding).decode(bytes);
}

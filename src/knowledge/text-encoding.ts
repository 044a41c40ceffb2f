// Files as people save them. A byte-order mark says the encoding (UTF-8, or UTF-16 as
// Excel's "Unicode text" writes it); otherwise UTF-8 when the bytes are valid UTF-8, and else
// Windows-1252, which is what Excel and Notepad in Western European locales save. Used by
// the CSV import (streamed) and `aiq add-document`; the dashboard applies the same rule in
// the browser (src/http/dashboard/app.js).

export type TextEncoding = 'utf-8' | 'utf-16le' | 'utf-16be' | 'windows-1252';

const startsWithUtf8Mark = (bytes: Uint8Array): boolean => bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf;

/** The encoding a byte-order mark at the start says, if there is one. */
function markedEncoding(head: Uint8Array): TextEncoding | undefined {
  if (startsWithUtf8Mark(head)) return 'utf-8';
  if (head[0] === 0xff && head[1] === 0xfe) return 'utf-16le';
  if (head[0] === 0xfe && head[1] === 0xff) return 'utf-16be';
  return undefined;
}

/**
 * Windows-1252's characters at 0x80-0x9F (U+0081, U+008D, U+008F, U+0090 and U+009D where it
 * has none, as the WHATWG encoding standard reads them).
 */
const WINDOWS_1252_80_9F = '\u20ac\u0081\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\u008d\u017d\u008f\u0090\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\u009d\u017e\u0178';

/**
 * A TextDecoder for `label`, except that Windows-1252 (also what "ISO-8859-1" and "latin1"
 * name) reads 0x80-0x9F as the characters they are: Node 20's decoder, given the bytes in one
 * call (not streamed), reads them as Latin-1's C1 control characters, so a people sync's or a
 * document's "D’Hondt", "€ 25" and "R&D – Sales" were stored with U+0092, U+0080 and U+0096
 * in them (Node 24's and a browser's decoder, the dashboard's, are right).
 */
function textDecoderFor(label: string, options?: TextDecoderOptions): Pick<TextDecoder, 'decode'> {
  const decoder = new TextDecoder(label, options);
  if (decoder.encoding !== 'windows-1252') return decoder;
  return {
    decode: (bytes, decodeOptions) => decoder.decode(bytes, decodeOptions).replace(/[\u0080-\u009f]/g, (c) => WINDOWS_1252_80_9F[c.charCodeAt(0) - 0x80]!),
  };
}

/**
 * UTF-8 when `bytes` are valid UTF-8, else Windows-1252. Unless `whole`, a character cut at
 * the end of the sample is not an error.
 */
function unmarkedEncoding(bytes: Uint8Array, whole = false): TextEncoding {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(bytes, { stream: !whole });
    return 'utf-8';
  } catch {
    return 'windows-1252';
  }
}

/** The encoding of a file from its first bytes (a sample of tens of kilobytes is plenty). */
export function textEncodingOf(head: Uint8Array): TextEncoding {
  return markedEncoding(head) ?? unmarkedEncoding(head);
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
      return textDecoderFor(charset, { fatal: true }).decode(bytes);
    } catch {
      // A label no decoder has, or bytes that are not in it: read by the bytes.
    }
  }
  return textDecoderFor(encoding).decode(bytes);
}

/** Bytes looked at to tell UTF-8 from Windows-1252 once the first non-ASCII byte comes. */
const SAMPLE_BYTES = 64 * 1024;

/**
 * A decoder for a file read in chunks (the CSV import's stream), by textEncodingOf's rule:
 * a byte-order mark decides at once; otherwise the first bytes that are not ASCII decide,
 * wherever in the file they stand (ASCII reads the same in UTF-8 and Windows-1252). Decided
 * by the file's first 64 KB alone, an Excel export whose first thousand rows held no accent
 * was read as UTF-8, and every later "é" was stored as U+FFFD without a word (found by an
 * import probe).
 *
 * The decision looks at the same bytes however the file is cut into chunks: the 64 KB from
 * the first non-ASCII byte on (or to the end of the file), held back until they have come or
 * one of them is not UTF-8. Decided from what the chunk holding that first byte happened to
 * hold (as few as 4 bytes with small chunks), a Windows-1252 file whose first accents read as
 * UTF-8 ("Groß–Gerau": ß and an en dash are a valid 2-byte sequence) was decoded as UTF-8, and
 * its later "José" became "Jos\uFFFD" (seen in a fuzz run with chunks of 1-3 bytes).
 */
export function textStreamDecoder(): { write(bytes: Uint8Array): string; end(): string } {
  let decoder: Pick<TextDecoder, 'decode'> | undefined;
  // The file's first bytes, until there are enough to tell a byte-order mark; then undefined.
  let start: Uint8Array | undefined = new Uint8Array(0);
  // From the first non-ASCII byte on, until decided: the bytes held back (copies: a caller
  // may reuse its buffer), how many of the sample the check has seen, and the check itself.
  let held: Uint8Array[] = [];
  let sampled = 0;
  let check: TextDecoder | undefined;
  const ascii = (bytes: Uint8Array) => new TextDecoder('utf-8').decode(bytes);
  const decide = (encoding: TextEncoding, last: boolean): string => {
    // Mid-file: a byte-order mark's bytes here are a character, not a mark.
    decoder = textDecoderFor(encoding, { ignoreBOM: true });
    let text = '';
    for (const bytes of held) text += decoder.decode(bytes, { stream: true });
    held = [];
    return last ? text + decoder.decode() : text;
  };
  const undecided = (input: Uint8Array, last: boolean): string => {
    let bytes = input;
    if (start) {
      bytes = joined(start, input);
      if (bytes.length < 3 && !last) {
        start = bytes.slice();
        return '';
      }
      start = undefined;
      const marked = markedEncoding(bytes);
      if (marked) {
        decoder = new TextDecoder(marked);
        return decoder.decode(bytes, { stream: !last });
      }
    }
    let text = '';
    if (!check) {
      const at = bytes.findIndex((b) => b >= 0x80);
      if (at < 0) return ascii(bytes);
      text = ascii(bytes.subarray(0, at));
      bytes = bytes.subarray(at);
      check = new TextDecoder('utf-8', { fatal: true });
    }
    held.push(bytes.slice());
    const sample = bytes.subarray(0, SAMPLE_BYTES - sampled);
    sampled += sample.length;
    try {
      // A character cut at the sample's end is no error; one cut by the file's end is.
      check.decode(sample, { stream: true });
      if (last) check.decode();
    } catch {
      return text + decide('windows-1252', last);
    }
    return sampled >= SAMPLE_BYTES || last ? text + decide('utf-8', last) : text;
  };
  return {
    write: (bytes) => (decoder ? decoder.decode(bytes, { stream: true }) : undecided(bytes, false)),
    end: () => (decoder ? decoder.decode() : undecided(new Uint8Array(0), true)),
  };
}

function joined(a: Uint8Array, b: Uint8Array): Uint8Array {
  if (a.length === 0) return b;
  const all = new Uint8Array(a.length + b.length);
  all.set(a);
  all.set(b, a.length);
  return all;
}

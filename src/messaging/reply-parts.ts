// Fits a reply to the channel's size limit (Twilio refuses WhatsApp bodies over 1,600
// characters): split into parts at paragraph, then sentence, then word boundaries, each
// part numbered "(1/3)", or shortened with a marker. Pure text work: knows nothing of the
// outbox that sends the parts.

export type OverflowPolicy = 'split' | 'truncate';

const SHORTENED = '… (reply shortened)';

/**
 * The most parts a reply is split into; the last one says the reply was shortened. Nobody
 * reads a chat answer in dozens of messages, and a runaway text (a model that repeats
 * itself, a long record quoted whole) must not flood the contact nor hold its job while
 * thousands of parts go out one by one.
 */
export const MAX_PARTS = 10;

/** Units to pack, most preferred boundary first: paragraphs, sentences, words, characters. */
function unitsOf(text: string, level: number): string[] {
  switch (level) {
    case 0:
      return text.split(/\n{2,}/);
    case 1:
      // A sentence: up to and including its end marks (or a line end), with the spaces after.
      return (text.match(/[^.!?\n]*(?:[.!?]+\s*|\n+|$)/g) ?? [text]).filter((unit) => unit !== '');
    case 2:
      return (text.match(/\s*\S+\s*/g) ?? [text]).filter((unit) => unit !== '');
    default:
      return Array.from(text);
  }
}

const JOINERS = ['\n\n', '', '', ''];

/** Greedy packing of `text` into pieces of at most `max` characters, at the coarsest boundary that fits. */
function pack(text: string, max: number, level = 0): string[] {
  if (text.length <= max) return [text];
  const pieces: string[] = [];
  let current = '';
  for (const unit of unitsOf(text, level)) {
    const candidate = current === '' ? unit : current + JOINERS[level] + unit;
    if (candidate.trimEnd().length <= max) {
      current = candidate;
      continue;
    }
    if (current.trim() !== '') pieces.push(current.trimEnd());
    if (unit.trimEnd().length <= max) current = unit;
    else {
      // One unit alone is too long: pack it at the next finer boundary.
      pieces.push(...pack(unit.trimEnd(), max, level + 1));
      current = '';
    }
  }
  if (current.trim() !== '') pieces.push(current.trimEnd());
  return pieces.map((piece) => piece.trim()).filter((piece) => piece !== '');
}

/**
 * The parts to send for `text`, each at most `maxChars` long. One part when it fits.
 * `split`: every part ends with its number, "(2/3)", so a reader sees order and
 * completeness even if WhatsApp shows them out of order; at most MAX_PARTS of them. `truncate`: one part, cut at a
 * sentence or word boundary, ending with a marker that says it was shortened.
 */
export function replyParts(text: string, maxChars: number, policy: OverflowPolicy = 'split'): string[] {
  const body = text.trim();
  if (body.length <= maxChars) return [body];
  if (policy === 'truncate') {
    const room = maxChars - SHORTENED.length;
    // Only the first piece is kept: the text past twice the room is never read.
    const kept = pack(body.slice(0, 2 * maxChars), room, 1)[0] ?? body.slice(0, room);
    return [`${kept.trimEnd()}${SHORTENED}`];
  }
  // Room for " (NN/NN)"; recount once if the number of parts needs more digits.
  let reserve = ' (9/9)'.length;
  // Text beyond what MAX_PARTS parts can hold is never sent: not packed either (5 MB took
  // seconds). Cut there, at a word's end, it is shortened even if what is left fits (the
  // whitespace dropped between parts can make it fit).
  const cut = body.length > MAX_PARTS * maxChars;
  let sendable = body;
  if (cut) {
    sendable = body.slice(0, MAX_PARTS * maxChars);
    // Not in the middle of a word, unless the word is a part long (then it is cut anyway).
    const wordEnd = sendable.search(/\s+\S*$/);
    if (wordEnd > sendable.length - maxChars) sendable = sendable.slice(0, wordEnd);
  }
  for (;;) {
    let pieces = pack(sendable, maxChars - reserve);
    if (cut || pieces.length > MAX_PARTS) {
      const kept = pieces.slice(0, MAX_PARTS);
      const last = pack(kept.at(-1)!, maxChars - reserve - SHORTENED.length, 1)[0]!;
      pieces = [...kept.slice(0, -1), `${last}${SHORTENED}`];
    }
    const label = ` (${pieces.length}/${pieces.length})`;
    if (label.length <= reserve) return pieces.map((piece, i) => `${piece} (${i + 1}/${pieces.length})`);
    reserve = label.length;
  }
}

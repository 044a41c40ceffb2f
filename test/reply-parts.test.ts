// Fitting replies to WhatsApp's size limit: parts at the coarsest boundary that fits, each
// numbered and under the limit, nothing lost or reordered; or one shortened part.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { MAX_PARTS, replyParts } from '../src/messaging/reply-parts.ts';

const words = (text: string) => text.split(/\s+/).filter(Boolean).join(' ');
const unlabelled = (parts: string[]) => parts.map((p) => p.replace(/ \(\d+\/\d+\)$/, ''));

test('a reply that fits is one part, unchanged', () => {
  assert.deepEqual(replyParts('  Kort antwoord.  ', 1600), ['Kort antwoord.']);
});

test('a long reply splits at paragraphs first, then sentences, then words, numbered in order', () => {
  const paragraph = 'Je hebt recht op 25 vakantiedagen per jaar. '.repeat(20).trim();
  const text = [paragraph, paragraph, paragraph].join('\n\n');
  const parts = replyParts(text, 1600);
  assert.equal(parts.length, 3);
  assert.deepEqual(unlabelled(parts), [paragraph, paragraph, paragraph]);
  assert.deepEqual(parts.map((p) => p.slice(-5)), ['(1/3)', '(2/3)', '(3/3)']);
  const sentences = replyParts('Eén zin. '.repeat(400), 1600);
  assert.ok(sentences.every((p) => p.length <= 1600 && /zin\. \(\d+\/\d+\)$/.test(p)), 'cut after a sentence');
  const monster = replyParts('x'.repeat(5000), 1600);
  assert.ok(monster.every((p) => p.length <= 1600));
  assert.equal(unlabelled(monster).join(''), 'x'.repeat(5000));
});

test('any text: every part within the limit, and the parts read back as the text', () => {
  const texts = fc.array(fc.oneof(fc.lorem({ maxCount: 40, mode: 'sentences' }), fc.constantFrom('\n\n', '...', '!?', ' ', 'é', 'https://example.com/a.b?c=d')), { maxLength: 60 }).map((xs) => xs.join(''));
  fc.assert(
    fc.property(texts, fc.integer({ min: 100, max: 1600 }), (text, max) => {
      fc.pre(text.trim() !== '');
      const parts = replyParts(text, max);
      assert.ok(parts.every((p) => p.length <= max && p.trim() !== ''), `a part over ${max}: ${parts.map((p) => p.length)}`);
      assert.ok(parts.length <= MAX_PARTS);
      const read = words(unlabelled(parts).join(' ')).replace(/\s/g, '');
      const whole = words(text).replace(/\s/g, '');
      if (parts.length < MAX_PARTS) assert.equal(read, whole);
      else if (read !== whole) {
        assert.match(parts.at(-1)!, /… \(reply shortened\) \(\d+\/\d+\)$/);
        assert.ok(whole.startsWith(read.replace('…(replyshortened)', '')), 'the start of the text, in order');
      }
    }),
    { numRuns: 300 },
  );
});

// A 5 MB cell of a person's record, quoted whole by the offline provider, went out as 3,151
// messages and held the job (and the embedded database) for 52 s (found by a new-user probe).
test('a runaway reply is at most MAX_PARTS parts, the last saying it was shortened', () => {
  const parts = replyParts(`Je record: ${'x'.repeat(5_000_000)}`, 1600);
  assert.equal(parts.length, MAX_PARTS);
  assert.ok(parts.every((p) => p.length <= 1600));
  assert.match(parts.at(-1)!, /x… \(reply shortened\) \(10\/10\)$/);
  assert.deepEqual(parts.slice(0, -1).map((p) => p.slice(-7)), ['(1/10)', '(2/10)', '(3/10)', '(4/10)', '(5/10)', '(6/10)', '(7/10)', '(8/10)', '(9/10)'].map((l) => ` ${l}`.slice(-7)));
  // Cut where ten parts end, the rest can fit in ten (whitespace between parts dropped):
  // still shortened, at a word's end (review finding: it ended "…wo (10/10)").
  const paragraphs = replyParts(Array.from({ length: 10 }, () => 'woord '.repeat(250).trim()).join('\n'.repeat(150)), 1600);
  assert.ok(paragraphs.length <= MAX_PARTS);
  assert.match(paragraphs.at(-1)!, /woord… \(reply shortened\) \(\d+\/\d+\)$/);
  const sentences = replyParts('Een zin over verlof. '.repeat(2000), 500);
  assert.equal(sentences.length, MAX_PARTS);
  assert.match(sentences.at(-1)!, /verlof\.… \(reply shortened\) \(10\/10\)$/);
});

test('truncate: one part under the limit that says it was shortened', () => {
  const text = 'Een lange zin over de regeling. '.repeat(100);
  const [only, ...rest] = replyParts(text, 500, 'truncate');
  assert.equal(rest.length, 0);
  assert.ok(only!.length <= 500);
  assert.match(only!, /regeling\.… \(reply shortened\)$/);
});

// Logs carry phone numbers masked, also inside texts we did not write: a job's error is
// often an outside service's own words, and Twilio's name the number ("The 'To' number
// whatsapp:+31687654322 is not a valid WhatsApp user"). That line reached the log whole
// (found by a security probe).
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import { createLogger } from '../src/logger.ts';

function capture(format: 'json' | 'pretty') {
  const lines: string[] = [];
  const logger = createLogger('info', format, new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) }));
  return { logger, lines };
}

for (const format of ['json', 'pretty'] as const) {
  test(`phone numbers are masked in logged fields, errors and messages (${format})`, () => {
    const { logger, lines } = capture(format);
    const jobId = '01a24cfd-57b4-7aab-8407-7ccfb088dc0d';
    logger.error({ jobId, attempt: 3, error: "Twilio error 21211: The 'To' number whatsapp:+31687654322 is not a valid WhatsApp user", at: '2026-12-06T20:13:24.002Z' }, 'job failed permanently');
    logger.warn({ err: new Error('sending to +447700900123 failed'), nested: { detail: 'from +12025550143' } }, 'reply to %s not sent', '+4915112345678');
    logger.info('contact +33612345678 opted out');
    // As people write them (an admin's typing quoted back), and at a sentence's end: both
    // reached the log whole.
    logger.warn({ error: 'phone: "+31 6 1234 5678" is opted out; so is +1-202-555-0199' }, 'reply not sent to +447700900124.');
    logger.warn({ typed: '+31 (0)6 8765 4321 or +31 6  2468 1357' }, 'sent to +31699887766 12 times, at +0000 2026');
    const out = lines.join('\n');
    for (const number of ['+31687654322', '+447700900123', '+12025550143', '+4915112345678', '+33612345678', '+31 6 1234 5678', '1234 5678', '+1-202-555-0199', '555-0199', '+447700900124', '8765 4321', '2468 1357', '+31699887766']) {
      assert.ok(!out.includes(number), `${number} is not in the log:\n${out}`);
    }
    assert.match(out, /\+31•+78\\?" is opted out/);
    assert.match(out, /not sent to \+44•+24\./);
    // The figure after a whole number stays, and so does what only starts with + and 0 (a time zone).
    assert.match(out, /sent to \+31•+66 12 times, at \+0000 2026/);
    assert.match(out, /whatsapp:\+31•+22 is not a valid WhatsApp user/);
    assert.match(out, /\+44•+23/);
    // What only looks like digits stays: ids, times, codes.
    assert.ok(out.includes(jobId));
    assert.ok(out.includes('2026-12-06T20:13:24.002Z'));
    assert.match(out, /Twilio error 21211/);
  });

  test(`numbers dialled with 00 and email addresses are masked too (${format})`, () => {
    // Found by a personal-data probe: an outside service's error quoting both reached the log whole.
    const { logger, lines } = capture(format);
    logger.error({ error: 'Forwarding blocked: number 0031 6 12 34 56 78 / jan@example.nl is on the block list' }, 'job failed permanently');
    logger.warn({ to: '0044770090012', cc: 'Anna.de-Vries+hr@mail.example.co.uk' }, 'copied to piet@example.nl.');
    logger.info({ zone: '+0000 2026', at: '2026-12-07T00:12:34.000Z', count: '007 times', jobId: '01a24f26-0065-7927-9cc5-1a2b3c4d5e6f', costUsd: 0.00123456789, url: '/api/jobs?id=001234567890' }, 'not personal');
    const out = lines.join('\n');
    for (const personal of ['12 34 56 78', 'jan@example.nl', '0044770090012', 'Anna.de-Vries+hr@', 'piet@example.nl']) {
      assert.ok(!out.includes(personal), `${personal} is not in the log:\n${out}`);
    }
    assert.match(out, /number 003•+78 \/ j•••@example\.nl is on the block list/);
    assert.match(out, /copied to p•••@example\.nl\./);
    assert.match(out, /A•••@mail\.example\.co\.uk/);
    // Found in review: a uuid's segment, a decimal and a query value starting with 00 were masked.
    for (const kept of ['+0000 2026', '2026-12-07T00:12:34.000Z', '007 times', '01a24f26-0065-7927-9cc5-1a2b3c4d5e6f', '0.00123456789', 'id=001234567890']) assert.ok(out.includes(kept), `${kept} stays`);
  });

  test(`errors keep their type; an error logged alone, arrays and a child's bindings are masked too; ids and prices are not numbers (${format})`, () => {
    const { logger, lines } = capture(format);
    class TwilioError extends Error {}
    logger.error(new TwilioError("The 'To' number whatsapp:+31687654322 is not a valid WhatsApp user"));
    logger.error({ err: new TypeError('bad +447700900123') });
    logger.warn({ recipients: ['+12025550143', { to: '+33612345678' }] }, 'several');
    logger.child({ to: '+4915112345678' }).info('bound');
    logger.info({ sid: 'SMabc+12345678901', blob: 'ab+1234567890==', price: '+1234567.89' }, 'not numbers');
    // A multi-line text, as an outside service's error may be: JSON writes the break as \n.
    logger.error({ err: new Error('numbers:\n+447700900123 and\t+12025550143') }, 'several lines');
    const out = lines.join('\n');
    for (const number of ['+31687654322', '+447700900123', '+12025550143', '+33612345678', '+4915112345678']) {
      assert.ok(!out.includes(number), `${number} is not in the log:\n${out}`);
    }
    if (format === 'json') {
      const records = lines.map((line) => JSON.parse(line));
      assert.equal(records[0].err.type, 'TwilioError');
      assert.match(records[0].msg, /whatsapp:\+31•+22 is not a valid WhatsApp user/);
      assert.equal(records[1].err.type, 'TypeError');
      assert.deepEqual(records[4], { ...records[4], sid: 'SMabc+12345678901', blob: 'ab+1234567890==', price: '+1234567.89' });
      assert.match(records[5].err.message, /^numbers:\n\+44•+23 and\t\+12•+43$/);
    }
  });
}

test('a long text with no address in it is masked in linear time, and the addresses around it still are', () => {
  // Found in review: the email mask tried again from every character of a run of letters,
  // dots and dashes, each try reading to the run's end. A text someone else wrote (an outside
  // service's error quoting a message) can be one long run: 131,072 of them held the log line
  // up for half a minute here; 4,096 (a WhatsApp message's length) took 20 ms.
  const { logger, lines } = capture('json');
  const hostile = 'a.'.repeat(65_536);
  const started = performance.now();
  logger.warn({ error: `refused: ${hostile} (from jan@example.nl, cc piet@example.nl.x@c.org)` }, 'job failed');
  const took = performance.now() - started;
  assert.ok(took < 2000, `masked in ${Math.round(took)} ms`);
  const out = lines.join('');
  assert.ok(out.includes(hostile), 'the run is no address, and stays');
  // The same addresses as before: one right after another's end (".x@c.org") is masked too.
  assert.match(out, /from j•••@example\.nl, cc p•••@example\.nl\.•••@c\.org\)/);
});

test('a database error in a request logs its statement, not the values it carried (embedded database)', async () => {
  // PGlite puts a failed statement's parameters on its error, and the 500 handler logged the
  // error whole: a document's text, a message, a person's row went to the log at error level.
  const { startEmbeddedAdminApp, TEST_ADMIN_TOKEN } = await import('./helpers/admin-app.ts');
  const { buildApp } = await import('../src/http/app.ts');
  const t = await startEmbeddedAdminApp();
  const lines: string[] = [];
  const app = await buildApp({ ...t.runtime, logger: createLogger('info', 'json', new Writable({ write: (chunk, _encoding, done) => (lines.push(String(chunk)), done()) })) });
  try {
    // Any statement the database refuses will do: here a trigger refuses every document.
    await t.runtime.db.query(`create function refuse_all() returns trigger language plpgsql as $$ begin raise exception 'refused for the test'; end $$`);
    await t.runtime.db.query('create trigger refuse_all before insert on documents for each row execute function refuse_all()');
    const secret = 'Anna de Vries is on sick leave until May (burn-out)';
    const response = await app.inject({
      method: 'POST',
      url: '/api/documents',
      headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
      payload: { title: 'Absence list', body: secret },
    });
    assert.equal(response.statusCode, 500, response.body);
    const failure = lines.map((line) => JSON.parse(line)).find((record) => record.msg === 'request failed');
    assert.ok(failure, `the failure is logged:\n${lines.join('')}`);
    assert.match(failure.err.message, /refused for the test/);
    assert.ok(!lines.join('').includes('sick leave'), `the document's text is not in the log:\n${lines.join('')}`);
    assert.ok(!lines.join('').includes('Absence list'), 'nor its title');
  } finally {
    await app.close();
    await t.close();
  }
});

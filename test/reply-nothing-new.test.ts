// A WhatsApp message with no text and no media (a contact card, a reaction: Twilio posts
// them with an empty Body) asks nothing: it gets no reply, and above all not a second
// answer to the question before it. A location pin, also posted with an empty Body, is
// stored as its place and answered: the thread showed an empty bubble and the reply could
// not use where the contact is (found by a WhatsApp probe).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inboundParams, messagingSuite, receiveAnswered } from './helpers/messaging.ts';

const ANNA = '+31612349999';
const suite = messagingSuite();

const receive = (params: Record<string, string>) => receiveAnswered(suite.m, params);
const bodyOf = async (sid: string) => (await suite.t.db.query<{ body: string }>('select body from messages where twilio_sid = $1', [sid])).rows[0]!.body;

test('a message with nothing in it after a question gets no reply: the question is not answered twice', async () => {
  const question = await receive(inboundParams('Waar is het kantoor in Utrecht?', ANNA));
  assert.ok(question.replyId, 'the question is answered');
  const reaction = await receive(inboundParams('', ANNA));
  assert.deepEqual(reaction, { skipped: 'nothing_to_answer', reason: 'no text and no media (a contact card or a reaction?)' });
  assert.equal(suite.twilioApi.messages.length, 1, 'one reply in all');
  // A question after it is answered as usual.
  assert.ok((await receive(inboundParams('En hoe laat gaat het open?', ANNA))).replyId);
  assert.equal(suite.twilioApi.messages.length, 2);
});

test('a location pin is stored as its place and answered like a message; a pin without a valid place stays empty', async () => {
  const before = suite.twilioApi.messages.length;
  const pin = inboundParams('', ANNA, { MessageType: 'location', Latitude: '52.0907', Longitude: '5.1214', Address: 'Stationsplein 1,\nUtrecht', Label: 'Kantoor' });
  const answered = await receive(pin);
  assert.ok(answered.replyId, `the pin is answered: ${JSON.stringify(answered)}`);
  assert.equal(await bodyOf(pin.MessageSid!), '[location] Kantoor, Stationsplein 1, Utrecht (52.0907, 5.1214)');
  const reply = await suite.t.db.query<{ reply_to: string }>('select q.twilio_sid as reply_to from messages r join messages q on q.id = r.reply_to_message_id where r.id = $1', [answered.replyId]);
  assert.equal(reply.rows[0]!.reply_to, pin.MessageSid, 'the reply answers the pin, not an earlier question again');
  assert.equal(suite.twilioApi.messages.length, before + 1);

  // A label too long is cut, not a reason to lose the place.
  const long = inboundParams('', ANNA, { MessageType: 'location', Latitude: '-33.8568', Longitude: '151.2153', Label: 'x'.repeat(5000) });
  assert.ok((await receive(long)).replyId);
  assert.equal(await bodyOf(long.MessageSid!), `[location] ${'x'.repeat(200)} (-33.8568, 151.2153)`);

  const nowhere = inboundParams('', ANNA, { MessageType: 'location', Latitude: '91', Longitude: '' });
  assert.equal((await receive(nowhere)).skipped, 'nothing_to_answer');
  assert.equal(await bodyOf(nowhere.MessageSid!), '');
});

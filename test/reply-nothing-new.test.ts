// A WhatsApp message with no text and no media (a location pin, a contact card, a reaction:
// Twilio posts them with an empty Body) asks nothing: it gets no reply, and above all not a
// second answer to the question before it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inboundParams, messagingSuite, receiveAnswered } from './helpers/messaging.ts';

const ANNA = '+31612349999';
const suite = messagingSuite();

const receive = (params: Record<string, string>) => receiveAnswered(suite.m, params);

test('a location pin after a question gets no reply: the question is not answered twice', async () => {
  const question = await receive(inboundParams('Waar is het kantoor in Utrecht?', ANNA));
  assert.ok(question.replyId, 'the question is answered');
  const pin = await receive(inboundParams('', ANNA, { MessageType: 'location', Latitude: '52.0907', Longitude: '5.1214', Address: 'Utrecht' }));
  assert.deepEqual(pin, { skipped: 'nothing_to_answer', reason: 'no text and no media (a location, a contact card or a reaction?)' });
  assert.equal(suite.twilioApi.messages.length, 1, 'one reply in all');
  // A question after it is answered as usual.
  assert.ok((await receive(inboundParams('En hoe laat gaat het open?', ANNA))).replyId);
  assert.equal(suite.twilioApi.messages.length, 2);
});

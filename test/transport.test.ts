// The Twilio transport against the fake Twilio over real HTTP: the official SDK's wire
// format, and every failure classified by what it means for sending again.
import assert from 'node:assert/strict';
import { createServer as createHttpsServer } from 'node:https';
import { createServer } from 'node:net';
import { after, before, beforeEach, describe, test } from 'node:test';
import { SendError, TwilioTransport } from '../src/messaging/transport.ts';
import { twilioErrorText } from '../src/messaging/twilio.ts';
import { FAKE_ACCOUNT_SID, FAKE_AUTH_TOKEN, startFakeTwilio, type FakeTwilio } from './helpers/fake-twilio.ts';

const TO = 'whatsapp:+31612345678';

// A self-signed certificate (valid 100 years), as a TLS-inspecting proxy Node does not trust shows.
const SELF_SIGNED_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgv+wN4Wa6va7MXcmc
+Cqw+5l5LPkx791a5JxmVDBz3v+hRANCAARUWBnBfMnlibP893euVD55GJHC8MIm
5qBKi9ljT6Ka0zU3/jXQn91VcBciDEllpSfwlm8qHeuSHhWBcyy7JzNj
-----END PRIVATE KEY-----`;
const SELF_SIGNED_CERT = `-----BEGIN CERTIFICATE-----
MIIBjDCCATGgAwIBAgIUSGI09u8KK68JOftmPIY9Oo5MrA0wCgYIKoZIzj0EAwIw
GjEYMBYGA1UEAwwPYXBpLnR3aWxpby50ZXN0MCAXDTI2MTIwNzA4NDcyMVoYDzIx
MjYxMTEzMDg0NzIxWjAaMRgwFgYDVQQDDA9hcGkudHdpbGlvLnRlc3QwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAARUWBnBfMnlibP893euVD55GJHC8MIm5qBKi9lj
T6Ka0zU3/jXQn91VcBciDEllpSfwlm8qHeuSHhWBcyy7JzNjo1MwUTAdBgNVHQ4E
FgQUBsO3tArdlzuPmHRgvAit/xddh2gwHwYDVR0jBBgwFoAUBsO3tArdlzuPmHRg
vAit/xddh2gwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAsyvb
pcfuBQW6G8r0+ub5VL3FchJhx2kxmxkq4JlMJnMCIQDcQ4dsban+6HsRdaSQi27j
NjTiUR+CtRXf9cawYlf/Pw==
-----END CERTIFICATE-----`;

async function failure(send: Promise<unknown>): Promise<SendError> {
  try {
    await send;
  } catch (err) {
    assert.ok(err instanceof SendError, `expected a SendError, got ${String(err)}`);
    return err;
  }
  assert.fail('the send succeeded');
}

describe('Twilio transport', () => {
  let fake: FakeTwilio;
  let transport: TwilioTransport;
  const calls: Array<[string, string]> = [];
  before(async () => {
    fake = await startFakeTwilio();
    transport = new TwilioTransport({
      accountSid: FAKE_ACCOUNT_SID,
      authToken: FAKE_AUTH_TOKEN,
      from: 'whatsapp:+14155238886',
      apiBaseUrl: fake.url,
      metrics: { observeTwilioCall: (operation, _ms, outcome) => calls.push([operation, outcome]) },
    });
  });
  after(() => fake.close());
  beforeEach(() => {
    fake.reset();
    calls.length = 0;
  });

  test('sends From, To, Body and StatusCallback as a Basic-auth form post; returns the SID', async () => {
    const sent = await transport.send({ to: TO, body: 'Hallo Anna', statusCallbackUrl: 'https://aiq.example.com/webhooks/twilio/status?messageId=1' });
    assert.match(sent.sid!, /^SM[0-9a-f]{32}$/);
    assert.equal(sent.status, 'queued');
    const request = fake.requests[0]!;
    assert.equal(request.path, `/2010-04-01/Accounts/${FAKE_ACCOUNT_SID}/Messages.json`);
    assert.equal(request.authorized, true);
    assert.deepEqual(request.params, { From: 'whatsapp:+14155238886', To: TO, Body: 'Hallo Anna', StatusCallback: 'https://aiq.example.com/webhooks/twilio/status?messageId=1' });
    assert.deepEqual(calls, [['send', 'ok']]);
  });

  test('429 is throttled, with the server’s Retry-After', async () => {
    fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests', retryAfterSeconds: 7 });
    const error = await failure(transport.send({ to: TO, body: 'x' }));
    assert.equal(error.kind, 'throttled');
    assert.equal(error.details.retryAfterMs, 7000);
    assert.equal(error.code, 20429);
    assert.deepEqual(calls, [['send', 'rate_limited']]);

    // Without Retry-After no wait is made up here: the queue backs off (test/outbox.test.ts).
    fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
    const unnamed = await failure(transport.send({ to: TO, body: 'x' }));
    assert.equal(unnamed.kind, 'throttled');
    assert.equal(unnamed.details.retryAfterMs, undefined);
  });

  test('5xx and a refused connection are unavailable; only the 5xx may have gone out all the same; 4xx is rejected with Twilio’s code', async () => {
    fake.fault({ kind: 'http', status: 503, code: 20503, message: 'Service Unavailable' });
    const unavailable = await failure(transport.send({ to: TO, body: 'x' }));
    assert.equal(unavailable.kind, 'unavailable');
    assert.equal(unavailable.maybeSent, true, 'a 5xx does not prove it was not taken');
    // A gateway's own 5xx, without a Twilio code, says no more.
    fake.fault({ kind: 'accept-then-http', status: 502, html: true });
    assert.equal((await failure(transport.send({ to: TO, body: 'x' }))).maybeSent, true);
    fake.fault({ kind: 'http', status: 429, code: 20429, message: 'Too Many Requests' });
    assert.equal((await failure(transport.send({ to: TO, body: 'x' }))).maybeSent, false, 'a 429 was not processed');

    fake.fault({ kind: 'http', status: 400, code: 63016, message: 'outside the allowed window' });
    const rejected = await failure(transport.send({ to: TO, body: 'x' }));
    assert.equal(rejected.kind, 'rejected');
    assert.equal(rejected.code, 63016);
    assert.match(rejected.message, /Twilio error 63016: outside WhatsApp's 24-hour window: a free-form reply is impossible/);

    const invalid = await failure(transport.send({ to: 'whatsapp:+1', body: 'x' }));
    assert.equal(invalid.kind, 'rejected');
    assert.equal(invalid.code, 21211);

    const probe = createServer();
    const port = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as { port: number }).port)));
    await new Promise((resolve) => probe.close(resolve));
    const nowhere = new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: `http://127.0.0.1:${port}` });
    const refused = await failure(nowhere.send({ to: TO, body: 'x' }));
    assert.equal(refused.kind, 'unavailable');
    assert.match(refused.message, /ECONNREFUSED/);
    assert.equal(refused.maybeSent, false, 'nothing reached Twilio');
  });

  test('wrong credentials are rejected (20003), not retried', async () => {
    const wrong = new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: 'wrong', from: 'whatsapp:+14155238886', apiBaseUrl: fake.url });
    const error = await failure(wrong.send({ to: TO, body: 'x' }));
    assert.equal(error.kind, 'rejected');
    assert.equal(error.code, 20003);
    assert.equal(fake.messages.length, 0);
  });

  // Found by a Twilio probe: a certificate Node refuses (a TLS-inspecting proxy, a clock far
  // off) was "uncertain", so every reply waited out its deadline and was flagged as possibly sent.
  test('a refused TLS certificate is unavailable: the handshake failed, nothing was sent', async () => {
    let reached = 0;
    const server = createHttpsServer({ key: SELF_SIGNED_KEY, cert: SELF_SIGNED_CERT }, (_req, res) => {
      reached += 1;
      res.end('{}');
    });
    const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
    try {
      const proxied = new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: `https://127.0.0.1:${port}` });
      const error = await failure(proxied.send({ to: TO, body: 'x' }));
      assert.equal(error.kind, 'unavailable');
      assert.match(error.message, /TLS certificate was refused \((DEPTH_ZERO_SELF_SIGNED_CERT|CERT_NOT_YET_VALID|CERT_HAS_EXPIRED)/);
      assert.match(error.message, /nothing was sent/);
      assert.equal(error.maybeSent, false);
      assert.equal(reached, 0);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('no answer within the time-out (a hang) is uncertain: the request may have arrived', async () => {
    const impatient = new TwilioTransport({ accountSid: FAKE_ACCOUNT_SID, authToken: FAKE_AUTH_TOKEN, from: 'whatsapp:+14155238886', apiBaseUrl: fake.url, timeoutMs: 300 });
    fake.fault({ kind: 'hang' });
    const error = await failure(impatient.send({ to: TO, body: 'x' }));
    assert.equal(error.kind, 'uncertain');
    assert.match(error.message, /it may have been accepted/);
  });

  test('a connection cut after Twilio accepted is uncertain: it may have gone out', async () => {
    fake.fault({ kind: 'accept-then-drop' });
    const error = await failure(transport.send({ to: TO, body: 'x' }));
    assert.equal(error.kind, 'uncertain');
    assert.equal(fake.messages.length, 1);
  });
});

test("a status callback's error code alone reads as a reason an admin can act on", () => {
  // Callbacks carry ErrorCode without a message: WhatsApp's usual codes read
  // "Twilio error 63024: unknown error" (found by a WhatsApp probe).
  assert.equal(twilioErrorText(63024, undefined), 'Twilio error 63024: WhatsApp says this recipient cannot receive the message (an invalid recipient)');
  assert.match(twilioErrorText(63049, undefined), /Meta chose not to deliver/);
  assert.equal(twilioErrorText(63999, undefined), 'Twilio error 63999: see https://www.twilio.com/docs/api/errors/63999', 'a code without a text of ours: where Twilio explains it');
  assert.equal(twilioErrorText(63999, 'Something Twilio said'), 'Twilio error 63999: Something Twilio said');
  assert.equal(twilioErrorText(undefined, undefined), 'Twilio: unknown error');
});

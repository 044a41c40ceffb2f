// The AI providers against a fake OpenAI/Azure HTTP server: wire format, Azure's deployment
// URL with api-version and api-key, embeddings in float and base64, token usage, and the
// mapping of 429/5xx/time-outs/4xx to what the queue does next. No SDK retries.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test, type TestContext } from 'node:test';
import OpenAI from 'openai';
import { loadConfig } from '../src/config.ts';
import { OFFLINE_LABEL } from '../src/ai/local-provider.ts';
import { promptBuild } from '../src/ai/prompts.ts';
import { aiProviderCreate } from '../src/ai/providers.ts';
import { PermanentJobError, RetryLaterError } from '../src/queue/index.ts';
import { fakeEmbedding, startFakeOpenAi, type FakeOpenAi } from './helpers/fake-openai.ts';

let fake: FakeOpenAi;
before(async () => {
  fake = await startFakeOpenAi({ reply: (body) => `echo: ${body.messages.at(-1).content}` });
});
after(() => fake.close());
beforeEach(() => fake.reset());

const prompt = promptBuild('You are a test.', {
  person: 'Name: Anna',
  knowledge: [{ id: 'c1', documentId: 'd1', title: 'Leave', headingPath: [], content: 'Employees have 25 days of holiday.', score: 0.03, relevance: 0.5 }],
  history: [{ role: 'user', body: 'How many holiday days?' }],
});

// A generous time-out: the fake runs in this process, and a stall of the test process longer
// than a short one would time out a call whose answer has come. The hang test sets its own.
function openaiProvider(env: Record<string, string> = {}) {
  return aiProviderCreate(
    loadConfig({ AI_PROVIDER: 'openai', OPENAI_API_KEY: 'sk-test', OPENAI_BASE_URL: fake.openaiBaseUrl, AI_REQUEST_TIMEOUT_MS: '10000', EMBEDDING_DIMENSIONS: '32', ...env }),
  );
}

/** The URLs the global fetch is called with from now until the test ends; each call is passed on. */
function globalFetchCalls(t: TestContext): string[] {
  const globalFetch = globalThis.fetch;
  const fetched: string[] = [];
  globalThis.fetch = (input, init) => {
    fetched.push(String(input));
    return globalFetch(input, init);
  };
  t.after(() => {
    globalThis.fetch = globalFetch;
  });
  return fetched;
}

describe('openai provider', () => {
  test('sends the prompt in the chat wire format and reports usage', async () => {
    const ai = openaiProvider();
    const result = await ai.chat(prompt);
    assert.equal(result.text, 'echo: How many holiday days?');
    assert.ok(result.usage.promptTokens > 0 && result.usage.totalTokens === result.usage.promptTokens + result.usage.completionTokens);
    const [request] = fake.chatRequests();
    assert.equal(request!.path, '/v1/chat/completions');
    assert.equal(request!.headers.authorization, 'Bearer sk-test');
    assert.equal(request!.body.model, 'gpt-4o-mini');
    assert.equal(request!.body.messages[0].role, 'system');
    assert.match(request!.body.messages[1].content, /^<reference_data>[\s\S]*Name: Anna[\s\S]*25 days of holiday[\s\S]*<\/reference_data>$/);
    assert.deepEqual(request!.body.messages[2], { role: 'user', content: 'How many holiday days?' });
  });

  test('embeds with the configured dimension, as floats', async () => {
    const ai = openaiProvider();
    const result = await ai.embed(['one text', 'another']);
    assert.equal(result.vectors.length, 2);
    assert.deepEqual(result.vectors[0], fakeEmbedding('one text', 32));
    const [request] = fake.embeddingRequests();
    assert.equal(request!.body.encoding_format, 'float');
    assert.equal(request!.body.dimensions, 32);
  });

  test('chat and embeddings go through undici request, a voice note upload through the global fetch (sdk-fetch.ts)', async (t) => {
    const fetched = globalFetchCalls(t);
    const ai = openaiProvider();
    assert.equal((await ai.chat(prompt)).text, 'echo: How many holiday days?');
    assert.equal((await ai.embed(['one text'])).vectors.length, 1);
    assert.deepEqual(fetched, [], 'JSON requests bypass the global fetch');
    const voice = await ai.transcribe!({ bytes: new Uint8Array([79, 103, 103, 83, 0, 1, 2, 3]), contentType: 'audio/ogg' });
    assert.equal(typeof voice.text, 'string');
    assert.deepEqual(fetched, [`${fake.openaiBaseUrl}/audio/transcriptions`], 'the multipart upload goes through the global fetch');
    assert.equal(fake.requests.filter((r) => r.endpoint === 'transcription').length, 1);
    // Named as the API expects: it refuses a file named after a content type's subtype like x-m4a.
    await ai.transcribe!({ bytes: new Uint8Array([0, 0, 0, 24, 102, 116, 121, 112]), contentType: 'audio/x-m4a' });
    await ai.transcribe!({ bytes: new Uint8Array([79, 103, 103, 83, 0, 1, 2, 3]), contentType: 'audio/opus; codecs=opus' });
    const names = fake.requests.filter((r) => r.endpoint === 'transcription').map((r) => /filename="([^"]+)"/.exec(String(r.body))?.[1]);
    assert.deepEqual(names, ['voice-note.ogg', 'voice-note.m4a', 'voice-note.ogg']);
  });

  test('with NODE_USE_ENV_PROXY=1 every request goes through the global fetch, which applies the proxy settings', async (t) => {
    const fetched = globalFetchCalls(t);
    const saved = process.env.NODE_USE_ENV_PROXY;
    t.after(() => {
      if (saved === undefined) delete process.env.NODE_USE_ENV_PROXY;
      else process.env.NODE_USE_ENV_PROXY = saved;
    });
    process.env.NODE_USE_ENV_PROXY = '1';
    const ai = openaiProvider();
    assert.equal((await ai.chat(prompt)).text, 'echo: How many holiday days?');
    assert.deepEqual(fetched, [`${fake.openaiBaseUrl}/chat/completions`]);
  });

  test('the fake honours base64, which the SDK asks for by default', async () => {
    const client = new OpenAI({ apiKey: 'sk-test', baseURL: fake.openaiBaseUrl, maxRetries: 0 });
    const result = await client.embeddings.create({ model: 'm', input: 'hello there', dimensions: 16 });
    assert.equal(fake.embeddingRequests()[0]!.body.encoding_format, 'base64');
    const expected = fakeEmbedding('hello there', 16);
    result.data[0]!.embedding.forEach((v, i) => assert.ok(Math.abs(v - expected[i]!) < 1e-6));
  });

  test('a vector of the wrong size fails at once and says which dimension to set', async () => {
    const native = await startFakeOpenAi({ ignoreDimensions: true, dimensions: 8 });
    try {
      const ai = aiProviderCreate(loadConfig({ AI_PROVIDER: 'openai', OPENAI_BASE_URL: native.openaiBaseUrl, EMBEDDING_DIMENSIONS: '32' }));
      await assert.rejects(ai.embed(['x']), (err: Error) => err instanceof PermanentJobError && /EMBEDDING_DIMENSIONS=8/.test(err.message));
    } finally {
      await native.close();
    }
  });

  test('429 with retry-after-ms → retry later after that delay, without spending an attempt', async () => {
    fake.failNext({ kind: 'status', status: 429, headers: { 'retry-after-ms': '1500' } });
    const err = await openaiProvider().chat(prompt).catch((e: unknown) => e);
    assert.ok(err instanceof RetryLaterError, String(err));
    assert.equal(err.delayMs, 1500);
    assert.equal(err.countsAsAttempt, false);
    assert.equal(fake.chatRequests().length, 1, 'the SDK did not retry by itself');
  });

  test('429 with retry-after in seconds, and without any header', async () => {
    fake.failNext({ kind: 'status', status: 429, headers: { 'retry-after': '7' } });
    const seconds = (await openaiProvider().embed(['x']).catch((e: unknown) => e)) as RetryLaterError;
    assert.equal(seconds.delayMs, 7000);
    fake.failNext({ kind: 'status', status: 429 });
    const none = (await openaiProvider().embed(['x']).catch((e: unknown) => e)) as RetryLaterError;
    // No wait of its own: the queue backs off by how often the job was throttled (throttleDelaySeconds).
    assert.ok(none instanceof RetryLaterError && !none.countsAsAttempt);
    assert.equal(none.delayMs, undefined);
  });

  test('500 and a connection refused are retryable errors (backoff), not permanent', async () => {
    fake.failNext({ kind: 'status', status: 500 });
    const server = await openaiProvider().chat(prompt).catch((e: unknown) => e);
    assert.ok(server instanceof Error && !(server instanceof PermanentJobError) && !(server instanceof RetryLaterError));
    assert.match(server.message, /HTTP 500/);
    const refused = await aiProviderCreate(loadConfig({ AI_PROVIDER: 'openai', OPENAI_BASE_URL: 'http://127.0.0.1:9/v1' }))
      .chat(prompt)
      .catch((e: unknown) => e);
    assert.ok(refused instanceof Error && !(refused instanceof PermanentJobError) && !(refused instanceof RetryLaterError));
    assert.equal(fake.chatRequests().length, 1);
  });

  test('a hanging server times out after AI_REQUEST_TIMEOUT_MS, as a retryable error', async () => {
    fake.failNext({ kind: 'hang' });
    const started = performance.now();
    const err = await openaiProvider({ AI_REQUEST_TIMEOUT_MS: '300' }).chat(prompt).catch((e: unknown) => e);
    const elapsed = performance.now() - started;
    assert.ok(err instanceof Error && !(err instanceof PermanentJobError), String(err));
    assert.match((err as Error).message, /timed out/i);
    assert.ok(elapsed >= 250 && elapsed < 3000, `took ${elapsed} ms`);
    assert.equal(fake.chatRequests().length, 1);
  });

  for (const status of [400, 401, 404]) {
    test(`${status} fails at once with the reason`, async () => {
      fake.failNext({ kind: 'status', status, message: `bad thing ${status}` });
      const err = await openaiProvider().chat(prompt).catch((e: unknown) => e);
      assert.ok(err instanceof PermanentJobError, String(err));
      assert.match(err.message, new RegExp(`HTTP ${status}.*bad thing ${status}`));
    });
  }
});

describe('azure provider', () => {
  const azure = () =>
    aiProviderCreate(
      loadConfig({
        AI_PROVIDER: 'azure',
        AZURE_OPENAI_ENDPOINT: fake.url,
        AZURE_OPENAI_API_KEY: 'azure-key-123',
        AZURE_OPENAI_API_VERSION: '2024-10-21',
        AZURE_OPENAI_CHAT_DEPLOYMENT: 'chat-prod',
        AZURE_OPENAI_EMBEDDING_DEPLOYMENT: 'embed-prod',
        EMBEDDING_DIMENSIONS: '24',
      }),
    );

  test('calls the deployment URLs with api-version and the api-key header', async () => {
    const ai = azure();
    assert.equal(ai.name, 'azure');
    await ai.chat(prompt);
    await ai.embed(['hello']);
    const [chat, embed] = fake.requests;
    assert.equal(chat!.path, '/openai/deployments/chat-prod/chat/completions');
    assert.equal(chat!.query['api-version'], '2024-10-21');
    assert.equal(chat!.headers['api-key'], 'azure-key-123');
    assert.equal(chat!.headers.authorization, undefined);
    assert.equal(embed!.path, '/openai/deployments/embed-prod/embeddings');
    assert.equal(embed!.query['api-version'], '2024-10-21');
    assert.equal(embed!.body.dimensions, 24);
  });

  test('Azure throttling (429 with retry-after-ms) maps like OpenAI', async () => {
    fake.failNext({ kind: 'status', status: 429, headers: { 'retry-after-ms': '250' } });
    const err = await azure().chat(prompt).catch((e: unknown) => e);
    assert.ok(err instanceof RetryLaterError && err.delayMs === 250 && !err.countsAsAttempt);
  });
});

describe('local provider', () => {
  test('is the default, offline, deterministic, and labels its answers', async () => {
    const ai = aiProviderCreate(loadConfig({}));
    assert.equal(ai.name, 'local');
    const a = await ai.embed(['Holiday days per year']);
    const b = await ai.embed(['Holiday days per year']);
    assert.deepEqual(a.vectors, b.vectors);
    assert.equal(a.vectors[0]!.length, 256);
    const answer = await ai.chat(prompt);
    assert.ok(answer.text.startsWith(OFFLINE_LABEL));
    assert.match(answer.text, /From "Leave": Employees have 25 days of holiday\./);
    assert.match(answer.text, /Your record: Name: Anna/);
    assert.equal(fake.requests.length, 0);
  });

  test('a heading is the context of the sentences under it, never an answer of its own', async () => {
    const ai = aiProviderCreate(loadConfig({}));
    const handbook = promptBuild('system', {
      person: null,
      knowledge: [
        { id: 'c1', documentId: 'd1', title: 'Handboek', headingPath: ['Lunch'], content: 'De kantine serveert warm eten van 12:00 tot 13:30.', score: 0.03, relevance: 0.5 },
        { id: 'c2', documentId: 'd1', title: 'Handboek', headingPath: ['Parkeren'], content: 'Bezoekers melden zich bij de receptie.', score: 0.02, relevance: 0.4 },
      ],
      history: [{ role: 'user', body: 'Lunch tijden?' }],
    });
    const answer = (await ai.chat(handbook)).text.split('\n');
    assert.deepEqual(answer.slice(1), ['From "Handboek" › Lunch: De kantine serveert warm eten van 12:00 tot 13:30.']);
  });
});

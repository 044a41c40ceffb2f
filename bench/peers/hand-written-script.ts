// The hand-written script aiq's users would otherwise write, the app's peer in the pipeline
// benchmark (bench/pipeline.ts; issue #18 asks for the pipeline next to something measured
// in the same run): the official openai and twilio packages with their defaults, and a
// fastify webhook that checks Twilio's signature, answers at once and works on the message
// in memory: embed the question, ask the chat model, send the answer through Twilio's REST
// API. At most SCRIPT_CONCURRENCY messages are worked on at once (what an
// OpenAI rate limit makes anyone add; the same as aiq's WORKER_CONCURRENCY), the rest wait
// in an array. Nothing is stored: a crash or a failed call loses the message, a redelivered
// webhook is answered twice, and the model sees no history and no knowledge. Everything
// aiq does beyond this is what its guarantees cost.
// Environment: PORT, HOST (127.0.0.1), PUBLIC_URL (the URL Twilio signs), WEBHOOK_PATH,
// TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_WHATSAPP_FROM, TWILIO_API_BASE_URL,
// OPENAI_API_KEY, OPENAI_BASE_URL, SCRIPT_CONCURRENCY. GET /readyz answers once it listens.
// Prints nothing but failed messages; exits 0 on SIGTERM or SIGINT.
import formbody from '@fastify/formbody';
import Fastify from 'fastify';
import OpenAI from 'openai';
import twilio from 'twilio';
import { listenUntilStopped } from '../lib/standalone-app.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) {
    console.error(`hand-written-script: ${name} is not set`);
    process.exit(2);
  }
  return value;
};

const webhookPath = process.env.WEBHOOK_PATH ?? '/webhooks/twilio/whatsapp';
const signedUrl = `${env('PUBLIC_URL')}${webhookPath}`;
const authToken = env('TWILIO_AUTH_TOKEN');
const from = env('TWILIO_WHATSAPP_FROM');
const concurrency = Number(process.env.SCRIPT_CONCURRENCY ?? 10);
const openai = new OpenAI({ apiKey: env('OPENAI_API_KEY'), baseURL: env('OPENAI_BASE_URL') });
const client = twilio(env('TWILIO_ACCOUNT_SID'), authToken);
client.api.baseUrl = env('TWILIO_API_BASE_URL');

async function answer(to: string, question: string): Promise<void> {
  await openai.embeddings.create({ model: 'text-embedding-3-small', input: question });
  const completion = await openai.chat.completions.create({
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'You are the assistant of our staff on WhatsApp. Answer briefly.' },
      { role: 'user', content: question },
    ],
  });
  await client.messages.create({ from, to, body: completion.choices[0]?.message.content ?? '' });
}

const waiting: Array<{ to: string; question: string }> = [];
let working = 0;
function work(): void {
  while (working < concurrency && waiting.length > 0) {
    const { to, question } = waiting.shift()!;
    working += 1;
    answer(to, question)
      .catch((err: unknown) => console.error(`hand-written-script: the reply to ${to} failed: ${String(err)}`))
      .finally(() => {
        working -= 1;
        work();
      });
  }
}

const app = Fastify({ logger: false });
await app.register(formbody);
app.get('/readyz', async () => 'ok');
app.post(webhookPath, async (request, reply) => {
  const form = (request.body ?? {}) as Record<string, string>;
  const signature = request.headers['x-twilio-signature'];
  if (typeof signature !== 'string' || !twilio.validateRequest(authToken, signature, signedUrl, form)) {
    return reply.status(403).send();
  }
  waiting.push({ to: form.From ?? '', question: form.Body ?? '' });
  work();
  return reply.status(200).type('text/xml').send('<Response/>');
});

await listenUntilStopped(app);

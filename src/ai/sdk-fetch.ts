// The fetch the openai SDK calls, on undici's request API instead of the global fetch. The
// global fetch is undici too, but it wraps every request and response in WHATWG objects
// and streams; a worker answering 200 messages at once pays that on its one thread, twice
// per reply (the question's embedding, the chat call). Measured with the SDK against the
// fake OpenAI, CPU per embedding + chat pair: 1.3-1.8 ms through the global fetch, 0.6-0.9
// through this, on Node 20; 1.0-1.3 against 0.5-0.8 on Node 24.
//
// Only what the SDK sends as JSON goes this way, and the answer is read whole (aiq never
// asks for a streamed answer). Anything else, a voice note's multipart upload, goes through
// the global fetch; so does everything when NODE_USE_ENV_PROXY=1, Node 24's switch that
// makes its fetch honour HTTP_PROXY/HTTPS_PROXY/NO_PROXY. (undici's request through its
// proxy agent was no substitute: when the proxy refused the tunnel, the request hung and
// ignored its abort signal, so the SDK's time-out never ended it.)
import { Agent, request, type Dispatcher } from 'undici';

/** Statuses whose response has no body (the Response constructor refuses one). */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/** A fetch for `new OpenAI({ fetch })`: undici's request for string bodies, the global fetch otherwise. */
export function sdkFetchCreate(): typeof fetch {
  if (process.env.NODE_USE_ENV_PROXY === '1') return (input, init) => fetch(input, init);
  const dispatcher = new Agent();
  return async (input, init = {}) => {
    if ((init.body !== undefined && init.body !== null && typeof init.body !== 'string') || typeof input !== 'string') return fetch(input, init);
    const headers: Record<string, string> = {};
    new Headers(init.headers).forEach((value, name) => {
      headers[name] = value;
    });
    const answer = await request(input, {
      method: (init.method ?? 'GET') as Dispatcher.HttpMethod,
      headers,
      body: init.body ?? undefined,
      signal: init.signal ?? undefined,
      dispatcher,
    });
    const body = Buffer.from(await answer.body.arrayBuffer());
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      if (Array.isArray(value)) for (const one of value) responseHeaders.append(name, one);
      else if (value !== undefined) responseHeaders.set(name, value);
    }
    return new Response(NULL_BODY_STATUSES.has(answer.statusCode) ? null : body, { status: answer.statusCode, headers: responseHeaders });
  };
}

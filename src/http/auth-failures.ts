// Brute force slowed: failed logins and failed bearer tokens are counted per client address
// (@fastify/rate-limit's store); past the limit every attempt from that address gets 429
// with Retry-After until the window ends, right or wrong, or guessing would go on unslowed.
// Successful requests are never counted. The client address is request.ip (TRUST_PROXY
// decides), an IPv6 one counted by its /64 (clientKey).
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

export interface AuthFailureLimiter {
  /** Answers 429 and returns true when this client used up its failures; else false. */
  refuseIfBlocked(request: FastifyRequest, reply: FastifyReply): Promise<boolean>;
  /** Counts one failed attempt of this client. */
  recordFailure(request: FastifyRequest): Promise<void>;
}

/** Registers the rate-limit store on `app` (no route is limited by it) and returns the limiter. */
export async function authFailureLimiter(app: FastifyInstance, options: { maxFailures: number; windowSeconds: number }): Promise<AuthFailureLimiter> {
  await app.register(rateLimit, { global: false });
  const limit = app.createRateLimit({ max: options.maxFailures, timeWindow: options.windowSeconds * 1000, keyGenerator: (request) => clientKey(request.ip) });
  // Behind a proxy that TRUST_PROXY does not name, every client has the proxy's address, so
  // anyone's wrong guesses lock every admin out. Said once, at the first failure that shows
  // it: a relayed request whose address is still the connection's.
  let untrustedProxyWarned = false;
  const warnIfUntrustedProxy = (request: FastifyRequest) => {
    const relayed = request.headers['x-forwarded-for'] ?? request.headers.forwarded;
    if (untrustedProxyWarned || relayed === undefined || request.ip !== request.socket.remoteAddress) return;
    untrustedProxyWarned = true;
    request.log.warn(
      { ip: request.ip, maxFailures: options.maxFailures, windowSeconds: options.windowSeconds },
      'a failed admin authentication came through a proxy TRUST_PROXY does not name (X-Forwarded-For or Forwarded set): failures are counted for the proxy\'s address, so anyone\'s wrong guesses lock every admin behind it out; set TRUST_PROXY to the proxy\'s address (README, Security). Without a proxy, the client sent the header itself',
    );
  };
  return {
    async refuseIfBlocked(request, reply) {
      const state = await limit(request, { increment: false });
      if (state.isAllowed || state.remaining > 0) return false;
      const retryAfter = Math.max(1, state.ttlInSeconds);
      request.log.warn({ ip: request.ip, retryAfter }, 'admin authentication refused: too many failed attempts from this address');
      await reply
        .status(429)
        .header('retry-after', String(retryAfter))
        .type('application/json')
        .send({ error: `too many failed attempts from this address: try again in ${retryAfter} s` });
      return true;
    },
    async recordFailure(request) {
      warnIfUntrustedProxy(request);
      await limit(request);
    },
  };
}

/**
 * Whose failures an address counts as: an IPv4 address itself, an IPv6 address by its /64.
 * One host is usually given a whole /64, so counting each IPv6 address apart would give a
 * guesser 2^64 budgets (found by a security probe).
 */
export function clientKey(ip: string): string {
  const address = ip.replace(/%.*$/, '');
  if (!address.includes(':')) return address;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  const [head = '', tail] = address.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups.slice(0, 4).map((group) => parseInt(group, 16).toString(16)).join(':')}::/64`;
}

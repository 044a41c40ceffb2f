// Admin access: ADMIN_TOKEN as a bearer token for /api, and for /admin a login form that
// sets an HMAC-signed session cookie (no server-side session store, so any number of
// `serve` processes accept it), plus CSRF tokens bound to that session for form posts.
// Without ADMIN_TOKEN the server is loopback-only (main.ts enforces it) and access is open.
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isLoopback } from '../config.ts';

const SESSION_COOKIE = 'aiq_session';

/** The refusal of open mode (no ADMIN_TOKEN) to any host name but a loopback one. */
export const OPEN_ELSEWHERE =
  'Refused: without ADMIN_TOKEN the dashboard answers only requests made on this machine, directly at a loopback address (http://127.0.0.1 or http://localhost), not through a proxy or tunnel. Set ADMIN_TOKEN to use it from anywhere else.';

const SESSION_SECONDS = 7 * 24 * 3600;

export interface Session {
  /** Random id of this login; CSRF tokens are derived from it. */
  sid: string;
  expiresAt: number;
}

/** Signs and checks sessions, CSRF tokens and bearer tokens for one ADMIN_TOKEN. */
export class AdminAuth {
  /** True when no ADMIN_TOKEN is set: everything is open (to this machine only). */
  readonly open: boolean;
  private readonly token: string | undefined;
  private readonly key: Buffer;

  constructor(adminToken: string | undefined) {
    this.token = adminToken;
    this.open = adminToken === undefined;
    // Derived from the token, so every process agrees and changing the token logs
    // everyone out. In open mode a per-process key is enough: nothing needs to survive.
    this.key = adminToken ? createHmac('sha256', adminToken).update('aiq admin session v1').digest() : randomBytes(32);
  }

  /** Constant-time comparison with ADMIN_TOKEN. */
  checkToken(candidate: string | undefined): boolean {
    if (this.open) return true;
    if (!candidate) return false;
    return safeEqual(this.mac(`token|${candidate}`), this.mac(`token|${this.token}`));
  }

  /** A new session and its cookie value. */
  issueSession(now = Date.now()): { session: Session; cookie: string } {
    const session = { sid: randomBytes(16).toString('base64url'), expiresAt: Math.floor(now / 1000) + SESSION_SECONDS };
    const body = `v1.${session.sid}.${session.expiresAt}`;
    return { session, cookie: `${body}.${this.mac(body)}` };
  }

  /** The session in a cookie value, or null when it is malformed, forged or expired. */
  readSession(cookie: string | undefined, now = Date.now()): Session | null {
    const parts = cookie?.split('.');
    if (!parts || parts.length !== 4 || parts[0] !== 'v1') return null;
    const [version, sid, expires, mac] = parts as [string, string, string, string];
    if (!safeEqual(mac, this.mac(`${version}.${sid}.${expires}`))) return null;
    const expiresAt = Number(expires);
    if (!Number.isInteger(expiresAt) || expiresAt * 1000 <= now) return null;
    return { sid, expiresAt };
  }

  /**
   * The session of a request: the first of its session cookies that holds one. There may be
   * several, and malformed ones: a page on another port of this host shares our cookies and
   * can set its own `aiq_session` with a narrower Path, which the browser sends first.
   */
  sessionOf(request: FastifyRequest, now = Date.now()): Session | null {
    for (const cookie of readCookies(request, SESSION_COOKIE)) {
      const session = this.readSession(cookie, now);
      if (session) return session;
    }
    return null;
  }

  /** The CSRF token for a session: forms carry it as `_csrf`, scripts as `x-csrf-token`. */
  csrfToken(session: Session): string {
    return this.mac(`csrf|${session.sid}`);
  }

  checkCsrf(session: Session, candidate: unknown): boolean {
    return typeof candidate === 'string' && safeEqual(candidate, this.csrfToken(session));
  }

  /** Binds an action's message (`?notice=`/`?problem=`) to this session: see actionQuery. */
  flashMac(session: Session, text: string): string {
    return this.mac(`flash|${session.sid}|${text}`).slice(0, 22);
  }

  private mac(text: string): string {
    return createHmac('sha256', this.key).update(text).digest('base64url');
  }
}

/**
 * Whether two secrets are equal, in a time that tells nothing of either: their digests are
 * compared (a length check first would tell a guesser the token's length).
 */
export function safeEqual(a: string, b: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(a), digest(b));
}

// The requests a gate (the API's onRequest hook, the dashboard's access hook) let through.
// Only they reach the audit log: what a gate refused was done by no one we know, and an
// unauthenticated client must not be able to fill the log and push real entries off its page.
const admitted = new WeakSet<FastifyRequest>();

/** Marks a request as let through by the admin gate: a checked token or session, open mode from this machine, or the login form. */
export function admit(request: FastifyRequest): void {
  admitted.add(request);
}

export function wasAdmitted(request: FastifyRequest): boolean {
  return admitted.has(request);
}

/**
 * Every value of one cookie in the Cookie header (no cookie plugin needed for one name). A
 * value that does not decode (`%`) is left out: it counts as absent rather than a 500.
 */
function readCookies(request: FastifyRequest, name: string): string[] {
  const values: string[] = [];
  for (const pair of (request.headers.cookie ?? '').split(';')) {
    const index = pair.indexOf('=');
    if (index <= 0 || pair.slice(0, index).trim() !== name) continue;
    try {
      values.push(decodeURIComponent(pair.slice(index + 1).trim()));
    } catch {
      // URIError: not a value we ever set.
    }
  }
  return values;
}

/**
 * Sets the session cookie: HttpOnly (scripts cannot read it), SameSite=Lax (other sites'
 * forms do not carry it), Path=/admin, and Secure whenever the request came over HTTPS:
 * directly, through a proxy that says so and is trusted by TRUST_PROXY, or as the browser
 * says it, its page's Origin being https. The last is for a TLS proxy TRUST_PROXY does not
 * name (it is optional): without it the cookie of an https login had no Secure, and the
 * browser sent it in clear text with any http:// link to the same name, which a network
 * attacker can make it follow. An Origin cannot make a browser's page lie about its scheme.
 */
export function setSessionCookie(request: FastifyRequest, reply: FastifyReply, value: string, maxAgeSeconds = SESSION_SECONDS): void {
  const secure = request.protocol === 'https' || /^https:\/\//i.test(request.headers.origin ?? '') ? '; Secure' : '';
  reply.header('set-cookie', `${SESSION_COOKIE}=${value}; Path=/admin; HttpOnly; SameSite=Lax; Max-Age=${maxAgeSeconds}${secure}`);
}

/** The bearer token of a request, if any. */
export function bearerToken(request: FastifyRequest): string | undefined {
  const match = /^Bearer\s+(.+)$/i.exec(request.headers.authorization ?? '');
  return match?.[1]?.trim();
}

// Headers a proxy or tunnel adds to what it relays (ngrok, cloudflared, Tailscale Funnel,
// Fly, nginx, Caddy, Akamai …): any X-Forwarded-* or X-Original-Forwarded-*, and these.
const RELAY_HEADERS = new Set(['forwarded', 'via', 'x-real-ip', 'x-client-ip', 'true-client-ip', 'cf-connecting-ip', 'fly-client-ip', 'tailscale-funnel-request']);
const relayHeader = (name: string) => RELAY_HEADERS.has(name) || name.startsWith('x-forwarded-') || name.startsWith('x-original-forwarded-');

/**
 * Whether a request was made on this machine, directly: what open mode (no ADMIN_TOKEN) and
 * an unguarded /metrics trust, and nothing else. Three tests, each against a way in:
 * - the connection comes from a loopback address (main.ts binds open mode to one anyway);
 * - the Host header names a loopback host: a page on another site that reaches the port by
 *   DNS rebinding (its own name resolving to 127.0.0.1) sends its own name. The raw header,
 *   not `request.host`: with TRUST_PROXY set that is X-Forwarded-Host, which such a page
 *   can send itself;
 * - no proxy or tunnel relayed it: a tunnel on this machine (`ngrok http 3000
 *   --host-header=rewrite`) connects from loopback with a loopback Host, for anyone on the
 *   internet; the headers it adds give it away.
 */
export function fromThisMachine(request: FastifyRequest): boolean {
  if (!isLoopback((request.socket.remoteAddress ?? '').replace(/^::ffff:/, ''))) return false;
  if (Object.keys(request.headers).some(relayHeader)) return false;
  try {
    const hostname = new URL(`http://${request.headers.host ?? ''}`).hostname.replace(/^\[|\]$/g, '');
    return isLoopback(hostname);
  } catch {
    return false;
  }
}

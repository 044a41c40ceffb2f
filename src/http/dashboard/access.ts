// The dashboard's gate: a hook that refuses other sites' requests, finds the session cookie
// (or, in open mode, issues one), sends the browser to the login form otherwise, checks that
// every POST comes from our own page with its CSRF token, and leaves the page context for
// the handlers to render with.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { OPEN_ELSEWHERE, admit, fromThisMachine, safeEqual, setSessionCookie, type AdminAuth, type Session } from '../auth.ts';
import type { AllowedHosts } from '../../config.ts';
import { dashboardActor } from '../audit-trail.ts';
import { crossSiteRefusal, requestOrigin } from '../cross-site.ts';
import { hostRefusal } from '../host-names.ts';
import type { PageContext } from './layout.ts';

interface RequestContext extends PageContext {
  session: Session;
  /** Signs and checks this session's action messages (flashMac). */
  auth: AdminAuth;
}

const contexts = new WeakMap<FastifyRequest, RequestContext>();

function requestContext(request: FastifyRequest): RequestContext {
  const ctx = contexts.get(request);
  if (!ctx) throw new Error('dashboard route served without the access hook');
  return ctx;
}

/** `?a=1&b=2` from the values that are set; '' when none is. */
export function queryString(values: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) if (value) params.set(key, value);
  const text = params.toString();
  return text ? `?${text}` : '';
}

// What an action says on the page it redirects to travels in the address, signed for the
// session: a link from another site could otherwise make the dashboard show any text it
// likes in aiq's own alert boxes ("session expired, call …"). Escaped, but believed.
const FLASH = ['notice', 'problem', 'retried'] as const;
type Flash = Partial<Record<(typeof FLASH)[number], string>>;
const flashText = (flash: Flash) => JSON.stringify(FLASH.map((name) => flash[name] ?? ''));

/** The query string of the page an action redirects to, its notice, problem or retry flag signed. */
export function actionQuery(request: FastifyRequest, values: Record<string, string | undefined> & Flash): string {
  const { auth, session } = requestContext(request);
  const sig = FLASH.some((name) => values[name]) ? auth.flashMac(session, flashText(values)) : undefined;
  return queryString({ ...values, sig });
}

/** What this request's address says an action did, when aiq signed it for this session; else nothing. */
function signedFlash(request: FastifyRequest, { auth, session }: RequestContext): Flash {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const flash: Flash = {};
  for (const name of FLASH) if (typeof query[name] === 'string') flash[name] = query[name];
  if (Object.keys(flash).length === 0) return {};
  // Unsigned or altered (a link from elsewhere): not shown.
  return typeof query.sig === 'string' && safeEqual(query.sig, auth.flashMac(session, flashText(flash))) ? flash : {};
}

/** Who acts, as the audit log names this request's session (audit-trail.ts). */
export function sessionActor(request: FastifyRequest): string {
  return dashboardActor(requestContext(request).session.sid);
}

/** Whether the page was reached by a job retry's own redirect (`?retried=1`, signed). */
export function actionRetried(request: FastifyRequest): boolean {
  return signedFlash(request, requestContext(request)).retried === '1';
}

/** The page context the access hook prepared for this request. */
export function pageContext(request: FastifyRequest): PageContext {
  const full = requestContext(request);
  const { session: _session, auth: _auth, ...ctx } = full;
  const { notice, problem } = signedFlash(request, full);
  return { ...ctx, notice: notice?.slice(0, 300), problem: problem?.slice(0, 300) };
}

/** Paths under /admin that need no session: the login form and the script. */
const PUBLIC = new Set(['/admin/login', '/admin/assets/app.js']);

/** Builds the onRequest/preHandler pair for the dashboard plugin. */
export interface AccessOptions {
  auth: AdminAuth;
  /** Transport `log`: the simulate form is offered. */
  logTransport: boolean;
  publicUrl: string | undefined;
  /** The host names the dashboard answers to (allowedHostsOf). */
  allowedHosts: AllowedHosts;
  /** A standing problem to show on every page (read per page view), or null. */
  alert: () => Promise<string | null>;
}

export function dashboardAccess({ auth, logTransport, publicUrl, allowedHosts, alert }: AccessOptions) {
  return {
    async onRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      if (auth.open && !fromThisMachine(request)) {
        await reply.status(403).type('text/plain').send(OPEN_ELSEWHERE);
        return;
      }
      // Before the login form reads a token: see host-names.ts.
      const foreignHost = hostRefusal(request, allowedHosts);
      if (foreignHost) {
        await reply.status(403).type('text/plain').send(foreignHost);
        return;
      }
      const crossSite = crossSiteRefusal(request, publicUrl);
      if (crossSite) {
        await reply.status(403).type('text/plain').send(crossSite);
        return;
      }
      const path = request.url.split('?')[0]!;
      // The login form is let through to count (and audit) a failed login; its limiter's
      // 429s are not audited (audit-trail.ts), so guessing cannot flood the log.
      if (PUBLIC.has(path)) return admit(request);
      let session = auth.sessionOf(request);
      if (!session && auth.open) {
        // Open mode still needs a session: CSRF tokens are bound to it.
        const issued = auth.issueSession();
        setSessionCookie(request, reply, issued.cookie);
        session = issued.session;
      }
      if (!session) {
        if (request.method === 'GET') {
          await reply.redirect(`/admin/login?next=${encodeURIComponent(request.url)}`, 303);
        } else {
          await reply.status(401).type('text/plain').send('Your session has expired: log in again.');
        }
        return;
      }
      admit(request);
      const shown = request.method === 'GET' ? ((await alert()) ?? undefined) : undefined;
      contexts.set(request, { open: auth.open, csrf: auth.csrfToken(session), logTransport, session, alert: shown, auth });
    },

    // After body parsing, so the `_csrf` form field is readable.
    async preHandler(request: FastifyRequest, reply: FastifyReply): Promise<void> {
      if (request.method === 'GET' || request.method === 'HEAD') return;
      const path = request.url.split('?')[0]!;
      if (path === '/admin/login') return;
      const ctx = contexts.get(request);
      if (!ctx) return;
      const body = request.body as { _csrf?: unknown } | undefined;
      const token = request.headers['x-csrf-token'] ?? body?._csrf;
      // Two locks: the browser must say the form is ours (Origin, or Sec-Fetch-Site where a
      // browser leaves Origin out), and the form must carry this session's CSRF token.
      // Scripts without either use the API with a bearer token instead.
      if (requestOrigin(request, publicUrl) !== 'ours' || !auth.checkCsrf(ctx.session, token)) {
        await reply.status(403).type('text/plain').send('Refused: this form was not sent from the dashboard (missing or wrong CSRF token, or not from this site). Reload the page and try again.');
      }
    },
  };
}

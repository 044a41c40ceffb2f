// The browser-facing gate of /api and /admin: refuses requests that a page on another site
// (or another port of this one) makes with the admin's browser. Reads only what a browser
// sets and a page cannot forge — Origin and the Sec-Fetch-* headers — plus the host as the
// server sees it, which X-Forwarded-Host can move only with TRUST_PROXY set (app.ts).
import type { FastifyRequest } from 'fastify';

/** Methods that change nothing; everything else must prove it comes from us. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

export function isStateChanging(request: FastifyRequest): boolean {
  return !SAFE_METHODS.has(request.method);
}

/**
 * The origins that are ours: the one the request was addressed to (scheme and host as the
 * server sees them) and PUBLIC_URL's, for a server behind a proxy that rewrites Host.
 */
function ourOrigins(request: FastifyRequest, publicUrl: string | undefined): string[] {
  const origins: string[] = [];
  try {
    origins.push(new URL(`${request.protocol}://${request.host}`).origin);
  } catch {
    // A Host header that is no host: nothing matches it.
  }
  if (publicUrl) origins.push(new URL(publicUrl).origin);
  return origins;
}

/**
 * How the request relates to our own pages, from what the browser said:
 * - `foreign`: another origin said so (Origin of another site, `Origin: null` from a
 *   sandboxed frame or a redirect, or `Sec-Fetch-Site: cross-site | same-site`; same-site
 *   covers another port on localhost, which is exactly where a local attacker page lives);
 * - `ours`: Origin is ours, or `Sec-Fetch-Site: same-origin`;
 * - `unknown`: neither header (curl, scripts, very old browsers).
 */
export function requestOrigin(request: FastifyRequest, publicUrl: string | undefined): 'foreign' | 'ours' | 'unknown' {
  const origin = request.headers.origin;
  const site = request.headers['sec-fetch-site'];
  if (site === 'cross-site' || site === 'same-site') return 'foreign';
  if (origin !== undefined) {
    if (origin === 'null') return 'foreign';
    let asked: string;
    try {
      asked = new URL(origin).origin;
    } catch {
      return 'foreign';
    }
    return ourOrigins(request, publicUrl).includes(asked) ? 'ours' : 'foreign';
  }
  return site === 'same-origin' ? 'ours' : 'unknown';
}

/**
 * Why a request must be refused as cross-site, or null. Reads (GET) are refused only when a
 * page elsewhere asked for them by script, as a subresource or in a frame; a top-level
 * navigation to a dashboard page (a link clicked in a chat) still opens it, since its answer
 * goes to the admin's screen, not to the page that linked it. Only that: a frame is a
 * navigation too (Sec-Fetch-Dest: iframe), and a page that frames /api/backup ten times has
 * the server build ten backups; and no /api read is a page to open. Every state-changing
 * request from elsewhere is refused, whatever else it carries.
 */
export function crossSiteRefusal(request: FastifyRequest, publicUrl: string | undefined): string | null {
  if (requestOrigin(request, publicUrl) !== 'foreign') return null;
  if (!isStateChanging(request) && topLevelNavigation(request) && /^\/admin(\/|\?|$)/.test(request.url)) return null;
  return 'Refused: this request came from another site (Origin or Sec-Fetch-Site). The admin API and dashboard answer only their own pages and scripts.';
}

/** The browser opens the answer as the page in its window: not in a frame, not for a script. */
function topLevelNavigation(request: FastifyRequest): boolean {
  return request.headers['sec-fetch-mode'] === 'navigate' && request.headers['sec-fetch-dest'] === 'document' && request.headers.origin === undefined;
}

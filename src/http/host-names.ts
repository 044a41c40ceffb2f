// The host names the admin side (dashboard, API, /metrics) answers to. A page on another
// site that points its own name at aiq's address (DNS rebinding) is same-origin to the
// browser, so Origin and Sec-Fetch-* cannot tell it apart from our own pages: only the name
// it was sent to can. Refused before any credential is read, its wrong tokens never count
// against the admin's address (auth-failures.ts). Webhooks are not asked: a signature is theirs.
import { isIP } from 'node:net';
import type { FastifyRequest } from 'fastify';
import type { AllowedHosts } from '../config.ts';

/**
 * Whether a name is one aiq answers to. Besides ALLOWED_HOSTS, PUBLIC_URL's and HOST's
 * (allowedHostsOf), names no page on the internet can have: an IP address (a rebinding page
 * has a name of its own), `localhost` and `*.localhost` (browsers keep them on this
 * machine), and a name of one label (a container or machine name: `aiq`, as nginx passes
 * its upstream's name on); no public site is named so.
 */
function isKnown(hostname: string, allowed: AllowedHosts): boolean {
  if (allowed.any || isIP(hostname) !== 0) return true;
  if (hostname === 'localhost' || hostname.endsWith('.localhost') || !hostname.includes('.')) return true;
  return allowed.names.has(hostname) || allowed.domains.some((domain) => hostname === domain || hostname.endsWith(`.${domain}`));
}

/**
 * Every host name a request carries: its Host, and what a proxy says the browser asked for
 * (X-Forwarded-Host, Forwarded's host=), trusted by TRUST_PROXY or not. A name a client adds
 * itself can only get its own request refused, never let through.
 */
function namesOf(request: FastifyRequest): string[] {
  const values: string[] = [];
  const { host, forwarded } = request.headers;
  const forwardedHost = request.headers['x-forwarded-host'];
  if (host) values.push(host);
  for (const value of [forwardedHost].flat()) if (value) values.push(...value.split(','));
  for (const value of [forwarded].flat()) if (value) for (const match of value.matchAll(/(?:^|[;,\s])host="?([^";,]*)/gi)) values.push(match[1]!);
  return values.map((value) => value.trim());
}

/**
 * The host name in a `name[:port]` value, lower case, without brackets or a final dot; null
 * for anything else. An underscore is a name's: nginx passes an upstream's name on as Host
 * (`upstream app_server`), and Compose names containers so (`aiq_web_1`).
 */
function hostnameOf(value: string): string | null {
  const match = /^(\[[0-9a-f:.]+\]|[a-z0-9_.-]+)(:\d{1,5})?$/i.exec(value);
  const hostname = match?.[1]!.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '');
  return hostname || null;
}

/** Why a request to the admin side is refused for the name it was sent to, or null. */
export function hostRefusal(request: FastifyRequest, allowed: AllowedHosts): string | null {
  const foreign = namesOf(request).find((value) => {
    const hostname = hostnameOf(value);
    return hostname === null || !isKnown(hostname, allowed);
  });
  if (foreign === undefined) return null;
  return (
    `Refused: "${foreign.slice(0, 100)}" is not a host name this aiq answers to (Host or X-Forwarded-Host). ` +
    'A web page that points its own name at this server (DNS rebinding) sends its own name; if this one is yours for aiq, add it to ALLOWED_HOSTS.'
  );
}

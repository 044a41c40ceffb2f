// Fetching the media of an inbound WhatsApp message, as an attacker would want it not to
// work: a signed webhook still must not make us request any address it names. Only the
// account's media URLs on the Twilio API host are requested, with its credentials;
// Twilio's redirect to its media store is followed only to the configured media hosts,
// without credentials; nothing over the size limit is read; an empty file, or bytes that
// are not what the declared content type says, are refused. Knows nothing of the database
// or jobs.

/** Where and how media may be fetched. */
export interface MediaFetchSettings {
  /** The Twilio API origin (https://api.twilio.com, or TWILIO_API_BASE_URL). */
  apiBaseUrl: string;
  accountSid: string;
  authToken: string;
  /** Hosts Twilio's redirect may lead to (MEDIA_REDIRECT_HOSTS). */
  redirectHosts: ReadonlySet<string>;
  maxBytes: number;
  timeoutMs: number;
}

export type MediaFetchResult =
  | { status: 'stored'; bytes: Uint8Array }
  | { status: 'too_large' | 'refused' | 'failed'; note: string };

/** Twilio or the network failed for now: fetching again later may work. */
export class MediaTemporaryError extends Error {
  override name = 'MediaTemporaryError';
}

/**
 * Twilio refused the account's credentials (a rotated auth token): nothing is known of the
 * file, and no retry helps until the configuration is put right.
 */
export class MediaCredentialsError extends Error {
  override name = 'MediaCredentialsError';
}

const MAX_REDIRECTS = 3;

/** The kind of media a content type names: what the reply can do with it. */
export function mediaKind(contentType: string): 'audio' | 'image' | 'other' {
  const type = contentType.toLowerCase();
  if (type.startsWith('audio/')) return 'audio';
  if (type.startsWith('image/')) return 'image';
  return 'other';
}

// Photos a vision model takes as image input: the formats WhatsApp sends photos and stickers
// in, each checked against its bytes (contentMismatch). The API refuses others with a 400
// that fails the whole reply: an iPhone photo sent as a document (image/heic), a TIFF, an
// SVG; and GIF, which it takes only when not animated.
const VISION_TYPES = new Set(['image/jpeg', 'image/png', 'image/webp']);

/** The media type to attach a photo as, when a vision model takes it; else null. */
export function visionTypeOf(contentType: string): string | null {
  const type = contentType.toLowerCase().split(';')[0]!.trim();
  return VISION_TYPES.has(type) ? type : type === 'image/jpg' ? 'image/jpeg' : null;
}

/** Fetches one media URL under the rules above. Throws MediaTemporaryError for a retry. */
export async function mediaFetch(url: string, contentType: string, settings: MediaFetchSettings | null, signal?: AbortSignal): Promise<MediaFetchResult> {
  // `aiq simulate --media` carries the file in the (signed) webhook itself: no request at all.
  if (url.startsWith('data:')) return dataUrlRead(url, contentType, settings?.maxBytes ?? DATA_URL_MAX_BYTES);
  if (!settings) return { status: 'failed', note: 'no Twilio credentials (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN) to fetch it with' };
  // The scheme counts as much as the host: http://api.twilio.com would carry the account's
  // credentials in the clear, so only the API's own origin (https in production) gets them,
  // and a redirect may not step down to another scheme either.
  const api = new URL(settings.apiBaseUrl);
  const apiHost = api.host;
  let target: URL;
  try {
    target = new URL(url);
  } catch {
    return { status: 'refused', note: 'not a URL' };
  }
  if (target.origin !== api.origin) return { status: 'refused', note: `${target.origin} is not the Twilio API (${api.origin}): never requested` };
  // The credentials open every resource of the account, so the path must be one of its
  // media: otherwise a signed webhook's "file" could be the account's message log (other
  // contacts' numbers and texts), stored and offered for download in the dashboard.
  if (!isAccountMediaPath(target, api, settings.accountSid)) {
    return { status: 'refused', note: 'not the address of a media file of this Twilio account: never requested' };
  }
  // Credentials are ours to add; a URL carrying its own is not one Twilio sends (and fetch
  // refuses it, which would otherwise be retried as a passing failure).
  if (target.username || target.password) return { status: 'refused', note: 'the URL carries a user name or password: never requested' };
  const auth = `Basic ${Buffer.from(`${settings.accountSid}:${settings.authToken}`).toString('base64')}`;
  for (let hop = 0; ; hop++) {
    // Only the media URL itself gets the credentials: Twilio's redirect leads to a signed
    // address that needs none, and one back to the API could be any of its resources.
    const credentials = hop === 0;
    let response: Response;
    try {
      response = await fetch(target, {
        redirect: 'manual',
        headers: credentials ? { authorization: auth } : {},
        signal: AbortSignal.any([AbortSignal.timeout(settings.timeoutMs), ...(signal ? [signal] : [])]),
      });
    } catch (err) {
      throw new MediaTemporaryError(`media could not be fetched: ${(err as Error).message}`);
    }
    if (response.status >= 300 && response.status < 400) {
      await response.body?.cancel();
      const location = response.headers.get('location');
      if (!location || hop >= MAX_REDIRECTS) return { status: 'failed', note: `Twilio answered ${response.status} without a usable redirect` };
      const next = new URL(location, target);
      if (next.protocol !== api.protocol) {
        return { status: 'refused', note: `redirected to ${next.protocol}// instead of ${api.protocol}//: never requested` };
      }
      if (next.host !== apiHost && !settings.redirectHosts.has(next.hostname)) {
        return { status: 'refused', note: `redirected to ${next.host}, which is not a Twilio media host (MEDIA_REDIRECT_HOSTS): never requested` };
      }
      target = next;
      continue;
    }
    if (credentials && (response.status === 401 || response.status === 403)) {
      // Said of our credentials, not of the file: not a failure to record on the file, which
      // the retry fetches once the token is put right.
      await response.body?.cancel();
      throw new MediaCredentialsError(`Twilio refused the account's credentials (${response.status}) for the media: check TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN, then retry the job (the file is fetched then)`);
    }
    if (response.status === 429 || response.status >= 500) {
      await response.body?.cancel();
      throw new MediaTemporaryError(`Twilio answered ${response.status} for the media; trying again later`);
    }
    if (!response.ok) {
      await response.body?.cancel();
      return { status: 'failed', note: `Twilio answered ${response.status} for the media (gone, or not ours)` };
    }
    return readLimited(response, contentType, settings.maxBytes);
  }
}

/** `/2010-04-01/Accounts/<our AC…>/Messages/<MM…>/Media/<ME…>` under the API's base path, without a query. */
function isAccountMediaPath(target: URL, api: URL, accountSid: string): boolean {
  const base = api.pathname.replace(/\/+$/, '');
  if (target.search || !target.pathname.startsWith(`${base}/`)) return false;
  const match = /^\/2010-04-01\/Accounts\/([^/]+)\/Messages\/[A-Z]{2}[0-9a-fA-F]{32}\/Media\/ME[0-9a-fA-F]{32}$/.exec(target.pathname.slice(base.length));
  return match?.[1] === accountSid;
}

// Without Twilio settings (a development install) a simulated file still has a limit.
const DATA_URL_MAX_BYTES = 16 * 1024 * 1024;

function dataUrlRead(url: string, contentType: string, maxBytes: number): MediaFetchResult {
  const match = /^data:[^,]*?(;base64)?,(.*)$/s.exec(url);
  if (!match) return { status: 'refused', note: 'a data: URL that cannot be read' };
  const bytes = match[1] ? Buffer.from(match[2]!, 'base64') : Buffer.from(decodeURIComponent(match[2]!), 'utf8');
  if (bytes.length > maxBytes) return { status: 'too_large', note: `${bytes.length} bytes is over MEDIA_MAX_BYTES (${maxBytes} bytes)` };
  if (bytes.length === 0) return { status: 'failed', note: 'the media file is empty' };
  const lie = contentMismatch(contentType, bytes);
  return lie ? { status: 'refused', note: lie } : { status: 'stored', bytes };
}

async function readLimited(response: Response, contentType: string, maxBytes: number): Promise<MediaFetchResult> {
  const tooLarge = (size: string) => ({ status: 'too_large' as const, note: `${size} is over MEDIA_MAX_BYTES (${maxBytes} bytes): not fetched` });
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    await response.body?.cancel();
    return tooLarge(`${declared} bytes`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body?.getReader();
  if (reader) {
    for (;;) {
      let read;
      try {
        read = await reader.read();
      } catch (err) {
        // The connection lost mid-file, or the time-out passed while the file came slowly:
        // as passing as a failure before the answer, not a reason to fail the whole reply.
        throw new MediaTemporaryError(`the media download broke off after ${size} bytes: ${(err as Error).message}`);
      }
      if (read.done) break;
      size += read.value.length;
      if (size > maxBytes) {
        await reader.cancel();
        return tooLarge('the file');
      }
      chunks.push(read.value);
    }
  }
  if (size === 0) return { status: 'failed', note: 'the media file is empty' };
  const bytes = Buffer.concat(chunks);
  const lie = contentMismatch(contentType, bytes);
  if (lie) return { status: 'refused', note: lie };
  return { status: 'stored', bytes };
}

// The first bytes of the formats WhatsApp sends: voice notes (ogg/opus, amr, mp4/m4a, mp3)
// and photos (jpeg, png, webp).
const SIGNATURES: Array<{ types: string[]; test: (b: Uint8Array) => boolean }> = [
  { types: ['audio/ogg', 'audio/opus'], test: (b) => ascii(b, 0, 4) === 'OggS' },
  { types: ['audio/amr'], test: (b) => ascii(b, 0, 5) === '#!AMR' },
  { types: ['audio/mp4', 'audio/m4a', 'audio/x-m4a', 'audio/aac', 'video/mp4'], test: (b) => ascii(b, 4, 8) === 'ftyp' || (b[0] === 0xff && (b[1]! & 0xf6) === 0xf0) },
  { types: ['audio/mpeg', 'audio/mp3'], test: (b) => ascii(b, 0, 3) === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0) },
  { types: ['image/jpeg', 'image/jpg'], test: (b) => b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff },
  { types: ['image/png'], test: (b) => b[0] === 0x89 && ascii(b, 1, 4) === 'PNG' },
  { types: ['image/webp'], test: (b) => ascii(b, 0, 4) === 'RIFF' && ascii(b, 8, 12) === 'WEBP' },
];

function ascii(bytes: Uint8Array, from: number, to: number): string {
  return Buffer.from(bytes.subarray(from, to)).toString('latin1');
}

/** Why the bytes are not what `contentType` says, or null (also for types not checked here). */
export function contentMismatch(contentType: string, bytes: Uint8Array): string | null {
  const type = contentType.toLowerCase().split(';')[0]!.trim();
  const signature = SIGNATURES.find((s) => s.types.includes(type));
  if (!signature || signature.test(bytes)) return null;
  return `declared ${type}, but the content is not ${type}: not kept`;
}

// The dashboard's template engine: a tagged template that escapes every interpolated value
// unless it is already `Html`, so a forgotten call is safe and a page is plain, typed
// TypeScript with no build step. No package: what we need is ~30 lines, and an engine would
// add a dependency and a second syntax for the same guarantee.

/** Markup that is already safe to emit: the output of `html`, or trusted `raw` text. */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Escapes text for element content and quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

type Part = Html | string | number | boolean | null | undefined | readonly Part[];

function render(part: Part): string {
  if (part === null || part === undefined || part === false) return '';
  if (part instanceof Html) return part.value;
  if (Array.isArray(part)) return part.map(render).join('');
  return escapeHtml(String(part));
}

/** `html\`<b>${name}</b>\`` — values are escaped; arrays are joined; null/false render nothing. */
export function html(strings: TemplateStringsArray, ...values: Part[]): Html {
  let out = strings[0]!;
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1]!;
  return new Html(out);
}

/** Trusted markup (our own CSS, JS, SVG built from numbers). Never pass user text here. */
export function raw(markup: string): Html {
  return new Html(markup);
}

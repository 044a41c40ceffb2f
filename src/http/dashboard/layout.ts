// The page frame every dashboard page shares: head, navigation, access banner, notices,
// and the small shared pieces (status badges, times, CSRF-carrying forms). Markup only.
import type { FastifyReply } from 'fastify';
import { queryString } from './access.ts';
import { html, raw, type Html } from './html.ts';

/** What every page needs to know about the request it renders for. */
export interface PageContext {
  /** No ADMIN_TOKEN: the banner says access is open on this machine. */
  open: boolean;
  csrf: string;
  /** Transport `log`: the simulate form is offered. */
  logTransport: boolean;
  /** A one-line message after an action (from `?notice=`, signed: access.ts actionQuery). */
  notice?: string;
  /** An error message after an action (from `?problem=`, signed likewise). */
  problem?: string;
  /** A standing problem an operator must fix (an embedding-space mismatch), on every page. */
  alert?: string;
  /**
   * The page's own address, when it answers a form at another (a refused reply, at its POST
   * route): the script puts it back in the address bar, so the live refresh and a reload
   * read the page.
   */
  pageUrl?: string;
}

const NAV = [
  ['overview', '/admin', 'Overview'],
  ['jobs', '/admin/jobs', 'Jobs'],
  ['conversations', '/admin/conversations', 'Conversations'],
  ['people', '/admin/people', 'People'],
  ['documents', '/admin/documents', 'Documents'],
  ['imports', '/admin/imports', 'Imports'],
  ['schedules', '/admin/schedules', 'Schedules'],
  ['usage', '/admin/usage', 'AI costs'],
  ['audit', '/admin/audit', 'Audit'],
] as const;

export type Section = (typeof NAV)[number][0] | 'simulate' | 'login';

const STYLE = raw(`
:root { --fg:#1d2330; --muted:#667085; --line:#e4e7ec; --bg:#f7f8fa; --card:#fff; --accent:#3056d3;
  --ok:#12805c; --warn:#b54708; --bad:#c01048; --info:#175cd3; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
* { box-sizing: border-box; }
body { margin:0; color:var(--fg); background:var(--bg); }
header { display:flex; align-items:center; gap:24px; padding:10px 24px; background:#101828; color:#fff; }
header a { color:#d0d5dd; text-decoration:none; padding:4px 2px; } header a.active, header a:hover { color:#fff; border-bottom:2px solid #7a9cff; }
header .brand { font-weight:700; color:#fff; margin-right:8px; } header form { margin-left:auto; }
main { max-width:1200px; margin:0 auto; padding:20px 24px 60px; }
h1 { font-size:22px; margin:0 0 16px; } h2 { font-size:16px; margin:24px 0 8px; }
.banner { padding:8px 24px; background:#fffaeb; color:#93370d; border-bottom:1px solid #fedf89; }
.banner.alert { background:#fef3f2; color:#b42318; border-bottom-color:#fecdca; }
.notice, .problem { padding:10px 14px; border-radius:6px; margin-bottom:16px; }
.notice { background:#ecfdf3; color:#05603a; border:1px solid #abefc6; } .problem { background:#fef3f2; color:#b42318; border:1px solid #fecdca; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:16px; margin-bottom:16px; }
.grid { display:grid; grid-template-columns:repeat(auto-fit, minmax(260px, 1fr)); gap:16px; }
.tiles { display:flex; gap:12px; flex-wrap:wrap; margin-bottom:16px; }
.tile { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:120px; }
.tile b { display:block; font-size:22px; } .tile span { color:var(--muted); }
table { width:100%; border-collapse:collapse; background:var(--card); }
th, td { text-align:left; padding:7px 10px; border-bottom:1px solid var(--line); vertical-align:top; }
th { color:var(--muted); font-weight:600; font-size:12px; text-transform:uppercase; letter-spacing:.03em; }
td.num, th.num { text-align:right; font-variant-numeric:tabular-nums; }
a { color:var(--accent); } .muted { color:var(--muted); } .mono { font-family:ui-monospace, Menlo, monospace; font-size:12.5px; }
.pre { white-space:pre-wrap; word-break:break-word; }
.chunk:target { outline:2px solid #2563eb; }
.clip { max-width:380px; overflow:hidden; text-overflow:ellipsis; white-space:nowrap; }
pre { background:#0f172a; color:#e2e8f0; padding:12px; border-radius:6px; overflow:auto; max-height:420px; white-space:pre-wrap; word-break:break-word; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; background:#f2f4f7; color:#344054; }
.b-pending { background:#eff8ff; color:var(--info); } .b-processing { background:#fffaeb; color:var(--warn); }
.b-done, .b-sent, .b-delivered, .b-read, .b-logged, .b-embedded { background:#ecfdf3; color:var(--ok); }
.b-failed, .b-undelivered, .b-send_failed, .b-flagged, .b-held, .b-unconfirmed { background:#fef3f2; color:var(--bad); } .b-cancelled, .b-discarded { background:#f2f4f7; color:#667085; }
form.inline { display:inline; } .filters { display:flex; gap:8px; flex-wrap:wrap; align-items:end; margin-bottom:12px; }
label { display:flex; flex-direction:column; gap:3px; font-size:12px; color:var(--muted); } label.check { flex-direction:row; align-items:center; gap:6px; margin:8px 0; }
input, select, textarea { font:inherit; padding:6px 8px; border:1px solid #d0d5dd; border-radius:6px; background:#fff; color:var(--fg); }
textarea { width:100%; min-height:80px; }
button { font:inherit; padding:6px 12px; border-radius:6px; border:1px solid #d0d5dd; background:#fff; cursor:pointer; }
button.primary { background:var(--accent); border-color:var(--accent); color:#fff; } button.danger { color:var(--bad); border-color:#fda29b; }
header button { background:transparent; color:#d0d5dd; border-color:#475467; }
.pager { display:flex; gap:12px; margin-top:12px; } .live { font-size:12px; color:var(--muted); }
.chart { width:100%; height:auto; } .legend span { margin-right:12px; font-size:12px; } .legend i { display:inline-block; width:10px; height:10px; border-radius:2px; margin-right:4px; }
dl.props { display:grid; grid-template-columns:max-content 1fr; gap:4px 16px; margin:0; } dl.props dt { color:var(--muted); }
.thread { display:flex; flex-direction:column; gap:10px; }
.msg { max-width:70%; padding:8px 12px; border-radius:10px; background:#fff; border:1px solid var(--line); white-space:pre-wrap; word-break:break-word; }
.msg.inbound { align-self:flex-start; } .msg.ai { align-self:flex-end; background:#eef4ff; } .msg.admin { align-self:flex-end; background:#ecfdf3; }
.msg .citations { display:block; font-size:11.5px; color:var(--muted); margin-top:4px; white-space:normal; }
.msg .meta { display:block; font-size:11.5px; color:var(--muted); margin-top:4px; white-space:normal; }
.msg .quote { margin:0 0 6px; padding-left:8px; border-left:3px solid var(--line); }
.login { max-width:380px; margin:80px auto; }
`);

/** Answers with a page: HTML, never cached (it shows live state). */
export function sendPage(reply: FastifyReply, markup: Html): FastifyReply {
  return reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(markup.value);
}

/** The full page: frame, navigation and the given content. */
export function page(ctx: PageContext, section: Section, title: string, content: Html): Html {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="csrf-token" content="${ctx.csrf}">
<link rel="icon" href="/favicon.ico" type="image/svg+xml">${ctx.pageUrl ? html`<link rel="canonical" href="${ctx.pageUrl}">` : ''}
<title>${title} · aiq</title><style>${STYLE}</style><script src="/admin/assets/app.js" defer></script></head>
<body>
${section === 'login' ? '' : nav(ctx, section)}
${ctx.alert ? html`<div class="banner alert" role="alert">${ctx.alert}</div>` : ''}
${ctx.open ? html`<div class="banner">Open access: <b>ADMIN_TOKEN</b> is not set, so no login is asked. The server only listens on this machine (loopback).</div>` : ''}
<main>
${ctx.notice ? html`<div class="notice" role="status">${ctx.notice}</div>` : ''}
${ctx.problem ? html`<div class="problem" role="alert">${ctx.problem}</div>` : ''}
${content}
</main></body></html>`;
}

function nav(ctx: PageContext, section: Section): Html {
  return html`<header><span class="brand">aiq</span>
${NAV.map(([key, href, label]) => html`<a href="${href}" class="${key === section ? 'active' : ''}">${label}</a>`)}
${ctx.logTransport ? html`<a href="/admin/simulate" class="${section === 'simulate' ? 'active' : ''}">Simulate</a>` : ''}
${ctx.open ? '' : html`<form method="post" action="/admin/logout">${csrfField(ctx)}<button>Log out</button></form>`}
</header>`;
}

/** The hidden CSRF field every state-changing form must carry. */
export function csrfField(ctx: PageContext): Html {
  return html`<input type="hidden" name="_csrf" value="${ctx.csrf}">`;
}

/** A one-button POST form (retry, cancel, discard …). */
export function actionButton(ctx: PageContext, action: string, label: string, options: { className?: string; confirm?: string } = {}): Html {
  return html`<form class="inline" method="post" action="${action}" ${options.confirm ? html`data-confirm="${options.confirm}"` : ''}>${csrfField(ctx)}<button class="${options.className ?? ''}">${label}</button></form>`;
}

export function badge(status: string): Html {
  return html`<span class="badge b-${status.replace(/[^a-z_]/g, '')}">${status}</span>`;
}

/** An absolute time with its relative age as a tooltip-free suffix ("3 min ago"). */
export function when(date: Date | string | null | undefined): Html {
  if (!date) return html`<span class="muted">—</span>`;
  const d = typeof date === 'string' ? new Date(date) : date;
  return html`<time datetime="${d.toISOString()}" title="${d.toISOString()}">${ago(d)}</time>`;
}

/** "12 s ago", "5 min ago", "3 h ago", "2 d ago"; "in 20 s" for future times. */
export function ago(date: Date, now = Date.now()): string {
  const seconds = Math.round((now - date.getTime()) / 1000);
  const future = seconds < 0;
  const s = Math.abs(seconds);
  const text = s < 60 ? `${s} s` : s < 3600 ? `${Math.floor(s / 60)} min` : s < 86_400 ? `${Math.floor(s / 3600)} h` : `${Math.floor(s / 86_400)} d`;
  return future ? `in ${text}` : `${text} ago`;
}

/** Seconds as "45 s", "12 min", "3.5 h". */
export function duration(seconds: number): string {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/**
 * The links of a keyset-paged list: back to its first page (when `after` says this is a
 * later one) and on to the next (when there is one), keeping the list's filter.
 */
export function pager(path: string, filter: Record<string, string | undefined>, after: string | undefined, next: string | null, labels: { first: string; next: string }): Html {
  return html`<div class="pager">${after ? html`<a href="${path}${queryString(filter)}">${labels.first}</a>` : ''}${next ? html`<a href="${path}${queryString({ ...filter, after: next })}">${labels.next}</a>` : ''}</div>`;
}

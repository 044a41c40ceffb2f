// The audit log page: what admins did, newest first, filtered by action and outcome. Rows
// hold ids and counts, never personal data (src/http/audit-trail.ts, src/privacy/).
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { auditList, type AuditRow } from '../../privacy/audit.ts';
import type { Runtime } from '../../runtime.ts';
import { pageContext } from './access.ts';
import { html, type Html } from './html.ts';
import { page, sendPage, when, type PageContext } from './layout.ts';

const RESULTS = ['ok', 'refused', 'not_found', 'failed'] as const;
const AuditQuery = z.object({
  q: z.string().trim().max(100).optional().transform((v) => v || undefined),
  result: z.enum(RESULTS).optional().or(z.literal('').transform(() => undefined)),
});

function auditPage(ctx: PageContext, query: z.infer<typeof AuditQuery>, rows: AuditRow[]): Html {
  return page(
    ctx,
    'audit',
    'Audit log',
    html`<h1>Audit log</h1>
<form class="card filters" method="get" action="/admin/audit">
<label>Action <input name="q" value="${query.q ?? ''}" placeholder="retry, erase, login …"></label>
<label>Outcome <select name="result"><option value="">any</option>${RESULTS.map((r) => html`<option value="${r}" ${query.result === r ? 'selected' : ''}>${r}</option>`)}</select></label>
<button type="submit">Filter</button></form>
${
  rows.length === 0
    ? html`<p class="muted">Nothing recorded${query.q || query.result ? ' that matches' : ' yet'}.</p>`
    : html`<table id="audit"><thead><tr><th>when</th><th>who</th><th>action</th><th>target</th><th>outcome</th><th>details</th></tr></thead><tbody>
${rows.map((r) => html`<tr><td>${when(r.at)}</td><td>${r.actor}</td><td><code>${r.action}</code></td><td>${r.target ?? ''}</td><td>${r.result}</td><td class="muted">${JSON.stringify(r.details)}</td></tr>`)}
</tbody></table>`
}`,
  );
}

export const auditPages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  app.get('/admin/audit', async (request, reply) => {
    const ctx = pageContext(request);
    const query = AuditQuery.safeParse(request.query ?? {});
    if (!query.success) return sendPage(reply.status(400), page({ ...ctx, problem: 'Unknown filter.' }, 'audit', 'Audit log', html``));
    return sendPage(reply, auditPage(ctx, query.data, await auditList(runtime.db, { action: query.data.q, result: query.data.result })));
  });
};

// Recurring jobs and the retention policy they enforce: each schedule with its cron, zone,
// next and last slot and what its last job did (for retention: how much of each kind it
// removed), and the policy in days per kind of data.
import type { FastifyPluginAsync } from 'fastify';
import { retentionPolicy } from '../../jobs/retention.ts';
import { jobGet, scheduleEnable, scheduleList, type Job, type Schedule } from '../../queue/index.ts';
import type { Runtime } from '../../runtime.ts';
import { actionQuery, pageContext } from './access.ts';
import { html, type Html } from './html.ts';
import { actionButton, badge, page, sendPage, when, type PageContext } from './layout.ts';

function schedulesPage(ctx: PageContext, schedules: Array<{ schedule: Schedule; job: Job | null }>, policy: Record<string, number>): Html {
  return page(
    ctx,
    'schedules',
    'Schedules',
    html`<h1>Schedules</h1>
${
  schedules.length === 0
    ? html`<p class="muted">No schedules yet: a worker declares them when it starts.</p>`
    : html`<table id="schedules"><thead><tr><th>name</th><th>when</th><th>job type</th><th>missed slots</th><th>next</th><th>last</th><th>last job</th><th></th></tr></thead><tbody>
${schedules.map(
  ({ schedule: s, job }) => html`<tr><td>${s.name}${s.enabled ? '' : html` <span class="muted">(disabled)</span>`}</td><td><code>${s.cron}</code> ${s.timeZone}</td><td>${s.type}</td><td>${s.backfill}</td>
<td>${s.enabled ? when(s.nextSlotAt) : html`<span class="muted">—</span>`}</td><td>${when(s.lastSlotAt)}</td>
<td>${job ? html`<a href="/admin/jobs/${job.id}">${badge(job.status)}</a> <span class="muted">${job.result ? JSON.stringify((job.result as { removed?: unknown }).removed ?? job.result) : job.lastError ?? ''}</span>` : html`<span class="muted">none yet</span>`}</td>
<td>${actionButton(ctx, `/admin/schedules/${encodeURIComponent(s.name)}/${s.enabled ? 'disable' : 'enable'}`, s.enabled ? 'Disable' : 'Enable')}</td></tr>`,
)}
</tbody></table>`
}
<h2>Retention</h2>
<table id="retention"><thead><tr><th>data</th><th class="num">kept</th></tr></thead><tbody>
${Object.entries(policy).map(([kind, days]) => html`<tr><td>${kind}</td><td class="num">${days === 0 ? 'forever' : `${days} days`}</td></tr>`)}
</tbody></table>
<p class="muted">Set by the RETENTION_* variables and JOB_RETENTION_DAYS; disabling the <code>retention</code> schedule above (or <code>aiq schedules --disable retention</code>) pauses the purge.</p>`,
  );
}

export const schedulePages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  app.get('/admin/schedules', async (request, reply) => {
    const schedules = await scheduleList(runtime.db);
    const withJobs = await Promise.all(schedules.map(async (schedule) => ({ schedule, job: schedule.lastJobId ? await jobGet(runtime.db, schedule.lastJobId) : null })));
    return sendPage(reply, schedulesPage(pageContext(request), withJobs, retentionPolicy(runtime.config)));
  });

  // Enable or disable, as `aiq schedules --enable/--disable` and the API do (recorded by the audit trail).
  app.post('/admin/schedules/:name/:change', async (request, reply) => {
    const { name, change } = request.params as { name: string; change: string };
    if (change !== 'enable' && change !== 'disable') return reply.status(404).send('no such action');
    const found = await scheduleEnable(runtime.db, name, change === 'enable');
    const message = !found
      ? { problem: `No schedule named "${name.slice(0, 100)}".` }
      : { notice: change === 'enable' ? `Schedule "${name}" enabled: it runs from its next slot.` : `Schedule "${name}" disabled: it enqueues nothing until enabled.` };
    return reply.redirect(`/admin/schedules${actionQuery(request, message)}`, 303);
  });
};

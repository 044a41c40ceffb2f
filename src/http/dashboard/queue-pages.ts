// The queue pages: overview (counts, charts, slow jobs), the job list with filters and
// keyset paging, job detail with every attempt, and the retry/cancel/bulk-retry actions.
// Every action is a POST that redirects back with a notice (post/redirect/get).
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { JOB_STATUSES, jobGet, jobList, jobRetry, jobRetryCount, jobRetryMany, jobStats, type Job, type RetryPreview } from '../../queue/index.ts';
import { jobCancelChecked, REPLY_IN_FLIGHT } from '../../jobs/cancel-guard.ts';
import type { Runtime } from '../../runtime.ts';
import { actionQuery, actionRetried, pageContext, queryString } from './access.ts';
import { barChart, lineChart } from './charts.ts';
import { html, type Html } from './html.ts';
import { actionButton, badge, csrfField, duration, page, pager, when, type PageContext, sendPage } from './layout.ts';
import { IdParams, JobFilterQuery, optional, RetryFailedForm, toJobFilter } from '../admin/inputs.ts';
import { jobMinuteStats, jobSlowList } from '../admin/queue-queries.ts';

const JobListQuery = JobFilterQuery.extend({ after: optional(z.string().max(200)) });

function shortId(id: string): string {
  return id.slice(0, 8);
}

function overview(ctx: PageContext, runtime: Runtime, data: { stats: Awaited<ReturnType<typeof jobStats>>; minutes: Awaited<ReturnType<typeof jobMinuteStats>>; slow: Awaited<ReturnType<typeof jobSlowList>> }): Html {
  const { stats, minutes, slow } = data;
  const types = Object.keys(stats.counts).sort();
  const xLabels: [string, string] = ['60 min ago', 'now'];
  return page(
    ctx,
    'overview',
    'Overview',
    html`<h1>Queue overview</h1>
<div id="live" data-refresh-ms="5000"><p class="live">Refreshes every 5 s · ${new Date().toISOString().slice(11, 19)} UTC</p>
<div class="tiles">
${JOB_STATUSES.map((status) => html`<a class="tile" href="/admin/jobs?status=${status}" style="text-decoration:none;color:inherit"><b>${stats.totals[status]}</b><span>${status}</span></a>`)}
<div class="tile"><b>${stats.oldestDueAgeSeconds > 0 ? duration(stats.oldestDueAgeSeconds) : "none"}</b><span>oldest due job waiting</span></div>
</div>
<div class="card"><h2 style="margin-top:0">Jobs by type and status</h2>
${
  types.length === 0
    ? html`<p class="muted">No jobs yet. ${ctx.logTransport ? html`<a href="/admin/simulate">Simulate an inbound message</a> to start one.` : ''}</p>`
    : html`<table><thead><tr><th>type</th>${JOB_STATUSES.map((s) => html`<th class="num">${s}</th>`)}</tr></thead><tbody>
${types.map(
  (type) => html`<tr><td><a href="/admin/jobs?type=${type}">${type}</a></td>${JOB_STATUSES.map((status) => {
    const count = stats.counts[type]?.[status] ?? 0;
    return html`<td class="num">${count ? html`<a href="/admin/jobs${queryString({ status, type })}">${count}</a>` : html`<span class="muted">0</span>`}</td>`;
  })}</tr>`,
)}</tbody></table>`
}</div>
<div class="grid">
<div class="card"><h2 style="margin-top:0">Finished per minute</h2>${barChart('Jobs done and failed per minute, last hour', [
      { label: 'done', color: '#12805c', values: minutes.done },
      { label: 'failed', color: '#c01048', values: minutes.failed },
    ], xLabels)}</div>
<div class="card"><h2 style="margin-top:0">Run time of done jobs</h2>${lineChart('Job duration percentiles per minute, last hour', [
      { label: 'p50', color: '#3056d3', values: minutes.p50 },
      { label: 'p95', color: '#b54708', values: minutes.p95 },
      { label: 'p99', color: '#c01048', values: minutes.p99 },
    ], xLabels, ' ms')}</div>
</div>
<div class="card"><h2 style="margin-top:0">Slow jobs <span class="muted">(over ${runtime.config.SLOW_JOB_THRESHOLD_MS} ms: running now, or done in the last hour)</span></h2>
${
  slow.length === 0
    ? html`<p class="muted">None.</p>`
    : html`<table><thead><tr><th>job</th><th>type</th><th>status</th><th class="num">time</th><th>worker</th></tr></thead><tbody>
${slow.map(({ job, durationMs }) => html`<tr><td><a class="mono" href="/admin/jobs/${job.id}">${shortId(job.id)}</a></td><td>${job.type}</td><td>${badge(job.status)}</td><td class="num">${duration(durationMs / 1000)}</td><td class="mono">${job.lockedBy ?? ''}</td></tr>`)}
</tbody></table>`
}</div></div>`,
  );
}

function jobRow(ctx: PageContext, job: Job): Html {
  const time = job.status === 'pending' ? html`runs ${when(job.nextRunAt)}` : job.finishedAt ? html`finished ${when(job.finishedAt)}` : html`started ${when(job.attemptedAt)}`;
  return html`<tr data-job-id="${job.id}"><td><a class="mono" href="/admin/jobs/${job.id}">${shortId(job.id)}</a></td><td>${job.type}</td><td>${badge(job.status)}</td>
<td class="num">${job.attempts}/${job.maxAttempts}</td><td>${when(job.createdAt)}</td><td>${time}</td><td class="clip mono" title="${job.lastError ?? ''}">${job.lastError ?? ''}</td>
<td>${job.status === 'failed' ? actionButton(ctx, `/admin/jobs/${job.id}/retry`, 'Retry') : ''}</td></tr>`;
}

/** What a retry came to, read from the job as it is now (it may have run and failed again). */
function retryNotice(job: Job): string {
  switch (job.status) {
    case 'pending':
      return 'Retried: the job is pending again.';
    case 'processing':
      return 'Retried: the job is running again.';
    case 'done':
      return 'Retried: it ran again and succeeded.';
    case 'failed':
      return 'Retried: it ran again and failed (the newest attempt is at the bottom of the list below).';
    case 'cancelled':
      return 'Retried, then cancelled: it will not run.';
  }
}

// The pager is in the live region with the rows: refreshed apart from them, its "older"
// went on from the first page as it was loaded, and jobs pushed off it since were skipped.
function jobsPage(ctx: PageContext, runtime: Runtime, query: z.infer<typeof JobListQuery>, jobs: Job[], nextCursor: string | null): Html {
  const filter = { status: query.status, type: query.type, q: query.q };
  const types = runtime.handlers.map((h) => h.type).sort();
  const live = jobs.some((j) => j.status === 'pending' || j.status === 'processing');
  return page(
    ctx,
    'jobs',
    'Jobs',
    html`<h1>Jobs</h1>
<form class="filters" method="get" action="/admin/jobs">
<label>Status<select name="status"><option value="">any</option>${JOB_STATUSES.map((s) => html`<option value="${s}" ${s === query.status ? 'selected' : ''}>${s}</option>`)}</select></label>
<label>Type<input name="type" value="${query.type ?? ''}" list="job-types" placeholder="any"></label>
<datalist id="job-types">${types.map((t) => html`<option value="${t}">`)}</datalist>
<label>Text in payload or error<input name="q" value="${query.q ?? ''}" placeholder="e.g. timeout"></label>
<button type="submit">Filter</button>
<a href="/admin/jobs">clear</a>
${query.status === 'failed' || query.status === undefined ? html`<a style="margin-left:auto" href="/admin/jobs/retry-failed${queryString({ type: query.type, q: query.q })}">Retry all failed jobs matching this filter…</a>` : ''}
</form>
<div id="live" data-refresh-ms="${live && !query.after ? 3000 : 0}">
${
  jobs.length === 0
    ? html`<div class="card muted">No jobs match this filter.</div>`
    : html`<table><thead><tr><th>job</th><th>type</th><th>status</th><th class="num">attempts</th><th>created</th><th>when</th><th>last error</th><th></th></tr></thead>
<tbody>${jobs.map((job) => jobRow(ctx, job))}</tbody></table>`
}
${pager('/admin/jobs', filter, query.after, nextCursor, { first: '« newest', next: 'older »' })}</div>`,
  );
}

/**
 * An admin's retry gives a job a fresh count of attempts and keeps its history: more
 * counted failures (a throttled attempt given back is not one) than attempts means a retry.
 */
function retriedNote(job: Job): string {
  const failed = job.errors.filter((e) => !e.refunded).length;
  return failed > job.attempts ? ` since the last retry (${failed} failed in all, listed below)` : '';
}

function jobDetailPage(ctx: PageContext, job: Job): Html {
  const live = job.status === 'pending' || job.status === 'processing';
  return page(
    ctx,
    'jobs',
    `Job ${shortId(job.id)}`,
    html`<p><a href="/admin/jobs">« jobs</a></p>
<div id="live" data-refresh-ms="${live ? 1000 : 0}">
<h1>${job.type} <span class="mono muted">${job.id}</span> <span data-status="${job.status}">${badge(job.status)}</span></h1>
<p>
${job.status === 'failed' || job.status === 'cancelled' ? actionButton(ctx, `/admin/jobs/${job.id}/retry`, 'Retry', { className: 'primary' }) : ''}
${job.status === 'pending' ? actionButton(ctx, `/admin/jobs/${job.id}/cancel`, 'Cancel', { className: 'danger', confirm: 'Cancel this job? It will not run.' }) : ''}
</p>
<div class="grid">
<div class="card"><dl class="props">
<dt>status</dt><dd>${job.status}</dd>
<dt>attempts</dt><dd>${job.attempts} of ${job.maxAttempts}${retriedNote(job)}</dd>
<dt>priority</dt><dd>${job.priority}</dd>
<dt>ordering key</dt><dd class="mono">${job.orderingKey ?? '—'}</dd>
<dt>created</dt><dd>${when(job.createdAt)}</dd>
<dt>next run</dt><dd>${job.status === 'pending' ? when(job.nextRunAt) : '—'}</dd>
<dt>last started</dt><dd>${when(job.attemptedAt)}</dd>
<dt>finished</dt><dd>${when(job.finishedAt)}</dd>
</dl></div>
<div class="card"><h2 style="margin-top:0">Lease</h2>${
      job.status === 'processing'
        ? html`<dl class="props"><dt>held by</dt><dd class="mono">${job.lockedBy ?? '?'}</dd><dt>until</dt><dd>${when(job.lockedUntil)} <span class="muted mono">${job.lockedUntil?.toISOString() ?? ''}</span></dd></dl>`
        : html`<p class="muted">Not running: no lease.${job.lockedBy ? html` Last run by <span class="mono">${job.lockedBy}</span>.` : ''}</p>`
    }</div>
</div>
${job.lastError ? html`<div class="card"><h2 style="margin-top:0">Last error</h2><pre class="error">${job.lastError}</pre></div>` : ''}
<div class="card"><h2 style="margin-top:0">Attempts that failed (${job.errors.length})</h2>${
      job.errors.length === 0
        ? html`<p class="muted">None${job.status === 'done' ? ': it succeeded on its first run.' : '.'}</p>`
        : html`<table><thead><tr><th class="num">#</th><th>at</th><th>worker</th><th class="num">duration</th><th>error</th></tr></thead><tbody>
${job.errors.map((e, i) => html`<tr><td class="num">${i + 1}</td><td>${when(e.at)}</td><td class="mono">${e.worker ?? '—'}</td><td class="num">${e.duration_ms === null ? '—' : `${e.duration_ms} ms`}</td><td class="mono">${e.error}${e.refunded ? html` <span class="badge">throttled, not counted</span>` : ''}</td></tr>`)}
</tbody></table>`
    }</div>
<div class="card"><h2 style="margin-top:0">Payload</h2><pre>${JSON.stringify(job.payload, null, 2)}</pre></div>
${job.result !== null && job.result !== undefined ? html`<div class="card"><h2 style="margin-top:0">Result</h2><pre>${JSON.stringify(job.result, null, 2)}</pre></div>` : ''}
</div>`,
  );
}

function confirmPage(ctx: PageContext, filter: z.infer<typeof JobFilterQuery>, { count, failedBy }: RetryPreview): Html {
  const described = [filter.type ? `type "${filter.type}"` : 'any type', filter.q ? `text "${filter.q}"` : ''].filter(Boolean).join(', ');
  return page(
    ctx,
    'jobs',
    'Retry failed jobs',
    html`<h1>Retry failed jobs</h1><div class="card">
${
  count === 0
    ? html`<p>No failed jobs match (${described}).</p><p><a href="/admin/jobs${queryString({ status: 'failed', type: filter.type, q: filter.q })}">« back</a></p>`
    : html`<p id="confirm-count">Retry all <b>${count}</b> failed job${count === 1 ? '' : 's'} matching ${described}? Each gets a fresh set of attempts; its error history is kept.</p>
<form method="post" action="/admin/jobs/retry-failed">${csrfField(ctx)}
<input type="hidden" name="type" value="${filter.type ?? ''}"><input type="hidden" name="q" value="${filter.q ?? ''}"><input type="hidden" name="failedBy" value="${failedBy}">
<button class="primary" type="submit">Retry ${count} job${count === 1 ? '' : 's'}</button>
<a href="/admin/jobs${queryString({ status: 'failed', type: filter.type, q: filter.q })}">cancel</a></form>`
}</div>`,
  );
}

export const queuePages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { db } = runtime;

  app.get('/admin', async (request, reply) => {
    const [stats, minutes, slow] = await Promise.all([jobStats(db), jobMinuteStats(db), jobSlowList(db, runtime.config.SLOW_JOB_THRESHOLD_MS)]);
    return sendPage(reply, overview(pageContext(request), runtime, { stats, minutes, slow }));
  });

  app.get('/admin/jobs', async (request, reply) => {
    const ctx = pageContext(request);
    const parsed = JobListQuery.safeParse(request.query);
    if (!parsed.success) return sendPage(reply.status(400), page({ ...ctx, problem: `Bad filter: ${parsed.error.issues[0]?.message}` }, 'jobs', 'Jobs', html`<p><a href="/admin/jobs">clear the filter</a></p>`));
    try {
      const result = await jobList(db, toJobFilter(parsed.data), { after: parsed.data.after, limit: 50 });
      return sendPage(reply, jobsPage(ctx, runtime, parsed.data, result.jobs, result.nextCursor));
    } catch (err) {
      if (!(err instanceof RangeError)) throw err;
      return sendPage(reply.status(400), page({ ...ctx, problem: 'That page link is broken (bad cursor).' }, 'jobs', 'Jobs', html`<p><a href="/admin/jobs">first page</a></p>`));
    }
  });

  app.get('/admin/jobs/retry-failed', async (request, reply) => {
    const ctx = pageContext(request);
    const parsed = JobFilterQuery.safeParse(request.query);
    if (!parsed.success) return sendPage(reply.status(400), page({ ...ctx, problem: `Bad filter: ${parsed.error.issues[0]?.message}` }, 'jobs', 'Retry failed jobs', html`<p><a href="/admin/jobs">clear the filter</a></p>`));
    return sendPage(reply, confirmPage(ctx, parsed.data, await jobRetryCount(db, { ...toJobFilter(parsed.data), status: 'failed' })));
  });

  app.post('/admin/jobs/retry-failed', async (request, reply) => {
    const parsed = RetryFailedForm.safeParse(request.body ?? {});
    if (!parsed.success) return reply.redirect(`/admin/jobs${actionQuery(request, { problem: `Bad filter: ${parsed.error.issues[0]?.message}` })}`, 303);
    // Only what the confirmation counted: jobs that had failed by the time it was shown.
    const count = await jobRetryMany(db, { ...toJobFilter(parsed.data), status: 'failed' }, parsed.data.failedBy);
    const back = { type: parsed.data.type, q: parsed.data.q };
    return reply.redirect(`/admin/jobs${actionQuery(request, { ...back, notice: `Retrying ${count} job${count === 1 ? '' : 's'}: they are pending again.` })}`, 303);
  });

  app.get('/admin/jobs/:id', async (request, reply) => {
    const ctx = pageContext(request);
    const params = IdParams.safeParse(request.params);
    const job = params.success ? await jobGet(db, params.data.id) : null;
    if (!job) return sendPage(reply.status(404), page({ ...ctx, problem: 'No such job (it may have been cleaned up by retention).' }, 'jobs', 'Job not found', html`<p><a href="/admin/jobs">« jobs</a></p>`));
    // The retry's outcome as the job stands now, not as it stood at the click.
    const retried = actionRetried(request);
    return sendPage(reply, jobDetailPage(retried ? { ...ctx, notice: retryNotice(job) } : ctx, job));
  });

  app.post('/admin/jobs/:id/retry', async (request, reply) => {
    const { id } = request.params as { id: string };
    const ok = await jobRetry(db, id);
    const message = ok ? { retried: '1' } : { problem: 'Only a failed or cancelled job can be retried.' };
    return reply.redirect(`/admin/jobs/${encodeURIComponent(id)}${actionQuery(request, message)}`, 303);
  });

  app.post('/admin/jobs/:id/cancel', async (request, reply) => {
    const { id } = request.params as { id: string };
    const outcome = await jobCancelChecked(db, id);
    const message =
      outcome === 'cancelled'
        ? { notice: 'Cancelled: the job will not run.' }
        : { problem: outcome === 'reply_in_flight' ? `Not cancelled: ${REPLY_IN_FLIGHT}` : 'Only a pending job can be cancelled (a running one cannot be stopped safely).' };
    return reply.redirect(`/admin/jobs/${encodeURIComponent(id)}${actionQuery(request, message)}`, 303);
  });
};

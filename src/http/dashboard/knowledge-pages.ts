// The knowledge pages: people (search, detail), documents (add by upload or paste, each
// with its embedding state) and CSV imports (upload, progress, row errors). Uploads are
// read into a form field by the page script, so no multipart parser is needed.
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { DocumentContentError } from '../../knowledge/chunking.ts';
import { aboveHeaderNote, importGet, type ImportRecord } from '../../knowledge/csv-import.ts';
import { personGet, type Person } from '../../knowledge/people.ts';
import { chunkLocation } from '../../knowledge/chunking.ts';
import { documentRemove } from '../../knowledge/documents.ts';
import type { Runtime } from '../../runtime.ts';
import { actionQuery, pageContext } from './access.ts';
import { html, type Html } from './html.ts';
import { actionButton, badge, csrfField, page, pager, when, type PageContext, sendPage } from './layout.ts';
import { documentAddConfigured, documentList, documentWithChunks, type DocumentChunks, type DocumentPage, importList, importUpload, personSearch, type ImportSummary, type PersonSummary } from '../admin/knowledge-store.ts';
import { DocumentBody, IdParams as Id, ImportBody, uploadRoute, peopleCursorDecode, peopleCursorEncode } from '../admin/inputs.ts';

// The people and document lists: a search and a page cursor.
const SearchQuery = z.object({ q: z.string().trim().max(100).optional(), after: z.string().max(400).optional() });

function embeddedBadge(embedded: boolean): Html {
  return embedded ? html`<span class="badge b-embedded">embedded</span>` : html`<span class="badge b-pending">waiting for embedding</span>`;
}

function peoplePage(ctx: PageContext, query: z.infer<typeof SearchQuery>, people: PersonSummary[], next: string | null): Html {
  return page(
    ctx,
    'people',
    'People',
    html`<h1>People</h1>
<form class="filters" method="get" action="/admin/people"><label>Search name, phone, email, department or role<input name="q" value="${query.q ?? ''}"></label><button>Search</button>
<a style="margin-left:auto" href="/admin/imports">Import a CSV…</a></form>
${
  people.length === 0
    ? html`<div class="card muted">No people${query.q ? ' match this search' : ' yet: import a CSV'}.</div>`
    : html`<table><thead><tr><th>name</th><th>phone</th><th>email</th><th>department</th><th>role</th></tr></thead><tbody>
${people.map((p) => html`<tr><td><a href="/admin/people/${p.id}">${p.name}</a></td><td class="mono">${p.phone}</td><td>${p.email ?? ''}</td><td>${p.department ?? ''}</td><td>${p.role ?? ''}</td></tr>`)}
</tbody></table>`
}
${pager('/admin/people', { q: query.q }, query.after, next, { first: '« first', next: 'next »' })}`,
  );
}

function personPage(ctx: PageContext, person: Person): Html {
  return page(
    ctx,
    'people',
    person.name,
    html`<p><a href="/admin/people">« people</a></p><h1>${person.name}</h1>
<div class="card"><dl class="props">
<dt>phone</dt><dd class="mono">${person.phone}</dd><dt>email</dt><dd>${person.email ?? '—'}</dd>
<dt>department</dt><dd>${person.department ?? '—'}</dd><dt>role</dt><dd>${person.role ?? '—'}</dd>
${Object.entries(person.attributes).map(([key, value]) => html`<dt>${key}</dt><dd>${value}</dd>`)}
</dl></div>`,
  );
}

/** `typed`: what a refused form held, put back in it. */
function documentsPage(ctx: PageContext, query: z.infer<typeof SearchQuery>, { documents, nextCursor }: DocumentPage, typed: { title?: string; tags?: string; body?: string; source?: string } = {}): Html {
  const waiting = documents.some((d) => !d.embedded);
  return page(
    ctx,
    'documents',
    'Documents',
    html`<h1>Documents</h1>
<div class="card"><h2 style="margin-top:0">Add a document</h2>
<form method="post" action="/admin/documents">${csrfField(ctx)}
<div class="filters"><label>Title<input name="title" required maxlength="300" value="${typed.title ?? ''}"></label>
<label>Upload a text file (.txt, .md)<input type="file" accept=".txt,.md,.markdown,.csv,text/*" data-into="body" data-title-into="title" data-name-into="source"></label></div>
<input type="hidden" name="source" value="${typed.source ?? ''}">
<label>Tags (comma-separated; an assistant profile with documentTags uses only documents with one of them; blank keeps a replaced document's tags)<input name="tags" maxlength="1000" placeholder="e.g. hr" value="${typed.tags ?? ''}"></label>
<label>Text (or paste it here)<textarea name="body" rows="8">${typed.body ?? ''}</textarea></label>
<p><button class="primary" type="submit">Save document</button> <span class="muted">Saving a title that exists replaces that document.</span></p></form></div>
<form class="filters" method="get" action="/admin/documents"><label>Search title, source or tag<input name="q" value="${query.q ?? ''}"></label><button>Search</button></form>
<div id="live" data-refresh-ms="${waiting ? 3000 : 0}">
${
  documents.length === 0
    ? html`<div class="card muted">No documents${query.q ? ' match this search' : ' yet'}.</div>`
    : html`<table><thead><tr><th>title</th><th>tags</th><th>source</th><th class="num">characters</th><th class="num">chunks</th><th>embedding</th><th>updated</th></tr></thead><tbody>
${documents.map((d) => html`<tr data-document-id="${d.id}"><td><a href="/admin/documents/${d.id}">${d.title}</a></td><td>${d.tags.join(', ')}</td><td>${d.source ?? ''}</td><td class="num">${d.characters}</td><td class="num">${d.chunks}</td><td>${embeddedBadge(d.embedded)}</td><td>${when(d.updatedAt)}</td></tr>`)}
</tbody></table>`
}
${pager('/admin/documents', { q: query.q }, query.after, nextCursor, { first: '« first', next: 'older »' })}</div>`,
  );
}

function documentPage(ctx: PageContext, doc: DocumentChunks): Html {
  return page(
    ctx,
    'documents',
    doc.title,
    html`<p><a href="/admin/documents">« documents</a></p><h1>${doc.title}</h1>
<p class="muted">${doc.source ?? 'no source'} · ${doc.chunks.length} chunk${doc.chunks.length === 1 ? '' : 's'} · ${embeddedBadge(doc.embedded)} · updated ${when(doc.updatedAt)}</p>
<p>${actionButton(ctx, `/admin/documents/${doc.id}/remove`, 'Remove this document…', { confirm: `Remove "${doc.title}"? Replies stop using it at once; this cannot be undone.` })}</p>
${doc.chunks.map((c) => html`<div class="card chunk" id="chunk-${c.id}"><div class="muted">${chunkLocation(doc.title, c.headingPath)}</div><p class="pre">${c.content}</p></div>`)}`,
  );
}

function importsPage(ctx: PageContext, imports: ImportSummary[]): Html {
  const running = imports.some((i) => i.status === 'pending' || i.status === 'running');
  return page(
    ctx,
    'imports',
    'Imports',
    html`<h1>Import people from CSV</h1>
<div class="card"><form method="post" action="/admin/imports">${csrfField(ctx)}
<p class="muted">A header row is required (a title above it, in the first 10 rows, is skipped). Recognised columns: name (or first name, tussenvoegsel/middle name and last name), phone (required; E.164 or with a country code), email, department, role; other columns are kept as attributes. Rows that do not validate are listed per line; the rest are imported.</p>
<div class="filters"><label>CSV file<input type="file" accept=".csv,text/csv" data-into="content" data-name-into="filename"></label>
<label>File name<input name="filename" value="upload.csv" required></label></div>
<label>Rows (filled from the file, or paste them)<textarea name="content" rows="6"></textarea></label>
<label class="check"><input type="checkbox" name="prune"> This file is the complete list: remove the people who are not in it (leavers). No one is removed when a row is rejected.</label>
<p><button class="primary" type="submit">Import</button></p></form></div>
<div id="live" data-refresh-ms="${running ? 1500 : 0}">
${
  imports.length === 0
    ? html`<div class="card muted">No imports yet.</div>`
    : html`<table><thead><tr><th>file</th><th>status</th><th class="num">rows</th><th class="num">new</th><th class="num">updated</th><th class="num">unchanged</th><th class="num">rejected</th><th>started</th></tr></thead><tbody>
${imports.map((i) => html`<tr><td><a href="/admin/imports/${i.id}">${i.filename}</a></td><td>${badge(i.status)}</td><td class="num">${i.rowsRead}</td><td class="num">${i.inserted}</td><td class="num">${i.updated}</td><td class="num">${i.unchanged}</td><td class="num">${i.rejected}</td><td>${when(i.createdAt)}</td></tr>`)}
</tbody></table>`
}</div>`,
  );
}

function importPage(ctx: PageContext, record: ImportRecord): Html {
  const running = record.status === 'pending' || record.status === 'running';
  return page(
    ctx,
    'imports',
    `Import ${record.filename}`,
    html`<p><a href="/admin/imports">« imports</a></p>
<div id="live" data-refresh-ms="${running ? 1000 : 0}">
<h1>${record.filename} <span data-status="${record.status}">${badge(record.status)}</span></h1>
<div class="tiles">
<div class="tile"><b>${record.rowsRead}</b><span>rows read</span></div><div class="tile"><b>${record.inserted}</b><span>new</span></div>
<div class="tile"><b>${record.updated}</b><span>updated</span></div><div class="tile"><b>${record.unchanged}</b><span>unchanged</span></div>
<div class="tile"><b>${record.rejected}</b><span>rejected</span></div>${record.erasedSkipped ? html`<div class="tile"><b id="erased-skipped">${record.erasedSkipped}</b><span>skipped: erased</span></div>` : ''}${record.prune ? html`<div class="tile"><b id="removed">${record.removed}</b><span>removed (not in the list)</span></div>` : ''}</div>
${record.error ? html`<div class="problem">${record.error}</div>` : ''}
${record.pruneNote ? html`<div class="problem" id="prune-note">${record.pruneNote}</div>` : ''}
${record.headerLine > 1 ? html`<div class="card muted" id="header-note">${aboveHeaderNote(record.headerLine)}</div>` : ''}
<div class="card"><h2 style="margin-top:0">Rows not imported (${record.rejected + record.erasedSkipped})</h2>${
      record.rowErrors.length === 0
        ? html`<p class="muted">None.</p>`
        : html`<table><thead><tr><th class="num">line</th><th>reason</th></tr></thead><tbody>${record.rowErrors.map((e) => html`<tr><td class="num">${e.line}</td><td>${e.reason}</td></tr>`)}</tbody></table>
${record.rowErrors.length < record.rejected ? html`<p class="muted">Showing the first ${record.rowErrors.length}.</p>` : ''}`
    }</div></div>`,
  );
}

export const knowledgePages: FastifyPluginAsync<{ runtime: Runtime }> = async (app, { runtime }) => {
  const { db } = runtime;

  app.get('/admin/people', async (request, reply) => {
    const ctx = pageContext(request);
    const query = SearchQuery.safeParse(request.query);
    let after;
    try {
      after = query.success ? peopleCursorDecode(query.data.after) : undefined;
    } catch {
      after = undefined;
    }
    if (!query.success || (query.data.after && !after)) return sendPage(reply.status(400), page({ ...ctx, problem: 'Bad search or page link.' }, 'people', 'People', html`<p><a href="/admin/people">« people</a></p>`));
    const limit = 100;
    const rows = await personSearch(db, { search: query.data.q || undefined, after, limit: limit + 1 });
    const people = rows.slice(0, limit);
    const next = rows.length > limit ? peopleCursorEncode(people[people.length - 1]!) : null;
    return sendPage(reply, peoplePage(ctx, query.data, people, next));
  });

  app.get('/admin/people/:id', async (request, reply) => {
    const ctx = pageContext(request);
    const params = Id.safeParse(request.params);
    const person = params.success ? await personGet(db, params.data.id) : null;
    if (!person) return sendPage(reply.status(404), page({ ...ctx, problem: 'No such person.' }, 'people', 'Not found', html`<p><a href="/admin/people">« people</a></p>`));
    return sendPage(reply, personPage(ctx, person));
  });

  app.get('/admin/documents', async (request, reply) => {
    const ctx = pageContext(request);
    const query = SearchQuery.safeParse(request.query);
    const bad = () => sendPage(reply.status(400), page({ ...ctx, problem: 'Bad search or page link.' }, 'documents', 'Documents', html`<p><a href="/admin/documents">« documents</a></p>`));
    if (!query.success) return bad();
    try {
      return sendPage(reply, documentsPage(ctx, query.data, await documentList(db, { search: query.data.q || undefined, after: query.data.after })));
    } catch (err) {
      if (err instanceof RangeError) return bad();
      throw err;
    }
  });

  app.get('/admin/documents/:id', async (request, reply) => {
    const ctx = pageContext(request);
    const params = Id.safeParse(request.params);
    const doc = params.success ? await documentWithChunks(db, params.data.id) : null;
    if (!doc) return sendPage(reply.status(404), page({ ...ctx, problem: 'No such document: it may have been replaced or removed.' }, 'documents', 'Not found', html`<p><a href="/admin/documents">« documents</a></p>`));
    return sendPage(reply, documentPage(ctx, doc));
  });

  app.post('/admin/documents', uploadRoute('body'), async (request, reply) => {
    const input = DocumentBody.safeParse(request.body ?? {});
    // Refused: the page again with the problem and the form as it was sent (a redirect
    // emptied a pasted text).
    const refused = async (problem: string | undefined) => {
      const sent = (request.body ?? {}) as Record<string, unknown>;
      const typed = Object.fromEntries(['title', 'tags', 'body', 'source'].map((field) => [field, typeof sent[field] === 'string' ? sent[field] : undefined]));
      // A binary file or a huge one is chosen again, not sent back into the page.
      if (typed.body && (typed.body.includes('\u0000') || typed.body.length > 1_000_000)) typed.body = undefined;
      return sendPage(reply.status(400), documentsPage({ ...pageContext(request), problem }, {}, await documentList(db), typed));
    };
    if (!input.success) return refused(input.error.issues[0]?.message);
    let outcome;
    try {
      outcome = await documentAddConfigured(runtime, input.data);
    } catch (err) {
      if (err instanceof DocumentContentError) return refused(err.message);
      throw err;
    }
    const notice =
      outcome.status !== 'unchanged'
        ? `"${input.data.title}" ${outcome.status} (${outcome.chunks} chunk${outcome.chunks === 1 ? '' : 's'}); embedding it now.`
        : outcome.embedQueued
          ? `"${input.data.title}" is unchanged, but was not embedded: embedding it now.`
          : `"${input.data.title}" is unchanged.`;
    return reply.redirect(`/admin/documents${actionQuery(request, { notice })}`, 303);
  });

  app.post('/admin/documents/:id/remove', async (request, reply) => {
    const params = Id.safeParse(request.params);
    const removed = params.success ? await documentRemove(db, { id: params.data.id }) : null;
    if (!removed) return reply.redirect(`/admin/documents${actionQuery(request, { problem: 'No such document: it was removed already.' })}`, 303);
    return reply.redirect(`/admin/documents${actionQuery(request, { notice: `"${removed.title}" removed: replies no longer use it.` })}`, 303);
  });

  app.get('/admin/imports', async (request, reply) => sendPage(reply, importsPage(pageContext(request), await importList(db))));

  app.post('/admin/imports', uploadRoute('content'), async (request, reply) => {
    const input = ImportBody.safeParse(request.body ?? {});
    if (!input.success) return reply.redirect(`/admin/imports${actionQuery(request, { problem: input.error.issues[0]?.message })}`, 303);
    const { importId } = await importUpload(runtime, input.data);
    return reply.redirect(`/admin/imports/${importId}${actionQuery(request, { notice: 'Import started.' })}`, 303);
  });

  app.get('/admin/imports/:id', async (request, reply) => {
    const ctx = pageContext(request);
    const params = Id.safeParse(request.params);
    const record = params.success ? await importGet(db, params.data.id) : null;
    if (!record) return sendPage(reply.status(404), page({ ...ctx, problem: 'No such import.' }, 'imports', 'Not found', html`<p><a href="/admin/imports">« imports</a></p>`));
    return sendPage(reply, importPage(ctx, record));
  });
};

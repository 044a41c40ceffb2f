// The login form (ADMIN_TOKEN in, signed session cookie out) and log-out. A stateless
// cookie cannot be revoked one by one: changing ADMIN_TOKEN logs every session out.
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { AuthFailureLimiter } from '../auth-failures.ts';
import { setSessionCookie, type AdminAuth } from '../auth.ts';
import { html } from './html.ts';
import { page, type PageContext } from './layout.ts';

const LoginBody = z.object({ token: z.string().max(1000).default(''), next: z.string().max(2000).optional() });

/**
 * Only local dashboard paths, so the login cannot be used to redirect elsewhere, and only
 * in printable ASCII (what a browser sends, encoded): a line break or a character beyond
 * Latin-1 cannot go in the Location header (Node refuses it: a 500). Only one: a query
 * string naming it twice gives a list.
 */
function safeNext(next: unknown): string {
  return typeof next === 'string' && next.startsWith('/admin') && !next.startsWith('//') && !next.includes('\\') && /^[\x21-\x7e]+$/.test(next) ? next : '/admin';
}

function loginPage(next: string, failed: boolean) {
  const ctx: PageContext = { open: false, csrf: '', logTransport: false, problem: failed ? 'That is not the admin token.' : undefined };
  return page(
    ctx,
    'login',
    'Log in',
    html`<div class="card login"><h1>aiq admin</h1>
<form method="post" action="/admin/login">
<input type="hidden" name="next" value="${next}">
<label>Admin token<input type="password" name="token" autocomplete="current-password" autofocus required></label>
<p><button class="primary" type="submit">Log in</button></p>
<p class="muted">The token is the server's <span class="mono">ADMIN_TOKEN</span>. You stay logged in for 7 days on this browser.</p>
</form></div>`,
  );
}

export const loginPages: FastifyPluginAsync<{ auth: AdminAuth; limiter: AuthFailureLimiter }> = async (app, { auth, limiter }) => {
  app.get('/admin/login', async (request, reply) => {
    const next = safeNext((request.query as { next?: unknown }).next);
    if (auth.open) return reply.redirect(next, 303);
    return reply.type('text/html').send(String(loginPage(next, false)));
  });

  app.post('/admin/login', async (request, reply) => {
    const parsed = LoginBody.safeParse(request.body ?? {});
    const next = safeNext(parsed.success ? parsed.data.next : undefined);
    if (await limiter.refuseIfBlocked(request, reply)) return reply;
    if (!parsed.success || !auth.checkToken(parsed.data.token)) {
      await limiter.recordFailure(request);
      request.log.warn({ ip: request.ip }, 'dashboard login refused: wrong token');
      return reply.status(401).type('text/html').send(String(loginPage(next, true)));
    }
    setSessionCookie(request, reply, auth.issueSession().cookie);
    return reply.redirect(next, 303);
  });

  // Behind the access hook like every other POST, so it needs the CSRF token too.
  app.post('/admin/logout', async (request, reply) => {
    setSessionCookie(request, reply, '', 0);
    return reply.redirect('/admin/login', 303);
  });
};

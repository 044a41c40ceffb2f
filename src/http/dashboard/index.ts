// The dashboard at /admin: server-rendered pages (see html.ts for why no template package
// or SPA), one small script, and the access hook in front of all of it. Registers the page
// groups explicitly; each group owns its routes and markup.
import { readFileSync } from 'node:fs';
import formbody from '@fastify/formbody';
import type { FastifyPluginAsync } from 'fastify';
import { allowedHostsOf } from '../../config.ts';
import type { Runtime } from '../../runtime.ts';
import type { AuthFailureLimiter } from '../auth-failures.ts';
import { embeddingsProblem } from '../health.ts';
import type { AdminAuth } from '../auth.ts';
import { actionQuery, dashboardAccess } from './access.ts';
import { UPLOAD_BODY_LIMIT } from '../admin/inputs.ts';
import { conversationPages } from './conversation-pages.ts';
import { auditPages } from './audit-pages.ts';
import { schedulePages } from './schedule-pages.ts';
import { usagePages } from './usage-pages.ts';
import { knowledgePages } from './knowledge-pages.ts';
import { loginPages } from './login-pages.ts';
import { queuePages } from './queue-pages.ts';

const SCRIPT = readFileSync(new URL('./app.js', import.meta.url), 'utf8');

export interface DashboardOptions {
  runtime: Runtime;
  auth: AdminAuth;
  /** Counts failed logins per client address. */
  limiter: AuthFailureLimiter;
  /** True when replies are logged instead of sent: the simulate form is shown. */
  logTransport: boolean;
}

export const dashboard: FastifyPluginAsync<DashboardOptions> = async (app, { runtime, auth, limiter, logTransport }) => {
  // The webhook plugin may already parse forms at the root; a second parser would throw.
  if (!app.hasContentTypeParser('application/x-www-form-urlencoded')) await app.register(formbody);

  const access = dashboardAccess({ auth, logTransport, publicUrl: runtime.config.PUBLIC_URL, allowedHosts: allowedHostsOf(runtime.config), alert: () => embeddingsProblem(runtime) });
  app.addHook('onRequest', access.onRequest);
  app.addHook('preHandler', access.preHandler);
  app.addHook('onSend', async (_request, reply, payload) => {
    // Pages are never framed (clickjacking) and load nothing from elsewhere.
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'");
    reply.header('referrer-policy', 'same-origin');
    return payload;
  });

  // An upload over its limit is refused while its body is read, before the route runs: its
  // form's page says so, as it says any other problem, where the browser showed the JSON an
  // API client gets ({"error":"Request body is too large",…}; a form sends a file of ~16 MB
  // as more than 20 MB). Anything else goes on to the app's handler.
  app.setErrorHandler((error: Error & { code?: string }, request, reply) => {
    const { fileField } = (request.routeOptions?.config ?? {}) as { fileField?: string };
    if (error.code !== 'FST_ERR_CTP_BODY_TOO_LARGE' || !fileField) throw error;
    const limit = Math.round(UPLOAD_BODY_LIMIT / 1024 / 1024);
    const problem =
      fileField === 'content'
        ? `The file is too large for an upload here (${limit} MB as the form sends it): import it with \`aiq import-people <file>\`, which reads a file of any size, or in parts.`
        : `The document is too large for an upload here (${limit} MB as the form sends it; a document holds at most 1,000,000 characters): add it in parts (a chapter each).`;
    return reply.redirect(`${request.url.split('?')[0]}${actionQuery(request, { problem })}`, 303);
  });

  app.get('/admin/assets/app.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(SCRIPT),
  );

  await app.register(loginPages, { auth, limiter });
  await app.register(queuePages, { runtime });
  await app.register(conversationPages, { runtime });
  await app.register(knowledgePages, { runtime });
  await app.register(auditPages, { runtime });
  await app.register(usagePages, { runtime });
  await app.register(schedulePages, { runtime });
};

// The dashboard at /admin: server-rendered pages (see html.ts for why no template package
// or SPA), one small script, and the access hook in front of all of it. Registers the page
// groups explicitly; each group owns its routes and markup.
import { readFileSync } from 'node:fs';
import formbody from '@fastify/formbody';
import type { FastifyPluginAsync } from 'fastify';
import type { Runtime } from '../../runtime.ts';
import type { AuthFailureLimiter } from '../auth-failures.ts';
import { embeddingsProblem } from '../health.ts';
import type { AdminAuth } from '../auth.ts';
import { dashboardAccess } from './access.ts';
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

  const access = dashboardAccess({ auth, logTransport, publicUrl: runtime.config.PUBLIC_URL, alert: () => embeddingsProblem(runtime) });
  app.addHook('onRequest', access.onRequest);
  app.addHook('preHandler', access.preHandler);
  app.addHook('onSend', async (_request, reply, payload) => {
    // Pages are never framed (clickjacking) and load nothing from elsewhere.
    reply.header('x-frame-options', 'DENY');
    reply.header('content-security-policy', "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'");
    reply.header('referrer-policy', 'same-origin');
    return payload;
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

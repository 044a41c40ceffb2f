// The server's front door: `GET /` leads to the dashboard (a newcomer opening the bare URL
// should not meet a JSON 404), and a small icon so browsers stop asking for one in vain.
import type { FastifyPluginAsync } from 'fastify';

/** A speech bubble with a queue in it, in the dashboard's accent colour. */
export const ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><path fill="#3056d3" d="M4 4h24a2 2 0 0 1 2 2v16a2 2 0 0 1-2 2H13l-7 6v-6H4a2 2 0 0 1-2-2V6a2 2 0 0 1 2-2z"/><path fill="#fff" d="M8 10h16v2H8zm0 4h16v2H8zm0 4h10v2H8z"/></svg>`;

export const rootRoutes: FastifyPluginAsync = async (app) => {
  app.get('/', async (_request, reply) => reply.redirect('/admin', 302));
  // SVG under the conventional name: browsers that ask for /favicon.ico take it by its type.
  app.get('/favicon.ico', async (_request, reply) => reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(ICON_SVG));
};

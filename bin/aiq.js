#!/usr/bin/env node
// The `aiq` command. It runs the JavaScript that `npm run build` compiled from src/ into
// dist/ (`npm install` builds it), so no TypeScript compiler runs in the process.
import { existsSync, readdirSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const built = new URL('dist/.built', root);
if (!existsSync(built)) {
  console.error('aiq: not built yet: run `npm install` (or `npm run build`) in the aiq folder first');
  process.exit(1);
}
// A long-running command takes SIGINT/SIGTERM from its first moment, before the command
// line, the configuration and the application load (a few hundred milliseconds on a busy
// machine): a deploy that stops a process it just started gets an orderly exit 0, not a
// process killed half-started by Node's default action. Other commands keep the default,
// so Ctrl-C still ends them at once.
if (['start', 'serve', 'worker'].includes(process.argv[2])) (await import('../dist/shutdown.js')).stopOnSignals();
// In a checkout, warn when src/ changed after the last build: dist/ would run old code.
const src = new URL('src/', root);
if (existsSync(src) && newestMtime(src) > statSync(built).mtimeMs) {
  console.error('aiq: warning: src/ changed since the last build; run `npm run build` to run the change');
}
await import('../dist/cli.js');

function newestMtime(dir) {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(`${entry.parentPath ?? entry.path}/${entry.name}`).mtimeMs);
  }
  return newest;
}

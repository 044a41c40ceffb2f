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

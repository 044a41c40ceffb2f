// House rule: the queue is a library. src/queue/ imports only node:* and the db seam's types.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

test('src/queue imports nothing from the app', () => {
  const dir = new URL('../src/queue/', import.meta.url);
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const [, spec] of source.matchAll(/from '([^']+)'/g)) {
      const allowed = spec!.startsWith('node:') || spec!.startsWith('./') || spec === '../db/types.ts';
      assert.ok(allowed, `src/queue/${file} imports ${spec}`);
    }
  }
});

test('nothing imports src/http', () => {
  const walk = (dir: URL): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(new URL(`${e.name}/`, dir)) : [new URL(e.name, dir).pathname]));
  for (const path of walk(new URL('../src/', import.meta.url)).filter((p) => p.endsWith('.ts') && !p.includes('/src/http/') && !p.endsWith('/src/main.ts'))) {
    assert.doesNotMatch(readFileSync(path, 'utf8'), /from '[./]*\/?http\//, `${path} imports http/`);
  }
});

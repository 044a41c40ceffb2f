// House rule: the queue is a library. src/queue/ imports only node:* and the db seam's types.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';

// The queue may use the database seam's interface and its driver-free SQL helpers, nothing else.
test('src/queue imports nothing from the app', () => {
  const dir = new URL('../src/queue/', import.meta.url);
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const [, spec] of source.matchAll(/from '([^']+)'/g)) {
      const allowed = spec!.startsWith('node:') || spec!.startsWith('./') || spec === '../db/types.ts' || spec === '../db/like.ts' || spec === 'croner';
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

test('the admin API and the dashboard share src/http/admin/, and neither imports the other', () => {
  const http = new URL('../src/http/', import.meta.url);
  const imports = (file: URL) => [...readFileSync(file, 'utf8').matchAll(/from '([^']+)'/g)].map((m) => m[1]!);
  for (const file of readdirSync(http).filter((f) => f.startsWith('admin-api') && f.endsWith('.ts'))) {
    for (const spec of imports(new URL(file, http))) assert.ok(!spec.startsWith('./dashboard/'), `src/http/${file} imports ${spec}`);
  }
  const dashboard = new URL('dashboard/', http);
  for (const file of readdirSync(dashboard).filter((f) => f.endsWith('.ts'))) {
    for (const spec of imports(new URL(file, dashboard))) assert.ok(!spec.includes('admin-api'), `src/http/dashboard/${file} imports ${spec}`);
  }
  const admin = new URL('admin/', http);
  for (const file of readdirSync(admin).filter((f) => f.endsWith('.ts'))) {
    for (const spec of imports(new URL(file, admin))) assert.ok(!spec.includes('dashboard/') && !spec.includes('admin-api'), `src/http/admin/${file} imports ${spec}`);
  }
});

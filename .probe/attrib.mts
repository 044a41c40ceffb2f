import { readFileSync } from 'node:fs';
const p = JSON.parse(readFileSync(process.argv[2]!, 'utf8'));
const byId = new Map<number, any>(); const parent = new Map<number, number>();
for (const n of p.nodes) { byId.set(n.id, n); for (const c of n.children ?? []) parent.set(c, n.id); }
const place = (url: string) => { const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url); if (m) return m[1]; if (url.includes('/dist/')) return url.split('/dist/')[1]; return null; };
const acc = new Map<string, number>();
p.samples.forEach((id: number, i: number) => {
  const n = byId.get(id); const fn = n.callFrame.functionName;
  if (fn === '(idle)' || fn === '(program)' ) return;
  let cur: number | undefined = id; let where: string | null = null;
  while (cur !== undefined) { const c = byId.get(cur).callFrame; where = place(c.url); if (where) break; cur = parent.get(cur); }
  const k = fn === '(garbage collector)' ? 'GC' : (where ?? '(node, no caller: timers/io callbacks)');
  acc.set(k, (acc.get(k) ?? 0) + (p.timeDeltas[i] ?? 0));
});
for (const [k, us] of [...acc].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(String(Math.round(us / 1000)).padStart(6), 'ms', k);

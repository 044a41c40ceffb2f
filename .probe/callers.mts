import { readFileSync } from 'node:fs';
const [file, fn] = process.argv.slice(2);
const p = JSON.parse(readFileSync(file!, 'utf8'));
const byId = new Map<number, any>(); const parent = new Map<number, number>();
for (const n of p.nodes) { byId.set(n.id, n); for (const c of n.children ?? []) parent.set(c, n.id); }
const self = new Map<number, number>();
p.samples.forEach((id: number, i: number) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
const stacks = new Map<string, number>();
for (const [id, us] of self) {
  const n = byId.get(id); if (n.callFrame.functionName !== fn) continue;
  const chain: string[] = []; let cur = parent.get(id);
  while (cur !== undefined && chain.length < 12) { const c = byId.get(cur).callFrame; chain.push(`${c.functionName}@${c.url.split('/').slice(-2).join('/')}:${c.lineNumber}`); cur = parent.get(cur); }
  const k = chain.join(' < '); stacks.set(k, (stacks.get(k) ?? 0) + us);
}
for (const [k, us] of [...stacks].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log((us / 1000).toFixed(0), 'ms', k, '\n');

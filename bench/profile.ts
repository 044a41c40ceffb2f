// Where a process's CPU time goes, from a V8 CPU profile (node --cpu-prof; the pipeline
// benchmark writes one per aiq process with BENCH_CPU_PROF=dir). Prints self time by place
// (our src/ files, each package in node_modules, Node's internals, garbage collection, idle)
// and the functions that cost most.
//   node --import tsx bench/profile.ts <file.cpuprofile> [--top 25]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' } } });
if (positionals.length === 0) {
  console.error('usage: node --import tsx bench/profile.ts <file.cpuprofile>... [--top N]');
  process.exit(2);
}

/** "src/queue/worker.ts", "pg-protocol", "node:internal", "(garbage collector)", "(idle)". */
function placeOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) return functionName.startsWith('(') ? functionName : '(native)';
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1]!;
  const own = /\/((?:src|bench|test)\/.+)$/.exec(url);
  if (own) return own[1]!;
  return url.startsWith('node:') ? 'node:internal' : url;
}

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const byPlace = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const us = profile.timeDeltas[i] ?? 0;
    const frame = byId.get(id)!.callFrame;
    const place = placeOf(frame);
    total += us;
    byPlace.set(place, (byPlace.get(place) ?? 0) + us);
    const fn = `${frame.functionName || '(anonymous)'} ${place}:${frame.lineNumber + 1}`;
    byFunction.set(fn, (byFunction.get(fn) ?? 0) + us);
  });
  const idle = byPlace.get('(idle)') ?? 0;
  const busy = total - idle;
  const top = Number(values.top);
  const line = (name: string, us: number) => `${(us / 1000).toFixed(0).padStart(8)} ms ${((us / busy) * 100).toFixed(1).padStart(5)}%  ${name}`;
  console.log(`${file}\n  sampled ${(total / 1e6).toFixed(1)} s, busy ${(busy / 1e6).toFixed(1)} s (${((busy / total) * 100).toFixed(0)}%); shares below are of busy time\n`);
  console.log('  by place');
  for (const [place, us] of [...byPlace].filter(([p]) => p !== '(idle)').sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${line(place, us)}`);
  console.log('\n  by function (self time)');
  for (const [fn, us] of [...byFunction].filter(([f]) => !f.startsWith('(idle)')).sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`  ${line(fn, us)}`);
  console.log('');
}

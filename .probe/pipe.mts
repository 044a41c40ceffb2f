import { readFileSync } from 'node:fs';
import { pipelineRun } from '../bench/pipeline.ts';
const n = Number(process.argv[2] ?? 1600);
const c = Number(process.argv[3] ?? 200);
const stat = () => readFileSync('/proc/self/stat', 'utf8').split(') ')[1]!.split(' ').map(Number);
const before = stat(); const self0 = process.cpuUsage();
const f = await pipelineRun({ messages: n, llmMs: 2000, workerConcurrency: c, senders: 20 });
const after = stat(); const self = process.cpuUsage(self0);
// fields after ') ': index 11 utime, 12 stime, 13 cutime, 14 cstime (clock ticks)
console.log(JSON.stringify(f));
console.log(`bench process cpu ${Math.round((self.user + self.system) / 1000)} ms; aiq children cpu ${((after[13]! + after[14]!) - (before[13]! + before[14]!)) * 10} ms`);

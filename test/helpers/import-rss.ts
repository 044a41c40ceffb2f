// Runs one CSV import of people in a process of its own and prints its peak RSS as JSON,
// so a test can measure the import's memory without the test runner's (and PGlite's).
// Usage: node --import tsx test/helpers/import-rss.ts <database-url> <file.csv>
import { openPostgres } from '../../src/db/postgres.ts';
import { importPeopleEnqueue, importPeopleExecute } from '../../src/jobs/import-people.ts';

const [url, path] = process.argv.slice(2);
const db = openPostgres({ connectionString: url! });
const rssAtStart = process.memoryUsage().rss;
const started = performance.now();
const { importId } = await db.transaction((tx) => importPeopleEnqueue(tx, { filename: 'big.csv', path: path! }));
// Sampled while the import runs: the process's peak RSS (maxRSS) would also count loading
// the modules, which with a cold transpile cache (a fresh clone) is most of it.
let peakHeapBytes = 0;
let peakRssBytes = rssAtStart;
const counts = await importPeopleExecute(db, importId, {
  onProgress: () => {
    const usage = process.memoryUsage();
    peakHeapBytes = Math.max(peakHeapBytes, usage.heapUsed);
    peakRssBytes = Math.max(peakRssBytes, usage.rss);
  },
});
const seconds = (performance.now() - started) / 1000;
await db.close();
console.log(JSON.stringify({ counts, seconds, rssAtStartBytes: rssAtStart, maxRssBytes: process.resourceUsage().maxRSS * 1024, peakRssBytes, peakHeapBytes }));

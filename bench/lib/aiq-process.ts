// What every benchmark that starts aiq's own processes (`aiq serve`, `aiq worker`) gives
// them: the same production settings and, with BENCH_CPU_PROF=dir, a V8 CPU profile each
// (read with bench/profile.ts).

/** The environment of an aiq process on `url` listening at 127.0.0.1:`port`; `extra` adds to it. */
export function aiqProcessEnv(url: string, port: number, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: url,
    HOST: '127.0.0.1',
    PORT: String(port),
    PUBLIC_URL: `http://127.0.0.1:${port}`,
    ADMIN_TOKEN: 'bench-admin-token-0123456789',
    ...extra,
  };
}

/** Node's flags for a CPU profile named after `name` when BENCH_CPU_PROF is set, else none. */
export function cpuProfileArgs(name?: string): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  if (!dir) return [];
  return ['--cpu-prof', `--cpu-prof-dir=${dir}`, ...(name ? [`--cpu-prof-name=${name}-${Date.now()}.cpuprofile`] : [])];
}

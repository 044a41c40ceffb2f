// The request to stop (SIGINT, SIGTERM) as an AbortSignal, taken as early as a long-running
// command starts: a signal during start-up lets start-up finish and the process then shuts
// down in order (exit 0) instead of dying half-started. Kept free of imports so it is
// installed before the application loads.
const controller = new AbortController();
let installed = false;

export function stopOnSignals(): AbortSignal {
  if (!installed) {
    installed = true;
    const onSignal = (signal: string) => controller.abort(signal);
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
  }
  return controller.signal;
}

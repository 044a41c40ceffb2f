// What the benchmark needs from each queue it drives: install its schema, enqueue (bulk and
// one at a time) and run a worker with given settings. Each system is driven only through
// its own public API.

/** The payload every benchmark job carries. */
export interface BenchPayload {
  /** Enqueue time on the monotonic clock (pickup latency). */
  t?: number;
  /** A warm-up job of the pickup run: its latency is the cold one, reported apart. */
  warm?: boolean;
  /** How long the handler sleeps (head-of-line); absent means a no-op. */
  ms?: number;
  /** Position in the batch, so payloads differ as real ones do. */
  i?: number;
}

export type Handler = (payload: BenchPayload) => Promise<void>;

export interface Producer {
  enqueueMany(payloads: BenchPayload[]): Promise<void>;
  enqueueOne(payload: BenchPayload): Promise<void>;
  close(): Promise<void>;
}

/** A worker whose connections are open but that has not started taking jobs yet. */
export interface PreparedWorker {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** Settings of one configuration, as shown in the report. */
export interface Variant {
  label: string;
  settings: Record<string, unknown>;
}

export interface BenchSystem {
  name: string;
  /** Named configurations: `defaults` (concurrency 10), `best`, and `hol` (concurrency 50). */
  variants: Record<string, Variant>;
  /** Installs the system's schema in a fresh database (not timed). */
  setup(url: string): Promise<void>;
  openProducer(url: string): Promise<Producer>;
  prepareWorker(url: string, variant: string, handler: Handler): Promise<PreparedWorker>;
  /** Counts jobs still queued or running, polled until 0; index-friendly, so polling a big table costs the timing little. */
  unfinishedSql: string;
  /** Counts jobs that ended other than completed (checked once, after the timing). */
  notCompletedSql: string;
}

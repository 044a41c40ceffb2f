// Small statistics for the benchmark: percentiles of one run, and median/min/max across
// rounds. Pure functions, no I/O.

/** The q-th percentile (0..100) by nearest rank; NaN for an empty list. */
export function percentile(values: number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export interface Summary {
  median: number;
  min: number;
  max: number;
  values: number[];
}

export function summarise(values: number[]): Summary {
  return {
    median: percentile(values, 50),
    min: values.length ? Math.min(...values) : NaN,
    max: values.length ? Math.max(...values) : NaN,
    values,
  };
}

/** Median of an even-length list is the mean of the middle two (used for ratios). */
export function median(values: number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}


/** Milliseconds on the monotonic system clock: comparable across processes on one machine. */
export function nowMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

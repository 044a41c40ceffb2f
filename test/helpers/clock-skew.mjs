// A process clock that is off: loaded with `node --import`, it moves Date.now() and
// `new Date()` by CLOCK_SKEW_MS (positive: ahead of the database's clock), as a host whose
// NTP drifted would. Timers and performance.now() keep running true, as they do there.
const skewMs = Number(process.env.CLOCK_SKEW_MS ?? 0);
const TrueDate = Date;
const trueNow = TrueDate.now;

globalThis.Date = class SkewedDate extends TrueDate {
  constructor(...args) {
    if (args.length === 0) super(trueNow() + skewMs);
    else super(...args);
  }

  static now() {
    return trueNow() + skewMs;
  }
};

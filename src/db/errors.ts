// Errors of the database layer that callers tell apart, in a module that loads no driver.

/** The embedded database's folder is held by another running process. */
export class DataDirLockedError extends Error {
  override name = 'DataDirLockedError';
  constructor(
    message: string,
    /** The folder whose lock is held. */
    readonly dir: string,
  ) {
    super(message);
  }
}

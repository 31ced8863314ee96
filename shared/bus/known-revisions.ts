/** A key's value as this process last wrote it, and the revision the bucket gave that write. */
export interface KnownValue<T> {
  revision: number;
  state: T;
}

/** How many keys are remembered by default: far more than a supervisor changes by compare-and-set. */
const DEFAULT_MAX_KEYS = 4_096;
/** Weight of the newest outcome in the running share of known revisions that were still current. */
const WEIGHT = 1 / 16;

/**
 * What this process last wrote to the keys it changes by compare-and-set, so that its next change
 * of a key can be decided on that value and written against its revision straight away, instead
 * of reading the key back first: one round trip per change instead of two when this process is
 * the key's only writer (one supervisor: every change of the pool ledger). A value someone else
 * has changed since only costs a refused write and the read.
 *
 * With several writers (supervisor replicas admitting runs in turn) a known revision is often
 * stale, and a refused write plus the read costs more than the read alone: the values are used
 * only while they have been current at least half the time. Whether they would have been is also
 * counted on each read made without them, so the values come back into use once this process is
 * the keys' only writer again.
 */
export class KnownRevisions<T> {
  private readonly values = new Map<string, KnownValue<T>>();
  /** The running share of known revisions found current (starts trusting: one writer is the norm). */
  private current = 1;

  constructor(private readonly maxKeys = DEFAULT_MAX_KEYS) {}

  /** The value to decide on without reading, when there is one and known values are in use. */
  usable(key: string): KnownValue<T> | undefined {
    return this.current >= 0.5 ? this.values.get(key) : undefined;
  }

  /** Counts whether the value known for `key` had `revision`, the key's latest, found by a read. */
  compare(key: string, revision: number): void {
    const known = this.values.get(key);
    if (known) this.observe(known.revision === revision);
  }

  /** A write against the known value went through (true) or was refused as stale (false). */
  observe(wasCurrent: boolean): void {
    this.current += ((wasCurrent ? 1 : 0) - this.current) * WEIGHT;
  }

  remember(key: string, revision: number, state: T): void {
    // Re-inserted last: the map's first key is the one written longest ago, dropped past the bound.
    this.values.delete(key);
    this.values.set(key, { revision, state });
    if (this.values.size > this.maxKeys) {
      const oldest = this.values.keys().next();
      if (!oldest.done) this.values.delete(oldest.value);
    }
  }

  forget(key: string): void {
    this.values.delete(key);
  }
}

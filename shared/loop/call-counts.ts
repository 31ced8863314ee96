/**
 * How many times the repeated-call guard has seen each (tool, input) hash, in two forms.
 *
 * A checkpoint stores every count, in buckets keyed by the hash's first two hex digits: the shape
 * every version since buckets came in reads, so a worker of the version before can take a run over
 * from a newer one's checkpoint. A running loop never builds that map: objects keyed by random
 * hashes send V8 through a new hidden class for every key, and keeping the map current, a copy of
 * the bucket index and of a bucket per call, cost over 100 µs a step once the window was full.
 * It counts the calls in its window by reading them (at most CALL_WINDOW hashes, well under a
 * microsecond) and keeps in the map only what a checkpoint carried from before its window: calls
 * an older version counted but no longer listed (it kept five), which never leave. For a run
 * started by this version that is nothing.
 */
export type CallCounts = Record<string, Record<string, number>>;

/** A checkpoint's counts as an older version may have written them: one flat map, or buckets. */
export type StoredCallCounts = Record<string, number | Record<string, number>>;

function bucketOf(hash: string): string {
  return hash.slice(0, 2);
}

function occurrences(calls: readonly string[], hash: string): number {
  let n = 0;
  for (const call of calls) if (call === hash) n += 1;
  return n;
}

/** How many times a call with this hash has been checked: the carried count and the window's. */
export function countOf(carried: CallCounts, calls: readonly string[], hash: string): number {
  return (carried[bucketOf(hash)]?.[hash] ?? 0) + occurrences(calls, hash);
}

/** Every count, as a checkpoint stores it. */
export function storedCounts(carried: CallCounts, calls: readonly string[]): CallCounts {
  const counts = new Map(flatten(carried));
  for (const hash of calls) counts.set(hash, (counts.get(hash) ?? 0) + 1);
  return bucketed(counts);
}

/** What of a checkpoint's counts came from before its window: the counts less the window's calls. */
export function carriedCounts(stored: StoredCallCounts, calls: readonly string[]): CallCounts {
  const counts = new Map(flatten(stored));
  for (const hash of calls) {
    const n = (counts.get(hash) ?? 0) - 1;
    if (n > 0) counts.set(hash, n);
    else counts.delete(hash);
  }
  return bucketed(counts);
}

function* flatten(counts: StoredCallCounts): Generator<[string, number]> {
  for (const [key, value] of Object.entries(counts)) {
    if (typeof value === "number") yield [key, value];
    else yield* Object.entries(value);
  }
}

function bucketed(counts: Map<string, number>): CallCounts {
  const buckets: CallCounts = {};
  for (const [hash, n] of counts) (buckets[bucketOf(hash)] ??= {})[hash] = n;
  return buckets;
}

import type { JetStreamClient } from "@nats-io/jetstream";
import { readLatest } from "./read-range.js";
import { bucketStream, kvSubject } from "./subjects.js";

/** A KV bucket's live key and the value it holds now. */
export interface BucketEntry {
  key: string;
  data: Uint8Array;
}

/**
 * Every live key of a KV bucket with its latest value (deleted and purged keys left out), in one
 * streamed read: a page of entries per request, not a get per key. Not `kv.keys()`: that listing
 * ends only when a message reports nothing pending, and a key rewritten while it lists (an open
 * breaker tried again, a run's status) can make it wait out a 30 s heartbeat.
 */
export async function* readBucket(reads: JetStreamClient, bucket: string): AsyncGenerator<BucketEntry> {
  const prefix = kvSubject(bucket, "");
  for await (const msg of readLatest(reads, bucketStream(bucket), `${prefix}>`)) {
    if (msg.headers?.get("KV-Operation")) continue;
    yield { key: msg.subject.slice(prefix.length), data: msg.data };
  }
}

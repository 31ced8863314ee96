import type { JetStreamManager } from "@nats-io/jetstream";
import { readHeld } from "./read-range.js";
import { bucketStream, kvSubject } from "./subjects.js";

/** A KV bucket's live key and the value it holds now. */
export interface BucketEntry {
  key: string;
  data: Uint8Array;
}

/**
 * Every live key of a KV bucket (history 1) with its latest value, deleted and purged keys left
 * out, a page of entries per request rather than a get per key. A key rewritten during the read
 * comes once, at whichever revision came first.
 */
export async function* readBucket(jsm: JetStreamManager, bucket: string): AsyncGenerator<BucketEntry> {
  const prefix = kvSubject(bucket, "");
  const seen = new Set<string>();
  for await (const msg of readHeld(jsm, bucketStream(bucket), `${prefix}>`)) {
    if (seen.has(msg.subject)) continue;
    seen.add(msg.subject);
    if (msg.headers?.get("KV-Operation")) continue;
    yield { key: msg.subject.slice(prefix.length), data: msg.data };
  }
}

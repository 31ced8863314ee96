import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { MemoryEntry, MemoryStore } from "../memory/memory.js";
import { memoryId, relevance } from "../memory/memory.js";
import type { Clock } from "../runtime/clock.js";
import { sha256 } from "../runtime/hash.js";
import { decode, encode } from "./codec.js";
import { readHeld } from "./read-range.js";
import { RecentWindow } from "./recent-window.js";
import { isWrongLastSequence } from "./run-log.js";
import { bucketStream, kvSubject, type Subjects } from "./subjects.js";

/**
 * Where recalls read the bucket from: its stream's manager and the bucket's name; and how many of a
 * namespace's most recently stored memories a recall reads (`window`; 0 or absent: all of them).
 */
export interface MemoryReads {
  jsm: JetStreamManager;
  bucket: string;
  window?: number;
}

export function memoryReads(
  bus: { jsm: JetStreamManager; subjects: Subjects },
  window?: number,
): MemoryReads {
  return { jsm: bus.jsm, bucket: bus.subjects.buckets().memory, ...(window ? { window } : {}) };
}

const StoredMemory = z.object({
  id: z.string(),
  namespace: z.string(),
  text: z.string(),
  createdAt: z.number(),
});

/** KV keys allow a narrow alphabet: the namespace is hashed, its name kept in the value. */
export function prefixOf(namespace: string): string {
  return `ns_${sha256(namespace).slice(0, 24)}`;
}

/** A memory's key in the bucket: its namespace's prefix, then its id. */
function keyOf(namespace: string, id: string): string {
  return `${prefixOf(namespace)}.${id}`;
}

/**
 * Agent memory on the `agents-memory` bucket, shared by every worker and the memory tool: a
 * run that remembers something on one worker recalls it on any other.
 */
export class KvMemory implements MemoryStore {
  /** With a window: where each namespace's last read began, so the next starts there. */
  private readonly recent: RecentWindow | undefined;

  constructor(
    private readonly kv: KV,
    private readonly clock: Clock,
    private readonly reads: MemoryReads,
  ) {
    const { jsm, bucket, window } = reads;
    this.recent = window ? new RecentWindow(jsm, bucketStream(bucket), window) : undefined;
  }

  /**
   * The same text again is the same key, and the entry already there is kept: rewriting it would
   * replace its message in the bucket, and a recall streaming the namespace at that moment waits
   * out the stream's idle heartbeat (30 s) for a message that is gone. A put that expects the key
   * to have no message is one round trip for a new memory and two for a known one (the KV client's
   * create reads the key itself after its put is refused: a third).
   */
  async remember(namespace: string, text: string): Promise<MemoryEntry> {
    const entry: MemoryEntry = { id: memoryId(text), text, createdAt: this.clock.now() };
    const key = keyOf(namespace, entry.id);
    const value = encode(StoredMemory, { ...entry, namespace });
    try {
      await this.kv.put(key, value, { previousSeq: 0 });
      return entry;
    } catch (err) {
      if (!isWrongLastSequence(err)) throw err;
    }
    const held = await this.kv.get(key);
    if (held?.operation === "PUT") {
      const { id, createdAt } = decode(StoredMemory, held.value);
      return { id, text, createdAt };
    }
    // Forgotten (its latest message a delete marker), or gone since: the bucket's own create
    // writes over a delete marker.
    await this.kv.create(key, value);
    return entry;
  }

  /**
   * The `limit` entries most relevant to `query` among the namespace's memories: every one of
   * them, each key at its latest revision in one read (a deleted key's latest is its delete
   * marker; an empty namespace costs one request), or with a window only the `window` stored last,
   * which a recall reads without reading the ones before (see RecentWindow): an agent's thousandth
   * run and its millionth start as fast.
   */
  async recall(namespace: string, query: string, limit: number): Promise<MemoryEntry[]> {
    const { jsm, bucket } = this.reads;
    const filter = kvSubject(bucket, `${prefixOf(namespace)}.*`);
    const messages = this.recent
      ? await this.recent.read(filter)
      : readHeld(jsm, bucketStream(bucket), filter);
    // A key rewritten during the read can come twice: its latest message wins.
    const entries = new Map<string, MemoryEntry>();
    for await (const msg of messages) {
      if (msg.headers?.get("KV-Operation")) {
        entries.delete(msg.subject);
        continue;
      }
      const { id, text, createdAt } = decode(StoredMemory, msg.data);
      entries.set(msg.subject, { id, text, createdAt });
    }
    return [...entries.values()]
      .map((entry) => ({ entry, score: relevance(query, entry.text) }))
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score || b.entry.createdAt - a.entry.createdAt)
      .slice(0, Math.max(0, limit))
      .map((s) => s.entry);
  }

  /**
   * A delete marker written at `storedAt` or later (the server's clock, against the one that
   * dated `storedAt`) is a forget since: the text stays forgotten. A memory there is left as it is
   * (one read); only a missing one, or one forgotten before, is written (see `remember`).
   */
  async restore(namespace: string, text: string, storedAt: number): Promise<boolean> {
    const held = await this.kv.get(keyOf(namespace, memoryId(text)));
    if (held?.operation === "PUT") return true;
    if (held && held.created.getTime() >= storedAt) return false;
    await this.remember(namespace, text);
    return true;
  }

  async forget(namespace: string, id: string): Promise<boolean> {
    const key = keyOf(namespace, id);
    const got = await this.kv.get(key);
    if (!got || got.operation !== "PUT") return false;
    await this.kv.delete(key);
    return true;
  }
}

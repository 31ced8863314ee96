import type { KV } from "@nats-io/kv";
import { z } from "zod";
import type { MemoryEntry, MemoryStore } from "../memory/memory.js";
import { memoryId, relevance } from "../memory/memory.js";
import type { Clock } from "../runtime/clock.js";
import { sha256 } from "../runtime/hash.js";
import { decode, encode } from "./codec.js";

const StoredMemory = z.object({
  id: z.string(),
  namespace: z.string(),
  text: z.string(),
  createdAt: z.number(),
});

/** KV keys allow a narrow alphabet: the namespace is hashed, its name kept in the value. */
function prefixOf(namespace: string): string {
  return `ns_${sha256(namespace).slice(0, 24)}`;
}

/**
 * Agent memory on the `agents-memory` bucket, shared by every worker and the memory tool: a
 * run that remembers something on one worker recalls it on any other.
 */
export class KvMemory implements MemoryStore {
  constructor(
    private readonly kv: KV,
    private readonly clock: Clock,
  ) {}

  /**
   * The same text again is the same key, and the entry already there is kept: rewriting it would
   * replace its message in the bucket, and a recall streaming the namespace at that moment waits
   * out the stream's idle heartbeat (30 s) for a message that is gone.
   */
  async remember(namespace: string, text: string): Promise<MemoryEntry> {
    const entry: MemoryEntry = { id: memoryId(text), text, createdAt: this.clock.now() };
    const key = `${prefixOf(namespace)}.${entry.id}`;
    try {
      await this.kv.create(key, encode(StoredMemory, { ...entry, namespace }));
      return entry;
    } catch (err) {
      const held = await this.kv.get(key);
      if (!held || held.operation !== "PUT") throw err;
      const { id, createdAt } = decode(StoredMemory, held.value);
      return { id, text, createdAt };
    }
  }

  async recall(namespace: string, query: string, limit: number): Promise<MemoryEntry[]> {
    // One streamed read of the namespace, in revision order (later revisions and deletes win),
    // rather than a listing of its keys and a round trip per key.
    const latest = new Map<string, MemoryEntry>();
    for await (const got of await this.kv.history({ key: `${prefixOf(namespace)}.*` })) {
      if (got.operation !== "PUT") {
        latest.delete(got.key);
        continue;
      }
      const { id, text, createdAt } = decode(StoredMemory, got.value);
      latest.set(got.key, { id, text, createdAt });
    }
    return [...latest.values()]
      .map((entry) => ({ entry, score: relevance(query, entry.text) }))
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score || b.entry.createdAt - a.entry.createdAt)
      .slice(0, Math.max(0, limit))
      .map((s) => s.entry);
  }

  async forget(namespace: string, id: string): Promise<boolean> {
    const key = `${prefixOf(namespace)}.${id}`;
    const got = await this.kv.get(key);
    if (!got || got.operation !== "PUT") return false;
    await this.kv.delete(key);
    return true;
  }
}

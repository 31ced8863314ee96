import type { Clock } from "../runtime/clock.js";
import { memoryId, relevance, type MemoryEntry, type MemoryStore } from "./memory.js";

/** Process-local memory: for tests, demos and embedding. */
export class InMemoryMemory implements MemoryStore {
  private readonly spaces = new Map<string, MemoryEntry[]>();
  /** When each forgotten entry was forgotten, by namespace and id. */
  private readonly forgotten = new Map<string, number>();

  constructor(private readonly clock: Clock) {}

  remember(namespace: string, text: string): Promise<MemoryEntry> {
    const id = memoryId(text);
    const entries = this.spaces.get(namespace) ?? [];
    const held = entries.find((e) => e.id === id);
    if (held) return Promise.resolve(held);
    const entry: MemoryEntry = { id, text, createdAt: this.clock.now() };
    this.spaces.set(namespace, [...entries, entry]);
    return Promise.resolve(entry);
  }

  recall(namespace: string, query: string, limit: number): Promise<MemoryEntry[]> {
    const scored = (this.spaces.get(namespace) ?? [])
      .map((entry) => ({ entry, score: relevance(query, entry.text) }))
      .filter((s) => s.score > 0)
      .sort((a, b) => b.score - a.score || b.entry.createdAt - a.entry.createdAt);
    return Promise.resolve(scored.slice(0, Math.max(0, limit)).map((s) => s.entry));
  }

  forget(namespace: string, id: string): Promise<boolean> {
    const entries = this.spaces.get(namespace) ?? [];
    const kept = entries.filter((e) => e.id !== id);
    this.spaces.set(namespace, kept);
    const gone = kept.length !== entries.length;
    if (gone) this.forgotten.set(`${namespace}\n${id}`, this.clock.now());
    return Promise.resolve(gone);
  }

  async restore(namespace: string, text: string, storedAt: number): Promise<boolean> {
    const id = memoryId(text);
    // One there (remembered again since) is kept, as the cluster's store keeps it.
    const present = (this.spaces.get(namespace) ?? []).some((e) => e.id === id);
    const at = this.forgotten.get(`${namespace}\n${id}`);
    if (!present && at !== undefined && at >= storedAt) return false;
    await this.remember(namespace, text);
    return true;
  }
}

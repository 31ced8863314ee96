import { sha256 } from "../runtime/hash.js";

/** Agent memory, per namespace (one per agent name). The cluster adds a JetStream KV implementation. */
export interface MemoryEntry {
  id: string;
  text: string;
  createdAt: number;
}

export interface MemoryStore {
  remember(namespace: string, text: string): Promise<MemoryEntry>;
  /**
   * Up to `limit` entries relevant to `query`, most relevant first; a store may look only among
   * the namespace's most recently stored entries (the cluster's: MEMORY_RECALL_WINDOW).
   */
  recall(namespace: string, query: string, limit: number): Promise<MemoryEntry[]>;
  forget(namespace: string, id: string): Promise<boolean>;
  /**
   * Stores `text` again, as `remember` does, unless it was forgotten at `storedAt` or later:
   * what a write retried after a crash does, where the first attempt may have stored it at
   * `storedAt` and a human forgotten it since. Resolves with false when it was not stored.
   */
  restore(namespace: string, text: string, storedAt: number): Promise<boolean>;
}

/**
 * A memory's id is its content's: remembering the same text again finds the entry already there
 * instead of adding a copy. A task run a thousand times leaves one Q/A pair, and a recall, which
 * reads every memory of its namespace, reads it once.
 */
export function memoryId(text: string): string {
  return `mem_${sha256(text).slice(0, 32)}`;
}

export function tokens(text: string): Set<string> {
  return new Set(
    text
      .toLowerCase()
      .split(/[^\p{L}\p{N}]+/u)
      .filter((t) => t.length > 2),
  );
}

/** Share of the query's words the entry contains, in [0, 1]. */
export function relevance(query: string, text: string): number {
  const wanted = tokens(query);
  if (wanted.size === 0) return 0;
  const have = tokens(text);
  let hits = 0;
  for (const word of wanted) if (have.has(word)) hits++;
  return hits / wanted.size;
}

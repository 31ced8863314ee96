import { z } from "zod";
import type { MemoryStore } from "../../memory/memory.js";
import { defineTool } from "../tool.js";

export const MemoryInput = z.discriminatedUnion("action", [
  z.object({ action: z.literal("remember"), namespace: z.string().min(1).max(256), text: z.string().min(1) }),
  z.object({
    action: z.literal("recall"),
    namespace: z.string().min(1).max(256),
    query: z.string(),
    limit: z.number().int().min(1).max(50).default(5),
  }),
]);
export type MemoryInput = z.infer<typeof MemoryInput>;

/** Recall and remember on the agent memory substrate (`agents-memory` in the cluster). */
export function createMemoryTool(store: MemoryStore) {
  return defineTool({
    name: "memory",
    description:
      "Agent memory. action=remember stores text in a namespace; action=recall returns the entries most relevant to a query.",
    input: MemoryInput,
    capability: { kind: "memory" },
    reversibility: "reversible",
    // A memory's id is its text's hash: remembering the same text again finds the same entry.
    idempotent: true,
    execute: async (input): Promise<{ output: Record<string, unknown> }> => {
      if (input.action === "remember") {
        const entry = await store.remember(input.namespace, input.text);
        return { output: { id: entry.id } };
      }
      const entries = await store.recall(input.namespace, input.query, input.limit);
      return { output: { memories: entries.map((e) => ({ id: e.id, text: e.text })) } };
    },
  });
}

import type { KV } from "@nats-io/kv";
import { ToolDescriptor } from "../contracts/tool.js";
import { decode, encode } from "./codec.js";

/**
 * The tools' descriptors as their services last gave them, shared by the agent workers in the
 * `<prefix>-tool-descriptors` bucket (keyed by tool name): a worker that never described a tool
 * itself (one started while the tool's service hung) can still replay and drive a started run
 * that needs it (see ToolCatalog).
 */
export interface SharedDescriptors {
  get(name: string): Promise<ToolDescriptor | undefined>;
  put(name: string, descriptor: ToolDescriptor): Promise<void>;
}

export function sharedDescriptors(kv: KV): SharedDescriptors {
  return {
    async get(name) {
      const entry = await kv.get(name);
      return entry?.operation === "PUT" ? decode(ToolDescriptor, entry.value) : undefined;
    },
    async put(name, descriptor) {
      await kv.put(name, encode(ToolDescriptor, descriptor));
    },
  };
}

import type { MemoryStore } from "../../memory/memory.js";
import { AgentError } from "../../runtime/errors.js";
import type { AnyTool } from "../tool.js";
import { echoTool } from "./echo.js";
import { httpFetchTool } from "./http-fetch.js";
import { createMemoryTool } from "./memory.js";
import { fanOutSpawnTool } from "./spawn.js";

/** What a built-in tool may need of the process that runs it. */
export interface BuiltInDeps {
  memory: MemoryStore;
}

/** The built-in tools a process can build by name (see builtInTool). */
export const BUILT_IN_TOOLS = ["echo", "http_fetch", "memory", "spawn_agent"] as const;

const noMemory = (): Promise<never> =>
  Promise.reject(new AgentError("INTERNAL", "this memory tool was built to be described, not run"));

/** The store of a memory tool built without one: only its descriptor is wanted (a replay, a check). */
const NO_MEMORY: MemoryStore = { remember: noMemory, recall: noMemory, forget: noMemory, restore: noMemory };

/**
 * A built-in tool by name, as a worker runs it in-process (AGENT_LOCAL_TOOLS) or a replay describes
 * it; undefined for any other name. Without `deps` it is built to be described or checked only.
 * spawn_agent is the workers' fan-out's, never run as a tool (see fanOutSpawnTool).
 */
export function builtInTool(name: string, deps?: BuiltInDeps): AnyTool | undefined {
  switch (name) {
    case "echo":
      return echoTool;
    case "http_fetch":
      return httpFetchTool;
    case "memory":
      return createMemoryTool(deps?.memory ?? NO_MEMORY);
    case "spawn_agent":
      return fanOutSpawnTool();
    default:
      return undefined;
  }
}

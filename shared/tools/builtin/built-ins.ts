import type { MemoryStore } from "../../memory/memory.js";
import { AgentError } from "../../runtime/errors.js";
import type { AnyTool } from "../tool.js";
import { echoTool } from "./echo.js";
import { uuidIds } from "../../runtime/ids.js";
import { createFileListTool } from "./file-list.js";
import { createFileReadTool } from "./file-read.js";
import { createFileWriteTool } from "./file-write.js";
import { httpFetchTool } from "./http-fetch.js";
import { createMemoryTool } from "./memory.js";
import { createShellTool, DEFAULT_COMMAND_TIMEOUT_MS, type ShellConfig } from "./shell.js";
import { fanOutSpawnTool } from "./spawn.js";

/** What a built-in tool may need of the process that runs it. */
export interface BuiltInDeps {
  memory: MemoryStore;
  /** How the shell tool runs commands; without it, it is built to be described only. */
  shell?: ShellConfig;
  /** This process's credential files, which the file tools refuse (see secretFilesOf); absent: none. */
  secretFiles?: readonly string[];
}

/** The built-in tools a process can build by name (see builtInTool). */
export const BUILT_IN_TOOLS = [
  "echo",
  "file_list",
  "file_read",
  "file_write",
  "http_fetch",
  "memory",
  "shell",
  "spawn_agent",
] as const;

/** A shell tool with no working directory: described, or refused when run (PATH_NOT_ALLOWED). */
const UNCONFIGURED_SHELL: ShellConfig = { roots: [], maxTimeoutMs: DEFAULT_COMMAND_TIMEOUT_MS };

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
  const files = { secretFiles: deps?.secretFiles ?? [] };
  switch (name) {
    case "echo":
      return echoTool;
    case "file_list":
      return createFileListTool(files);
    case "file_read":
      return createFileReadTool(files);
    case "file_write":
      return createFileWriteTool({ ...files, ids: uuidIds });
    case "shell":
      return createShellTool(deps?.shell ?? UNCONFIGURED_SHELL);
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

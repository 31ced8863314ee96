import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import { SPAWN_AGENT_TOOL } from "../../shared/loop/saga.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { BUILT_IN_TOOLS, builtInTool, type BuiltInDeps } from "../../shared/tools/builtin/built-ins.js";
import type { ToolRegistry } from "../../shared/tools/registry.js";
import type { AnyTool } from "../../shared/tools/tool.js";

/**
 * Why a worker may not run the named tool in-process (AGENT_LOCAL_TOOLS); undefined when it may.
 * Only idempotent built-ins: a worker that takes a run over and finds a call's INTENT without its
 * COMPLETE calls it again, where a tool service would answer the repeat from its record.
 */
export function localToolProblem(name: string): string | undefined {
  const tool = builtInTool(name);
  if (!tool) {
    const runnable = BUILT_IN_TOOLS.filter((n) => builtInTool(n)?.idempotent);
    return `'${name}' is no built-in tool a worker can run (${runnable.join(", ")})`;
  }
  if (!tool.idempotent)
    return `'${name}' is not idempotent: a worker taking its run over would call it again (a tool service answers a repeated call from its record); leave it out`;
  return undefined;
}

/**
 * The built-in tools a worker runs in-process, by name (AGENT_LOCAL_TOOLS, checked as the
 * environment is read): INVALID_INPUT for one it may not run (see localToolProblem).
 */
export function localTools(names: readonly string[], deps: BuiltInDeps): ReadonlyMap<string, AnyTool> {
  const tools = new Map<string, AnyTool>();
  for (const name of names) {
    const problem = localToolProblem(name);
    const tool = builtInTool(name, deps);
    if (problem || !tool) throw new AgentError("INVALID_INPUT", `AGENT_LOCAL_TOOLS: ${problem ?? name}`);
    tools.set(name, tool);
  }
  return tools;
}

export interface RunToolSources {
  /** The tools this worker runs in-process (see localTools). */
  local: ReadonlyMap<string, AnyTool>;
  /** The descriptors of the named remote tools that are served (see ToolCatalog.lookup). */
  describe: (names: readonly string[]) => Promise<ToolDescriptor[]>;
  /** A proxy calling a remote tool's service (see remoteTool). */
  remote: (descriptor: ToolDescriptor) => AnyTool;
  /** spawn_agent as the worker performs it: its fan-out parks the run instead of waiting on a service. */
  spawn: AnyTool;
}

/**
 * Registers the tools a run names, in the order named whichever runs where (a run's tools are the
 * same whichever worker drives it): the in-process ones as they are, never described over NATS,
 * the others as proxies of their services, and spawn_agent, the worker's own, last. A name the
 * registry has already (a lease asking twice) is left as it is.
 */
export async function registerRunTools(
  registry: ToolRegistry,
  names: readonly string[],
  sources: RunToolSources,
): Promise<void> {
  const remote = names.filter((name) => name !== SPAWN_AGENT_TOOL && !sources.local.has(name));
  const described = new Map((await sources.describe(remote)).map((d) => [d.name, d]));
  for (const name of names) {
    if (name === SPAWN_AGENT_TOOL || registry.get(name)) continue;
    const local = sources.local.get(name);
    const descriptor = described.get(name);
    if (local) registry.register(local);
    else if (descriptor) registry.register(sources.remote(descriptor));
  }
  if (names.includes(SPAWN_AGENT_TOOL) && !registry.get(SPAWN_AGENT_TOOL)) registry.register(sources.spawn);
}
